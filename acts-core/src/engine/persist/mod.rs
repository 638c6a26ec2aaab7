//! Persistence: the engine's rows and the one place that turns a process
//! into rows (what a transition writes) and rows back into a process.
//!
//! May use: the scheduler, the model, the tree and `durable`
//! (collections); nothing else of the engine.

pub(crate) mod migrate;
pub(crate) mod process;
pub(crate) mod rows;
pub(crate) mod var_index;

pub(crate) use process::*;
