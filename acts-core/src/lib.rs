//! # acts-core: the workflow engine
//!
//! The engine of acts: the workflow model (`Workflow`, `Step`, `Branch`,
//! `Act`), the node tree, the pure synchronous scheduling core (processes
//! and tasks with their state machine), packages, scripts, the typed
//! collections and group-commit writer over the store, and the async,
//! durable engine around the core.
//!
//! **Layering rule:** this crate depends on `acts-store` (the `KvStore`
//! contract) and on no backend; applications choose the store.
//!
//! Modules: [`model`] (the workflow model, YAML and JSON loading, the
//! builder API, validation with source positions), [`tree`] (the static
//! node tree shared per model, dynamic acts per process), [`script`]
//! (QuickJS with a runtime pool, a locked-down realm per runtime and limits),
//! [`package`] (definitions and the registry), [`scheduler`] (task states,
//! the task table and `Process`: the pure, synchronous exec/next core),
//! [`durable`] (the group-commit writer and typed collections), [`time`]
//! (the injectable clock and timers), and [`engine`]: the async, durable
//! engine around the core — builder, executor, channels (plain and
//! durable, with ack, retry and dead-letter), the resident cache, one
//! transition per atomic batch, recovery, triggers (manual, hook, cron),
//! sealed data, and the sweeper.
//!
//! ## Where to start reading
//!
//! `model/mod.rs`, then `model/workflow.rs` and `model/validate.rs`;
//! `tree/mod.rs`; `script/mod.rs`; `package/mod.rs`; `durable/mod.rs`;
//! `time/mod.rs`; `scheduler/process/mod.rs` for how a workflow runs;
//! `engine/mod.rs` (the rooms), then `engine/kernel/transition.rs` for how it
//! runs durably.

pub mod durable;
pub mod engine;
pub mod model;
pub mod package;
pub mod scheduler;
pub mod script;
pub mod time;
pub mod tree;
