//! Retrying a process that ended in an error (an operator control): the
//! step where the error began runs again as a new task, with edited vars,
//! and the process is in flight again (taking an admission place); the
//! failed attempt stays in its history; what cannot be retried is refused
//! and left as it was; a crash right after the retry's batch keeps it, one
//! right before loses all of it. Runs on every backend (`ACTS_TEST_STORE`)
//! but the crash test.

use crate::common;

use std::sync::Arc;

use acts_core::engine::{
    ChannelOptions, DeliveryState, Engine, EngineConfig, EngineError, Principal,
};
use acts_core::model::Vars;
use acts_core::scheduler::{ActionError, TaskState};
use acts_store::KvStore;
use acts_testkit::CrashStore;
use common::{ends, engine_on, irq_created, recv_where, store, vars, waiting};
use serde_json::json;

/// Charging fails until the process variable `fixed` is true; then a
/// person confirms.
const FLAKY: &str = r#"
id: flaky
ver: "1"
steps:
  - id: prepare
    uses: acts.transform.set
    params: { prepared: true }
  - id: charge
    uses: acts.transform.code
    params: |
      if (typeof fixed === "undefined" || fixed !== true) {
        throw new Error("card declined");
      }
      return { charged: true }
  - id: confirm
    uses: acts.core.irq
    params: { key: confirm }
"#;

/// Starts `pid` and waits until it has ended (in an error).
async fn failed(engine: &Engine, pid: &str) {
    let exec = engine.executor();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    exec.proc()
        .start("flaky", vars(json!({ "pid": pid })))
        .await
        .expect("starts");
    recv_where(&mut rx, ends(pid)).await;
    let info = exec.proc().get(pid).await.expect("the process");
    assert_eq!(info.state, TaskState::Error, "{info:?}");
}

/// The states of the `charge` steps of `pid`, in creation order.
async fn charges(engine: &Engine, pid: &str) -> Vec<TaskState> {
    engine
        .executor()
        .task()
        .list(pid)
        .await
        .expect("tasks")
        .into_iter()
        .filter(|t| t.nid == "charge" && t.kind.as_str() == "step")
        .map(|t| t.state)
        .collect()
}

/// The retries recorded on the root task of `pid`: (by, detail).
async fn retries(engine: &Engine, pid: &str) -> Vec<(Option<String>, Option<String>)> {
    engine
        .executor()
        .task()
        .list(pid)
        .await
        .expect("tasks")
        .into_iter()
        .find(|t| t.nid == "flaky")
        .expect("the root")
        .history
        .into_iter()
        .filter(|e| e.action == "retry")
        .map(|e| (e.by, e.detail))
        .collect()
}

#[tokio::test]
async fn a_failed_process_is_retried_with_edited_vars_and_finishes() {
    let engine = engine_on(store().await, None).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(FLAKY).await.unwrap();
    failed(&engine, "p").await;

    // Retried as it was: the step fails again; both attempts are kept.
    let ops = exec.as_principal(Principal::new("olga", ["operator"]));
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    ops.proc().retry("p", None, Vars::new()).await.unwrap();
    recv_where(&mut rx, ends("p")).await;
    assert_eq!(exec.proc().get("p").await.unwrap().state, TaskState::Error);
    assert_eq!(
        charges(&engine, "p").await,
        [TaskState::Error, TaskState::Error]
    );

    // With the fix: the step runs again, the process goes on and waits.
    ops.proc()
        .retry("p", None, vars(json!({ "fixed": true })))
        .await
        .unwrap();
    recv_where(&mut rx, |m| m.pid == "p" && irq_created(m)).await;
    let info = exec.proc().get("p").await.unwrap();
    assert_eq!(info.state, TaskState::Running);
    assert!(info.err.is_none(), "the error is gone from the process");
    assert_eq!(
        charges(&engine, "p").await,
        [TaskState::Error, TaskState::Error, TaskState::Completed]
    );
    let recorded = retries(&engine, "p").await;
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[1].0.as_deref(), Some("olga"));
    let detail = recorded[1].1.clone().unwrap_or_default();
    assert!(
        detail.starts_with("step 'charge' after its error: ") && detail.contains("card declined"),
        "{detail}"
    );
    // It counts as in flight again, and finishes as usual.
    assert_eq!(exec.proc().count(TaskState::Running).await.unwrap(), 1);
    let tid = waiting(&exec, "p").await.pop().unwrap();
    exec.act().complete("p", &tid, Vars::new()).await.unwrap();
    recv_where(&mut rx, ends("p")).await;
    let done = exec.proc().get("p").await.unwrap();
    assert_eq!(done.state, TaskState::Completed);
    assert_eq!(done.outputs.get("charged"), Some(&json!(true)));
    assert!(
        !done.outputs.contains_key("ecode") && !done.outputs.contains_key("message"),
        "the failed attempt's error is not an output: {:?}",
        done.outputs
    );
    engine.close().await;
}

/// Found by the simulator (grammar 2 seeds 179, 199, 272): the retried
/// process's second end closed every pending delivery of its root task —
/// among them the first end (`error`), which a durable client that was
/// away then never heard. Only a task's `created` message goes stale when
/// the task ends; an end message stays owed.
#[tokio::test]
async fn a_durable_client_still_gets_the_end_before_a_retry() {
    let engine = engine_on(store().await, None).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(FLAKY).await.unwrap();
    let away = engine
        .channels()
        .durable("away", ChannelOptions::default())
        .await
        .unwrap();
    let mut heard = away.subscribe();
    failed(&engine, "p").await;
    let first_end = recv_where(&mut heard, |m| {
        m.pid == "p" && m.r#type == "workflow" && m.state == "error"
    })
    .await;
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    exec.proc()
        .retry("p", None, vars(json!({ "fixed": true })))
        .await
        .unwrap();
    let tid = waiting(&exec, "p").await.pop().unwrap();
    exec.act().complete("p", &tid, Vars::new()).await.unwrap();
    recv_where(&mut rx, ends("p")).await;
    let owed = exec
        .msg()
        .list(Some("away"), Some(DeliveryState::Pending))
        .await
        .unwrap();
    assert!(
        owed.iter().any(|d| d.msg_id == first_end.id),
        "the end before the retry is still owed: {owed:?}"
    );
    // Re-sent to the client when it comes back, with the second end.
    away.resend_pending().await.unwrap();
    let mut again = Vec::new();
    while let Ok(m) = heard.try_recv() {
        if m.r#type == "workflow" {
            again.push((m.id.clone(), m.state.to_string()));
        }
    }
    assert!(
        again
            .iter()
            .any(|(id, s)| *id == first_end.id && s == "error"),
        "{again:?}"
    );
    assert!(again.iter().any(|(_, s)| s == "completed"), "{again:?}");
    engine.close().await;
}

#[tokio::test]
async fn what_cannot_be_retried_is_refused_and_left_as_it_was() {
    let engine = engine_on(store().await, None).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(FLAKY).await.unwrap();
    failed(&engine, "p").await;
    let tasks_before = exec.task().list("p").await.unwrap();

    // A task that did not fail, or is not there.
    let prepare = tasks_before
        .iter()
        .find(|t| t.nid == "prepare")
        .unwrap()
        .tid
        .clone();
    let e = exec
        .proc()
        .retry("p", Some(&prepare), Vars::new())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("did not end in an error"), "{e}");
    assert!(matches!(
        exec.proc().retry("p", Some("nope"), Vars::new()).await,
        Err(EngineError::Action(ActionError::UnknownTask { .. }))
    ));
    // A user may not; vars over the limit are refused.
    let user = exec.as_principal(Principal::new("ann", Vec::<String>::new()));
    assert!(matches!(
        user.proc().retry("p", None, Vars::new()).await,
        Err(EngineError::Denied { .. })
    ));
    assert_eq!(
        exec.task().list("p").await.unwrap(),
        tasks_before,
        "unchanged"
    );
    assert_eq!(exec.proc().get("p").await.unwrap().state, TaskState::Error);

    // A running process is not retried (it can be rewound).
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    exec.proc()
        .start("flaky", vars(json!({ "pid": "ok", "fixed": true })))
        .await
        .unwrap();
    recv_where(&mut rx, |m| m.pid == "ok" && irq_created(m)).await;
    let e = exec
        .proc()
        .retry("ok", None, Vars::new())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("rewound"), "{e}");
    assert!(matches!(
        exec.proc().retry("ghost", None, Vars::new()).await,
        Err(EngineError::ProcessNotFound(_))
    ));
    engine.close().await;
}

#[tokio::test]
async fn a_retry_needs_an_admission_place() {
    let config = {
        let mut v = EngineConfig::default();
        v.cache_cap = 1;
        v
    };
    let engine = Engine::builder()
        .store(store().await)
        .config(config)
        .start()
        .await
        .unwrap();
    let exec = engine.executor();
    exec.model().deploy_yaml(FLAKY).await.unwrap();
    failed(&engine, "p").await;
    // The one place is taken by a waiting process.
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    exec.proc()
        .start("flaky", vars(json!({ "pid": "w", "fixed": true })))
        .await
        .unwrap();
    recv_where(&mut rx, |m| m.pid == "w" && irq_created(m)).await;
    assert!(matches!(
        exec.proc()
            .retry("p", None, vars(json!({ "fixed": true })))
            .await,
        Err(EngineError::Busy { cap: 1, .. })
    ));
    assert_eq!(exec.proc().get("p").await.unwrap().state, TaskState::Error);
    // Once the place is free, the retry takes it.
    let tid = waiting(&exec, "w").await.pop().unwrap();
    exec.act().complete("w", &tid, Vars::new()).await.unwrap();
    recv_where(&mut rx, ends("w")).await;
    exec.proc()
        .retry("p", None, vars(json!({ "fixed": true })))
        .await
        .unwrap();
    recv_where(&mut rx, |m| m.pid == "p" && irq_created(m)).await;
    assert_eq!(
        exec.proc().get("p").await.unwrap().state,
        TaskState::Running
    );
    assert_eq!(
        engine.runtime().stats().admitted,
        1,
        "one place, held by the retry"
    );
    engine.close().await;
}

#[tokio::test]
async fn a_subflow_child_is_retried_through_its_parent() {
    let engine = engine_on(store().await, None).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(FLAKY).await.unwrap();
    exec.model().deploy_yaml(
        "id: parent\nver: '1'\nsteps:\n  - id: call\n    uses: acts.core.subflow\n    params: { to: flaky }\n",
    )
    .await
    .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    exec.proc()
        .start("parent", vars(json!({ "pid": "par" })))
        .await
        .unwrap();
    recv_where(&mut rx, ends("par")).await;
    assert_eq!(
        exec.proc().get("par").await.unwrap().state,
        TaskState::Error
    );
    let child = exec
        .proc()
        .list(None, Some("flaky"))
        .await
        .unwrap()
        .pop()
        .expect("the child")
        .pid;
    let e = exec
        .proc()
        .retry(&child, None, Vars::new())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("retry 'par'"), "{e}");
    // The parent's retry runs its step again: a new child (which fails
    // as the first did, and the parent with it).
    exec.proc().retry("par", None, Vars::new()).await.unwrap();
    recv_where(&mut rx, ends("par")).await;
    let children: Vec<String> = exec
        .proc()
        .list(None, Some("flaky"))
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.pid)
        .collect();
    assert_eq!(children.len(), 2, "{children:?}");
    assert!(children.contains(&child));
    assert_eq!(
        exec.proc().get("par").await.unwrap().state,
        TaskState::Error
    );
    engine.close().await;
}

#[tokio::test]
async fn a_retry_survives_a_crash_right_after_it_and_is_absent_right_before() {
    let crash = Arc::new(CrashStore::new());
    let engine = engine_on(crash.clone(), None).await;
    engine.executor().model().deploy_yaml(FLAKY).await.unwrap();
    failed(&engine, "p").await;
    engine.storage().flush().await.unwrap();
    let before = crash.committed().await;
    engine
        .executor()
        .proc()
        .retry("p", None, vars(json!({ "fixed": true })))
        .await
        .unwrap();
    engine.storage().flush().await.unwrap();
    let after = crash.committed().await;
    assert!(after > before, "the retry committed");
    drop(engine);

    // Right after the retry's first batch: in flight again, and resumed
    // by the restart to the interrupt.
    let cut: Arc<dyn KvStore> = Arc::new(crash.recover_prefix(before + 1).await);
    let engine = engine_on(cut, None).await;
    let exec = engine.executor();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let state = exec.proc().get("p").await.unwrap().state;
    assert_eq!(state, TaskState::Running);
    if waiting(&exec, "p").await.is_empty() {
        recv_where(&mut rx, |m| m.pid == "p" && irq_created(m)).await;
    }
    assert_eq!(waiting(&exec, "p").await.len(), 1);
    assert_eq!(retries(&engine, "p").await.len(), 1);
    engine.close().await;

    // Right before: the process as it failed, and retryable still.
    let cut: Arc<dyn KvStore> = Arc::new(crash.recover_prefix(before).await);
    let engine = engine_on(cut, None).await;
    let exec = engine.executor();
    assert_eq!(exec.proc().get("p").await.unwrap().state, TaskState::Error);
    assert!(retries(&engine, "p").await.is_empty());
    exec.proc()
        .retry("p", None, vars(json!({ "fixed": true })))
        .await
        .unwrap();
    assert_eq!(
        exec.proc().get("p").await.unwrap().state,
        TaskState::Running
    );
    engine.close().await;
}
