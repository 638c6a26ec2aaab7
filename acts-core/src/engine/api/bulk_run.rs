//! The runner of a bulk job (see `bulk.rs`): it walks the job's query a
//! page at a time, stores each page's pids in the job's row before acting
//! on them, acts on a few processes of the page at once at the job's
//! pace, and records each outcome — a change's record in the change's own
//! batch. A store fault stops the page; the runner reads the job back and
//! goes on (the records say what is done). It ends the job when the query
//! has no page left, when told to stop (cancelled), or when the query no
//! longer reads (failed); an engine that closes leaves it running in the
//! store for the next engine.

use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::warn;

use crate::engine::api::bulk::{BulkAction, BulkRequest, stored_request};
use crate::engine::api::executor::Executor;
use crate::engine::persist::bulk_rows::{
    BulkCounts, BulkItemRow, BulkJobRow, bulk_item_id, bulk_item_ops, bulk_job_ops,
};
use crate::engine::services::bulk_runs::BulkClaim;
use crate::engine::types::bulk::{BulkOutcome, BulkState};
use crate::engine::types::error::EngineError;

/// Processes per page of the job's walk (and per checkpoint of its row).
const PAGE: usize = 100;
/// Processes of a page acted on at once at the most (their batches share
/// group commits).
const PARALLEL: usize = 32;
/// How many times one process is tried again at once after a store fault
/// before its page waits and goes on later.
const QUICK_TRIES: usize = 16;
/// The longest wait before a job interrupted by a store fault tries again.
const RETRY_AT_MOST: Duration = Duration::from_millis(250);
/// How long one process may keep the job waiting for an admission place
/// or a concurrency slot before it is recorded as failed.
const PATIENCE: Duration = Duration::from_secs(600);

impl Executor {
    /// Works on job `id` until it ends or the engine closes.
    pub(super) async fn run_bulk(self, id: String, claim: BulkClaim) {
        let mut wait = Duration::from_millis(50);
        let mut faults = 0u64;
        loop {
            match self.work_bulk(&id, &claim).await {
                Ok(()) => return,
                Err(e) => {
                    if self.rt.is_closed()
                        || matches!(e, EngineError::Closed | EngineError::Fenced(_))
                    {
                        return;
                    }
                    // Said once per outage (and then every hundredth try).
                    if faults.is_multiple_of(100) {
                        warn!(job = %id, error = %e, "bulk job interrupted; going on where it was");
                    }
                    faults += 1;
                    // A short wait: a retry is a read or two, and the job
                    // goes on as soon as the store answers again.
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = self.rt.until_closed() => return,
                    }
                    wait = (wait * 2).min(RETRY_AT_MOST);
                }
            }
        }
    }

    async fn work_bulk(&self, id: &str, claim: &BulkClaim) -> Result<(), EngineError> {
        let Some(mut row) = self.rt.reads().row::<BulkJobRow>(id).await? else {
            return Ok(()); // gone
        };
        if row.state.is_final() {
            return Ok(());
        }
        let request = match stored_request(&row) {
            Ok(r) => r,
            Err(e) => return self.end_bulk(&row, BulkState::Failed, Some(e)).await,
        };
        if row.total.is_none() {
            let total = match self.count_matching(&request.query).await {
                Ok(n) => n as u64,
                Err(e @ (EngineError::Query(_) | EngineError::Conflict(_))) => {
                    return self.end_bulk(&row, BulkState::Failed, Some(e)).await;
                }
                Err(e) => return Err(e),
            };
            row = self.save_bulk(&row, |r| r.total = Some(total)).await?;
        }
        let mut pace = Pace::new(request.rate());
        loop {
            if claim.stopped() {
                return self.end_bulk(&row, BulkState::Cancelled, None).await;
            }
            if row.page.is_empty() {
                if row.exhausted {
                    return self.end_bulk(&row, BulkState::Done, None).await;
                }
                let q = request.page_query(PAGE, row.cursor.clone());
                let page = match self.find_processes(&q).await {
                    Ok(p) => p,
                    Err(e @ (EngineError::Query(_) | EngineError::Conflict(_))) => {
                        return self.end_bulk(&row, BulkState::Failed, Some(e)).await;
                    }
                    Err(e) => return Err(e),
                };
                let pids: Vec<String> = page.items.into_iter().map(|p| p.pid).collect();
                row = self
                    .save_bulk(&row, |r| {
                        r.page = pids;
                        r.exhausted = page.next.is_none();
                        r.cursor = page.next;
                    })
                    .await?;
                continue;
            }
            let counts = self.work_page(&row, &request, &mut pace, claim).await?;
            row = self
                .save_bulk(&row, |r| {
                    r.counts = counts;
                    r.page.clear();
                })
                .await?;
            // Told to stop within the page: the rest of it is not done.
            // (The loop's first check ends the job.)
        }
    }

    /// Acts on the processes of the job's page that have no record yet;
    /// returns the counts with the page's outcomes added — all of the
    /// page's, unless the job was told to stop (then the rest of the page
    /// is left undone, as a cancel leaves it).
    async fn work_page(
        &self,
        row: &BulkJobRow,
        request: &BulkRequest,
        pace: &mut Pace,
        claim: &BulkClaim,
    ) -> Result<BulkCounts, EngineError> {
        let mut counts = row.counts;
        let ids: Vec<String> = row
            .page
            .iter()
            .map(|pid| bulk_item_id(&row.id, pid))
            .collect();
        let recorded = self.rt.reads().rows::<BulkItemRow>(&ids).await?;
        let mut todo = Vec::new();
        for (pid, record) in row.page.iter().zip(recorded) {
            match record {
                // Handled before an interruption: counted, not redone.
                Some(r) => counts.add(r.outcome),
                None => todo.push(pid.clone()),
            }
        }
        let mut todo = todo.into_iter().peekable();
        let mut running = JoinSet::new();
        let mut fault = None;
        let mut halted = false;
        loop {
            let launch = !halted
                && running.len() < PARALLEL
                && fault.is_none()
                && !claim.stopped()
                && todo.peek().is_some();
            tokio::select! {
                // Outcomes are counted as they come (the progress a
                // caller reads), while the next turn is waited for.
                Some(joined) = running.join_next(), if !running.is_empty() => match joined {
                    Ok(Ok(outcome)) => {
                        counts.add(outcome);
                        claim.publish(counts);
                    }
                    Ok(Err(e)) => {
                        fault.get_or_insert(e);
                    }
                    Err(e) => {
                        fault.get_or_insert(EngineError::Query(format!(
                            "a bulk job's step ended abnormally: {e}"
                        )));
                    }
                },
                turn = pace.wait(self, claim), if launch => match (turn, todo.next()) {
                    (true, Some(pid)) => {
                        let (me, request, job) = (self.clone(), request.clone(), row.clone());
                        running.spawn(async move { me.bulk_one(&job, &request, &pid).await });
                    }
                    // Told to stop, or the engine closed.
                    _ => halted = true,
                },
                else => break,
            }
        }
        match fault {
            Some(e) => Err(e),
            // Cut short by the close: nothing of the page is settled here
            // (the next engine reads its records).
            None if self.rt.is_closed() => Err(EngineError::Closed),
            None if !claim.stopped() && todo.peek().is_some() => Err(EngineError::Query(
                "a bulk job's page was left before its end".into(),
            )),
            None => Ok(counts),
        }
    }

    /// Acts on process `pid` for job `job` and records the outcome: a
    /// change with its record in one batch, a refusal with a record of
    /// its own. `Err`: nothing recorded (a store fault; tried again).
    async fn bulk_one(
        &self,
        job: &BulkJobRow,
        request: &BulkRequest,
        pid: &str,
    ) -> Result<BulkOutcome, EngineError> {
        let record = |outcome: BulkOutcome, reason: Option<String>| BulkItemRow {
            job: job.id.clone(),
            pid: pid.to_owned(),
            outcome,
            reason,
            at: self.rt.now(),
        };
        let began = Instant::now();
        let mut wait = Duration::from_millis(50);
        let mut quick = 0;
        let (outcome, reason) = loop {
            let extra = bulk_item_ops(&record(BulkOutcome::Done, None));
            match self.apply_bulk(job, request, pid, extra).await {
                Ok(None) => return Ok(BulkOutcome::Done),
                Ok(Some(reason)) => break (BulkOutcome::Skipped, Some(reason)),
                // At the admission cap or its key full: wait for a place.
                Err(e @ (EngineError::Busy { .. } | EngineError::KeyBusy { .. })) => {
                    if began.elapsed() >= PATIENCE {
                        break (BulkOutcome::Failed, Some(e.to_string()));
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = self.rt.until_closed() => return Err(EngineError::Closed),
                    }
                    wait = (wait * 2).min(Duration::from_secs(2));
                }
                // A store fault: tried again at once a few times (a store
                // that fails now and then must not hold the whole page
                // back) — but only once the process's record says the
                // failed batch was not applied after all.
                Err(e @ (EngineError::Store(_) | EngineError::Commit { .. }))
                    if quick < QUICK_TRIES =>
                {
                    let mut unapplied = false;
                    while quick < QUICK_TRIES && !unapplied {
                        quick += 1;
                        tokio::task::yield_now().await;
                        let id = bulk_item_id(&job.id, pid);
                        match self.rt.reads().row::<BulkItemRow>(&id).await {
                            Ok(Some(r)) => return Ok(r.outcome),
                            Ok(None) => unapplied = true,
                            Err(_) => {}
                        }
                    }
                    if !unapplied {
                        return Err(e);
                    }
                }
                Err(
                    e @ (EngineError::Store(_)
                    | EngineError::Commit { .. }
                    | EngineError::Closed
                    | EngineError::Fenced(_)
                    | EngineError::LeaseHeld { .. }),
                ) => return Err(e),
                Err(e) if e.is_damaged_store() => break (BulkOutcome::Failed, Some(e.to_string())),
                // Refused by the process (not in error, ended, gone...).
                Err(e) => break (BulkOutcome::Skipped, Some(e.to_string())),
            }
        };
        self.rt
            .write(None, bulk_item_ops(&record(outcome, reason)))
            .await?;
        Ok(outcome)
    }

    /// Applies the job's action to `pid` with `extra` in its batch;
    /// `Some(reason)`: refused without an error (nothing written).
    async fn apply_bulk(
        &self,
        job: &BulkJobRow,
        request: &BulkRequest,
        pid: &str,
        extra: Vec<acts_store::BatchOp>,
    ) -> Result<Option<String>, EngineError> {
        let rt = &self.rt;
        let by = job.by.as_deref();
        let default_reason = format!("bulk job {}", job.id);
        let reason = request.reason.as_deref().unwrap_or(&default_reason);
        let vars = &request.vars;
        match request.action {
            BulkAction::Pause => {
                rt.on_process_with(pid, extra, |p, _| p.pause(by, reason))
                    .await
            }
            BulkAction::Resume => {
                rt.on_process_with(pid, extra, |p, svc| p.unpause(by, svc))
                    .await
            }
            BulkAction::Terminate => {
                rt.on_process_with(pid, extra, |p, svc| p.terminate(by, reason, svc))
                    .await
            }
            BulkAction::Retry => {
                rt.reopen_with(pid, extra, |p, svc| p.retry(by, None, vars, svc))
                    .await
            }
            BulkAction::Rewind => {
                let to = request.step.as_deref().unwrap_or_default();
                rt.on_process_with(pid, extra, |p, svc| p.rewind(by, to, vars, svc))
                    .await
            }
            BulkAction::Remove => {
                let existed = rt.remove_process_with(pid, extra).await?;
                return Ok((!existed).then(|| "it no longer exists".to_owned()));
            }
            BulkAction::Migrate => {
                let to = request.version.unwrap_or_default();
                let m = rt
                    .migrate_process(pid, to, &request.map, vars, by, extra)
                    .await?;
                return Ok((m.outcome != "migrated").then(|| m.reason.unwrap_or(m.outcome)));
            }
        }
        .map(|()| None)
    }

    async fn save_bulk(
        &self,
        row: &BulkJobRow,
        change: impl FnOnce(&mut BulkJobRow),
    ) -> Result<BulkJobRow, EngineError> {
        let mut next = row.clone();
        change(&mut next);
        self.rt.write(None, bulk_job_ops(Some(row), &next)).await?;
        Ok(next)
    }

    async fn end_bulk(
        &self,
        row: &BulkJobRow,
        state: BulkState,
        error: Option<EngineError>,
    ) -> Result<(), EngineError> {
        let now = self.rt.now();
        self.save_bulk(row, |r| {
            r.state = state;
            r.finished_at = now.max(1);
            r.error = error.map(|e| e.to_string());
            r.page.clear();
        })
        .await
        .map(|_| ())
    }
}

/// A job's pace: a token bucket filled at `per_second`, holding a tick's
/// worth (10 ms, or one process's time when that is longer). A tick's
/// processes start together, so their batches share a group commit (one
/// fsync for the tick, not one per process), and the bucket never holds
/// more than a tick's worth: no burst after a slow stretch.
struct Pace {
    per_second: f64,
    tick: Duration,
    cap: f64,
    tokens: f64,
    last: Instant,
}

/// The shortest time between a job's batches of starts.
const TICK: Duration = Duration::from_millis(10);

impl Pace {
    fn new(per_second: u32) -> Self {
        let per_second = f64::from(per_second.max(1));
        let tick = TICK.max(Duration::from_secs_f64(1.0 / per_second));
        let cap = (per_second * tick.as_secs_f64()).max(1.0);
        Self {
            per_second,
            tick,
            cap,
            tokens: cap,
            last: Instant::now(),
        }
    }

    /// Waits for the next process's turn; `false`: told to stop or the
    /// engine closed meanwhile.
    async fn wait(&mut self, exec: &Executor, claim: &BulkClaim) -> bool {
        loop {
            let now = Instant::now();
            let earned = now.duration_since(self.last).as_secs_f64() * self.per_second;
            self.tokens = (self.tokens + earned).min(self.cap);
            self.last = now;
            if self.tokens >= 1.0 {
                self.tokens -= 1.0;
                return true;
            }
            tokio::select! {
                _ = tokio::time::sleep(self.tick) => {}
                _ = claim.until_stopped() => return false,
                _ = exec.rt.until_closed() => return false,
            }
        }
    }
}
