//! The reads of the queries and listings — the one way the api room reads
//! the store: a page of rows through an index walk ([`Walk`]) or in a
//! query's order, every row matching a query, the keys of a walk counted
//! (no row read), the rows of one state counted, and the stored messages
//! of deliveries.

use std::sync::Arc;

use acts_store::keys::prefix_successor;
use acts_store::{KvStore, ScanRange, StoreError};

use crate::durable::{Collection, CollectionError, IndexValue, Page, Query, Row};
use crate::scheduler::{Message, TaskState};

use crate::engine::persist::delivery_rows::{DeliveryRow, MessageRow};
use crate::engine::persist::rows::ProcRow;
use crate::engine::persist::var_index::var_prefix;
use crate::engine::types::info::DeliveryState;

/// Which index a query walks (in its order, or reversed).
#[derive(Debug, Clone)]
pub(crate) enum Walk<'a> {
    /// The processes of a state, in admission order.
    ProcsInState(TaskState),
    /// The processes of a model, in admission order.
    ProcsOfModel(&'a str),
    /// Every process, in admission order.
    Procs,
    /// The processes with gated tasks (the sparse `gated` index), by pid.
    ProcsGated,
    /// The entries of a model's variable index in a range of values.
    ProcVar(ScanRange),
    /// The deliveries of a state, oldest first.
    DeliveriesInState(DeliveryState),
    /// The deliveries of a durable channel, oldest first.
    DeliveriesOfChannel(&'a str),
    /// Every delivery, by channel.
    Deliveries,
}

impl Walk<'_> {
    /// The walk's range of index keys.
    fn range(&self) -> ScanRange {
        match self {
            Walk::ProcsInState(st) => {
                Collection::<ProcRow>::pair_range("state_time", st.as_str(), None)
            }
            Walk::ProcsOfModel(m) => Collection::<ProcRow>::pair_range("model_time", m, None),
            Walk::Procs => Collection::<ProcRow>::index_range("timestamp"),
            Walk::ProcsGated => Collection::<ProcRow>::index_range("gated"),
            Walk::ProcVar(range) => range.clone(),
            Walk::DeliveriesInState(s) => {
                Collection::<DeliveryRow>::pair_range("state_time", s.as_str(), None)
            }
            Walk::DeliveriesOfChannel(c) => {
                Collection::<DeliveryRow>::pair_range("channel_time", c, None)
            }
            Walk::Deliveries => Collection::<DeliveryRow>::index_range("channel_time"),
        }
    }
}

/// The key range of variable `name` of model `mid` from `min` to `max`
/// (inclusive; `None`: open) among the values of `kind`'s kind.
pub(crate) fn var_range(
    mid: &str,
    name: &str,
    kind: &IndexValue,
    min: Option<&IndexValue>,
    max: Option<&IndexValue>,
) -> ScanRange {
    let prefix = || var_prefix(mid, name);
    // The entries of this kind of value: from the kind's first key to the
    // first key past its last.
    let kind_start = kind.kind_floor().encode(prefix()).finish();
    let start = match min {
        Some(v) => v.encode(prefix()).finish(),
        None => kind_start.clone(),
    };
    // The prefix and the kind's tag byte: its successor ends the kind.
    let kind_len = prefix().finish().len() + 1;
    let end = match max {
        Some(v) => prefix_successor(&v.encode(prefix()).finish()),
        None => prefix_successor(&kind_start[..kind_len]),
    };
    ScanRange::new(
        std::ops::Bound::Included(start),
        end.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded),
    )
}

/// The reads of one store.
pub(crate) struct Reads<'s> {
    store: &'s Arc<dyn KvStore>,
}

impl<'s> Reads<'s> {
    pub(crate) fn new(store: &'s Arc<dyn KvStore>) -> Self {
        Self { store }
    }

    /// One page of the rows matching `query`: through `walk` (reversed
    /// with `descending`), else in the query's own order.
    pub(crate) async fn page<R: Row>(
        &self,
        walk: Option<Walk<'_>>,
        descending: bool,
        query: &Query,
    ) -> Result<Page<R>, CollectionError> {
        let rows = Collection::<R>::new(self.store.clone());
        match walk {
            Some(w) => rows.query_index_range(w.range(), descending, query).await,
            None => rows.query(query).await,
        }
    }

    /// Row `id` of `R`.
    pub(crate) async fn row<R: Row>(&self, id: &str) -> Result<Option<R>, CollectionError> {
        Collection::<R>::new(self.store.clone()).get(id).await
    }

    /// The rows of `R` with `ids`, in order (`None`: not stored), in one
    /// multi-read.
    pub(crate) async fn rows<R: Row>(
        &self,
        ids: &[String],
    ) -> Result<Vec<Option<R>>, CollectionError> {
        let keys: Vec<Vec<u8>> = ids.iter().map(|id| Collection::<R>::row_key(id)).collect();
        let stored = self
            .store
            .get_many(&keys)
            .await
            .map_err(CollectionError::from)?;
        ids.iter()
            .zip(stored)
            .map(|(id, bytes)| {
                bytes
                    .map(|b| Collection::<R>::decode_row(id, &b))
                    .transpose()
            })
            .collect()
    }

    /// Every row matching `query`.
    pub(crate) async fn all<R: Row>(&self, query: &Query) -> Result<Vec<R>, CollectionError> {
        Collection::<R>::new(self.store.clone())
            .query_all(query)
            .await
    }

    /// How many index keys `walk` holds (keys only: no row is read).
    pub(crate) async fn count(&self, walk: Walk<'_>) -> Result<usize, StoreError> {
        const CHUNK: usize = 4096;
        let mut range = walk.range();
        let mut n = 0;
        loop {
            let keys = self.store.scan(range.clone().with_limit(CHUNK)).await?;
            n += keys.len();
            match keys.last() {
                Some(last) if keys.len() == CHUNK => {
                    range.start = std::ops::Bound::Excluded(last.key.clone());
                }
                _ => return Ok(n),
            }
        }
    }

    /// How many rows of `R` are in `state` (from its state index: keys
    /// only).
    pub(crate) async fn count_in_state<R: Row>(
        &self,
        state: &str,
    ) -> Result<usize, CollectionError> {
        let mut n = 0;
        Collection::<R>::new(self.store.clone())
            .index_ids("state", IndexValue::Str(state.to_owned()), |ids| {
                n += ids.len()
            })
            .await?;
        Ok(n)
    }

    /// The stored messages of `ids`, in order (`None`: no longer stored),
    /// in one multi-read.
    pub(crate) async fn messages(
        &self,
        ids: &[&str],
    ) -> Result<Vec<Option<Message>>, CollectionError> {
        let ids: Vec<String> = ids.iter().map(|id| (*id).to_owned()).collect();
        let rows = self.rows::<MessageRow>(&ids).await?;
        Ok(rows.into_iter().map(|r| r.map(|r| r.message)).collect())
    }
}
