//! Store faults through the testkit's `FailingStore`: failing reads,
//! writes and scans surface as errors to the caller (never as "no
//! record"), nothing is half-applied, and the engine works again once the
//! store heals.

use std::sync::Arc;
use std::time::Duration;

use acts_core::durable::Collection;
use acts_core::engine::testing::ProcRow;
use acts_core::engine::{ChannelOptions, Engine, EngineError};
use acts_core::model::Vars;
use acts_core::scheduler::{Message, TaskState};
use acts_store::{ErrorKind, KvStore, MemoryStore};
use acts_testkit::{FailPlan, FailingStore, OpSet};
use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;

const WAITS: &str = "id: m1\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.core.irq\n    params: { key: k }\n  - id: s2\n    uses: acts.transform.set\n    params: { done: true }\n";

async fn setup() -> (Arc<FailingStore<MemoryStore>>, Engine) {
    let failing = Arc::new(FailingStore::new(MemoryStore::new()));
    let engine = Engine::builder()
        .store(failing.clone() as Arc<dyn KvStore>)
        .start()
        .await
        .expect("engine starts");
    engine
        .executor()
        .model()
        .deploy_yaml(WAITS)
        .await
        .expect("model deploys");
    (failing, engine)
}

async fn irq(rx: &mut UnboundedReceiver<Message>) -> Message {
    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let m = rx.recv().await.expect("open");
            if m.r#type == "act" && m.state == "created" {
                return m;
            }
        }
    })
    .await
    .expect("an irq")
}

fn fail(ops: OpSet) -> FailPlan {
    FailPlan::always(ops, ErrorKind::Unavailable)
}

#[tokio::test]
async fn a_failed_start_is_an_error_and_leaves_nothing_behind() {
    let (failing, engine) = setup().await;
    let exec = engine.executor();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    failing.set_plan(fail(OpSet::WRITES));
    let mut v = Vars::new();
    v.insert("pid".into(), json!("f1"));
    let err = exec.proc().start("m1", v.clone()).await.unwrap_err();
    assert!(matches!(err, EngineError::Commit { .. }), "{err:?}");
    assert!(rx.try_recv().is_err(), "nothing was announced");
    assert_eq!(engine.runtime().cache().count(), 0, "nothing is resident");
    failing.heal();
    let stored = Collection::<ProcRow>::new(failing.clone() as Arc<dyn KvStore>)
        .get("f1")
        .await
        .unwrap();
    assert!(stored.is_none(), "nothing was stored");
    // The store is back: the same start succeeds.
    let info = exec.proc().start("m1", v).await.unwrap();
    assert_eq!(info.state, TaskState::Running);
}

#[tokio::test]
async fn a_failed_action_changes_nothing_and_can_be_retried() {
    let (failing, engine) = setup().await;
    let exec = engine.executor();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = exec.proc().start("m1", Vars::new()).await.unwrap();
    let m = irq(&mut rx).await;
    failing.set_plan(fail(OpSet::WRITES));
    let err = exec
        .act()
        .complete(&p.pid, &m.tid, Vars::new())
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::Commit { .. }), "{err:?}");
    assert!(
        rx.try_recv().is_err(),
        "no message for an uncommitted transition"
    );
    failing.heal();
    // The process is reloaded from the store as it was: the act waits.
    let t = exec.task().get(&p.pid, &m.tid).await.unwrap();
    assert_eq!(t.state, TaskState::Interrupt);
    exec.act()
        .complete(&p.pid, &m.tid, Vars::new())
        .await
        .unwrap();
    let info = exec.proc().get(&p.pid).await.unwrap();
    assert_eq!(info.state, TaskState::Completed);
    assert_eq!(info.outputs.get("done"), Some(&json!(true)));
}

#[tokio::test]
async fn failing_reads_and_scans_are_errors_never_missing_rows() {
    let (failing, engine) = setup().await;
    let exec = engine.executor();
    let p = exec.proc().start("m1", Vars::new()).await.unwrap();
    engine.runtime().cache().evict(&p.pid);
    failing.set_plan(fail(OpSet::READS));
    let err = exec.proc().get(&p.pid).await.unwrap_err();
    assert!(matches!(err, EngineError::Store(_)), "{err:?}");
    failing.set_plan(fail(OpSet::SCANS));
    assert!(matches!(
        exec.proc().list(None, None).await,
        Err(EngineError::Store(_))
    ));
    assert!(matches!(
        exec.model().list().await,
        Err(EngineError::Store(_))
    ));
    assert!(matches!(
        engine.runtime().resume().await,
        Err(EngineError::Store(_))
    ));
    failing.heal();
    assert_eq!(
        exec.proc().get(&p.pid).await.unwrap().state,
        TaskState::Running
    );
    assert_eq!(exec.proc().list(None, None).await.unwrap().len(), 1);
}

#[tokio::test]
async fn intermittent_write_failures_never_half_apply_a_process() {
    let (failing, engine) = setup().await;
    let exec = engine.executor();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    // Every third write fails; the client retries what failed.
    failing.set_plan(FailPlan::every_nth(
        OpSet::WRITES,
        3,
        0,
        ErrorKind::Unavailable,
    ));
    let mut done = 0;
    for i in 0..10 {
        let mut v = Vars::new();
        v.insert("pid".into(), json!(format!("w{i}")));
        let p = loop {
            match exec.proc().start("m1", v.clone()).await {
                Ok(p) => break p,
                Err(EngineError::Commit { .. }) => continue,
                Err(e) => panic!("{e}"),
            }
        };
        let m = loop {
            let m = irq(&mut rx).await;
            if m.pid == p.pid {
                break m;
            }
        };
        loop {
            match exec.act().complete(&p.pid, &m.tid, Vars::new()).await {
                Ok(()) => break,
                Err(EngineError::Commit { .. }) => continue,
                Err(e) => panic!("{e}"),
            }
        }
        let info = exec.proc().get(&p.pid).await.unwrap();
        assert_eq!(info.state, TaskState::Completed, "{}", p.pid);
        assert_eq!(info.outputs.get("done"), Some(&json!(true)));
        done += 1;
    }
    assert_eq!(done, 10);
    assert!(failing.failures() > 0, "the plan did fail writes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subflow_return_that_failed_on_a_store_error_is_retried_by_housekeeping() {
    let (failing, engine) = setup().await;
    let exec = engine.executor();
    exec.model().deploy_yaml(
        "id: parent\nver: '1'\nsteps:\n  - id: call\n    uses: acts.core.subflow\n    params: { to: m1 }\n  - id: after\n    uses: acts.transform.set\n    params: { returned: true }\n",
    )
    .await
    .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let mut v = Vars::new();
    v.insert("pid".into(), json!("parent1"));
    exec.proc().start("parent", v).await.unwrap();
    let child_irq = irq(&mut rx).await;
    assert_ne!(child_irq.pid, "parent1");
    // The child's own commit (with the outbox record) succeeds; the
    // parent's transition that applies the record fails.
    failing.set_plan(FailPlan::after(OpSet::WRITES, 1, ErrorKind::Unavailable));
    exec.act()
        .complete(&child_irq.pid, &child_irq.tid, Vars::new())
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), async {
        while failing.failures() == 0 || !engine.runtime().is_idle() {
            // Not a spin: the waited-for work gets the cores.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the return was tried (hang guard)");
    failing.heal();
    let parent = exec.proc().get("parent1").await.unwrap();
    assert_eq!(parent.state, TaskState::Running, "not returned yet");
    // No restart: the next housekeeping pass applies the record.
    engine.runtime().housekeeping().await;
    tokio::time::timeout(Duration::from_secs(60), async {
        while !engine.runtime().is_idle() {
            // Not a spin: the waited-for work gets the cores.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("idle (hang guard)");
    let parent = exec.proc().get("parent1").await.unwrap();
    assert_eq!(parent.state, TaskState::Completed);
    assert_eq!(parent.outputs.get("returned"), Some(&json!(true)));
    engine.close().await;
}

/// A subflow child whose first load fails on a store fault starts once the
/// store answers again (the housekeeping tick). The simulator's seeds 0,
/// 22 and 40 are the regressions for the bugs behind this (they fail
/// without the fixes; this scenario recovers through either path).
#[tokio::test]
async fn a_subflow_child_whose_first_load_fails_starts_once_the_store_heals() {
    let (failing, clock, engine) = clocked().await;
    let exec = engine.executor();
    exec.model().deploy_yaml("id: child\nver: '1'\nsteps:\n  - id: c1\n    uses: acts.transform.set\n    params: { from_child: 1 }\n")
        .await
        .expect("child deploys");
    exec.model().deploy_yaml("id: parent\nver: '1'\nsteps:\n  - id: call\n    uses: acts.core.subflow\n    params: { to: child }\n  - id: after\n    uses: acts.transform.set\n    params: { done: true }\n")
        .await
        .expect("parent deploys");
    // Reads fail: the parent's transition (writes only) commits and asks
    // for its child, whose load then fails.
    failing.set_plan(fail(OpSet::READS));
    let pid = exec
        .proc()
        .start("parent", Vars::new())
        .await
        .expect("the parent starts")
        .pid;
    wait_idle(&engine).await;
    assert!(failing.failures() > 0, "the child's load failed");
    failing.heal();
    assert_eq!(
        exec.proc().get(&pid).await.expect("readable").state,
        TaskState::Running,
        "the parent waits for its child"
    );
    // The next housekeeping tick starts the child; the parent completes.
    clock.advance(Duration::from_secs(20));
    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            wait_idle(&engine).await;
            if exec.proc().get(&pid).await.expect("readable").state == TaskState::Completed {
                return;
            }
            // Not a spin: the waited-for work gets the cores.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the parent completes after the child ran (hang guard)");
    engine.close().await;
}

async fn wait_idle(engine: &Engine) {
    tokio::time::timeout(Duration::from_secs(60), async {
        while !engine.runtime().is_idle() {
            // Not a spin: the waited-for work gets the cores.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the engine settles (hang guard)");
}

/// A timeout whose tick fails on a store fault fires once the store
/// answers again (the housekeeping tick retries it). The simulator's seed
/// 113 is the regression for the lost-timer bug found there.
#[tokio::test]
async fn a_timeout_whose_tick_fails_fires_once_the_store_heals() {
    let (failing, clock, engine) = clocked().await;
    let exec = engine.executor();
    exec.model().deploy_yaml("id: t\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.core.irq\n    params: { key: k }\n    timeouts:\n      - id: t1\n        if: $cost_in('1h')\n        uses: acts.core.action\n        params: { action: abort }\n")
        .await
        .expect("deploys");
    let pid = exec
        .proc()
        .start("t", Vars::new())
        .await
        .expect("starts")
        .pid;
    wait_idle(&engine).await;
    // The timeout is due while the store cannot be read: its tick fails.
    // (Out of memory, so the tick must read it.)
    assert!(engine.runtime().cache().evict(&pid));
    failing.set_plan(fail(OpSet::READS));
    clock.advance(Duration::from_secs(2 * 3600));
    wait_idle(&engine).await;
    assert!(failing.failures() > 0, "the tick's read failed");
    failing.heal();
    assert_eq!(
        exec.proc().get(&pid).await.expect("readable").state,
        TaskState::Running,
        "the tick failed: nothing happened yet"
    );
    // The next housekeeping tick retries it: the timeout aborts the process.
    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            clock.advance(Duration::from_secs(20));
            wait_idle(&engine).await;
            if exec.proc().get(&pid).await.expect("readable").state == TaskState::Aborted {
                return;
            }
            // Not a spin: the waited-for work gets the cores.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the timeout fires after the store heals (hang guard)");
    engine.close().await;
}

/// An engine on a failing store with a manual clock, not resuming at start.
async fn clocked() -> (
    Arc<FailingStore<MemoryStore>>,
    acts_core::time::ManualClock,
    Engine,
) {
    let failing = Arc::new(FailingStore::new(MemoryStore::new()));
    let clock = acts_core::time::ManualClock::new(1_000_000);
    let engine = Engine::builder()
        .store(failing.clone() as Arc<dyn KvStore>)
        .clock(Arc::new(clock.clone()))
        .resume_on_start(false)
        .start()
        .await
        .expect("engine starts");
    (failing, clock, engine)
}
