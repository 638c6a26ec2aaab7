//! The model catalog: deploying, reading and removing models (and
//! publishing the package definitions for tools). The catalog
//! in memory holds every deployed model (read at start, kept in step by
//! deploy and remove), so a transition asks it — never the store — which
//! models a subflow may start.

use std::sync::Arc;

use tracing::error;

use crate::durable::{Collection, Query};
use crate::model::{ModelError, SourceMap, Workflow, script_sites, validate};
use crate::scheduler::ModelCatalog;
use crate::script::ScriptError;
use crate::tree::ModelTree;

use crate::engine::api::error::EngineError;
use crate::engine::api::info::ModelInfo;
use crate::engine::kernel::shared::{DeployedModel, Kernel};
use crate::engine::persist::rows::ModelRow;

impl DeployedModel {
    /// The model a stored row holds.
    pub(crate) fn from_row(row: ModelRow) -> Result<Self, EngineError> {
        let workflow = Workflow::from_json(&row.model).map_err(|e| {
            EngineError::Corrupt(format!(
                "model '{}': the stored model is unreadable: {e}",
                row.id
            ))
        })?;
        let tree = Arc::new(ModelTree::build(&workflow)?);
        Ok(Self {
            row,
            workflow,
            tree,
        })
    }
}

impl ModelCatalog for Kernel {
    fn has_model(&self, id: &str) -> bool {
        self.models.read().contains_key(id)
    }
}

impl Kernel {
    /// Validates and stores a model; a later deploy of the same id
    /// replaces it for new processes.
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
        let tree = Arc::new(ModelTree::build(workflow)?);
        let models = Collection::<ModelRow>::new(self.store.clone());
        let old = models.get(&workflow.id).await?;
        let row = ModelRow {
            id: workflow.id.clone(),
            name: workflow.name.clone(),
            ver: workflow.ver.clone(),
            model: json,
            deployed_at: self.now(),
            revision: old.as_ref().map_or(1, |o| o.revision + 1),
        };
        let mut ops = Collection::<ModelRow>::upsert_ops(old.as_ref(), &row);
        // The model's triggers go in the same batch.
        ops.extend(self.trigger_ops(workflow).await?);
        self.write(None, ops).await?;
        if workflow.on.iter().any(|t| t.kind == "schedule") {
            self.arm_schedules().await?;
        }
        let info = ModelInfo::from(&row);
        self.models.write().insert(
            row.id.clone(),
            Arc::new(DeployedModel {
                row,
                workflow: workflow.clone(),
                tree,
            }),
        );
        Ok(info)
    }

    /// Model `id`, from the in-memory catalog, else read from the store
    /// (a model the start could not read: the error says why).
    pub(crate) async fn model(&self, id: &str) -> Result<Arc<DeployedModel>, EngineError> {
        if let Some(m) = self.deployed(id) {
            return Ok(m);
        }
        let row = Collection::<ModelRow>::new(self.store.clone())
            .get(id)
            .await?
            .ok_or_else(|| EngineError::ModelNotFound(id.to_owned()))?;
        let m = Arc::new(DeployedModel::from_row(row)?);
        self.models.write().insert(id.to_owned(), m.clone());
        Ok(m)
    }

    /// Model `id` if it is deployed, without touching the store: the
    /// catalog holds every deployed model (read at start, kept in step by
    /// deploy and remove), so a transition never reads a model under its
    /// lane.
    pub(crate) fn deployed(&self, id: &str) -> Option<Arc<DeployedModel>> {
        self.models.read().get(id).cloned()
    }

    /// Reads every deployed model into the catalog (at start). A model
    /// whose stored form cannot be read is left out with an error in the
    /// log; using it reports why.
    pub(crate) async fn load_models(&self) -> Result<(), EngineError> {
        let rows = Collection::<ModelRow>::new(self.store.clone())
            .query_all(&Query::new())
            .await?;
        let mut loaded = Vec::with_capacity(rows.len());
        for row in rows {
            let id = row.id.clone();
            match DeployedModel::from_row(row) {
                Ok(m) => loaded.push((id, Arc::new(m))),
                Err(e) => error!(model = %id, error = %e, "a deployed model cannot be read"),
            }
        }
        self.models.write().extend(loaded);
        Ok(())
    }

    pub(crate) async fn remove_model(&self, id: &str) -> Result<bool, EngineError> {
        self.check_open()?;
        let models = Collection::<ModelRow>::new(self.store.clone());
        let Some(row) = models.get(id).await? else {
            return Ok(false);
        };
        let mut ops = Collection::<ModelRow>::delete_ops(&row);
        ops.extend(self.trigger_delete_ops(id).await?);
        self.write(None, ops).await?;
        self.models.write().remove(id);
        Ok(true)
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
                Collection::<crate::engine::persist::rows::PackageRow>::put_row_op(
                    &crate::engine::persist::rows::PackageRow {
                        builtin: builtin.contains(&def.id),
                        package: def.clone(),
                    },
                )
            })
            .collect();
        self.write(None, ops).await
    }
}
