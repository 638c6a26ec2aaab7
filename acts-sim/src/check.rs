//! One seed, checked: the fault-free run, then the same workflow and client
//! cut at random committed batches, under a failing store, and (with
//! `redb`) restarted on a real file — each must end as the fault-free run
//! did, with every end message heard, no orphan rows, nothing left in
//! memory, and nothing at all once its processes and channel are removed.

use std::collections::HashSet;
use std::sync::Arc;

use acts_core::durable::{Collection, Query};
use acts_core::engine::ProcInfo;
use acts_core::engine::testing::{
    DeliveryRow, MessageRow, NodeRow, ProcRow, TaskRow, VarsRow, WakeRow,
};
use acts_core::model::Vars;
use acts_core::scheduler::{Message, TaskState};
use acts_store::{ErrorKind, KvStore, MemoryStore};
use acts_testkit::{CrashStore, FailPlan, FailingStore, OpSet};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::drive::{Driven, Sim, Trace, drive, retry, settle};
use crate::workflow::Spec;

/// What to try for each seed.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// How many crash points (cuts of the committed history) to try.
    pub cuts: usize,
    /// Whether to run once more on a store that fails calls at random.
    pub store_faults: bool,
    /// Whether to run once more on a redb file, closing and reopening it.
    pub redb: bool,
    /// The grammar workflows are drawn with.
    pub grammar: crate::workflow::Grammar,
}

impl Default for Plan {
    fn default() -> Self {
        Self {
            cuts: 3,
            store_faults: true,
            redb: false,
            grammar: crate::workflow::Grammar::V1,
        }
    }
}

/// How a process ended, as compared between runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Its state.
    pub state: TaskState,
    /// Its outputs.
    pub outputs: Vars,
    /// Its error code, if it ended in error.
    pub ecode: Option<String>,
}

impl From<&ProcInfo> for Outcome {
    fn from(p: &ProcInfo) -> Self {
        Self {
            state: p.state,
            outputs: p.outputs.clone(),
            ecode: p.err.as_ref().map(|e| e.ecode.clone()),
        }
    }
}

/// What a passing seed did.
#[derive(Debug, Clone)]
pub struct Report {
    /// The fault-free outcome.
    pub outcome: Outcome,
    /// Committed batches of the fault-free run.
    pub batches: usize,
    /// Runs tried (fault-free included).
    pub runs: usize,
}

/// A failing seed: what broke, in which run, and the trace.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Which run (`fault-free`, `cut 7 of 31`, `store faults`, `redb`).
    pub run: String,
    /// What broke.
    pub what: String,
    /// What the client did, and the faults.
    pub trace: Trace,
}

/// A message as the client sees it: `(type, node, state)`.
type Shape = (String, String, String);

/// The messages as a client that de-duplicates by id sees them, sorted
/// (dynamic acts named by key, their node ids being fresh in every run).
fn shape(messages: &[Message]) -> Vec<Shape> {
    let mut seen = HashSet::new();
    let mut v: Vec<Shape> = messages
        .iter()
        .filter(|m| seen.insert(m.id.clone()))
        .map(|m| {
            let node = if m.r#type == "act" {
                m.key.clone().or(m.uses.clone()).unwrap_or_default()
            } else {
                m.nid.clone()
            };
            (m.r#type.to_string(), node, m.state.to_string())
        })
        .collect();
    v.sort();
    v
}

/// The end messages (every state but `created`).
fn ends(messages: &[Message]) -> Vec<Shape> {
    shape(messages)
        .into_iter()
        .filter(|(_, _, s)| s != "created")
        .collect()
}

/// Checks `spec` with the client of `seed` under `plan`.
pub async fn check(seed: u64, spec: &Spec, plan: Plan) -> Result<Report, Failure> {
    let fail = |run: &str, trace: &Trace, what: String| Failure {
        run: run.to_owned(),
        what,
        trace: trace.clone(),
    };
    // The fault-free run, recorded batch by batch.
    let mut trace = Trace::default();
    let recorded = Arc::new(CrashStore::new());
    let (expected, heard) = run_to_end(recorded.clone(), spec, seed, &mut trace, None, &|| false)
        .await
        .map_err(|e| fail("fault-free", &trace, e))?;
    let want_ends = ends(&heard);
    let batches = recorded.committed().await;
    teardown(recorded.recover().await.into_arc(), &mut trace)
        .await
        .map_err(|e| fail("fault-free teardown", &trace, e))?;
    let mut runs = 1;
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_c0de);

    // Crashes: the committed history cut after k batches, then resumed.
    let mut cuts: Vec<usize> = (0..plan.cuts.min(batches + 1))
        .map(|_| rng.random_range(0..=batches))
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    for k in cuts {
        let name = format!("cut {k} of {batches}");
        let mut trace = Trace::default();
        trace.note(format!("crash after batch {k}"));
        let store = recorded.recover_prefix(k).await.into_arc();
        let now = resume_time(&store)
            .await
            .map_err(|e| fail(&name, &trace, e))?;
        let (got, heard) =
            run_to_end_at(store.clone(), now, spec, seed, &mut trace, None, &|| false)
                .await
                .map_err(|e| fail(&name, &trace, e))?;
        compare(&expected, &got).map_err(|e| fail(&name, &trace, e))?;
        // Every end of the fault-free run reached the client (re-sent
        // from before the cut, or sent by the resumed run).
        let got_ends = ends(&heard);
        if got_ends != want_ends {
            return Err(fail(
                &name,
                &trace,
                format!("the client heard other ends:\n  want {want_ends:?}\n  got  {got_ends:?}"),
            ));
        }
        teardown(store, &mut trace)
            .await
            .map_err(|e| fail(&name, &trace, e))?;
        runs += 1;
    }

    // A store that fails one call in eight until the run is stuck, then
    // heals.
    if plan.store_faults {
        let name = "store faults";
        let mut trace = Trace::default();
        let failing = Arc::new(FailingStore::with_plan(
            MemoryStore::new(),
            FailPlan::random(OpSet::ALL, seed, 8, ErrorKind::Unavailable),
        ));
        let f = failing.clone();
        let healed = std::sync::atomic::AtomicBool::new(false);
        let heal = move || {
            f.heal();
            !healed.swap(true, std::sync::atomic::Ordering::Relaxed)
        };
        let (got, _) = run_to_end(failing.clone(), spec, seed, &mut trace, None, &heal)
            .await
            .map_err(|e| fail(name, &trace, e))?;
        trace.note(format!("{} calls failed", failing.failures()));
        compare(&expected, &got).map_err(|e| fail(name, &trace, e))?;
        failing.heal();
        teardown(failing, &mut trace)
            .await
            .map_err(|e| fail(name, &trace, e))?;
        runs += 1;
    }

    // A real file, closed and reopened every few actions.
    if plan.redb {
        let name = "redb reopen";
        let mut trace = Trace::default();
        let got = redb_run(spec, seed, &mut rng, &mut trace)
            .await
            .map_err(|e| fail(name, &trace, e))?;
        compare(&expected, &got).map_err(|e| fail(name, &trace, e))?;
        runs += 1;
    }
    Ok(Report {
        outcome: expected,
        batches,
        runs,
    })
}

fn compare(want: &Outcome, got: &Outcome) -> Result<(), String> {
    if want == got {
        Ok(())
    } else {
        Err(format!(
            "another outcome than the fault-free run:\n  want {want:?}\n  got  {got:?}"
        ))
    }
}

/// Runs the process to its end on `store` (one engine); returns its
/// outcome and every message the client heard. Checks the engine holds
/// nothing once it ended, and the rows have no orphans.
async fn run_to_end(
    store: Arc<dyn KvStore>,
    spec: &Spec,
    seed: u64,
    trace: &mut Trace,
    restart_after: Option<usize>,
    heal: &dyn Fn() -> bool,
) -> Result<(Outcome, Vec<Message>), String> {
    run_to_end_at(store, START, spec, seed, trace, restart_after, heal).await
}

/// The engine clock every simulation starts at (ms).
const START: i64 = 1_000_000;

/// The time a restart on `store` goes on from: the latest time its rows
/// record (what the clock said at the crash, as far as anything stored
/// knows), so timers stand as they stood.
async fn resume_time(store: &Arc<dyn KvStore>) -> Result<i64, String> {
    let mut t = START;
    for p in rows::<ProcRow>(store).await? {
        t = t.max(p.timestamp).max(p.start_time).max(p.end_time);
    }
    for task in rows::<TaskRow>(store).await? {
        t = t.max(task.start_time).max(task.end_time);
    }
    Ok(t)
}

#[allow(clippy::too_many_arguments)]
async fn run_to_end_at(
    store: Arc<dyn KvStore>,
    now: i64,
    spec: &Spec,
    seed: u64,
    trace: &mut Trace,
    restart_after: Option<usize>,
    heal: &dyn Fn() -> bool,
) -> Result<(Outcome, Vec<Message>), String> {
    let mut sim = Sim::open(store.clone(), now, heal).await?;
    let info = match drive(&sim, spec, seed, trace, restart_after, heal).await? {
        Driven::Ended(info) => *info,
        Driven::Restart => return Err("a restart where none was planned".into()),
    };
    settle(&sim.engine).await?;
    // What follows reads the store: no more faults.
    heal();
    let stats = sim.engine.stats();
    if stats.admitted != 0 || stats.resident != 0 {
        return Err(format!(
            "every process ended but the engine still holds some: {} admitted, {} resident",
            stats.admitted, stats.resident
        ));
    }
    let heard = sim.heard();
    sim.engine.close().await;
    orphans(&store).await?;
    Ok((Outcome::from(&info), heard))
}

/// Rows that belong to no process.
async fn orphans(store: &Arc<dyn KvStore>) -> Result<(), String> {
    let procs: HashSet<String> = rows::<ProcRow>(store)
        .await?
        .into_iter()
        .map(|p| p.id)
        .collect();
    let mut owners: Vec<(&str, String)> = Vec::new();
    owners.extend(
        rows::<TaskRow>(store)
            .await?
            .into_iter()
            .map(|t| ("task", t.pid)),
    );
    owners.extend(
        rows::<VarsRow>(store)
            .await?
            .into_iter()
            .map(|v| ("vars", v.pid)),
    );
    owners.extend(
        rows::<NodeRow>(store)
            .await?
            .into_iter()
            .map(|n| ("node", n.pid)),
    );
    owners.extend(
        rows::<WakeRow>(store)
            .await?
            .into_iter()
            .map(|w| ("wake", w.id)),
    );
    match owners.into_iter().find(|(_, pid)| !procs.contains(pid)) {
        Some((kind, pid)) => Err(format!(
            "a {kind} row of process '{pid}', which has no process row"
        )),
        None => Ok(()),
    }
}

/// Removes every process and the client's channel; then nothing of them
/// may be left in the store.
async fn teardown(store: Arc<dyn KvStore>, trace: &mut Trace) -> Result<(), String> {
    let sim = Sim::open(store.clone(), 1_000_000, &|| false).await?;
    let exec = sim.engine.executor();
    let all = retry(|| exec.processes(None, None))
        .await
        .map_err(|e| format!("listing: {e}"))?;
    for p in &all {
        retry(|| exec.remove_process(&p.pid))
            .await
            .map_err(|e| format!("removing {}: {e}", p.pid))?;
    }
    retry(|| sim.engine.remove_channel("client"))
        .await
        .map_err(|e| format!("removing the channel: {e}"))?;
    sim.engine.close().await;
    trace.note(format!("removed {} processes and the channel", all.len()));
    let left = [
        ("process", rows::<ProcRow>(&store).await?.len()),
        ("task", rows::<TaskRow>(&store).await?.len()),
        ("vars", rows::<VarsRow>(&store).await?.len()),
        ("node", rows::<NodeRow>(&store).await?.len()),
        ("wake", rows::<WakeRow>(&store).await?.len()),
        ("delivery", rows::<DeliveryRow>(&store).await?.len()),
        ("message", rows::<MessageRow>(&store).await?.len()),
    ];
    match left.iter().find(|(_, n)| *n > 0) {
        Some((kind, n)) => Err(format!(
            "{n} {kind} row(s) left after every process and the channel were removed"
        )),
        None => Ok(()),
    }
}

/// The run on a redb file, the engine closed and the file reopened after
/// every few client actions.
async fn redb_run(
    spec: &Spec,
    seed: u64,
    rng: &mut StdRng,
    trace: &mut Trace,
) -> Result<Outcome, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary folder: {e}"))?;
    let path = dir.path().join("sim.redb");
    for round in 0..100 {
        let store: Arc<dyn KvStore> = Arc::new(
            acts_store_redb::RedbStore::open(&path, acts_store_redb::RedbOptions::default())
                .map_err(|e| format!("open the file: {e}"))?,
        );
        let now = resume_time(&store).await?;
        let sim = Sim::open(store.clone(), now, &|| false).await?;
        let every = rng.random_range(1..=3);
        let driven = drive(&sim, spec, seed, trace, Some(every), &|| false).await?;
        match driven {
            Driven::Ended(info) => {
                settle(&sim.engine).await?;
                sim.engine.close().await;
                orphans(&store).await?;
                return Ok(Outcome::from(&*info));
            }
            Driven::Restart => {
                trace.note(format!("close and reopen the file (round {round})"));
                sim.engine.close().await;
            }
        }
    }
    Err("the process did not end within 100 reopens".into())
}

/// Every row of collection `R` in `store`.
async fn rows<R: acts_core::durable::Row>(store: &Arc<dyn KvStore>) -> Result<Vec<R>, String> {
    Collection::<R>::new(store.clone())
        .query_all(&Query::new())
        .await
        .map_err(|e| format!("reading rows: {e}"))
}

/// A store as the engine takes it.
trait IntoArc {
    fn into_arc(self) -> Arc<dyn KvStore>;
}

impl IntoArc for CrashStore {
    fn into_arc(self) -> Arc<dyn KvStore> {
        Arc::new(self)
    }
}
