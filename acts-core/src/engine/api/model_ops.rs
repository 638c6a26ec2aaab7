//! [`Executor::model`]: the models' handle.
//!
//! Each handle borrows the executor (and so its principal) and groups
//! what belongs to one concern; `Executor`'s own methods are only these
//! accessors and who it acts for.

use crate::model::Workflow;

use crate::engine::api::executor::Executor;
use crate::engine::types::error::EngineError;
use crate::engine::types::info::{MigrationPlan, MigrationReport, ModelInfo, ModelVersionInfo};

impl Executor {
    /// The models: deploying, reading, versions, migrating processes between versions, removing.
    pub fn model(&self) -> ModelOps<'_> {
        ModelOps { exec: self }
    }
}

/// The models: deploying, reading, versions, migrating processes between versions, removing. From [`Executor::model`].
#[derive(Debug, Clone, Copy)]
pub struct ModelOps<'a> {
    exec: &'a Executor,
}

impl ModelOps<'_> {
    /// Validates and deploys `workflow` (a new deploy of an id replaces it
    /// for processes started afterwards).
    pub async fn deploy(self, workflow: &Workflow) -> Result<ModelInfo, EngineError> {
        self.exec.deploy(workflow).await
    }

    /// Parses, validates and deploys a YAML model; errors name the line and
    /// column. What deploys but looks wrong (a key the language does not
    /// have, an interrupt without a key) comes back in
    /// [`ModelInfo::warnings`].
    pub async fn deploy_yaml(self, text: &str) -> Result<ModelInfo, EngineError> {
        self.exec.deploy_yaml(text).await
    }

    /// A deployed model and its definition.
    pub async fn get(self, id: &str) -> Result<(ModelInfo, Workflow), EngineError> {
        self.exec.model_of(id).await
    }

    /// Model `id`'s summary (its name, version, deploys), without reading
    /// its definition back: what a listing shows of it.
    pub async fn info(self, id: &str) -> Result<ModelInfo, EngineError> {
        self.exec.model_info(id).await
    }

    /// Every deployed model, oldest deploy first.
    pub async fn list(self) -> Result<Vec<ModelInfo>, EngineError> {
        self.exec.models().await
    }

    /// Removes a model: no process starts from it any more. Processes
    /// running on its versions end on them (those versions are kept, see
    /// [`versions`](Self::versions)). Returns whether it existed.
    pub async fn remove(self, id: &str) -> Result<bool, EngineError> {
        self.exec.remove_model(id).await
    }

    /// Every stored version of model `id`, oldest first: its revision,
    /// `ver`, when it was deployed, whether new processes start on it, and
    /// how many stored (and unfinished) processes run on it.
    pub async fn versions(self, id: &str) -> Result<Vec<ModelVersionInfo>, EngineError> {
        self.exec.versions(id).await
    }

    /// Version `revision` of model `id` and its definition.
    pub async fn version(
        self,
        id: &str,
        revision: u32,
    ) -> Result<(ModelInfo, Workflow), EngineError> {
        self.exec.model_version(id, revision).await
    }

    /// Removes version `revision` of model `id`; refused (nothing removed)
    /// while it is the latest or any stored process runs on it. Returns
    /// whether it existed.
    pub async fn remove_version(self, id: &str, revision: u32) -> Result<bool, EngineError> {
        self.exec.remove_version(id, revision).await
    }

    /// Moves the live processes of `plan.model` from version `plan.from` to
    /// `plan.to` (admin): each in one atomic batch or not at all, nodes
    /// mapped by id or by `plan.map`, `plan.vars` set, the move recorded in
    /// its history. With `dry_run` nothing is written and the report says
    /// what would happen to each process. See `docs/OPERATIONS.md`.
    pub async fn migrate(
        self,
        plan: &MigrationPlan,
        dry_run: bool,
    ) -> Result<MigrationReport, EngineError> {
        self.exec.migrate(plan, dry_run).await
    }
}
