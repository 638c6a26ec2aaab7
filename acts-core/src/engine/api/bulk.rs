//! Bulk jobs: one operator action (pause, resume, terminate, retry,
//! rewind, migrate, remove) applied to every process a [`ProcessQuery`]
//! matches — "retry every process that failed with ecode `timeout` last
//! night" without a script that loops over pids.
//!
//! A job is durable: its row holds the request, where its walk over the
//! matches stands (the query's cursor and the page being worked on) and
//! its counts; each process it handles gets a record written *in the same
//! batch* as the change (a retry's transition, a removal's deletes). A job
//! that resumes after a crash or a restart reads the records of its page
//! first, so each process is acted on at most once, and every process
//! that matched is handled. It paces itself (`per_second`, its own budget
//! beside live traffic), can be cancelled, and reports what it did to
//! each process ([`BulkOps::items`]). The runner is in `bulk_run.rs`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::durable::{Filter, Query};
use crate::model::Vars;

use crate::engine::api::executor::Executor;
use crate::engine::api::find::{MAX_PAGE, ProcessQuery, decode_cursor, encode_cursor};
use crate::engine::persist::bulk_rows::{
    BulkCounts, BulkItemRow, BulkJobRow, bulk_item_delete_ops, bulk_job_delete_ops, bulk_job_ops,
};
use crate::engine::types::bulk::{BulkOutcome, BulkState};
use crate::engine::types::error::EngineError;
use crate::engine::types::info::ProcInfo;
use crate::engine::types::page::Page;

/// The pace of a job that names none (processes per second).
pub const DEFAULT_BULK_RATE: u32 = 1000;
/// The fastest pace a job may ask for (processes per second).
pub const MAX_BULK_RATE: u32 = 100_000;
/// The longest `reason` of a bulk job, in characters.
pub const MAX_BULK_REASON: usize = 1024;

/// What a bulk job does to each matching process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[non_exhaustive]
pub enum BulkAction {
    /// Pause it ([`ProcOps::pause`]; `reason`).
    Pause,
    /// Resume a paused one ([`ProcOps::unpause`]).
    Resume,
    /// Terminate it ([`ProcOps::terminate`]; `reason`).
    Terminate,
    /// Retry one that ended in an error ([`ProcOps::retry`];
    /// `vars`).
    Retry,
    /// Rewind it to `step` ([`ProcOps::rewind`]; `vars`).
    Rewind,
    /// Move it to `version` of its model (`map`, `vars`: as a
    /// [`MigrationPlan`](crate::engine::MigrationPlan)'s).
    Migrate,
    /// Remove it and every row of it.
    Remove,
}

impl BulkAction {
    /// The action's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            BulkAction::Pause => "pause",
            BulkAction::Resume => "resume",
            BulkAction::Terminate => "terminate",
            BulkAction::Retry => "retry",
            BulkAction::Rewind => "rewind",
            BulkAction::Migrate => "migrate",
            BulkAction::Remove => "remove",
        }
    }
}

/// A bulk job to run: an action, the processes it applies to, and the
/// action's options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BulkRequest {
    /// The job's id (letters, digits, `-`, `_`; at most 64; default: one
    /// is drawn). A start naming the id of a job that exists starts
    /// nothing: it returns that job when the request is the same (a
    /// retried start) and fails with `409` otherwise. A cluster gives
    /// every partition's part of a job the same id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What to do to each process.
    pub action: BulkAction,
    /// Which processes (its `limit` and `cursor` are ignored: every match
    /// is handled).
    #[serde(
        rename = "where",
        default,
        deserialize_with = "crate::engine::api::find::object_only"
    )]
    pub query: ProcessQuery,
    /// Why (`pause`, `terminate`; recorded in each process's history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Process variables to set (`retry`, `rewind`, `migrate`).
    #[serde(default, skip_serializing_if = "Vars::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub vars: Vars,
    /// The step to go back to (`rewind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The version to move to (`migrate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    /// Old node id → new node id (`migrate`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub map: BTreeMap<String, String>,
    /// The job's pace, processes per second (default
    /// [`DEFAULT_BULK_RATE`], at most [`MAX_BULK_RATE`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_second: Option<u32>,
    /// Whether a query with no filter (every process) is meant: a job
    /// over every process is refused without it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
}

impl BulkRequest {
    /// A job doing `action` to the processes `query` matches.
    pub fn new(action: BulkAction, query: ProcessQuery) -> Self {
        Self {
            id: None,
            action,
            query,
            reason: None,
            vars: Vars::new(),
            step: None,
            version: None,
            map: BTreeMap::new(),
            per_second: None,
            all: false,
        }
    }

    /// Over every process when the query has no filter (see
    /// [`all`](Self::all)).
    pub fn every_process(mut self) -> Self {
        self.all = true;
        self
    }

    /// With `reason` (pause, terminate).
    pub fn reason(mut self, reason: &str) -> Self {
        self.reason = Some(reason.to_owned());
        self
    }

    /// With `vars` (retry, rewind, migrate).
    pub fn vars(mut self, vars: Vars) -> Self {
        self.vars = vars;
        self
    }

    /// Back to `step` (rewind).
    pub fn step(mut self, step: &str) -> Self {
        self.step = Some(step.to_owned());
        self
    }

    /// To `version` (migrate).
    pub fn version(mut self, version: u32) -> Self {
        self.version = Some(version);
        self
    }

    /// At `n` processes per second.
    pub fn per_second(mut self, n: u32) -> Self {
        self.per_second = Some(n);
        self
    }

    /// The pace asked for.
    pub(super) fn rate(&self) -> u32 {
        self.per_second.unwrap_or(DEFAULT_BULK_RATE)
    }

    /// The query every page of the job reads (`limit` per page, from the
    /// start).
    pub(super) fn page_query(&self, limit: usize, cursor: Option<String>) -> ProcessQuery {
        ProcessQuery {
            limit: Some(limit),
            cursor,
            ..self.query.clone()
        }
    }
}

/// What a job would touch ([`BulkOps::preview`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BulkPreview {
    /// How many processes match now.
    pub count: usize,
    /// The first of them (at most 20), in the query's order.
    pub sample: Vec<ProcInfo>,
}

/// A bulk job and where it stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BulkJob {
    /// The job's id.
    pub id: String,
    /// What it does.
    pub request: BulkRequest,
    /// Where it stands.
    pub state: BulkState,
    /// Who asked for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// When it was asked for (ms).
    pub created_at: i64,
    /// When it stopped (ms; absent while running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<i64>,
    /// How many processes matched when it began (absent until counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Processes changed.
    pub done: u64,
    /// Processes that refused the action, or were gone; unchanged.
    pub skipped: u64,
    /// Processes the action could not be applied to; unchanged.
    pub failed: u64,
    /// Whether an engine works on it now (a running job with none goes on
    /// when the store is next served, e.g. by `acts serve`).
    pub active: bool,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a job did to one process ([`BulkOps::items`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BulkItem {
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

impl Executor {
    /// `bulk().preview` ([`BulkOps::preview`](super::BulkOps::preview)).
    pub(crate) async fn bulk_preview(
        &self,
        request: &BulkRequest,
    ) -> Result<BulkPreview, EngineError> {
        self.need_operator("previewing a bulk job")?;
        request.check()?;
        let count = self.count_matching(&request.query).await?;
        let sample = self
            .find_processes(&request.page_query(20, None))
            .await?
            .items;
        Ok(BulkPreview { count, sample })
    }

    /// `bulk().start` ([`BulkOps::start`](super::BulkOps::start)).
    pub(crate) async fn bulk_start(&self, request: BulkRequest) -> Result<BulkJob, EngineError> {
        self.need_operator("starting a bulk job")?;
        request.check()?;
        self.rt
            .check_vars_size("the bulk job's vars", &request.vars)?;
        // A query that cannot be answered fails now, not in the job.
        self.find_processes(&request.page_query(1, None)).await?;
        if let Some(id) = &request.id {
            match self.bulk_row(id).await {
                // Started before: the same request is the same job.
                Ok(row) if row.request == serde_json::to_value(&request).unwrap_or_default() => {
                    return self.bulk_view(row);
                }
                Ok(_) => return Err(EngineError::BulkJobExists(id.clone())),
                Err(EngineError::BulkJobNotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let row = BulkJobRow {
            id: request
                .id
                .clone()
                .unwrap_or_else(|| format!("bulk-{}", crate::tree::short_id())),
            request: serde_json::to_value(&request)
                .map_err(|e| EngineError::Query(format!("the request does not encode: {e}")))?,
            by: self.by().map(str::to_owned),
            created_at: self.rt.now(),
            state: BulkState::Running,
            finished_at: 0,
            total: None,
            cursor: None,
            exhausted: false,
            page: Vec::new(),
            counts: BulkCounts::default(),
            error: None,
        };
        self.rt.write(None, bulk_job_ops(None, &row)).await?;
        self.resume_bulk(&row.id).await?;
        self.bulk_view(row)
    }

    /// `bulk().get` ([`BulkOps::get`](super::BulkOps::get)).
    pub(crate) async fn bulk_job(&self, id: &str) -> Result<BulkJob, EngineError> {
        self.need_operator("reading a bulk job")?;
        let row = self.bulk_row(id).await?;
        self.bulk_view(row)
    }

    /// `bulk().list` ([`BulkOps::list`](super::BulkOps::list)).
    pub(crate) async fn bulk_jobs(
        &self,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<Page<BulkJob>, EngineError> {
        self.need_operator("listing bulk jobs")?;
        let mut query = Query::new()
            .order_by("created_at", true)
            .limit(limit.unwrap_or(100).clamp(1, MAX_PAGE));
        query.after = cursor.map(decode_cursor).transpose()?;
        let page = self
            .rt
            .reads()
            .page::<BulkJobRow>(None, true, &query)
            .await?;
        let jobs = page
            .rows
            .into_iter()
            .map(|r| self.bulk_view(r))
            .collect::<Result<_, _>>()?;
        Ok(Page::new(jobs, page.next.as_deref().map(encode_cursor)))
    }

    /// `bulk().items` ([`BulkOps::items`](super::BulkOps::items)).
    pub(crate) async fn bulk_items(
        &self,
        id: &str,
        outcome: Option<BulkOutcome>,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<Page<BulkItem>, EngineError> {
        self.need_operator("reading a bulk job's report")?;
        self.bulk_row(id).await?;
        let mut query = Query::new()
            .filter(Filter::eq("job", id))
            .limit(limit.unwrap_or(100).clamp(1, MAX_PAGE));
        if let Some(o) = outcome {
            query = query.filter(Filter::eq("outcome", o.as_str()));
        }
        query.after = cursor.map(decode_cursor).transpose()?;
        let page = self
            .rt
            .reads()
            .page::<BulkItemRow>(None, false, &query)
            .await?;
        let items = page
            .rows
            .into_iter()
            .map(|r| BulkItem {
                pid: r.pid,
                outcome: r.outcome,
                reason: r.reason,
                at: r.at,
            })
            .collect();
        Ok(Page::new(items, page.next.as_deref().map(encode_cursor)))
    }

    /// `bulk().cancel` ([`BulkOps::cancel`](super::BulkOps::cancel)).
    pub(crate) async fn cancel_bulk(&self, id: &str) -> Result<BulkJob, EngineError> {
        self.need_operator("cancelling a bulk job")?;
        let runs = self.services.bulk_runs();
        // Bounded: a runner that starts in between is told to stop too.
        for _ in 0..100 {
            if let Some(mut ended) = runs.stop(id) {
                // The runner writes the job's end, then lets go.
                while ended.changed().await.is_ok() {}
            }
            let Some(_claim) = runs.claim(id) else {
                continue;
            };
            let row = self.bulk_row(id).await?;
            if row.state.is_final() {
                return self.bulk_view(row);
            }
            // Nobody works on it here: end it.
            let mut ended = row.clone();
            ended.state = BulkState::Cancelled;
            ended.finished_at = self.rt.now();
            self.rt
                .write(None, bulk_job_ops(Some(&row), &ended))
                .await?;
            return self.bulk_view(ended);
        }
        Err(EngineError::Query(format!(
            "bulk job '{id}' kept being taken up while it was cancelled; cancel it again"
        )))
    }

    /// `bulk().remove` ([`BulkOps::remove`](super::BulkOps::remove)).
    pub(crate) async fn remove_bulk(&self, id: &str) -> Result<(), EngineError> {
        self.need_operator("removing a bulk job")?;
        let Some(_claim) = self.services.bulk_runs().claim(id) else {
            return Err(EngineError::BulkJobRunning(id.to_owned()));
        };
        let row = self.bulk_row(id).await?;
        if !row.state.is_final() {
            return Err(EngineError::BulkJobRunning(id.to_owned()));
        }
        // The records a page at a time (a removal cut short leaves the job,
        // and removing it again goes on), then the job.
        let query = Query::new().filter(Filter::eq("job", id)).limit(MAX_PAGE);
        loop {
            let page = self
                .rt
                .reads()
                .page::<BulkItemRow>(None, false, &query)
                .await?;
            let ops: Vec<_> = page.rows.iter().flat_map(bulk_item_delete_ops).collect();
            self.rt.write(None, ops).await?;
            if page.next.is_none() {
                break;
            }
        }
        self.rt.write(None, bulk_job_delete_ops(&row)).await
    }

    /// `bulk().resume` ([`BulkOps::resume`](super::BulkOps::resume)).
    pub(crate) async fn resume_bulk(&self, id: &str) -> Result<(), EngineError> {
        self.need_operator("resuming a bulk job")?;
        let Some(claim) = self.services.bulk_runs().claim(id) else {
            return Ok(()); // worked on already
        };
        let runner = Executor::new(self.rt.clone(), self.services.clone());
        let id = id.to_owned();
        self.rt
            .spawn(async move { runner.run_bulk(id, claim).await });
        Ok(())
    }

    /// Works on every running bulk job nobody works on here.
    pub(crate) async fn resume_bulk_jobs(&self) -> Result<(), EngineError> {
        let query = Query::new().filter(Filter::eq("state", BulkState::Running.as_str()));
        let rows = self.rt.reads().all::<BulkJobRow>(&query).await?;
        for row in rows {
            self.resume_bulk(&row.id).await?;
        }
        Ok(())
    }

    async fn bulk_row(&self, id: &str) -> Result<BulkJobRow, EngineError> {
        self.rt
            .reads()
            .row::<BulkJobRow>(id)
            .await?
            .ok_or_else(|| EngineError::BulkJobNotFound(id.to_owned()))
    }

    fn bulk_view(&self, row: BulkJobRow) -> Result<BulkJob, EngineError> {
        let runs = self.services.bulk_runs();
        let active = runs.is_held(&row.id);
        // A runner here is ahead of the row (written once per page).
        let counts = match runs.counts(&row.id) {
            Some(live) if !row.state.is_final() => live,
            _ => row.counts,
        };
        Ok(BulkJob {
            active: active && !row.state.is_final(),
            request: stored_request(&row)?,
            id: row.id,
            state: row.state,
            by: row.by,
            created_at: row.created_at,
            finished_at: (row.finished_at > 0).then_some(row.finished_at),
            total: row.total,
            done: counts.done,
            skipped: counts.skipped,
            failed: counts.failed,
            error: row.error,
        })
    }
}

/// The request job `row` stores.
pub(super) fn stored_request(row: &BulkJobRow) -> Result<BulkRequest, EngineError> {
    serde_json::from_value(row.request.clone()).map_err(|e| {
        EngineError::Corrupt(format!(
            "bulk job '{}': its stored request does not read ({e}); was it written by a newer engine?",
            row.id
        ))
    })
}
