//! The guarantees under attack: one process's scripts never see or change
//! another's, engine-owned keys stay the engine's, a pid can be used again
//! after a removal, and a write that was skipped is never an `Ok`.
//! Runs on every backend (`ACTS_TEST_STORE`).

use crate::common;
use common::*;

use std::sync::Arc;
use std::time::Duration;

use acts_core::engine::{ChannelOptions, Engine, EngineError};
use acts_core::model::Vars;
use acts_core::scheduler::TaskState;
use acts_store::KvStore;
use acts_testkit::{GateKind, GatedStore};
use serde_json::json;

const WAITS: &str =
    "id: m1\nver: '1'\nsteps:\n  - id: step1\n    uses: acts.core.irq\n    params: { key: k1 }\n";

/// A victim whose outcome depends on its own data only.
const VICTIM: &str = r#"
id: victim
ver: "1"
steps:
  - id: check
    branches:
      - id: small
        if: amount < 1000
        steps:
          - { id: auto, uses: acts.transform.set, params: { approved: auto } }
      - id: big
        else: true
        steps:
          - { id: ask, uses: acts.core.irq, params: { key: approve } }
  - id: total
    uses: acts.transform.code
    params: "return { doubled: amount * 2 }"
"#;

/// A spy that tries every way to reach another process's evaluation.
const SPY: &str = r#"
id: spy
ver: "1"
steps:
  - id: plant
    uses: acts.transform.code
    params: |
      Object.defineProperty(globalThis, 'amount', { configurable: false, get() { return 1; }, set(v) { globalThis.seen = v; } });
      Object.prototype.injected = 'spy';
      leaked = 'spy';
      globalThis.$set = () => {};
      globalThis.JSON = { stringify: () => '{"forged":true}', parse: JSON.parse };
      return { planted: true };
  - id: look
    uses: acts.transform.code
    params: "return { saw: typeof seen === 'undefined' ? null : seen, leak: typeof leaked }"
"#;

/// An engine on `kv` with `config` that does not resume on start.
async fn engine_with(kv: Arc<dyn KvStore>, config: acts_core::engine::EngineConfig) -> Engine {
    Engine::builder()
        .store(kv)
        .resume_on_start(false)
        .config(config)
        .start()
        .await
        .expect("engine starts")
}

async fn engine_on(kv: Arc<dyn KvStore>) -> Engine {
    Engine::builder()
        .store(kv)
        .resume_on_start(false)
        .start()
        .await
        .expect("engine starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spy_process_neither_sees_nor_changes_a_victim_process() {
    let engine = engine_on(store().await).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(VICTIM).await.unwrap();
    exec.model().deploy_yaml(SPY).await.unwrap();
    // The victim's crash-free, spy-free outcome.
    let alone = exec
        .proc()
        .start("victim", vars(json!({"amount": 5000})))
        .await
        .unwrap();
    assert_eq!(
        alone.state,
        TaskState::Running,
        "a big amount waits to be approved"
    );
    // Interleaved: spy, victim, spy, victim, ... on the one engine.
    for _ in 0..8 {
        let spy = exec.proc().start("spy", Vars::new()).await.unwrap();
        assert_eq!(spy.state, TaskState::Completed);
        assert_eq!(
            spy.outputs.get("saw"),
            Some(&json!(null)),
            "the spy saw nothing"
        );
        assert_eq!(spy.outputs.get("leak"), Some(&json!("undefined")));
        let victim = exec
            .proc()
            .start("victim", vars(json!({"amount": 5000})))
            .await
            .unwrap();
        assert_eq!(
            victim.state, alone.state,
            "the spy changed the victim's branch"
        );
        assert_eq!(victim.outputs.get("approved"), None);
        let small = exec
            .proc()
            .start("victim", vars(json!({"amount": 10})))
            .await
            .unwrap();
        assert_eq!(small.state, TaskState::Completed);
        let mut want = vars(json!({"amount": 10, "approved": "auto", "doubled": 20}));
        want.insert("pid".into(), json!(small.pid));
        assert_eq!(small.outputs, want, "exactly the victim's own outputs");
    }
    engine.close().await;
}

#[tokio::test]
async fn engine_owned_keys_cannot_be_overwritten_by_scripts_actions_or_start_vars() {
    let engine = engine_on(store().await).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(
        r#"
id: owned
ver: "1"
steps:
  - id: s1
    uses: acts.transform.code
    params: "$set_process_var('pid', 'forged'); $set('pid', 'forged2'); return { pid: 'forged3', ok: 1 }"
  - id: s2
    uses: acts.transform.set
    params: { pid: forged4 }
  - id: s3
    vars:
      - { name: pid, value: forged5 }
  - id: ask
    uses: acts.core.irq
    params: { key: k }
"#,
    )
    .await
    .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = exec.proc().start("owned", Vars::new()).await.unwrap();
    let irq = recv_where(&mut rx, irq_created).await;
    let stored = exec.proc().get(&p.pid).await.unwrap();
    assert_eq!(
        stored.outputs.get("pid"),
        Some(&json!(p.pid)),
        "scripts cannot forge it"
    );
    // A client action that tries is refused, and nothing changes.
    let err = exec
        .act()
        .complete(&p.pid, &irq.tid, vars(json!({"pid": "forged6", "x": 1})))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("'pid' is an engine-owned key"),
        "{err}"
    );
    let err = exec
        .act()
        .set_process_vars(&p.pid, &irq.tid, vars(json!({"$parent_pid": "x"})))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("engine-owned"), "{err}");
    // Start options: `pid` names the process; the others are refused.
    let err = exec
        .proc()
        .start("owned", vars(json!({"$parent_pid": "someone"})))
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::Inputs { .. }), "{err}");
    exec.act()
        .complete(&p.pid, &irq.tid, vars(json!({"x": 1})))
        .await
        .unwrap();
    let done = exec.proc().get(&p.pid).await.unwrap();
    assert_eq!(done.state, TaskState::Completed);
    assert_eq!(done.outputs.get("pid"), Some(&json!(p.pid)));
    engine.close().await;
}

#[tokio::test]
async fn a_pid_used_again_after_its_removal_is_written_and_survives_a_restart() {
    let kv = store().await;
    let engine = engine_on(kv.clone()).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(WAITS).await.unwrap();
    let pid = vars(json!({"pid": "again"}));
    exec.proc().start("m1", pid.clone()).await.unwrap();
    assert!(exec.proc().remove("again").await.unwrap());
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = exec.proc().start("m1", pid.clone()).await.unwrap();
    assert_eq!(p.pid, "again");
    let irq = recv_where(&mut rx, |m| irq_created(m) && m.pid == "again").await;
    exec.act()
        .complete("again", &irq.tid, vars(json!({"answer": 42})))
        .await
        .unwrap();
    engine.close().await;
    let engine = engine_on(kv).await;
    let back = engine.executor().proc().get("again").await.unwrap();
    assert_eq!(back.state, TaskState::Completed, "the new life was written");
    assert_eq!(back.outputs.get("answer"), Some(&json!(42)));
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_skipped_because_its_process_was_removed_is_an_error_not_ok() {
    let gated = Arc::new(GatedStore::new(store().await));
    let engine = engine_on(gated.clone()).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(WAITS).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = exec
        .proc()
        .start("m1", vars(json!({"pid": "p1"})))
        .await
        .unwrap();
    let irq = recv_where(&mut rx, irq_created).await;
    // Another process's commit is held in the store ...
    gated.arm(GateKind::Write);
    let other = {
        let exec = exec.clone();
        tokio::spawn(async move { exec.proc().start("m1", vars(json!({"pid": "p2"}))).await })
    };
    gated.wait_parked(GateKind::Write, 1).await;
    // ... so the answer's batch waits in the writer's queue behind it.
    let answer = {
        let exec = exec.clone();
        let tid = irq.tid.clone();
        tokio::spawn(async move { exec.act().complete("p1", &tid, Vars::new()).await })
    };
    tokio::time::timeout(GUARD, async {
        while engine.storage().queued_writes() == 0 {
            // Not a spin: the waited-for work gets the cores.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the answer's batch is queued (hang guard)");
    // The removal marks the pid at once, then waits for the answer's lane.
    let removal = exec.proc().remove(&p.pid);
    tokio::pin!(removal);
    tokio::select! {
        biased;
        _ = &mut removal => panic!("the removal cannot finish while the answer holds the lane"),
        () = std::future::ready(()) => {}
    }
    gated.disarm(GateKind::Write);
    other.await.unwrap().unwrap();
    let err = answer.await.unwrap().unwrap_err();
    assert!(
        matches!(err, EngineError::Removed(ref pid) if pid == "p1"),
        "{err}"
    );
    assert!(removal.await.unwrap());
    assert!(
        exec.proc().get("p1").await.is_err(),
        "nothing of it is left"
    );
    engine.close().await;
}

/// Starts `model`, lets it run to its end, checks that it ended in error
/// and returns its pid and error message.
async fn ends_in_error(engine: &Engine, model: &str) -> (String, String) {
    let exec = engine.executor();
    let p = exec
        .proc()
        .start(model, Vars::new())
        .await
        .expect("test setup");
    settle(engine).await;
    let p = exec.proc().get(&p.pid).await.expect("test setup");
    assert_eq!(p.state, TaskState::Error, "{model}");
    let message = p.err.clone().expect("an error").message;
    (p.pid, message)
}

#[tokio::test]
async fn a_while_loop_that_never_ends_fails_the_process_naming_the_node() {
    let engine = engine_on(store().await).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(
        "id: spin\nver: '1'\nsteps:\n  - id: forever\n    name: Forever\n    while: '1 == 1'\n    uses: acts.transform.set\n    params: { x: 1 }\n",
    )
    .await
    .unwrap();
    let (_, message) = ends_in_error(&engine, "spin").await;
    assert!(
        message.contains("node 'forever' (Forever)") && message.contains("more than 1000 times"),
        "{message}"
    );
    engine.close().await;
}

#[tokio::test]
async fn a_backward_next_loop_of_automatic_steps_is_stopped_by_the_run_limit() {
    let kv = store().await;
    let engine = engine_with(kv, {
        let mut v = acts_core::engine::EngineConfig::default();
        v.run_limits = {
            let mut v = acts_core::scheduler::RunLimits::default();
            v.max_node_runs = 50;
            v
        };
        v
    })
    .await;
    let exec = engine.executor();
    exec.model().deploy_yaml(
        "id: back\nver: '1'\nsteps:\n  - id: a\n    uses: acts.transform.set\n    params: { v: 1 }\n  - id: b\n    uses: acts.transform.set\n    params: { w: 2 }\n    next: a\n",
    )
    .await
    .unwrap();
    let (pid, message) = ends_in_error(&engine, "back").await;
    assert!(message.contains("more than 50 times"), "{message}");
    let runs = exec
        .task()
        .list(&pid)
        .await
        .unwrap()
        .iter()
        .filter(|t| t.nid == "a")
        .count();
    assert_eq!(runs, 50, "exactly the limit ran");
    engine.close().await;
}

/// A step whose `next` names itself loops (the reference accepts it): its
/// `if` ends the loop, with the data carried along; without one, the run
/// limit does.
#[tokio::test]
async fn a_step_whose_next_names_itself_loops_until_its_if_or_the_run_limit() {
    let (engine, end) = run_to_end(
        "id: self\nver: '1'\nvars:\n  - { name: rounds, value: 0 }\nsteps:\n  - id: again\n    if: rounds < 3\n    uses: acts.transform.code\n    params: 'return { rounds: rounds + 1 }'\n    next: again\n  - id: done\n    uses: acts.transform.set\n    params: { finished: true }\n",
        "self",
    )
    .await;
    assert_eq!(end.state, "completed", "{end:?}");
    assert_eq!(end.outputs.get("rounds"), Some(&serde_json::json!(3)));
    assert_eq!(end.outputs.get("finished"), Some(&serde_json::json!(true)));
    engine.close().await;
    let engine = engine_with(store().await, {
        let mut v = acts_core::engine::EngineConfig::default();
        v.run_limits = {
            let mut v = acts_core::scheduler::RunLimits::default();
            v.max_node_runs = 20;
            v
        };
        v
    })
    .await;
    engine
        .executor()
        .model().deploy_yaml("id: forever\nver: '1'\nsteps:\n  - id: spin\n    uses: acts.transform.set\n    params: { v: 1 }\n    next: spin\n")
        .await
        .unwrap();
    let (_, message) = ends_in_error(&engine, "forever").await;
    assert!(message.contains("more than 20 times"), "{message}");
    engine.close().await;
}

/// A long linear model: 60 `set` steps, each adding to a sum.
/// The code steps of [`long_model`].
const LONG_STEPS: u64 = 60;

fn long_model() -> String {
    let mut y = String::from("id: long\nver: '1'\nvars:\n  - { name: sum, value: 0 }\nsteps:\n");
    for i in 0..LONG_STEPS {
        y.push_str(&format!(
            "  - id: s{i}\n    uses: acts.transform.code\n    params: 'return {{ sum: sum + {i} }}'\n"
        ));
    }
    y
}

fn small_budget() -> acts_core::engine::EngineConfig {
    {
        let mut v = acts_core::engine::EngineConfig::default();
        v.run_limits = {
            let mut v = acts_core::scheduler::RunLimits::default();
            v.jobs_per_run = 25;
            v
        };
        v
    }
}

#[tokio::test]
async fn one_transition_does_bounded_work_and_the_process_continues_in_the_next() {
    let engine = engine_with(store().await, small_budget()).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(&long_model()).await.unwrap();
    let p = exec.proc().start("long", Vars::new()).await.unwrap();
    assert_eq!(
        p.state,
        TaskState::Running,
        "the first transition handed back before the end"
    );
    settle(&engine).await;
    let done = exec.proc().get(&p.pid).await.unwrap();
    assert_eq!(done.state, TaskState::Completed);
    assert_eq!(done.outputs.get("sum"), Some(&json!((0..60).sum::<i32>())));
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_the_slices_of_a_long_run_resumes_where_it_left_off() {
    use acts_testkit::CrashStore;
    let recorded = Arc::new(CrashStore::new());
    let engine = engine_with(recorded.clone() as Arc<dyn KvStore>, small_budget()).await;
    engine
        .executor()
        .model()
        .deploy_yaml(&long_model())
        .await
        .unwrap();
    let p = engine
        .executor()
        .proc()
        .start("long", vars(json!({"pid": "p1"})))
        .await
        .unwrap();
    settle(&engine).await;
    let want = engine.executor().proc().get(&p.pid).await.unwrap();
    engine.close().await;
    let batches = recorded.committed().await;
    assert!(batches >= 4, "several slices were committed ({batches})");
    // The code steps each resumed run evaluated, by cut.
    let mut evaluated: Vec<u64> = Vec::new();
    for k in 1..=batches {
        let cut = recorded.recover_prefix(k).await;
        // This engine resumes what the cut store holds.
        let engine = Engine::builder()
            .store(Arc::new(cut) as Arc<dyn KvStore>)
            .config(small_budget())
            .start()
            .await
            .expect("engine starts");
        settle(&engine).await;
        match engine.executor().proc().get("p1").await {
            Ok(got) => {
                assert_eq!(got.state, TaskState::Completed, "cut {k}");
                assert_eq!(got.outputs, want.outputs, "cut {k}");
                // Where it left off, not from the start: a later cut
                // leaves fewer code steps to evaluate, never more.
                let left = engine.runtime().stats().scripts.evaluations;
                assert!(
                    left <= evaluated.last().copied().unwrap_or(LONG_STEPS),
                    "cut {k} of {batches}: {left} steps evaluated after {evaluated:?}"
                );
                evaluated.push(left);
            }
            // Cut before the start committed (the store's index fact, the
            // deploy, then the start): nothing to resume.
            Err(EngineError::ProcessNotFound(_)) => assert!(k <= 3, "cut {k}"),
            Err(e) => panic!("cut {k}: {e}"),
        }
        engine.close().await;
    }
    // The cut after the last slice has nothing left to run, and some cut
    // resumed in the middle: neither all 60 steps again nor none.
    assert_eq!(evaluated.last(), Some(&0), "{evaluated:?}");
    assert!(
        evaluated.iter().any(|n| (1..LONG_STEPS).contains(n)),
        "a cut between the slices resumed mid-run: {evaluated:?}"
    );
}

fn limited(run: acts_core::scheduler::RunLimits) -> acts_core::engine::EngineConfig {
    {
        let mut v = acts_core::engine::EngineConfig::default();
        v.run_limits = run;
        v.max_vars_bytes = 10_000;
        v.model_limits = {
            let mut v = acts_core::model::ModelLimits::default();
            v.max_bytes = 50_000;
            v.max_depth = 64;
            v
        };
        v
    }
}

#[tokio::test]
async fn oversized_and_overnested_models_are_refused_before_parsing() {
    let engine = engine_with(store().await, limited(Default::default())).await;
    let exec = engine.executor();
    let big = format!(
        "id: big\nver: '1'\nsteps:\n  - id: s\n    uses: acts.transform.set\n    params: {{ x: '{}' }}\n",
        "x".repeat(60_000)
    );
    let err = exec.model().deploy_yaml(&big).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("more than the limit of 50000 bytes"),
        "{err}"
    );
    // 40,000 levels of `[`: refused by a linear pre-scan (the parser alone
    // would take quadratic time before failing).
    let deep = format!(
        "id: deep\nver: '1'\nvars:\n  - name: x\n    value: {}\n",
        "[".repeat(40_000)
    );
    let limits = acts_core::model::ModelLimits::default();
    let err = acts_core::model::Workflow::load_yaml_within(&deep, &limits).unwrap_err();
    assert!(
        err.to_string().contains("nest deeper than 64 levels"),
        "{err}"
    );
    assert_eq!(err.location().map(|l| l.line), Some(5));
    // Alias expansion (a "billion laughs") is refused by the parser.
    let mut bomb = String::from(
        "id: bomb\nver: '1'\nvars:\n  - name: x\n    value:\n      a: &a [1,1,1,1,1,1,1,1,1]\n",
    );
    let mut prev = 'a';
    for n in "bcdefghi".chars() {
        bomb.push_str(&format!("      {n}: &{n} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"));
        prev = n;
    }
    bomb.push_str("steps:\n  - id: s1\n");
    let err = exec.model().deploy_yaml(&bomb).await.unwrap_err();
    assert!(err.to_string().contains("repetition limit"), "{err}");
    assert!(
        exec.model().list().await.unwrap().is_empty(),
        "nothing was deployed"
    );
    engine.close().await;
}

#[tokio::test]
async fn oversized_start_vars_and_action_options_are_refused_and_change_nothing() {
    let engine = engine_with(store().await, limited(Default::default())).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(WAITS).await.unwrap();
    let big = vars(json!({"blob": "x".repeat(20_000)}));
    let err = exec.proc().start("m1", big.clone()).await.unwrap_err();
    assert!(
        matches!(
            err,
            EngineError::TooLarge {
                setting: "max_vars_bytes",
                ..
            }
        ),
        "{err}"
    );
    assert!(exec.proc().list(None, None).await.unwrap().is_empty());
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = exec.proc().start("m1", Vars::new()).await.unwrap();
    let irq = recv_where(&mut rx, irq_created).await;
    let err = exec
        .act()
        .complete(&p.pid, &irq.tid, big)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("the action's options is 200"),
        "{err}"
    );
    let task = exec.task().get(&p.pid, &irq.tid).await.unwrap();
    assert_eq!(task.state, TaskState::Interrupt, "unchanged");
    engine.close().await;
}

#[tokio::test]
async fn a_scope_cannot_grow_past_its_limit_the_act_fails_naming_the_key() {
    let run = {
        let mut v = acts_core::scheduler::RunLimits::default();
        v.max_scope_bytes = 10_000;
        v
    };
    let kv = store().await;
    let engine = engine_with(kv.clone(), limited(run)).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(
        "id: grow\nver: '1'\nsteps:\n  - id: one\n    uses: acts.transform.code\n    params: \"return { huge: 'x'.repeat(20000) }\"\n",
    )
    .await
    .unwrap();
    exec.model().deploy_yaml(
        "id: creep\nver: '1'\nsteps:\n  - id: many\n    uses: acts.transform.code\n    params: \"for (let i = 0; i < 50; i++) { $set('k' + i, 'y'.repeat(1000)) } return {}\"\n",
    )
    .await
    .unwrap();
    for (model, key) in [("grow", "huge"), ("creep", "k")] {
        let (_, message) = ends_in_error(&engine, model).await;
        assert!(
            message.contains(&format!("writing '{key}")) && message.contains("max_scope_bytes"),
            "{model}: {message}"
        );
    }
    // Nothing that large was stored.
    let rows = kv.scan(acts_store::ScanRange::all()).await.unwrap();
    let largest = rows.iter().map(|r| r.value.len()).max().unwrap_or(0);
    assert!(largest < 20_000, "a row of {largest} bytes was stored");
    engine.close().await;
}

/// Three processes waiting at an interrupt (`w1`, `w2`, `w3`, oldest
/// first) written by an engine that is then closed.
async fn three_waiting(kv: Arc<dyn KvStore>) {
    let engine = engine_on(kv).await;
    engine
        .executor()
        .model()
        .deploy_yaml(WAITS)
        .await
        .expect("test setup");
    for pid in ["w1", "w2", "w3"] {
        engine
            .executor()
            .proc()
            .start("m1", vars(json!({ "pid": pid })))
            .await
            .expect("test setup");
    }
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_load_fails_every_caller_joined_to_it_and_is_never_retried_twice() {
    use acts_testkit::{FailPlan, FailingStore, OpSet};
    let failing = Arc::new(FailingStore::new(store().await));
    let gated = Arc::new(GatedStore::new(failing.clone() as Arc<dyn KvStore>));
    three_waiting(gated.clone()).await;
    // No housekeeping in the test's span: the only reads are the loads'.
    let engine = Engine::builder()
        .store(gated.clone() as Arc<dyn KvStore>)
        .resume_on_start(false)
        .config({
            let mut v = acts_core::engine::EngineConfig::default();
            v.tick = Duration::from_secs(3600);
            v
        })
        .start()
        .await
        .expect("engine starts");
    // The first caller's load parks on its first read ...
    gated.arm(GateKind::Read);
    let first = {
        let e = engine.clone();
        tokio::spawn(async move { e.runtime().process_handle("w1").await.map(|h| h.is_some()) })
    };
    gated.wait_parked(GateKind::Read, 1).await;
    // ... a second caller joins that load ...
    let second = engine.runtime().process_handle("w1");
    tokio::pin!(second);
    tokio::select! {
        biased;
        _ = &mut second => panic!("the second caller must wait for the load"),
        () = std::future::ready(()) => {}
    }
    // ... and the load fails.
    failing.set_plan(FailPlan::always(
        OpSet::READS,
        acts_store::ErrorKind::Unavailable,
    ));
    gated.disarm(GateKind::Read);
    assert!(first.await.unwrap().is_err());
    assert!(
        second.await.is_err(),
        "the joined caller gets the same failure"
    );
    assert_eq!(
        gated.entered(GateKind::Read),
        1,
        "the failed load was not run again by the joined caller"
    );
    assert_eq!(
        failing.failures(),
        1,
        "one read failed: the joined caller did not load again after the failure"
    );
    failing.heal();
    let a = engine
        .runtime()
        .process_handle("w1")
        .await
        .unwrap()
        .unwrap();
    let b = engine
        .runtime()
        .process_handle("w1")
        .await
        .unwrap()
        .unwrap();
    assert!(Arc::ptr_eq(&a, &b), "one instance");
    assert_eq!(engine.runtime().cache().resident(), vec!["w1".to_owned()]);
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_cap_holds_for_reads_and_actions_on_processes_that_are_not_resident() {
    let kv = store().await;
    three_waiting(kv.clone()).await;
    let engine = Engine::builder()
        .store(kv)
        .cache_cap(2)
        .start()
        .await
        .unwrap();
    settle(&engine).await;
    let cache = engine.runtime().cache();
    assert_eq!(cache.count(), 2, "the two oldest are resumed");
    assert_eq!(cache.pending_resume(), vec!["w3".to_owned()]);
    let exec = engine.executor();
    // Reading the third does not make it resident.
    let w3 = exec.proc().get("w3").await.unwrap();
    assert_eq!(w3.state, TaskState::Running);
    let irq3 = exec
        .task()
        .list("w3")
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.state == TaskState::Interrupt)
        .unwrap();
    assert_eq!(cache.count(), 2);
    assert!(!cache.contains("w3"));
    // Answering it waits for a slot, first in line.
    let answer = exec.act().complete("w3", &irq3.tid, Vars::new());
    tokio::pin!(answer);
    tokio::select! {
        biased;
        _ = &mut answer => panic!("no slot is free: the answer must wait"),
        () = std::future::ready(()) => {}
    }
    assert_eq!(cache.count(), 2, "the cap holds");
    // w1 ends: its slot goes to w3, and the answer goes through.
    let irq1 = exec
        .task()
        .list("w1")
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.state == TaskState::Interrupt)
        .unwrap();
    exec.act()
        .complete("w1", &irq1.tid, Vars::new())
        .await
        .unwrap();
    tokio::time::timeout(GUARD, &mut answer)
        .await
        .expect("the answer gets its slot (hang guard)")
        .unwrap();
    settle(&engine).await;
    assert_eq!(
        exec.proc().get("w3").await.unwrap().state,
        TaskState::Completed
    );
    assert!(cache.count() <= 2);
    engine.close().await;
}

#[tokio::test]
async fn an_action_that_never_gets_a_slot_fails_busy_and_changes_nothing() {
    let kv = store().await;
    three_waiting(kv.clone()).await;
    let engine = Engine::builder()
        .store(kv)
        .cache_cap(2)
        .config({
            let mut v = acts_core::engine::EngineConfig::default();
            v.cache_cap = 2;
            v.admission_wait = std::time::Duration::from_millis(1);
            v
        })
        .start()
        .await
        .unwrap();
    settle(&engine).await;
    let exec = engine.executor();
    let irq3 = exec
        .task()
        .list("w3")
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.state == TaskState::Interrupt)
        .unwrap();
    let err = exec
        .act()
        .complete("w3", &irq3.tid, Vars::new())
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::Busy { cap: 2, .. }), "{err}");
    assert_eq!(
        exec.proc().get("w3").await.unwrap().state,
        TaskState::Running
    );
    assert_eq!(engine.runtime().cache().count(), 2);
    engine.close().await;
}

#[tokio::test]
async fn script_failures_that_passed_for_success_are_act_errors_naming_the_cause() {
    let engine = Engine::builder()
        .store(store().await)
        .script_limits({
            let mut v = acts_core::script::ScriptLimits::default();
            v.time = std::time::Duration::from_millis(200);
            v
        })
        .start()
        .await
        .unwrap();
    let exec = engine.executor();
    let cases = [
        (
            "rejected",
            "return Promise.reject(new Error('declined'))",
            "rejected: declined",
        ),
        (
            "asyncthrow",
            "return (async () => { throw new Error('late boom') })()",
            "rejected: late boom",
        ),
        ("unsettled", "return new Promise(() => {})", "never settled"),
    ];
    for (id, code, want) in cases {
        exec.model().deploy_yaml(&format!(
            "id: {id}\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.transform.code\n    params: \"{code}\"\n"
        ))
        .await
        .unwrap();
        let p = exec.proc().start(id, Vars::new()).await.unwrap();
        assert_eq!(p.state, TaskState::Error, "{id}");
        let message = p.err.clone().unwrap().message;
        assert!(message.contains(want), "{id}: {message}");
    }
    // A limit hit inside `${{ }}` fails the act, naming the limit ...
    exec.model().deploy_yaml(
        "id: subst\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.transform.set\n    params: { x: '${{ (() => { while (true) {} })() }}' }\n",
    )
    .await
    .unwrap();
    let p = exec.proc().start("subst", Vars::new()).await.unwrap();
    assert_eq!(p.state, TaskState::Error);
    assert!(
        p.err.clone().unwrap().message.contains("ran too long"),
        "{:?}",
        p.err
    );
    // ... while reading an undefined name still gives null (compatible).
    exec.model().deploy_yaml(
        "id: undef\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.transform.set\n    params: { x: '${{ nope.deeper }}' }\n",
    )
    .await
    .unwrap();
    let p = exec.proc().start("undef", Vars::new()).await.unwrap();
    assert_eq!(p.state, TaskState::Completed);
    engine.close().await;
}
