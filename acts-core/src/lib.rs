//! # acts-core: the workflow engine
//!
//! The pure scheduling core of acts: the workflow model (`Workflow`, `Step`,
//! `Branch`, `Act`), the node tree, processes and tasks with their state
//! machine, packages, scripts, the typed collections over the store, the
//! resident cache and the group-commit writer.
//!
//! **Layering rule:** this crate depends on `acts-store` (the `KvStore`
//! contract) and on no backend; applications choose the store.
//!
//! **Status:** in progress. Built so far: [`model`] (the workflow model, YAML
//! and JSON loading, the builder API, validation with source positions) and
//! [`tree`] (the static node tree shared per model, dynamic acts per process,
//! persisted links) and [`script`] (QuickJS evaluation with a runtime pool,
//! compiled-script cache, time and memory limits, the reference's helpers
//! and `${{ }}` substitution), [`package`] (definitions and the registry of
//! built-in and application packages, params schemas checked at deploy), and
//! [`scheduler`] (task states, the task table with the data-scope rules, and
//! `Process`: the pure exec/next core that runs steps, branches, `while`
//! loops, catches, the set/code/irq/msg/block/parallel/sequence/action
//! packages, with client actions and the
//! messages clients see), the group-commit writer and typed
//! collections of [`store`], and [`time`] (the injectable clock and the
//! timer service). Still to come, folder per concept: the
//! rest of `scheduler/` (timeouts, back/cancel, subflow, lanes), running packages, the engine's row types, `cache/`, `event/`, `trigger/`,
//! `engine/`, as
//! `docs/ARCHITECTURE.md` describes. `Process` runs workflows in memory; the
//! async, durable engine around it is not built yet.
//!
//! ## Where to start reading
//!
//! `model/mod.rs`, then `model/workflow.rs` and `model/validate.rs`;
//! `tree/mod.rs`; `script/mod.rs`; `package/mod.rs`; `store/mod.rs`;
//! `time/mod.rs`; `scheduler/process.rs` for how a workflow runs.

pub mod engine;
pub mod model;
pub mod package;
pub mod scheduler;
pub mod script;
pub mod store;
pub mod time;
pub mod tree;
