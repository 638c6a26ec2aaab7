//! One simulated run's engine ([`Sim`]: its store, manual clock and
//! durable client), what the run did ([`Trace`]), and how the simulator
//! waits for the engine and rides out store faults ([`retry`],
//! [`settle`]).
//!
//! May use: acts-core and the store contract; nothing else of the
//! simulator.

use std::sync::Arc;
use std::time::Duration;

use acts_core::engine::{ChannelOptions, DeliveryState, Engine, EngineError};
use acts_core::scheduler::Message;
use acts_core::time::ManualClock;
use acts_store::KvStore;
use tokio::sync::mpsc::UnboundedReceiver;

/// The simulated process's id.
pub const PID: &str = "p1";

/// How long the simulator waits for the engine to settle (a hang guard:
/// the outcome never depends on it).
const GUARD: Duration = Duration::from_secs(20);

/// What happened, for a failing seed's report, and the ledger of what
/// took effect.
#[derive(Debug, Default, Clone)]
pub struct Trace {
    /// What the client, the operator and the faults did, in order.
    pub lines: Vec<String>,
    /// `(task, history action)` of every call of this run that returned
    /// `Ok`: each must be in the task's history exactly once.
    pub done: Vec<(String, String)>,
}

impl Trace {
    /// Adds a line.
    pub fn note(&mut self, line: impl Into<String>) {
        self.lines.push(line.into());
    }

    /// Notes that a call recorded as `action` on task `tid` returned `Ok`.
    pub fn done(&mut self, tid: &str, action: &str) {
        self.done.push((tid.to_owned(), action.to_owned()));
    }
}

/// One simulated run's engine: its store, clock and durable client.
pub struct Sim {
    /// The engine.
    pub engine: Engine,
    /// Its manual clock.
    pub clock: ManualClock,
    /// The durable client channel (never acks).
    pub rx: UnboundedReceiver<Message>,
    /// Its store.
    pub store: Arc<dyn KvStore>,
    /// Whether the rows are checked after every round (no row that
    /// belongs to nothing); off on a store that fails calls.
    pub rows_each_round: bool,
    _channel: acts_core::engine::Channel,
}

impl Sim {
    /// An engine on `store` with a durable client that reconnected (what
    /// it is still owed comes first).
    /// An engine that cannot start on a failing store is tried again (a
    /// few times, then after `heal`).
    pub async fn open(
        store: Arc<dyn KvStore>,
        now: i64,
        heal: &dyn Fn() -> bool,
    ) -> Result<Self, String> {
        let clock = ManualClock::new(now);
        let mut tries = 0;
        let engine = loop {
            let started = Engine::builder()
                .store(store.clone())
                .clock(Arc::new(clock.clone()))
                .resume_on_start(false)
                .start()
                .await;
            match started {
                Ok(e) => break e,
                Err(e) if transient(&e) && tries < 20 => {
                    tries += 1;
                    if tries == 10 {
                        heal();
                    }
                }
                Err(e) => return Err(format!("the engine does not start: {e}")),
            }
        };
        let channel = retry(|| {
            engine
                .channels()
                .durable("client", ChannelOptions::default())
        })
        .await
        .map_err(|e| format!("the client's channel: {e}"))?;
        let rx = channel.subscribe();
        retry(|| channel.resend_pending())
            .await
            .map_err(|e| format!("re-send: {e}"))?;
        // What ran out of tries while nobody listened (the client never
        // acks, and waiting for a timeout moves the clock by hours) is a
        // dead letter: an operator redelivers it, as after an outage.
        let exec = engine.executor();
        let dead = retry(|| exec.msg().list(Some("client"), Some(DeliveryState::Failed)))
            .await
            .map_err(|e| format!("dead letters: {e}"))?;
        for d in dead {
            retry(|| exec.msg().redeliver("client", &d.msg_id))
                .await
                .map_err(|e| format!("redeliver: {e}"))?;
        }
        Ok(Self {
            engine,
            clock,
            rx,
            store,
            rows_each_round: true,
            _channel: channel,
        })
    }

    /// Everything the client heard so far.
    pub fn heard(&mut self) -> Vec<Message> {
        let mut out = Vec::new();
        while let Ok(m) = self.rx.try_recv() {
            out.push(m);
        }
        out
    }
}

/// Calls `f` until it does not fail on the store (a store fault is
/// transient here: the plan heals), at most 200 times.
pub async fn retry<T, F, Fut>(mut f: F) -> Result<T, EngineError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, EngineError>>,
{
    let mut tries = 0;
    loop {
        match f().await {
            Err(e) if transient(&e) && tries < 200 => {
                tries += 1;
                tokio::task::yield_now().await;
            }
            other => return other,
        }
    }
}

/// Whether `e` comes from the store being unable to answer (what the fault
/// plan injects), not from the call itself.
pub fn transient(e: &EngineError) -> bool {
    matches!(
        e,
        EngineError::Store(_) | EngineError::Commit { .. } | EngineError::Busy { .. }
    )
}

/// Waits until the engine has nothing in progress. On the single-threaded
/// runtime the engine's timer task runs only when the simulator yields:
/// it yields a few times first, so a timer the clock made due (the
/// housekeeping tick, which `is_idle` does not wait for) gets to run.
pub async fn settle(engine: &Engine) -> Result<(), String> {
    for _ in 0..16 {
        tokio::task::yield_now().await;
    }
    tokio::time::timeout(GUARD, async {
        while !engine.runtime().is_idle() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .map_err(|_| "the engine did not settle (hang guard)".to_owned())
}
