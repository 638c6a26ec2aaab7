//! Deploying models: validation, the scripts' syntax, the stored version
//! and its triggers in one batch (and publishing the package definitions
//! for tools). What is deployed is read through the [`Catalog`] (in
//! memory, kept in step by deploy and remove), so a transition asks it —
//! never the store — which models a subflow may start.
//!
//! A deploy whose content equals the latest version changes nothing; any
//! other deploy stores a new version (the next revision). A process runs
//! the version it started on to its end (`ProcRow::rev`), so a version
//! that unfinished processes use is never deleted (`versions.rs`).

use std::sync::Arc;

use crate::model::{ModelError, SourceMap, Workflow, script_sites, validate};
use crate::script::{ScriptEngine, ScriptError};
use crate::tree::ModelTree;

use super::{Catalog, DeployedModel};
use crate::engine::persist::model_rows::ModelRow;
use crate::engine::persist::model_rows::ModelRows;
use crate::engine::types::error::EngineError;
use crate::engine::types::info::ModelInfo;

impl Catalog {
    /// Validates and stores a model. Content equal to the model's latest
    /// version changes nothing (the same version is returned); any other
    /// content becomes a new version, which processes started afterwards
    /// run.
    pub(crate) async fn deploy(
        &self,
        workflow: &Workflow,
        source: &SourceMap,
    ) -> Result<ModelInfo, EngineError> {
        let host = self.host()?;
        host.check_open()?;
        let json = workflow.to_json();
        if json.len() > host.max_model_bytes() {
            return Err(EngineError::TooLarge {
                what: format!("model '{}'", workflow.id),
                size: json.len(),
                limit: host.max_model_bytes(),
                setting: "model_limits.max_bytes",
            });
        }
        validate(workflow, source, host.packages())?;
        check_scripts(host.scripts(), workflow, source)?;
        if let Some(refusal) = host.gate_refusal()
            && crate::model::has_node_gates(workflow)
        {
            return Err(crate::model::ModelError::Invalid {
                model: workflow.id.clone(),
                node: None,
                location: None,
                message: refusal.into(),
            }
            .into());
        }
        let mut tree = ModelTree::build(workflow)?;
        let _changes = self.lock_changes().await;
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
            deployed_at: host.now(),
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
        ops.extend(host.trigger_ops(workflow).await?);
        host.write(ops).await?;
        if workflow.on.iter().any(|t| t.kind == "schedule") {
            host.arm_schedules().await?;
        }
        let info = ModelInfo::from(&row);
        tree.revision = revision;
        self.publish(Arc::new(DeployedModel::new(row, tree)));
        Ok(info)
    }

    /// Stores the definition of every package the engine knows (one
    /// batch), so tools can list them.
    pub(crate) async fn publish_packages(&self) -> Result<(), EngineError> {
        let builtin: Vec<String> = crate::package::builtin_packages()
            .into_iter()
            .map(|d| d.id)
            .collect();
        let host = self.host()?;
        let packages = host.packages();
        let ops = packages
            .ids()
            .into_iter()
            .filter_map(|id| packages.get(id))
            .map(|def| {
                ModelRows::put_package_op(&crate::engine::persist::model_rows::PackageRow {
                    builtin: builtin.contains(&def.id),
                    package: def.clone(),
                })
            })
            .collect();
        host.write(ops).await
    }
}

/// Every script of `workflow` parses: a syntax error is a deploy error
/// quoting the user's own text and where it is, not a run-time failure
/// about a brace the user never wrote.
fn check_scripts(
    scripts: &ScriptEngine,
    workflow: &Workflow,
    source: &SourceMap,
) -> Result<(), EngineError> {
    for site in script_sites(workflow) {
        let Err(e) = scripts.check_syntax(&site.text) else {
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
