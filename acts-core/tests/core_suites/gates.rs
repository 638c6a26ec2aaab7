//! Gates on steps and acts: `concurrency: { key, limit }` lets at most
//! `limit` tasks of one key run at once across processes, `rate: { key,
//! per_second, burst }` a token bucket per key; a task past either waits
//! in state `pending` (announced as such) until it is let through — in
//! order, however the holder ends, across restarts and crashes, without a
//! fresh burst after a restart. Runs on every backend (`scripts/test.sh`'s
//! engine suites).

use crate::common;
use common::*;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use acts_core::engine::{
    ChannelOptions, Engine, EngineConfig, EngineError, Executor, GateCourier, GateReply, GateRoute,
    ProcessQuery, WaitingFor,
};
use acts_core::scheduler::{Message, TaskState};
use acts_core::time::ManualClock;
use acts_store::KvStore;
use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;

/// One desk approves one request at a time, whichever process asks.
const DESK: &str = r#"
id: desk
ver: "1"
steps:
  - id: prepare
    uses: acts.transform.code
    params: "return { prepared: true }"
  - id: approve
    uses: acts.core.irq
    concurrency:
      key: desk-${{ desk }}
      limit: 1
    params: { key: approve }
  - id: after
    uses: acts.transform.code
    params: "return { done: true }"
"#;

/// Two calls a second to a provider, bursts of two.
const PACED: &str = r#"
id: paced
ver: "1"
steps:
  - id: call
    uses: acts.core.irq
    rate: { key: provider, per_second: 2, burst: 2 }
    params: { key: call }
"#;

/// With `ACTS_TEST_GATE_HOMES=1` (`scripts/test.sh` runs the suite both
/// ways) the engine keeps its keys as a cluster's partitions do: every
/// gate asked of its key's home through a courier — here the engine
/// itself — with the protocol's every call and seat row on the way.
fn at_homes() -> bool {
    std::env::var("ACTS_TEST_GATE_HOMES").is_ok_and(|v| v == "1")
}

struct ToItself(Arc<OnceLock<Engine>>);

impl ToItself {
    fn call(&self, call: serde_json::Value) -> GateReply {
        let engine = self.0.get().cloned();
        Box::pin(async move {
            match engine {
                Some(e) => e.runtime().gate_call(call).await.map_err(|e| e.to_string()),
                None => Err("the engine is starting".to_owned()),
            }
        })
    }
}

impl GateRoute for ToItself {
    fn to_key_home(&self, _key: &str, call: serde_json::Value) -> GateReply {
        self.call(call)
    }
    fn to_process(&self, _pid: &str, call: serde_json::Value) -> GateReply {
        self.call(call)
    }
}

async fn engine(kv: Arc<dyn KvStore>, clock: &ManualClock) -> Engine {
    let itself = Arc::new(OnceLock::new());
    let mut config = EngineConfig::default();
    if at_homes() {
        config.gate_courier = Some(GateCourier::new(Arc::new(ToItself(itself.clone()))));
    }
    let engine = Engine::builder()
        .store(kv)
        .clock(Arc::new(clock.clone()))
        .config(config)
        .start()
        .await
        .expect("engine starts");
    let _ = itself.set(engine.clone());
    let exec = engine.executor();
    exec.model().deploy_yaml(DESK).await.expect("deploys");
    exec.model().deploy_yaml(PACED).await.expect("deploys");
    engine
}

async fn start(exec: &Executor, model: &str, v: serde_json::Value) -> String {
    exec.proc().start(model, vars(v)).await.expect("starts").pid
}

/// The state of task `nid` of `pid` (its last one).
async fn task_state(exec: &Executor, pid: &str, nid: &str) -> Option<TaskState> {
    let tasks = exec.task().list(pid).await.expect("tasks");
    tasks.iter().rev().find(|t| t.nid == nid).map(|t| t.state)
}

async fn asks(rx: &mut UnboundedReceiver<Message>, pid: &str) -> String {
    recv_where(rx, |m| irq_created(m) && m.pid == pid).await.tid
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_key_lets_one_task_run_at_a_time_across_processes() {
    let clock = ManualClock::new(1_000_000);
    let engine = engine(store().await, &clock).await;
    let exec = engine.executor();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let a = start(&exec, "desk", json!({ "desk": "d1" })).await;
    let a_irq = asks(&mut rx, &a).await;
    clock.advance(Duration::from_millis(1));
    let b = start(&exec, "desk", json!({ "desk": "d1" })).await;
    // Announced as pending, with the key it waits for.
    let pending = recv_where(&mut rx, |m| m.pid == b && m.state == "pending").await;
    assert_eq!(
        (pending.r#type.as_str(), pending.nid.as_str()),
        ("step", "approve")
    );
    assert_eq!(pending.inputs["gate"]["key"], "desk-d1");
    clock.advance(Duration::from_millis(1));
    let c = start(&exec, "desk", json!({ "desk": "d1" })).await;
    clock.advance(Duration::from_millis(1));
    let d = start(&exec, "desk", json!({ "desk": "d1" })).await;
    // Another desk is not held up.
    let other = start(&exec, "desk", json!({ "desk": "d2" })).await;
    let other_irq = asks(&mut rx, &other).await;
    settle(&engine).await;
    for p in [&b, &c, &d] {
        assert_eq!(
            task_state(&exec, p, "approve").await,
            Some(TaskState::Pending),
            "{p}"
        );
        let info = exec.proc().get(p).await.unwrap();
        assert_eq!(info.state, TaskState::Running);
        assert_eq!(info.waiting_for.as_deref(), Some("gate"), "{p}");
    }
    // Listed as waiting at a gate, the running holders not.
    let q = ProcessQuery::default().waiting_for(WaitingFor::Gate);
    let listed = exec.proc().find(&q).await.unwrap();
    let mut waiting: Vec<&str> = listed.items.iter().map(|p| p.pid.as_str()).collect();
    waiting.sort();
    let mut want = vec![b.as_str(), c.as_str(), d.as_str()];
    want.sort();
    assert_eq!(waiting, want);
    assert_eq!(exec.proc().get(&a).await.unwrap().waiting_for, None);
    let d1 = engine
        .runtime()
        .gate_keys()
        .into_iter()
        .find(|k| k.key == "desk-d1")
        .expect("in use");
    assert_eq!((d1.kind, d1.holders, d1.waiting), ("concurrency", 1, 3));

    // The holder completes: the oldest waiter runs, the others still wait.
    exec.act()
        .complete(&a, &a_irq, Default::default())
        .await
        .unwrap();
    let b_irq = asks(&mut rx, &b).await;
    settle(&engine).await;
    assert_eq!(
        task_state(&exec, &c, "approve").await,
        Some(TaskState::Pending)
    );
    // A waiter whose process is terminated leaves the queue; an error
    // ends the holder: the next one runs.
    exec.proc().terminate(&c, "not needed").await.unwrap();
    exec.act()
        .error(&b, &b_irq, "nope", "refused")
        .await
        .unwrap();
    asks(&mut rx, &d).await;
    // Removal of the holder frees the slot too.
    let e = start(&exec, "desk", json!({ "desk": "d1" })).await;
    settle(&engine).await;
    assert_eq!(
        task_state(&exec, &e, "approve").await,
        Some(TaskState::Pending)
    );
    exec.proc().remove(&d).await.unwrap();
    let e_irq = asks(&mut rx, &e).await;
    exec.act()
        .complete(&e, &e_irq, Default::default())
        .await
        .unwrap();
    exec.act()
        .complete(&other, &other_irq, Default::default())
        .await
        .unwrap();
    let end = recv_where(&mut rx, ends(&e)).await;
    assert_eq!(end.state, "completed");
    settle(&engine).await;
    assert!(
        engine
            .runtime()
            .gate_keys()
            .iter()
            .all(|k| k.key != "desk-d1"),
        "nothing held"
    );
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_acts_of_one_process_share_a_key_with_everyone_else() {
    let clock = ManualClock::new(1_000_000);
    let engine = engine(store().await, &clock).await;
    let exec = engine.executor();
    exec.model()
        .deploy_yaml(
            r#"
id: fanout
ver: "1"
steps:
  - id: each
    uses: acts.core.parallel
    params:
      in: [a, b, c]
      acts:
        - uses: acts.core.irq
          concurrency: { key: printer, limit: 2 }
          params: { key: print }
"#,
        )
        .await
        .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = start(&exec, "fanout", json!({})).await;
    let first = asks(&mut rx, &p).await;
    asks(&mut rx, &p).await;
    settle(&engine).await;
    let states: Vec<TaskState> = exec
        .task()
        .list(&p)
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.uses.as_deref() == Some("acts.core.irq"))
        .map(|t| t.state)
        .collect();
    let count = |s| states.iter().filter(|x| **x == s).count();
    assert_eq!(
        (count(TaskState::Interrupt), count(TaskState::Pending)),
        (2, 1)
    );
    exec.act()
        .complete(&p, &first, Default::default())
        .await
        .unwrap();
    let third = asks(&mut rx, &p).await;
    assert_ne!(third, first);
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_under_a_holder_of_its_key_runs_on_the_holders_slot() {
    let clock = ManualClock::new(1_000_000);
    let engine = engine(store().await, &clock).await;
    let exec = engine.executor();
    // The catch asks again under the step that holds `desk` (limit 1): it
    // would wait for its own ancestor forever.
    exec.model()
        .deploy_yaml(
            r#"
id: again
ver: "1"
steps:
  - id: ask
    uses: acts.core.irq
    concurrency: { key: desk }
    params: { key: ask }
    catches:
      - id: ask_again
        if: $ecode() == 'E1'
        uses: acts.core.irq
        concurrency: { key: desk }
        params: { key: ask_again }
"#,
        )
        .await
        .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = start(&exec, "again", json!({})).await;
    let other = start(&exec, "again", json!({})).await;
    let first = recv_where(&mut rx, |m| {
        irq_created(m) && m.key.as_deref() == Some("ask")
    })
    .await;
    assert_eq!(first.pid, p, "the other waits for the desk");
    exec.act()
        .error(&p, &first.tid, "E1", "try again")
        .await
        .unwrap();
    settle(&engine).await;
    for t in exec.task().list(&p).await.unwrap() {
        eprintln!(
            "DBG {} {} {:?} parent={:?} data={:?}",
            t.tid, t.nid, t.state, t.parent, t.data
        );
    }
    let again = recv_where(&mut rx, |m| irq_created(m) && m.pid == p).await;
    assert_eq!(again.key.as_deref(), Some("ask_again"));
    settle(&engine).await;
    assert_eq!(
        task_state(&exec, &other, "ask").await,
        Some(TaskState::Pending)
    );
    exec.act()
        .complete(&p, &again.tid, Default::default())
        .await
        .unwrap();
    // The holder's end lets the other through.
    let next = recv_where(&mut rx, |m| irq_created(m) && m.pid == other).await;
    assert_eq!(next.key.as_deref(), Some("ask"));
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_process_takes_a_freed_slot_first() {
    let clock = ManualClock::new(1_000_000);
    let engine = engine(store().await, &clock).await;
    let exec = engine.executor();
    exec.model()
        .deploy_yaml(
            r#"
id: tiered_desk
ver: "1"
priority: ${{ tier }}
steps:
  - id: approve
    uses: acts.core.irq
    concurrency: { key: desk }
    params: { key: approve }
"#,
        )
        .await
        .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let holder = start(&exec, "tiered_desk", json!({ "tier": 3 })).await;
    let holder_irq = asks(&mut rx, &holder).await;
    clock.advance(Duration::from_millis(1));
    let low = start(&exec, "tiered_desk", json!({ "tier": 1 })).await;
    clock.advance(Duration::from_millis(1));
    let high = start(&exec, "tiered_desk", json!({ "tier": 5 })).await;
    settle(&engine).await;
    exec.act()
        .complete(&holder, &holder_irq, Default::default())
        .await
        .unwrap();
    // The later but higher-priority waiter goes first.
    let next = recv_where(&mut rx, irq_created).await;
    assert_eq!(next.pid, high);
    assert_eq!(
        task_state(&exec, &low, "approve").await,
        Some(TaskState::Pending)
    );
    exec.act()
        .complete(&high, &next.tid, Default::default())
        .await
        .unwrap();
    asks(&mut rx, &low).await;
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_does_not_evaluate_fails_its_task_and_a_bad_gate_is_refused_at_deploy() {
    let clock = ManualClock::new(1_000_000);
    let engine = engine(store().await, &clock).await;
    let exec = engine.executor();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    // `desk` is not given: the key has no value.
    let p = start(&exec, "desk", json!({})).await;
    let end = recv_where(&mut rx, ends(&p)).await;
    assert_eq!(end.state, "error");
    let message = end.inputs["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(message.contains("concurrency key"), "{message}");
    let refused = exec
        .model().deploy_yaml(
            "id: bad\nver: '1'\nsteps:\n  - id: s\n    uses: acts.core.irq\n    rate: { key: k, per_second: 0 }\n",
        )
        .await;
    let Err(EngineError::Model(e)) = refused else {
        panic!("refused: {refused:?}");
    };
    assert!(e.to_string().contains("per_second"), "{e}");
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_lets_tasks_through_at_its_pace_and_a_restart_gives_no_fresh_burst() {
    let clock = ManualClock::new(1_000_000);
    let kv = store().await;
    let first = engine(kv.clone(), &clock).await;
    let exec = first.executor();
    let mut pids = Vec::new();
    for _ in 0..6 {
        pids.push(start(&exec, "paced", json!({})).await);
    }
    settle(&first).await;
    let open = |exec: Executor, pids: Vec<String>| async move {
        let mut n = 0;
        for p in &pids {
            if !waiting(&exec, p).await.is_empty() {
                n += 1;
            }
        }
        n
    };
    // The bucket starts empty at the engine's start: nothing runs yet.
    assert_eq!(open(exec.clone(), pids.clone()).await, 0);
    clock.advance(Duration::from_millis(499));
    settle(&first).await;
    assert_eq!(open(exec.clone(), pids.clone()).await, 0);
    clock.advance(Duration::from_millis(1));
    settle(&first).await;
    assert_eq!(
        open(exec.clone(), pids.clone()).await,
        1,
        "one token at 500 ms"
    );
    clock.advance(Duration::from_millis(500));
    settle(&first).await;
    assert_eq!(open(exec.clone(), pids.clone()).await, 2);
    first.close().await;

    // A restart long after: the bucket is empty again (no burst of two).
    clock.advance(Duration::from_secs(60));
    let second = engine(kv, &clock).await;
    let exec = second.executor();
    settle(&second).await;
    assert_eq!(open(exec.clone(), pids.clone()).await, 2);
    clock.advance(Duration::from_millis(500));
    settle(&second).await;
    assert_eq!(open(exec.clone(), pids.clone()).await, 3);
    // Then bursts of at most two, two a second.
    clock.advance(Duration::from_secs(10));
    settle(&second).await;
    assert_eq!(open(exec.clone(), pids.clone()).await, 5);
    clock.advance(Duration::from_millis(500));
    settle(&second).await;
    assert_eq!(open(exec.clone(), pids.clone()).await, 6);
    second.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_with_both_holds_its_slot_while_it_waits_for_a_token() {
    let clock = ManualClock::new(1_000_000);
    let engine = engine(store().await, &clock).await;
    let exec = engine.executor();
    exec.model()
        .deploy_yaml(
            r#"
id: both
ver: "1"
steps:
  - id: call
    uses: acts.core.irq
    concurrency: { key: line }
    rate: { key: line-pace, per_second: 1 }
    params: { key: call }
"#,
        )
        .await
        .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let a = start(&exec, "both", json!({})).await;
    clock.advance(Duration::from_millis(1));
    let b = start(&exec, "both", json!({})).await;
    settle(&engine).await;
    let line = |kind: &str| {
        let keys = engine.runtime().gate_keys();
        let k = keys.iter().find(|k| k.kind == kind).expect("in use");
        (k.holders, k.waiting)
    };
    // a holds the slot and waits for the first token, b for the slot.
    assert_eq!((line("concurrency"), line("rate")), ((1, 1), (0, 1)));
    clock.advance(Duration::from_millis(1_000));
    let a_irq = asks(&mut rx, &a).await;
    settle(&engine).await;
    assert_eq!(
        task_state(&exec, &b, "call").await,
        Some(TaskState::Pending)
    );
    // a ends: b takes the slot and waits for the next token (its timer is
    // armed then), which comes a second after a's.
    exec.act()
        .complete(&a, &a_irq, Default::default())
        .await
        .unwrap();
    settle(&engine).await;
    assert_eq!(
        task_state(&exec, &b, "call").await,
        Some(TaskState::Pending)
    );
    clock.advance(Duration::from_millis(999));
    settle(&engine).await;
    assert_eq!(
        task_state(&exec, &b, "call").await,
        Some(TaskState::Pending)
    );
    clock.advance(Duration::from_millis(1));
    asks(&mut rx, &b).await;
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holders_and_waiters_are_counted_again_after_a_restart() {
    let clock = ManualClock::new(1_000_000);
    let kv = store().await;
    let first = engine(kv.clone(), &clock).await;
    let exec = first.executor();
    let mut rx = first.channel(ChannelOptions::default()).subscribe();
    let a = start(&exec, "desk", json!({ "desk": "d1" })).await;
    let a_irq = asks(&mut rx, &a).await;
    clock.advance(Duration::from_millis(1));
    let b = start(&exec, "desk", json!({ "desk": "d1" })).await;
    clock.advance(Duration::from_millis(1));
    let c = start(&exec, "desk", json!({ "desk": "d1" })).await;
    settle(&first).await;
    first.close().await;

    let second = engine(kv, &clock).await;
    let exec = second.executor();
    let mut rx = second.channel(ChannelOptions::default()).subscribe();
    clock.advance(Duration::from_millis(1));
    let d = start(&exec, "desk", json!({ "desk": "d1" })).await;
    settle(&second).await;
    for p in [&b, &c, &d] {
        assert_eq!(
            task_state(&exec, p, "approve").await,
            Some(TaskState::Pending),
            "{p}"
        );
    }
    exec.act()
        .complete(&a, &a_irq, Default::default())
        .await
        .unwrap();
    let b_irq = asks(&mut rx, &b).await;
    settle(&second).await;
    assert_eq!(
        task_state(&exec, &c, "approve").await,
        Some(TaskState::Pending)
    );
    exec.act()
        .complete(&b, &b_irq, Default::default())
        .await
        .unwrap();
    let c_irq = asks(&mut rx, &c).await;
    exec.act()
        .complete(&c, &c_irq, Default::default())
        .await
        .unwrap();
    asks(&mut rx, &d).await;
    second.close().await;
}

/// The engine on a recovered crash store, driven to the end by a
/// deterministic client: starts a, b and c (one desk) when the store does
/// not hold them and answers whichever asks. At every step the store
/// never shows two of their `approve` tasks open at once.
async fn drive_to_the_end(kv: Arc<dyn KvStore>) -> Vec<(String, TaskState, usize)> {
    let clock = ManualClock::new(1_000_000);
    let engine = engine(kv, &clock).await;
    let exec = engine.executor();
    for _ in 0..50 {
        for pid in ["a", "b", "c"] {
            if matches!(
                exec.proc().get(pid).await,
                Err(EngineError::ProcessNotFound(_))
            ) {
                let started = exec
                    .proc()
                    .start("desk", vars(json!({ "desk": "d1", "pid": pid })))
                    .await;
                assert!(started.is_ok(), "{pid}: {started:?}");
                clock.advance(Duration::from_millis(1));
            }
        }
        settle(&engine).await;
        let mut asking = Vec::new();
        let mut ended = Vec::new();
        for pid in ["a", "b", "c"] {
            let p = exec.proc().get(pid).await.expect("the process");
            if p.state == TaskState::Completed {
                let approved = exec
                    .task()
                    .list(pid)
                    .await
                    .expect("tasks")
                    .iter()
                    .filter(|t| t.nid == "approve" && t.state == TaskState::Completed)
                    .count();
                ended.push((pid.to_owned(), p.state, approved));
            }
            for tid in waiting(&exec, pid).await {
                asking.push((pid, tid));
            }
        }
        assert!(asking.len() <= 1, "over the limit: {asking:?}");
        if ended.len() == 3 {
            engine.close().await;
            return ended;
        }
        for (pid, tid) in asking {
            exec.act()
                .complete(pid, &tid, Default::default())
                .await
                .expect("answered");
        }
        settle(&engine).await;
    }
    panic!("the three processes did not complete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_point_of_a_handover_neither_over_admits_nor_loses_a_task() {
    after_every_crash_cut(drive_to_the_end).await;
}
