//! The engine's public face: what an embedding application uses.
//!
//! [`Engine`] (built by [`EngineBuilder`]) owns a running engine; its
//! [`Executor`] deploys models, starts processes and applies client
//! actions; [`Channel`]s carry messages filtered by [`ChannelOptions`];
//! [`ActPackage`] is how an application adds its own packages. Calls return
//! the `Info` types ([`ProcInfo`], [`TaskInfo`], [`ModelInfo`],
//! [`DeliveryInfo`], [`TriggerInfo`], [`PackageInfo`]) — never rows — and fail
//! with [`EngineError`].
//!
//! May use: `types`, `persist`, `kernel`, `services` (every room of the
//! engine: it is the top).

mod builder;
mod bulk;
mod bulk_check;
mod bulk_run;
mod census;
pub(crate) mod channel;
mod engine;
mod engine_ops;
pub(crate) mod executor;
pub(crate) mod find;
mod find_deliveries;
mod find_tasks;
mod model_ops;
mod operate;
mod other_ops;
mod proc_ops;
mod task_ops;

#[cfg(feature = "testing")]
pub use crate::engine::kernel::cache::ProcHandle;
pub use crate::engine::kernel::cache::{Cache, KeyUse};
pub use crate::engine::kernel::gates::act_gates::GateKeyUse;
pub use crate::engine::types::access::{Principal, ROLE_ADMIN, ROLE_OPERATOR, USER_ACTIONS};
pub use crate::engine::types::bulk::{BulkOutcome, BulkState};
pub use crate::engine::types::error::EngineError;
pub use crate::engine::types::filter::ChannelOptions;
pub use crate::engine::types::info::DeliveryState;
pub use crate::engine::types::info::{
    DeliveryInfo, MigrationPlan, MigrationReport, ModelInfo, ModelVersionInfo, PackageInfo,
    ProcInfo, ProcessMigration, TaskInfo, TaskMoveInfo, TriggerInfo, WaitingFor,
};
pub use crate::engine::types::package::{ActPackage, PackageContext, PackageFailure};
pub use crate::engine::types::page::Page;
pub use builder::EngineBuilder;
pub use bulk::{
    BulkAction, BulkItem, BulkJob, BulkPreview, BulkRequest, DEFAULT_BULK_RATE, MAX_BULK_RATE,
    MAX_BULK_REASON,
};
pub use census::Census;
pub use channel::Channel;
pub use engine::{Engine, EngineStats};
pub use engine_ops::{ChannelOps, RuntimeOps, StorageOps};
pub use executor::Executor;
pub use find::{MAX_PAGE, ProcessQuery, VarFilter};
pub use find_deliveries::DeliveryQuery;
pub use find_tasks::{MAX_PROCESSES_PER_PAGE, TASK_CURSOR_PATTERN, TaskQuery};
pub use model_ops::ModelOps;
pub use other_ops::{BulkOps, DeliveryOps, PackageOps, TriggerOps};
pub use proc_ops::ProcOps;
pub use task_ops::{ActOps, TaskOps};
