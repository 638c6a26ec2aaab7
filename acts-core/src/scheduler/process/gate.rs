//! Gates: a step's or act's `concurrency:` and `rate:`. A task with one
//! does not run when it is ready: it evaluates its keys, keeps them in its
//! data ([`GATE_KEY`]), waits in state `pending` (flagged
//! [`Sign::GATED`], announced with a `pending` message) and asks the engine
//! for a slot and a token ([`Request::Gate`]). The engine answers with
//! [`Process::open_gate`] when both are there — at once, or when another
//! process's task of the key ends or the key's bucket refills. Nothing
//! here counts slots: the engine does, across processes.

use serde_json::Value;

use crate::model::{MAX_CONCURRENCY_KEY, gate_problem};
use crate::scheduler::{Sign, TaskError, TaskIx, TaskState};
use crate::script::substitute;
use crate::tree::NodeContent;

use super::task_gate::{GATE_KEY, GatePass, GateUse, RateGate, TaskGate};
use super::{Job, Process, Request, Services};

impl Process {
    /// Whether ready task `t` must wait at its gate (then it is `pending`
    /// and the engine is asked); a gate whose key does not evaluate fails
    /// the task.
    pub(super) fn wait_at_gate(&mut self, t: TaskIx, svc: Services<'_>) -> Result<bool, TaskError> {
        if self
            .tasks
            .get(t)
            .is_none_or(|x| x.sign.has(Sign::GATE_OPEN))
        {
            return Ok(false);
        }
        let (concurrency, rate) = match self.content(t).as_deref() {
            Some(NodeContent::Step(s)) => (s.concurrency.clone(), s.rate.clone()),
            Some(NodeContent::Act(a)) => (a.concurrency.clone(), a.rate.clone()),
            _ => return Ok(false),
        };
        if concurrency.is_none() && rate.is_none() {
            return Ok(false);
        }
        // An act made at run time was not checked at deploy.
        if let Some(problem) = gate_problem(concurrency.as_ref(), rate.as_ref()) {
            return Err(TaskError::new("", problem));
        }
        let texts = [
            concurrency.as_ref().map(|c| c.key.as_str()),
            rate.as_ref().map(|r| r.key.as_str()),
        ];
        let scope = self.script_scope(
            t,
            &texts
                .iter()
                .flatten()
                .copied()
                .collect::<Vec<_>>()
                .join("\n"),
        );
        let evaluate = |what: &str, text: &str| -> Result<String, TaskError> {
            let key = substitute::text_strict(svc.scripts, text, &scope).map_err(|e| {
                TaskError::new(
                    "",
                    format!("its {what} key `{text}` cannot be evaluated: {e}"),
                )
            })?;
            if key.trim().is_empty() || key.len() > MAX_CONCURRENCY_KEY {
                return Err(TaskError::new(
                    "",
                    format!(
                        "its {what} key `{text}` is {} bytes when evaluated; give 1 to {MAX_CONCURRENCY_KEY}",
                        key.trim().len()
                    ),
                ));
            }
            Ok(key)
        };
        // Re-entrant: under a task of this process that holds the key's
        // slot (a catch of a keyed step, an act of a keyed step's block),
        // a task runs on that slot — it would wait for its own ancestor.
        let key = match &concurrency {
            Some(c) => {
                Some(evaluate("concurrency", &c.key)?).filter(|k| !self.ancestor_holds(t, k))
            }
            None => None,
        };
        let rate = match &rate {
            Some(r) => Some(RateGate {
                key: evaluate("rate", &r.key)?,
                per_second: r.per_second,
                burst: r.burst,
            }),
            None => None,
        };
        if key.is_none() && rate.is_none() {
            return Ok(false);
        }
        let gate = TaskGate {
            limit: key
                .as_ref()
                .and(concurrency.as_ref())
                .map_or(0, |c| c.limit),
            key,
            rate,
            since: self.tasks.now(),
            seq: t.index() as u32,
        };
        let value = serde_json::to_value(&gate).unwrap_or(Value::Null);
        self.tasks.put(t, GATE_KEY, &value);
        self.tasks.set_state(t, TaskState::Pending);
        self.tasks.sign(t, Sign::GATED);
        // Announced as pending, so its end is announced too — whether or
        // not it ran (an act is otherwise silent until it runs, and when
        // its gate opens relative to a sibling's end is a matter of timing).
        self.tasks.unsign(t, Sign::NO_EMIT);
        self.has_gates = true;
        self.emit(t, svc);
        let tid = self.tasks.get(t).map(|x| x.id.clone()).unwrap_or_default();
        self.requests.push(Request::Gate { tid, gate });
        Ok(true)
    }

    /// Lets task `tid`, which waits at its gate, run (the engine found its
    /// slot and token); `false` when it no longer waits (it ended, or was
    /// let through before).
    pub fn open_gate(&mut self, tid: &str, svc: Services<'_>) -> bool {
        let Some(t) = self.tasks.find_id(tid) else {
            return false;
        };
        let waits = self
            .tasks
            .get(t)
            .is_some_and(|x| x.state == TaskState::Pending && x.sign.has(Sign::GATED));
        if !waits {
            return false;
        }
        self.tasks.unsign(t, Sign::GATED);
        self.tasks.sign(t, Sign::GATE_OPEN);
        self.tasks.set_state(t, TaskState::Ready);
        self.queue.push_back(Job::Exec(t));
        self.run(svc);
        true
    }

    /// What task `tid` is when part `part` of its gate has its place at
    /// its key's home (a cluster's engines, see the engine's
    /// `kernel/gates/courier.rs`); nothing changes.
    pub fn gate_pass(&self, tid: &str, part: usize) -> GatePass {
        let Some(t) = self.tasks.find_id(tid) else {
            return GatePass::Gone;
        };
        if self.waits_at_gate(t) {
            let gate = self
                .tasks
                .get(t)
                .and_then(|x| x.data.get(GATE_KEY))
                .and_then(|g| serde_json::from_value::<TaskGate>(g.clone()).ok());
            let Some(gate) = gate else {
                return GatePass::Gone;
            };
            let parts = usize::from(gate.key.is_some()) + usize::from(gate.rate.is_some());
            if part + 1 < parts {
                return GatePass::Waits(gate);
            }
            return GatePass::Opens;
        }
        match self.tasks.get(t) {
            Some(x) if x.sign.has(Sign::GATE_OPEN) && !x.state.is_terminal() => GatePass::Runs,
            _ => GatePass::Gone,
        }
    }

    /// Fails task `tid`, which waits at its gate, with `message` (the
    /// engine cannot keep its keys); `false` when it no longer waits.
    pub fn refuse_gate(&mut self, tid: &str, message: &str, svc: Services<'_>) -> bool {
        let Some(t) = self.tasks.find_id(tid) else {
            return false;
        };
        if !self.waits_at_gate(t) {
            return false;
        }
        self.tasks.unsign(t, Sign::GATED);
        self.fail(t, TaskError::new("", message), svc);
        self.run(svc);
        true
    }

    /// Whether an ancestor of task `t` passed its gate holding a slot of
    /// concurrency key `key`.
    fn ancestor_holds(&self, t: TaskIx, key: &str) -> bool {
        self.tasks.ancestors(t).into_iter().any(|a| {
            self.tasks.get(a).is_some_and(|x| {
                x.sign.has(Sign::GATE_OPEN)
                    && x.data
                        .get(GATE_KEY)
                        .and_then(|g| g.get("key"))
                        .and_then(Value::as_str)
                        == Some(key)
            })
        })
    }

    /// Whether task `t` waits at its gate.
    pub(super) fn waits_at_gate(&self, t: TaskIx) -> bool {
        self.tasks
            .get(t)
            .is_some_and(|x| x.state == TaskState::Pending && x.sign.has(Sign::GATED))
    }

    /// Whether any of its tasks waited at a gate since it was built or
    /// restored (else it has nothing the engine counts: no lookup needed).
    pub fn has_gates(&self) -> bool {
        self.has_gates
    }

    /// The gated tasks that have not ended, in creation order: what the
    /// engine counts a key's slots and queues by.
    pub fn gates(&self) -> Vec<GateUse> {
        if !self.has_gates {
            return Vec::new();
        }
        let mut out: Vec<GateUse> = self
            .tasks
            .open()
            .filter_map(|(_, task)| {
                let gate = task.data.get(GATE_KEY)?;
                let gate: TaskGate = serde_json::from_value(gate.clone()).ok()?;
                Some(GateUse {
                    tid: task.id.clone(),
                    gate,
                    open: !task.sign.has(Sign::GATED),
                })
            })
            .collect();
        out.sort_by_key(|u| u.gate.seq);
        out
    }

    /// The request of a task that waits at its gate (a restored process
    /// asks again).
    pub(super) fn gate_request(&self, t: TaskIx) -> Option<Request> {
        let task = self.tasks.get(t)?;
        let gate = serde_json::from_value(task.data.get(GATE_KEY)?.clone()).ok()?;
        Some(Request::Gate {
            tid: task.id.clone(),
            gate,
        })
    }

    /// Whether a restored task table has gated tasks.
    pub(super) fn find_gates(&mut self) {
        self.has_gates = self
            .tasks
            .open()
            .any(|(_, t)| t.data.get(GATE_KEY).is_some());
    }
}
