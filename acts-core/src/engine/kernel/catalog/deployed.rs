//! A deployed model version ([`DeployedModel`]): its row and its tree, the
//! definition read back from its version row when asked for.

use std::sync::Arc;

use crate::model::Workflow;
use crate::tree::ModelTree;

use crate::engine::persist::model_rows::ModelRow;
use crate::engine::persist::model_rows::ModelRows;
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
