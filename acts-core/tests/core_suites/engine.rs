//! The engine end to end on the in-memory store: deploy, start, answer
//! interrupts, hear messages, and continue after a restart.

use crate::common;
use common::*;

use std::sync::Arc;

use acts_core::engine::{ChannelOptions, Engine, EngineError};
use acts_core::model::Vars;
use acts_core::scheduler::TaskState;
use acts_store::KvStore;
use acts_testkit::models::THREE_STEPS;
use serde_json::json;

const APPROVAL: &str = r#"
id: approval
ver: "1"
steps:
  - id: ask
    uses: acts.core.irq
    params: { key: approve }
  - id: done
    uses: acts.transform.set
    params: { finished: true }
"#;

#[tokio::test]
async fn three_step_model_completes_with_outputs() {
    let engine = Engine::builder()
        .store(store().await)
        .start()
        .await
        .unwrap();
    let exec = engine.executor();
    exec.model().deploy_yaml(THREE_STEPS).await.unwrap();
    let info = exec.proc().start("three", Vars::new()).await.unwrap();
    assert_eq!(
        info.state,
        TaskState::Completed,
        "set/code run in the start transition"
    );
    assert_eq!(info.outputs.get("a"), Some(&json!(10)));
    assert_eq!(info.outputs.get("b"), Some(&json!(20)));
    assert_eq!(info.outputs.get("c"), Some(&json!(30)));
    let again = exec.proc().get(&info.pid).await.unwrap();
    assert_eq!(again.state, TaskState::Completed);
    assert_eq!(again.outputs, info.outputs, "read back from the store");
    let tasks = exec.task().list(&info.pid).await.unwrap();
    assert_eq!(tasks.len(), 7, "root, three steps, three acts");
    assert!(tasks.iter().all(|t| t.state == TaskState::Completed));
    engine.close().await;
}

#[tokio::test]
async fn irq_is_announced_answered_and_the_client_sees_every_message_in_order() {
    let engine = Engine::builder()
        .store(store().await)
        .start()
        .await
        .unwrap();
    let exec = engine.executor();
    exec.model().deploy_yaml(APPROVAL).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let info = exec.proc().start("approval", Vars::new()).await.unwrap();
    assert_eq!(info.state, TaskState::Running);
    let mut seen = Vec::new();
    let irq = loop {
        let m = recv(&mut rx).await;
        seen.push(m.short());
        if m.r#type == "act" && m.state == "created" {
            break m;
        }
    };
    assert_eq!(seen, ["workflow/created", "step/created", "act/created"]);
    assert_eq!(irq.key.as_deref(), Some("approve"));
    assert_eq!(irq.model_id, "approval");
    assert!(!irq.id.is_empty(), "messages carry an id");
    exec.act()
        .complete(&info.pid, &irq.tid, vars(json!({"ok": true})))
        .await
        .unwrap();
    let end = recv_where(&mut rx, ends(&info.pid)).await;
    assert_eq!(end.state, "completed");
    assert_eq!(end.outputs.get("finished"), Some(&json!(true)));
    // The act is done: a second answer is refused and changes nothing.
    let again = exec.act().complete(&info.pid, &irq.tid, Vars::new()).await;
    assert!(matches!(again, Err(EngineError::Action(_))), "{again:?}");
    assert!(matches!(
        exec.act()
            .complete("no-such-pid", &irq.tid, Vars::new())
            .await,
        Err(EngineError::ProcessNotFound(_))
    ));
    engine.close().await;
}

/// An irq process started on one engine, which then closes, is answered
/// and finished on a second engine over `reopen()`'s store.
async fn continues_after_restart(
    first: Arc<dyn KvStore>,
    reopen: impl FnOnce() -> Arc<dyn KvStore>,
) {
    let engine = Engine::builder()
        .store(first)
        .start()
        .await
        .expect("engine");
    engine
        .executor()
        .model()
        .deploy_yaml(APPROVAL)
        .await
        .expect("deploy");
    let mut rx = engine
        .channel(ChannelOptions::default().with_type("act"))
        .subscribe();
    let info = engine
        .executor()
        .proc()
        .start("approval", Vars::new())
        .await
        .expect("start");
    let irq = recv(&mut rx).await;
    engine.close().await;
    drop(rx);
    drop(engine);

    let engine2 = Engine::builder()
        .store(reopen())
        .start()
        .await
        .expect("engine");
    let mut rx2 = engine2.channel(ChannelOptions::default()).subscribe();
    let exec = engine2.executor();
    let before = exec.proc().get(&info.pid).await.expect("process");
    assert_eq!(before.state, TaskState::Running);
    exec.act()
        .complete(&info.pid, &irq.tid, Vars::new())
        .await
        .expect("complete");
    let end = recv_where(&mut rx2, ends(&info.pid)).await;
    assert_eq!(end.state, "completed");
    let after = exec.proc().get(&info.pid).await.expect("process");
    assert_eq!(after.state, TaskState::Completed);
    assert_eq!(after.outputs.get("finished"), Some(&json!(true)));
    engine2.close().await;
}

#[tokio::test]
async fn a_waiting_process_continues_on_a_new_engine_over_the_same_store() {
    let kv: Arc<dyn KvStore> = store().await;
    continues_after_restart(kv.clone(), move || kv).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_holds_on_a_redb_file_across_reopen() {
    use acts_store_redb::{RedbOptions, RedbStore};
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("acts.db");
    let open = || -> Arc<dyn KvStore> {
        Arc::new(RedbStore::open(&path, RedbOptions::default()).expect("redb opens"))
    };
    continues_after_restart(open(), open).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_waits_for_background_work_so_the_store_can_be_reopened() {
    use acts_store_redb::{RedbOptions, RedbStore};
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("acts.db");
    for round in 0..5 {
        let store: Arc<dyn KvStore> = Arc::new(
            RedbStore::open(&path, RedbOptions::default()).unwrap_or_else(|e| {
                panic!("round {round}: the previous engine still holds the file: {e}")
            }),
        );
        let engine = Engine::builder().store(store).start().await.unwrap();
        engine
            .executor()
            .model()
            .deploy_yaml(THREE_STEPS)
            .await
            .unwrap();
        // Finished processes leave background work behind (their
        // outbox replay); close must wait for it.
        for _ in 0..20 {
            engine
                .executor()
                .proc()
                .start("three", Vars::new())
                .await
                .unwrap();
        }
        engine.close().await;
    }
}

/// The reference spec's worked example §9.1 (the README quick start),
/// through the engine: the data flow and the messages a client sees.
#[tokio::test]
async fn the_quick_start_of_the_reference_spec_runs_as_documented() {
    let engine = Engine::builder()
        .store(store().await)
        .start()
        .await
        .unwrap();
    let exec = engine.executor();
    exec.model().deploy_yaml(
        "id: my_model\nver: 0.1.0\nname: my model\nsteps:\n  - name: step 1\n    uses: acts.transform.set\n    params: { a: 10 }\n  - name: step 2\n    uses: acts.transform.code\n    params: |\n      return { data: a + 10 };\n",
    )
    .await
    .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let info = exec
        .proc()
        .start("my_model", vars(json!({"a": 0, "pid": "w1"})))
        .await
        .unwrap();
    assert_eq!(info.pid, "w1");
    assert_eq!(
        serde_json::Value::Object(info.outputs),
        json!({"a": 10, "data": 20, "pid": "w1"})
    );
    let mut seen = Vec::new();
    while let Ok(m) = rx.try_recv() {
        seen.push(m.short());
    }
    assert_eq!(
        seen,
        [
            "workflow/created",
            "step/created",
            "act/completed",
            "step/completed",
            "step/created",
            "act/completed",
            "step/completed",
            "workflow/completed"
        ]
    );
}
