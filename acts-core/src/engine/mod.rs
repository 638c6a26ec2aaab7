//! The engine: deploy models, start processes, answer their interrupt
//! requests, and hear what they do — durably, on any `KvStore`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), acts_core::engine::EngineError> {
//! use acts_core::engine::{Engine, ChannelOptions};
//! use acts_core::model::{Vars, Workflow};
//!
//! let engine = Engine::builder().start().await?; // in-memory store
//! let exec = engine.executor();
//! exec.model().deploy_yaml("id: m1\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.core.irq\n").await?;
//! let mut messages = engine.channel(ChannelOptions::default().with_type("act")).subscribe();
//! let proc = exec.proc().start("m1", Vars::new()).await?;
//! let irq = messages.recv().await.expect("the irq is announced");
//! exec.act().complete(&proc.pid, &irq.tid, Vars::new()).await?;
//! # Ok(()) }
//! ```
//!
//! - [`Engine::builder`] → [`EngineBuilder`]: store, cache cap, clock,
//!   script limits, application packages.
//! - [`Executor`]: grouped by concern — [`model()`](Executor::model),
//!   [`proc()`](Executor::proc), [`task()`](Executor::task),
//!   [`act()`](Executor::act) (every client action), [`evt()`](Executor::evt)
//!   (triggers), [`msg()`](Executor::msg) (deliveries),
//!   [`pack()`](Executor::pack), [`bulk()`](Executor::bulk).
//! - [`Channel`]: messages, with glob filters.
//!
//! ## The rooms
//!
//! Each room's `mod.rs` says what it may use, and `tests/core_suites/layout.rs`
//! checks that line against the imports. From the bottom:
//!
//! - `types`: the vocabulary every room shares — [`EngineError`], the
//!   `Info` views, principals and roles, the application-package
//!   interface, channel filters. It uses no other room.
//! - `persist`: the rows and the one place that turns a process into rows
//!   and back (and rows into `Info` views); it uses `types`.
//! - `kernel`: the runtime core — the shared state ([`EngineConfig`]), one
//!   transition and its batch, the resident cache, loading and recovery,
//!   deploying and starting, what a committed transition sets off. It uses
//!   `types` and `persist`, and reaches the services only through the
//!   hooks the builder passes in.
//! - `services`: deliveries, triggers, housekeeping, sealed data (the
//!   reference's snapshots), the stuck detector, the lease, readiness —
//!   built on the kernel (they implement its hooks).
//! - [`api`]: what embedders use — [`Engine`] and its builder, the
//!   [`Executor`], [`Channel`]s, the queries. It may use every other room.
//!
//! May use: `durable`, `model`, `package`, `scheduler`, `script`, `time`,
//! `tree` (every other folder of the crate).

pub mod api;
pub(crate) mod kernel;
pub(crate) mod persist;
pub(crate) mod services;
pub(crate) mod types;

pub use api::TASK_CURSOR_PATTERN;
pub use api::find::{CURSOR_PATTERN, encode_cursor, hex_bytes};
pub use api::{
    ActOps, ActPackage, BulkAction, BulkItem, BulkJob, BulkOps, BulkOutcome, BulkPreview,
    BulkRequest, BulkState, Cache, Census, Channel, ChannelOps, ChannelOptions, DEFAULT_BULK_RATE,
    DeliveryInfo, DeliveryOps, DeliveryQuery, DeliveryState, Engine, EngineBuilder, EngineError,
    EngineStats, Executor, GateKeyUse, KeyUse, MAX_BULK_RATE, MAX_BULK_REASON, MAX_PAGE,
    MigrationPlan, MigrationReport, ModelInfo, ModelOps, ModelVersionInfo, PackageContext,
    PackageFailure, PackageInfo, PackageOps, Page, Principal, ProcInfo, ProcOps, ProcessMigration,
    ProcessQuery, ROLE_ADMIN, ROLE_OPERATOR, RuntimeOps, StorageOps, TaskInfo, TaskMoveInfo,
    TaskOps, TaskQuery, TriggerInfo, TriggerOps, USER_ACTIONS, VarFilter, WaitingFor,
};
pub use kernel::{EngineConfig, GateCourier, GateReply, GateRoute, PidFilter, SpanExport};
pub use persist::format::STORE_FORMAT;
pub use services::{LeaseConfig, LeaseInfo, MAX_TTL_SECS, SealOptions, SealedData, SealedEntry};
pub use types::numbers::whole_numbers_as_integers;

/// Test hooks (feature `testing`): the row types, so tests can read and
/// plant what the engine stores. Not API — the storage schema changes
/// without notice.
#[cfg(feature = "testing")]
pub mod testing {
    pub use super::api::ProcHandle;
    pub use super::persist::bulk_rows::{BulkItemRow, BulkJobRow};
    pub use super::persist::delivery_rows::{ChannelRow, DeliveryRow, MessageRow, delivery_row_id};
    pub use super::persist::model_rows::{ModelRow, PackageRow};
    pub use super::persist::rows::{
        ConcurrencySlot, MetaRow, NodeRow, OpRow, PROC_INDEX, ProcRow, TaskRow, VarsRow,
        WAKE_INDEX_COMPLETE, WakeRow, node_row_id, task_row_id,
    };
    pub use super::persist::trigger_rows::TriggerRow;
}
