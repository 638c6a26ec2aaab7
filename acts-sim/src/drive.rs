//! Driving one process of a generated workflow to its end on an engine:
//! deploy, start, answer every waiting act as the client decides, move the
//! manual clock when only a timeout can act — tolerating store faults
//! (a failed call is tried again) and stopping early for a planned
//! restart.

use std::sync::Arc;
use std::time::Duration;

use acts_core::engine::{ChannelOptions, DeliveryState, Engine, EngineError, ProcInfo};
use acts_core::model::Vars;
use acts_core::scheduler::{Message, TaskState};
use acts_core::time::{Clock, ManualClock};
use acts_store::KvStore;
use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::client::{clock_moves_in_pause, retries};
use crate::turn::{Rounds, Step, act_once};
use crate::workflow::{CHILD, Spec};

/// The simulated process's id.
pub const PID: &str = "p1";

/// How long the simulator waits for the engine to settle (a hang guard:
/// the outcome never depends on it).
const GUARD: Duration = Duration::from_secs(20);

/// Most rounds of the client in one run (a generated workflow ends well
/// within it: `back` is used once per act).
const MAX_ROUNDS: usize = 400;

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

/// How a drive ended.
pub enum Driven {
    /// The process ended.
    Ended(Box<ProcInfo>),
    /// The planned restart point was reached.
    Restart,
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
        let channel = retry(|| engine.durable_channel("client", ChannelOptions::default()))
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
        let dead = retry(|| exec.deliveries(Some("client"), Some(DeliveryState::Failed)))
            .await
            .map_err(|e| format!("dead letters: {e}"))?;
        for d in dead {
            retry(|| exec.redeliver("client", &d.msg_id))
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
        while !engine.is_idle() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .map_err(|_| "the engine did not settle (hang guard)".to_owned())
}

/// Drives [`PID`] on `sim` until it ends, or until `restart_after` client
/// actions were applied. `heal` is called when the run is stuck (a store
/// outage may have stopped it); it returns whether there was anything to
/// heal.
pub async fn drive(
    sim: &Sim,
    spec: &Spec,
    seed: u64,
    trace: &mut Trace,
    restart_after: Option<usize>,
    heal: &dyn Fn() -> bool,
) -> Result<Driven, String> {
    let engine = &sim.engine;
    let exec = engine.executor();
    let mut resumed = false;
    let mut deployed = false;
    let mut started = false;
    let mut acted_count = 0;
    let mut idle_rounds = 0;
    let mut rounds = Rounds::default();
    let mut moved_in_pause = std::collections::HashSet::new();
    for _ in 0..MAX_ROUNDS {
        settle(engine).await?;
        let doubles = engine.instance_faults();
        if !doubles.is_empty() {
            return Err(format!(
                "one instance per pid broken: {}",
                doubles.join("; ")
            ));
        }
        if sim.rows_each_round {
            crate::rows::orphans(&sim.store)
                .await
                .map_err(|e| format!("after a round: {e}"))?;
        }
        if !resumed {
            resumed = engine.resume().await.is_ok();
        }
        if !deployed {
            let child = !spec.uses_subflow() || exec.deploy_yaml(CHILD).await.is_ok();
            deployed = child && exec.deploy_yaml(&spec.model()).await.is_ok();
            if !deployed {
                stuck(&mut idle_rounds, heal, "the deploy keeps failing")?;
                continue;
            }
        }
        if !started {
            match exec.process(PID).await {
                Ok(_) => started = true,
                Err(EngineError::ProcessNotFound(_)) => {
                    let mut v = Vars::new();
                    v.insert("pid".into(), json!(PID));
                    match exec.start("main", v).await {
                        Ok(_) | Err(EngineError::Duplicated(_)) => started = true,
                        Err(e) if transient(&e) => {}
                        Err(e) => return Err(format!("start: {e}")),
                    }
                }
                Err(e) if transient(&e) => {}
                Err(e) => return Err(format!("reading the process: {e}")),
            }
            if !started {
                stuck(&mut idle_rounds, heal, "the start keeps failing")?;
            }
            continue;
        }
        let (info, tasks) = match (exec.process(PID).await, exec.tasks(PID).await) {
            (Ok(i), Ok(t)) => (i, t),
            (Err(e), _) | (_, Err(e)) if transient(&e) => {
                stuck(&mut idle_rounds, heal, "the process cannot be read")?;
                continue;
            }
            (Err(e), _) | (_, Err(e)) => return Err(format!("reading the process: {e}")),
        };
        let retried = || {
            tasks
                .iter()
                .any(|x| x.tid == "$" && x.history.iter().any(|e| e.action == "retry"))
        };
        if info.state == TaskState::Error && retries(seed, spec) && !retried() {
            // An operator retries the failed process once.
            trace.note("retry the process");
            let mut v = Vars::new();
            v.insert("retried".into(), json!(true));
            match exec.retry_process(PID, None, v).await {
                Ok(()) => {
                    trace.done("$", "retry");
                    idle_rounds = 0;
                    continue;
                }
                Err(e) if transient(&e) => {
                    stuck(&mut idle_rounds, heal, "a retry keeps failing")?;
                    continue;
                }
                // Not retryable as it stands (e.g. no step to retry).
                Err(EngineError::Action(_)) => trace.note("  refused"),
                Err(e) => return Err(format!("retry: {e}")),
            }
        }
        if info.state.is_terminal() {
            return Ok(Driven::Ended(Box::new(info)));
        }
        if restart_after.is_some_and(|n| acted_count >= n) {
            return Ok(Driven::Restart);
        }
        if let Some(pause) = &info.paused {
            // The clock may move on while the process is paused (once per
            // pause in a run); the operator resumes it the round after.
            let act = pause.reason.split(' ').next().unwrap_or_default();
            if clock_moves_in_pause(seed, act) && moved_in_pause.insert(pause.reason.clone()) {
                trace.note("clock +2h (paused)");
                sim.clock.advance(Duration::from_secs(2 * 3600));
                settle(engine).await?;
            }
            trace.note("resume");
            match exec.unpause_process(PID).await {
                Ok(()) => {
                    trace.done("$", "resume");
                    acted_count += 1;
                    idle_rounds = 0;
                }
                Err(e) if transient(&e) => stuck(&mut idle_rounds, heal, "a resume keeps failing")?,
                Err(e) => return Err(format!("resume: {e}")),
            }
            continue;
        }
        if engine.stats().stalled > 0 {
            // A transition of the engine's own (a timer's tick, a
            // continuation) failed on the store and waits for its retry:
            // the client waits too, so an outage never lets an answer
            // overtake what the fault-free run did first.
            trace.note("wait: a stalled transition is retried");
            engine.housekeeping().await;
            stuck(&mut idle_rounds, heal, "a stalled transition keeps failing")?;
            continue;
        }
        match act_once(sim, spec, seed, &info, &tasks, &mut rounds, trace).await? {
            Step::Acted => {
                acted_count += 1;
                idle_rounds = 0;
            }
            Step::Waiting(tids) => {
                trace.note(format!(
                    "clock {} +2h (only timeouts can act)",
                    sim.clock.now_millis()
                ));
                sim.clock.advance(Duration::from_secs(2 * 3600));
                for tid in tids {
                    *rounds.waited.entry(tid).or_default() += 1;
                }
                stuck(&mut idle_rounds, heal, "only timeouts can act")?;
            }
            Step::Retry => stuck(&mut idle_rounds, heal, "an answer keeps failing")?,
            Step::Nothing => {
                // Nothing waits for the client: the engine is working (a
                // subflow child, a continuation) or it is stuck.
                sim.clock.advance(Duration::from_secs(60));
                let others = match exec.processes(None, None).await {
                    Ok(all) => all
                        .iter()
                        .map(|p| format!("{} {}", p.pid, p.state))
                        .collect::<Vec<_>>()
                        .join(", "),
                    Err(e) => format!("(cannot list: {e})"),
                };
                let open: Vec<String> = tasks
                    .iter()
                    .filter(|t| !t.state.is_terminal())
                    .map(|t| format!("{}:{} {}", t.kind, t.nid, t.state))
                    .collect();
                stuck(
                    &mut idle_rounds,
                    heal,
                    &format!(
                        "process {PID} is {} and nothing waits for the client (open tasks: {}; processes: {others})",
                        info.state,
                        open.join(", ")
                    ),
                )?;
            }
        }
    }
    Err(format!(
        "the process did not end within {MAX_ROUNDS} rounds"
    ))
}

/// Counts a round without progress: after a few, the store is healed; a
/// run that stays stuck with nothing to heal is a failure.
fn stuck(rounds: &mut usize, heal: &dyn Fn() -> bool, why: &str) -> Result<(), String> {
    *rounds += 1;
    if (*rounds).is_multiple_of(5) && !heal() && *rounds >= 20 {
        return Err(format!("stuck: {why}"));
    }
    Ok(())
}
