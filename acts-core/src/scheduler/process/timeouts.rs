//! Step timeouts (the reference's §3.9): a step's `timeouts` are steps
//! whose `if` (e.g. `$cost_in("2h")`) decides when they fire, each at most
//! once per step task, in declaration order.
//!
//! Instead of the reference's 15-second polling tick, the process says when
//! its next timeout can first fire ([`Process::next_timer`]); the engine
//! arms one timer for that instant on its clock and calls
//! [`Process::tick`] when it is due.

use serde_json::Value;

use crate::model::{TimeoutLimit, Vars, cost_in_literals};
use crate::scheduler::{Sign, TaskIx, TaskState};
use crate::tree::{ChildKind, NodeContent, NodeIx};

use super::{Job, Process, Services};

/// The data key listing the timeout steps already fired for a step task.
const FIRED: &str = "__timeouts";

impl Process {
    /// Step tasks that are running and declare timeouts, with their
    /// timeout steps (first of each chain, in declaration order).
    fn timeout_owners(&self) -> Vec<(TaskIx, Vec<NodeIx>)> {
        let mut out = Vec::new();
        for (ix, task) in self.tasks.open() {
            if !matches!(task.state, TaskState::Running | TaskState::Interrupt) {
                continue;
            }
            // The declared timeout steps: the first is the owner's child,
            // each later one is chained after it.
            let mut rules: Vec<NodeIx> = Vec::new();
            let mut cur = self
                .tree
                .children(task.node)
                .into_iter()
                .find(|(k, _)| *k == ChildKind::Timeout)
                .map(|(_, c)| c);
            while let Some(c) = cur {
                if rules.contains(&c) {
                    break;
                }
                rules.push(c);
                cur = self.tree.node(c).and_then(|n| n.chain);
            }
            if !rules.is_empty() {
                out.push((ix, rules));
            }
        }
        out
    }

    /// Whether a task of timeout step `rule` under `owner` has not ended:
    /// a fired timeout still running holds the later ones back (as the
    /// reference's dispatcher does).
    fn rule_running(&self, owner: TaskIx, rule: NodeIx) -> bool {
        self.tasks.children(owner).into_iter().any(|c| {
            self.tasks
                .get(c)
                .is_some_and(|c| c.node == rule && !c.state.is_terminal())
        })
    }

    fn fired(&self, owner: TaskIx) -> Vec<String> {
        self.tasks
            .get(owner)
            .and_then(|t| t.data.get(FIRED))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The earliest instant (ms on the engine clock) at which a timeout
    /// step of a running step can fire: the step's start plus the lower
    /// bound of the timeout's `$cost_in` (a timeout without one is due at
    /// once). `None` when nothing can time out.
    pub fn next_timer(&self) -> Option<i64> {
        if self.paused.is_some() {
            return None; // its timers hold while it is paused
        }
        let mut due: Option<i64> = None;
        for (owner, rules) in self.timeout_owners() {
            let fired = self.fired(owner);
            let start = self.tasks.get(owner).map_or(0, |t| t.start_time);
            for rule in rules {
                let Some(node) = self.tree.node(rule) else {
                    continue;
                };
                if fired.contains(&node.id) {
                    if self.rule_running(owner, rule) {
                        break; // the next rule is due only after this one
                    }
                    continue;
                }
                let after = match &*node.content {
                    NodeContent::Step(s) => s
                        .r#if
                        .as_deref()
                        .and_then(|cond| cost_in_literals(cond).into_iter().next())
                        .and_then(|lit| lit.parse::<TimeoutLimit>().ok())
                        .map_or(0, |l| l.as_duration().as_millis() as i64),
                    _ => 0,
                };
                let at = start + after;
                due = Some(due.map_or(at, |d| d.min(at)));
                // Later rules fire after this one (declaration order).
                break;
            }
        }
        due
    }

    /// Fires the timeouts that are due: for every running step with
    /// timeouts, records its elapsed time as `__cost` and starts its first
    /// timeout step not fired yet whose `if` holds (one per step per tick;
    /// a fired timeout that is still running holds the later ones back).
    pub fn tick(&mut self, svc: Services<'_>) {
        if self.paused.is_some() {
            return; // due timeouts fire when it is resumed
        }
        let now = self.tasks.now();
        for (owner, rules) in self.timeout_owners() {
            let start = self.tasks.get(owner).map_or(0, |t| t.start_time);
            let mut cost = Vars::new();
            cost.insert("__cost".into(), Value::from((now - start).max(0)));
            self.tasks.set_data(owner, &cost);
            let fired = self.fired(owner);
            for rule in rules {
                let Some(node) = self.tree.node(rule).cloned() else {
                    continue;
                };
                if self.rule_running(owner, rule) {
                    break;
                }
                if fired.contains(&node.id) {
                    continue;
                }
                let holds = match &*node.content {
                    NodeContent::Step(s) => match &s.r#if {
                        Some(cond) => svc
                            .scripts
                            .eval_bool(cond, self.script_scope(owner, cond))
                            .unwrap_or(false),
                        None => true,
                    },
                    _ => false,
                };
                if !holds {
                    break; // re-evaluated at the next timer
                }
                let mut claimed = fired.clone();
                claimed.push(node.id.clone());
                let mut data = Vars::new();
                data.insert(
                    FIRED.into(),
                    Value::Array(claimed.into_iter().map(Value::String).collect()),
                );
                self.tasks.set_data(owner, &data);
                if let Ok(task) = self.new_task(rule, Some(owner)) {
                    self.tasks.sign(task, Sign::TIMEOUT);
                    self.queue.push_back(Job::Exec(task));
                }
                break;
            }
        }
        self.run(svc);
    }
}
