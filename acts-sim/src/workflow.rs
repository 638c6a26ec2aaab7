//! Random workflows: a small tree of step specs drawn from a seed, the
//! model (JSON, which the YAML loader reads) it stands for, and the smaller
//! trees a failing one shrinks to.

use serde_json::{Value, json};

pub use crate::grammar::Grammar;
use crate::grammar::gate_steps;

/// The child model a subflow step starts: doubles `n`.
pub const CHILD: &str = r#"{"id": "child", "ver": "1", "steps": [{"id": "c1", "uses": "acts.transform.code", "params": "return { doubled: n * 2 }"}], "exposes": [{"name": "doubled"}]}"#;

/// Grammar 4's child: [`CHILD`] with one concurrency key for every child,
/// limit 1 (children that run at once wait for it in turn).
pub const KEYED_CHILD: &str = r#"{"id": "child", "ver": "1", "concurrency": {"key": "children", "limit": 1}, "steps": [{"id": "c1", "uses": "acts.transform.code", "params": "return { doubled: n * 2 }"}], "exposes": [{"name": "doubled"}]}"#;

impl Spec {
    /// The child model its subflows start.
    pub fn child_model(&self) -> &'static str {
        if self.grammar.v4() {
            KEYED_CHILD
        } else {
            CHILD
        }
    }
}

/// What a timeout does to the step that waited too long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnTimeout {
    /// `acts.core.action: abort`.
    Abort,
    /// `acts.core.action: skip`.
    Skip,
    /// `acts.core.action: next`.
    Next,
}

impl OnTimeout {
    fn name(self) -> &'static str {
        match self {
            OnTimeout::Abort => "abort",
            OnTimeout::Skip => "skip",
            OnTimeout::Next => "next",
        }
    }
}

/// One step of a generated workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `acts.transform.set` of one var.
    Set {
        /// Node id.
        id: String,
        /// The value set (under `v_<id>`).
        value: i64,
    },
    /// `acts.transform.code` computing `c_<id> = n + add`.
    Code {
        /// Node id.
        id: String,
        /// What is added to `n`.
        add: i64,
    },
    /// An interrupt (key = its id), with an optional timeout and catch.
    Irq {
        /// Node id and key.
        id: String,
        /// A step timeout after an hour, and what it does.
        timeout: Option<OnTimeout>,
        /// A catch of error `E1` that asks again (key `<id>_r`).
        catches: bool,
    },
    /// `acts.core.parallel` of interrupts (key = its id) over `items`.
    Parallel {
        /// Node id and the acts' key.
        id: String,
        /// How many items.
        items: usize,
    },
    /// An if (`n > threshold`) / else pair of branches.
    Branches {
        /// Node id.
        id: String,
        /// The if's threshold.
        threshold: i64,
        /// The if branch's steps.
        then: Vec<Step>,
        /// The else branch's steps.
        otherwise: Vec<Step>,
    },
    /// A subflow of [`CHILD`] with `n = 3`.
    Subflow {
        /// Node id.
        id: String,
    },
    /// `acts.core.sequence` of interrupts (key = its id) over `items`,
    /// one after the other.
    Sequence {
        /// Node id and the acts' key.
        id: String,
        /// How many items.
        items: usize,
    },
    /// A `while` loop: a code step that counts `l_<id>` up to `times`.
    Loop {
        /// Node id.
        id: String,
        /// How many rounds.
        times: usize,
    },
    /// A backward `next` to the first top-level step, taken once (guarded
    /// by an `if` on its own counter `j_<id>`).
    Jump {
        /// Node id.
        id: String,
    },
    /// `acts.core.block` of `items` interrupts (key = its id), one after
    /// the other or all at once.
    Block {
        /// Node id and the acts' key.
        id: String,
        /// How many acts.
        items: usize,
        /// Parallel mode (else sequence).
        parallel: bool,
    },
    /// Two branches: `first` (always runs) and `after`, which `needs`
    /// `first`.
    Needs {
        /// Node id.
        id: String,
        /// The first branch's steps.
        first: Vec<Step>,
        /// The steps of the branch that waits for the first.
        after: Vec<Step>,
    },
}

/// A generated workflow: its start value of `n` and its steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The workflow's `n`.
    pub n: i64,
    /// Its steps.
    pub steps: Vec<Step>,
    /// The grammar it was drawn with (the client's answers follow it too).
    pub grammar: Grammar,
}

impl Spec {
    /// The model, as JSON text (what `deploy_yaml` reads).
    pub fn model(&self) -> String {
        self.model_as_version("1")
    }

    /// The model's text with `ver` set to `ver` (a new version of the same
    /// workflow, for a migration).
    pub fn model_as_version(&self, ver: &str) -> String {
        let first = self.steps.first().map(|s| s.id().to_owned());
        let steps: Vec<Value> = self
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut v = s.to_json();
                // A jump goes back to the first step; as the first step it
                // has nowhere to go back to.
                if let (Step::Jump { .. }, Some(to), true) = (s, &first, i > 0) {
                    v["next"] = json!(to);
                }
                v
            })
            .collect();
        let mut model = json!({
            "id": "main",
            "ver": ver,
            "vars": [{"name": "n", "value": self.n}],
            "steps": steps,
        });
        if self.grammar.v4() {
            // Its own key (one process: always free, but its slot is
            // counted, held and freed through every crash).
            model["concurrency"] = json!({ "key": "main-${{ n }}", "limit": 1 });
            model["priority"] = json!(4);
        }
        if self.grammar.v5() {
            gate_steps(&mut model["steps"]);
        }
        model.to_string()
    }

    /// Whether a subflow step is in it (then [`CHILD`] is deployed too).
    pub fn uses_subflow(&self) -> bool {
        fn any(steps: &[Step]) -> bool {
            steps
                .iter()
                .any(|s| matches!(s, Step::Subflow { .. }) || s.children().into_iter().any(any))
        }
        any(&self.steps)
    }

    /// The interrupt steps that catch `E1` (a client may fail them on
    /// purpose).
    pub fn catching(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.walk(&mut |s| {
            if let Step::Irq {
                id, catches: true, ..
            } = s
            {
                out.push(id.clone());
            }
        });
        out
    }

    /// Whether the interrupt with `key` has a step timeout.
    pub fn has_timeout(&self, key: &str) -> bool {
        let mut found = false;
        self.walk(&mut |s| {
            if let Step::Irq {
                id,
                timeout: Some(_),
                ..
            } = s
                && id == key
            {
                found = true;
            }
        });
        found
    }

    /// The top-level steps before the one that holds the act with `key`
    /// (what a `back` from it may go to; none for a catch's act).
    pub fn earlier_top_steps(&self, key: &str) -> Vec<String> {
        fn holds(s: &Step, key: &str) -> bool {
            s.id() == key
                || s.children()
                    .into_iter()
                    .any(|c| c.iter().any(|x| holds(x, key)))
        }
        match self.steps.iter().position(|s| holds(s, key)) {
            Some(i) => self.steps[..i].iter().map(|s| s.id().to_owned()).collect(),
            None => Vec::new(),
        }
    }

    fn walk(&self, f: &mut impl FnMut(&Step)) {
        fn go(steps: &[Step], f: &mut impl FnMut(&Step)) {
            for s in steps {
                f(s);
                for c in s.children() {
                    go(c, f);
                }
            }
        }
        go(&self.steps, f);
    }

    /// How many steps, nested ones too.
    pub fn size(&self) -> usize {
        let mut n = 0;
        self.walk(&mut |_| n += 1);
        n
    }

    /// Every spec one step smaller: each step removed in turn (a branch
    /// keeps at least one step), and each branches step replaced by one of
    /// its branches' steps.
    pub fn shrinks(&self) -> Vec<Spec> {
        fn smaller(steps: &[Step]) -> Vec<Vec<Step>> {
            let mut out = Vec::new();
            for i in 0..steps.len() {
                if steps.len() > 1 {
                    let mut v = steps.to_vec();
                    v.remove(i);
                    out.push(v);
                }
                if let Step::Branches {
                    id,
                    threshold,
                    then,
                    otherwise,
                } = &steps[i]
                {
                    for inner in [then, otherwise] {
                        let mut v = steps.to_vec();
                        v.splice(i..=i, inner.iter().cloned());
                        out.push(v);
                    }
                    for t in smaller(then) {
                        let mut v = steps.to_vec();
                        v[i] = Step::Branches {
                            id: id.clone(),
                            threshold: *threshold,
                            then: t,
                            otherwise: otherwise.clone(),
                        };
                        out.push(v);
                    }
                    for o in smaller(otherwise) {
                        let mut v = steps.to_vec();
                        v[i] = Step::Branches {
                            id: id.clone(),
                            threshold: *threshold,
                            then: then.clone(),
                            otherwise: o,
                        };
                        out.push(v);
                    }
                }
                if let Step::Needs { id, first, after } = &steps[i] {
                    for inner in [first, after] {
                        let mut v = steps.to_vec();
                        v.splice(i..=i, inner.iter().cloned());
                        out.push(v);
                    }
                    for f in smaller(first) {
                        let mut v = steps.to_vec();
                        v[i] = Step::Needs {
                            id: id.clone(),
                            first: f,
                            after: after.clone(),
                        };
                        out.push(v);
                    }
                    for a in smaller(after) {
                        let mut v = steps.to_vec();
                        v[i] = Step::Needs {
                            id: id.clone(),
                            first: first.clone(),
                            after: a,
                        };
                        out.push(v);
                    }
                }
            }
            out
        }
        smaller(&self.steps)
            .into_iter()
            .map(|steps| Spec {
                n: self.n,
                steps,
                grammar: self.grammar,
            })
            .collect()
    }
}

impl Step {
    /// The steps nested in it (a branches step's branches).
    fn children(&self) -> Vec<&[Step]> {
        match self {
            Step::Branches {
                then, otherwise, ..
            } => vec![then, otherwise],
            Step::Needs { first, after, .. } => vec![first, after],
            _ => Vec::new(),
        }
    }

    /// Its node id.
    pub fn id(&self) -> &str {
        match self {
            Step::Set { id, .. }
            | Step::Code { id, .. }
            | Step::Irq { id, .. }
            | Step::Parallel { id, .. }
            | Step::Branches { id, .. }
            | Step::Sequence { id, .. }
            | Step::Loop { id, .. }
            | Step::Jump { id }
            | Step::Block { id, .. }
            | Step::Needs { id, .. }
            | Step::Subflow { id } => id,
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Step::Set { id, value } => json!({
                "id": id, "uses": "acts.transform.set", "params": { format!("v_{id}"): value },
            }),
            Step::Code { id, add } => json!({
                "id": id, "uses": "acts.transform.code",
                "params": format!("return {{ c_{id}: n + {add} }}"),
            }),
            Step::Irq {
                id,
                timeout,
                catches,
            } => {
                let mut s = json!({"id": id, "uses": "acts.core.irq", "params": {"key": id}});
                if let Some(t) = timeout {
                    s["timeouts"] = json!([{
                        "id": format!("{id}_t"), "if": "$cost_in('1h')",
                        "uses": "acts.core.action", "params": {"action": t.name()},
                    }]);
                }
                if *catches {
                    s["catches"] = json!([{
                        "id": format!("{id}_c"), "if": "$ecode() == 'E1'",
                        "uses": "acts.core.irq", "params": {"key": format!("{id}_r")},
                    }]);
                }
                s
            }
            Step::Parallel { id, items } => json!({
                "id": id, "uses": "acts.core.parallel",
                "params": {
                    "in": (0..*items).map(|i| format!("item{i}")).collect::<Vec<_>>(),
                    "acts": [{"uses": "acts.core.irq", "params": {"key": id}}],
                },
            }),
            Step::Branches {
                id,
                threshold,
                then,
                otherwise,
            } => json!({
                "id": id,
                "branches": [
                    {"id": format!("{id}_if"), "if": format!("n > {threshold}"),
                     "steps": then.iter().map(Step::to_json).collect::<Vec<_>>()},
                    {"id": format!("{id}_else"), "else": true,
                     "steps": otherwise.iter().map(Step::to_json).collect::<Vec<_>>()},
                ],
            }),
            Step::Subflow { id } => json!({
                "id": id, "uses": "acts.core.subflow",
                "params": {"to": "child", "options": {"n": 3}},
            }),
            Step::Sequence { id, items } => json!({
                "id": id, "uses": "acts.core.sequence",
                "params": {
                    "in": (0..*items).map(|i| format!("item{i}")).collect::<Vec<_>>(),
                    "acts": [{"uses": "acts.core.irq", "params": {"key": id}}],
                },
            }),
            Step::Loop { id, times } => json!({
                "id": id,
                "while": format!("($get('l_{id}') || 0) < {times}"),
                "uses": "acts.transform.code",
                "params": format!("return {{ l_{id}: ($get('l_{id}') || 0) + 1 }}"),
            }),
            Step::Block {
                id,
                items,
                parallel,
            } => json!({
                "id": id, "uses": "acts.core.block",
                "params": {
                    "mode": if *parallel { "parallel" } else { "sequence" },
                    "acts": (0..*items)
                        .map(|_| json!({"uses": "acts.core.irq", "params": {"key": id}}))
                        .collect::<Vec<_>>(),
                },
            }),
            Step::Needs { id, first, after } => json!({
                "id": id,
                "branches": [
                    {"id": format!("{id}_a"), "if": "n >= 0",
                     "steps": first.iter().map(Step::to_json).collect::<Vec<_>>()},
                    {"id": format!("{id}_b"), "needs": [format!("{id}_a")],
                     "steps": after.iter().map(Step::to_json).collect::<Vec<_>>()},
                ],
            }),
            Step::Jump { id } => json!({
                "id": id,
                "if": format!("($get('j_{id}') || 0) < 1"),
                "uses": "acts.transform.code",
                "params": format!("return {{ j_{id}: ($get('j_{id}') || 0) + 1 }}"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::generate;

    #[test]
    fn a_seed_gives_one_workflow_and_shrinks_are_smaller() {
        assert_eq!(generate(7), generate(7));
        let specs: Vec<Spec> = (0..50).map(generate).collect();
        assert!(specs.iter().any(|s| s.size() > 3));
        for s in &specs {
            assert!(s.shrinks().iter().all(|x| x.size() < s.size()));
        }
    }
}
