//! [`Acts`]: what the CLI's commands ask of acts — one interface, two
//! transports: the engine in this process on a store (`local.rs`) and a
//! running `acts serve` over HTTP (`client.rs`). Every command that works
//! both ways is written once against it (`calls.rs`); a gRPC client would
//! be a third implementation.
//!
//! Each method fails with a [`Failure`] whose exit code says whose fault it
//! is (2: the input, 1: the run), the same on both transports.

use std::time::Duration;

use acts::{
    BulkItem, BulkJob, BulkOutcome, BulkPreview, BulkRequest, DeliveryInfo, DeliveryQuery,
    MigrationPlan, MigrationReport, ModelInfo, ModelVersionInfo, ProcInfo, ProcessQuery, TaskInfo,
    TaskQuery, Vars,
};
use async_trait::async_trait;

use crate::failure::Failure;

/// One page of a query: its items and the cursor of the next page.
pub(crate) type Paged<T> = (Vec<T>, Option<String>);

/// An operator control of one process.
#[derive(Debug, Clone)]
pub(crate) enum Control {
    Pause { reason: String },
    Resume,
    Terminate { reason: String },
    Rewind { to: String, vars: Vars },
    Retry { task: Option<String>, vars: Vars },
}

/// What the commands ask of acts (see the module docs).
#[async_trait]
pub(crate) trait Acts: Sync {
    /// Deploys a model's text (YAML or JSON).
    async fn deploy(&self, text: String) -> Result<ModelInfo, Failure>;
    /// The deployed models.
    async fn models(&self) -> Result<Vec<ModelInfo>, Failure>;
    /// The versions of model `model`.
    async fn versions(&self, model: &str) -> Result<Vec<ModelVersionInfo>, Failure>;
    /// Removes version `rev` of model `model`.
    async fn remove_version(&self, model: &str, rev: u32) -> Result<(), Failure>;
    /// Migrates (or with `dry_run`, checks) the live processes of a version.
    async fn migrate(
        &self,
        plan: &MigrationPlan,
        dry_run: bool,
    ) -> Result<MigrationReport, Failure>;
    /// Starts a process of `model` (version `rev`, else the latest).
    async fn start(&self, model: &str, rev: Option<u32>, vars: Vars) -> Result<ProcInfo, Failure>;
    /// A process and its tasks.
    async fn process(&self, pid: &str) -> Result<(ProcInfo, Vec<TaskInfo>), Failure>;
    /// The processes quiet for longer than `after`.
    async fn stuck(&self, after: Duration) -> Result<Vec<ProcInfo>, Failure>;
    /// One page of the processes matching `q`.
    async fn find_processes(&self, q: &ProcessQuery) -> Result<Paged<ProcInfo>, Failure>;
    /// How many processes match `q`.
    async fn count_processes(&self, q: &ProcessQuery) -> Result<usize, Failure>;
    /// One page of the tasks matching `q`.
    async fn find_tasks(&self, q: &TaskQuery) -> Result<Paged<TaskInfo>, Failure>;
    /// How many tasks match `q`.
    async fn count_tasks(&self, q: &TaskQuery) -> Result<usize, Failure>;
    /// One page of the deliveries matching `q`.
    async fn find_deliveries(&self, q: &DeliveryQuery) -> Result<Paged<DeliveryInfo>, Failure>;
    /// How many deliveries match `q`.
    async fn count_deliveries(&self, q: &DeliveryQuery) -> Result<usize, Failure>;
    /// Applies `action` (an action name, or `push` under a step) to task
    /// `tid` of process `pid`.
    async fn act(&self, pid: &str, tid: &str, action: &str, vars: Vars) -> Result<(), Failure>;
    /// An operator control of process `pid`.
    async fn control(&self, pid: &str, control: Control) -> Result<(), Failure>;
    /// Gives a dead letter another round.
    async fn redeliver(&self, channel: &str, msg: &str) -> Result<(), Failure>;
    /// Discards a dead letter.
    async fn discard(&self, channel: &str, msg: &str) -> Result<(), Failure>;
    /// How many processes bulk job `r` would touch, and the first 20.
    async fn bulk_preview(&self, r: &BulkRequest) -> Result<BulkPreview, Failure>;
    /// Starts bulk job `r`.
    async fn bulk_start(&self, r: BulkRequest) -> Result<BulkJob, Failure>;
    /// Bulk job `id`.
    async fn bulk_job(&self, id: &str) -> Result<BulkJob, Failure>;
    /// One page of the bulk jobs, newest first.
    async fn bulk_jobs(&self, cursor: Option<&str>) -> Result<Paged<BulkJob>, Failure>;
    /// One page of what job `id` did to each process.
    async fn bulk_items(
        &self,
        id: &str,
        outcome: Option<BulkOutcome>,
        cursor: Option<&str>,
    ) -> Result<Paged<BulkItem>, Failure>;
    /// Removes bulk job `id` and its report.
    async fn remove_bulk(&self, id: &str) -> Result<(), Failure>;
    /// Cancels bulk job `id`.
    async fn cancel_bulk(&self, id: &str) -> Result<BulkJob, Failure>;
    /// Works on bulk job `id` here if nobody does (a server works on its
    /// jobs itself: nothing to do there).
    async fn resume_bulk(&self, id: &str) -> Result<(), Failure>;
}
