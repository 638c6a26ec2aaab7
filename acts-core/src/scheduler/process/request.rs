//! Work a process hands to the engine ([`Request`]): an application
//! package to run, a gate to pass, a subflow to start.

use serde_json::Value;

use crate::model::Vars;

use super::task_gate::TaskGate;

/// Work outside the process that one of its acts waits for. The act stays
/// `Running` (flagged [`Sign::EXTERNAL`](crate::scheduler::Sign::EXTERNAL)) until the engine answers it with
/// an action.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Run an application package (an `ActPackage`) for act task `tid`.
    RunPackage {
        /// The act task.
        tid: String,
        /// The package id.
        uses: String,
        /// The evaluated params.
        params: Value,
        /// The act's inputs (its data when it started).
        inputs: Vars,
    },
    /// Let act or step task `tid` through its gate (`concurrency:`,
    /// `rate:`) when its key has a slot and its bucket a token: the engine
    /// answers with [`Process::open_gate`](super::Process::open_gate). The task waits, `pending`.
    Gate {
        /// The task.
        tid: String,
        /// Its evaluated gate.
        gate: TaskGate,
    },
    /// Start model `to` as a child process of act task `tid`
    /// (`acts.core.subflow`); the child's end completes the act.
    StartSubflow {
        /// The act task.
        tid: String,
        /// The child process id (derived from the parent and the task, so
        /// a replayed request names the same child).
        child_pid: String,
        /// The model to start.
        to: String,
        /// Start options, with `$parent_pid` and `$parent_tid`.
        options: Vars,
    },
}
