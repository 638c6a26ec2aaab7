//! The model catalog in memory: the deployed model versions
//! ([`DeployedModel`]), the latest of each model and the older ones
//! processes run on ([`Catalog`]: what a start, a load or a migration
//! reads, pinned or not — from memory, else from the store's model rows),
//! and the pins that keep a start's version from being deleted
//! ([`VersionPin`]; how removals use them: `versions.rs`). Deploying and
//! removing (which write) stay with the kernel (`models.rs`,
//! `versions.rs`) and tell the catalog what changed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::RwLock;

use acts_store::KvStore;

use crate::model::Workflow;
use crate::scheduler::ModelCatalog;
use crate::tree::ModelTree;

use crate::engine::persist::model_rows::ModelRow;
use crate::engine::persist::model_rows::ModelRows;
use crate::engine::persist::rows::ProcRow;
use crate::engine::types::error::EngineError;

/// A deployed model version, ready to start processes from.
///
/// The model is held once, as its tree (the steps as nodes, the rest of
/// the workflow on the root); the definition a client reads back is read
/// from its version row when asked for ([`workflow`](Self::workflow)), so
/// a large model does not sit in memory twice. (`row.model` is empty then;
/// a process stored before versions existed keeps its model there.)
pub(crate) struct DeployedModel {
    pub row: ModelRow,
    pub tree: Arc<ModelTree>,
}

impl DeployedModel {
    /// The model a stored row holds.
    pub(crate) fn from_row(row: ModelRow) -> Result<Self, EngineError> {
        let mut tree = ModelTree::build_owned(parse_row(&row)?)?;
        tree.revision = row.revision;
        Ok(Self::new(row, tree))
    }

    /// Version `row.revision` built as `tree`; the row's JSON is dropped
    /// when its version row keeps it.
    pub(crate) fn new(mut row: ModelRow, tree: ModelTree) -> Self {
        if row.revision > 0 {
            row.model = String::new();
        }
        Self {
            row,
            tree: Arc::new(tree),
        }
    }

    /// The workflow's own declarations (inputs, index, options, ...):
    /// the tree's root, which keeps everything but the steps.
    pub(crate) fn declaration(&self) -> &Workflow {
        self.tree.workflow()
    }

    /// The whole definition, as deployed (read from its version row in
    /// `store`).
    pub(crate) async fn workflow(
        &self,
        store: &Arc<dyn acts_store::KvStore>,
    ) -> Result<Workflow, EngineError> {
        if !self.row.model.is_empty() {
            return parse_row(&self.row);
        }
        parse_row(&stored_version(store, &self.row.id, self.row.revision).await?)
    }
}

/// Version `revision` of model `id` as stored: its version row, or — in a
/// store written before versions existed, whose latest version lives in
/// the model row only — that row.
pub(crate) async fn stored_version(
    store: &Arc<dyn acts_store::KvStore>,
    id: &str,
    revision: u32,
) -> Result<ModelRow, EngineError> {
    let stored = ModelRows::new(store);
    match stored.version(id, revision).await? {
        Some(v) => Ok(ModelRow::from(&v)),
        None => stored
            .model(id)
            .await?
            .filter(|m| m.revision == revision)
            .ok_or_else(|| EngineError::VersionNotFound {
                model: id.to_owned(),
                revision,
            }),
    }
}

/// The workflow a model row stores.
fn parse_row(row: &ModelRow) -> Result<Workflow, EngineError> {
    Workflow::from_json(&row.model).map_err(|e| {
        EngineError::Corrupt(format!(
            "model '{}' version {}: the stored model is unreadable: {e}",
            row.id, row.revision
        ))
    })
}

/// The deployed models in memory, and the reads that fill it from the
/// store's model rows (its one capability: reading them).
pub(crate) struct Catalog {
    store: Arc<dyn KvStore>,
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
    /// An empty catalog over the model rows of `store`.
    pub(crate) fn new(store: Arc<dyn KvStore>) -> Self {
        Self {
            store,
            latest: RwLock::default(),
            older: RwLock::default(),
            changes: tokio::sync::Mutex::new(()),
            pins: Arc::default(),
        }
    }

    /// Orders a deploy or a removal against the others (held across its
    /// read of the stored versions and its write).
    pub(crate) async fn lock_changes(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.changes.lock().await
    }

    /// `deployed` becomes its model's latest version; the one it replaces
    /// is kept (processes may still run it).
    pub(crate) fn publish(&self, deployed: Arc<DeployedModel>) {
        let id = deployed.row.id.clone();
        if let Some(prev) = self.latest.write().insert(id, deployed) {
            let key = (prev.row.id.clone(), prev.row.revision);
            self.older.write().insert(key, prev);
        }
    }

    /// Marks `revisions` of model `id` as being deleted (see
    /// [`GoingMark`]); the revisions a start holds.
    pub(crate) fn mark_going(&self, id: &str, revisions: &[u32]) -> (GoingMark, Vec<u32>) {
        GoingMark::set(&self.pins, id, revisions)
    }

    /// Forgets version `revision` of model `id` (deleted).
    pub(crate) fn forget_version(&self, id: &str, revision: u32) {
        self.older.write().remove(&(id.to_owned(), revision));
    }

    /// Model `id` is removed: no latest version; of its versions only
    /// `kept` (processes run on them) stay known.
    pub(crate) fn retire(&self, id: &str, kept: &[u32]) {
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

type VersionKey = (String, u32);

/// The versions in use by starts, and those a removal is deleting.
#[derive(Default)]
pub(crate) struct Pins {
    counts: HashMap<VersionKey, usize>,
    going: HashSet<VersionKey>,
}

/// A start's hold on a model version: while it lives, the version is not
/// deleted. Dropped once the process row naming the version is durable
/// (or the start failed).
pub(crate) struct VersionPin {
    pins: Arc<parking_lot::Mutex<Pins>>,
    key: VersionKey,
}

impl VersionPin {
    /// Pins version `revision` of `mid`; `None` while a removal deletes it.
    pub(crate) fn take(
        pins: &Arc<parking_lot::Mutex<Pins>>,
        mid: &str,
        revision: u32,
    ) -> Option<Self> {
        let key = (mid.to_owned(), revision);
        let mut p = pins.lock();
        if p.going.contains(&key) {
            return None;
        }
        *p.counts.entry(key.clone()).or_default() += 1;
        Some(Self {
            pins: pins.clone(),
            key,
        })
    }
}

impl Drop for VersionPin {
    fn drop(&mut self) {
        let mut p = self.pins.lock();
        if let Some(n) = p.counts.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                p.counts.remove(&self.key);
            }
        }
    }
}

/// A removal's mark on the versions it may delete; lifted when dropped.
pub(crate) struct GoingMark {
    pins: Arc<parking_lot::Mutex<Pins>>,
    keys: Vec<VersionKey>,
}

impl GoingMark {
    /// Marks `revisions` of `mid` as going; returns the mark and the
    /// revisions a start holds (those must be kept).
    pub(crate) fn set(
        pins: &Arc<parking_lot::Mutex<Pins>>,
        mid: &str,
        revisions: &[u32],
    ) -> (Self, Vec<u32>) {
        let mut p = pins.lock();
        let mut pinned = Vec::new();
        let keys: Vec<VersionKey> = revisions.iter().map(|r| (mid.to_owned(), *r)).collect();
        for k in &keys {
            p.going.insert(k.clone());
            if p.counts.contains_key(k) {
                pinned.push(k.1);
            }
        }
        drop(p);
        (
            Self {
                pins: pins.clone(),
                keys,
            },
            pinned,
        )
    }
}

impl Drop for GoingMark {
    fn drop(&mut self) {
        let mut p = self.pins.lock();
        for k in &self.keys {
            p.going.remove(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durable::Collection;
    use crate::engine::persist::model_rows::ModelVersionRow;
    use acts_store::{KvStore, MemoryStore};

    fn row(revision: u32) -> ModelRow {
        let w = Workflow::new().with_id("m").with_step(|s| s.with_id("s1"));
        ModelRow {
            id: "m".into(),
            name: String::new(),
            ver: "1".into(),
            model: w.to_json(),
            deployed_at: 0,
            revision,
        }
    }

    #[tokio::test]
    async fn a_deployed_version_keeps_its_definition_in_the_store_only() {
        let store: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
        let m = DeployedModel::from_row(row(1)).unwrap();
        assert!(
            m.row.model.is_empty(),
            "the tree is the only copy in memory"
        );
        // Read back from its version row, or from the model row of a
        // store written before versions existed.
        assert!(matches!(
            m.workflow(&store).await,
            Err(EngineError::VersionNotFound { revision: 1, .. })
        ));
        Collection::<ModelRow>::new(store.clone())
            .upsert(&row(1))
            .await
            .unwrap();
        assert_eq!(m.workflow(&store).await.unwrap().id, "m");
        Collection::<ModelVersionRow>::new(store.clone())
            .upsert(&ModelVersionRow::from(&row(1)))
            .await
            .unwrap();
        let steps = m.workflow(&store).await.unwrap().steps;
        assert_eq!(steps.len(), 1);
        // A process stored before versions existed carries its model.
        let legacy = DeployedModel::from_row(row(0)).unwrap();
        assert!(!legacy.row.model.is_empty());
        let empty: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
        assert_eq!(legacy.workflow(&empty).await.unwrap().steps.len(), 1);
    }
}
