//! The rows a boot and the background work read outside transitions: the
//! store's facts (meta rows), the wake index, the outbox of acts owed to
//! other processes, the seats a gate's home keeps, and the index entries of
//! an older store filled in.

use std::sync::Arc;

use acts_store::{BatchOp, KvStore};

use crate::durable::{Collection, CollectionError, Query, Row};

use crate::engine::persist::rows::{MetaRow, OpRow, WakeRow};
use crate::engine::persist::slot_rows::GateSeatRow;

/// Index entries (or rows) a fill handles per batch.
const FILL_CHUNK: usize = 1024;

/// One page of an index fill: the ops that write its rows' entries, how
/// many rows it read, and where the next page starts (`None`: the last).
pub(crate) struct FillPage {
    pub(crate) ops: Vec<BatchOp>,
    pub(crate) rows: usize,
    pub(crate) next: Option<Vec<u8>>,
}

/// The boot's rows of one store.
pub(crate) struct BootRows<'s> {
    store: &'s Arc<dyn KvStore>,
}

impl<'s> BootRows<'s> {
    pub(crate) fn new(store: &'s Arc<dyn KvStore>) -> Self {
        Self { store }
    }

    /// The value of fact `id` (`None`: not recorded).
    pub(crate) async fn fact(
        &self,
        id: &str,
    ) -> Result<Option<serde_json::Value>, CollectionError> {
        Ok(Collection::<MetaRow>::new(self.store.clone())
            .get(id)
            .await?
            .map(|m| m.value))
    }

    /// The op that records fact `id` as `value`.
    pub(crate) fn fact_op(id: &str, value: serde_json::Value) -> BatchOp {
        Collection::<MetaRow>::put_row_op(&MetaRow {
            id: id.to_owned(),
            value,
        })
    }

    /// Every wake row (what each process in flight waits for).
    pub(crate) async fn wakes(&self) -> Result<Vec<WakeRow>, CollectionError> {
        Collection::<WakeRow>::new(self.store.clone())
            .query_all(&Query::new())
            .await
    }

    /// The op that marks process `pid` to be resumed at the next start.
    pub(crate) fn resume_op(pid: &str) -> BatchOp {
        Collection::<WakeRow>::put_row_op(&WakeRow {
            id: pid.to_owned(),
            due: None,
            resume: true,
        })
    }

    /// Every outbox record, oldest first.
    pub(crate) async fn outbox(&self) -> Result<Vec<OpRow>, CollectionError> {
        Collection::<OpRow>::new(self.store.clone())
            .query_all(&Query::new().order_by("created_at", false))
            .await
    }

    /// Outbox record `id`.
    pub(crate) async fn outbox_record(&self, id: &str) -> Result<Option<OpRow>, CollectionError> {
        Collection::<OpRow>::new(self.store.clone()).get(id).await
    }

    /// The ops that store outbox record `op`.
    pub(crate) fn insert_outbox_ops(op: &OpRow) -> Vec<BatchOp> {
        Collection::upsert_ops(None, op)
    }

    /// The ops that delete outbox record `op`.
    pub(crate) fn delete_outbox_ops(op: &OpRow) -> Vec<BatchOp> {
        Collection::delete_ops(op)
    }

    /// Every seat kept here for other engines' tasks.
    pub(crate) async fn gate_seats(&self) -> Result<Vec<GateSeatRow>, CollectionError> {
        Collection::<GateSeatRow>::new(self.store.clone())
            .query_all(&Query::new())
            .await
    }

    /// The op that stores seat `row`.
    pub(crate) fn put_seat_op(row: &GateSeatRow) -> BatchOp {
        Collection::put_row_op(row)
    }

    /// The op that deletes the seat of `part` of `pid`.
    pub(crate) fn delete_seat_op(pid: &str, part: &str) -> BatchOp {
        BatchOp::delete(Collection::<GateSeatRow>::row_key(&GateSeatRow::id_of(
            pid, part,
        )))
    }

    /// The page of `R`'s rows from `after` (`None`: the first) with the
    /// ops that write their index entries (idempotent puts).
    pub(crate) async fn fill_page<R: Row>(
        &self,
        after: Option<Vec<u8>>,
    ) -> Result<FillPage, CollectionError> {
        let mut q = Query::new().limit(FILL_CHUNK);
        q.after = after;
        let page = Collection::<R>::new(self.store.clone()).query(&q).await?;
        Ok(FillPage {
            ops: page
                .rows
                .iter()
                .flat_map(Collection::<R>::index_ops)
                .collect(),
            rows: page.rows.len(),
            next: page.next,
        })
    }

    /// The deletes of up to a chunk of entries of indexes `R` retired
    /// ([`Row::RETIRED`]); none once every such entry is gone.
    pub(crate) async fn retired_entries<R: Row>(&self) -> Result<Vec<BatchOp>, CollectionError> {
        for range in Collection::<R>::retired_ranges() {
            let keys = self.store.scan(range.with_limit(FILL_CHUNK)).await?;
            if !keys.is_empty() {
                return Ok(keys.into_iter().map(|p| BatchOp::delete(p.key)).collect());
            }
        }
        Ok(Vec::new())
    }
}
