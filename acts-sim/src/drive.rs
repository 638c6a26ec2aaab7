//! Driving one process of a generated workflow to its end on an engine:
//! deploy, start, answer every waiting act as the client decides, move the
//! manual clock when only a timeout can act — tolerating store faults
//! (a failed call is tried again) and stopping early for a planned
//! restart.

use std::time::Duration;

use acts_core::engine::{BulkAction, EngineError, ProcInfo};
use acts_core::model::Vars;
use acts_core::scheduler::TaskState;
use acts_core::time::Clock;
use serde_json::json;

use crate::client::{clock_moves_in_pause, retries};
use crate::sim::{PID, Sim, Trace, settle, transient};
use crate::turn::{Rounds, Step, act_once, bulk};
use crate::workflow::Spec;

/// Most rounds of the client in one run (a generated workflow ends well
/// within it: `back` is used once per act).
const MAX_ROUNDS: usize = 400;

/// How a drive ended.
pub enum Driven {
    /// The process ended.
    Ended(Box<ProcInfo>),
    /// The planned restart point was reached.
    Restart,
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
        let doubles = engine.runtime().instance_faults();
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
            resumed = engine.runtime().resume().await.is_ok();
            // Grammar 4's keyed retries wait for the holders' count (a
            // bulk job would wait for it in the background, past the
            // settle guard): nothing is done before the resume succeeds.
            if !resumed && spec.grammar.v4() {
                stuck(&mut idle_rounds, heal, "the resume keeps failing")?;
                continue;
            }
        }
        if !deployed {
            let child =
                !spec.uses_subflow() || exec.model().deploy_yaml(spec.child_model()).await.is_ok();
            deployed = child && exec.model().deploy_yaml(&spec.model()).await.is_ok();
            if !deployed {
                stuck(&mut idle_rounds, heal, "the deploy keeps failing")?;
                continue;
            }
        }
        if !started {
            match exec.proc().get(PID).await {
                Ok(_) => started = true,
                Err(EngineError::ProcessNotFound(_)) => {
                    let mut v = Vars::new();
                    v.insert("pid".into(), json!(PID));
                    match exec.proc().start("main", v).await {
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
        let (info, tasks) = match (exec.proc().get(PID).await, exec.task().list(PID).await) {
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
            let retried = if spec.grammar.v4() {
                bulk(sim, BulkAction::Retry, None, v).await
            } else {
                exec.proc().retry(PID, None, v).await
            };
            match retried {
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
            let resumed = if spec.grammar.v4() {
                bulk(sim, BulkAction::Resume, None, Vars::new()).await
            } else {
                exec.proc().unpause(PID).await
            };
            match resumed {
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
        if engine.runtime().stats().stalled > 0 {
            // A transition of the engine's own (a timer's tick, a
            // continuation) failed on the store and waits for its retry:
            // the client waits too, so an outage never lets an answer
            // overtake what the fault-free run did first.
            trace.note("wait: a stalled transition is retried");
            engine.runtime().housekeeping().await;
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
                let others = match exec.proc().list(None, None).await {
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
