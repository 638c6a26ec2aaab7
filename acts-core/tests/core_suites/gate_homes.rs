//! The gate protocol between engines (`kernel/gates/courier.rs`) when a call is
//! lost: a task's end that never reaches its key's home (its node died
//! between its commit and the call) does not hold the slot for good —
//! the home asks its slots' holders again now and then, hears `gone`,
//! and lets the next waiter run. (Real time: the home asks every 10 s.)

use crate::common;
use common::*;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use acts_core::engine::{ChannelOptions, Engine, EngineConfig, GateCourier, GateReply, GateRoute};
use acts_core::time::ManualClock;
use acts_testkit::models::ONE_DESK as DESK;
use serde_json::{Value, json};

/// Carries every call to the engine itself, but loses the first `end`;
/// counts the `gone` answers the home hears.
#[derive(Default)]
struct LosesAnEnd {
    engine: OnceLock<Engine>,
    lost: AtomicUsize,
    gone: Arc<AtomicUsize>,
}

impl LosesAnEnd {
    fn call(self: &Arc<Self>, call: Value) -> GateReply {
        let me = self.clone();
        Box::pin(async move {
            if call["op"] == "end" && me.lost.fetch_add(1, Ordering::SeqCst) == 0 {
                return Ok(json!({}));
            }
            let engine = me.engine.get().cloned().ok_or("the engine is starting")?;
            let answer = engine
                .runtime()
                .gate_call(call)
                .await
                .map_err(|e| e.to_string())?;
            if answer["task"] == "gone" {
                me.gone.fetch_add(1, Ordering::SeqCst);
            }
            Ok(answer)
        })
    }
}

struct Route(Arc<LosesAnEnd>);

impl GateRoute for Route {
    fn to_key_home(&self, _key: &str, call: Value) -> GateReply {
        self.0.call(call)
    }
    fn to_process(&self, _pid: &str, call: Value) -> GateReply {
        self.0.call(call)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_end_frees_its_slot_when_the_home_asks_its_holders_again() {
    let courier = Arc::new(LosesAnEnd::default());
    let mut config = EngineConfig::default();
    config.gate_courier = Some(GateCourier::new(Arc::new(Route(courier.clone()))));
    let clock = ManualClock::new(1_000_000);
    let engine = Engine::builder()
        .store(store().await)
        .clock(Arc::new(clock.clone()))
        .config(config)
        .start()
        .await
        .expect("engine starts");
    let _ = courier.engine.set(engine.clone());
    let exec = engine.executor();
    exec.model().deploy_yaml(DESK).await.expect("deploys");
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let a = exec
        .proc()
        .start("desk", vars(json!({})))
        .await
        .expect("a")
        .pid;
    let a_irq = recv_where(&mut rx, |m| irq_created(m) && m.pid == a).await;
    let b = exec
        .proc()
        .start("desk", vars(json!({})))
        .await
        .expect("b")
        .pid;
    exec.act()
        .complete(&a, &a_irq.tid, Default::default())
        .await
        .expect("answered");
    // a's end is lost on its way; b runs once the home hears a is gone.
    let b_irq = recv_where(&mut rx, |m| irq_created(m) && m.pid == b).await;
    assert_eq!(
        courier.lost.load(Ordering::SeqCst),
        1,
        "the first end was lost"
    );
    assert!(
        courier.gone.load(Ordering::SeqCst) >= 1,
        "the home heard `gone`"
    );
    exec.act()
        .complete(&b, &b_irq.tid, Default::default())
        .await
        .expect("answered");
    settle(&engine).await;
    let busy: Vec<_> = engine
        .runtime()
        .gate_keys()
        .into_iter()
        .filter(|k| k.holders > 0 || k.waiting > 0)
        .collect();
    assert!(busy.is_empty(), "{busy:?}");
    engine.close().await;
}
