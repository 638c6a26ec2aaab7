//! The rows of models' triggers (manual, hook, schedule): read by the
//! trigger service, written with their model's deploy or removal.

use std::sync::Arc;

use acts_store::{BatchOp, KvStore};

use crate::durable::{Collection, CollectionError, Filter, Query};

use crate::engine::persist::rows::TriggerRow;

/// The trigger rows of one store.
pub(crate) struct TriggerRows<'s> {
    store: &'s Arc<dyn KvStore>,
}

impl<'s> TriggerRows<'s> {
    pub(crate) fn new(store: &'s Arc<dyn KvStore>) -> Self {
        Self { store }
    }

    fn rows(&self) -> Collection<TriggerRow> {
        Collection::new(self.store.clone())
    }

    /// Trigger `id` (`<model>:<trigger>`).
    pub(crate) async fn get(&self, id: &str) -> Result<Option<TriggerRow>, CollectionError> {
        self.rows().get(id).await
    }

    /// The triggers of model `mid`.
    pub(crate) async fn of_model(&self, mid: &str) -> Result<Vec<TriggerRow>, CollectionError> {
        self.rows()
            .query_all(&Query::new().filter(Filter::eq("mid", mid)))
            .await
    }

    /// The triggers of `kind` (`manual`, `hook`, `schedule`), every model's.
    pub(crate) async fn of_kind(&self, kind: &str) -> Result<Vec<TriggerRow>, CollectionError> {
        self.rows()
            .query_all(&Query::new().filter(Filter::eq("kind", kind)))
            .await
    }

    /// The ops that store `row` over `previous` (`None`: a new trigger).
    pub(crate) fn upsert_ops(previous: Option<&TriggerRow>, row: &TriggerRow) -> Vec<BatchOp> {
        Collection::upsert_ops(previous, row)
    }

    /// The op that rewrites `row` whose indexed fields did not change (a
    /// schedule rolled forward).
    pub(crate) fn rewrite_op(row: &TriggerRow) -> BatchOp {
        Collection::put_row_op(row)
    }

    /// The ops that delete `row` with its index entries.
    pub(crate) fn delete_ops(row: &TriggerRow) -> Vec<BatchOp> {
        Collection::delete_ops(row)
    }
}
