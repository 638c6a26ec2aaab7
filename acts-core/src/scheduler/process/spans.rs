//! The tracing spans a process's work runs in: `process` (its `pid` and
//! `model`) around a run, `task` (its `tid` and node id `nid`) around each
//! job. Every event inside — a script's `console.log`, a package's
//! warning, a step's error — carries them (`acts --log-format json` shows
//! them on each line). At WARN level so the default filter (`warn`, plus
//! scripts' `info`) keeps them; their fields are only computed when a
//! subscriber wants the span.

use tracing::Span;

use super::{Process, TaskIx};

impl Process {
    /// The span of a run of this process.
    pub(super) fn process_span(&self) -> Span {
        let model = self
            .tree
            .node(self.tree.root())
            .map_or("", |n| n.id.as_str());
        tracing::warn_span!("process", pid = %self.pid, model = %model)
    }

    /// The span of a job of task `t` (no field is copied to build it).
    pub(super) fn task_span(&self, t: TaskIx) -> Span {
        let task = self.tasks.get(t);
        let nid = task
            .and_then(|x| self.tree.node(x.node))
            .map_or("", |n| n.id.as_str());
        tracing::warn_span!(
            "task",
            tid = %task.map_or("", |x| x.id.as_str()),
            nid = %nid
        )
    }

    /// The id of the model node task `t` runs.
    pub(super) fn node_id(&self, t: TaskIx) -> String {
        self.tasks
            .get(t)
            .and_then(|x| self.tree.node(x.node))
            .map(|n| n.id.clone())
            .unwrap_or_default()
    }
}
