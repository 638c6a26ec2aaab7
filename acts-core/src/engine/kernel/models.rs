//! The model catalog: deploying, reading and removing models and their
//! versions (and publishing the package definitions for tools). The
//! catalog in memory holds the latest version of every deployed model
//! (read at start, kept in step by deploy and remove), so a transition
//! asks it — never the store — which models a subflow may start; older
//! versions are read when a process of one is loaded, and kept.
//!
//! A deploy whose content equals the latest version changes nothing; any
//! other deploy stores a new version (the next revision). A process runs
//! the version it started on to its end ([`ProcRow::rev`]), so a version
//! that unfinished processes use is never deleted.

use std::sync::Arc;

use tracing::error;

use crate::model::{ModelError, SourceMap, Workflow, script_sites, validate};
use crate::scheduler::ModelCatalog;
use crate::script::ScriptError;
use crate::tree::ModelTree;

use crate::engine::kernel::catalog::{DeployedModel, VersionPin};
use crate::engine::kernel::shared::Kernel;
use crate::engine::persist::model_rows::ModelRow;
use crate::engine::persist::model_rows::ModelRows;
use crate::engine::persist::rows::ProcRow;
use crate::engine::types::error::EngineError;
use crate::engine::types::info::ModelInfo;

impl ModelCatalog for Kernel {
    fn has_model(&self, id: &str) -> bool {
        self.models.latest.read().contains_key(id)
    }
}

impl Kernel {
    /// Validates and stores a model. Content equal to the model's latest
    /// version changes nothing (the same version is returned); any other
    /// content becomes a new version, which processes started afterwards
    /// run.
    pub(crate) async fn deploy(
        &self,
        workflow: &Workflow,
        source: &SourceMap,
    ) -> Result<ModelInfo, EngineError> {
        self.check_open()?;
        let json = workflow.to_json();
        if json.len() > self.config.model_limits.max_bytes {
            return Err(EngineError::TooLarge {
                what: format!("model '{}'", workflow.id),
                size: json.len(),
                limit: self.config.model_limits.max_bytes,
                setting: "model_limits.max_bytes",
            });
        }
        validate(workflow, source, &self.packages)?;
        self.check_scripts(workflow, source)?;
        if self.config.key_home.is_some()
            && self.config.gate_courier.is_none()
            && crate::model::has_node_gates(workflow)
        {
            return Err(crate::model::ModelError::Invalid {
                model: workflow.id.clone(),
                node: None,
                location: None,
                message: crate::engine::kernel::act_gates::NOT_ON_A_CLUSTER.into(),
            }
            .into());
        }
        let mut tree = ModelTree::build(workflow)?;
        let _changes = self.models.changes.lock().await;
        let stored = ModelRows::new(&self.store);
        let old = stored.model(&workflow.id).await?;
        if let Some(old) = old.as_ref().filter(|o| o.model == json) {
            return Ok(ModelInfo {
                unchanged: true,
                ..ModelInfo::from(old)
            });
        }
        let revision = match &old {
            Some(o) => o.revision + 1,
            // Versions of a removed model that processes still ran on keep
            // their numbers: a new deploy continues after them.
            None => self.last_revision(&workflow.id).await? + 1,
        };
        let row = ModelRow {
            id: workflow.id.clone(),
            name: workflow.name.clone(),
            ver: workflow.ver.clone(),
            model: json,
            deployed_at: self.now(),
            revision,
        };
        let mut ops = ModelRows::upsert_model_ops(old.as_ref(), &row);
        if let Some(o) = &old {
            // A store written before versions existed holds the previous
            // latest in the model row only: keep it as a version.
            if stored.version(&o.id, o.revision).await?.is_none() {
                ops.extend(ModelRows::insert_version_ops(&o.into()));
            }
        }
        ops.extend(ModelRows::insert_version_ops(&(&row).into()));
        // The model's triggers go in the same batch.
        ops.extend(self.hooks.trigger_ops(self, workflow).await?);
        self.write(None, ops).await?;
        if workflow.on.iter().any(|t| t.kind == "schedule") {
            self.hooks.arm_schedules(self).await?;
        }
        let info = ModelInfo::from(&row);
        tree.revision = revision;
        let deployed = Arc::new(DeployedModel::new(row, tree));
        if let Some(prev) = self
            .models
            .latest
            .write()
            .insert(workflow.id.clone(), deployed)
        {
            // Processes may still run the version this one replaces.
            let key = (prev.row.id.clone(), prev.row.revision);
            self.models.older.write().insert(key, prev);
        }
        Ok(info)
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
        self.models.latest.write().insert(id.to_owned(), m.clone());
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
        if let Some(m) = self.models.older.read().get(&key) {
            return Ok(m.clone());
        }
        let row = super::catalog::stored_version(&self.store, id, revision).await?;
        let m = Arc::new(DeployedModel::from_row(row)?);
        self.models.older.write().insert(key, m.clone());
        Ok(m)
    }

    /// The model tree a stored process runs: its version's, or — for a
    /// process stored before versions existed — built from the model it
    /// carries.
    pub(crate) async fn tree_of(&self, row: &ProcRow) -> Result<Arc<ModelTree>, EngineError> {
        Ok(self.deployed_of(row).await?.tree.clone())
    }

    /// The model version a stored process runs (see [`Kernel::tree_of`]).
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
        self.models.latest.read().get(id).cloned()
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
        let latest = self.models.latest.read();
        let m = latest.get(id)?.clone();
        let pin = VersionPin::take(&self.models.pins, id, m.row.revision)?;
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
        let pin = VersionPin::take(&self.models.pins, id, revision).ok_or_else(|| {
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
    pub(crate) async fn load_models(&self) -> Result<(), EngineError> {
        let rows = ModelRows::new(&self.store).models().await?;
        let mut loaded = Vec::with_capacity(rows.len());
        for row in rows {
            let id = row.id.clone();
            match DeployedModel::from_row(row) {
                Ok(m) => loaded.push((id, Arc::new(m))),
                Err(e) => error!(model = %id, error = %e, "a deployed model cannot be read"),
            }
        }
        self.models.latest.write().extend(loaded);
        Ok(())
    }

    /// Every script of `workflow` parses: a syntax error is a deploy error
    /// quoting the user's own text and where it is, not a run-time failure
    /// about a brace the user never wrote.
    fn check_scripts(&self, workflow: &Workflow, source: &SourceMap) -> Result<(), EngineError> {
        for site in script_sites(workflow) {
            let Err(e) = self.scripts.check_syntax(&site.text) else {
                continue;
            };
            let message = match e {
                ScriptError::Syntax { message, .. } => message,
                other => return Err(EngineError::Script(other.to_string())),
            };
            let location = match site.key {
                "if" | "while" => source.find(site.key, &site.text),
                _ => source.find("id", &site.node.id),
            };
            return Err(ModelError::Invalid {
                model: workflow.id.clone(),
                node: Some(site.node),
                location,
                message: format!(
                    "{} `{}` is not valid JavaScript: {message}",
                    site.key,
                    site.text.trim()
                ),
            }
            .into());
        }
        Ok(())
    }

    /// Stores the definition of every package the engine knows (one
    /// batch), so tools can list them.
    pub(crate) async fn publish_packages(&self) -> Result<(), EngineError> {
        let builtin: Vec<String> = crate::package::builtin_packages()
            .into_iter()
            .map(|d| d.id)
            .collect();
        let ops = self
            .packages
            .ids()
            .into_iter()
            .filter_map(|id| self.packages.get(id))
            .map(|def| {
                ModelRows::put_package_op(&crate::engine::persist::model_rows::PackageRow {
                    builtin: builtin.contains(&def.id),
                    package: def.clone(),
                })
            })
            .collect();
        self.write(None, ops).await
    }
}
