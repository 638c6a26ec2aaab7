//! What a `concurrency:` or `rate:` on a step or act may say
//! ([`gate_problem`]); the validator checks the model's steps with it at
//! deploy, the scheduler an act made at run time (an `acts:` list, a
//! client's `push`) before it waits on one.

use serde::{Deserialize, Serialize};

/// A workflow's `concurrency:` (see [`Workflow::concurrency`](super::Workflow::concurrency)). The key is
/// evaluated once, from the start options and the workflow's `vars`, when
/// a process starts; keys are shared by every model that names the same
/// key (put the model's name into the key to keep models apart).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Concurrency {
    /// The key: text with `${{ expression }}` parts (one whole expression
    /// keeps its value's text: a number's digits, a string as is).
    pub key: String,
    /// How many processes of one key may be in flight at once (1 and up).
    #[serde(default = "one")]
    pub limit: u32,
}

fn one() -> u32 {
    1
}

/// A step's or act's `rate:` (`rate: { key: payments, per_second: 50,
/// burst: 10 }`): a token bucket per evaluated key, shared by every act of
/// the key across processes; an act past the budget waits (state
/// `pending`) until a token comes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    /// The key: text with `${{ expression }}` parts, evaluated when the
    /// act is about to run.
    pub key: String,
    /// Tokens added per second (above 0; fractions allowed: 0.5 is one
    /// every two seconds).
    pub per_second: f64,
    /// Most tokens the bucket holds (how many acts may run at once after a
    /// quiet spell; 1 and up, default 1).
    #[serde(default = "one")]
    pub burst: u32,
}

/// The highest `rate.per_second`.
pub const MAX_RATE_PER_SECOND: f64 = 1_000_000.0;

/// The highest `rate.burst`.
pub const MAX_RATE_BURST: u32 = 1_000_000;

/// The longest `concurrency.key` a model may write (and a key may
/// evaluate to), in bytes.
pub const MAX_CONCURRENCY_KEY: usize = 256;

/// The highest `concurrency.limit`.
pub const MAX_CONCURRENCY_LIMIT: u32 = 1_000_000;

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
