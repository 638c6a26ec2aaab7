//! The process rows as the kernel and the services read them outside a
//! transition: one row, the rows of a state, and the ids its indexes hold
//! (the boot's count, a version's users, the gated and the quiet ones, the
//! holders of concurrency slots) — and the ops that store a row written
//! outside the process's own transition (a parked start, a migration).

use std::sync::Arc;

use acts_store::{BatchOp, KvStore};

use crate::durable::{Collection, CollectionError, Filter, IndexValue, Query};
use crate::scheduler::TaskState;

use crate::engine::persist::rows::ProcRow;

/// The process rows of one store.
pub(crate) struct ProcRows<'s> {
    store: &'s Arc<dyn KvStore>,
}

impl<'s> ProcRows<'s> {
    pub(crate) fn new(store: &'s Arc<dyn KvStore>) -> Self {
        Self { store }
    }

    fn rows(&self) -> Collection<ProcRow> {
        Collection::new(self.store.clone())
    }

    /// The row of process `pid`.
    pub(crate) async fn get(&self, pid: &str) -> Result<Option<ProcRow>, CollectionError> {
        self.rows().get(pid).await
    }

    /// Every row in `state`.
    pub(crate) async fn in_state(&self, state: TaskState) -> Result<Vec<ProcRow>, CollectionError> {
        self.rows()
            .query_all(&Query::new().filter(Filter::eq("state", state.as_str())))
            .await
    }

    /// One bounded read of the rows in `state` (whether the store answers).
    pub(crate) async fn probe(&self, state: TaskState) -> Result<(), CollectionError> {
        self.rows()
            .query(
                &Query::new()
                    .filter(Filter::eq("state", state.as_str()))
                    .limit(1),
            )
            .await
            .map(drop)
    }

    /// The ids of the processes in `state`, from the state index alone, in
    /// chunks handed to `each`.
    pub(crate) async fn ids_in_state(
        &self,
        state: TaskState,
        each: impl FnMut(Vec<String>),
    ) -> Result<(), CollectionError> {
        self.rows()
            .index_ids("state", IndexValue::Str(state.as_str().to_owned()), each)
            .await
    }

    /// The ids of the processes stored on version `revision` of model
    /// `mid`, from the version index alone, in chunks handed to `each`.
    pub(crate) async fn ids_on_version(
        &self,
        mid: &str,
        revision: u32,
        each: impl FnMut(Vec<String>),
    ) -> Result<(), CollectionError> {
        self.rows()
            .index_ids(
                "version",
                IndexValue::Str(format!("{mid}@{revision}")),
                each,
            )
            .await
    }

    /// The processes with a task waiting at a gate (the sparse `gated`
    /// index), by pid.
    pub(crate) async fn gated_ids(&self) -> Result<Vec<String>, CollectionError> {
        let mut pids = Vec::new();
        self.rows()
            .index_str_entries("gated", |entries| {
                pids.extend(entries.into_iter().map(|(_, pid)| pid));
            })
            .await?;
        Ok(pids)
    }

    /// The processes that hold a slot of a concurrency key, as `(key,
    /// pid)` (the sparse `slot` index).
    pub(crate) async fn slot_holders(&self) -> Result<Vec<(String, String)>, CollectionError> {
        let mut holders = Vec::new();
        self.rows()
            .index_str_entries("slot", |entries| holders.extend(entries))
            .await?;
        Ok(holders)
    }

    /// At most `limit` processes quiet since before `bound` (ms), from the
    /// `quiet` index.
    pub(crate) async fn quiet_before(
        &self,
        bound: i64,
        limit: usize,
    ) -> Result<Vec<String>, CollectionError> {
        self.rows().index_ids_below("quiet", bound, limit).await
    }

    /// The ops that store a new process row.
    pub(crate) fn insert_ops(row: &ProcRow) -> Vec<BatchOp> {
        Collection::upsert_ops(None, row)
    }

    /// The ops that change row `old` into `new` (its index entries follow).
    pub(crate) fn update_ops(old: &ProcRow, new: &ProcRow) -> Vec<BatchOp> {
        Collection::upsert_ops(Some(old), new)
    }
}
