//! [`Grammar`]: what a seed's workflow may hold, by number, and grammar
//! 5's gates on the model's steps and acts.

use serde_json::{Value, json};

/// The grammars a seed can be drawn with. A grammar never changes once
/// released (a seed that found a bug must keep drawing the same workflow):
/// new step kinds come as a new grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Grammar {
    /// Set, code, interrupts (timeouts, catches), parallel, branches,
    /// subflows.
    #[default]
    V1,
    /// V1 plus sequences, `while` loops and a backward `next`.
    V2,
    /// V2 plus blocks of interrupts (`acts.core.block`, in sequence or
    /// parallel mode) and branches with `needs`; its client answers at
    /// random virtual times (the clock moves up to 40 minutes before an
    /// answer).
    V3,
    /// V3 plus concurrency keys (the model's own, and one the subflow
    /// children share with limit 1: children that run at once queue for
    /// it) and a bulk client (the operator pauses and terminates through
    /// bulk jobs over the model's processes, waited for).
    V4,
    /// V4 (drawn alike: a seed draws the same steps) plus gates on steps
    /// and acts: the acts of each parallel, sequence and block share a
    /// concurrency key of limit 1 (they queue for it in turn), every
    /// interrupt step one key of limit 1 (parallel branches' interrupts
    /// wait for each other), and every code step a rate (one a second,
    /// bursts of two: the virtual clock moves for its tokens).
    V5,
}

impl Grammar {
    /// Its number on the command line.
    pub fn number(self) -> u8 {
        match self {
            Grammar::V1 => 1,
            Grammar::V2 => 2,
            Grammar::V3 => 3,
            Grammar::V4 => 4,
            Grammar::V5 => 5,
        }
    }

    /// The grammar numbered `n` (1 to 5).
    pub fn from_number(n: u8) -> Option<Self> {
        match n {
            1 => Some(Grammar::V1),
            2 => Some(Grammar::V2),
            3 => Some(Grammar::V3),
            4 => Some(Grammar::V4),
            5 => Some(Grammar::V5),
            _ => None,
        }
    }

    /// Whether it has everything grammar 2 has (2 and later).
    pub fn v2(self) -> bool {
        self != Grammar::V1
    }

    /// Whether it has everything grammar 3 has (3 and later).
    pub fn v3(self) -> bool {
        matches!(self, Grammar::V3 | Grammar::V4 | Grammar::V5)
    }

    /// Whether it has concurrency keys and the bulk client (4 and later).
    pub fn v4(self) -> bool {
        matches!(self, Grammar::V4 | Grammar::V5)
    }

    /// Whether its steps and acts have gates (5).
    pub fn v5(self) -> bool {
        self == Grammar::V5
    }
}

/// Grammar 5's gates (see [`Grammar::V5`]), put on the steps of `steps`
/// (a JSON list) and the steps below them.
pub(crate) fn gate_steps(steps: &mut Value) {
    let Some(list) = steps.as_array_mut() else {
        return;
    };
    for step in list {
        let id = step["id"].as_str().unwrap_or_default().to_owned();
        match step["uses"].as_str() {
            Some("acts.core.irq") => {
                step["concurrency"] = json!({ "key": "desks", "limit": 1 });
            }
            Some("acts.transform.code") => {
                step["rate"] = json!({ "key": "pace", "per_second": 1, "burst": 2 });
            }
            Some("acts.core.parallel" | "acts.core.sequence" | "acts.core.block") => {
                if let Some(acts) = step
                    .get_mut("params")
                    .and_then(|p| p.get_mut("acts"))
                    .and_then(Value::as_array_mut)
                {
                    for act in acts {
                        act["concurrency"] = json!({ "key": format!("acts-{id}"), "limit": 1 });
                    }
                }
            }
            _ => {}
        }
        for key in ["catches", "timeouts"] {
            if let Some(nested) = step.get_mut(key) {
                gate_steps(nested);
            }
        }
        if let Some(branches) = step.get_mut("branches").and_then(Value::as_array_mut) {
            for b in branches {
                if let Some(nested) = b.get_mut("steps") {
                    gate_steps(nested);
                }
            }
        }
    }
}
