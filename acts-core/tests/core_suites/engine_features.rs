//! Engine scenarios for the packages and actions that need the engine:
//! subflow, timeouts on a manual clock, application packages, back and
//! cancel, parking over the cap, start-time input checks.

use crate::common;
use common::*;

use std::sync::Arc;
use std::time::Duration;

use acts_core::engine::{
    ActPackage, ChannelOptions, Engine, EngineError, PackageContext, PackageFailure,
};
use acts_core::model::Vars;
use acts_core::package::{PackageDefinition, RunAs};
use acts_core::scheduler::TaskState;
use acts_core::time::ManualClock;
use async_trait::async_trait;
use serde_json::json;

#[tokio::test]
async fn subflow_runs_the_child_and_completes_the_parent_act_with_its_outputs() {
    let engine = Engine::builder()
        .store(store().await)
        .start()
        .await
        .unwrap();
    let exec = engine.executor();
    exec.model().deploy_yaml(
        "id: child\nver: '1'\nsteps:\n  - id: c1\n    uses: acts.transform.code\n    params: 'return { doubled: n * 2 }'\n",
    )
    .await
    .unwrap();
    exec.model().deploy_yaml(
        "id: parent\nver: '1'\nsteps:\n  - id: call\n    uses: acts.core.subflow\n    params:\n      to: child\n      options: { n: 21 }\n  - id: after\n    uses: acts.transform.code\n    params: 'return { seen: doubled }'\n",
    )
    .await
    .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let parent = exec.proc().start("parent", Vars::new()).await.unwrap();
    let end = recv_where(&mut rx, ends(&parent.pid)).await;
    assert_eq!(end.state, "completed");
    let out = exec.proc().get(&parent.pid).await.unwrap().outputs;
    assert_eq!(out.get("seen"), Some(&json!(42)), "{out:?}");
    assert_eq!(
        out.get("pid"),
        Some(&json!(parent.pid)),
        "the child's pid stays with the child"
    );
    engine.close().await;
}

#[tokio::test]
async fn a_subflow_to_a_missing_model_fails_its_act_visibly() {
    let engine = Engine::builder()
        .store(store().await)
        .start()
        .await
        .unwrap();
    let exec = engine.executor();
    exec.model().deploy_yaml(
        "id: lonely\nver: '1'\nsteps:\n  - id: call\n    uses: acts.core.subflow\n    params: { to: nowhere }\n",
    )
    .await
    .unwrap();
    let info = exec.proc().start("lonely", Vars::new()).await.unwrap();
    assert_eq!(info.state, TaskState::Error);
    let message = info.err.unwrap().message;
    assert!(message.contains("nowhere"), "{message}");
}

#[tokio::test]
async fn a_step_timeout_fires_on_the_engine_clock_not_on_wall_time() {
    let clock = ManualClock::new(1_000_000);
    let engine = Engine::builder()
        .store(store().await)
        .clock(Arc::new(clock.clone()))
        .start()
        .await
        .unwrap();
    let exec = engine.executor();
    exec.model()
        .deploy_yaml(
            r#"
id: slow
ver: "1"
steps:
  - id: wait
    uses: acts.core.irq
    params: { key: approve }
    timeouts:
      - id: remind
        if: $cost_in("1h")
        uses: acts.core.msg
        params: { key: reminder }
      - id: give_up
        if: $cost_in("2h")
        uses: acts.core.action
        params: { action: abort }
"#,
        )
        .await
        .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let info = exec.proc().start("slow", Vars::new()).await.unwrap();
    recv_where(&mut rx, irq_created).await;
    clock.advance(Duration::from_secs(30 * 60));
    clock.advance(Duration::from_secs(31 * 60));
    let reminder = recv_where(&mut rx, |m| m.key.as_deref() == Some("reminder")).await;
    assert_eq!(reminder.r#type, "act");
    assert_eq!(
        exec.proc().get(&info.pid).await.unwrap().state,
        TaskState::Running,
        "only the first timeout fired"
    );
    clock.advance(Duration::from_secs(60 * 60));
    let end = recv_where(&mut rx, ends(&info.pid)).await;
    assert_eq!(end.state, "aborted");
    engine.close().await;
}

struct Greeter;

#[async_trait]
impl ActPackage for Greeter {
    fn definition(&self) -> PackageDefinition {
        PackageDefinition::new(
            "app.greet",
            RunAs::Func,
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        )
    }

    async fn run(&self, ctx: PackageContext) -> Result<Vars, PackageFailure> {
        let name = ctx.params["name"].as_str().unwrap_or_default().to_owned();
        if name == "nobody" {
            return Err(PackageFailure::new("E_NOBODY", "cannot greet nobody"));
        }
        Ok(vars(json!({"greeting": format!("hello {name}")})))
    }
}

#[tokio::test]
async fn application_packages_are_checked_at_deploy_and_run_by_the_engine() {
    let engine = Engine::builder()
        .store(store().await)
        .package(Greeter)
        .start()
        .await
        .unwrap();
    let exec = engine.executor();
    let bad = exec
        .model()
        .deploy_yaml(
            "id: g0\nver: '1'\nsteps:\n  - id: s\n    uses: app.greet\n    params: { name: 3 }\n",
        )
        .await;
    assert!(matches!(bad, Err(EngineError::Model(_))), "{bad:?}");
    exec.model()
        .deploy_yaml(
            r#"
id: greet
ver: "1"
steps:
  - id: s
    uses: app.greet
    params: { name: "${{ who }}" }
    catches:
      - id: c
        on: E_NOBODY
        uses: acts.transform.set
        params: { caught: true }
"#,
        )
        .await
        .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let ok = exec
        .proc()
        .start("greet", vars(json!({"who": "ada"})))
        .await
        .unwrap();
    recv_where(&mut rx, ends(&ok.pid)).await;
    let out = exec.proc().get(&ok.pid).await.unwrap().outputs;
    assert_eq!(out.get("greeting"), Some(&json!("hello ada")), "{out:?}");
    let caught = exec
        .proc()
        .start("greet", vars(json!({"who": "nobody"})))
        .await
        .unwrap();
    let end = recv_where(&mut rx, ends(&caught.pid)).await;
    assert_eq!(
        end.state, "completed",
        "the catch handled the package's error"
    );
    engine.close().await;
}

/// Answers more than the engine's vars limit.
struct Flood;

#[async_trait]
impl ActPackage for Flood {
    fn definition(&self) -> PackageDefinition {
        PackageDefinition::new("app.flood", RunAs::Func, json!({}))
    }

    async fn run(&self, _ctx: PackageContext) -> Result<Vars, PackageFailure> {
        Ok(vars(json!({"big": "x".repeat(2 << 20)})))
    }
}

#[tokio::test]
async fn package_outputs_over_the_vars_limit_fail_the_act_instead_of_leaving_it_running() {
    let engine = Engine::builder()
        .store(store().await)
        .package(Flood)
        .start()
        .await
        .unwrap();
    let exec = engine.executor();
    exec.model()
        .deploy_yaml("id: flood\nver: '1'\nsteps:\n  - id: s\n    uses: app.flood\n")
        .await
        .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = exec.proc().start("flood", Vars::new()).await.unwrap();
    let end = recv_where(&mut rx, ends(&p.pid)).await;
    assert_eq!(end.state, "error");
    let info = exec.proc().get(&p.pid).await.unwrap();
    let err = info.err.expect("an error");
    assert_eq!(err.ecode, "package.too_large", "{err:?}");
    assert!(err.message.contains("max_vars_bytes"), "{err:?}");
    engine.close().await;
}

const TWO_IRQS: &str = r#"
id: review
ver: "1"
steps:
  - id: submit
    uses: acts.core.irq
    params: { key: submit }
  - id: approve
    uses: acts.core.irq
    params: { key: approve }
"#;

#[tokio::test]
async fn back_runs_the_earlier_step_again() {
    let engine = Engine::builder()
        .store(store().await)
        .start()
        .await
        .unwrap();
    let exec = engine.executor();
    exec.model().deploy_yaml(TWO_IRQS).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = exec.proc().start("review", Vars::new()).await.unwrap();
    let first = recv_where(&mut rx, irq_created).await;
    exec.act()
        .complete(&p.pid, &first.tid, Vars::new())
        .await
        .unwrap();
    let second = recv_where(&mut rx, irq_created).await;
    assert_eq!(second.key.as_deref(), Some("approve"));
    let missing = exec
        .act()
        .apply(
            &p.pid,
            &second.tid,
            acts_core::scheduler::Action::Back,
            Vars::new(),
        )
        .await;
    assert!(format!("{missing:?}").contains("to"), "{missing:?}");
    exec.act()
        .back(&p.pid, &second.tid, "submit")
        .await
        .unwrap();
    let again = recv_where(&mut rx, irq_created).await;
    assert_eq!(
        again.key.as_deref(),
        Some("submit"),
        "the submit step runs again"
    );
    assert_ne!(again.tid, first.tid, "as a new task");
    let backed = exec.task().get(&p.pid, &second.tid).await.unwrap();
    assert_eq!(backed.state, TaskState::Backed);
    engine.close().await;
}

#[tokio::test]
async fn cancel_withdraws_a_finished_act_and_undoes_the_next_step() {
    let engine = Engine::builder()
        .store(store().await)
        .start()
        .await
        .unwrap();
    let exec = engine.executor();
    exec.model().deploy_yaml(TWO_IRQS).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = exec.proc().start("review", Vars::new()).await.unwrap();
    let first = recv_where(&mut rx, irq_created).await;
    exec.act()
        .complete(&p.pid, &first.tid, Vars::new())
        .await
        .unwrap();
    let second = recv_where(&mut rx, irq_created).await;
    exec.act().cancel(&p.pid, &first.tid).await.unwrap();
    let cancelled = recv_where(&mut rx, |m| m.state == "cancelled").await;
    assert_eq!(cancelled.tid, second.tid);
    let redo = recv_where(&mut rx, irq_created).await;
    assert_eq!(redo.key.as_deref(), Some("submit"));
    // The act of the re-run step is not done: cancelling it is refused.
    assert!(exec.act().cancel(&p.pid, &redo.tid).await.is_err());
    engine.close().await;
}

#[tokio::test]
async fn over_the_cap_starts_are_parked_and_run_when_a_slot_frees() {
    let engine = Engine::builder()
        .store(store().await)
        .cache_cap(1)
        .start()
        .await
        .unwrap();
    let exec = engine.executor();
    exec.model().deploy_yaml(TWO_IRQS).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let a = exec.proc().start("review", Vars::new()).await.unwrap();
    let b = exec.proc().start("review", Vars::new()).await.unwrap();
    assert_eq!(a.state, TaskState::Running);
    assert_eq!(b.state, TaskState::None, "parked");
    assert_eq!(engine.runtime().cache().count(), 1);
    assert_eq!(engine.runtime().cache().parked(), vec![b.pid.clone()]);
    // Finish a: b starts.
    for _ in 0..2 {
        let irq = recv_where(&mut rx, |m| irq_created(m) && m.pid == a.pid).await;
        exec.act()
            .complete(&a.pid, &irq.tid, Vars::new())
            .await
            .unwrap();
    }
    recv_where(&mut rx, ends(&a.pid)).await;
    let irq_b = recv_where(&mut rx, |m| irq_created(m) && m.pid == b.pid).await;
    assert_eq!(irq_b.key.as_deref(), Some("submit"));
    assert_eq!(engine.runtime().cache().resident(), vec![b.pid.clone()]);
    engine.close().await;
}

#[tokio::test]
async fn start_checks_inputs_and_external_pids() {
    let engine = Engine::builder()
        .store(store().await)
        .start()
        .await
        .unwrap();
    let exec = engine.executor();
    exec.model().deploy_yaml(
        "id: typed\nver: '1'\ninputs:\n  - name: amount\n    type: number\n    required: true\n  - name: pid\nsteps:\n  - id: s\n",
    )
    .await
    .unwrap();
    let missing = exec.proc().start("typed", Vars::new()).await;
    assert!(
        matches!(&missing, Err(EngineError::Inputs { message, .. }) if message.contains("amount")),
        "{missing:?}"
    );
    let wrong = exec
        .proc()
        .start("typed", vars(json!({"amount": "ten"})))
        .await;
    assert!(
        matches!(wrong, Err(EngineError::Inputs { .. })),
        "{wrong:?}"
    );
    let ok = exec
        .proc()
        .start("typed", vars(json!({"amount": 10, "pid": "order1"})))
        .await
        .unwrap();
    assert_eq!(ok.pid, "order1");
    let dup = exec
        .proc()
        .start("typed", vars(json!({"amount": 10, "pid": "order1"})))
        .await;
    assert!(matches!(dup, Err(EngineError::Duplicated(_))), "{dup:?}");
    let bad = exec
        .proc()
        .start("typed", vars(json!({"amount": 1, "pid": "a-b"})))
        .await;
    assert!(matches!(bad, Err(EngineError::BadPid { .. })), "{bad:?}");
    assert!(matches!(
        exec.proc().start("nope", Vars::new()).await,
        Err(EngineError::ModelNotFound(_))
    ));
}

/// A place that frees while a parked process's row is still being written
/// (or before its start has noted the row) must still start it: the row's
/// commit itself looks for free places.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_process_starts_when_the_place_frees_while_its_row_is_written() {
    use acts_testkit::{GateKind, GatedStore};
    let gated = Arc::new(GatedStore::new(acts_store::MemoryStore::new()));
    let engine = Engine::builder()
        .store(gated.clone())
        .cache_cap(1)
        .start()
        .await
        .unwrap();
    let exec = engine.executor();
    exec.model().deploy_yaml(TWO_IRQS).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let a = exec.proc().start("review", Vars::new()).await.unwrap();
    recv_where(&mut rx, |m| irq_created(m) && m.pid == a.pid).await;
    // B is parked; its row write is held in the store.
    gated.arm(GateKind::Write);
    let b = {
        let exec = exec.clone();
        tokio::spawn(async move { exec.proc().start("review", Vars::new()).await })
    };
    gated.wait_parked(GateKind::Write, 1).await;
    // A ends meanwhile (its end commits after B's row: one writer, in
    // order); nothing else would look for work.
    let a_ends = {
        let exec = exec.clone();
        let pid = a.pid.clone();
        tokio::spawn(async move { exec.proc().abort(&pid).await })
    };
    gated.disarm(GateKind::Write);
    let b = b.await.unwrap().unwrap();
    // B answers parked, or already running when A's end freed the place
    // before B's start returned: both interleavings are correct.
    assert!(
        matches!(b.state, TaskState::None | TaskState::Running),
        "B was parked or started in the freed place: {:?}",
        b.state
    );
    a_ends.await.unwrap().unwrap();
    let irq = recv_where(&mut rx, |m| irq_created(m) && m.pid == b.pid).await;
    assert_eq!(
        irq.key.as_deref(),
        Some("submit"),
        "B started in the freed place"
    );
}

/// Found by the simulator (`acts-sim`, seed 1404): a `back` from one item
/// of a parallel fan-out left the other items' interrupts answerable;
/// answering one carried the abandoned run on, so the step after the
/// fan-out ran twice and the process stalled. Now what the back passes
/// over is skipped: only the new run's interrupts wait.
#[tokio::test]
async fn back_from_a_parallel_item_skips_the_other_items_of_the_abandoned_run() {
    let engine = Engine::builder()
        .store(store().await)
        .start()
        .await
        .unwrap();
    let exec = engine.executor();
    exec.model().deploy_yaml(
        "id: fan\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.transform.set\n    params: { a: 1 }\n  - id: s2\n    uses: acts.core.parallel\n    params:\n      in: ['x', 'y']\n      acts:\n        - { uses: acts.core.irq, params: { key: each } }\n  - id: s3\n    uses: acts.core.irq\n    params: { key: after }\n",
    )
    .await
    .unwrap();
    let pid = exec.proc().start("fan", Vars::new()).await.unwrap().pid;
    settle(&engine).await;
    let waiting = |tasks: &[acts_core::engine::TaskInfo]| -> Vec<String> {
        tasks
            .iter()
            .filter(|t| t.kind == "act" && t.state == TaskState::Interrupt)
            .map(|t| t.tid.clone())
            .collect()
    };
    let first = waiting(&exec.task().list(&pid).await.unwrap());
    assert_eq!(first.len(), 2);
    exec.act().back(&pid, &first[0], "s1").await.unwrap();
    settle(&engine).await;
    let tasks = exec.task().list(&pid).await.unwrap();
    let old_sibling = tasks.iter().find(|t| t.tid == first[1]).unwrap();
    assert_eq!(
        old_sibling.state,
        TaskState::Skipped,
        "passed over by the back"
    );
    let now = waiting(&tasks);
    assert_eq!(now.len(), 2, "the new run's two items wait");
    assert!(now.iter().all(|t| !first.contains(t)));
    for t in now {
        exec.act().complete(&pid, &t, Vars::new()).await.unwrap();
    }
    settle(&engine).await;
    let tasks = exec.task().list(&pid).await.unwrap();
    let after: Vec<_> = tasks.iter().filter(|t| t.nid == "s3").collect();
    assert_eq!(after.len(), 1, "the step after the fan-out runs once");
    engine.close().await;
}
