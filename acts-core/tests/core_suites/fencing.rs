//! Fenced ownership of a shared store: one node at a time owns it by
//! lease; another takes it over only once the lease has expired (or was
//! handed over by a clean close), by raising the epoch; from then on the
//! store refuses every write of the old owner — even one already on its
//! way to the store when the takeover happened (held in the testkit's
//! gated store) — and the old owner steps down. Runs on every backend
//! (`ACTS_TEST_STORE`): two engines share one store.

use crate::common;

use acts_testkit::models::ASKING as ASK;
use std::sync::Arc;
use std::time::Duration;

use acts_core::engine::{ChannelOptions, Engine, EngineConfig, EngineError, LeaseConfig};
use acts_core::model::Vars;
use acts_core::scheduler::TaskState;
use acts_core::time::ManualClock;
use acts_store::KvStore;
use acts_testkit::{GateKind, GatedStore};
use common::{irq_created, recv_where, store, vars, waiting};
use serde_json::json;

const TTL: Duration = Duration::from_secs(5);

/// Node `node` on `kv`: a 5 s lease, renewed only when the test says so
/// (a node the test "freezes" renews nothing).
async fn node(
    kv: Arc<dyn KvStore>,
    clock: &ManualClock,
    name: &str,
) -> Result<Engine, EngineError> {
    Engine::builder()
        .store(kv)
        .clock(Arc::new(clock.clone()))
        .config({
            let mut v = EngineConfig::default();
            v.lease = Some({
                let mut v = LeaseConfig::new(name);
                v.ttl = TTL;
                v.background_renewal = false;
                v
            });
            v
        })
        .start()
        .await
}

/// Deploys the model and starts `pid`, which waits in an interrupt.
async fn waiting_process(engine: &Engine, pid: &str) {
    let exec = engine.executor();
    exec.model().deploy_yaml(ASK).await.expect("deploys");
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    exec.proc()
        .start("asking", vars(json!({ "pid": pid })))
        .await
        .expect("starts");
    recv_where(&mut rx, |m| m.pid == pid && irq_created(m)).await;
}

#[tokio::test]
async fn a_node_that_lost_its_lease_can_apply_nothing_and_steps_down() {
    let kv = store().await;
    let clock = ManualClock::new(1_000_000);
    let a = node(kv.clone(), &clock, "a")
        .await
        .expect("a takes the store");
    waiting_process(&a, "p").await;
    let lease = a.storage().lease().await.unwrap().expect("a lease");
    assert_eq!((lease.owner.as_str(), lease.epoch), ("a", 1));

    // While a's lease runs, b may not take the store.
    clock.advance(Duration::from_secs(4));
    match node(kv.clone(), &clock, "b").await {
        Err(e @ EngineError::LeaseHeld { .. }) => {
            assert!(e.to_string().contains("for another 1.0 s"), "{e}");
            let EngineError::LeaseHeld {
                owner,
                epoch,
                until,
                ..
            } = e
            else {
                unreachable!("matched above");
            };
            assert_eq!((owner.as_str(), epoch, until), ("a", 1, 1_005_000));
        }
        other => panic!("b started while a's lease runs: {:?}", other.err()),
    }

    // a freezes (renews nothing); past its lease b takes over.
    clock.advance(Duration::from_secs(2));
    let b = node(kv.clone(), &clock, "b").await.expect("b takes over");
    assert_eq!(b.storage().lease().await.unwrap().unwrap().epoch, 2);

    // a wakes up: whatever it tries is refused, and it has stepped down.
    let tid = waiting(&a.executor(), "p").await.pop().expect("a's view");
    let e = a
        .executor()
        .act()
        .complete("p", &tid, Vars::new())
        .await
        .unwrap_err();
    assert!(matches!(e, EngineError::Fenced(_)), "{e}");
    assert!(e.to_string().contains("another node took it over"), "{e}");
    assert!(matches!(
        a.executor()
            .proc()
            .start("asking", vars(json!({ "pid": "late" })))
            .await,
        Err(EngineError::Fenced(_))
    ));
    assert!(matches!(
        a.storage().renew_lease().await,
        Err(EngineError::Fenced(_))
    ));

    // Nothing of it was applied: b finds p waiting, and no 'late'.
    let exec = b.executor();
    assert_eq!(waiting(&exec, "p").await, std::slice::from_ref(&tid));
    assert!(matches!(
        exec.proc().get("late").await,
        Err(EngineError::ProcessNotFound(_))
    ));
    exec.act().complete("p", &tid, Vars::new()).await.unwrap();
    assert_eq!(
        exec.proc().get("p").await.unwrap().state,
        TaskState::Completed
    );
    // a's close hands nothing over: the lease stays b's.
    a.close().await;
    let lease = b.storage().lease().await.unwrap().unwrap();
    assert_eq!((lease.owner.as_str(), lease.epoch), ("b", 2));
    b.close().await;
}

#[tokio::test]
async fn a_write_on_its_way_when_the_store_was_taken_is_refused() {
    let kv = store().await;
    let clock = ManualClock::new(1_000_000);
    let gated = Arc::new(GatedStore::from_arc(Arc::new(kv.clone())));
    let a = node(gated.clone(), &clock, "a").await.unwrap();
    waiting_process(&a, "p").await;
    let tid = waiting(&a.executor(), "p").await.pop().unwrap();
    // a's answer reaches the store only after b has taken it.
    gated.arm(GateKind::Write);
    let answer = {
        let exec = a.executor();
        let tid = tid.clone();
        tokio::spawn(async move { exec.act().complete("p", &tid, Vars::new()).await })
    };
    gated.wait_parked(GateKind::Write, 1).await;
    clock.advance(TTL + Duration::from_secs(1));
    let b = node(kv.clone(), &clock, "b").await.expect("b takes over");
    gated.disarm(GateKind::Write);
    let refused = answer.await.expect("the task ends").unwrap_err();
    assert!(matches!(refused, EngineError::Fenced(_)), "{refused}");
    assert_eq!(waiting(&b.executor(), "p").await, [tid], "not applied");
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn a_clean_close_hands_the_store_over_and_renewal_keeps_it() {
    let kv = store().await;
    let clock = ManualClock::new(1_000_000);
    let a = node(kv.clone(), &clock, "a").await.unwrap();
    // Renewed at 4 s: still a's at 6 s, free at 10 s.
    clock.advance(Duration::from_secs(4));
    a.storage().renew_lease().await.unwrap();
    clock.advance(Duration::from_secs(2));
    assert!(matches!(
        node(kv.clone(), &clock, "b").await,
        Err(EngineError::LeaseHeld { .. })
    ));
    // A clean close hands it over at once.
    a.close().await;
    let b = node(kv.clone(), &clock, "b").await.expect("handed over");
    assert_eq!(b.storage().lease().await.unwrap().unwrap().epoch, 2);
    // The same node may come back to its own lease (a restart).
    b.close().await;
    let b2 = node(kv.clone(), &clock, "b").await.expect("b again");
    assert_eq!(b2.storage().lease().await.unwrap().unwrap().epoch, 3);
    b2.close().await;
}

#[tokio::test]
async fn an_engine_without_a_lease_refuses_a_store_a_node_owns() {
    let kv = store().await;
    let clock = ManualClock::new(1_000_000);
    let a = node(kv.clone(), &clock, "a").await.unwrap();
    let plain = Engine::builder()
        .store(kv.clone())
        .clock(Arc::new(clock.clone()))
        .start()
        .await;
    match plain {
        Err(EngineError::LeaseHeld { owner, .. }) => assert_eq!(owner, "a"),
        other => panic!("an unfenced engine started on a's store: {:?}", other.err()),
    }
    a.close().await;
}
