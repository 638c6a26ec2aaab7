//! Migrating running processes between model versions: a process waiting
//! in an interrupt, on a timer, in a parallel fan-out and on a subflow
//! child moves to the new version and finishes on it; the dry run reports
//! exactly what the migration then does; a process that cannot move is
//! left untouched; a finished task whose node is gone stays as history;
//! the move is one batch (a crash right after it keeps it, right before it
//! loses all of it). Runs on every backend (`ACTS_TEST_STORE`) but the
//! crash test.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use acts_core::engine::{
    ChannelOptions, EngineError, Executor, MigrationPlan, MigrationReport, ProcInfo,
};
use acts_core::model::Vars;
use acts_core::scheduler::{Message, TaskState};
use acts_core::time::ManualClock;
use acts_testkit::CrashStore;
use common::{ends, engine_on, irq_created, recv, recv_where, settle, store, vars, waiting};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

const HOUR: Duration = Duration::from_secs(3600);

fn plan(model: &str, from: u32, to: u32) -> MigrationPlan {
    {
        let mut v = MigrationPlan::default();
        v.model = model.into();
        v.from = from;
        v.to = to;
        v
    }
}

/// Runs `plan` as a dry run, then for real; asserts the two reports agree
/// on every process, and returns the real one.
async fn dry_then_real(exec: &Executor, plan: &MigrationPlan) -> MigrationReport {
    let dry = exec.model().migrate(plan, true).await.expect("the dry run");
    assert!(dry.dry_run);
    let real = exec
        .model()
        .migrate(plan, false)
        .await
        .expect("the migration");
    assert_eq!(dry.processes.len(), real.processes.len());
    for (d, r) in dry.processes.iter().zip(&real.processes) {
        let expected = match d.outcome.as_str() {
            "would_migrate" => "migrated",
            other => other,
        };
        assert_eq!(
            (d.pid.as_str(), expected),
            (r.pid.as_str(), r.outcome.as_str())
        );
        assert_eq!(d.reason, r.reason);
        assert_eq!(d.moves, r.moves, "the dry run named the same moves");
        assert_eq!(d.kept_as_history, r.kept_as_history);
        assert_eq!(d.reannounced, r.reannounced);
    }
    real
}

async fn finish(
    exec: &Executor,
    rx: &mut UnboundedReceiver<Message>,
    pid: &str,
) -> (ProcInfo, Value) {
    for tid in waiting(exec, pid).await {
        exec.act()
            .complete(pid, &tid, Vars::new())
            .await
            .expect("completes");
    }
    let end = recv_where(rx, ends(pid)).await;
    assert_eq!(end.state, "completed", "{end:?}");
    let info = exec.proc().get(pid).await.expect("the process");
    let made = info.outputs.get("made_by").cloned().unwrap_or_default();
    (info, made)
}

/// An interrupt, then a step recording the version (`done` in v1,
/// `finish` in v2, whose interrupt has a new label).
const ASK_V1: &str = "id: m\nver: '1'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: ask }\n  - id: done\n    uses: acts.transform.set\n    params: { made_by: 1 }\n";
const ASK_V2: &str = "id: m\nver: '2'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: ask, label: Approve }\n  - id: finish\n    uses: acts.transform.set\n    params: { made_by: 2 }\n";

#[tokio::test]
async fn a_process_in_an_interrupt_moves_and_finishes_on_the_new_version() {
    let clock = ManualClock::new(1_000_000);
    let kv = store().await;
    let engine = engine_on(kv.clone(), Some(&clock)).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(ASK_V1).await.unwrap();
    exec.proc()
        .start("m", vars(json!({ "pid": "p" })))
        .await
        .unwrap();
    exec.model().deploy_yaml(ASK_V2).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let mut p = plan("m", 1, 2);
    p.vars = vars(json!({ "migrated": true }));
    let report = dry_then_real(&exec, &p).await;
    let moved = &report.processes[0];
    assert_eq!(moved.outcome, "migrated");
    assert_eq!(moved.moves.len(), 3, "the root, the step and its act");
    assert!(moved.moves.iter().any(|m| m.from == "ask" && m.to == "ask"));
    // The interrupt's node changed (a new label): it is announced again.
    assert_eq!(moved.reannounced.len(), 1);
    let again = recv_where(&mut rx, irq_created).await;
    assert_eq!(again.pid, "p");
    assert_eq!(exec.proc().get("p").await.unwrap().model_rev, 2);
    // A second migration finds nothing left on version 1.
    assert!(
        exec.model()
            .migrate(&p, false)
            .await
            .unwrap()
            .processes
            .is_empty()
    );
    // The move survives a restart; the process ends on version 2.
    engine.close().await;
    let engine = engine_on(kv, Some(&clock)).await;
    let exec = engine.executor();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let (info, made) = finish(&exec, &mut rx, "p").await;
    assert_eq!((info.model_rev, made), (2, json!(2)));
    assert_eq!(info.outputs.get("migrated"), Some(&json!(true)));
    let root = exec
        .task()
        .list("p")
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.tid == "$")
        .expect("the root");
    let entry = root
        .history
        .iter()
        .find(|e| e.action == "migrate")
        .expect("the move is in the history");
    assert!(
        entry
            .detail
            .as_deref()
            .unwrap_or_default()
            .contains("version 1 → 2"),
        "{entry:?}"
    );
    engine.close().await;
}

/// The same interrupt step in both versions, a new step after it.
const SAME_ASK_V2: &str = "id: m\nver: '2'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: ask }\n  - id: finish\n    uses: acts.transform.set\n    params: { made_by: 2 }\n";

#[tokio::test]
async fn an_interrupt_of_an_unchanged_step_moves_without_a_node_row_and_is_not_asked_again() {
    let clock = ManualClock::new(1_000_000);
    let kv = store().await;
    let engine = engine_on(kv.clone(), Some(&clock)).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(ASK_V1).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    exec.proc()
        .start("m", vars(json!({ "pid": "p" })))
        .await
        .unwrap();
    let asked = recv_where(&mut rx, irq_created).await;
    exec.model().deploy_yaml(SAME_ASK_V2).await.unwrap();
    let report = dry_then_real(&exec, &plan("m", 1, 2)).await;
    let moved = &report.processes[0];
    assert_eq!(moved.outcome, "migrated");
    assert!(moved.reannounced.is_empty(), "{moved:?}");
    assert!(
        moved
            .moves
            .iter()
            .any(|m| m.tid == asked.tid && m.from == asked.nid && m.to == asked.nid),
        "{moved:?}"
    );
    // The act stays implied by its task and its (unchanged) step.
    let nodes =
        acts_core::durable::Collection::<acts_core::engine::testing::NodeRow>::new(kv.clone())
            .get_by_id_prefix("p/")
            .await
            .unwrap();
    assert!(nodes.is_empty(), "{nodes:?}");
    engine.close().await;
    let engine = engine_on(kv, Some(&clock)).await;
    let exec = engine.executor();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    assert_eq!(waiting(&exec, "p").await, vec![asked.tid.clone()]);
    let (info, made) = finish(&exec, &mut rx, "p").await;
    assert_eq!((info.model_rev, made), (2, json!(2)));
    engine.close().await;
}

#[tokio::test]
async fn a_parked_process_moves_and_starts_on_the_new_version() {
    // One admission place: the second process waits parked.
    let engine = acts_core::engine::Engine::builder()
        .store(store().await)
        .config({
            let mut v = acts_core::engine::EngineConfig::default();
            v.cache_cap = 1;
            v
        })
        .start()
        .await
        .expect("engine starts");
    let exec = engine.executor();
    exec.model().deploy_yaml(ASK_V1).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    exec.proc()
        .start("m", vars(json!({ "pid": "first" })))
        .await
        .unwrap();
    recv_where(&mut rx, |m| m.pid == "first" && irq_created(m)).await;
    let parked = exec
        .proc()
        .start("m", vars(json!({ "pid": "later" })))
        .await
        .unwrap();
    assert_eq!(parked.state, TaskState::None, "parked at the cap");
    exec.model().deploy_yaml(ASK_V2).await.unwrap();
    let mut p = plan("m", 1, 2);
    p.vars = vars(json!({ "migrated": true }));
    let report = dry_then_real(&exec, &p).await;
    let outcomes: BTreeMap<&str, &str> = report
        .processes
        .iter()
        .map(|m| (m.pid.as_str(), m.outcome.as_str()))
        .collect();
    assert_eq!(
        outcomes,
        BTreeMap::from([("first", "migrated"), ("later", "migrated")])
    );
    assert_eq!(exec.proc().get("later").await.unwrap().model_rev, 2);
    assert_eq!(
        exec.proc().get("later").await.unwrap().state,
        TaskState::None
    );
    // The place frees: the parked one starts, on version 2, with the vars.
    finish(&exec, &mut rx, "first").await;
    recv_where(&mut rx, |m| m.pid == "later" && irq_created(m)).await;
    let (info, made) = finish(&exec, &mut rx, "later").await;
    assert_eq!((info.model_rev, made), (2, json!(2)));
    assert_eq!(info.outputs.get("migrated"), Some(&json!(true)));
    engine.close().await;
}

#[tokio::test]
async fn a_process_on_a_timer_takes_the_new_versions_timeouts() {
    let clock = ManualClock::new(1_000_000);
    let engine = engine_on(store().await, Some(&clock)).await;
    let exec = engine.executor();
    let timed = |after: &str| {
        format!(
            "id: t\nver: '{after}'\nsteps:\n  - id: wait\n    uses: acts.core.irq\n    params: {{ key: pay }}\n    timeouts:\n      - id: remind\n        if: $cost_in(\"{after}\")\n        uses: acts.core.msg\n        params: {{ key: reminder }}\n"
        )
    };
    exec.model().deploy_yaml(&timed("1h")).await.unwrap();
    exec.proc()
        .start("t", vars(json!({ "pid": "t1" })))
        .await
        .unwrap();
    exec.model().deploy_yaml(&timed("3h")).await.unwrap();
    let report = dry_then_real(&exec, &plan("t", 1, 2)).await;
    assert_eq!(report.processes[0].outcome, "migrated");
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    clock.advance(2 * HOUR);
    settle(&engine).await;
    let remind = |exec: Executor| async move {
        exec.task()
            .list("t1")
            .await
            .unwrap()
            .into_iter()
            .any(|t| t.nid == "remind")
    };
    assert!(
        !remind(exec.clone()).await,
        "version 1's hour no longer counts"
    );
    clock.advance(2 * HOUR);
    let m = recv_where(&mut rx, |m| m.key.as_deref() == Some("reminder")).await;
    assert_eq!(m.pid, "t1");
    assert!(remind(exec.clone()).await);
    engine.close().await;
}

#[tokio::test]
async fn a_parallel_fan_out_and_a_subflow_parent_move_with_their_waiting_acts() {
    let clock = ManualClock::new(1_000_000);
    let engine = engine_on(store().await, Some(&clock)).await;
    let exec = engine.executor();
    let fan = |n: u32| {
        format!(
            "id: fan\nver: '{n}'\nvars:\n  - {{ name: who, value: [a, b, c] }}\nsteps:\n  - id: fan_out\n    uses: acts.core.parallel\n    params:\n      in: ${{{{ who }}}}\n      acts:\n        - uses: acts.core.irq\n          params: {{ key: sign }}\n  - id: after{n}\n    uses: acts.transform.set\n    params: {{ made_by: {n} }}\n"
        )
    };
    exec.model().deploy_yaml(&fan(1)).await.unwrap();
    exec.model().deploy_yaml(
        "id: child\nver: '1'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: child }\n",
    )
    .await
    .unwrap();
    let parent = |n: u32| {
        format!(
            "id: parent\nver: '{n}'\nsteps:\n  - id: call\n    uses: acts.core.subflow\n    params: {{ to: child }}\n  - id: after{n}\n    uses: acts.transform.set\n    params: {{ made_by: {n} }}\n"
        )
    };
    exec.model().deploy_yaml(&parent(1)).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    exec.proc()
        .start("fan", vars(json!({ "pid": "f" })))
        .await
        .unwrap();
    exec.proc()
        .start("parent", vars(json!({ "pid": "par" })))
        .await
        .unwrap();
    // Three fan-out interrupts and the child's.
    for _ in 0..4 {
        recv_where(&mut rx, irq_created).await;
    }
    exec.model().deploy_yaml(&fan(2)).await.unwrap();
    exec.model().deploy_yaml(&parent(2)).await.unwrap();
    let fanned = dry_then_real(&exec, &plan("fan", 1, 2)).await;
    assert_eq!(fanned.processes[0].outcome, "migrated");
    assert_eq!(
        fanned.processes[0]
            .moves
            .iter()
            .filter(|m| m.state == TaskState::Interrupt)
            .count(),
        3,
        "every waiting item moves: {:?}",
        fanned.processes[0].moves
    );
    let called = dry_then_real(&exec, &plan("parent", 1, 2)).await;
    assert_eq!(called.processes[0].outcome, "migrated");
    let (info, made) = finish(&exec, &mut rx, "f").await;
    assert_eq!((info.model_rev, made), (2, json!(2)));
    // The child (its own model, not migrated) ends; its return reaches the
    // migrated parent, which ends on version 2.
    let child: Vec<String> = exec
        .proc()
        .find(&acts_core::engine::ProcessQuery::new().model("child"))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| p.pid)
        .collect();
    assert_eq!(child.len(), 1);
    for tid in waiting(&exec, &child[0]).await {
        exec.act()
            .complete(&child[0], &tid, Vars::new())
            .await
            .unwrap();
    }
    let end = recv_where(&mut rx, ends("par")).await;
    assert_eq!(end.state, "completed");
    let info = exec.proc().get("par").await.unwrap();
    assert_eq!(info.outputs.get("made_by"), Some(&json!(2)));
    engine.close().await;
}

#[tokio::test]
async fn a_process_that_cannot_move_is_untouched_and_a_map_moves_it() {
    let clock = ManualClock::new(1_000_000);
    let engine = engine_on(store().await, Some(&clock)).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(
        "id: r\nver: '1'\nsteps:\n  - id: prepare\n    uses: acts.transform.set\n    params: { prepared: true }\n  - id: ask\n    uses: acts.core.irq\n    params: { key: ask }\n",
    )
    .await
    .unwrap();
    exec.proc()
        .start("r", vars(json!({ "pid": "r1" })))
        .await
        .unwrap();
    // Version 2 drops `prepare` and renames `ask` to `approve`.
    exec.model().deploy_yaml(
        "id: r\nver: '2'\nsteps:\n  - id: approve\n    uses: acts.core.irq\n    params: { key: ask }\n  - id: close\n    uses: acts.transform.set\n    params: { made_by: 2 }\n",
    )
    .await
    .unwrap();
    let before = exec.task().list("r1").await.unwrap();
    let report = dry_then_real(&exec, &plan("r", 1, 2)).await;
    let refused = &report.processes[0];
    assert_eq!(refused.outcome, "unmigratable");
    let why = refused.reason.as_deref().unwrap_or_default();
    assert!(why.contains("'ask'") && why.contains("map it"), "{why}");
    assert_eq!(
        exec.proc().get("r1").await.unwrap().model_rev,
        1,
        "untouched"
    );
    assert_eq!(
        exec.task().list("r1").await.unwrap(),
        before,
        "nothing changed"
    );
    // Mapped, it moves; the finished `prepare` stays as history.
    let mut mapped = plan("r", 1, 2);
    mapped.map = BTreeMap::from([("ask".to_owned(), "approve".to_owned())]);
    let report = dry_then_real(&exec, &mapped).await;
    let moved = &report.processes[0];
    assert_eq!(moved.outcome, "migrated", "{moved:?}");
    assert_eq!(
        moved.kept_as_history.len(),
        2,
        "prepare's step and act: {moved:?}"
    );
    assert!(
        moved
            .moves
            .iter()
            .any(|m| m.from == "ask" && m.to == "approve")
    );
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let (info, made) = finish(&exec, &mut rx, "r1").await;
    assert_eq!((info.model_rev, made), (2, json!(2)));
    assert!(
        exec.task()
            .list("r1")
            .await
            .unwrap()
            .iter()
            .any(|t| t.nid == "prepare"),
        "history kept"
    );
    // Plans that cannot work are refused before anything is read.
    let mut bad = plan("r", 1, 2);
    bad.map = BTreeMap::from([("ask".to_owned(), "nowhere".to_owned())]);
    assert!(matches!(
        exec.model().migrate(&bad, true).await,
        Err(EngineError::Conflict(_))
    ));
    assert!(matches!(
        exec.model().migrate(&plan("r", 1, 9), true).await,
        Err(EngineError::VersionNotFound { revision: 9, .. })
    ));
    assert!(exec.model().migrate(&plan("r", 2, 2), true).await.is_err());
    let user = exec.as_principal(acts_core::engine::Principal::new("ann", ["operator"]));
    assert!(matches!(
        user.model().migrate(&mapped, true).await,
        Err(EngineError::Denied { .. })
    ));
    engine.close().await;
}

#[tokio::test]
async fn a_migration_is_one_batch_across_a_crash() {
    let clock = ManualClock::new(1_000_000);
    let crash = Arc::new(CrashStore::new());
    let engine = engine_on(crash.clone(), Some(&clock)).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(ASK_V1).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    exec.proc()
        .start("m", vars(json!({ "pid": "p" })))
        .await
        .unwrap();
    recv(&mut rx).await;
    exec.model().deploy_yaml(ASK_V2).await.unwrap();
    engine.storage().flush().await.unwrap();
    let before = crash.committed().await;
    exec.model().migrate(&plan("m", 1, 2), false).await.unwrap();
    let after = crash.committed().await;
    assert_eq!(after, before + 1, "one process, one batch");
    crash.crash_after(after);
    drop(engine);
    for (store, rev, made) in [
        (crash.recover().await, 2, json!(2)),
        (crash.recover_prefix(before).await, 1, json!(1)),
    ] {
        let engine = engine_on(Arc::new(store), Some(&clock)).await;
        let exec = engine.executor();
        assert_eq!(exec.proc().get("p").await.unwrap().model_rev, rev);
        let mut rx = engine.channel(ChannelOptions::default()).subscribe();
        let (_, got) = finish(&exec, &mut rx, "p").await;
        assert_eq!(got, made);
        engine.close().await;
    }
}
