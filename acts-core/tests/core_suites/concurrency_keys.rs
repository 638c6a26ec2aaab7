//! Concurrency keys (`concurrency: { key, limit }` on a workflow): at most
//! `limit` processes of one key in flight; a start past the limit is
//! parked and waits, in order, for a process of its key to end — however
//! it ends (completed, error, aborted, terminated, removed) — across
//! restarts, with the admission cap, for subflow children and retries.
//! Runs on every backend (`scripts/test.sh`'s engine suites).

use crate::common;
use common::*;

use std::sync::Arc;
use std::time::Duration;

use acts_core::engine::{ChannelOptions, Engine, EngineError, KeyUse, ProcessQuery, WaitingFor};
use acts_core::scheduler::{Message, TaskState};
use acts_core::time::ManualClock;
use acts_store::KvStore;
use acts_testkit::models::ONE_PER_CUSTOMER;
use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;

/// An engine on `kv` with admission cap `cap`, on an engine clock that
/// [`start`] moves on a millisecond per start (admission order is kept to
/// the millisecond in the store: a restart, or the cap's queue, orders
/// starts of one millisecond by pid).
async fn engine(kv: Arc<dyn KvStore>, cap: usize) -> Engine {
    Engine::builder()
        .store(kv)
        .cache_cap(cap)
        .clock(Arc::new(CLOCK.with(|c| c.clone())))
        .start()
        .await
        .expect("engine starts")
}

thread_local! {
    /// The engine clock of the test on this thread.
    static CLOCK: ManualClock = ManualClock::new(1_000_000);
}

async fn start(engine: &Engine, model: &str, customer: &str) -> String {
    let pid = engine
        .executor()
        .proc()
        .start(model, vars(json!({ "customer": customer })))
        .await
        .expect("starts")
        .pid;
    CLOCK.with(|c| c.advance(Duration::from_millis(1)));
    pid
}

/// Waits for the interrupt of `pid` (it started and asks), returns its task.
async fn asks(rx: &mut UnboundedReceiver<Message>, pid: &str) -> String {
    recv_where(rx, |m| irq_created(m) && m.pid == pid).await.tid
}

async fn state(engine: &Engine, pid: &str) -> (TaskState, Option<String>) {
    let p = engine
        .executor()
        .proc()
        .get(pid)
        .await
        .expect("the process");
    (p.state, p.waiting_for)
}

fn waits_for_key() -> (TaskState, Option<String>) {
    (TaskState::None, Some("concurrency".into()))
}

/// An engine on the test store with [`ONE_PER_CUSTOMER`] deployed, a
/// client's messages, and process `a` of key `cust-c1` holding the key at
/// its interrupt (its task).
async fn holding() -> (Engine, UnboundedReceiver<Message>, String, String) {
    let engine = engine(store().await, 1000).await;
    engine
        .executor()
        .model()
        .deploy_yaml(ONE_PER_CUSTOMER)
        .await
        .expect("deploys");
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let a = start(&engine, "order", "c1").await;
    let a_irq = asks(&mut rx, &a).await;
    (engine, rx, a, a_irq)
}

fn uses(engine: &Engine) -> Vec<KeyUse> {
    engine.runtime().cache().keys_in_use()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_key_queues_starts_in_order_and_every_kind_of_end_frees_it() {
    let (engine, mut rx, a, a_irq) = holding().await;
    let exec = engine.executor();
    let b = start(&engine, "order", "c1").await;
    let other = start(&engine, "order", "c2").await;
    asks(&mut rx, &other).await; // another key is not held up
    let c = start(&engine, "order", "c1").await;
    let d = start(&engine, "order", "c1").await;
    let e = start(&engine, "order", "c1").await;
    let f = start(&engine, "order", "c1").await;
    for p in [&b, &c, &d, &e, &f] {
        assert_eq!(state(&engine, p).await, waits_for_key(), "{p} waits");
    }
    let info = exec.proc().get(&a).await.unwrap();
    assert_eq!(info.concurrency_key.as_deref(), Some("cust-c1"));
    assert_eq!(
        info.waiting_for, None,
        "a started process waits for nothing"
    );
    let c1 = uses(&engine)
        .into_iter()
        .find(|u| u.key == "cust-c1")
        .expect("the key is in use");
    assert_eq!((c1.holders, c1.waiting), (1, 5));
    // The listing of who waits for a key.
    let waiting = exec
        .proc()
        .find(&ProcessQuery::new().waiting_for(WaitingFor::Concurrency))
        .await
        .unwrap();
    let mut listed: Vec<String> = waiting.items.iter().map(|p| p.pid.clone()).collect();
    listed.sort();
    let mut expected = vec![b.clone(), c.clone(), d.clone(), e.clone(), f.clone()];
    expected.sort();
    assert_eq!(listed, expected);

    // Completed: the oldest waiter (b) runs; the others still wait.
    exec.act()
        .complete(&a, &a_irq, Default::default())
        .await
        .unwrap();
    let b_irq = asks(&mut rx, &b).await;
    for p in [&c, &d, &e, &f] {
        assert_eq!(state(&engine, p).await, waits_for_key(), "{p} still waits");
    }
    // Error: c runs.
    exec.act()
        .error(&b, &b_irq, "declined", "no")
        .await
        .unwrap();
    assert_eq!(state(&engine, &b).await.0, TaskState::Error);
    asks(&mut rx, &c).await;
    // Aborted by the client: d runs.
    exec.proc().abort(&c).await.unwrap();
    asks(&mut rx, &d).await;
    // Terminated by an operator: e runs.
    exec.proc().terminate(&d, "stuck").await.unwrap();
    asks(&mut rx, &e).await;
    // Removed: f runs.
    assert!(exec.proc().remove(&e).await.unwrap());
    let f_irq = asks(&mut rx, &f).await;
    // A waiter that is removed gives up its place in the queue.
    let g = start(&engine, "order", "c1").await;
    let h = start(&engine, "order", "c1").await;
    assert!(exec.proc().remove(&g).await.unwrap());
    exec.act()
        .complete(&f, &f_irq, Default::default())
        .await
        .unwrap();
    asks(&mut rx, &h).await;
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_above_one_lets_that_many_run() {
    let engine = engine(store().await, 1000).await;
    let exec = engine.executor();
    exec.model()
        .deploy_yaml(&ONE_PER_CUSTOMER.replace("limit: 1", "limit: 2"))
        .await
        .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let a = start(&engine, "order", "c1").await;
    let b = start(&engine, "order", "c1").await;
    let c = start(&engine, "order", "c1").await;
    let a_irq = asks(&mut rx, &a).await;
    asks(&mut rx, &b).await;
    assert_eq!(state(&engine, &c).await, waits_for_key());
    exec.act()
        .complete(&a, &a_irq, Default::default())
        .await
        .unwrap();
    asks(&mut rx, &c).await;
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holders_and_waiters_are_counted_again_after_a_restart() {
    let kv = store().await;
    let first = engine(kv.clone(), 1000).await;
    first
        .executor()
        .model()
        .deploy_yaml(ONE_PER_CUSTOMER)
        .await
        .unwrap();
    let mut rx = first.channel(ChannelOptions::default()).subscribe();
    let a = start(&first, "order", "c1").await;
    let a_irq = asks(&mut rx, &a).await;
    let b = start(&first, "order", "c1").await;
    let c = start(&first, "order", "c1").await;
    first.close().await;

    let second = engine(kv, 1000).await;
    let exec = second.executor();
    let mut rx = second.channel(ChannelOptions::default()).subscribe();
    // A start after the restart finds the key held by `a` (counted from
    // the store, not remembered) and waits behind b and c.
    let d = start(&second, "order", "c1").await;
    assert_eq!(state(&second, &d).await.0, TaskState::None);
    settle(&second).await;
    for p in [&b, &c, &d] {
        assert_eq!(state(&second, p).await, waits_for_key(), "{p} waits");
    }
    exec.act()
        .complete(&a, &a_irq, Default::default())
        .await
        .unwrap();
    let b_irq = asks(&mut rx, &b).await;
    assert_eq!(state(&second, &c).await, waits_for_key());
    exec.act()
        .complete(&b, &b_irq, Default::default())
        .await
        .unwrap();
    let c_irq = asks(&mut rx, &c).await;
    assert_eq!(state(&second, &d).await, waits_for_key());
    exec.act()
        .complete(&c, &c_irq, Default::default())
        .await
        .unwrap();
    asks(&mut rx, &d).await;
    second.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_and_the_admission_cap_are_waited_for_in_turn() {
    let engine = engine(store().await, 1).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(ONE_PER_CUSTOMER).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let a = start(&engine, "order", "c1").await;
    let a_irq = asks(&mut rx, &a).await;
    let b = start(&engine, "order", "c2").await; // its key is free; the cap is not
    let c = start(&engine, "order", "c1").await;
    assert_eq!(
        state(&engine, &b).await,
        (TaskState::None, Some("admission".into()))
    );
    assert_eq!(state(&engine, &c).await, waits_for_key());
    exec.act()
        .complete(&a, &a_irq, Default::default())
        .await
        .unwrap();
    // The place goes to b (parked first); c now has its key's slot and
    // waits for a place.
    let b_irq = asks(&mut rx, &b).await;
    assert_eq!(
        state(&engine, &c).await,
        (TaskState::None, Some("admission".into()))
    );
    exec.act()
        .complete(&b, &b_irq, Default::default())
        .await
        .unwrap();
    asks(&mut rx, &c).await;
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_does_not_evaluate_refuses_the_start() {
    let engine = engine(store().await, 1000).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(ONE_PER_CUSTOMER).await.unwrap();
    // The key reads a start option that was not given: no key, no start
    // (a silent `null` would put every such process under one key).
    let err = exec
        .proc()
        .start("order", Default::default())
        .await
        .expect_err("no customer: no key");
    assert!(
        matches!(&err, EngineError::Inputs { message, .. }
            if message.contains("concurrency key") && message.contains("customer")),
        "{err}"
    );
    let err = exec
        .proc()
        .start("order", vars(json!({ "customer": null })))
        .await
        .expect_err("a null customer: no key");
    assert!(err.to_string().contains("has no value"), "{err}");
    // A key that is one whole expression keeps its value's text.
    let whole = ONE_PER_CUSTOMER
        .replace("id: order", "id: whole")
        .replace("cust-${{ customer }}", "${{ customer }}");
    exec.model().deploy_yaml(&whole).await.unwrap();
    let p = exec
        .proc()
        .start("whole", vars(json!({ "customer": 42 })))
        .await
        .unwrap();
    assert_eq!(p.concurrency_key.as_deref(), Some("42"));
    let long = "x".repeat(300);
    let err = exec
        .proc()
        .start("whole", vars(json!({ "customer": long })))
        .await
        .expect_err("a key longer than 256 bytes");
    assert!(err.to_string().contains("at most 256"), "{err}");
    // Bad limits are refused at deploy.
    for bad in ["limit: 0", "limit: 2000000"] {
        let err = exec
            .model()
            .deploy_yaml(&ONE_PER_CUSTOMER.replace("limit: 1", bad))
            .await
            .expect_err(bad);
        assert!(err.to_string().contains("concurrency.limit"), "{err}");
    }
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subflow_child_waits_for_its_key_and_its_act_waits_for_the_child() {
    let engine = engine(store().await, 1000).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(ONE_PER_CUSTOMER).await.unwrap();
    exec.model().deploy_yaml(
        "id: parent\nver: '1'\nsteps:\n  - id: call\n    uses: acts.core.subflow\n    params:\n      to: order\n      options: { customer: '${{ customer }}' }\n",
    )
    .await
    .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p1 = start(&engine, "parent", "c1").await;
    let first = recv_where(&mut rx, |m| irq_created(m) && m.pid != p1).await;
    let p2 = start(&engine, "parent", "c1").await;
    settle(&engine).await;
    let children = exec
        .proc()
        .find(&ProcessQuery::new().concurrency_key("cust-c1"))
        .await
        .unwrap()
        .items;
    assert_eq!(children.len(), 2, "{children:?}");
    let second = children
        .iter()
        .find(|c| c.pid != first.pid)
        .expect("the second child");
    assert_eq!(state(&engine, &second.pid).await, waits_for_key());
    assert_eq!(state(&engine, &p2).await.0, TaskState::Running);
    exec.act()
        .complete(&first.pid, &first.tid, Default::default())
        .await
        .unwrap();
    // The parent's end and the next child's question come in either
    // order.
    let (mut ended, mut irq) = (false, None);
    while !ended || irq.is_none() {
        let m = recv(&mut rx).await;
        ended |= ends(&p1)(&m);
        if irq_created(&m) && m.pid == second.pid {
            irq = Some(m.tid);
        }
    }
    let irq = irq.unwrap_or_default();
    exec.act()
        .complete(&second.pid, &irq, Default::default())
        .await
        .unwrap();
    recv_where(&mut rx, ends(&p2)).await;
    assert_eq!(state(&engine, &p2).await.0, TaskState::Completed);
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_needs_a_free_slot_of_its_key() {
    let (engine, mut rx, a, a_irq) = holding().await;
    let exec = engine.executor();
    exec.act()
        .error(&a, &a_irq, "declined", "no")
        .await
        .unwrap();
    assert_eq!(state(&engine, &a).await.0, TaskState::Error);
    let b = start(&engine, "order", "c1").await;
    let b_irq = asks(&mut rx, &b).await;
    // b holds the key: a cannot run again now, and stays as it ended.
    let err = exec
        .proc()
        .retry(&a, None, Default::default())
        .await
        .expect_err("the key is held");
    assert!(
        matches!(&err, EngineError::KeyBusy { key, limit: 1, .. } if key == "cust-c1"),
        "{err}"
    );
    assert_eq!(state(&engine, &a).await.0, TaskState::Error);
    exec.act()
        .complete(&b, &b_irq, Default::default())
        .await
        .unwrap();
    recv_where(&mut rx, ends(&b)).await;
    exec.proc()
        .retry(&a, None, Default::default())
        .await
        .unwrap();
    asks(&mut rx, &a).await;
    // The retried process holds the key again.
    let c = start(&engine, "order", "c1").await;
    assert_eq!(state(&engine, &c).await, waits_for_key());
    engine.close().await;
}

/// The engine on a recovered crash store, driven to the end by a
/// deterministic client: starts a, b and c (one key, limit 1) when the
/// store does not hold them, answers whichever runs. At every step the
/// store never shows two of them in flight.
async fn drive_to_the_end(kv: Arc<dyn KvStore>) -> Vec<(String, TaskState, usize)> {
    let engine = engine(kv, 1000).await;
    let exec = engine.executor();
    exec.model()
        .deploy_yaml(ONE_PER_CUSTOMER)
        .await
        .expect("deploys");
    for _ in 0..50 {
        for pid in ["a", "b", "c"] {
            if matches!(
                exec.proc().get(pid).await,
                Err(EngineError::ProcessNotFound(_))
            ) {
                let started = exec
                    .proc()
                    .start("order", vars(json!({ "customer": "c1", "pid": pid })))
                    .await;
                assert!(started.is_ok(), "{pid}: {started:?}");
                CLOCK.with(|c| c.advance(Duration::from_millis(1)));
            }
        }
        settle(&engine).await;
        let listed = exec
            .proc()
            .find(&ProcessQuery::new().concurrency_key("cust-c1"))
            .await
            .expect("lists")
            .items;
        let running: Vec<&str> = listed
            .iter()
            .filter(|p| p.state != TaskState::None && !p.state.is_terminal())
            .map(|p| p.pid.as_str())
            .collect();
        assert!(running.len() <= 1, "over the limit: {running:?}");
        if listed.len() == 3 && listed.iter().all(|p| p.state == TaskState::Completed) {
            let mut out = Vec::new();
            for p in &listed {
                let answered = exec
                    .task()
                    .list(&p.pid)
                    .await
                    .expect("tasks")
                    .iter()
                    .filter(|t| t.nid == "approve" && t.state == TaskState::Completed)
                    .count();
                out.push((p.pid.clone(), p.state, answered));
            }
            engine.close().await;
            return out;
        }
        for pid in running {
            for tid in waiting(&exec, pid).await {
                let done = exec.act().complete(pid, &tid, Default::default()).await;
                done.expect("the running one is answered");
            }
        }
        settle(&engine).await;
    }
    panic!("the three processes did not complete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_point_of_a_handover_neither_over_admits_nor_loses_a_start() {
    after_every_crash_cut(drive_to_the_end).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_aborted_or_removed_leaves_the_queue_and_holds_no_place() {
    let (engine, mut rx, a, a_irq) = holding().await;
    let exec = engine.executor();
    let b = start(&engine, "order", "c1").await;
    let c = start(&engine, "order", "c1").await;
    let d = start(&engine, "order", "c1").await;
    // An operator cannot terminate what has not started (remove it)...
    let err = exec.proc().terminate(&b, "not needed").await.unwrap_err();
    assert!(err.to_string().contains("remove it"), "{err}");
    assert_eq!(state(&engine, &b).await, waits_for_key());
    // ... a client may abort it: it ends, and leaves its key's queue.
    exec.proc().abort(&b).await.unwrap();
    assert_eq!(state(&engine, &b).await.0, TaskState::Aborted);
    let c1 = uses(&engine).into_iter().find(|u| u.key == "cust-c1");
    assert_eq!(c1.map(|u| (u.holders, u.waiting)), Some((1, 2)));
    assert!(exec.proc().remove(&c).await.unwrap());
    let c = d;
    exec.act()
        .complete(&a, &a_irq, Default::default())
        .await
        .unwrap();
    asks(&mut rx, &c).await;
    settle(&engine).await;
    assert_eq!(engine.runtime().stats().admitted, 1, "only c holds a place");
    let c1 = uses(&engine).into_iter().find(|u| u.key == "cust-c1");
    assert_eq!(c1.map(|u| (u.holders, u.waiting)), Some((1, 0)));
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_migrated_to_a_new_version_keeps_its_place_in_the_queue() {
    let (engine, mut rx, a, a_irq) = holding().await;
    let exec = engine.executor();
    let b = start(&engine, "order", "c1").await;
    let c = start(&engine, "order", "c1").await;
    exec.model()
        .deploy_yaml(&ONE_PER_CUSTOMER.replace("key: approve", "key: approve2"))
        .await
        .unwrap();
    let mut plan = acts_core::engine::MigrationPlan::default();
    plan.model = "order".into();
    plan.from = 1;
    plan.to = 2;
    let report = exec.model().migrate(&plan, false).await.unwrap();
    assert_eq!(report.processes.len(), 3, "{report:?}");
    for p in [&b, &c] {
        assert_eq!(state(&engine, p).await, waits_for_key(), "{p} still waits");
        assert_eq!(exec.proc().get(p).await.unwrap().model_rev, 2);
    }
    exec.act()
        .complete(&a, &a_irq, Default::default())
        .await
        .unwrap();
    let b_irq = recv_where(&mut rx, |m| irq_created(m) && m.pid == b).await;
    assert_eq!(
        b_irq.key.as_deref(),
        Some("approve2"),
        "b runs the new version"
    );
    assert_eq!(state(&engine, &c).await, waits_for_key());
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_needs_its_parents_only_slot_fails_its_act_instead_of_waiting_forever() {
    let engine = engine(store().await, 1000).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(ONE_PER_CUSTOMER).await.unwrap();
    let parent = ONE_PER_CUSTOMER.replace("id: order", "id: parent").replace(
        "  - id: approve\n    uses: acts.core.irq\n    params: { key: approve }\n",
        "  - id: call\n    uses: acts.core.subflow\n    params:\n      to: order\n      options: { customer: '${{ customer }}' }\n",
    );
    exec.model().deploy_yaml(&parent).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = start(&engine, "parent", "c1").await;
    let end = recv_where(&mut rx, ends(&p)).await;
    assert_eq!(end.state, "error", "{end:?}");
    let info = exec.proc().get(&p).await.unwrap();
    let err = info.err.expect("the parent's error");
    assert!(err.message.contains("held by its parent"), "{err:?}");
    // Its end freed the key.
    assert!(uses(&engine).iter().all(|u| u.key != "cust-c1"));
    engine.close().await;
}

/// Each start says its priority (`tier`) and fairness key (`tenant`).
const TIERED: &str = r#"
id: tiered
ver: "1"
priority: ${{ tier }}
fairness_key: ${{ tenant }}
steps:
  - id: work
    uses: acts.core.irq
    params: { key: work }
"#;

async fn start_tiered(engine: &Engine, tier: u8, tenant: &str) -> String {
    let pid = engine
        .executor()
        .proc()
        .start("tiered", vars(json!({ "tier": tier, "tenant": tenant })))
        .await
        .expect("starts")
        .pid;
    CLOCK.with(|c| c.advance(Duration::from_millis(1)));
    pid
}

/// Runs the queue: answers the one running, then the next that starts,
/// until `n` have run; their pids in the order they started.
async fn run_in_turn(
    engine: &Engine,
    rx: &mut UnboundedReceiver<Message>,
    first: String,
    n: usize,
) -> Vec<String> {
    let mut order = Vec::new();
    let mut running = first;
    for i in 0..n {
        let irq = waiting(&engine.executor(), &running).await;
        engine
            .executor()
            .act()
            .complete(&running, &irq[0], Default::default())
            .await
            .expect("answered");
        if i + 1 == n {
            break;
        }
        let next = recv_where(rx, irq_created).await;
        order.push(next.pid.clone());
        running = next.pid;
    }
    order
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_starts_leave_by_priority_and_tenants_take_turns() {
    // One place: everything after the first is parked at the cap.
    let engine = engine(store().await, 1).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(TIERED).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let holder = start_tiered(&engine, 3, "x").await;
    recv_where(&mut rx, |m| irq_created(m) && m.pid == holder).await;
    let low = start_tiered(&engine, 1, "a").await;
    let a1 = start_tiered(&engine, 3, "a").await;
    let a2 = start_tiered(&engine, 3, "a").await;
    let b1 = start_tiered(&engine, 3, "b").await;
    let vip = start_tiered(&engine, 5, "c").await;
    assert_eq!(
        state(&engine, &low).await,
        (TaskState::None, Some("admission".into()))
    );
    let order = run_in_turn(&engine, &mut rx, holder, 6).await;
    assert_eq!(order, [vip, a1, b1, a2, low]);
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_waiters_leave_by_priority_too_and_a_bad_priority_is_refused() {
    let engine = engine(store().await, 1000).await;
    let exec = engine.executor();
    let keyed = TIERED.replace(
        "fairness_key: ${{ tenant }}\n",
        "fairness_key: ${{ tenant }}\nconcurrency: { key: shared }\n",
    );
    exec.model().deploy_yaml(&keyed).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let holder = start_tiered(&engine, 3, "x").await;
    recv_where(&mut rx, |m| irq_created(m) && m.pid == holder).await;
    let low = start_tiered(&engine, 1, "a").await;
    let high = start_tiered(&engine, 4, "a").await;
    assert_eq!(state(&engine, &low).await, waits_for_key());
    let order = run_in_turn(&engine, &mut rx, holder, 3).await;
    assert_eq!(order, [high, low]);
    // 9 is no priority; nor is a missing one.
    let err = exec
        .proc()
        .start("tiered", vars(json!({ "tier": 9, "tenant": "a" })))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("1 to 5"), "{err}");
    let err = exec
        .proc()
        .start("tiered", vars(json!({ "tenant": "a" })))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("priority"), "{err}");
    let err = exec
        .model()
        .deploy_yaml(&TIERED.replace("${{ tier }}", "7"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("`priority`"), "{err}");
    engine.close().await;
}
