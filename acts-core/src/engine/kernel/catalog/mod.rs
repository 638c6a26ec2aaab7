//! [`Catalog`]: the kernel's part that keeps the models — the deployed
//! versions in memory ([`DeployedModel`], `deployed.rs`), the latest of
//! each model and the older ones processes run on (what a start, a load or
//! a migration reads, pinned or not — from memory, else from the store's
//! model rows), the pins that keep a start's version from being deleted
//! (`pins.rs`), and the operations that change them: deploying
//! (`deploy.rs`: validation, the scripts' syntax, the stored version and
//! its triggers in one batch) and removing versions and models
//! (`versions.rs`).
//!
//! It reads and writes the model rows itself (through `persist`) and
//! reaches the rest of the engine only through [`CatalogHost`]: whether
//! the engine is open, the clock, the script runtimes and packages a model
//! is checked against, a batch's write, and the services' trigger rows
//! and schedule timer.
//!
//! May use: nothing else of the kernel.

mod deploy;
mod deployed;
mod pins;
mod versions;

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use acts_store::{BatchOp, KvStore};
use async_trait::async_trait;
use parking_lot::RwLock;

use crate::model::Workflow;
use crate::package::PackageRegistry;
use crate::scheduler::ModelCatalog;
use crate::script::ScriptEngine;
use crate::tree::ModelTree;

use crate::engine::persist::model_rows::ModelRow;
use crate::engine::persist::model_rows::ModelRows;
use crate::engine::persist::rows::ProcRow;
use crate::engine::types::error::EngineError;

pub(crate) use deployed::{DeployedModel, stored_version};
pub(crate) use pins::{GoingMark, Pins, VersionPin};

/// What the catalog needs of the engine (the kernel implements it).
#[async_trait]
pub(crate) trait CatalogHost: Send + Sync + 'static {
    /// Refuses a change once the engine closed or lost its store.
    fn check_open(&self) -> Result<(), EngineError>;
    /// The engine clock, in ms.
    fn now(&self) -> i64;
    /// The largest model (its JSON) a deploy accepts.
    fn max_model_bytes(&self) -> usize;
    /// The script runtimes a model's scripts must parse in.
    fn scripts(&self) -> &ScriptEngine;
    /// The packages a model's acts may use.
    fn packages(&self) -> &PackageRegistry;
    /// Why gates on steps and acts are refused here, if they are (a split
    /// store without a courier).
    fn gate_refusal(&self) -> Option<&'static str>;
    /// Writes `ops` as one batch, durable when this returns.
    async fn write(&self, ops: Vec<BatchOp>) -> Result<(), EngineError>;
    /// The trigger rows of a deployed `workflow` (the services').
    async fn trigger_ops(&self, workflow: &Workflow) -> Result<Vec<BatchOp>, EngineError>;
    /// The deletes of model `id`'s trigger rows.
    async fn trigger_delete_ops(&self, id: &str) -> Result<Vec<BatchOp>, EngineError>;
    /// Arms the timer of the next due schedule.
    async fn arm_schedules(&self) -> Result<(), EngineError>;
}

/// The deployed models in memory, the reads that fill it from the
/// store's model rows and the changes that write them.
pub(crate) struct Catalog {
    store: Arc<dyn KvStore>,
    host: Weak<dyn CatalogHost>,
    /// The latest version of every deployed model, by id.
    latest: RwLock<HashMap<String, Arc<DeployedModel>>>,
    /// Older versions that loaded processes run on, by (id, revision).
    older: RwLock<HashMap<(String, u32), Arc<DeployedModel>>>,
    /// Orders deploys and removals (each reads the stored versions, then
    /// writes): an async lock held across that read and write, which is
    /// its point. Transitions never take it.
    changes: tokio::sync::Mutex<()>,
    /// The versions starts are using right now (see [`VersionPin`]).
    pins: Arc<parking_lot::Mutex<Pins>>,
}

impl ModelCatalog for Catalog {
    fn has_model(&self, id: &str) -> bool {
        self.latest.read().contains_key(id)
    }
}

impl Catalog {
    /// An empty catalog over the model rows of `store`, reaching the
    /// engine through `host`.
    pub(crate) fn new(store: Arc<dyn KvStore>, host: Weak<dyn CatalogHost>) -> Self {
        Self {
            store,
            host,
            latest: RwLock::default(),
            older: RwLock::default(),
            changes: tokio::sync::Mutex::new(()),
            pins: Arc::default(),
        }
    }

    /// The engine (closed once it is dropped).
    fn host(&self) -> Result<Arc<dyn CatalogHost>, EngineError> {
        self.host.upgrade().ok_or(EngineError::Closed)
    }

    /// Orders a deploy or a removal against the others (held across its
    /// read of the stored versions and its write).
    async fn lock_changes(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.changes.lock().await
    }

    /// `deployed` becomes its model's latest version; the one it replaces
    /// is kept (processes may still run it).
    fn publish(&self, deployed: Arc<DeployedModel>) {
        let id = deployed.row.id.clone();
        if let Some(prev) = self.latest.write().insert(id, deployed) {
            let key = (prev.row.id.clone(), prev.row.revision);
            self.older.write().insert(key, prev);
        }
    }

    /// Marks `revisions` of model `id` as being deleted (see
    /// [`GoingMark`]); the revisions a start holds.
    fn mark_going(&self, id: &str, revisions: &[u32]) -> (GoingMark, Vec<u32>) {
        GoingMark::set(&self.pins, id, revisions)
    }

    /// Forgets version `revision` of model `id` (deleted).
    fn forget_version(&self, id: &str, revision: u32) {
        self.older.write().remove(&(id.to_owned(), revision));
    }

    /// Model `id` is removed: no latest version; of its versions only
    /// `kept` (processes run on them) stay known.
    fn retire(&self, id: &str, kept: &[u32]) {
        if let Some(prev) = self.latest.write().remove(id) {
            self.older
                .write()
                .insert((id.to_owned(), prev.row.revision), prev);
        }
        self.older
            .write()
            .retain(|(mid, rev), _| mid != id || kept.contains(rev));
    }

    /// The latest version of model `id`, from the in-memory catalog, else
    /// read from the store (a model the start could not read: the error
    /// says why).
    pub(crate) async fn model(&self, id: &str) -> Result<Arc<DeployedModel>, EngineError> {
        if let Some(m) = self.deployed(id) {
            return Ok(m);
        }
        let row = ModelRows::new(&self.store)
            .model(id)
            .await?
            .ok_or_else(|| EngineError::ModelNotFound(id.to_owned()))?;
        let m = Arc::new(DeployedModel::from_row(row)?);
        self.latest.write().insert(id.to_owned(), m.clone());
        Ok(m)
    }

    /// Version `revision` of model `id` (the latest, a kept older one, or
    /// read from the store and kept).
    pub(crate) async fn model_version(
        &self,
        id: &str,
        revision: u32,
    ) -> Result<Arc<DeployedModel>, EngineError> {
        if let Some(m) = self.deployed(id).filter(|m| m.row.revision == revision) {
            return Ok(m);
        }
        let key = (id.to_owned(), revision);
        if let Some(m) = self.older.read().get(&key) {
            return Ok(m.clone());
        }
        let row = stored_version(&self.store, id, revision).await?;
        let m = Arc::new(DeployedModel::from_row(row)?);
        self.older.write().insert(key, m.clone());
        Ok(m)
    }

    /// The model tree a stored process runs: its version's, or — for a
    /// process stored before versions existed — built from the model it
    /// carries.
    pub(crate) async fn tree_of(&self, row: &ProcRow) -> Result<Arc<ModelTree>, EngineError> {
        Ok(self.deployed_of(row).await?.tree.clone())
    }

    /// The model version a stored process runs (see [`Catalog::tree_of`]).
    pub(crate) async fn deployed_of(
        &self,
        row: &ProcRow,
    ) -> Result<Arc<DeployedModel>, EngineError> {
        if row.model.is_empty() {
            return self
                .model_version(&row.mid, row.rev)
                .await
                .map_err(|e| match e {
                    EngineError::VersionNotFound { .. } => EngineError::Corrupt(format!(
                        "process '{}': its model '{}' version {} is not stored",
                        row.id, row.mid, row.rev
                    )),
                    other => other,
                });
        }
        let legacy = ModelRow {
            id: row.mid.clone(),
            name: String::new(),
            ver: String::new(),
            model: row.model.clone(),
            deployed_at: 0,
            revision: 0,
        };
        DeployedModel::from_row(legacy)
            .map(Arc::new)
            .map_err(|e| EngineError::Corrupt(format!("process '{}': {e}", row.id)))
    }

    /// Model `id` if it is deployed, without touching the store: the
    /// catalog holds every deployed model (read at start, kept in step by
    /// deploy and remove), so a transition never reads a model under its
    /// lane.
    pub(crate) fn deployed(&self, id: &str) -> Option<Arc<DeployedModel>> {
        self.latest.read().get(id).cloned()
    }

    /// The latest version of model `id`, pinned (see [`VersionPin`]):
    /// what a start uses until its process row is durable.
    pub(crate) async fn pinned_latest(
        &self,
        id: &str,
    ) -> Result<(Arc<DeployedModel>, VersionPin), EngineError> {
        self.model(id).await?;
        self.pin_deployed(id)
            .ok_or_else(|| EngineError::ModelNotFound(id.to_owned()))
    }

    /// The latest version of model `id` from the catalog, pinned; `None`
    /// if it is not deployed (or being removed). Looked up and pinned under
    /// the catalog's lock, so a removal either sees the pin or the lookup
    /// fails.
    pub(crate) fn pin_deployed(&self, id: &str) -> Option<(Arc<DeployedModel>, VersionPin)> {
        let latest = self.latest.read();
        let m = latest.get(id)?.clone();
        let pin = VersionPin::take(&self.pins, id, m.row.revision)?;
        Some((m, pin))
    }

    /// Version `revision` of model `id`, pinned.
    pub(crate) async fn pinned_version(
        &self,
        id: &str,
        revision: u32,
    ) -> Result<(Arc<DeployedModel>, VersionPin), EngineError> {
        // Pinned first: a removal that started earlier refuses the pin, one
        // that finished earlier left nothing to read.
        let pin = VersionPin::take(&self.pins, id, revision).ok_or_else(|| {
            EngineError::VersionNotFound {
                model: id.to_owned(),
                revision,
            }
        })?;
        let m = self.model_version(id, revision).await?;
        Ok((m, pin))
    }

    /// Reads every deployed model into the catalog (at start). A model
    /// whose stored form cannot be read is left out with an error in the
    /// log; using it reports why.
    pub(crate) async fn load(&self) -> Result<(), EngineError> {
        let rows = ModelRows::new(&self.store).models().await?;
        let mut loaded = Vec::with_capacity(rows.len());
        for row in rows {
            let id = row.id.clone();
            match DeployedModel::from_row(row) {
                Ok(m) => loaded.push((id, Arc::new(m))),
                Err(e) => {
                    tracing::error!(model = %id, error = %e, "a deployed model cannot be read")
                }
            }
        }
        self.latest.write().extend(loaded);
        Ok(())
    }
}
