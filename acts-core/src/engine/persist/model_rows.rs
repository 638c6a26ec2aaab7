//! The rows of the model catalog: each model's latest version (the model
//! row), every version kept (version rows; a store written before versions
//! existed keeps its latest in the model row only) and the packages a
//! deploy records.

use std::sync::Arc;

use acts_store::{BatchOp, KvStore};

use serde::{Deserialize, Serialize};

use crate::durable::{Collection, CollectionError, Filter, IndexValue, Query, impl_row};

/// A deployed model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRow {
    /// Model id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Version.
    pub ver: String,
    /// The model as JSON (what a process of it is built from).
    pub model: String,
    /// When it was (last) deployed, ms on the engine clock.
    pub deployed_at: i64,
    /// How many times it was deployed.
    pub revision: u32,
}

impl_row!(ModelRow, "models", version = 1, |r| r.id.clone(), {
    "deployed_at" => IndexValue::Int(r.deployed_at),
});

/// One version of a model: what a deploy that changed the model's content
/// stored. A process runs the version it started on (its
/// [`ProcRow::rev`]) to its end, whatever is deployed later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelVersionRow {
    /// Model id.
    pub mid: String,
    /// The engine's revision number of this version (1, 2, …).
    pub revision: u32,
    /// Display name.
    pub name: String,
    /// The model's own `ver`.
    pub ver: String,
    /// The model as JSON.
    pub model: String,
    /// When it was deployed, ms on the engine clock.
    pub deployed_at: i64,
}

/// The row id of version `revision` of model `mid` (zero-padded, so a
/// model's versions sort by revision).
pub fn version_row_id(mid: &str, revision: u32) -> String {
    format!("{mid}@{revision:010}")
}

impl_row!(ModelVersionRow, "model_versions", version = 1, |r| version_row_id(&r.mid, r.revision), {
    "mid" => IndexValue::Str(r.mid.clone()),
});

impl From<&ModelVersionRow> for ModelRow {
    fn from(v: &ModelVersionRow) -> Self {
        ModelRow {
            id: v.mid.clone(),
            name: v.name.clone(),
            ver: v.ver.clone(),
            model: v.model.clone(),
            deployed_at: v.deployed_at,
            revision: v.revision,
        }
    }
}

impl From<&ModelRow> for ModelVersionRow {
    fn from(m: &ModelRow) -> Self {
        ModelVersionRow {
            mid: m.id.clone(),
            revision: m.revision,
            name: m.name.clone(),
            ver: m.ver.clone(),
            model: m.model.clone(),
            deployed_at: m.deployed_at,
        }
    }
}

/// A package the engine knows (built-in or registered by the
/// application), published at start so tools can list them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackageRow {
    /// The definition.
    pub package: crate::package::PackageDefinition,
    /// Whether it is built in.
    pub builtin: bool,
}

impl_row!(
    PackageRow,
    "packages",
    version = 1,
    |r| r.package.id.clone(),
    {}
);

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
