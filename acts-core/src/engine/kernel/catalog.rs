//! The model catalog in memory: the deployed model versions
//! ([`DeployedModel`]), the latest of each model and the older ones
//! processes run on ([`Catalog`]), and the pins that keep a start's version
//! from being deleted ([`VersionPin`]; how removals use them:
//! `versions.rs`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::model::Workflow;
use crate::tree::ModelTree;

use crate::engine::api::error::EngineError;
use crate::engine::persist::rows::ModelRow;

/// A deployed model version, ready to start processes from.
///
/// The model is held once, as its tree (the steps as nodes, the rest of
/// the workflow on the root); the definition a client reads back is parsed
/// from the row's JSON when asked for ([`workflow`](Self::workflow)), so a
/// large model does not sit in memory twice.
pub(crate) struct DeployedModel {
    pub row: ModelRow,
    pub tree: Arc<ModelTree>,
}

impl DeployedModel {
    /// The model a stored row holds.
    pub(crate) fn from_row(row: ModelRow) -> Result<Self, EngineError> {
        let workflow = parse_row(&row)?;
        let mut tree = ModelTree::build_owned(workflow)?;
        tree.revision = row.revision;
        Ok(Self {
            row,
            tree: Arc::new(tree),
        })
    }

    /// The workflow's own declarations (inputs, index, options, ...):
    /// the tree's root, which keeps everything but the steps.
    pub(crate) fn declaration(&self) -> &Workflow {
        self.tree.workflow()
    }

    /// The whole definition, as deployed (read from the stored JSON).
    pub(crate) fn workflow(&self) -> Result<Workflow, EngineError> {
        parse_row(&self.row)
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

/// The deployed models in memory.
#[derive(Default)]
pub(crate) struct Catalog {
    /// The latest version of every deployed model, by id.
    pub(crate) latest: RwLock<HashMap<String, Arc<DeployedModel>>>,
    /// Older versions that loaded processes run on, by (id, revision).
    pub(crate) older: RwLock<HashMap<(String, u32), Arc<DeployedModel>>>,
    /// Orders deploys and removals (each reads the stored versions, then
    /// writes): an async lock held across that read and write, which is
    /// its point. Transitions never take it.
    pub(crate) changes: tokio::sync::Mutex<()>,
    /// The versions starts are using right now (see [`VersionPin`]).
    pub(crate) pins: Arc<parking_lot::Mutex<Pins>>,
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
