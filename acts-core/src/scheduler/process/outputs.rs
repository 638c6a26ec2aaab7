//! What a task gives: its outputs (the `exposes`, evaluated), the check of
//! a process's outputs against their declared types, and the messages
//! that tell clients about a task.

use serde_json::Value;

use crate::model::{Variant, Vars, whole_expression};
use crate::scheduler::{Message, MessageState, Sign, TaskError, TaskIx, TaskState};
use crate::script::substitute;
use crate::tree::NodeContent;

use super::{OUTPUTS_KEY, Process, Services};

impl Process {
    /// Task `t`'s outputs (§3.7): with `exposes`, one entry per exposed
    /// name — a whole-string `${{ }}` evaluated in the task's scope, `null`
    /// looked up, any other literal as it is; without, its non-private
    /// data. Evaluated exposes of a task that has ended are kept in its
    /// data (`__outputs`), so they are evaluated once and a reloaded
    /// process (or its outputs read without the script engine) sees the
    /// same values.
    pub(super) fn outputs_of(&mut self, t: TaskIx, svc: Services<'_>) -> Vars {
        let exposes = self.exposes_of(t);
        let expressions = exposes.iter().any(Variant::is_whole_expression);
        if !expressions {
            return self.tasks.outputs(t, &exposes);
        }
        if let Some(Value::Object(kept)) = self.tasks.get(t).and_then(|x| x.data.get(OUTPUTS_KEY)) {
            return kept.clone();
        }
        let texts: Vec<&str> = exposes.iter().filter_map(|e| e.value.as_str()).collect();
        let scope = self.script_scope(t, &texts.join("\n"));
        let mut out = Vars::new();
        for e in &exposes {
            let value = match e.value.as_str().and_then(whole_expression) {
                Some(_) => substitute::vars(svc.scripts, &e.value, &scope).unwrap_or_else(|err| {
                    tracing::warn!(target: "acts::script", pid = %self.pid, name = %e.name, error = %err, "exposed value failed; using null");
                    Value::Null
                }),
                None if e.value.is_null() => self.tasks.find(t, &e.name).cloned().unwrap_or(Value::Null),
                None => e.value.clone(),
            };
            out.insert(e.name.clone(), value);
        }
        if self.state_of(t).is_terminal() {
            self.tasks.put(t, OUTPUTS_KEY, &Value::Object(out.clone()));
        }
        out
    }

    pub(super) fn exposes_of(&self, t: TaskIx) -> Vec<Variant> {
        let node = self.tasks.get(t).and_then(|x| self.tree.node(x.node));
        match node.map(|n| &*n.content) {
            Some(NodeContent::Step(s)) => s.exposes.clone(),
            Some(NodeContent::Branch(b)) => b.exposes.clone(),
            Some(NodeContent::Act(a)) => a.exposes.clone(),
            Some(NodeContent::Workflow(w)) => w.exposes.clone(),
            None => Vec::new(),
        }
    }

    /// The first process output whose value does not match the type its
    /// `exposes` entry declares (or infers from a literal), as an error.
    pub(super) fn outputs_mismatch(
        &mut self,
        root: TaskIx,
        svc: Services<'_>,
    ) -> Option<TaskError> {
        let exposes = self.exposes_of(root);
        if exposes.iter().all(|e| e.r#type.is_none()) {
            return None;
        }
        let outputs = self.outputs_of(root, svc);
        // The root ends right after this check: keep what was evaluated,
        // so its end message does not evaluate the exposes again.
        if !self
            .tasks
            .get(root)
            .is_some_and(|r| r.data.contains_key(OUTPUTS_KEY))
            && exposes.iter().any(Variant::is_whole_expression)
        {
            self.tasks
                .put(root, OUTPUTS_KEY, &Value::Object(outputs.clone()));
        }
        exposes.iter().find_map(|e| {
            let ty = e.r#type?;
            let value = outputs.get(&e.name).unwrap_or(&Value::Null);
            (!ty.accepts(value)).then(|| {
                TaskError::new(
                    "exposes",
                    format!(
                        "model '{}': output '{}' must be {} {}, got {value}",
                        self.model_id(),
                        e.name,
                        if ty.as_str().starts_with(['a', 'o']) {
                            "an"
                        } else {
                            "a"
                        },
                        ty.as_str()
                    ),
                )
            })
        })
    }

    pub(super) fn emit(&mut self, t: TaskIx, svc: Services<'_>) {
        let Some(task) = self.tasks.get(t) else {
            return;
        };
        let state = task.state;
        // A task waiting at its gate is announced as `pending` (an act
        // otherwise says nothing before it runs).
        let gated = state == TaskState::Pending && task.sign.has(Sign::GATED);
        let message_state = if gated {
            MessageState::Pending
        } else {
            state.into()
        };
        let visible =
            state.is_terminal() || matches!(state, TaskState::Ready | TaskState::Interrupt);
        if !gated && (task.sign.has(Sign::NO_EMIT) || !visible) {
            return;
        }
        let kind = self.tree.node(task.node).map(|n| n.content.kind().into());
        if kind.is_some_and(|k| !svc.interest.wants(k, message_state)) {
            // Nobody listens: no message. Exposes with expressions are
            // still evaluated as the task ends and kept, as building its
            // message would have done (later readers see those values).
            if state.is_terminal() && self.exposes_of(t).iter().any(Variant::is_whole_expression) {
                self.outputs_of(t, svc);
            }
            return;
        }
        let outputs = if state.is_terminal() {
            self.outputs_of(t, svc)
        } else {
            Vars::new()
        };
        let Some(task) = self.tasks.get(t) else {
            return;
        };
        let Some(node) = self.tree.node(task.node) else {
            return;
        };
        let (uses, params, options) = match &*node.content {
            NodeContent::Act(a) => (Some(a.uses.clone()), self.act_params(t), a.options.clone()),
            NodeContent::Step(s) => (s.uses.clone(), Value::Null, s.options.clone()),
            NodeContent::Branch(b) => (None, Value::Null, b.options.clone()),
            NodeContent::Workflow(w) => (None, Value::Null, w.options.clone()),
        };
        let key = params.get("key").and_then(Value::as_str).map(str::to_owned);
        let mut inputs: Vars = if state.is_terminal() {
            Vars::new()
        } else if state == TaskState::Interrupt {
            // What the client decides on: every value the act sees (its
            // own, else its nearest ancestor's), as the reference's copied
            // inputs gave it.
            let mut view = Vars::new();
            for scope in self.tasks.ancestors(t).into_iter().rev().chain([t]) {
                if let Some(x) = self.tasks.get(scope) {
                    view.extend(
                        x.data
                            .iter()
                            .filter(|(k, _)| !crate::script::is_private(k))
                            .map(|(k, v)| (k.clone(), v.clone())),
                    );
                }
            }
            view
        } else {
            task.data
                .iter()
                .filter(|(k, _)| !crate::script::is_private(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        // What reference clients read besides the data (§4.2).
        inputs.insert("options".into(), Value::Object(options));
        inputs.insert("model".into(), self.model_summary());
        if matches!(&*node.content, NodeContent::Act(_)) {
            inputs.insert("params".into(), params.clone());
            if let Some(step) = self.nearest_step(t) {
                inputs.insert("step".into(), step);
            }
        }
        if let Some(e) = &task.err {
            inputs.extend(e.to_vars());
        }
        if gated && let Some(gate) = task.data.get(super::task_gate::GATE_KEY) {
            // What it waits for: its evaluated keys.
            inputs.insert("gate".into(), gate.clone());
        }
        let (start_time, end_time) = (
            (task.start_time > 0).then_some(task.start_time),
            (task.end_time > 0).then_some(task.end_time),
        );
        let err = task.err.as_deref().cloned();
        let time = self.tasks.now();
        let model_id = self.model_id();
        self.messages.push(Message {
            id: crate::tree::long_id(),
            model_id,
            inputs,
            err,
            time,
            r#type: node.content.kind().into(),
            state: message_state,
            pid: self.pid.clone(),
            tid: task.id.clone(),
            nid: node.id.clone(),
            name: node.content.name().to_owned(),
            uses,
            key,
            params,
            outputs,
            start_time,
            end_time,
        });
    }

    /// `{id, name, options}` of the workflow, for messages.
    fn model_summary(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("id".into(), Value::String(self.model_id()));
        let (name, options) = self
            .workflow()
            .map(|w| (w.name.clone(), w.options.clone()))
            .unwrap_or_default();
        m.insert("name".into(), Value::String(name));
        m.insert("options".into(), Value::Object(options));
        Value::Object(m)
    }

    /// `{node_id, node_name, task_id}` of the nearest step at or above
    /// task `t`'s parent, for act messages.
    fn nearest_step(&self, t: TaskIx) -> Option<Value> {
        let mut cur = self.tasks.get(t)?.parent;
        while let Some(ix) = cur {
            let task = self.tasks.get(ix)?;
            let node = self.tree.node(task.node)?;
            if let NodeContent::Step(s) = &*node.content {
                let mut m = serde_json::Map::new();
                m.insert("node_id".into(), Value::String(node.id.clone()));
                m.insert("node_name".into(), Value::String(s.name.clone()));
                m.insert("task_id".into(), Value::String(task.id.clone()));
                return Some(Value::Object(m));
            }
            cur = task.parent;
        }
        None
    }
}
