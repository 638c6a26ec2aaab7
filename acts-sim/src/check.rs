//! One seed, checked: the fault-free run, then the same workflow and client
//! cut at random committed batches, under a failing store, on a store whose
//! calls are slow (so the engine's other work interleaves with commits),
//! and (with `redb` / `rocksdb`) restarted on a real file — each must end
//! as the fault-free run did, with every end message heard, every call
//! that returned `Ok` in the history exactly once, one instance per pid,
//! no orphan rows, nothing left in memory, and nothing at all once its
//! processes and channel are removed.

use std::collections::HashSet;
use std::sync::Arc;

use acts_core::engine::{ProcInfo, TaskInfo};
use acts_core::model::Vars;
use acts_core::scheduler::{Message, TaskState};
use acts_store::{ErrorKind, KvStore, MemoryStore};
use acts_testkit::{CrashStore, FailPlan, FailingStore, OpSet, SlowStore};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::drive::{Driven, drive};
use crate::rows::{START, orphans, resume_time, teardown};
use crate::sim::{Sim, Trace, retry, settle};
use crate::workflow::Spec;

/// What to try for each seed.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// How many crash points (cuts of the committed history) to try.
    pub cuts: usize,
    /// Whether to run once more on a store that fails calls at random.
    pub store_faults: bool,
    /// Whether to run once more on a store whose calls yield a seeded
    /// number of times before they reach it (slow commits).
    pub slow_store: bool,
    /// Whether to run once more on a redb file, closing and reopening it.
    pub redb: bool,
    /// Whether to run once more on a RocksDB folder, closing and reopening
    /// it.
    pub rocksdb: bool,
    /// Whether to run once more on PostgreSQL (the server
    /// [`use_postgres`] names), disconnecting and connecting again.
    pub postgres: bool,
    /// The grammar workflows are drawn with.
    pub grammar: crate::workflow::Grammar,
}

impl Default for Plan {
    fn default() -> Self {
        Self {
            cuts: 3,
            store_faults: true,
            slow_store: true,
            redb: false,
            rocksdb: false,
            postgres: false,
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
    /// What the client and the operator did in the fault-free run.
    pub trace: Trace,
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
    let (expected, heard, tasks) = run_to_end(recorded.clone(), spec, seed, &mut trace, None)
        .await
        .map_err(|e| fail("fault-free", &trace, e))?;
    exactly_once(&tasks, &trace, true).map_err(|e| fail("fault-free", &trace, e))?;
    let want_ends = ends(&heard);
    let fault_free = trace.clone();
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
        let (got, heard, tasks) = run_to_end_at(store.clone(), now, spec, seed, &mut trace, None)
            .await
            .map_err(|e| fail(&name, &trace, e))?;
        compare(&expected, &got).map_err(|e| fail(&name, &trace, e))?;
        // What ran before the cut is in the history too.
        exactly_once(&tasks, &trace, false).map_err(|e| fail(&name, &trace, e))?;
        // Every end of the fault-free run reached the client (re-sent
        // from before the cut, or sent by the resumed run).
        same_ends(&want_ends, &heard).map_err(|e| fail(&name, &trace, e))?;
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
        let (got, _, tasks) = run_to_end(failing.clone(), spec, seed, &mut trace, Some(&heal))
            .await
            .map_err(|e| fail(name, &trace, e))?;
        trace.note(format!("{} calls failed", failing.failures()));
        compare(&expected, &got).map_err(|e| fail(name, &trace, e))?;
        exactly_once(&tasks, &trace, true).map_err(|e| fail(name, &trace, e))?;
        // Not the messages: an outage may hold a timer's transition (it is
        // retried on the housekeeping tick) while a client's answer gets
        // through, and both orders are right (seed 952 of grammar 3: a
        // step's timeout that fired in the fault-free run came after the
        // client's last answer here, with the same outcome).
        failing.heal();
        teardown(failing, &mut trace)
            .await
            .map_err(|e| fail(name, &trace, e))?;
        runs += 1;
    }

    // Slow calls: each yields a seeded number of times first, so timers,
    // continuations and the writer's next batch run while a commit is in
    // flight.
    if plan.slow_store {
        let name = "slow store";
        let mut trace = Trace::default();
        let slow = Arc::new(SlowStore::new(MemoryStore::new(), seed, 6));
        let (got, heard, tasks) = run_to_end(slow.clone(), spec, seed, &mut trace, None)
            .await
            .map_err(|e| fail(name, &trace, e))?;
        trace.note(format!("{} yields", slow.yields()));
        compare(&expected, &got).map_err(|e| fail(name, &trace, e))?;
        exactly_once(&tasks, &trace, true).map_err(|e| fail(name, &trace, e))?;
        same_ends(&want_ends, &heard).map_err(|e| fail(name, &trace, e))?;
        teardown(slow, &mut trace)
            .await
            .map_err(|e| fail(name, &trace, e))?;
        runs += 1;
    }

    // A real file, closed and reopened every few actions.
    for (on, kind) in [
        (plan.redb, FileKind::Redb),
        (plan.rocksdb, FileKind::Rocks),
        (plan.postgres, FileKind::Postgres),
    ] {
        if !on {
            continue;
        }
        let name = kind.run_name();
        let mut trace = Trace::default();
        let (got, heard, tasks) = file_run(kind, spec, seed, &mut rng, &mut trace)
            .await
            .map_err(|e| fail(name, &trace, e))?;
        compare(&expected, &got).map_err(|e| fail(name, &trace, e))?;
        exactly_once(&tasks, &trace, true).map_err(|e| fail(name, &trace, e))?;
        same_ends(&want_ends, &heard).map_err(|e| fail(name, &trace, e))?;
        runs += 1;
    }
    Ok(Report {
        outcome: expected,
        batches,
        runs,
        trace: fault_free,
    })
}

/// Every call of the run that returned `Ok` is in its task's history
/// exactly once (`exact`; at least once when the run resumed a history
/// cut from another), and — `exact` — nothing else is.
fn exactly_once(tasks: &[TaskInfo], trace: &Trace, exact: bool) -> Result<(), String> {
    let mut recorded: std::collections::BTreeMap<(&str, &str), usize> = Default::default();
    for t in tasks {
        for e in &t.history {
            *recorded
                .entry((t.tid.as_str(), e.action.as_str()))
                .or_default() += 1;
        }
    }
    let mut acked: std::collections::BTreeMap<(&str, &str), usize> = Default::default();
    for (tid, action) in &trace.done {
        *acked.entry((tid.as_str(), action.as_str())).or_default() += 1;
    }
    for (&(tid, action), &n) in &acked {
        let h = recorded.get(&(tid, action)).copied().unwrap_or(0);
        if h < n || (exact && h != n) {
            return Err(format!(
                "'{action}' on task {tid} returned Ok {n} time(s) but is in its history {h} time(s)"
            ));
        }
    }
    if exact
        && let Some(((tid, action), h)) = recorded.iter().find(|(k, _)| !acked.contains_key(*k))
    {
        return Err(format!(
            "'{action}' is in the history of task {tid} {h} time(s), but no such call returned Ok"
        ));
    }
    Ok(())
}

/// Every end of the fault-free run reached the client (re-sent from
/// before a cut or an outage, or sent by this run), and nothing else did.
fn same_ends(want: &[Shape], heard: &[Message]) -> Result<(), String> {
    let got = ends(heard);
    if got == want {
        Ok(())
    } else {
        Err(format!(
            "the client heard other ends:\n  want {want:?}\n  got  {got:?}"
        ))
    }
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

/// What a run to the end yields: the outcome, every message the client
/// heard, and the process's tasks (with their histories).
type Ended = (Outcome, Vec<Message>, Vec<TaskInfo>);

/// Runs the process to its end on `store` (one engine). Checks the engine
/// holds nothing once it ended, and the rows have no orphans (after every
/// round too, unless the store fails calls: `heal` is then what ends the
/// outage).
async fn run_to_end(
    store: Arc<dyn KvStore>,
    spec: &Spec,
    seed: u64,
    trace: &mut Trace,
    heal: Option<&dyn Fn() -> bool>,
) -> Result<Ended, String> {
    run_to_end_at(store, START, spec, seed, trace, heal).await
}

async fn run_to_end_at(
    store: Arc<dyn KvStore>,
    now: i64,
    spec: &Spec,
    seed: u64,
    trace: &mut Trace,
    heal: Option<&dyn Fn() -> bool>,
) -> Result<Ended, String> {
    let rows_each_round = heal.is_none();
    let heal = heal.unwrap_or(&|| false);
    let mut sim = Sim::open(store.clone(), now, heal).await?;
    sim.rows_each_round = rows_each_round;
    let info = match drive(&sim, spec, seed, trace, None, heal).await? {
        Driven::Ended(info) => *info,
        Driven::Restart => return Err("a restart where none was planned".into()),
    };
    settle(&sim.engine).await?;
    // What follows reads the store: no more faults.
    heal();
    let tasks = ended_tasks(&sim).await?;
    let heard = sim.heard();
    sim.engine.close().await;
    orphans(&store).await?;
    Ok((Outcome::from(&info), heard, tasks))
}

/// The ended process's tasks, once the engine settled; its instances
/// checked (one per pid), and — after one housekeeping tick, which lets go
/// of what waited for it (a stalled transition's retry) — nothing held for
/// any process any more: memory back at its baseline.
async fn ended_tasks(sim: &Sim) -> Result<Vec<TaskInfo>, String> {
    let doubles = sim.engine.runtime().instance_faults();
    if !doubles.is_empty() {
        return Err(format!(
            "one instance per pid broken: {}",
            doubles.join("; ")
        ));
    }
    let exec = sim.engine.executor();
    let tasks = retry(|| exec.task().list(crate::sim::PID))
        .await
        .map_err(|e| format!("reading the tasks: {e}"))?;
    sim.engine.runtime().housekeeping().await;
    settle(&sim.engine).await?;
    let residue = sim.engine.runtime().residue();
    if residue.is_empty() {
        Ok(tasks)
    } else {
        Err(format!(
            "every process ended but the engine still holds: {}",
            residue.join("; ")
        ))
    }
}

/// The PostgreSQL server of the `--postgres` runs (its URL, no namespace).
static POSTGRES_URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Names the PostgreSQL server the runs with [`Plan::postgres`] use.
pub fn use_postgres(url: &str) {
    let _ = POSTGRES_URL.set(url.to_owned());
}

/// Which real store a reopen run uses.
#[derive(Debug, Clone, Copy)]
enum FileKind {
    Redb,
    Rocks,
    Postgres,
}

impl FileKind {
    fn run_name(self) -> &'static str {
        match self {
            FileKind::Redb => "redb reopen",
            FileKind::Rocks => "rocksdb reopen",
            FileKind::Postgres => "postgres reconnect",
        }
    }

    /// The store in `dir` (a file store) or namespace `ns` (PostgreSQL).
    async fn open(self, dir: &std::path::Path, ns: &str) -> Result<Arc<dyn KvStore>, String> {
        let opened: Result<Arc<dyn KvStore>, acts_store::StoreError> = match self {
            FileKind::Postgres => {
                let url = POSTGRES_URL
                    .get()
                    .ok_or("--postgres runs need a server (use_postgres)")?;
                acts_store_postgres::PostgresStore::connect_with(url, ns, Default::default())
                    .await
                    .map(|s| Arc::new(s) as Arc<dyn KvStore>)
            }
            FileKind::Redb => acts_store_redb::RedbStore::open(
                dir.join("sim.redb"),
                acts_store_redb::RedbOptions::default(),
            )
            .map(|s| Arc::new(s) as Arc<dyn KvStore>),
            FileKind::Rocks => acts_store_rocksdb::RocksStore::open(
                dir.join("sim.rocksdb"),
                acts_store_rocksdb::RocksOptions::default(),
            )
            .map(|s| Arc::new(s) as Arc<dyn KvStore>),
        };
        opened.map_err(|e| format!("open the store: {e}"))
    }
}

/// The run on a real store (a redb file, a RocksDB folder or a PostgreSQL
/// namespace), the engine closed and the store reopened (reconnected)
/// after every few client actions.
async fn file_run(
    kind: FileKind,
    spec: &Spec,
    seed: u64,
    rng: &mut StdRng,
    trace: &mut Trace,
) -> Result<Ended, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary folder: {e}"))?;
    // A namespace of its own on a shared server (the folder's name is unique).
    let ns = format!(
        "sim_{seed}_{}",
        dir.path()
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .replace(|c: char| !c.is_ascii_alphanumeric(), "_")
    );
    // What the client heard over every reopen.
    let mut heard = Vec::new();
    for round in 0..100 {
        let store = kind.open(dir.path(), &ns).await?;
        let now = resume_time(&store).await?;
        let mut sim = Sim::open(store.clone(), now, &|| false).await?;
        let every = rng.random_range(1..=3);
        let driven = drive(&sim, spec, seed, trace, Some(every), &|| false).await?;
        match driven {
            Driven::Ended(info) => {
                settle(&sim.engine).await?;
                let tasks = ended_tasks(&sim).await?;
                heard.extend(sim.heard());
                sim.engine.close().await;
                orphans(&store).await?;
                return Ok((Outcome::from(&*info), heard, tasks));
            }
            Driven::Restart => {
                trace.note(format!("close and reopen the store (round {round})"));
                heard.extend(sim.heard());
                sim.engine.close().await;
            }
        }
    }
    Err("the process did not end within 100 reopens".into())
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
