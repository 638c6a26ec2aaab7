//! The spans of a process's tasks (see [`crate::scheduler::trace`]): the
//! tasks that ended in a transition, taken by the engine with its messages
//! and exported once the transition is durable.

use serde_json::Value;

use super::Process;
use crate::scheduler::TaskIx;
use crate::scheduler::trace::{
    TRACEPARENT_KEY, TaskSpan, TraceContext, derived_trace_id, task_span_id,
};

/// What every span of one transition shares.
struct Shared {
    trace_id: [u8; 16],
    started: Option<TraceContext>,
    model_id: String,
    model_version: u32,
}

impl Process {
    /// The spans of the tasks that ended since the last call, in the
    /// order they ended (none built unless `traced`).
    /// An unsampled trace (its starter's flag) has none.
    pub fn take_spans(&mut self, traced: bool) -> Vec<TaskSpan> {
        let ended = self.tasks.take_ended();
        if !traced || ended.is_empty() {
            return Vec::new();
        }
        let started = self.started_in();
        if started.is_some_and(|c| !c.sampled) {
            return Vec::new();
        }
        let shared = Shared {
            trace_id: self.trace_id_in(started),
            started,
            model_id: self.model_id(),
            model_version: self.tree.model().revision,
        };
        ended
            .into_iter()
            .filter_map(|t| self.span_of(t, &shared))
            .collect()
    }

    /// The context the process was started in (a caller's, a subflow
    /// act's), if it was given one.
    fn started_in(&self) -> Option<TraceContext> {
        let root = self.tasks.get(self.root())?;
        root.data
            .get(TRACEPARENT_KEY)
            .and_then(Value::as_str)
            .and_then(TraceContext::parse)
    }

    /// The process's trace id: its starter's, else derived from the pid.
    fn trace_id_in(&self, started: Option<TraceContext>) -> [u8; 16] {
        started.map_or_else(|| derived_trace_id(&self.pid), |c| c.trace_id)
    }

    /// The `traceparent` a subflow child of act `tid` starts in.
    pub(super) fn child_traceparent(&self, tid: &str) -> String {
        let started = self.started_in();
        TraceContext {
            trace_id: self.trace_id_in(started),
            span_id: task_span_id(&self.pid, tid),
            sampled: started.is_none_or(|c| c.sampled),
        }
        .to_traceparent()
    }

    /// The span of task `t`, if it has ended.
    fn span_of(&self, t: TaskIx, shared: &Shared) -> Option<TaskSpan> {
        let task = self.tasks.get(t)?;
        if !task.state.is_terminal() {
            return None;
        }
        let node = self.tree.node(task.node)?;
        let (parent_span_id, parent_is_remote) = match task.parent.and_then(|p| self.tasks.get(p)) {
            Some(p) => (Some(task_span_id(&self.pid, &p.id)), false),
            None => (shared.started.map(|c| c.span_id), true),
        };
        let uses = match &*node.content {
            crate::tree::NodeContent::Act(a) => Some(a.uses.clone()),
            crate::tree::NodeContent::Step(s) => s.uses.clone(),
            _ => None,
        };
        // An act without a name is known by its package.
        let is_act = matches!(&*node.content, crate::tree::NodeContent::Act(_));
        let name = match (node.content.name(), &uses) {
            ("", Some(u)) if is_act => u.clone(),
            ("", _) => node.id.clone(),
            (n, _) => n.to_owned(),
        };
        let answered_by = (task.parent.is_some())
            .then(|| task.data.get(TRACEPARENT_KEY))
            .flatten()
            .and_then(Value::as_str)
            .and_then(TraceContext::parse);
        let end_ms = if task.end_time > 0 {
            task.end_time
        } else {
            self.tasks.now()
        };
        let start_ms = if task.start_time > 0 {
            task.start_time.min(end_ms)
        } else {
            end_ms
        };
        Some(TaskSpan {
            trace_id: shared.trace_id,
            span_id: task_span_id(&self.pid, &task.id),
            parent_span_id,
            parent_is_remote,
            kind: node.content.kind().into(),
            name,
            pid: self.pid.clone(),
            tid: task.id.clone(),
            nid: node.id.clone(),
            model_id: shared.model_id.clone(),
            model_version: shared.model_version,
            uses,
            state: task.state,
            error: task.err.as_deref().cloned(),
            start_ms,
            end_ms,
            answered_by,
        })
    }
}
