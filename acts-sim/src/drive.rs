//! Driving one process of a generated workflow to its end on an engine:
//! deploy, start, answer every waiting act as the client decides, move the
//! manual clock when only a timeout can act — tolerating store faults
//! (a failed call is tried again) and stopping early for a planned
//! restart.

use std::sync::Arc;
use std::time::Duration;

use acts_core::engine::{
    ChannelOptions, DeliveryState, Engine, EngineError, MigrationPlan, ProcInfo, TaskInfo,
};
use acts_core::model::Vars;
use acts_core::scheduler::{Action, Message, TaskState};
use acts_core::time::ManualClock;
use acts_store::KvStore;
use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::client::{
    Answer, answer, answer_delay, cancels, clock_moves_in_pause, migrates, pauses, pushes, retries,
    rewinds, sets_vars, terminates,
};
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
        match act_once(sim, spec, seed, &info, &tasks, &mut rounds, trace).await? {
            Step::Acted => {
                acted_count += 1;
                idle_rounds = 0;
            }
            Step::Waiting(tids) => {
                trace.note("clock +2h (only timeouts can act)");
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

/// What the client remembers between rounds of one run.
#[derive(Default)]
struct Rounds {
    /// How many times the client moved the clock on for each act it leaves
    /// to a timeout (a timeout that does not settle its act is answered
    /// after a few; under store faults the tick may have to wait for the
    /// housekeeping retry, which the heal after five idle rounds allows).
    waited: std::collections::HashMap<String, usize>,
    /// The acts whose answer the client already took its time over.
    delayed: std::collections::HashSet<String>,
}

enum Step {
    Acted,
    /// Every waiting act is left to its timeout (these).
    Waiting(Vec<String>),
    Retry,
    Nothing,
}

/// Whether any task of the process recorded `action` in its history.
fn in_history(tasks: &[TaskInfo], action: &str) -> bool {
    tasks
        .iter()
        .any(|x| x.history.iter().any(|e| e.action == action))
}

/// What a call the simulator makes came to: `Ok(Some(step))` to return,
/// `Ok(None)` to go on as without it (refused as the process stands).
fn outcome(
    res: Result<(), EngineError>,
    trace: &mut Trace,
    done: (&str, &str),
) -> Result<Option<Step>, String> {
    match res {
        Ok(()) => {
            trace.done(done.0, done.1);
            Ok(Some(Step::Acted))
        }
        Err(e) if transient(&e) => Ok(Some(Step::Retry)),
        Err(EngineError::Action(refused)) => {
            trace.note(format!("  refused ({refused})"));
            Ok(None)
        }
        Err(e) => Err(format!("{} on {}: {e}", done.1, done.0)),
    }
}

/// Answers the first waiting act the client does not leave to a timeout
/// (after what the operator or the client does first at it: rewind,
/// terminate, migrate, pause, cancel an earlier act, push, set vars).
async fn act_once(
    sim: &Sim,
    spec: &Spec,
    seed: u64,
    info: &ProcInfo,
    tasks: &[TaskInfo],
    rounds: &mut Rounds,
    trace: &mut Trace,
) -> Result<Step, String> {
    let exec = sim.engine.executor();
    let waiting: Vec<&TaskInfo> = tasks
        .iter()
        .filter(|t| t.kind == "act" && t.state == TaskState::Interrupt)
        .collect();
    if waiting.is_empty() {
        return Ok(Step::Nothing);
    }
    let mut left = Vec::new();
    for t in waiting {
        let key = t.key.clone().unwrap_or_default();
        let occurrence = tasks
            .iter()
            .filter(|x| x.kind == "act" && x.key.as_deref() == Some(&key))
            .position(|x| x.tid == t.tid)
            .map_or(1, |i| i + 1);
        // Names the act (what the clock's move in the pause is drawn
        // from: task ids are fresh in every run) and the task (so a
        // restarted run sees this pause was done).
        let reason = format!("sim:{key}#{occurrence} {}", t.tid);
        let paused_here = tasks.iter().any(|x| {
            x.tid == "$"
                && x.history
                    .iter()
                    .any(|e| e.action == "pause" && e.detail.as_deref() == Some(reason.as_str()))
        });
        if let (false, Some(to)) = (
            in_history(tasks, "rewind"),
            rewinds(seed, spec, &key, occurrence),
        ) {
            trace.note(format!("{key}#{occurrence}: rewind to {to}"));
            let mut v = Vars::new();
            v.insert("rewound".into(), json!(true));
            let res = exec.rewind_process(PID, &to, v).await;
            if let Some(step) = outcome(res, trace, ("$", "rewind"))? {
                return Ok(step);
            }
        }
        if terminates(seed, spec, &key, occurrence) {
            trace.note(format!("{key}#{occurrence}: terminate"));
            let res = exec.terminate_process(PID, "sim").await;
            if let Some(step) = outcome(res, trace, ("$", "terminate"))? {
                return Ok(step);
            }
        }
        if migrates(seed, spec, &key, occurrence) && !in_history(tasks, "migrate") {
            trace.note(format!("{key}#{occurrence}: migrate to a new version"));
            match migrate(sim, spec, info).await {
                Ok(true) => {
                    trace.done("$", "migrate");
                    return Ok(Step::Acted);
                }
                Ok(false) => trace.note("  not migrated"),
                Err(e) if transient(&e) => return Ok(Step::Retry),
                Err(e) => return Err(format!("migrate at {key}: {e}")),
            }
        }
        if pauses(seed, spec, &key, occurrence) && !paused_here {
            trace.note(format!("{key}#{occurrence}: pause"));
            let res = exec.pause_process(PID, &reason).await;
            if let Some(step) = outcome(res, trace, ("$", "pause"))? {
                return Ok(step);
            }
        }
        if cancels(seed, spec, &key, occurrence) && !in_history(tasks, "cancel") {
            // Withdraw the latest completed act.
            let done = tasks
                .iter()
                .rev()
                .find(|x| x.kind == "act" && x.state == TaskState::Completed);
            if let Some(d) = done {
                let dkey = d.key.clone().unwrap_or_default();
                trace.note(format!("{key}#{occurrence}: cancel {dkey}"));
                let res = exec.cancel(PID, &d.tid).await;
                if let Some(step) = outcome(res, trace, (&d.tid, "cancel"))? {
                    return Ok(step);
                }
            }
        }
        if pushes(seed, spec, &key, occurrence) {
            let pushed_key = format!("{key}_p");
            let done = tasks
                .iter()
                .any(|x| x.key.as_deref() == Some(pushed_key.as_str()));
            if let (false, Some(step)) = (done, step_of(tasks, t)) {
                trace.note(format!("{key}#{occurrence}: push {pushed_key}"));
                let mut act = Vars::new();
                act.insert("uses".into(), json!("acts.core.irq"));
                act.insert("params".into(), json!({ "key": pushed_key }));
                match exec.push(PID, &step, act).await {
                    Ok(()) => {
                        trace.done(&step, "push");
                        return Ok(Step::Acted);
                    }
                    Err(e) if transient(&e) => return Ok(Step::Retry),
                    // Not possible as the process stands: answer instead.
                    Err(_) => {}
                }
            }
        }
        let set_here = t.history.iter().any(|e| e.action == "set_process_vars");
        if sets_vars(seed, spec, &key, occurrence) && !set_here {
            trace.note(format!("{key}#{occurrence}: set process vars"));
            let mut v = Vars::new();
            v.insert(format!("v_{key}"), json!(occurrence));
            let res = exec.set_process_vars(PID, &t.tid, v).await;
            if let Some(step) = outcome(res, trace, (&t.tid, "set_process_vars"))? {
                return Ok(step);
            }
        }
        let Answer::Act(action, options) = answer(
            seed,
            spec,
            &key,
            occurrence,
            rounds.waited.get(&t.tid).is_some_and(|n| *n > 6),
        ) else {
            left.push(t.tid.clone());
            continue;
        };
        let delay = answer_delay(seed, spec, &key, occurrence);
        // Once per act in a run: an answer that failed on the store is
        // tried again at once.
        if !delay.is_zero() && rounds.delayed.insert(t.tid.clone()) {
            // The client takes its time: what falls due meanwhile (a
            // timeout) acts first, and the answer may find the act gone.
            trace.note(format!("clock +{} min", delay.as_secs() / 60));
            sim.clock.advance(delay);
            settle(&sim.engine).await?;
        }
        trace.note(format!("{key}#{occurrence}: {}", action.as_str()));
        return match exec.act(PID, &t.tid, action, options).await {
            Ok(()) => {
                trace.done(&t.tid, action.as_str());
                Ok(Step::Acted)
            }
            Err(e) if transient(&e) => Ok(Step::Retry),
            Err(EngineError::Action(refused)) => {
                // Not possible as the process stands (e.g. a back to a
                // step that did not run): complete it instead.
                trace.note(format!("  refused ({refused}); complete instead"));
                match exec.act(PID, &t.tid, Action::Complete, Vars::new()).await {
                    Ok(()) => {
                        trace.done(&t.tid, Action::Complete.as_str());
                        Ok(Step::Acted)
                    }
                    Err(EngineError::Action(_)) => Ok(Step::Acted),
                    Err(e) if transient(&e) => Ok(Step::Retry),
                    Err(e) => Err(format!("complete {key}: {e}")),
                }
            }
            Err(e) => Err(format!("{} {key}: {e}", action.as_str())),
        };
    }
    Ok(Step::Waiting(left))
}

/// Deploys the next version of the model and moves the process onto it;
/// whether it moved.
async fn migrate(sim: &Sim, spec: &Spec, info: &ProcInfo) -> Result<bool, EngineError> {
    let exec = sim.engine.executor();
    let next = exec.deploy_yaml(&spec.model_as_version("2")).await?;
    if next.revision == info.model_rev {
        return Ok(false);
    }
    let mut vars = Vars::new();
    vars.insert("migrated".into(), json!(true));
    let plan = MigrationPlan {
        model: "main".into(),
        from: info.model_rev,
        to: next.revision,
        vars,
        ..MigrationPlan::default()
    };
    let report = exec.migrate(&plan, false).await?;
    Ok(report
        .processes
        .iter()
        .any(|p| p.pid == PID && p.outcome == "migrated"))
}

/// The task id of the step that holds act `t` (its nearest step ancestor).
fn step_of(tasks: &[TaskInfo], t: &TaskInfo) -> Option<String> {
    let mut parent = t.parent.clone();
    while let Some(p) = parent {
        let task = tasks.iter().find(|x| x.tid == p)?;
        if task.kind == "step" {
            return Some(task.tid.clone());
        }
        parent = task.parent.clone();
    }
    None
}
