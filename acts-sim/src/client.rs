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

/// Whether grammar 2's client does something extra (`salt` says what) at
/// the first act with `key`, with probability `p`: never for a pushed or a
/// catch's act, never in grammar 1 (frozen).
fn first_act_roll(seed: u64, spec: &Spec, key: &str, occurrence: usize, salt: u64, p: f64) -> bool {
    if !spec.grammar.v2() || occurrence != 1 || key.ends_with("_p") || key.ends_with("_r") {
        return false;
    }
    let mut rng = StdRng::seed_from_u64(mix(seed ^ salt, key, occurrence));
    rng.random_bool(p)
}

/// How long grammar 3's client takes before it answers the
/// `occurrence`-th act with `key` (0 to 40 minutes; none before grammar
/// 3).
pub fn answer_delay(seed: u64, spec: &Spec, key: &str, occurrence: usize) -> std::time::Duration {
    if !spec.grammar.v3() {
        return std::time::Duration::ZERO;
    }
    let mut rng = StdRng::seed_from_u64(mix(seed ^ 0x6465_6c61, key, occurrence));
    std::time::Duration::from_secs(60 * rng.random_range(0..=40))
}

/// Whether the client pushes a new act (key `<key>_p`) under the step of
/// the first act with `key` before answering it (one act in ten).
pub fn pushes(seed: u64, spec: &Spec, key: &str, occurrence: usize) -> bool {
    first_act_roll(seed, spec, key, occurrence, 0x7075_7368, 0.1)
}

/// Whether an operator pauses the process when the first act with `key`
/// waits (and resumes it in the next round, before anything else; one act
/// in ten). The pause's reason names the act, so a restarted run sees
/// that it was done.
pub fn pauses(seed: u64, spec: &Spec, key: &str, occurrence: usize) -> bool {
    // Grammar 4's operator pauses (through a bulk job) more often.
    let p = if spec.grammar.v4() { 0.3 } else { 0.1 };
    first_act_roll(seed, spec, key, occurrence, 0x0070_6175_7365, p)
}

/// Whether the clock moves on by two hours while the process is paused
/// at `act` (`sim:KEY#OCCURRENCE`; before the resume; one pause in two):
/// timeouts that fall due in a pause must fire at the resume, as in every
/// run.
pub fn clock_moves_in_pause(seed: u64, act: &str) -> bool {
    StdRng::seed_from_u64(mix(seed ^ 0x636c_6f63, act, 1)).random_bool(0.5)
}

/// Whether the client writes process variables through the first act with
/// `key` before answering it (one act in ten).
pub fn sets_vars(seed: u64, spec: &Spec, key: &str, occurrence: usize) -> bool {
    first_act_roll(seed, spec, key, occurrence, 0x7365_7476, 0.1)
}

/// Whether the client withdraws (cancels) the latest completed act when
/// the first act with `key` waits (one act in twenty; at most once per
/// process, which the caller checks).
pub fn cancels(seed: u64, spec: &Spec, key: &str, occurrence: usize) -> bool {
    first_act_roll(seed, spec, key, occurrence, 0x6361_6e63, 0.05)
}

/// Whether an operator terminates the process when the first act with
/// `key` waits (one act in fifty).
pub fn terminates(seed: u64, spec: &Spec, key: &str, occurrence: usize) -> bool {
    first_act_roll(seed, spec, key, occurrence, 0x7465_726d, 0.02)
}

/// Whether an admin deploys a new version of the model and migrates the
/// process to it when the first act with `key` waits (one act in twenty;
/// at most once per process, which the caller checks).
pub fn migrates(seed: u64, spec: &Spec, key: &str, occurrence: usize) -> bool {
    first_act_roll(seed, spec, key, occurrence, 0x6d69_6772, 0.05)
}

/// Whether an operator retries the process once it ended in an error
/// (grammar 2 only; one seed in two; at most once per process, which the
/// caller checks).
pub fn retries(seed: u64, spec: &Spec) -> bool {
    spec.grammar.v2() && StdRng::seed_from_u64(mix(seed ^ 0x7265_7472, "$", 1)).random_bool(0.5)
}

/// Whether an operator rewinds the process to an earlier top-level step
/// (returned) when the first act with `key` waits: grammar 2 only, one act
/// in twenty that has earlier steps, at most once per process (the caller
/// checks the process's history).
pub fn rewinds(seed: u64, spec: &Spec, key: &str, occurrence: usize) -> Option<String> {
    let earlier = spec.earlier_top_steps(key);
    if earlier.is_empty() || !first_act_roll(seed, spec, key, occurrence, 0x0072_6577_6e64, 0.05) {
        return None;
    }
    let mut rng = StdRng::seed_from_u64(mix(seed ^ 0x0072_6577_6e64 ^ 1, key, occurrence));
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
        let spec = crate::generate::generate(3);
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
