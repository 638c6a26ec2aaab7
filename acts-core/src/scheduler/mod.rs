//! The scheduler: processes, tasks and their transitions.
//!
//! - [`TaskState`]: the states and their groupings.
//! - [`TaskTable`]: a process's tasks, the parentage rule, and the
//!   data-scope rules (`find`, fold-up `update_data`, `outputs`).
//! - [`Process`]: one workflow run as a pure, synchronous state machine —
//!   the exec/next algorithm of the reference for every node kind, the
//!   `acts.transform.set`/`code`, `acts.core.irq`/`msg`/`block`/`parallel`/
//!   `sequence`/`action` packages, the client actions complete, submit,
//!   skip, abort, error, remove, set-process-vars, back, cancel and push, and the
//!   [`Message`]s clients see.
//!
//! Catches run as in the reference (every matching catch, in order; the
//! error stands when none matched), except that every step of a catch chain
//! counts as a catch, not only the first.
//!
//! Timeouts (`next_timer`/`tick`), `back`/`cancel`, process abort, and the
//! requests for work outside the process (application packages, subflow
//! children) are here too; the engine (`crate::engine`) persists each
//! transition and delivers its messages.
//!
//! May use: `model`, `package`, `script`, `tree`.

mod message;
mod process;
mod scope;
mod scope_size;
pub use scope_size::json_len;
pub mod seal;
mod state;
mod task_data;
mod task_error;
mod task_event;
mod task_marks;
mod tasks;
pub mod trace;

pub use message::{Message, MessageInterest, MessageState, MessageType};
pub use process::{
    ACTION_NAMES, Action, ActionError, Audience, GatePass, GateUse, MAX_AUDIENCE, MAX_REASON_BYTES,
    ModelCatalog, Pause, Process, RateGate, Request, RunLimits, Services, TaskGate, UnknownAction,
    addressees,
};
pub use scope::Scope;
pub use state::TaskState;
pub use task_data::is_reserved;
pub use task_error::TaskError;
pub use task_event::TaskEvent;
pub use tasks::{Dirty, Sign, Task, TaskIx, TaskTable};
