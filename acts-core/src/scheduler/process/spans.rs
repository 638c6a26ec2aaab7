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
        tracing::warn_span!("process", pid = %self.pid, model = %self.model_id())
    }

    /// The span of a job of task `t`.
    pub(super) fn task_span(&self, t: TaskIx) -> Span {
        tracing::warn_span!(
            "task",
            tid = %self.tasks.get(t).map(|x| x.id.as_str()).unwrap_or(""),
            nid = %self.node_id(t)
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
