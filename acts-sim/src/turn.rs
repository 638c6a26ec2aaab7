//! One turn of the client at the waiting acts of the process: what the
//! operator or the client does first at an act (rewind, terminate,
//! migrate, pause, cancel an earlier act, push, set vars), then its
//! answer — each decided by the seed (see `client.rs`), each call that
//! returned `Ok` noted in the trace's ledger.

use acts_core::engine::{
    BulkAction, BulkOutcome, BulkRequest, EngineError, MAX_BULK_RATE, MigrationPlan, ProcInfo,
    ProcessQuery, TaskInfo,
};
use acts_core::model::Vars;
use acts_core::scheduler::{Action, TaskState};
use acts_core::time::Clock;
use serde_json::json;

use crate::client::{
    Answer, answer, answer_delay, cancels, migrates, pauses, pushes, rewinds, sets_vars, terminates,
};
use crate::sim::{PID, Sim, Trace, retry, settle, transient};
use crate::workflow::Spec;

/// What the client remembers between rounds of one run.
#[derive(Default)]
pub(crate) struct Rounds {
    /// How many times the client moved the clock on for each act it leaves
    /// to a timeout (a timeout that does not settle its act is answered
    /// after a few; under store faults the tick may have to wait for the
    /// housekeeping retry, which the heal after five idle rounds allows).
    pub(crate) waited: std::collections::HashMap<String, usize>,
}

pub(crate) enum Step {
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
pub(crate) async fn act_once(
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
            let res = exec.proc().rewind(PID, &to, v).await;
            if let Some(step) = outcome(res, trace, ("$", "rewind"))? {
                return Ok(step);
            }
        }
        if terminates(seed, spec, &key, occurrence) {
            trace.note(format!("{key}#{occurrence}: terminate"));
            let res = if spec.grammar.v4() {
                bulk(sim, BulkAction::Terminate, Some("sim"), Vars::new()).await
            } else {
                exec.proc().terminate(PID, "sim").await
            };
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
            let res = if spec.grammar.v4() {
                bulk(sim, BulkAction::Pause, Some(&reason), Vars::new()).await
            } else {
                exec.proc().pause(PID, &reason).await
            };
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
                let res = exec.act().cancel(PID, &d.tid).await;
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
                match exec.act().push(PID, &step, act).await {
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
            let res = exec.act().set_process_vars(PID, &t.tid, v).await;
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
        // The client answers `delay` after the act began (the clock is
        // set to that time if it stands earlier: a restarted run that
        // already passed it does not wait twice): what falls due
        // meanwhile (a timeout) acts first, and the answer may find the
        // act gone.
        let delay = answer_delay(seed, spec, &key, occurrence);
        let at = t.start_time.unwrap_or_default() + delay.as_millis() as i64;
        if !delay.is_zero() && sim.clock.now_millis() < at {
            trace.note(format!(
                "clock {} -> {at} (act start +{} min)",
                sim.clock.now_millis(),
                delay.as_secs() / 60
            ));
            sim.clock.set(at);
            settle(&sim.engine).await?;
            if sim.engine.runtime().stats().stalled > 0 {
                // What fell due failed on the store: the answer waits for
                // its retry (the next round), as in the fault-free run it
                // came after it.
                return Ok(Step::Retry);
            }
        }
        trace.note(format!("{key}#{occurrence}: {}", action.as_str()));
        return match exec.act().apply(PID, &t.tid, action, options).await {
            Ok(()) => {
                trace.done(&t.tid, action.as_str());
                Ok(Step::Acted)
            }
            Err(e) if transient(&e) => Ok(Step::Retry),
            Err(EngineError::Action(refused)) => {
                // Not possible as the process stands (e.g. a back to a
                // step that did not run): complete it instead.
                trace.note(format!("  refused ({refused}); complete instead"));
                match exec
                    .act()
                    .apply(PID, &t.tid, Action::Complete, Vars::new())
                    .await
                {
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

/// Grammar 4's operator: `action` (with `reason` and `vars`) through a bulk job over
/// the processes of the model (the simulated one; subflow children are of
/// another model), waited for. `Ok` when the job acted on the process; a
/// refusal as the single control's (`Action`); a job a store fault left
/// unfinished (it goes on in the background) is transient.
pub(crate) async fn bulk(
    sim: &Sim,
    action: BulkAction,
    reason: Option<&str>,
    vars: Vars,
) -> Result<(), EngineError> {
    let exec = sim.engine.executor();
    let mut request = BulkRequest::new(action, ProcessQuery::new().model("main"))
        .vars(vars)
        .per_second(MAX_BULK_RATE);
    request.reason = reason.map(str::to_owned);
    let job = exec.bulk().start(request).await?;
    if let Err(e) = settle(&sim.engine).await {
        return Err(EngineError::Query(format!(
            "the bulk job did not settle: {e}"
        )));
    }
    // Once the job is stored, what it did is read back whatever the store
    // does meanwhile (a read that fails must not hide a pause it made).
    let job = retry(|| exec.bulk().get(&job.id)).await?;
    if !job.state.is_final() {
        return Err(EngineError::Busy {
            pid: PID.into(),
            cap: 0,
            waited: std::time::Duration::ZERO,
        });
    }
    let items = retry(|| exec.bulk().items(&job.id, None, None, None))
        .await?
        .items;
    match items.iter().find(|i| i.pid == PID) {
        Some(i) if i.outcome == BulkOutcome::Done => Ok(()),
        Some(i) => Err(EngineError::Action(
            acts_core::scheduler::ActionError::Denied {
                principal: "bulk".into(),
                reason: i.reason.clone().unwrap_or_default(),
            },
        )),
        None => Err(EngineError::Query(format!(
            "the bulk job {} did not reach the process: {job:?}",
            job.id
        ))),
    }
}

/// Deploys the next version of the model and moves the process onto it;
/// whether it moved.
async fn migrate(sim: &Sim, spec: &Spec, info: &ProcInfo) -> Result<bool, EngineError> {
    let exec = sim.engine.executor();
    let next = exec
        .model()
        .deploy_yaml(&spec.model_as_version("2"))
        .await?;
    if next.revision == info.model_rev {
        return Ok(false);
    }
    let mut vars = Vars::new();
    vars.insert("migrated".into(), json!(true));
    let plan = {
        let mut v = MigrationPlan::default();
        v.model = "main".into();
        v.from = info.model_rev;
        v.to = next.revision;
        v.vars = vars;
        v
    };
    let report = exec.model().migrate(&plan, false).await?;
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
