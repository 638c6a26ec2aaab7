//! The reference engine's cache test-suite (the seed document), ported to
//! our API: one test per scenario, same names, same intent. Where the
//! reference built a runtime "without an event loop" so that nothing ran,
//! these tests build the engine with `resume_on_start(false)` and models
//! whose processes wait at an interrupt, which keeps every assertion
//! deterministic. Concurrency is driven with the testkit's gated and
//! failing stores, never with sleeps.

use crate::common;
use common::*;

use std::sync::Arc;
use std::time::Duration;

use acts_core::durable::{Collection, Filter, Query};
use acts_core::engine::testing::{ProcRow, TaskRow, VarsRow, task_row_id};
use acts_core::engine::{ChannelOptions, DeliveryState, Engine, EngineConfig, EngineError};
use acts_core::model::{Vars, Workflow};
use acts_core::scheduler::{Message, TaskState};
use acts_core::time::ManualClock;
use acts_store::{ErrorKind, KvStore, MemoryStore, ScanRange};
use acts_testkit::{FailPlan, FailingStore, GateKind, GatedStore, OpSet};
use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;

/// A process of this model waits at its irq until answered.
const WAITS: &str =
    "id: m1\nver: '1'\nsteps:\n  - id: step1\n    uses: acts.core.irq\n    params: { key: k1 }\n";
/// A process of this model runs to its end at once.
const RUNS: &str = "id: m2\nver: '1'\nsteps:\n  - id: step1\n  - id: step2\n";

fn pid_var(pid: &str) -> Vars {
    vars(json!({ "pid": pid }))
}

async fn engine_on(kv: Arc<dyn KvStore>, cap: usize) -> Engine {
    Engine::builder()
        .store(kv)
        .cache_cap(cap)
        .resume_on_start(false)
        .start()
        .await
        .expect("engine starts")
}

async fn proc_row(kv: &Arc<dyn KvStore>, pid: &str) -> Option<ProcRow> {
    Collection::<ProcRow>::new(kv.clone())
        .get(pid)
        .await
        .expect("store readable")
}

/// A stored process row that was never started (parked) or was cut off
/// in `state`, as a crash can leave one.
async fn seed_row(kv: &Arc<dyn KvStore>, pid: &str, model: &str, state: TaskState, ts: i64) {
    let workflow = Workflow::from_yaml(model).expect("model parses");
    let row = ProcRow {
        // A row as stored before versions: it carries its model.
        model: workflow.to_json(),
        state,
        ..ProcRow::unstarted(pid, &workflow.id, 0, ts, pid_var(pid))
    };
    Collection::<ProcRow>::new(kv.clone())
        .upsert(&row)
        .await
        .expect("row written");
}

async fn wait_state(kv: &Arc<dyn KvStore>, pid: &str, pred: impl Fn(TaskState) -> bool) {
    let mut rx_poll = 0u32;
    tokio::time::timeout(GUARD, async {
        loop {
            if proc_row(kv, pid).await.is_some_and(|r| pred(r.state)) {
                return;
            }
            rx_poll += 1;
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("process {pid} never reached the expected state"));
}

async fn irq_of(rx: &mut UnboundedReceiver<Message>, pid: &str) -> Message {
    tokio::time::timeout(GUARD, async {
        loop {
            let m = rx.recv().await.expect("channel open");
            if m.pid == pid && m.r#type == "act" && m.state == "created" {
                return m;
            }
        }
    })
    .await
    .expect("the irq is announced")
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Completes act `tid` of process `pid` on a task of its own (so the test
/// can hold its write at a gate).
fn spawn_complete(
    exec: &acts_core::engine::Executor,
    pid: &str,
    tid: &str,
) -> tokio::task::JoinHandle<Result<(), EngineError>> {
    let (exec, pid, tid) = (exec.clone(), pid.to_owned(), tid.to_owned());
    tokio::spawn(async move { exec.act().complete(&pid, &tid, Vars::new()).await })
}

/// Waits until `cond` holds (a hang guard, not a timing assumption).
async fn until(what: &str, cond: impl Fn() -> bool) {
    tokio::time::timeout(GUARD, async {
        while !cond() {
            // Not a spin: the waited-for work gets the cores.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("never: {what}"));
}

#[tokio::test]
async fn cache_evict_breaks_proc_task_cycle() {
    let engine = engine_on(store().await, 10).await;
    engine.executor().model().deploy_yaml(WAITS).await.unwrap();
    let p = engine
        .executor()
        .proc()
        .start("m1", Vars::new())
        .await
        .unwrap();
    let handle = engine
        .runtime()
        .process_handle(&p.pid)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(engine.runtime().cache().resident_count(), 1);
    let weak = Arc::downgrade(&handle);
    assert!(engine.runtime().cache().evict(&p.pid));
    assert_eq!(
        engine.runtime().cache().resident_count(),
        0,
        "out of memory"
    );
    assert_eq!(
        engine.runtime().cache().count(),
        1,
        "still admitted: it is in flight"
    );
    // Still held by the caller: its tasks stay readable.
    assert_eq!(handle.pid(), p.pid);
    drop(handle);
    assert!(
        weak.upgrade().is_none(),
        "the evicted process must be freed with its whole task graph"
    );
}

#[tokio::test]
async fn cache_restore_dynamic_acts() {
    let kv: Arc<dyn KvStore> = store().await;
    let e1 = engine_on(kv.clone(), 10).await;
    e1.executor()
        .model().deploy_yaml("id: seq\nver: '1'\nsteps:\n  - id: step1\n    uses: acts.core.sequence\n    params:\n      in: ['a', 'b', 'c']\n      acts:\n        - { uses: acts.core.irq, params: { key: act } }\n")
        .await
        .unwrap();
    let mut rx = e1.channel(ChannelOptions::default()).subscribe();
    let p = e1
        .executor()
        .proc()
        .start("seq", Vars::new())
        .await
        .unwrap();
    let first = irq_of(&mut rx, &p.pid).await;
    e1.close().await;
    drop(e1);

    // A new engine loads the process from the store: the chained acts
    // (block → next block) still lead from one to the next.
    let e2 = engine_on(kv, 10).await;
    let mut rx = e2.channel(ChannelOptions::default()).subscribe();
    let tasks = e2.executor().task().list(&p.pid).await.unwrap();
    assert!(
        tasks
            .iter()
            .any(|t| t.tid == first.tid && t.state == TaskState::Interrupt)
    );
    let mut answered = vec![first.tid.clone()];
    e2.executor()
        .act()
        .complete(&p.pid, &first.tid, Vars::new())
        .await
        .unwrap();
    for _ in 0..2 {
        let next = irq_of(&mut rx, &p.pid).await;
        assert!(!answered.contains(&next.tid));
        answered.push(next.tid.clone());
        e2.executor()
            .act()
            .complete(&p.pid, &next.tid, Vars::new())
            .await
            .unwrap();
    }
    assert_eq!(
        e2.executor().proc().get(&p.pid).await.unwrap().state,
        TaskState::Completed
    );
}

#[tokio::test]
async fn cache_count() {
    let engine = engine_on(store().await, 10).await;
    engine.executor().model().deploy_yaml(WAITS).await.unwrap();
    engine
        .executor()
        .proc()
        .start("m1", Vars::new())
        .await
        .unwrap();
    assert_eq!(engine.runtime().cache().count(), 1);
}

#[tokio::test]
async fn cache_push_get() {
    let engine = engine_on(store().await, 10).await;
    engine.executor().model().deploy_yaml(WAITS).await.unwrap();
    let p = engine
        .executor()
        .proc()
        .start("m1", Vars::new())
        .await
        .unwrap();
    assert_eq!(engine.runtime().cache().count(), 1);
    assert!(
        engine
            .runtime()
            .process_handle(&p.pid)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        engine.runtime().cache().count(),
        1,
        "a resident hit loads nothing"
    );
}

#[tokio::test]
async fn cache_push_to_store() {
    let kv: Arc<dyn KvStore> = store().await;
    let engine = engine_on(kv.clone(), 1).await;
    engine.executor().model().deploy_yaml(WAITS).await.unwrap();
    let mut pids = Vec::new();
    for _ in 0..5 {
        pids.push(
            engine
                .executor()
                .proc()
                .start("m1", Vars::new())
                .await
                .unwrap()
                .pid,
        );
    }
    // The cap gates starts: one resident, four parked; every one is stored.
    assert_eq!(engine.runtime().cache().count(), 1);
    for pid in &pids {
        assert!(proc_row(&kv, pid).await.is_some(), "{pid} is stored");
    }
}

#[tokio::test]
async fn cache_remove() {
    let kv: Arc<dyn KvStore> = store().await;
    let engine = engine_on(kv.clone(), 10).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(WAITS).await.unwrap();
    let mut pids = Vec::new();
    for _ in 0..5 {
        pids.push(exec.proc().start("m1", Vars::new()).await.unwrap().pid);
    }
    assert_eq!(engine.runtime().cache().count(), 5);
    for pid in &pids {
        assert!(proc_row(&kv, pid).await.is_some());
        assert!(exec.proc().remove(pid).await.unwrap());
        assert!(matches!(
            exec.proc().get(pid).await,
            Err(EngineError::ProcessNotFound(_))
        ));
        assert!(proc_row(&kv, pid).await.is_none());
    }
    assert_eq!(engine.runtime().cache().count(), 0);
}

#[tokio::test]
async fn cache_upsert() {
    let kv: Arc<dyn KvStore> = store().await;
    let engine = engine_on(kv.clone(), 10).await;
    engine.executor().model().deploy_yaml(WAITS).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = engine
        .executor()
        .proc()
        .start("m1", Vars::new())
        .await
        .unwrap();
    assert_eq!(
        proc_row(&kv, &p.pid).await.unwrap().state,
        TaskState::Running
    );
    let irq = irq_of(&mut rx, &p.pid).await;
    engine
        .executor()
        .act()
        .complete(&p.pid, &irq.tid, Vars::new())
        .await
        .unwrap();
    assert_eq!(
        proc_row(&kv, &p.pid).await.unwrap().state,
        TaskState::Completed
    );
    let task = Collection::<TaskRow>::new(kv.clone())
        .get(&task_row_id(&p.pid, &irq.tid))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(task.state, TaskState::Completed);
}

/// Every key in the store that mentions `pid`.
async fn keys_of(kv: &Arc<dyn KvStore>, pid: &str) -> Vec<String> {
    kv.scan(ScanRange::all())
        .await
        .expect("test setup")
        .into_iter()
        .map(|p| String::from_utf8_lossy(&p.key).into_owned())
        .filter(|k| k.contains(pid))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_remove_after_writer_writes_drops_all_rows() {
    let gated = Arc::new(GatedStore::new(MemoryStore::new()));
    let kv: Arc<dyn KvStore> = gated.clone();
    let engine = engine_on(kv.clone(), 10).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(WAITS).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = exec.proc().start("m1", Vars::new()).await.unwrap();
    let irq = irq_of(&mut rx, &p.pid).await;
    let before = keys_of(&kv, &p.pid).await;
    // A transition's write parks in the store...
    gated.arm(GateKind::Write);
    let pending = spawn_complete(&exec, &p.pid, &irq.tid);
    gated.wait_parked(GateKind::Write, 1).await;
    // ...and the removal begins (it marks the process removed: the epoch
    // moves) but waits behind the held write: it cannot finish, and has
    // deleted nothing, while the write is held.
    let epoch = engine.storage().writer_epoch();
    let removal = {
        let exec = exec.clone();
        let pid = p.pid.clone();
        tokio::spawn(async move { exec.proc().remove(&pid).await })
    };
    until("the removal begins", || {
        engine.storage().writer_epoch() != epoch
    })
    .await;
    assert_eq!(gated.parked(GateKind::Write), 1, "only the held write");
    assert!(!removal.is_finished());
    assert_eq!(keys_of(&kv, &p.pid).await, before, "nothing deleted yet");
    // The held write applies first (its task rows land), then the removal
    // drops every row — the ones that write added included.
    gated.disarm(GateKind::Write);
    pending.await.unwrap().unwrap();
    assert!(removal.await.unwrap().unwrap());
    engine.storage().flush().await.unwrap();
    assert!(
        keys_of(&kv, &p.pid).await.is_empty(),
        "every row of it is gone"
    );
    assert_eq!(gated.entered(GateKind::Write), 1);
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_writes_after_remove_are_skipped() {
    let gated = Arc::new(GatedStore::new(MemoryStore::new()));
    let kv: Arc<dyn KvStore> = gated.clone();
    let engine = engine_on(kv.clone(), 10).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(WAITS).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let a = exec.proc().start("m1", Vars::new()).await.unwrap();
    let irq_a = irq_of(&mut rx, &a.pid).await;
    let b = exec.proc().start("m1", Vars::new()).await.unwrap();
    let irq_b = irq_of(&mut rx, &b.pid).await;
    let b_rows = keys_of(&kv, &b.pid).await;
    // The writer is busy with B's batch, held in the store...
    gated.arm(GateKind::Write);
    let b_done = spawn_complete(&exec, &b.pid, &irq_b.tid);
    gated.wait_parked(GateKind::Write, 1).await;
    // ...so A's transition (its instance born before the removal) queues
    // its batch behind it.
    let a_done = spawn_complete(&exec, &a.pid, &irq_a.tid);
    until("A's batch waits in the writer's queue", || {
        engine.storage().queued_writes() != 0
    })
    .await;
    // A is removed while its batch waits.
    let epoch = engine.storage().writer_epoch();
    let removal = {
        let exec = exec.clone();
        let pid = a.pid.clone();
        tokio::spawn(async move { exec.proc().remove(&pid).await })
    };
    until("the removal marks A", || {
        engine.storage().writer_epoch() != epoch
    })
    .await;
    gated.disarm(GateKind::Write);
    b_done.await.unwrap().unwrap();
    // The late batch reached the writer and was skipped: never applied
    // (which would resurrect rows), never a silent success either.
    let late = a_done.await.unwrap();
    assert!(
        matches!(late, Err(EngineError::Removed(ref pid)) if *pid == a.pid),
        "{late:?}"
    );
    assert!(removal.await.unwrap().unwrap());
    engine.storage().flush().await.unwrap();
    assert!(
        keys_of(&kv, &a.pid).await.is_empty(),
        "a late write resurrected rows of a removed process"
    );
    assert!(proc_row(&kv, &a.pid).await.is_none());
    // B's write was applied (its rows moved on), and later writes work.
    assert_ne!(keys_of(&kv, &b.pid).await, b_rows);
    assert_eq!(
        proc_row(&kv, &b.pid).await.unwrap().state,
        TaskState::Completed
    );
}
#[tokio::test]
async fn cache_start_parked_refills_only_parked_none_rows() {
    let kv: Arc<dyn KvStore> = store().await;
    let engine = engine_on(kv.clone(), 5).await;
    engine.executor().model().deploy_yaml(WAITS).await.unwrap();
    let parked = ["parked1", "parked2", "parked3"];
    for (i, pid) in parked.iter().enumerate() {
        seed_row(&kv, pid, WAITS, TaskState::None, i as i64).await;
    }
    let ignored = [
        ("ready", TaskState::Ready),
        ("running", TaskState::Running),
        ("pending", TaskState::Pending),
        ("completed", TaskState::Completed),
        ("error", TaskState::Error),
    ];
    for (pid, state) in ignored {
        seed_row(&kv, pid, WAITS, state, 0).await;
    }
    assert_eq!(engine.runtime().cache().count(), 0);
    engine.runtime().start_parked().await.unwrap();
    for pid in parked {
        wait_state(&kv, pid, |s| s == TaskState::Running).await;
    }
    assert_eq!(
        sorted(engine.runtime().cache().resident()),
        sorted(parked.iter().map(|s| s.to_string()).collect())
    );
    for (pid, state) in ignored {
        assert_eq!(
            proc_row(&kv, pid).await.unwrap().state,
            state,
            "{pid} untouched"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_finished_proc_frees_slot_for_restore() {
    let kv: Arc<dyn KvStore> = store().await;
    // A crash left three parked processes: two that wait (older) and one
    // that runs to its end (newest). Two slots.
    seed_row(&kv, "seed_wait_a", WAITS, TaskState::None, 1).await;
    seed_row(&kv, "seed_wait_b", WAITS, TaskState::None, 2).await;
    seed_row(&kv, "seed_runs", RUNS, TaskState::None, 3).await;
    let engine = Engine::builder()
        .store(kv.clone())
        .cache_cap(2)
        .start()
        .await
        .expect("engine starts");
    // The start fills both slots with the oldest two; they wait, so the
    // third cannot get in.
    wait_state(&kv, "seed_wait_a", |s| s == TaskState::Running).await;
    wait_state(&kv, "seed_wait_b", |s| s == TaskState::Running).await;
    assert_eq!(
        sorted(engine.runtime().cache().resident()),
        vec!["seed_wait_a".to_string(), "seed_wait_b".to_string()]
    );
    assert_eq!(
        proc_row(&kv, "seed_runs").await.unwrap().state,
        TaskState::None,
        "no slot for it while both wait"
    );
    // One of them finishes: its eviction frees the slot and starts the
    // parked one — nobody calls start_parked.
    let exec = engine.executor();
    let irq = exec
        .task()
        .list("seed_wait_a")
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.state == TaskState::Interrupt && t.kind == "act")
        .expect("seed_wait_a waits at its irq");
    exec.act()
        .complete("seed_wait_a", &irq.tid, Vars::new())
        .await
        .unwrap();
    wait_state(&kv, "seed_runs", TaskState::is_terminal).await;
    assert_eq!(
        proc_row(&kv, "seed_wait_a").await.unwrap().state,
        TaskState::Completed
    );
    until("the finished processes left their slots", || {
        engine.runtime().cache().resident() == vec!["seed_wait_b".to_string()]
    })
    .await;
}
#[tokio::test]
async fn cache_park_over_cap_then_refill_on_terminal() {
    let kv: Arc<dyn KvStore> = store().await;
    let engine = engine_on(kv.clone(), 2).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(WAITS).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p1 = exec.proc().start("m1", pid_var("park1")).await.unwrap();
    let p2 = exec.proc().start("m1", pid_var("park2")).await.unwrap();
    assert_eq!(engine.runtime().cache().count(), 2);
    let p3 = exec.proc().start("m1", pid_var("park3")).await.unwrap();
    assert_eq!(p3.state, TaskState::None, "parked");
    assert_eq!(
        engine.runtime().cache().count(),
        2,
        "nothing resident was evicted"
    );
    assert_eq!(proc_row(&kv, "park3").await.unwrap().state, TaskState::None);
    let resident = engine.runtime().cache().resident();
    assert!(resident.contains(&p1.pid) && resident.contains(&p2.pid));
    // A demand load of the parked process does not cache it.
    let info = exec.proc().get("park3").await.unwrap();
    assert_eq!(info.state, TaskState::None);
    assert_eq!(engine.runtime().cache().count(), 2);
    // p1 ends: its slot starts the parked process.
    let irq = irq_of(&mut rx, "park1").await;
    exec.act()
        .complete("park1", &irq.tid, Vars::new())
        .await
        .unwrap();
    let irq3 = irq_of(&mut rx, "park3").await;
    exec.act()
        .complete("park3", &irq3.tid, Vars::new())
        .await
        .unwrap();
    wait_state(&kv, "park3", |s| s == TaskState::Completed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_concurrent_proc_miss_returns_one_instance() {
    let kv: Arc<dyn KvStore> = store().await;
    let e1 = engine_on(kv.clone(), 10).await;
    e1.executor().model().deploy_yaml(WAITS).await.unwrap();
    let p = e1.executor().proc().start("m1", Vars::new()).await.unwrap();
    e1.close().await;
    drop(e1);
    let engine = engine_on(kv, 10).await;
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let engine = engine.clone();
        let pid = p.pid.clone();
        tasks.push(tokio::spawn(async move {
            engine
                .runtime()
                .process_handle(&pid)
                .await
                .unwrap()
                .unwrap()
        }));
    }
    let mut handles = Vec::new();
    for t in tasks {
        handles.push(t.await.unwrap());
    }
    let first = handles[0].clone();
    assert!(
        handles.iter().all(|h| Arc::ptr_eq(h, &first)),
        "one instance"
    );
    assert_eq!(
        engine.runtime().cache().resident_count(),
        1,
        "one instance in memory"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_admit_same_pid_has_single_winner() {
    let engine = engine_on(store().await, 1).await;
    engine.executor().model().deploy_yaml(WAITS).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let exec = engine.executor();
        tasks.push(tokio::spawn(async move {
            exec.proc().start("m1", pid_var("concurrent")).await
        }));
    }
    let mut admitted = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(info) => {
                assert_eq!(info.state, TaskState::Running, "cap 1: never parked");
                admitted += 1;
            }
            Err(e) => assert!(e.to_string().contains("duplicated"), "{e}"),
        }
    }
    assert_eq!(admitted, 1);
    assert_eq!(engine.runtime().cache().count(), 1);
}

#[tokio::test]
async fn cache_parked_refill_is_oldest_first_within_cap() {
    let kv: Arc<dyn KvStore> = store().await;
    let engine = engine_on(kv.clone(), 2).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(WAITS).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    exec.proc().start("m1", pid_var("fifo1")).await.unwrap();
    exec.proc().start("m1", pid_var("fifo2")).await.unwrap();
    // Stored out of order: the newer first.
    seed_row(&kv, "fifo_new", WAITS, TaskState::None, 999).await;
    seed_row(&kv, "fifo_old", WAITS, TaskState::None, 10).await;
    engine.runtime().start_parked().await.unwrap(); // full: nothing starts
    assert_eq!(engine.runtime().cache().count(), 2);
    let irq = irq_of(&mut rx, "fifo1").await;
    exec.act()
        .complete("fifo1", &irq.tid, Vars::new())
        .await
        .unwrap();
    wait_state(&kv, "fifo_old", |s| s == TaskState::Running).await;
    assert_eq!(engine.runtime().cache().count(), 2, "never above the cap");
    assert!(
        engine
            .runtime()
            .cache()
            .resident()
            .contains(&"fifo_old".to_string())
    );
    assert_eq!(
        proc_row(&kv, "fifo_new").await.unwrap().state,
        TaskState::None
    );
}

#[tokio::test]
async fn cache_vars_row_written_only_on_mutation() {
    let kv: Arc<dyn KvStore> = store().await;
    let engine = engine_on(kv.clone(), 10).await;
    let exec = engine.executor();
    // The workflow exposes a name nobody set, so step1 starts with no data.
    exec.model().deploy_yaml(
        "id: v\nver: '1'\nsteps:\n  - id: step1\n    uses: acts.core.irq\n    params: { key: k }\n  - id: step2\n    uses: acts.core.irq\n    params: { key: k2 }\nexposes:\n  - { name: var1 }\n",
    )
    .await
    .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = exec.proc().start("v", Vars::new()).await.unwrap();
    let irq = irq_of(&mut rx, &p.pid).await;
    let step1 = exec
        .task()
        .list(&p.pid)
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.nid == "step1")
        .expect("step1 runs");
    let vars_rows = Collection::<VarsRow>::new(kv.clone());
    let vars_key = |tid: &str| Collection::<VarsRow>::row_key(&task_row_id(&p.pid, tid));
    let root_vars = vars_rows
        .get(&task_row_id(&p.pid, "$"))
        .await
        .unwrap()
        .expect("the root scope holds the start options");
    assert_eq!(root_vars.data.get("pid"), Some(&json!(p.pid)));
    // An untouched scope has no vars row at all (the act has one: the
    // engine notes how it runs, `__run_as`).
    assert_eq!(kv.get(&vars_key(&step1.tid)).await.unwrap(), None);
    let act_row = kv.get(&vars_key(&irq.tid)).await.unwrap();
    // Lifecycle-only transitions (the act completes with no vars, step1
    // completes, step2 starts) write no vars row for them either, and do
    // not rewrite the root's.
    let root_before = kv.get(&vars_key("$")).await.unwrap();
    exec.act()
        .complete(&p.pid, &irq.tid, Vars::new())
        .await
        .unwrap();
    let irq2 = irq_of(&mut rx, &p.pid).await;
    assert_eq!(kv.get(&vars_key(&step1.tid)).await.unwrap(), None);
    assert_eq!(kv.get(&vars_key(&irq.tid)).await.unwrap(), act_row);
    assert_eq!(kv.get(&vars_key("$")).await.unwrap(), root_before);
    // The task rows carry no data at all.
    let t = Collection::<TaskRow>::new(kv.clone())
        .get(&task_row_id(&p.pid, &irq.tid))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t.state, TaskState::Completed);
    let json = serde_json::to_string(&t).unwrap();
    assert!(
        !json.contains("\"data\""),
        "lifecycle rows hold no scope vars: {json}"
    );
    // A data mutation writes exactly that scope's row.
    exec.act()
        .complete(&p.pid, &irq2.tid, vars(json!({"var1": 10})))
        .await
        .unwrap();
    let act_vars = vars_rows
        .get(&task_row_id(&p.pid, &irq2.tid))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(act_vars.data.get("var1"), Some(&json!(10)));
    assert_eq!(kv.get(&vars_key(&step1.tid)).await.unwrap(), None);
}
#[tokio::test]
async fn cache_vars_ancestor_scope_round_trip() {
    let kv: Arc<dyn KvStore> = store().await;
    let engine = engine_on(kv.clone(), 10).await;
    let exec = engine.executor();
    // step1 declares `x`; its first act writes x, which folds up to
    // step1's scope while step1 still runs (its second act waits).
    exec.model().deploy_yaml(
        "id: fold\nver: '1'\nsteps:\n  - id: step1\n    vars:\n      - { name: x, value: 1 }\n    uses: acts.core.block\n    params:\n      mode: sequence\n      acts:\n        - { uses: acts.core.irq, params: { key: k } }\n        - { uses: acts.core.irq, params: { key: k_b } }\n  - id: step2\n    uses: acts.core.irq\n    params: { key: k2 }\n",
    )
    .await
    .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = exec.proc().start("fold", Vars::new()).await.unwrap();
    let irq = irq_of(&mut rx, &p.pid).await;
    exec.act()
        .complete(&p.pid, &irq.tid, vars(json!({"x": 2})))
        .await
        .unwrap();
    let second = irq_of(&mut rx, &p.pid).await;
    assert_eq!(second.key.as_deref(), Some("k_b"), "step1 still runs");
    let step1 = exec
        .task()
        .list(&p.pid)
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.nid == "step1")
        .unwrap();
    let rows = Collection::<VarsRow>::new(kv.clone());
    let step_scope = rows
        .get(&task_row_id(&p.pid, &step1.tid))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        step_scope.data.get("x"),
        Some(&json!(2)),
        "the owner scope row was updated"
    );
    let root_scope = rows.get(&task_row_id(&p.pid, "$")).await.unwrap().unwrap();
    assert_eq!(
        root_scope.data.get("x"),
        None,
        "the root scope never held x"
    );
    // Restore: the owner scope comes back with its value.
    engine.close().await;
    let e2 = engine_on(kv, 10).await;
    let restored = e2.executor().task().get(&p.pid, &step1.tid).await.unwrap();
    assert_eq!(restored.data.get("x"), Some(&json!(2)));
    let root = e2.executor().task().get(&p.pid, "$").await.unwrap();
    assert_eq!(root.data.get("x"), None);
}

/// Starts `n` processes of WAITS on a roomy engine over `kv`, each waiting
/// at its irq, with increasing start times; returns their pids.
async fn in_flight(kv: &Arc<dyn KvStore>, tags: &[&str]) -> Vec<String> {
    let clock = ManualClock::new(1_000);
    let e = Engine::builder()
        .store(kv.clone())
        .clock(Arc::new(clock.clone()))
        .resume_on_start(false)
        .start()
        .await
        .expect("test setup");
    e.executor()
        .model()
        .deploy_yaml(WAITS)
        .await
        .expect("test setup");
    let mut pids = Vec::new();
    for tag in tags {
        clock.advance(Duration::from_millis(1));
        pids.push(
            e.executor()
                .proc()
                .start("m1", pid_var(tag))
                .await
                .expect("test setup")
                .pid,
        );
    }
    e.close().await;
    pids
}

#[tokio::test]
async fn cache_resume_loads_in_flight_before_parked() {
    let kv: Arc<dyn KvStore> = store().await;
    // Two in-flight processes, both younger than every parked row, and
    // more rows (5) than slots (3): oldest-first over all rows would pick
    // the three parked ones.
    in_flight(&kv, &["resume_inflight_1", "resume_inflight_2"]).await;
    for (tag, ts) in [
        ("resume_parked_a", 10),
        ("resume_parked_b", 20),
        ("resume_parked_c", 30),
    ] {
        seed_row(&kv, tag, WAITS, TaskState::None, ts).await;
    }
    let engine = engine_on(kv.clone(), 3).await;
    assert_eq!(engine.runtime().cache().count(), 0);
    engine.runtime().resume().await.unwrap();
    wait_state(&kv, "resume_parked_a", |s| s == TaskState::Running).await;
    // The in-flight ones first, then the oldest parked one in the slot
    // left; the others keep waiting.
    assert_eq!(
        sorted(engine.runtime().cache().resident()),
        sorted(vec![
            "resume_inflight_1".into(),
            "resume_inflight_2".into(),
            "resume_parked_a".into()
        ])
    );
    for pid in ["resume_parked_b", "resume_parked_c"] {
        assert_eq!(proc_row(&kv, pid).await.unwrap().state, TaskState::None);
    }
    // The in-flight processes' tasks were decoded: their irqs still wait.
    for pid in ["resume_inflight_1", "resume_inflight_2"] {
        let tasks = engine.executor().task().list(pid).await.unwrap();
        assert!(
            tasks
                .iter()
                .any(|t| t.nid != "step1" && t.state == TaskState::Interrupt),
            "{pid}"
        );
    }
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_resume_in_flight_proc_after_restart() {
    let kv: Arc<dyn KvStore> = store().await;
    // The store as a crash mid-run leaves it: the root running, step1
    // ready (created, never run).
    let w = Workflow::from_yaml(RUNS).unwrap();
    let pid = "resume_restart";
    let row = ProcRow {
        // A row as stored before versions: it carries its model.
        model: w.to_json(),
        state: TaskState::Running,
        start_time: 1,
        ..ProcRow::unstarted(pid, "m2", 0, 1, Vars::new())
    };
    Collection::<ProcRow>::new(kv.clone())
        .upsert(&row)
        .await
        .unwrap();
    let task = |tid: &str, seq: u32, nid: &str, parent: Option<u32>, state: TaskState| TaskRow {
        pid: pid.into(),
        tid: tid.into(),
        seq,
        nid: nid.into(),
        parent,
        prev: parent,
        state,
        sign: 0,
        err: None,
        start_time: 1,
        end_time: 0,
        history: Vec::new(),
    };
    let tasks = Collection::<TaskRow>::new(kv.clone());
    tasks
        .upsert(&task("$", 0, "m2", None, TaskState::Running))
        .await
        .unwrap();
    tasks
        .upsert(&task("t1", 1, "step1", Some(0), TaskState::Ready))
        .await
        .unwrap();
    // A new engine on the store resumes it to its end.
    let engine = Engine::builder().store(kv.clone()).start().await.unwrap();
    wait_state(&kv, pid, |s| s == TaskState::Completed).await;
    engine.close().await;
}

#[tokio::test]
async fn cache_resume_overflow_drains_on_free_slot() {
    let kv: Arc<dyn KvStore> = store().await;
    let pids = in_flight(&kv, &["overflow0", "overflow1", "overflow2", "overflow3"]).await;
    let engine = engine_on(kv.clone(), 2).await;
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    engine.runtime().resume().await.unwrap();
    assert_eq!(engine.runtime().cache().count(), 2);
    assert_eq!(
        engine.runtime().cache().pending_resume(),
        vec![pids[2].clone(), pids[3].clone()]
    );
    // A second boot pass does not queue them twice.
    engine.runtime().resume().await.unwrap();
    assert_eq!(
        engine.runtime().cache().pending_resume(),
        vec![pids[2].clone(), pids[3].clone()]
    );
    // Ending overflow0 loads overflow2 into its slot.
    let t0 = engine.executor().task().list("overflow0").await.unwrap();
    let irq = t0.iter().find(|t| t.state == TaskState::Interrupt).unwrap();
    engine
        .executor()
        .act()
        .complete("overflow0", &irq.tid, Vars::new())
        .await
        .unwrap();
    until("the freed slot loads the next queued process", || {
        engine.runtime().cache().pending_resume() == vec![pids[3].clone()]
    })
    .await;
    let t1 = engine.executor().task().list("overflow1").await.unwrap();
    let irq = t1.iter().find(|t| t.state == TaskState::Interrupt).unwrap();
    engine
        .executor()
        .act()
        .complete("overflow1", &irq.tid, Vars::new())
        .await
        .unwrap();
    until("the last queued process is loaded", || {
        engine.runtime().cache().pending_resume().is_empty()
            && engine.runtime().cache().resident().len() == 2
    })
    .await;
    assert_eq!(
        sorted(engine.runtime().cache().resident()),
        sorted(vec![pids[2].clone(), pids[3].clone()])
    );
    drop(rx.try_recv());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_admit_not_blocked_by_restore_io() {
    let gated = Arc::new(GatedStore::new(MemoryStore::new()));
    let kv: Arc<dyn KvStore> = gated.clone();
    let engine = engine_on(kv.clone(), 4).await;
    engine.executor().model().deploy_yaml(WAITS).await.unwrap();
    engine
        .executor()
        .proc()
        .start("m1", pid_var("restore_io_resident"))
        .await
        .unwrap();
    seed_row(&kv, "restore_io_parked", WAITS, TaskState::None, 1).await;
    // Park a restore pass inside its store read...
    gated.arm(GateKind::Read);
    let restore = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.runtime().start_parked().await })
    };
    gated.wait_parked(GateKind::Read, 1).await;
    // ...and admit a fresh process meanwhile.
    let fresh = tokio::time::timeout(GUARD, engine.executor().proc().start("m1", Vars::new()))
        .await
        .expect("admission must not wait for a restore's store I/O")
        .unwrap();
    assert_eq!(fresh.state, TaskState::Running);
    gated.disarm(GateKind::Read);
    restore.await.unwrap().unwrap();
    wait_state(&kv, "restore_io_parked", |s| s == TaskState::Running).await;
    assert_eq!(
        engine.runtime().cache().count(),
        3,
        "resident + fresh + refilled parked"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_concurrent_restore_passes_do_not_block_or_double_load() {
    let gated = Arc::new(GatedStore::new(MemoryStore::new()));
    let kv: Arc<dyn KvStore> = gated.clone();
    let engine = engine_on(kv.clone(), 2).await;
    engine.executor().model().deploy_yaml(WAITS).await.unwrap();
    seed_row(&kv, "restore_concurrent_a", WAITS, TaskState::None, 1).await;
    seed_row(&kv, "restore_concurrent_b", WAITS, TaskState::None, 2).await;
    gated.arm(GateKind::Read);
    let first = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.runtime().start_parked().await })
    };
    gated.wait_parked(GateKind::Read, 1).await;
    tokio::time::timeout(GUARD, engine.runtime().start_parked())
        .await
        .expect("a second pass must not wait on the first one's I/O")
        .unwrap();
    assert_eq!(
        gated.entered(GateKind::Read),
        1,
        "the second pass read nothing"
    );
    gated.disarm(GateKind::Read);
    first.await.unwrap().unwrap();
    wait_state(&kv, "restore_concurrent_a", |s| s == TaskState::Running).await;
    wait_state(&kv, "restore_concurrent_b", |s| s == TaskState::Running).await;
    assert_eq!(
        engine.runtime().cache().count(),
        2,
        "each parked row started exactly once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_proc_miss_overlapping_load_reuses_instance() {
    let gated = Arc::new(GatedStore::new(MemoryStore::new()));
    let kv: Arc<dyn KvStore> = gated.clone();
    let pids = in_flight(&kv, &["overlap"]).await;
    let engine = engine_on(kv.clone(), 10).await;
    // The first miss parks inside its store read.
    gated.arm(GateKind::Read);
    let leader = {
        let engine = engine.clone();
        let pid = pids[0].clone();
        tokio::spawn(async move {
            engine
                .runtime()
                .process_handle(&pid)
                .await
                .unwrap()
                .unwrap()
        })
    };
    gated.wait_parked(GateKind::Read, 1).await;
    assert_eq!(engine.runtime().cache().load_callers(&pids[0]), 1);
    // A second miss arrives while the load is in flight: it joins it
    // (proved before the gate opens), and reads nothing itself.
    let waiter = {
        let engine = engine.clone();
        let pid = pids[0].clone();
        tokio::spawn(async move {
            engine
                .runtime()
                .process_handle(&pid)
                .await
                .unwrap()
                .unwrap()
        })
    };
    until("the second caller joins the load", || {
        engine.runtime().cache().load_callers(&pids[0]) >= 2
    })
    .await;
    let reads = gated.entered(GateKind::Read);
    gated.disarm(GateKind::Read);
    let (a, b) = (leader.await.unwrap(), waiter.await.unwrap());
    assert!(Arc::ptr_eq(&a, &b), "one load, one instance");
    assert_eq!(
        engine.runtime().cache().resident_count(),
        1,
        "one instance in memory"
    );
    assert_eq!(
        engine.runtime().cache().load_callers(&pids[0]),
        0,
        "resident now"
    );
    assert_eq!(reads, 1, "only the leader read while the gate was shut");
    // A third caller after the load hits the resident instance.
    let c = engine
        .runtime()
        .process_handle(&pids[0])
        .await
        .unwrap()
        .unwrap();
    assert!(Arc::ptr_eq(&a, &c));
}
#[tokio::test]
async fn find_opt_normalizes_only_missing_rows() {
    let kv: Arc<dyn KvStore> = store().await;
    assert!(
        Collection::<ProcRow>::new(kv.clone())
            .get("absent")
            .await
            .unwrap()
            .is_none()
    );
    let engine = engine_on(kv, 10).await;
    assert!(matches!(
        engine.executor().proc().get("absent").await,
        Err(EngineError::ProcessNotFound(_))
    ));
}

#[tokio::test]
async fn cache_store_error_is_not_an_empty_success() {
    let failing = Arc::new(FailingStore::with_plan(
        MemoryStore::new(),
        FailPlan::always(OpSet::ALL, ErrorKind::Unavailable),
    ));
    let kv: Arc<dyn KvStore> = failing.clone();
    // Starting (and resuming) on a down store is an error, not "nothing
    // to resume".
    let err = Engine::builder()
        .store(kv.clone())
        .start()
        .await
        .unwrap_err();
    assert!(
        matches!(err, EngineError::Store(_) | EngineError::Commit { .. }),
        "{err:?}"
    );
    // Reads fail, writes work: resuming still fails, visibly.
    failing.set_plan(FailPlan::always(OpSet::SCANS, ErrorKind::Unavailable));
    let err = Engine::builder()
        .store(kv.clone())
        .start()
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::Store(_)), "{err:?}");
    failing.heal();
    let engine = engine_on(kv.clone(), 10).await;
    failing.set_plan(FailPlan::always(OpSet::ALL, ErrorKind::Unavailable));
    // A load is an error, not "no such process".
    let err = engine.executor().proc().get("any-pid").await.unwrap_err();
    assert!(matches!(err, EngineError::Store(_)), "{err:?}");
    // Listing is an error, not an empty list.
    assert!(engine.executor().proc().list(None, None).await.is_err());
    let q = Query::new().filter(Filter::eq("state", "running"));
    assert!(
        Collection::<ProcRow>::new(kv.clone())
            .query_all(&q)
            .await
            .is_err()
    );
    // The store comes back: so does the engine.
    failing.heal();
    assert!(matches!(
        engine.executor().proc().get("any-pid").await,
        Err(EngineError::ProcessNotFound(_))
    ));
    engine.close().await;

    // Deliveries: an ack, the listing and the re-send scan on a down store
    // are errors, not "acked" or "nothing pending"; the re-send timer
    // keeps its next tick, so the delivery is re-sent once the store is
    // back.
    failing.heal();
    let clock = ManualClock::new(1_700_000_000_000);
    let engine = Engine::builder()
        .store(kv.clone())
        .clock(Arc::new(clock.clone()))
        .config({
            let mut v = EngineConfig::default();
            v.tick = Duration::from_secs(10);
            v.delivery_retry = Duration::from_secs(30);
            v
        })
        .start()
        .await
        .expect("engine starts");
    let exec = engine.executor();
    exec.model().deploy_yaml(WAITS).await.unwrap();
    let ch = engine
        .channels()
        .durable(
            "app",
            ChannelOptions::default()
                .with_type("act")
                .with_state("created"),
        )
        .await
        .unwrap();
    let mut rx = ch.subscribe();
    exec.proc().start("m1", Vars::new()).await.unwrap();
    let first = recv(&mut rx).await;
    failing.set_plan(FailPlan::always(OpSet::ALL, ErrorKind::Unavailable));
    let err = ch.ack(&first.id).await.unwrap_err();
    assert!(matches!(err, EngineError::Store(_)), "ack: {err:?}");
    let err = ch.resend_pending().await.unwrap_err();
    assert!(matches!(err, EngineError::Store(_)), "resend: {err:?}");
    assert!(exec.msg().list(Some("app"), None).await.is_err());
    // The periodic pass fails inside (logged), and re-arms itself.
    let failed_before = failing.failures();
    clock.advance(Duration::from_secs(31));
    engine.runtime().housekeeping().await;
    assert!(failing.failures() > failed_before, "the scan met the store");
    assert!(rx.try_recv().is_err(), "nothing re-sent on a down store");
    // A timer pass started by the first advance may still be running (on a
    // busy machine): once it ends it re-arms from the time it sees, so the
    // clock moves on only when nothing is in flight.
    settle(&engine).await;
    failing.heal();
    clock.advance(Duration::from_secs(11));
    let again = recv(&mut rx).await;
    assert_eq!(again.id, first.id, "re-sent by the next tick");
    ch.ack(&first.id).await.unwrap();
    let pending = exec
        .msg()
        .list(Some("app"), Some(DeliveryState::Pending))
        .await
        .unwrap();
    assert!(pending.is_empty(), "{pending:?}");
    engine.close().await;
}
