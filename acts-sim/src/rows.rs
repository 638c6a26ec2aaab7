//! What the store holds, checked: no row that belongs to nothing, and
//! nothing at all once every process and the client's channel are
//! removed; and the time a restarted run goes on from.

use std::collections::HashSet;
use std::sync::Arc;

use acts_core::durable::{Collection, Query};
use acts_core::engine::testing::{
    BulkItemRow, BulkJobRow, DeliveryRow, MessageRow, NodeRow, ProcRow, TaskRow, VarsRow, WakeRow,
};
use acts_store::KvStore;

use crate::sim::{Sim, Trace, retry};

/// The engine clock every simulation starts at (ms).
pub const START: i64 = 1_000_000;

/// The time a restart on `store` goes on from: the latest time its rows
/// record (what the clock said at the crash, as far as anything stored
/// knows), so timers stand as they stood.
pub async fn resume_time(store: &Arc<dyn KvStore>) -> Result<i64, String> {
    let mut t = START;
    for p in rows::<ProcRow>(store).await? {
        t = t.max(p.timestamp).max(p.start_time).max(p.end_time);
    }
    for task in rows::<TaskRow>(store).await? {
        t = t.max(task.start_time).max(task.end_time);
    }
    // A bulk job stored after the clock moved (an operator's resume after
    // hours of pause) goes on at that time, not before it.
    for job in rows::<BulkJobRow>(store).await? {
        t = t.max(job.created_at).max(job.finished_at);
    }
    for record in rows::<BulkItemRow>(store).await? {
        t = t.max(record.at);
    }
    Ok(t)
}

/// Rows that belong to nothing: rows of no process (tasks, variables,
/// nodes, wakes, messages), variables of no task, deliveries of no
/// message.
pub async fn orphans(store: &Arc<dyn KvStore>) -> Result<(), String> {
    let procs: HashSet<String> = rows::<ProcRow>(store)
        .await?
        .into_iter()
        .map(|p| p.id)
        .collect();
    let mut owners: Vec<(&str, String)> = Vec::new();
    owners.extend(
        rows::<TaskRow>(store)
            .await?
            .into_iter()
            .map(|t| ("task", t.pid)),
    );
    owners.extend(
        rows::<VarsRow>(store)
            .await?
            .into_iter()
            .map(|v| ("vars", v.pid)),
    );
    owners.extend(
        rows::<NodeRow>(store)
            .await?
            .into_iter()
            .map(|n| ("node", n.pid)),
    );
    owners.extend(
        rows::<WakeRow>(store)
            .await?
            .into_iter()
            .map(|w| ("wake", w.id)),
    );
    owners.extend(
        rows::<MessageRow>(store)
            .await?
            .into_iter()
            .map(|m| ("message", m.pid)),
    );
    if let Some((kind, pid)) = owners.into_iter().find(|(_, pid)| !procs.contains(pid)) {
        return Err(format!(
            "a {kind} row of process '{pid}', which has no process row"
        ));
    }
    // Variables of a scope (a task) the process does not have.
    let tasks: HashSet<(String, String)> = rows::<TaskRow>(store)
        .await?
        .into_iter()
        .map(|t| (t.pid, t.tid))
        .collect();
    if let Some(v) = rows::<VarsRow>(store)
        .await?
        .into_iter()
        .find(|v| !tasks.contains(&(v.pid.clone(), v.tid.clone())))
    {
        return Err(format!(
            "variables of scope '{}' of process '{}', which has no such task",
            v.tid, v.pid
        ));
    }
    // A bulk job's record belongs to a stored job.
    let jobs: HashSet<String> = rows::<BulkJobRow>(store)
        .await?
        .into_iter()
        .map(|j| j.id)
        .collect();
    if let Some(r) = rows::<BulkItemRow>(store)
        .await?
        .into_iter()
        .find(|r| !jobs.contains(&r.job))
    {
        return Err(format!(
            "a record of bulk job '{}' (process '{}'), which is not stored",
            r.job, r.pid
        ));
    }
    // A delivery owes a message that is stored.
    let messages: HashSet<String> = rows::<MessageRow>(store)
        .await?
        .into_iter()
        .map(|m| m.id)
        .collect();
    match rows::<DeliveryRow>(store)
        .await?
        .into_iter()
        .find(|d| !messages.contains(&d.msg_id))
    {
        Some(d) => Err(format!(
            "a delivery to '{}' of message '{}' (process '{}'), which is not stored",
            d.channel, d.msg_id, d.pid
        )),
        None => Ok(()),
    }
}

/// Removes every process, bulk job and the client's channel; then nothing
/// of them may be left in the store.
pub async fn teardown(store: Arc<dyn KvStore>, trace: &mut Trace) -> Result<(), String> {
    let sim = Sim::open(store.clone(), 1_000_000, &|| false).await?;
    let exec = sim.engine.executor();
    let all = retry(|| exec.proc().list(None, None))
        .await
        .map_err(|e| format!("listing: {e}"))?;
    for p in &all {
        retry(|| exec.proc().remove(&p.pid))
            .await
            .map_err(|e| format!("removing {}: {e}", p.pid))?;
    }
    // The bulk jobs (grammar 4's operator), each with its records.
    let jobs = retry(|| exec.bulk().list(Some(1000), None))
        .await
        .map_err(|e| format!("listing the bulk jobs: {e}"))?
        .items;
    for j in &jobs {
        retry(|| exec.bulk().remove(&j.id))
            .await
            .map_err(|e| format!("removing bulk job {}: {e}", j.id))?;
    }
    retry(|| sim.engine.channels().remove("client"))
        .await
        .map_err(|e| format!("removing the channel: {e}"))?;
    sim.engine.close().await;
    trace.note(format!("removed {} processes and the channel", all.len()));
    let left = [
        ("process", rows::<ProcRow>(&store).await?.len()),
        ("task", rows::<TaskRow>(&store).await?.len()),
        ("vars", rows::<VarsRow>(&store).await?.len()),
        ("node", rows::<NodeRow>(&store).await?.len()),
        ("wake", rows::<WakeRow>(&store).await?.len()),
        ("delivery", rows::<DeliveryRow>(&store).await?.len()),
        ("message", rows::<MessageRow>(&store).await?.len()),
        ("bulk job", rows::<BulkJobRow>(&store).await?.len()),
        ("bulk record", rows::<BulkItemRow>(&store).await?.len()),
    ];
    match left.iter().find(|(_, n)| *n > 0) {
        Some((kind, n)) => Err(format!(
            "{n} {kind} row(s) left after every process and the channel were removed"
        )),
        None => Ok(()),
    }
}

/// Every row of collection `R` in `store`.
pub async fn rows<R: acts_core::durable::Row>(store: &Arc<dyn KvStore>) -> Result<Vec<R>, String> {
    Collection::<R>::new(store.clone())
        .query_all(&Query::new())
        .await
        .map_err(|e| format!("reading rows: {e}"))
}
