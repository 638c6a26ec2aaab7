//! Persistence: the engine's rows and the one place that turns a process
//! into rows (what a transition writes) and rows back into a process.
//!
//! May use: `types`; of the crate, the scheduler, the model, the tree and
//! `durable` (collections).

pub(crate) mod boot_rows;
pub(crate) mod bulk_rows;
pub(crate) mod delivery_rows;
pub(crate) mod format;
pub(crate) mod info;
pub(crate) mod lease_rows;
pub(crate) mod migrate;
pub(crate) mod model_rows;
pub(crate) mod proc_rows;
pub(crate) mod process;
pub(crate) mod reads;
pub(crate) mod rows;
pub(crate) mod slot_rows;
pub(crate) mod stored_process;
pub(crate) mod trigger_rows;
pub(crate) mod var_index;

pub(crate) use process::*;
pub(crate) use stored_process::*;
