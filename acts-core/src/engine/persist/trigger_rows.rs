//! The rows of models' triggers (manual, hook, schedule): read by the
//! trigger service, written with their model's deploy or removal.

use std::sync::Arc;

use acts_store::{BatchOp, KvStore};

use serde::{Deserialize, Serialize};

use crate::durable::{Collection, CollectionError, Filter, IndexValue, Query, impl_row};

/// A model's trigger (`on:`), with the schedule state of cron triggers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TriggerRow {
    /// `<model id>:<trigger id>`.
    pub id: String,
    /// The model.
    pub mid: String,
    /// The trigger id.
    pub trigger: String,
    /// `manual`, `hook`, `schedule`, ...
    pub kind: String,
    /// Default start params.
    pub params: serde_json::Value,
    /// Cron expression (schedules).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// When it fires next (ms; 0: never).
    pub next_run: i64,
    /// When it last fired (ms; 0: never).
    pub last_run: i64,
}

// Stored under the collection's first name, `events`, so stores written
// before the rename keep their triggers and schedules.
impl_row!(TriggerRow, "events", version = 1, |r| r.id.clone(), {
    "kind" => IndexValue::Str(r.kind.clone()),
    "mid" => IndexValue::Str(r.mid.clone()),
});

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
