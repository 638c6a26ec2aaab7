//! The scheduler: processes, tasks and their transitions.
//!
//! Built so far: [`TaskState`] (the states and their groupings) and
//! [`TaskTable`] (a process's tasks, the parentage rule, and the data-scope
//! rules: `find`, fold-up `update_data`, `outputs` with `exposes`, and the
//! scope a script sees). The exec/next algorithm, lanes and actions come next
//! (see `docs/ARCHITECTURE.md`).

mod state;
mod tasks;

pub use state::TaskState;
pub use tasks::{Task, TaskIx, TaskTable};
