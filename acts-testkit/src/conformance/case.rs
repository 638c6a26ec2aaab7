//! What the suite is made of: a [`Case`], the [`Env`] it runs in, the
//! [`StoreFactory`] a backend gives it, and how a case fails.

use std::future::Future;
use std::sync::Arc;

use acts_store::{KvStore, StoreResult};
use async_trait::async_trait;

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
