//! Bulk jobs: an operator action applied to every process a query
//! matches, as a durable job — each matching process handled once (a
//! change's record in the change's own batch), refusals reported per
//! process, a dry run that changes nothing, a cancel that keeps what was
//! done, a job that goes on after a restart, and a crash at any point of
//! a bulk retry that never retries a process twice. Runs on every backend
//! (`scripts/test.sh`'s engine suites) but the crash test.

use crate::common;
use common::*;

use std::sync::Arc;

use acts_core::engine::{
    BulkAction, BulkJob, BulkOutcome, BulkRequest, BulkState, ChannelOptions, Engine, EngineError,
    Principal, ProcessQuery,
};
use acts_core::scheduler::TaskState;
use acts_store::KvStore;
use acts_testkit::models::FLAKY_CHARGE as FLAKY;
use serde_json::json;

/// Starts `n` processes (`p0`, `p1`, ...) with `start` vars and waits
/// until each has ended or waits at its interrupt.
async fn started(engine: &Engine, prefix: &str, n: usize, start: serde_json::Value) -> Vec<String> {
    let exec = engine.executor();
    let mut pids = Vec::new();
    for i in 0..n {
        let mut v = vars(start.clone());
        v.insert("pid".into(), json!(format!("{prefix}{i}")));
        pids.push(exec.proc().start("flaky", v).await.expect("starts").pid);
    }
    settle(engine).await;
    pids
}

/// The `charge` tasks of `pid` (one per attempt).
async fn attempts(engine: &Engine, pid: &str) -> usize {
    let tasks = engine.executor().task().list(pid).await.expect("tasks");
    tasks.iter().filter(|t| t.nid == "charge").count()
}

async fn finished(engine: &Engine, job: &BulkJob) -> BulkJob {
    settle(engine).await;
    let job = engine
        .executor()
        .bulk()
        .get(&job.id)
        .await
        .expect("the job");
    assert!(job.state.is_final(), "{job:?}");
    job
}

fn retry_failed() -> BulkRequest {
    BulkRequest::new(BulkAction::Retry, ProcessQuery::new().ecode("declined"))
        .vars(vars(json!({ "fixed": true })))
        .per_second(100_000)
}

async fn engine(kv: Arc<dyn KvStore>) -> Engine {
    let engine = engine_on(kv, None).await;
    engine
        .executor()
        .model()
        .deploy_yaml(FLAKY)
        .await
        .expect("deploys");
    engine
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_retry_retries_every_failed_process_once_and_reports_each() {
    let engine = engine(store().await).await;
    let exec = engine.executor();
    let failed = started(&engine, "f", 250, json!({})).await;
    let fine = started(&engine, "ok", 5, json!({ "fixed": true })).await;
    assert_eq!(
        exec.proc().get(&failed[0]).await.unwrap().state,
        TaskState::Error
    );

    let job = exec
        .bulk()
        .start(retry_failed())
        .await
        .expect("the job starts");
    assert_eq!(job.state, BulkState::Running);
    let job = finished(&engine, &job).await;
    assert_eq!(
        (job.state, job.total, job.done, job.skipped, job.failed),
        (BulkState::Done, Some(250), 250, 0, 0),
        "{job:?}"
    );
    for pid in &failed {
        let p = exec.proc().get(pid).await.unwrap();
        assert_eq!(p.state, TaskState::Running, "{pid} retried");
        assert_eq!(
            attempts(&engine, pid).await,
            2,
            "{pid}: retried exactly once"
        );
        assert_eq!(waiting(&exec, pid).await.len(), 1, "{pid} asks to confirm");
    }
    for pid in &fine {
        assert_eq!(attempts(&engine, pid).await, 1, "{pid} untouched");
    }
    // The report: one record per process, in pid order, a page at a time.
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = exec
            .bulk()
            .items(&job.id, None, Some(100), cursor.as_deref())
            .await
            .unwrap();
        assert!(page.items.iter().all(|i| i.outcome == BulkOutcome::Done));
        seen.extend(page.items.into_iter().map(|i| i.pid));
        match page.next {
            Some(n) => cursor = Some(n),
            None => break,
        }
    }
    let mut expected = failed.clone();
    expected.sort();
    assert_eq!(seen, expected);
    // The same job again finds nothing left to retry.
    let again = finished(&engine, &exec.bulk().start(retry_failed()).await.unwrap()).await;
    assert_eq!(
        (again.state, again.total, again.done),
        (BulkState::Done, Some(0), 0)
    );
    let jobs = exec.bulk().list(None, None).await.unwrap().items;
    assert_eq!(
        jobs.iter().map(|j| &j.id).collect::<Vec<_>>(),
        [&again.id, &job.id]
    );
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_counts_and_samples_and_changes_nothing() {
    let engine = engine(store().await).await;
    let exec = engine.executor();
    let failed = started(&engine, "f", 30, json!({})).await;
    let preview = exec.bulk().preview(&retry_failed()).await.unwrap();
    assert_eq!(preview.count, 30);
    assert_eq!(preview.sample.len(), 20);
    assert!(preview.sample.iter().all(|p| p.state == TaskState::Error));
    settle(&engine).await;
    for pid in &failed {
        assert_eq!(attempts(&engine, pid).await, 1);
    }
    assert!(exec.bulk().list(None, None).await.unwrap().items.is_empty());
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_reported_per_process_and_change_nothing() {
    let engine = engine(store().await).await;
    let exec = engine.executor();
    let failed = started(&engine, "f", 3, json!({})).await;
    let asking = started(&engine, "ok", 2, json!({ "fixed": true })).await;
    // Every process of the model: the running ones cannot be retried.
    let mut request = retry_failed();
    request.query = ProcessQuery::new().model("flaky");
    let job = finished(&engine, &exec.bulk().start(request).await.unwrap()).await;
    assert_eq!((job.done, job.skipped, job.failed), (3, 2, 0), "{job:?}");
    let skipped = exec
        .bulk()
        .items(&job.id, Some(BulkOutcome::Skipped), None, None)
        .await
        .unwrap()
        .items;
    let mut pids: Vec<&str> = skipped.iter().map(|i| i.pid.as_str()).collect();
    pids.sort();
    assert_eq!(pids, asking.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        skipped
            .iter()
            .all(|i| i.reason.as_deref().is_some_and(|r| r.contains("error"))),
        "{skipped:?}"
    );
    for pid in &asking {
        assert_eq!(attempts(&engine, pid).await, 1);
        assert_eq!(
            exec.proc().get(pid).await.unwrap().state,
            TaskState::Running
        );
    }
    for pid in &failed {
        assert_eq!(attempts(&engine, pid).await, 2);
    }
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_terminate_and_remove_by_query() {
    let engine = engine(store().await).await;
    let exec = engine.executor();
    let asking = started(&engine, "a", 6, json!({ "fixed": true })).await;
    let failed = started(&engine, "f", 2, json!({})).await;
    let running = || ProcessQuery::new().state(TaskState::Running);
    let run = |action: BulkAction, q: ProcessQuery| {
        let exec = exec.clone();
        let engine = engine.clone();
        async move {
            let job = exec
                .bulk()
                .start(BulkRequest::new(action, q).per_second(100_000))
                .await
                .expect("starts");
            finished(&engine, &job).await
        }
    };
    let job = run(BulkAction::Pause, running()).await;
    assert_eq!((job.done, job.skipped), (6, 0), "{job:?}");
    for pid in &asking {
        assert!(
            exec.proc().get(pid).await.unwrap().paused.is_some(),
            "{pid} paused"
        );
        let tid = &waiting(&exec, pid).await[0];
        let refused = exec.act().complete(pid, tid, Default::default()).await;
        assert!(refused.is_err(), "a paused process refuses actions");
    }
    // Pausing again: each is paused already (refused, reported).
    let job = run(BulkAction::Pause, running()).await;
    assert_eq!((job.done, job.skipped), (0, 6), "{job:?}");
    let job = run(BulkAction::Resume, running()).await;
    assert_eq!(job.done, 6);
    assert!(exec.proc().get(&asking[0]).await.unwrap().paused.is_none());
    // A query that cannot be answered is refused at once.
    let unindexed = running().model("flaky").var_eq("pid", json!("a1"));
    let request = BulkRequest::new(BulkAction::Terminate, unindexed);
    let err = exec.bulk().start(request).await.unwrap_err();
    assert!(err.to_string().contains("does not index 'pid'"), "{err}");
    let job = run(BulkAction::Terminate, running()).await;
    assert_eq!(job.done, 6);
    for pid in &asking {
        let p = exec.proc().get(pid).await.unwrap();
        assert_eq!(p.state, TaskState::Aborted, "{pid} terminated");
    }
    let job = run(BulkAction::Remove, ProcessQuery::new().ecode("declined")).await;
    assert_eq!(job.done, 2);
    for pid in &failed {
        assert!(matches!(
            exec.proc().get(pid).await,
            Err(EngineError::ProcessNotFound(_))
        ));
    }
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_checked_before_anything_is_stored() {
    let engine = engine(store().await).await;
    let exec = engine.executor();
    let every = ProcessQuery::new;
    let bad = [
        // No filter and no `all`: never every process by default.
        BulkRequest::new(BulkAction::Remove, every()),
        BulkRequest::new(BulkAction::Rewind, every()).every_process(),
        BulkRequest::new(BulkAction::Migrate, every()).every_process(),
        BulkRequest::new(BulkAction::Remove, every())
            .every_process()
            .reason("why"),
        BulkRequest::new(BulkAction::Pause, every())
            .every_process()
            .per_second(0),
        BulkRequest::new(
            BulkAction::Pause,
            ProcessQuery::new().var_eq("customer", json!("c1")),
        ),
    ];
    for request in bad {
        let err = exec.bulk().start(request.clone()).await.unwrap_err();
        assert!(matches!(err, EngineError::Query(_)), "{request:?}: {err}");
    }
    let err = exec
        .bulk()
        .preview(&BulkRequest::new(BulkAction::Remove, every()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("`all: true`"), "{err}");
    // With `all`, every process (here: none).
    let all = BulkRequest::new(BulkAction::Remove, every()).every_process();
    assert_eq!(exec.bulk().preview(&all).await.unwrap().count, 0);
    // Operators only.
    let user = exec.as_principal(Principal::new("ada", ["user"]));
    let err = user.bulk().start(retry_failed()).await.unwrap_err();
    assert!(matches!(err, EngineError::Denied { .. }), "{err}");
    assert!(matches!(
        exec.bulk().get("bulk-nope").await,
        Err(EngineError::BulkJobNotFound(_))
    ));
    assert!(exec.bulk().list(None, None).await.unwrap().items.is_empty());
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_job_stops_and_keeps_what_it_did() {
    let engine = engine(store().await).await;
    let exec = engine.executor();
    let failed = started(&engine, "f", 20, json!({})).await;
    // Two a second: the cancel comes while most are still to do (a slow
    // machine may let it finish first: both are correct).
    let job = exec
        .bulk()
        .start(retry_failed().per_second(2))
        .await
        .unwrap();
    let job = exec.bulk().cancel(&job.id).await.unwrap();
    assert!(job.state.is_final() && !job.active, "{job:?}");
    let after = finished(&engine, &job).await;
    assert_eq!(after, job, "nothing happens after the cancel");
    let mut retried = 0;
    for pid in &failed {
        match attempts(&engine, pid).await {
            1 => {}
            2 => retried += 1,
            n => panic!("{pid}: {n} attempts"),
        }
    }
    assert_eq!(retried, job.done as usize);
    match job.state {
        BulkState::Cancelled => assert!(job.done < 20, "{job:?}"),
        BulkState::Done => assert_eq!(job.done, 20),
        other => panic!("{other:?}"),
    }
    // Cancelling a job that stopped returns it as it is.
    assert_eq!(exec.bulk().cancel(&job.id).await.unwrap(), job);
    // Removed with its report; the processes keep what it did.
    exec.bulk().remove(&job.id).await.unwrap();
    assert!(matches!(
        exec.bulk().items(&job.id, None, None, None).await,
        Err(EngineError::BulkJobNotFound(_))
    ));
    let kv = engine.storage().store();
    let left = acts_core::durable::Collection::<acts_core::engine::testing::BulkItemRow>::new(kv)
        .query_all(&acts_core::durable::Query::new())
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
    let mut retried_after = 0;
    for pid in &failed {
        retried_after += usize::from(attempts(&engine, pid).await == 2);
    }
    assert_eq!(retried_after, retried);
    // A running job is not removed.
    let running = exec
        .bulk()
        .start(retry_failed().per_second(1))
        .await
        .unwrap();
    let err = exec.bulk().remove(&running.id).await.unwrap_err();
    assert!(matches!(err, EngineError::BulkJobRunning(_)), "{err}");
    exec.bulk().cancel(&running.id).await.unwrap();
    exec.bulk().remove(&running.id).await.unwrap();
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_goes_on_after_a_restart_and_handles_each_process_once() {
    let kv = store().await;
    let engine = engine(kv.clone()).await;
    let exec = engine.executor();
    let failed = started(&engine, "f", 40, json!({})).await;
    let job = exec
        .bulk()
        .start(retry_failed().per_second(40))
        .await
        .unwrap();
    // Closed while the job runs (or after it ended: both are correct).
    engine.close().await;
    let engine = engine_on(kv, None).await;
    let job = finished(&engine, &job).await;
    assert_eq!(
        (job.state, job.done, job.skipped),
        (BulkState::Done, 40, 0),
        "{job:?}"
    );
    for pid in &failed {
        assert_eq!(attempts(&engine, pid).await, 2, "{pid}");
    }
    engine.close().await;
}

/// Drives a recovered crash store to the end: the failed processes
/// started and failed (if the store lacks them), the job resumed. Returns
/// the attempts of each process and whether the job exists.
async fn recover_and_finish(kv: Arc<dyn KvStore>, n: usize) -> (Vec<usize>, Option<BulkJob>) {
    let engine = engine(kv).await;
    let exec = engine.executor();
    settle(&engine).await;
    let jobs = exec.bulk().list(None, None).await.expect("the jobs").items;
    let job = match jobs.first() {
        Some(j) => Some(finished(&engine, j).await),
        None => None,
    };
    let mut out = Vec::new();
    for i in 0..n {
        let pid = format!("f{i}");
        match exec.proc().get(&pid).await {
            Ok(_) => out.push(attempts(&engine, &pid).await),
            Err(EngineError::ProcessNotFound(_)) => out.push(0),
            Err(e) => panic!("{pid}: {e}"),
        }
    }
    engine.close().await;
    (out, job)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_point_of_a_bulk_retry_never_retries_a_process_twice() {
    const N: usize = 6;
    let recorded = Arc::new(acts_testkit::CrashStore::new());
    let engine = engine(recorded.clone()).await;
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    started(&engine, "f", N, json!({})).await;
    drop(rx.try_recv());
    let exec = engine.executor();
    let before = recorded.committed().await;
    let job = exec.bulk().start(retry_failed()).await.unwrap();
    finished(&engine, &job).await;
    engine.close().await;
    let batches = recorded.committed().await;
    assert!(batches > before + N, "{before}..{batches}");
    for k in before..=batches {
        let cut = Arc::new(recorded.recover_prefix(k).await);
        let (attempts, job) = recover_and_finish(cut, N).await;
        match job {
            // Cut before the job was stored: nothing retried.
            None => assert_eq!(attempts, vec![1; N], "crash after batch {k}"),
            Some(job) => {
                assert_eq!(attempts, vec![2; N], "crash after batch {k}: {job:?}");
                assert_eq!((job.state, job.done), (BulkState::Done, N as u64), "{k}");
            }
        }
    }
}
