//! The scheduler: processes, tasks and their transitions.
//!
//! Built so far: [`TaskState`], the states and their groupings. The process
//! and task records, the exec/next algorithm, lanes and actions come next
//! (see `docs/ARCHITECTURE.md`).

mod state;

pub use state::TaskState;
