//! The `KvStore` conformance suite: one set of cases every backend runs from
//! its own tests, so all backends behave identically under the contract.
//!
//! A backend describes how to get stores with a [`StoreFactory`], then calls
//! [`conformance_tests!`](crate::conformance_tests) in a test file, which
//! writes one `#[test]` per case:
//!
//! ```text
//! acts_testkit::conformance_tests!(durable: MyFactory::new());
//! ```
//!
//! Each case returns a [`CaseResult`] instead of panicking so the suite itself
//! can be tested: `tests/suite_can_fail.rs` runs it against deliberately
//! broken stores and checks that it notices.

/// Fails the case with a formatted message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(CaseFailure(format!($($msg)+)));
        }
    };
}

/// Fails the case unless `left == right`, showing both and the context.
macro_rules! ensure_eq {
    ($left:expr, $right:expr, $($ctx:tt)+) => {{
        let (left, right) = (&$left, &$right);
        if left != right {
            let mut msg = format!(
                "{}: expected {:?}, got {:?}",
                format!($($ctx)+),
                right,
                left
            );
            if msg.len() > 4000 {
                let cut = (0..=4000).rev().find(|i| msg.is_char_boundary(*i)).unwrap_or(0);
                msg.truncate(cut);
                msg.push_str("…");
            }
            return Err(CaseFailure(msg));
        }
    }};
}

mod cases;
mod fencing;
mod heavy;
mod model;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use acts_store::{KvStore, MemoryStore, StoreResult};
use async_trait::async_trait;
use parking_lot::Mutex;

/// How the suite gets stores of the backend under test.
///
/// A *location* names one place a store lives (a file path, a Redis
/// namespace). Opening the same location again must give the same data for a
/// durable backend.
#[async_trait]
pub trait StoreFactory: Send + Sync + 'static {
    /// A new location, holding no data yet.
    fn new_location(&self) -> String;

    /// Opens (or connects to) the store at `location`.
    async fn open(&self, location: &str) -> StoreResult<Arc<dyn KvStore>>;

    /// Damages the data at `location` while no store is open on it (garbage
    /// in the file, a key of the wrong type on the server), so the suite can
    /// check that damage surfaces as an error rather than as an empty store.
    /// Returns `false` if the backend has no way to do that.
    async fn damage(&self, _location: &str) -> bool {
        false
    }
}

/// Why a case failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseFailure(pub String);

impl std::fmt::Display for CaseFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: std::fmt::Display> From<E> for CaseFailure
where
    E: std::error::Error,
{
    fn from(e: E) -> Self {
        CaseFailure(format!("unexpected store error: {e}"))
    }
}

/// The outcome of one case.
pub type CaseResult = Result<(), CaseFailure>;

/// What a case runs in: a runtime and the factory of the backend under test.
pub struct Env {
    rt: tokio::runtime::Runtime,
    factory: Arc<dyn StoreFactory>,
}

impl Env {
    /// An environment with a two-worker multi-thread runtime (so concurrency
    /// cases really run in parallel).
    pub fn new(factory: Arc<dyn StoreFactory>) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("conformance: cannot build a tokio runtime: {e}"));
        Self { rt, factory }
    }

    /// Runs a future to completion on the environment's runtime.
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// The factory of the backend under test.
    pub fn factory(&self) -> &Arc<dyn StoreFactory> {
        &self.factory
    }

    /// Opens a store at a new, empty location.
    pub async fn fresh(&self) -> Result<(String, Arc<dyn KvStore>), CaseFailure> {
        let location = self.factory.new_location();
        let store = self
            .factory
            .open(&location)
            .await
            .map_err(|e| CaseFailure(format!("opening a fresh store at {location}: {e}")))?;
        Ok((location, store))
    }
}

/// One case of the suite.
#[derive(Clone, Copy)]
pub struct Case {
    /// The case's name (also the generated test's name).
    pub name: &'static str,
    /// Whether the case needs a durable backend (reopen, damage).
    pub durable_only: bool,
    /// The case itself.
    pub run: fn(&Env) -> CaseResult,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Case")
            .field("name", &self.name)
            .field("durable_only", &self.durable_only)
            .finish()
    }
}

/// Every case of the suite.
pub fn cases() -> Vec<Case> {
    let mut all = cases::ALL.to_vec();
    all.extend_from_slice(fencing::ALL);
    all.push(Case {
        name: "model_based_random_ops",
        durable_only: false,
        run: model::model_based_random_ops,
    });
    all
}

/// Runs the named case against `factory`; panics with the failure (this is
/// what the generated `#[test]`s call).
pub fn run_case(factory: impl StoreFactory, name: &str) {
    let case = cases()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("conformance: no case named {name}"));
    let env = Env::new(Arc::new(factory));
    if let Err(failure) = (case.run)(&env) {
        panic!("conformance case {name} failed: {failure}");
    }
}

/// Runs every case (the durable ones only if `durable`) and returns each
/// case's outcome; used to test the suite itself.
pub fn run_all(factory: impl StoreFactory, durable: bool) -> Vec<(&'static str, CaseResult)> {
    let env = Env::new(Arc::new(factory));
    cases()
        .into_iter()
        .filter(|c| durable || !c.durable_only)
        .map(|c| (c.name, (c.run)(&env)))
        .collect()
}

/// Numbered locations in a temporary directory that lives as long as the
/// value: what file- and directory-based backends' factories need.
#[derive(Debug)]
pub struct TempLocations {
    dir: tempfile::TempDir,
    next: std::sync::atomic::AtomicU64,
}

impl TempLocations {
    /// A new, empty temporary directory.
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap_or_else(|e| {
                panic!("conformance: cannot create a temporary directory: {e}")
            }),
            next: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// A new path in the directory, `<stem>-<n>`.
    pub fn next(&self, stem: &str) -> String {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.dir
            .path()
            .join(format!("{stem}-{n}"))
            .display()
            .to_string()
    }
}

impl Default for TempLocations {
    fn default() -> Self {
        Self::new()
    }
}

/// A [`StoreFactory`] for [`MemoryStore`]: a location is a name in a map, so
/// "reopening" returns the same store. Not durable.
#[derive(Debug, Default)]
pub struct MemoryFactory {
    stores: Mutex<HashMap<String, Arc<MemoryStore>>>,
    next: std::sync::atomic::AtomicU64,
}

impl MemoryFactory {
    /// A factory with no stores yet.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl StoreFactory for MemoryFactory {
    fn new_location(&self) -> String {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        format!("memory-{n}")
    }

    async fn open(&self, location: &str) -> StoreResult<Arc<dyn KvStore>> {
        let store = self
            .stores
            .lock()
            .entry(location.to_owned())
            .or_default()
            .clone();
        Ok(store)
    }
}

/// Writes one `#[test]` per conformance case, in a module named
/// `conformance`, for the factory expression given (evaluated once per test).
///
/// - `conformance_tests!(MemoryFactory::new())`: the cases for any store.
/// - `conformance_tests!(durable: RedbFactory::new())`: also the cases that
///   reopen a location and damage stored data.
#[macro_export]
macro_rules! conformance_tests {
    (durable: $factory:expr) => {
        $crate::conformance_tests!(@common $factory;
            reopen_keeps_exactly_the_committed_data,
            damaged_store_is_an_error_not_empty
        );
    };
    ($factory:expr) => {
        $crate::conformance_tests!(@common $factory;);
    };
    (@common $factory:expr; $($extra:ident),*) => {
        $crate::conformance_tests!(@cases $factory;
            point_reads_and_writes,
            get_many_reads_in_order,
            batch_applies_in_order,
            scan_bounds_limits_and_direction,
            scan_prefix_boundaries,
            large_values_round_trip,
            oversized_input_is_rejected_and_changes_nothing,
            batches_are_atomic_to_concurrent_readers,
            concurrent_writers_all_land,
            conditional_batch_applies_only_when_its_conditions_hold,
            conditional_batches_fence_concurrent_writers,
            model_based_random_ops
            $(, $extra)*
        );
    };
    (@cases $factory:expr; $($name:ident),* $(,)?) => {
        mod conformance {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                fn $name() {
                    $crate::conformance::run_case($factory, stringify!($name));
                }
            )*
        }
    };
}
