//! Model versions: an identical deploy changes nothing, a changed one is a
//! new version, a process ends on the version it started on (across
//! restarts and newer deploys), a named version can be started, and a
//! version in use cannot be removed — not even by a removal racing a
//! start (proved with the gated store). Runs on every backend
//! (`ACTS_TEST_STORE`).

use crate::common;

use std::sync::Arc;

use acts_core::engine::{ChannelOptions, Engine, EngineError, Executor};
use acts_core::model::Vars;
use acts_core::scheduler::TaskState;
use acts_store::{KvStore, MemoryStore};
use acts_testkit::{GateKind, GatedStore};
use common::{GUARD, engine_on, irq_created, recv_where, store, vars};
use serde_json::json;

/// Version `n` of model `m`: an interrupt, then a step that records `n`.
fn model(n: u32) -> String {
    format!(
        "id: m\nname: approval\nver: '{n}.0'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: {{ key: ask }}\n  - id: record\n    uses: acts.transform.set\n    params: {{ made_by: {n} }}\n"
    )
}

/// Starts a process with `start` and answers its interrupt; returns the
/// process's `made_by` output.
async fn run_to_end(engine: &Engine, pid: &str) -> serde_json::Value {
    let exec = engine.executor();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let tasks = exec.task().list(pid).await.expect("tasks");
    let ask = match tasks.iter().find(|t| t.state == TaskState::Interrupt) {
        Some(t) => t.tid.clone(),
        None => {
            recv_where(&mut rx, |m| m.pid == pid && irq_created(m))
                .await
                .tid
        }
    };
    exec.act()
        .complete(pid, &ask, Vars::new())
        .await
        .expect("completes");
    let p = tokio::time::timeout(GUARD, async {
        loop {
            let p = exec.proc().get(pid).await.expect("process");
            if p.state.is_terminal() {
                return p;
            }
            // Not a spin: the waited-for work gets the cores.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the process ends (hang guard)");
    assert_eq!(p.state, TaskState::Completed, "{p:?}");
    p.outputs.get("made_by").cloned().unwrap_or_default()
}

async fn start(exec: &Executor, pid: &str) -> acts_core::engine::ProcInfo {
    exec.proc()
        .start("m", vars(json!({ "pid": pid })))
        .await
        .expect("starts")
}

#[tokio::test]
async fn an_identical_deploy_changes_nothing_and_a_changed_one_is_a_new_version() {
    let engine = engine_on(store().await, None).await;
    let exec = engine.executor();
    let first = exec.model().deploy_yaml(&model(1)).await.unwrap();
    assert_eq!(first.revision, 1);
    let again = exec.model().deploy_yaml(&model(1)).await.unwrap();
    assert_eq!(again.revision, 1, "same content: same version");
    assert!(again.unchanged && !first.unchanged);
    assert_eq!(again.deployed_at, first.deployed_at, "nothing was written");
    let versions = exec.model().versions("m").await.unwrap();
    assert_eq!(versions.len(), 1);
    let second = exec.model().deploy_yaml(&model(2)).await.unwrap();
    assert_eq!(second.revision, 2);
    assert_eq!(second.ver, "2.0");
    let versions = exec.model().versions("m").await.unwrap();
    let listed: Vec<(u32, &str, bool)> = versions
        .iter()
        .map(|v| (v.model.revision, v.model.ver.as_str(), v.latest))
        .collect();
    assert_eq!(listed, [(1, "1.0", false), (2, "2.0", true)]);
    // Back to the first content: a third version, not a rollback in place.
    assert_eq!(
        exec.model().deploy_yaml(&model(1)).await.unwrap().revision,
        3
    );
    let (info, workflow) = exec.model().version("m", 2).await.unwrap();
    assert_eq!((info.revision, workflow.ver.as_str()), (2, "2.0"));
    assert!(matches!(
        exec.model().version("m", 9).await,
        Err(EngineError::VersionNotFound { revision: 9, .. })
    ));
}

#[tokio::test]
async fn a_process_ends_on_its_version_after_a_newer_deploy_and_a_restart() {
    let kv = store().await;
    let engine = engine_on(kv.clone(), None).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(&model(1)).await.unwrap();
    let old = start(&exec, "old").await;
    assert_eq!(old.model_rev, 1);
    exec.model().deploy_yaml(&model(2)).await.unwrap();
    let new = start(&exec, "new").await;
    assert_eq!(new.model_rev, 2);
    engine.close().await;

    let engine = engine_on(kv.clone(), None).await;
    let exec = engine.executor();
    assert_eq!(exec.proc().get("old").await.unwrap().model_rev, 1);
    assert_eq!(run_to_end(&engine, "old").await, json!(1), "ran version 1");
    assert_eq!(run_to_end(&engine, "new").await, json!(2), "ran version 2");
    // The model a process shows is its version's.
    assert_eq!(exec.proc().model("old").await.unwrap().ver, "1.0");
    // A named version starts on demand.
    let named = exec
        .proc()
        .start_version("m", 1, vars(json!({ "pid": "named" })))
        .await
        .unwrap();
    assert_eq!(named.model_rev, 1);
    assert_eq!(run_to_end(&engine, "named").await, json!(1));
    assert!(matches!(
        exec.proc().start_version("m", 7, Vars::new()).await,
        Err(EngineError::VersionNotFound { revision: 7, .. })
    ));
    let v1 = &exec.model().versions("m").await.unwrap()[0];
    assert_eq!((v1.processes, v1.unfinished), (2, 0));
    engine.close().await;
}

#[tokio::test]
async fn a_version_in_use_or_latest_cannot_be_removed() {
    let engine = engine_on(store().await, None).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(&model(1)).await.unwrap();
    start(&exec, "p1").await;
    exec.model().deploy_yaml(&model(2)).await.unwrap();
    let in_use = exec.model().remove_version("m", 1).await.unwrap_err();
    assert!(
        matches!(in_use, EngineError::VersionInUse { revision: 1, .. }),
        "{in_use}"
    );
    assert!(in_use.to_string().contains("'p1'"), "{in_use}");
    let latest = exec.model().remove_version("m", 2).await.unwrap_err();
    assert!(latest.to_string().contains("latest"), "{latest}");
    // A finished process still holds its version (it is shown with it).
    assert_eq!(run_to_end(&engine, "p1").await, json!(1));
    assert!(exec.model().remove_version("m", 1).await.is_err());
    assert!(exec.proc().remove("p1").await.unwrap());
    assert!(exec.model().remove_version("m", 1).await.unwrap());
    assert!(
        !exec.model().remove_version("m", 1).await.unwrap(),
        "gone already"
    );
    let revisions: Vec<u32> = exec
        .model()
        .versions("m")
        .await
        .unwrap()
        .iter()
        .map(|v| v.model.revision)
        .collect();
    assert_eq!(revisions, [2]);
}

#[tokio::test]
async fn removing_a_model_keeps_the_versions_its_processes_run_on() {
    let kv = store().await;
    let engine = engine_on(kv.clone(), None).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(&model(1)).await.unwrap();
    exec.model().deploy_yaml(&model(2)).await.unwrap();
    start(&exec, "runs_v2").await;
    assert!(exec.model().remove("m").await.unwrap());
    assert!(matches!(
        exec.proc().start("m", Vars::new()).await,
        Err(EngineError::ModelNotFound(_))
    ));
    let kept: Vec<(u32, bool)> = exec
        .model()
        .versions("m")
        .await
        .unwrap()
        .iter()
        .map(|v| (v.model.revision, v.latest))
        .collect();
    assert_eq!(kept, [(2, false)], "version 1 had no process: gone");
    engine.close().await;

    let engine = engine_on(kv, None).await;
    assert_eq!(run_to_end(&engine, "runs_v2").await, json!(2));
    // A new deploy continues the numbering after the kept version.
    let exec = engine.executor();
    assert_eq!(
        exec.model().deploy_yaml(&model(5)).await.unwrap().revision,
        3
    );
}

/// A removal that runs while a start's first write is held in the store
/// must keep the version the start uses: the start read it before the
/// removal, and its row is not stored yet for the removal to see.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removal_racing_a_start_keeps_the_version_the_start_uses() {
    let gated = Arc::new(GatedStore::new(MemoryStore::new()));
    let kv: Arc<dyn KvStore> = gated.clone();
    let engine = engine_on(kv.clone(), None).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(&model(1)).await.unwrap();
    gated.arm(GateKind::Write);
    let starting = {
        let exec = exec.clone();
        tokio::spawn(async move {
            exec.proc()
                .start("m", vars(json!({ "pid": "racer" })))
                .await
        })
    };
    gated.wait_parked(GateKind::Write, 1).await;
    let removal = {
        let exec = exec.clone();
        tokio::spawn(async move { exec.model().remove("m").await })
    };
    // The removal decides what to delete, then its write queues behind
    // the held one: once it is queued, every check it makes is done.
    tokio::time::timeout(GUARD, async {
        while engine.runtime().stats().queued_writes == 0 {
            // Not a spin: the waited-for work gets the cores.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the removal's write queues (hang guard)");
    assert!(!removal.is_finished() && !starting.is_finished());
    gated.disarm(GateKind::Write);
    assert_eq!(starting.await.unwrap().unwrap().model_rev, 1);
    assert!(removal.await.unwrap().unwrap());
    let kept: Vec<u32> = exec
        .model()
        .versions("m")
        .await
        .unwrap()
        .iter()
        .map(|v| v.model.revision)
        .collect();
    assert_eq!(kept, [1], "the started process's version stays");
    engine.close().await;
    let engine = engine_on(kv, None).await;
    assert_eq!(run_to_end(&engine, "racer").await, json!(1));
}
