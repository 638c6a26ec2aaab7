//! The simulated client: how it answers a waiting act, decided from the
//! seed, the act's key and how many acts of that key the process has had —
//! never from timing — so the same process state gets the same answer
//! before and after any crash.

use acts_core::model::Vars;
use acts_core::scheduler::Action;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::json;

use crate::workflow::Spec;

/// What the client does with a waiting act.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Apply this action with these options.
    Act(Action, Vars),
    /// Leave it (its step timeout will act).
    Wait,
}

/// A stable 64-bit mix of the seed, a key and an occurrence (FNV-1a over
/// the key, then splitmix64), so answers do not depend on the standard
/// library's hasher.
fn mix(seed: u64, key: &str, occurrence: usize) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = seed ^ h ^ (occurrence as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Whether the client pushes a new act (key `<key>_p`) under the step of
/// the first act with `key` before answering it: grammar 2 only, one act
/// in ten, never for a pushed or a catch's act.
pub fn pushes(seed: u64, spec: &Spec, key: &str, occurrence: usize) -> bool {
    if spec.grammar != crate::workflow::Grammar::V2
        || occurrence != 1
        || key.ends_with("_p")
        || key.ends_with("_r")
    {
        return false;
    }
    let mut rng = StdRng::seed_from_u64(mix(seed ^ 0x7075_7368, key, occurrence));
    rng.random_bool(0.1)
}

/// Whether an operator pauses the process when the first act with `key`
/// waits (and resumes it in the next round, before anything else):
/// grammar 2 only, one act in ten, never for a pushed or a catch's act.
/// The pause's reason names the act, so a restarted run sees that it was
/// done.
pub fn pauses(seed: u64, spec: &Spec, key: &str, occurrence: usize) -> bool {
    if spec.grammar != crate::workflow::Grammar::V2
        || occurrence != 1
        || key.ends_with("_p")
        || key.ends_with("_r")
    {
        return false;
    }
    let mut rng = StdRng::seed_from_u64(mix(seed ^ 0x0070_6175_7365, key, occurrence));
    rng.random_bool(0.1)
}

/// Whether an operator rewinds the process to an earlier top-level step
/// (returned) when the first act with `key` waits: grammar 2 only, one act
/// in twenty that has earlier steps, at most once per process (the caller
/// checks the process's history).
pub fn rewinds(seed: u64, spec: &Spec, key: &str, occurrence: usize) -> Option<String> {
    if spec.grammar != crate::workflow::Grammar::V2
        || occurrence != 1
        || key.ends_with("_p")
        || key.ends_with("_r")
    {
        return None;
    }
    let earlier = spec.earlier_top_steps(key);
    let mut rng = StdRng::seed_from_u64(mix(seed ^ 0x0072_6577_6e64, key, occurrence));
    if earlier.is_empty() || !rng.random_bool(0.05) {
        return None;
    }
    Some(earlier[rng.random_range(0..earlier.len())].clone())
}

/// The answer to the `occurrence`-th act with `key` (1 for the first) of a
/// process of `spec`; `waited`: the client already let its timeout act
/// (and the act still waits), so it answers now.
pub fn answer(seed: u64, spec: &Spec, key: &str, occurrence: usize, waited: bool) -> Answer {
    let mut rng = StdRng::seed_from_u64(mix(seed, key, occurrence));
    let vars = |v: serde_json::Value| v.as_object().cloned().unwrap_or_default();
    let wait = occurrence == 1 && spec.has_timeout(key) && rng.random_bool(0.4);
    if wait && !waited {
        return Answer::Wait;
    }
    let catches = spec.catching().iter().any(|c| c == key);
    let earlier = if occurrence == 1 {
        spec.earlier_top_steps(key)
    } else {
        Vec::new()
    };
    let roll = rng.random_range(0..100);
    let (action, options) = match roll {
        0..55 => (
            Action::Complete,
            vars(json!({ format!("a_{key}"): occurrence })),
        ),
        55..65 => (
            Action::Submit,
            vars(json!({ format!("s_{key}"): occurrence })),
        ),
        65..75 => (Action::Skip, Vars::new()),
        75..88 if catches || roll < 78 => (
            Action::Error,
            vars(json!({"ecode": "E1", "message": format!("failed at {key}")})),
        ),
        88..97 if !earlier.is_empty() => {
            let to = &earlier[rng.random_range(0..earlier.len())];
            (Action::Back, vars(json!({ "to": to })))
        }
        97..98 => (Action::Abort, Vars::new()),
        // Grammar 1's client is frozen with it (see `Grammar`).
        98..100 if spec.grammar == crate::workflow::Grammar::V1 => (Action::Abort, Vars::new()),
        98..99 => (Action::Remove, Vars::new()),
        _ => (
            Action::Complete,
            vars(json!({ format!("a_{key}"): occurrence })),
        ),
    };
    Answer::Act(action, options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_question_gets_the_same_answer() {
        let spec = crate::workflow::generate(3);
        for key in ["s1", "s2", "x"] {
            for occ in 1..4 {
                assert_eq!(
                    answer(9, &spec, key, occ, false),
                    answer(9, &spec, key, occ, false)
                );
            }
        }
        let all: Vec<Answer> = (0..200).map(|s| answer(s, &spec, "s1", 2, false)).collect();
        assert!(
            all.iter()
                .any(|a| matches!(a, Answer::Act(Action::Skip, _)))
        );
        assert!(
            all.iter()
                .any(|a| matches!(a, Answer::Act(Action::Complete, _)))
        );
    }
}
