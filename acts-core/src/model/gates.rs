//! What a `concurrency:` or `rate:` on a step or act may say
//! ([`gate_problem`]); the validator checks the model's steps with it at
//! deploy, the scheduler an act made at run time (an `acts:` list, a
//! client's `push`) before it waits on one.

use super::validate::{MAX_CONCURRENCY_KEY, MAX_CONCURRENCY_LIMIT};
use super::{Concurrency, Rate};

/// The highest `rate.per_second`.
pub const MAX_RATE_PER_SECOND: f64 = 1_000_000.0;

/// The highest `rate.burst`.
pub const MAX_RATE_BURST: u32 = 1_000_000;

/// What is wrong with a node's `concurrency:` and `rate:` (`None`: both
/// are fine, or absent).
pub fn gate_problem(concurrency: Option<&Concurrency>, rate: Option<&Rate>) -> Option<String> {
    if let Some(c) = concurrency {
        if let Some(p) = key_problem("concurrency", &c.key) {
            return Some(p);
        }
        if c.limit == 0 || c.limit > MAX_CONCURRENCY_LIMIT {
            return Some(format!(
                "`concurrency.limit` is {}; give 1 to {MAX_CONCURRENCY_LIMIT} (how many may run at once)",
                c.limit
            ));
        }
    }
    if let Some(r) = rate {
        if let Some(p) = key_problem("rate", &r.key) {
            return Some(p);
        }
        if !(r.per_second > 0.0 && r.per_second <= MAX_RATE_PER_SECOND) {
            return Some(format!(
                "`rate.per_second` is {}; give more than 0 and at most {MAX_RATE_PER_SECOND} (0.5 is one every two seconds)",
                r.per_second
            ));
        }
        if r.burst == 0 || r.burst > MAX_RATE_BURST {
            return Some(format!(
                "`rate.burst` is {}; give 1 to {MAX_RATE_BURST} (how many may run at once after a quiet spell)",
                r.burst
            ));
        }
    }
    None
}

/// Whether any step of `workflow`, or any act of a literal `acts:` list
/// in it, has a `concurrency:` or `rate:`.
pub fn has_node_gates(workflow: &super::Workflow) -> bool {
    fn acts_have(params: &serde_json::Value) -> bool {
        params
            .get("acts")
            .and_then(serde_json::Value::as_array)
            .is_some_and(|acts| {
                acts.iter().any(|a| {
                    a.get("concurrency").is_some()
                        || a.get("rate").is_some()
                        || acts_have(a.get("params").unwrap_or(&serde_json::Value::Null))
                })
            })
    }
    fn steps_have(steps: &[super::Step]) -> bool {
        steps.iter().any(|s| {
            s.concurrency.is_some()
                || s.rate.is_some()
                || acts_have(&s.params)
                || steps_have(&s.catches)
                || steps_have(&s.timeouts)
                || s.branches.iter().any(|b| steps_have(&b.steps))
        })
    }
    steps_have(&workflow.steps)
}

fn key_problem(what: &str, key: &str) -> Option<String> {
    if key.trim().is_empty() {
        return Some(format!(
            "`{what}` has an empty `key`: give the text tasks are grouped by, e.g. `key: payments-${{{{ tenant }}}}`"
        ));
    }
    (key.len() > MAX_CONCURRENCY_KEY).then(|| {
        format!(
            "`{what}.key` is {} bytes; at most {MAX_CONCURRENCY_KEY}",
            key.len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(per_second: f64, burst: u32) -> Rate {
        Rate {
            key: "k".into(),
            per_second,
            burst,
        }
    }

    #[test]
    fn bad_gates_are_named() {
        let c = |key: &str, limit| Concurrency {
            key: key.into(),
            limit,
        };
        assert_eq!(gate_problem(None, None), None);
        assert_eq!(gate_problem(Some(&c("a", 2)), Some(&rate(0.5, 1))), None);
        assert!(
            gate_problem(Some(&c(" ", 1)), None)
                .unwrap()
                .contains("empty `key`")
        );
        assert!(
            gate_problem(Some(&c("a", 0)), None)
                .unwrap()
                .contains("limit")
        );
        let long = "x".repeat(MAX_CONCURRENCY_KEY + 1);
        assert!(
            gate_problem(Some(&c(&long, 1)), None)
                .unwrap()
                .contains("bytes")
        );
        assert!(
            gate_problem(None, Some(&rate(0.0, 1)))
                .unwrap()
                .contains("per_second")
        );
        assert!(
            gate_problem(None, Some(&rate(f64::NAN, 1)))
                .unwrap()
                .contains("per_second")
        );
        assert!(
            gate_problem(None, Some(&rate(1.0, 0)))
                .unwrap()
                .contains("burst")
        );
    }
}
