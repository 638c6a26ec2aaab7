//! The rows of bulk jobs: the job (its request, where its walk over the
//! matching processes stands, its counts) and one record per process it
//! handled, written in the same batch as the change it made — so a job
//! that resumes after a crash knows, for every process of the page it was
//! working on, whether it already acted on it.

use acts_store::BatchOp;
use serde::{Deserialize, Serialize};

use crate::durable::{Collection, IndexValue, impl_row};
use crate::engine::types::bulk::{BulkOutcome, BulkState};

/// How many processes of each outcome a job handled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkCounts {
    /// Changed.
    pub done: u64,
    /// Refused by the process, or no longer there; unchanged.
    pub skipped: u64,
    /// Could not be changed; unchanged.
    pub failed: u64,
}

impl BulkCounts {
    /// Counts one more `outcome`.
    pub fn add(&mut self, outcome: BulkOutcome) {
        match outcome {
            BulkOutcome::Done => self.done += 1,
            BulkOutcome::Skipped => self.skipped += 1,
            BulkOutcome::Failed => self.failed += 1,
        }
    }
}

/// A bulk job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BulkJobRow {
    /// The job's id.
    pub id: String,
    /// What it does and to which processes (the API's request, as JSON:
    /// rows know nothing of the API's types).
    pub request: serde_json::Value,
    /// Who asked (its actions are recorded as theirs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// When it was asked for (ms).
    pub created_at: i64,
    /// Where it stands.
    pub state: BulkState,
    /// When it stopped (ms; 0 while running).
    #[serde(default)]
    pub finished_at: i64,
    /// How many processes matched when it began (counted once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// The query cursor of the next page of matches (`None` with
    /// `exhausted`: no page is left; `None` before the first page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Whether the query has no page left.
    #[serde(default)]
    pub exhausted: bool,
    /// The pids of the page being worked on (each handled at most once:
    /// its record says so).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub page: Vec<String>,
    /// The outcomes counted up to the page being worked on.
    #[serde(default)]
    pub counts: BulkCounts,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl_row!(BulkJobRow, "bulk_jobs", version = 1, |r| r.id.clone(), {
    "created_at" => IndexValue::Int(r.created_at),
});

/// What a job did to one process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BulkItemRow {
    /// The job.
    pub job: String,
    /// The process.
    pub pid: String,
    /// What happened.
    pub outcome: BulkOutcome,
    /// Why (a skip's or a failure's reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When (ms).
    pub at: i64,
}

impl_row!(BulkItemRow, "bulk_items", version = 1, |r| bulk_item_id(&r.job, &r.pid), {
    "job" => IndexValue::Str(r.job.clone()),
});

/// The id of job `job`'s record of process `pid`.
pub fn bulk_item_id(job: &str, pid: &str) -> String {
    format!("{job}/{pid}")
}

/// The ops that store `row` (a new record: it has no older one).
pub fn bulk_item_ops(row: &BulkItemRow) -> Vec<BatchOp> {
    Collection::<BulkItemRow>::upsert_ops(None, row)
}

/// The ops that store `row` in place of `old`.
pub fn bulk_job_ops(old: Option<&BulkJobRow>, row: &BulkJobRow) -> Vec<BatchOp> {
    Collection::<BulkJobRow>::upsert_ops(old, row)
}

/// The ops that delete record `row`.
pub fn bulk_item_delete_ops(row: &BulkItemRow) -> Vec<BatchOp> {
    Collection::<BulkItemRow>::delete_ops(row)
}

/// The ops that delete job `row` (its records are deleted apart).
pub fn bulk_job_delete_ops(row: &BulkJobRow) -> Vec<BatchOp> {
    Collection::<BulkJobRow>::delete_ops(row)
}
