//! Operator controls of a process: pause (timers and automatic steps hold,
//! client actions are refused), resume (due timeouts fire, held work
//! runs), terminate with a reason — each one atomic batch, recorded in the
//! root task's history, and surviving a crash right after it (testkit
//! `CrashStore`). Runs on every backend (`ACTS_TEST_STORE`) but the crash
//! tests, which need the crash store.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use acts_core::engine::{ChannelOptions, Engine, EngineError, Executor, Principal};
use acts_core::model::Vars;
use acts_core::scheduler::{ActionError, TaskState};
use acts_core::time::ManualClock;
use acts_store::KvStore;
use acts_testkit::CrashStore;
use common::{ends, engine_on, irq_created, recv_where, settle, store, vars, waiting};
use serde_json::json;

/// An approval with a reminder an hour after it is asked.
const REMINDED: &str = r#"
id: reminded
ver: "1"
steps:
  - id: approve
    uses: acts.core.irq
    params: { key: approve }
    timeouts:
      - id: remind
        if: $cost_in("1h")
        uses: acts.core.msg
        params: { key: reminder }
  - id: done
    uses: acts.transform.set
    params: { approved: true }
"#;

const HOUR: Duration = Duration::from_secs(3600);

/// The task of node `nid` in process `pid`, if one was created.
async fn task_of(exec: &Executor, pid: &str, nid: &str) -> Option<acts_core::engine::TaskInfo> {
    exec.task()
        .list(pid)
        .await
        .expect("tasks")
        .into_iter()
        .find(|t| t.nid == nid)
}

/// The interrupt `approve` of `pid` (its act's task id).
async fn approve_tid(exec: &Executor, pid: &str) -> String {
    waiting(exec, pid).await.remove(0)
}

/// The actions recorded on the root task of `pid`: (action, from, detail).
async fn controls(exec: &Executor, pid: &str) -> Vec<(String, Option<TaskState>, Option<String>)> {
    task_of(exec, pid, "reminded")
        .await
        .expect("the root task")
        .history
        .into_iter()
        .map(|e| (e.action, e.from, e.detail))
        .collect()
}

async fn started(engine: &Engine, pid: &str) {
    let exec = engine.executor();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    exec.model().deploy_yaml(REMINDED).await.expect("deploys");
    exec.proc()
        .start("reminded", vars(json!({ "pid": pid })))
        .await
        .expect("starts");
    recv_where(&mut rx, |m| m.pid == pid && irq_created(m)).await;
}

#[tokio::test]
async fn a_paused_process_holds_its_timers_refuses_clients_and_resumes() {
    let clock = ManualClock::new(1_000_000);
    let engine = engine_on(store().await, Some(&clock)).await;
    let exec = engine.executor();
    started(&engine, "p").await;
    exec.proc().pause("p", "vendor outage").await.unwrap();
    let info = exec.proc().get("p").await.unwrap();
    let pause = info.paused.expect("paused");
    assert_eq!(
        (pause.reason.as_str(), pause.at),
        ("vendor outage", 1_000_000)
    );
    // Its reminder falls due while it is paused: nothing fires.
    clock.advance(2 * HOUR);
    settle(&engine).await;
    assert!(
        task_of(&exec, "p", "remind").await.is_none(),
        "the timer held"
    );
    // A client's answer is refused, and says why.
    let tid = approve_tid(&exec, "p").await;
    let refused = exec
        .act()
        .complete("p", &tid, Vars::new())
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("paused") && refused.to_string().contains("vendor outage"),
        "{refused}"
    );
    assert!(matches!(
        exec.proc().pause("p", "again").await,
        Err(EngineError::Action(ActionError::ProcessState { .. }))
    ));
    // Resumed: the reminder that fell due fires at once; then the answer
    // is taken and the process ends.
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    exec.proc().unpause("p").await.unwrap();
    assert!(exec.proc().get("p").await.unwrap().paused.is_none());
    assert!(
        task_of(&exec, "p", "remind").await.is_some(),
        "fired on resume"
    );
    exec.act().complete("p", &tid, Vars::new()).await.unwrap();
    assert_eq!(recv_where(&mut rx, ends("p")).await.state, "completed");
    assert_eq!(
        controls(&exec, "p").await,
        [
            (
                "pause".to_owned(),
                Some(TaskState::Running),
                Some("vendor outage".to_owned())
            ),
            ("resume".to_owned(), Some(TaskState::Running), None),
        ]
    );
    assert!(matches!(
        exec.proc().unpause("p").await,
        Err(EngineError::Action(ActionError::AlreadyCompleted { .. }))
    ));
    engine.close().await;
}

#[tokio::test]
async fn what_a_subflow_returns_to_a_paused_parent_waits_for_the_resume() {
    let clock = ManualClock::new(1_000_000);
    let engine = engine_on(store().await, Some(&clock)).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(
        "id: child\nver: '1'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: ask }\n",
    )
    .await
    .unwrap();
    exec.model().deploy_yaml(
        "id: parent\nver: '1'\nsteps:\n  - id: call\n    uses: acts.core.subflow\n    params: { to: child }\n  - id: after\n    uses: acts.transform.set\n    params: { after: true }\n",
    )
    .await
    .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    exec.proc()
        .start("parent", vars(json!({ "pid": "parent" })))
        .await
        .unwrap();
    let ask = recv_where(&mut rx, irq_created).await;
    exec.proc().pause("parent", "").await.unwrap();
    // The child is not paused: it ends, and its return reaches the parent.
    exec.act()
        .complete(&ask.pid, &ask.tid, Vars::new())
        .await
        .unwrap();
    recv_where(&mut rx, ends(&ask.pid)).await;
    settle(&engine).await;
    let call: Vec<TaskState> = exec
        .task()
        .list("parent")
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.uses.as_deref() == Some("acts.core.subflow"))
        .map(|t| t.state)
        .collect();
    // The subflow act completed; its step waits for its next pass.
    assert_eq!(
        call,
        [TaskState::Running, TaskState::Completed],
        "the return is applied"
    );
    assert!(
        task_of(&exec, "parent", "after").await.is_none(),
        "the next step waits"
    );
    assert_eq!(
        exec.proc().get("parent").await.unwrap().state,
        TaskState::Running
    );
    exec.proc().unpause("parent").await.unwrap();
    assert_eq!(recv_where(&mut rx, ends("parent")).await.state, "completed");
    engine.close().await;
}

#[tokio::test]
async fn terminate_ends_the_process_with_the_operators_reason() {
    let clock = ManualClock::new(1_000_000);
    let engine = engine_on(store().await, Some(&clock)).await;
    let exec = engine.executor();
    started(&engine, "p").await;
    exec.proc().pause("p", "looking").await.unwrap();
    exec.proc().terminate("p", "duplicate order").await.unwrap();
    let info = exec.proc().get("p").await.unwrap();
    assert_eq!(info.state, TaskState::Aborted);
    assert!(info.paused.is_none());
    let err = info.err.expect("the reason is its error");
    assert_eq!(
        (err.ecode.as_str(), err.message.as_str()),
        ("terminated", "duplicate order")
    );
    let actions: Vec<String> = controls(&exec, "p")
        .await
        .into_iter()
        .map(|c| c.0)
        .collect();
    assert_eq!(actions, ["pause", "terminate"]);
    assert!(matches!(
        exec.proc().terminate("p", "").await,
        Err(EngineError::Action(ActionError::AlreadyCompleted { .. }))
    ));
    // Limits and rights.
    started(&engine, "q").await;
    let long = "x".repeat(acts_core::scheduler::MAX_REASON_BYTES + 1);
    assert!(exec.proc().pause("q", &long).await.is_err());
    assert!(exec.proc().get("q").await.unwrap().paused.is_none());
    let user = exec.as_principal(Principal::new("ann", ["finance"]));
    assert!(matches!(
        user.proc().pause("q", "").await,
        Err(EngineError::Denied { .. })
    ));
    assert!(matches!(
        exec.proc().pause("nope", "").await,
        Err(EngineError::ProcessNotFound(_))
    ));
    engine.close().await;
}

/// Applies `control` to a waiting process on a crash store, then cuts the
/// store right after the control's batch (and, separately, right before
/// it), and returns the two recovered stores: (after, before).
async fn crash_around(
    control: impl AsyncFnOnce(&Executor),
    pause_first: bool,
) -> (Arc<dyn KvStore>, Arc<dyn KvStore>) {
    let clock = ManualClock::new(1_000_000);
    let crash = Arc::new(CrashStore::new());
    let engine = engine_on(crash.clone(), Some(&clock)).await;
    started(&engine, "p").await;
    let exec = engine.executor();
    if pause_first {
        exec.proc().pause("p", "first").await.expect("pauses");
    }
    engine.storage().flush().await.expect("flushed");
    let before = crash.committed().await;
    control(&exec).await;
    let after = crash.committed().await;
    assert_eq!(after, before + 1, "one control, one batch");
    crash.crash_after(after);
    drop(engine);
    (
        Arc::new(crash.recover().await),
        Arc::new(crash.recover_prefix(before).await),
    )
}

#[tokio::test]
async fn each_control_survives_a_crash_right_after_it_and_none_is_half_applied() {
    let clock = ManualClock::new(5_000_000);
    // Pause.
    let (after, before) = crash_around(
        async |x: &Executor| x.proc().pause("p", "hold").await.unwrap(),
        false,
    )
    .await;
    let engine = engine_on(after, Some(&clock)).await;
    let exec = engine.executor();
    assert_eq!(
        exec.proc().get("p").await.unwrap().paused.unwrap().reason,
        "hold"
    );
    clock.advance(2 * HOUR);
    settle(&engine).await;
    assert!(
        task_of(&exec, "p", "remind").await.is_none(),
        "still held after the crash"
    );
    let tid = approve_tid(&exec, "p").await;
    assert!(exec.act().complete("p", &tid, Vars::new()).await.is_err());
    engine.close().await;
    let engine = engine_on(before, Some(&clock)).await;
    assert!(
        engine
            .executor()
            .proc()
            .get("p")
            .await
            .unwrap()
            .paused
            .is_none()
    );
    engine.close().await;

    // Resume.
    let (after, before) = crash_around(
        async |x: &Executor| x.proc().unpause("p").await.unwrap(),
        true,
    )
    .await;
    let engine = engine_on(after, Some(&clock)).await;
    let exec = engine.executor();
    assert!(exec.proc().get("p").await.unwrap().paused.is_none());
    let tid = approve_tid(&exec, "p").await;
    exec.act().complete("p", &tid, Vars::new()).await.unwrap();
    engine.close().await;
    let engine = engine_on(before, Some(&clock)).await;
    assert!(
        engine
            .executor()
            .proc()
            .get("p")
            .await
            .unwrap()
            .paused
            .is_some()
    );
    engine.close().await;

    // Terminate.
    let (after, before) = crash_around(
        async |x: &Executor| x.proc().terminate("p", "stop").await.unwrap(),
        true,
    )
    .await;
    let engine = engine_on(after, Some(&clock)).await;
    let info = engine.executor().proc().get("p").await.unwrap();
    assert_eq!(info.state, TaskState::Aborted);
    assert_eq!(info.err.unwrap().message, "stop");
    engine.close().await;
    let engine = engine_on(before, Some(&clock)).await;
    assert_eq!(
        engine.executor().proc().get("p").await.unwrap().state,
        TaskState::Running
    );
    engine.close().await;
}

/// A chain of automatic steps long enough to take several transitions.
fn chain(steps: usize) -> String {
    let mut m = String::from("id: chain\nver: '1'\nsteps:\n");
    for i in 0..steps {
        m.push_str(&format!(
            "  - id: s{i}\n    uses: acts.transform.set\n    params: {{ n{i}: {i} }}\n"
        ));
    }
    m
}

#[tokio::test]
async fn the_stuck_detector_reports_a_process_that_cannot_move_and_not_a_waiting_one() {
    use acts_core::engine::EngineConfig;
    use acts_store::{ErrorKind, MemoryStore};
    use acts_testkit::{FailPlan, FailingStore, OpSet};

    let clock = ManualClock::new(1_000_000);
    let failing = Arc::new(FailingStore::new(MemoryStore::new()));
    let mut config = EngineConfig::default();
    // Each transition runs a few jobs, so the chain commits many times.
    config.run_limits.jobs_per_run = 4;
    config.stuck_after = Duration::from_secs(600);
    let engine = Engine::builder()
        .store(failing.clone())
        .clock(Arc::new(clock.clone()))
        .config(config)
        .start()
        .await
        .expect("engine starts");
    let exec = engine.executor();
    started(&engine, "waits").await;
    exec.model().deploy_yaml(&chain(12)).await.unwrap();
    // The chain's first transition commits; every later write fails (a
    // store gone read-only): it cannot move, and nothing it waits for
    // would move it.
    failing.set_plan(FailPlan::after(OpSet::WRITES, 1, ErrorKind::Unavailable));
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let info = exec
        .proc()
        .start("chain", vars(json!({ "pid": "chain" })))
        .await
        .unwrap();
    assert_eq!(info.state, TaskState::Running);
    settle(&engine).await;
    // Not yet past the threshold: nothing to report.
    clock.advance(Duration::from_secs(300));
    engine.runtime().housekeeping().await;
    assert!(exec.proc().stuck(None).await.unwrap().is_empty());
    clock.advance(Duration::from_secs(400));
    engine.runtime().housekeeping().await;
    let stuck: Vec<String> = exec
        .proc()
        .stuck(None)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.pid)
        .collect();
    assert_eq!(stuck, ["chain"], "the waiting process is not stuck");
    assert_eq!(engine.runtime().stats().stuck, 1);
    let m = recv_where(&mut rx, |m| m.state == "stuck").await;
    assert_eq!((m.pid.as_str(), m.r#type.as_str()), ("chain", "workflow"));
    assert_eq!(m.inputs["quiet_since"], json!(1_000_000));
    // Reported once, not on every tick.
    engine.runtime().housekeeping().await;
    // The store comes back: the chain moves on and ends; nothing is stuck.
    failing.heal();
    engine.runtime().housekeeping().await;
    assert_eq!(recv_where(&mut rx, ends("chain")).await.state, "completed");
    engine.runtime().housekeeping().await;
    assert!(exec.proc().stuck(None).await.unwrap().is_empty());
    assert_eq!(engine.runtime().stats().stuck, 0);
    let user = exec.as_principal(Principal::new("ann", ["finance"]));
    assert!(user.proc().stuck(None).await.is_err());
    // The waiting one was never reported.
    while let Ok(m) = rx.try_recv() {
        assert!(m.state != "stuck" || m.pid == "chain", "{m:?}");
    }
    engine.close().await;
}

/// Two approvals in a row, then a step that records the amount.
const TWO_STEPS: &str = r#"
id: two
ver: "1"
steps:
  - id: first
    uses: acts.core.irq
    params: { key: first }
  - id: second
    uses: acts.core.irq
    params: { key: second }
  - id: record
    uses: acts.transform.code
    params: "return { recorded: amount }"
"#;

/// The key of the interrupt `pid` waits in, and its task.
async fn waiting_key(exec: &Executor, pid: &str) -> (String, String) {
    let t = exec
        .task()
        .list(pid)
        .await
        .expect("tasks")
        .into_iter()
        .find(|t| t.state == TaskState::Interrupt)
        .expect("it waits");
    (t.key.clone().unwrap_or_default(), t.tid)
}

#[tokio::test]
async fn rewind_runs_an_earlier_step_again_with_edited_vars() {
    let clock = ManualClock::new(1_000_000);
    let crash = Arc::new(CrashStore::new());
    let engine = engine_on(crash.clone(), Some(&clock)).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(TWO_STEPS).await.unwrap();
    let rx = engine.channel(ChannelOptions::default()).subscribe();
    exec.proc()
        .start("two", vars(json!({ "pid": "p", "amount": 10 })))
        .await
        .unwrap();
    let (key, tid) = waiting_key(&exec, "p").await;
    assert_eq!(key, "first");
    exec.act().complete("p", &tid, Vars::new()).await.unwrap();
    assert_eq!(waiting_key(&exec, "p").await.0, "second");
    // A rewind to a step that never ran is refused and leaves no trace.
    let before = exec.task().list("p").await.unwrap();
    let refused = exec
        .proc()
        .rewind("p", "record", vars(json!({ "amount": 99 })))
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("cannot rewind to 'record'"),
        "{refused}"
    );
    assert_eq!(
        exec.task().list("p").await.unwrap(),
        before,
        "nothing changed"
    );
    // Back to `first` with a corrected amount; `second` is marked backed.
    engine.storage().flush().await.unwrap();
    let committed = crash.committed().await;
    exec.proc()
        .rewind("p", "first", vars(json!({ "amount": 25 })))
        .await
        .unwrap();
    assert_eq!(crash.committed().await, committed + 1, "one batch");
    crash.crash_after(committed + 1);
    drop(engine);
    let engine = engine_on(Arc::new(crash.recover().await), Some(&clock)).await;
    let exec = engine.executor();
    let tasks = exec.task().list("p").await.unwrap();
    assert!(
        tasks
            .iter()
            .any(|t| t.key.as_deref() == Some("second") && t.state == TaskState::Backed),
        "{tasks:?}"
    );
    let root = tasks.iter().find(|t| t.tid == "$").expect("the root");
    let rewind = root
        .history
        .iter()
        .find(|e| e.action == "rewind")
        .expect("recorded");
    assert_eq!(rewind.detail.as_deref(), Some("to step 'first'"));
    let mut rx2 = engine.channel(ChannelOptions::default()).subscribe();
    for expected in ["first", "second"] {
        let (key, tid) = waiting_key(&exec, "p").await;
        assert_eq!(key, expected);
        exec.act().complete("p", &tid, Vars::new()).await.unwrap();
    }
    assert_eq!(recv_where(&mut rx2, ends("p")).await.state, "completed");
    let info = exec.proc().get("p").await.unwrap();
    assert_eq!(info.outputs.get("recorded"), Some(&json!(25)));
    drop(rx);
    engine.close().await;
}

#[tokio::test]
async fn rewind_to_the_step_that_waits_runs_it_again_and_the_process_still_ends() {
    let engine = engine_on(Arc::new(CrashStore::new()), None).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(TWO_STEPS).await.unwrap();
    exec.proc()
        .start("two", vars(json!({ "pid": "p", "amount": 10 })))
        .await
        .unwrap();
    let (key, tid) = waiting_key(&exec, "p").await;
    assert_eq!(key, "first");
    // Back to `first` while its own interrupt waits (found by the API's
    // contract test: the old `first` stayed running and the process
    // never completed).
    exec.proc()
        .rewind("p", "first", vars(json!({ "amount": 30 })))
        .await
        .unwrap();
    let tasks = exec.task().list("p").await.unwrap();
    let firsts: Vec<_> = tasks
        .iter()
        .filter(|t| t.nid == "first" && t.kind == "step")
        .map(|t| t.state)
        .collect();
    assert_eq!(firsts.len(), 2, "{tasks:?}");
    assert!(
        firsts[0].is_terminal(),
        "the old instance ended: {firsts:?}"
    );
    assert!(
        tasks
            .iter()
            .any(|t| t.tid == tid && t.state == TaskState::Backed),
        "{tasks:?}"
    );
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    for expected in ["first", "second"] {
        let (key, tid) = waiting_key(&exec, "p").await;
        assert_eq!(key, expected);
        exec.act().complete("p", &tid, Vars::new()).await.unwrap();
    }
    assert_eq!(recv_where(&mut rx, ends("p")).await.state, "completed");
    let info = exec.proc().get("p").await.unwrap();
    assert_eq!(info.outputs.get("recorded"), Some(&json!(30)));
    engine.close().await;
}
