//! Durable deliveries, triggers and snapshots, on a manual clock: ack,
//! re-send to the owning channel only, retry limit then dead-letter,
//! restart with unacked deliveries, sweep only after settlement, manual /
//! hook / cron triggers (including a schedule missed across a restart),
//! and snapshot sealing with TTL. The housekeeping pass is run explicitly
//! (its timer is set far away), so every step is deterministic.

use crate::common;
use common::*;

use std::sync::Arc;
use std::time::Duration;

use acts_core::durable::Collection;
use acts_core::engine::testing::ProcRow;
use acts_core::engine::{
    ChannelOptions, DeliveryState, Engine, EngineConfig, EngineError, SealOptions,
};
use acts_core::model::Vars;
use acts_core::scheduler::TaskState;
use acts_core::time::{Clock, ManualClock};
use acts_store::KvStore;
use serde_json::{Value, json};

const T0: i64 = 1_700_000_000_000;
const WAITS: &str =
    "id: m1\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.core.irq\n    params: { key: a }\n";

fn config() -> EngineConfig {
    {
        let mut v = EngineConfig::default();
        v.tick = Duration::from_secs(365 * 86_400);
        v.delivery_retry = Duration::from_secs(30);
        v.delivery_max_tries = 3;
        v
    }
}

async fn engine(kv: Arc<dyn KvStore>, clock: &ManualClock, cfg: EngineConfig) -> Engine {
    Engine::builder()
        .store(kv)
        .clock(Arc::new(clock.clone()))
        .config(cfg)
        .start()
        .await
        .expect("engine starts")
}

fn acts_only() -> ChannelOptions {
    ChannelOptions::default()
        .with_type("act")
        .with_state("created")
}

#[tokio::test]
async fn a_durable_delivery_is_pending_until_acked() {
    let clock = ManualClock::new(T0);
    let e = engine(store().await, &clock, config()).await;
    e.executor().model().deploy_yaml(WAITS).await.unwrap();
    let ch = e.channels().durable("c1", acts_only()).await.unwrap();
    let mut rx = ch.subscribe();
    e.executor().proc().start("m1", Vars::new()).await.unwrap();
    let m = recv(&mut rx).await;
    let pending = e
        .executor()
        .msg()
        .list(Some("c1"), Some(DeliveryState::Pending))
        .await
        .unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        (pending[0].msg_id.as_str(), pending[0].tries),
        (m.id.as_str(), 1)
    );
    ch.ack(&m.id).await.unwrap();
    let acked = e
        .executor()
        .msg()
        .list(Some("c1"), Some(DeliveryState::Acked))
        .await
        .unwrap();
    assert_eq!(acked.len(), 1);
    assert!(matches!(
        ch.ack("no-such-message").await,
        Err(EngineError::DeliveryNotFound { .. })
    ));
    // A plain channel has nothing to ack.
    let plain = e.channel(ChannelOptions::default());
    assert!(matches!(
        plain.ack(&m.id).await,
        Err(EngineError::Channel(_))
    ));
}

#[tokio::test]
async fn unacked_deliveries_are_re_sent_to_their_own_channel_only_then_fail() {
    let clock = ManualClock::new(T0);
    let e = engine(store().await, &clock, config()).await;
    e.executor().model().deploy_yaml(WAITS).await.unwrap();
    let mine = e
        .channels()
        .durable("mine", acts_only().with_key("a"))
        .await
        .unwrap();
    let other = e
        .channels()
        .durable("other", acts_only().with_key("zzz"))
        .await
        .unwrap();
    let mut rx_mine = mine.subscribe();
    let mut rx_other = other.subscribe();
    e.executor().proc().start("m1", Vars::new()).await.unwrap();
    let first = recv(&mut rx_mine).await;
    // Not due yet: nothing is re-sent.
    e.runtime().housekeeping().await;
    assert!(rx_mine.try_recv().is_err());
    for attempt in 2..=3 {
        clock.advance(Duration::from_secs(31));
        e.runtime().housekeeping().await;
        let again = recv(&mut rx_mine).await;
        assert_eq!(
            again.id, first.id,
            "re-sent with the same id (attempt {attempt})"
        );
    }
    assert!(
        rx_other.try_recv().is_err(),
        "another channel never gets it"
    );
    // Out of tries: the next pass marks it failed (dead-letter), it is
    // not re-sent and not dropped.
    clock.advance(Duration::from_secs(31));
    e.runtime().housekeeping().await;
    assert!(rx_mine.try_recv().is_err());
    let dead = e
        .executor()
        .msg()
        .list(None, Some(DeliveryState::Failed))
        .await
        .unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!((dead[0].channel.as_str(), dead[0].tries), ("mine", 3));
    // An operator gives it another round: sent at once, pending again.
    let exec = e.executor();
    assert!(matches!(
        exec.msg().redeliver("mine", "no-such-message").await,
        Err(EngineError::DeliveryNotFound { .. })
    ));
    exec.msg().redeliver("mine", &first.id).await.unwrap();
    assert_eq!(recv(&mut rx_mine).await.id, first.id);
    let pending = exec
        .msg()
        .list(Some("mine"), Some(DeliveryState::Pending))
        .await
        .unwrap();
    assert_eq!((pending.len(), pending[0].tries), (1, 1));
    // Only a dead letter is redelivered or discarded.
    assert!(matches!(
        exec.msg().discard("mine", &first.id).await,
        Err(EngineError::Channel(_))
    ));
    // Out of tries again, then discarded: gone.
    for _ in 0..3 {
        clock.advance(Duration::from_secs(31));
        e.runtime().housekeeping().await;
    }
    assert_eq!(
        exec.msg()
            .list(None, Some(DeliveryState::Failed))
            .await
            .unwrap()
            .len(),
        1
    );
    exec.msg().discard("mine", &first.id).await.unwrap();
    assert!(
        exec.msg()
            .list(Some("mine"), None)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn unacked_deliveries_survive_a_restart_and_reach_the_reconnected_channel() {
    let kv: Arc<dyn KvStore> = store().await;
    let clock = ManualClock::new(T0);
    let e1 = engine(kv.clone(), &clock, config()).await;
    e1.executor()
        .model().deploy_yaml("id: two\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.core.irq\n    params: { key: a }\n  - id: s2\n    uses: acts.core.irq\n    params: { key: b }\n")
        .await
        .unwrap();
    let ch = e1.channels().durable("app", acts_only()).await.unwrap();
    let mut rx = ch.subscribe();
    let p = e1
        .executor()
        .proc()
        .start("two", Vars::new())
        .await
        .unwrap();
    let a = recv(&mut rx).await;
    e1.close().await;
    drop((ch, rx, e1));
    clock.advance(Duration::from_secs(1));

    // While the client is away, another process starts: its message is
    // recorded for the registered channel.
    let e2 = engine(kv, &clock, config()).await;
    let q = e2
        .executor()
        .proc()
        .start("two", Vars::new())
        .await
        .unwrap();
    let owed = e2
        .executor()
        .msg()
        .list(Some("app"), Some(DeliveryState::Pending))
        .await
        .unwrap();
    assert_eq!(
        owed.len(),
        2,
        "a's request (unacked) and q's (sent while away)"
    );
    // The client reconnects with the same id and gets both, oldest first.
    let ch = e2.channels().durable("app", acts_only()).await.unwrap();
    let mut rx = ch.subscribe();
    assert_eq!(ch.resend_pending().await.unwrap(), 2);
    let got_a = recv(&mut rx).await;
    let got_q = recv(&mut rx).await;
    assert_eq!(got_a.id, a.id, "stable id: the client can de-duplicate");
    assert_eq!(got_q.pid, q.pid);
    ch.ack(&got_q.id).await.unwrap();
    // Answering a's request settles it too (closed: its task ended).
    e2.executor()
        .act()
        .complete(&p.pid, &a.tid, Vars::new())
        .await
        .unwrap();
    assert!(
        e2.executor()
            .msg()
            .list(Some("app"), Some(DeliveryState::Pending))
            .await
            .unwrap()
            .iter()
            .all(|d| d.msg_id != a.id && d.msg_id != got_q.id),
        "a is closed, q acked"
    );
    assert!(e2.channels().remove("app").await.unwrap());
    assert!(
        e2.executor()
            .msg()
            .list(Some("app"), None)
            .await
            .unwrap()
            .is_empty()
    );
}

/// A process that finished with its end message delivered to durable
/// channel `c` (not acked), on an engine keeping finished processes 60 s.
struct Finished {
    kv: Arc<dyn KvStore>,
    clock: ManualClock,
    e: Engine,
    ch: acts_core::engine::Channel,
    pid: String,
    end: acts_core::scheduler::Message,
}

/// An engine whose finished processes are kept 60 s, with WAITS deployed.
async fn retaining_a_minute(kv: &Arc<dyn KvStore>, clock: &ManualClock) -> Engine {
    let cfg = {
        let mut v = config();
        v.retention = Some(Duration::from_secs(60));
        v
    };
    let e = engine(kv.clone(), clock, cfg).await;
    e.executor()
        .model()
        .deploy_yaml(WAITS)
        .await
        .expect("test setup");
    e
}

async fn finished_with_an_unacked_end() -> Finished {
    let kv: Arc<dyn KvStore> = store().await;
    let clock = ManualClock::new(T0);
    let e = retaining_a_minute(&kv, &clock).await;
    // The client hears every end of a process and acks it later.
    let ch = e
        .channels()
        .durable(
            "c",
            ChannelOptions::default()
                .with_type("workflow")
                .with_state("completed"),
        )
        .await
        .expect("test setup");
    let mut ends = ch.subscribe();
    let mut acts = e.channel(acts_only()).subscribe();
    let p = e
        .executor()
        .proc()
        .start("m1", Vars::new())
        .await
        .expect("test setup");
    let irq = recv(&mut acts).await;
    e.executor()
        .act()
        .complete(&p.pid, &irq.tid, Vars::new())
        .await
        .expect("test setup");
    let end = recv(&mut ends).await;
    Finished {
        kv,
        clock,
        e,
        ch,
        pid: p.pid,
        end,
    }
}

#[tokio::test]
async fn finished_processes_are_swept_only_after_their_deliveries_settled() {
    let Finished {
        kv,
        clock,
        e,
        ch,
        pid,
        end: m,
    } = finished_with_an_unacked_end().await;
    clock.advance(Duration::from_secs(120));
    e.runtime().housekeeping().await;
    let procs = Collection::<ProcRow>::new(kv.clone());
    assert!(
        procs.get(&pid).await.unwrap().is_some(),
        "an unacked delivery keeps it"
    );
    ch.ack(&m.id).await.unwrap();
    e.runtime().housekeeping().await;
    assert!(
        procs.get(&pid).await.unwrap().is_none(),
        "settled and old: swept"
    );
    assert!(
        e.executor()
            .msg()
            .list(Some("c"), None)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_process_whose_requests_were_answered_without_an_ack_is_swept() {
    let kv = store().await;
    let clock = ManualClock::new(T0);
    let e = retaining_a_minute(&kv, &clock).await;
    let ch = e.channels().durable("c", acts_only()).await.unwrap();
    let mut rx = ch.subscribe();
    let p = e.executor().proc().start("m1", Vars::new()).await.unwrap();
    let ask = recv(&mut rx).await;
    // Answered, never acked: the request's delivery is closed, nothing is
    // owed, and the finished process goes once it is old.
    e.executor()
        .act()
        .complete(&p.pid, &ask.tid, Vars::new())
        .await
        .unwrap();
    let closed = e
        .executor()
        .msg()
        .list(Some("c"), Some(DeliveryState::Closed))
        .await
        .unwrap();
    assert_eq!(closed.len(), 1);
    clock.advance(Duration::from_secs(120));
    e.runtime().housekeeping().await;
    let procs = Collection::<ProcRow>::new(kv.clone());
    assert!(procs.get(&p.pid).await.unwrap().is_none(), "swept");
    assert!(
        e.executor()
            .msg()
            .list(Some("c"), None)
            .await
            .unwrap()
            .is_empty()
    );
}

const TRIGGERED: &str = r#"
id: trig
ver: "1"
on:
  - { id: go, kind: manual, params: { x: 1 } }
  - { id: paid, kind: hook }
  - { id: every_minute, kind: schedule, schedule: "0 * * * * *" }
steps:
  - id: s1
    uses: acts.transform.code
    params: "return { seen: typeof x === 'undefined' ? null : x }"
"#;

#[tokio::test]
async fn manual_and_hook_triggers_start_the_model() {
    let clock = ManualClock::new(T0);
    let e = engine(store().await, &clock, config()).await;
    let exec = e.executor();
    exec.model().deploy_yaml(TRIGGERED).await.unwrap();
    let p = exec.evt().start("trig:go", Value::Null).await.unwrap();
    assert_eq!(
        p.outputs.get("seen"),
        Some(&json!(1)),
        "the trigger's default params"
    );
    let p = exec.evt().start("trig:go", json!({"x": 2})).await.unwrap();
    assert_eq!(p.outputs.get("seen"), Some(&json!(2)), "the payload wins");
    let started = exec.evt().hook("paid", json!({"x": 5})).await.unwrap();
    assert_eq!(started.len(), 1);
    assert_eq!(started[0].outputs.get("seen"), Some(&json!(5)));
    assert!(
        exec.evt()
            .hook("nobody_listens", Value::Null)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        exec.evt().start("trig:every_minute", Value::Null).await,
        Err(EngineError::Trigger { .. })
    ));
    assert!(matches!(
        exec.evt().start("trig:go", json!([1])).await,
        Err(EngineError::Trigger { .. })
    ));
    assert!(matches!(
        exec.evt().start("trig:nope", Value::Null).await,
        Err(EngineError::TriggerNotFound(id)) if id == "trig:nope"
    ));
}

async fn wait_processes(e: &Engine, n: usize) {
    tokio::time::timeout(Duration::from_secs(60), async {
        while e
            .executor()
            .proc()
            .list(None, None)
            .await
            .expect("listable")
            .len()
            < n
        {
            // Not a spin: the waited-for work gets the cores.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the schedule fired");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_fires_on_the_clock_and_rolls_forward() {
    let clock = ManualClock::new(T0);
    let e = engine(store().await, &clock, config()).await;
    e.executor().model().deploy_yaml(TRIGGERED).await.unwrap();
    let row = |e: &Engine| {
        let exec = e.executor();
        async move {
            exec.evt()
                .list()
                .await
                .unwrap()
                .into_iter()
                .find(|t| t.trigger == "every_minute")
                .unwrap()
        }
    };
    let first = row(&e).await;
    let next = first.next_run.expect("a schedule has a next run");
    assert!(next > T0 && next <= T0 + 60_000);
    assert_eq!(first.last_run, None);
    assert!(
        e.executor()
            .proc()
            .list(None, None)
            .await
            .unwrap()
            .is_empty()
    );
    clock.set(next);
    wait_processes(&e, 1).await;
    tokio::time::timeout(Duration::from_secs(60), async {
        while row(&e).await.last_run.is_none() {
            // Not a spin: the waited-for work gets the cores.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the row rolled forward");
    let after = row(&e).await;
    assert_eq!(after.next_run, Some(next + 60_000));
    assert_eq!(after.last_run, Some(next));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_missed_while_down_fires_once_on_restart() {
    let kv: Arc<dyn KvStore> = store().await;
    let clock = ManualClock::new(T0);
    let e1 = engine(kv.clone(), &clock, config()).await;
    e1.executor().model().deploy_yaml(TRIGGERED).await.unwrap();
    e1.close().await;
    drop(e1);
    // Ten minutes pass with the engine down: ten ticks missed.
    clock.advance(Duration::from_secs(600));
    let e2 = engine(kv, &clock, config()).await;
    wait_processes(&e2, 1).await;
    let row = || async {
        e2.executor()
            .evt()
            .list()
            .await
            .expect("triggers readable")
            .into_iter()
            .find(|t| t.trigger == "every_minute")
            .expect("the schedule row")
    };
    tokio::time::timeout(Duration::from_secs(60), async {
        while row().await.last_run.is_none() {
            // Not a spin: the waited-for work gets the cores.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the row rolled forward");
    let t = row().await;
    assert!(
        t.next_run.is_some_and(|n| n > clock.now_millis()),
        "rolled past now, not tick by tick"
    );
    // Nothing else is due: still one process after the timer settled.
    e2.storage().flush().await.unwrap();
    assert_eq!(
        e2.executor().proc().list(None, None).await.unwrap().len(),
        1
    );
}

#[tokio::test]
async fn snapshots_are_sealed_read_only_and_expire() {
    let clock = ManualClock::new(T0);
    let e = Engine::builder()
        .store(store().await)
        .clock(Arc::new(clock.clone()))
        .config(config())
        .sealed_data(
            "rates",
            SealOptions::per_proc().with_scope(&["region"]).with_ttl(60),
        )
        .start()
        .await
        .unwrap();
    let exec = e.executor();
    exec.model().deploy_yaml(
        "id: fx\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.transform.code\n    params: \"$rates.usd = 99; return { r: $rates.usd }\"\n",
    )
    .await
    .unwrap();
    e.runtime()
        .sealed_data()
        .upsert(
            "rates",
            "eu",
            1,
            json!({"usd": 1.1}).as_object().cloned().unwrap(),
        )
        .unwrap();
    let v = |region: &str| {
        let mut v = Vars::new();
        v.insert("region".into(), json!(region));
        v
    };
    let p = exec.proc().start("fx", v("eu")).await.unwrap();
    assert_eq!(
        p.outputs.get("r"),
        Some(&json!(1.1)),
        "sealed and read-only"
    );
    // No data for the scope: skipped by default.
    let p = exec.proc().start("fx", v("us")).await.unwrap();
    assert_eq!(
        p.state,
        TaskState::Error,
        "$rates is undefined there: {:?}",
        p.err
    );
    // After the TTL the entry is gone.
    clock.advance(Duration::from_secs(61));
    assert!(e.runtime().sealed_data().read("rates", "eu").is_none());
    e.runtime().housekeeping().await;
    assert!(e.runtime().sealed_data().list("rates").is_empty());
}

#[tokio::test]
async fn an_answered_interrupt_is_closed_not_re_sent() {
    let clock = ManualClock::new(T0);
    let e = engine(store().await, &clock, config()).await;
    e.executor()
        .model().deploy_yaml("id: two\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.core.irq\n    params: { key: a }\n  - id: s2\n    uses: acts.core.irq\n    params: { key: b }\n")
        .await
        .unwrap();
    let ch = e.channels().durable("c", acts_only()).await.unwrap();
    let mut rx = ch.subscribe();
    let p = e.executor().proc().start("two", Vars::new()).await.unwrap();
    let a = recv(&mut rx).await;
    // The client answers without acking: the task ended, its request is
    // settled (closed), and only b's request is still owed.
    e.executor()
        .act()
        .complete(&p.pid, &a.tid, Vars::new())
        .await
        .unwrap();
    let b = recv(&mut rx).await;
    let closed = e
        .executor()
        .msg()
        .list(Some("c"), Some(DeliveryState::Closed))
        .await
        .unwrap();
    assert_eq!(
        closed.iter().map(|d| d.msg_id.as_str()).collect::<Vec<_>>(),
        [a.id.as_str()]
    );
    // A late ack of the settled request is fine and writes nothing: it
    // stays closed.
    ch.ack(&a.id).await.unwrap();
    let still = e
        .executor()
        .msg()
        .list(Some("c"), Some(DeliveryState::Closed))
        .await
        .unwrap();
    assert_eq!(still.len(), 1);
    clock.advance(Duration::from_secs(31));
    e.runtime().housekeeping().await;
    let again = recv(&mut rx).await;
    assert_eq!(again.id, b.id, "only the open request is re-sent");
    assert!(rx.try_recv().is_err());
}

#[tokio::test]
async fn a_dead_letter_keeps_its_process_from_the_sweeper_until_it_is_settled() {
    let Finished {
        kv,
        clock,
        e,
        ch,
        pid,
        end,
    } = finished_with_an_unacked_end().await;
    // Never acked: re-sent until out of tries, then dead-lettered.
    for _ in 0..4 {
        clock.advance(Duration::from_secs(31));
        e.runtime().housekeeping().await;
    }
    let dead = e
        .executor()
        .msg()
        .list(Some("c"), Some(DeliveryState::Failed))
        .await
        .unwrap();
    assert_eq!(dead.len(), 1, "dead-lettered");
    clock.advance(Duration::from_secs(3600));
    e.runtime().housekeeping().await;
    let procs = Collection::<ProcRow>::new(kv.clone());
    assert!(
        procs.get(&pid).await.unwrap().is_some(),
        "a dead letter nobody settled keeps its process"
    );
    assert_eq!(
        e.executor()
            .msg()
            .list(Some("c"), Some(DeliveryState::Failed))
            .await
            .unwrap()
            .len(),
        1,
        "and is itself kept"
    );
    // Settling the dead letter (ack) lets the sweeper have it.
    ch.ack(&end.id).await.unwrap();
    e.runtime().housekeeping().await;
    assert!(procs.get(&pid).await.unwrap().is_none(), "settled: swept");
}

#[tokio::test]
async fn finished_processes_are_swept_by_default_after_seven_days() {
    let kv: Arc<dyn KvStore> = store().await;
    let clock = ManualClock::new(T0);
    assert_eq!(
        EngineConfig::default().retention,
        Some(Duration::from_secs(7 * 86_400))
    );
    let e = Engine::builder()
        .store(kv.clone())
        .clock(Arc::new(clock.clone()))
        .start()
        .await
        .unwrap();
    e.executor().model().deploy_yaml(WAITS).await.unwrap();
    let mut acts = e.channel(acts_only()).subscribe();
    let p = e.executor().proc().start("m1", Vars::new()).await.unwrap();
    let irq = recv(&mut acts).await;
    e.executor()
        .act()
        .complete(&p.pid, &irq.tid, Vars::new())
        .await
        .unwrap();
    let procs = Collection::<ProcRow>::new(kv.clone());
    clock.advance(Duration::from_secs(6 * 86_400));
    e.runtime().housekeeping().await;
    assert!(
        procs.get(&p.pid).await.unwrap().is_some(),
        "kept for 7 days"
    );
    clock.advance(Duration::from_secs(86_400 + 1));
    e.runtime().housekeeping().await;
    assert!(procs.get(&p.pid).await.unwrap().is_none(), "then swept");
    e.close().await;
}
