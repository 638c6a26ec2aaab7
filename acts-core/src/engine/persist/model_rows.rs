//! The rows of the model catalog: each model's latest version (the model
//! row), every version kept (version rows; a store written before versions
//! existed keeps its latest in the model row only) and the packages a
//! deploy records.

use std::sync::Arc;

use acts_store::{BatchOp, KvStore};

use crate::durable::{Collection, CollectionError, Filter, Query};

use crate::engine::persist::rows::{ModelRow, ModelVersionRow, PackageRow, version_row_id};

/// The model, version and package rows of one store.
pub(crate) struct ModelRows<'s> {
    store: &'s Arc<dyn KvStore>,
}

impl<'s> ModelRows<'s> {
    pub(crate) fn new(store: &'s Arc<dyn KvStore>) -> Self {
        Self { store }
    }

    /// The row of model `id` (its latest version).
    pub(crate) async fn model(&self, id: &str) -> Result<Option<ModelRow>, CollectionError> {
        Collection::<ModelRow>::new(self.store.clone())
            .get(id)
            .await
    }

    /// Every model row.
    pub(crate) async fn models(&self) -> Result<Vec<ModelRow>, CollectionError> {
        Collection::<ModelRow>::new(self.store.clone())
            .query_all(&Query::new())
            .await
    }

    /// The version row of version `revision` of model `id`.
    pub(crate) async fn version(
        &self,
        id: &str,
        revision: u32,
    ) -> Result<Option<ModelVersionRow>, CollectionError> {
        Collection::<ModelVersionRow>::new(self.store.clone())
            .get(&version_row_id(id, revision))
            .await
    }

    /// The version rows of model `id`.
    pub(crate) async fn versions(&self, id: &str) -> Result<Vec<ModelVersionRow>, CollectionError> {
        Collection::<ModelVersionRow>::new(self.store.clone())
            .query_all(&Query::new().filter(Filter::eq("mid", id)))
            .await
    }

    /// The ops that store model row `new` over `old` (`None`: a new model).
    pub(crate) fn upsert_model_ops(old: Option<&ModelRow>, new: &ModelRow) -> Vec<BatchOp> {
        Collection::upsert_ops(old, new)
    }

    /// The ops that delete model row `row`.
    pub(crate) fn delete_model_ops(row: &ModelRow) -> Vec<BatchOp> {
        Collection::delete_ops(row)
    }

    /// The ops that store version row `row`.
    pub(crate) fn insert_version_ops(row: &ModelVersionRow) -> Vec<BatchOp> {
        Collection::upsert_ops(None, row)
    }

    /// The ops that delete version row `row`.
    pub(crate) fn delete_version_ops(row: &ModelVersionRow) -> Vec<BatchOp> {
        Collection::delete_ops(row)
    }

    /// The op that records package `row`.
    pub(crate) fn put_package_op(row: &PackageRow) -> BatchOp {
        Collection::put_row_op(row)
    }
}
