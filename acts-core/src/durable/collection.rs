//! [`Collection`]: typed rows over a `KvStore`, with a schema version per
//! row, secondary indexes kept in the same batch as the row, and queries.
//!
//! Layout (every component order-preserving, see `acts_store::keys`):
//! - row: `("r", collection, id)` → `{"v": version, "d": row}`;
//! - index entry: `("i", collection, field, value, id)` → the row id, for
//!   every indexed field of the row.

use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::Arc;

use acts_store::keys::{KeyBuilder, KeyReader};

pub use super::query::{Filter, IndexValue, Page, Query};
use acts_store::{BatchOp, KvStore, ScanRange, StoreError};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A row type stored in a [`Collection`].
pub trait Row: Serialize + DeserializeOwned + Clone + Send + Sync + 'static {
    /// The collection's name (a key component).
    const COLLECTION: &'static str;
    /// The current schema version written with every row.
    const VERSION: u32;
    /// The fields with a secondary index.
    const INDEXED: &'static [&'static str];

    /// Fields with no index of their own whose equality a composite index
    /// answers: `(field, pair_index)` — the rows whose `field` is `s` are
    /// those of `pair_index`'s entries [`IndexValue::Pair`]`(s, ..)`, in
    /// that index's order. One entry fewer per row to write.
    const EQ_BY_PAIR: &'static [(&'static str, &'static str)] = &[];

    /// Indexes rows of this type had once and have no more: an older
    /// store's entries of them are deleted when its indexes are filled in
    /// (see [`Collection::retired_ranges`]).
    const RETIRED: &'static [&'static str] = &[];

    /// The row's id, unique in the collection.
    fn id(&self) -> String;

    /// The row's value for each indexed field (same order as `INDEXED`).
    fn index_values(&self) -> Vec<IndexValue>;

    /// Puts back into a stored row's JSON what its id holds and its
    /// stored value leaves out (a task row does not repeat the process and
    /// task ids of its key). The default: nothing.
    fn fill_from_id(_id: &str, _row: &mut Value) {}

    /// Upgrades a row stored at an older `version` to the current shape.
    /// The default accepts the current version only.
    fn upgrade(version: u32, row: Value) -> Result<Value, String> {
        if version == Self::VERSION {
            Ok(row)
        } else {
            Err(format!(
                "no upgrade from version {version} to {}",
                Self::VERSION
            ))
        }
    }
}

/// Why a collection operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CollectionError {
    /// The store failed (never reported as "no row").
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored row could not be read (bad JSON, failed upgrade).
    #[error("{collection} row '{id}' is unreadable: {message}")]
    Corrupt {
        /// The collection.
        collection: &'static str,
        /// The row id.
        id: String,
        /// What is wrong.
        message: String,
    },
    /// A query that cannot run (e.g. ordering by a field with no index).
    #[error("{collection} query: {message}")]
    BadQuery {
        /// The collection.
        collection: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// How a row is stored: its schema version and its data.
#[derive(Serialize)]
struct Envelope<'a, V> {
    v: u32,
    d: &'a V,
}

/// How many keys a query reads from the store per round trip.
const SCAN_CHUNK: usize = 256;

/// Typed access to the rows of type `T`.
pub struct Collection<T: Row> {
    pub(super) store: Arc<dyn KvStore>,
    _rows: PhantomData<fn() -> T>,
}

impl<T: Row> Clone for Collection<T> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            _rows: PhantomData,
        }
    }
}

impl<T: Row> Collection<T> {
    /// The collection of `T` rows in `store`.
    pub fn new(store: Arc<dyn KvStore>) -> Self {
        Self {
            store,
            _rows: PhantomData,
        }
    }

    /// The prefix of every row key of this collection (for tools and
    /// tests that watch the store's keys).
    pub fn key_prefix() -> Vec<u8> {
        Self::row_prefix().finish()
    }

    fn row_prefix() -> KeyBuilder {
        KeyBuilder::new().str("r").str(T::COLLECTION)
    }

    /// The key of row `id`.
    pub fn row_key(id: &str) -> Vec<u8> {
        Self::row_prefix().str(id).finish()
    }

    pub(super) fn index_prefix(field: &str) -> KeyBuilder {
        KeyBuilder::new().str("i").str(T::COLLECTION).str(field)
    }

    /// The id in a row key (`None` for a key of another layout).
    fn id_of_row_key(key: &[u8]) -> Option<String> {
        let prefix = Self::row_prefix().finish();
        let mut r = KeyReader::new(key.strip_prefix(prefix.as_slice())?);
        r.str()
    }

    fn index_keys(row: &T) -> Vec<Vec<u8>> {
        let id = row.id();
        T::INDEXED
            .iter()
            .zip(row.index_values())
            .filter(|(_, value)| *value != IndexValue::Absent)
            .map(|(field, value)| value.encode(Self::index_prefix(field)).str(&id).finish())
            .collect()
    }

    /// The ops that store `new` (replacing `old`, the row as stored now, if
    /// any): the row and its index entries, for one atomic batch.
    pub fn upsert_ops(old: Option<&T>, new: &T) -> Vec<BatchOp> {
        let mut ops = Vec::new();
        let new_keys = Self::index_keys(new);
        if let Some(old) = old {
            for k in Self::index_keys(old) {
                if !new_keys.contains(&k) {
                    ops.push(BatchOp::delete(k));
                }
            }
        }
        ops.push(Self::put_row_op(new));
        let id = new.id();
        ops.extend(new_keys.into_iter().map(|k| BatchOp::put(k, id.as_bytes())));
        ops
    }

    /// The op that stores `row` alone, for a row whose indexed fields did
    /// not change since it was last stored with [`upsert_ops`](Self::upsert_ops).
    pub fn put_row_op(row: &T) -> BatchOp {
        let envelope = Envelope {
            v: T::VERSION,
            d: row,
        };
        // Row types are plain data (maps with string keys, numbers,
        // strings), which always serialize.
        let bytes = serde_json::to_vec(&envelope).unwrap_or_default();
        BatchOp::put(Self::row_key(&row.id()), bytes)
    }

    /// The op that stores, as row `id`, a borrowed view that serializes
    /// exactly as a `T` would (no copy of the row's data). Only for row
    /// types without indexes.
    pub fn put_view_op(id: &str, view: &impl Serialize) -> BatchOp {
        debug_assert!(T::INDEXED.is_empty(), "{} has indexes", T::COLLECTION);
        let envelope = Envelope {
            v: T::VERSION,
            d: view,
        };
        // Views are plain data, which always serializes.
        let bytes = serde_json::to_vec(&envelope).unwrap_or_default();
        BatchOp::put(Self::row_key(id), bytes)
    }

    /// The ops that (re)write `row`'s index entries alone: idempotent, for
    /// filling in an index added after rows were stored.
    pub fn index_ops(row: &T) -> Vec<BatchOp> {
        let id = row.id();
        Self::index_keys(row)
            .into_iter()
            .map(|k| BatchOp::put(k, id.as_bytes()))
            .collect()
    }

    /// The key prefix of the index entries of the rows whose `field` equals
    /// `value`: from `field`'s own index, or from the composite index that
    /// answers it ([`Row::EQ_BY_PAIR`]); `None` when neither has it.
    pub(super) fn eq_prefix(field: &str, value: &IndexValue) -> Option<Vec<u8>> {
        if T::INDEXED.contains(&field) {
            return Some(value.encode(Self::index_prefix(field)).finish());
        }
        let (_, pair) = T::EQ_BY_PAIR.iter().find(|(f, _)| *f == field)?;
        match value {
            IndexValue::Str(s) => Some(Self::index_prefix(pair).raw(&[0x04]).str(s).finish()),
            _ => None,
        }
    }

    /// The key ranges of the entries of the indexes this row type no
    /// longer keeps ([`Row::RETIRED`]).
    pub fn retired_ranges() -> Vec<ScanRange> {
        T::RETIRED.iter().map(|f| Self::index_range(f)).collect()
    }

    /// The key range of every entry of index `field`.
    pub fn index_range(field: &str) -> ScanRange {
        ScanRange::prefix(&Self::index_prefix(field).finish())
    }

    /// The key range of composite index `field`'s entries whose value is
    /// [`IndexValue::Pair`]`(first, n, _)`, in their integers' order; with
    /// `below`, only those with `n < below`.
    pub fn pair_range(field: &str, first: &str, below: Option<i64>) -> ScanRange {
        let prefix = Self::index_prefix(field).raw(&[0x04]).str(first).finish();
        let end = match below {
            Some(n) => Some(
                IndexValue::Pair(first.to_owned(), n, i64::MIN)
                    .encode(Self::index_prefix(field))
                    .finish(),
            ),
            None => acts_store::keys::prefix_successor(&prefix),
        };
        ScanRange::new(
            Bound::Included(prefix),
            end.map_or(Bound::Unbounded, Bound::Excluded),
        )
    }

    /// The ops that delete `row` and its index entries.
    pub fn delete_ops(row: &T) -> Vec<BatchOp> {
        let mut ops = vec![BatchOp::delete(Self::row_key(&row.id()))];
        ops.extend(Self::index_keys(row).into_iter().map(BatchOp::delete));
        ops
    }

    pub(super) fn no_index(field: &str) -> CollectionError {
        CollectionError::BadQuery {
            collection: T::COLLECTION,
            message: format!("'{field}' has no index"),
        }
    }

    pub(super) fn corrupt(id: &str, message: String) -> CollectionError {
        CollectionError::Corrupt {
            collection: T::COLLECTION,
            id: id.to_owned(),
            message,
        }
    }

    /// A stored row as JSON in the current schema (upgraded if older).
    fn decode_value(id: &str, bytes: &[u8]) -> Result<Value, CollectionError> {
        let corrupt = |message: String| Self::corrupt(id, message);
        let envelope: Value =
            serde_json::from_slice(bytes).map_err(|e| corrupt(format!("not JSON: {e}")))?;
        let version = envelope
            .get("v")
            .and_then(Value::as_u64)
            .ok_or_else(|| corrupt("no schema version".into()))?;
        let data = envelope
            .get("d")
            .cloned()
            .ok_or_else(|| corrupt("no data".into()))?;
        let mut row = T::upgrade(version as u32, data).map_err(corrupt)?;
        T::fill_from_id(id, &mut row);
        Ok(row)
    }

    /// A row from its upgraded JSON.
    fn from_value(id: &str, data: Value) -> Result<T, CollectionError> {
        serde_json::from_value(data).map_err(|e| Self::corrupt(id, format!("wrong shape: {e}")))
    }

    /// A row from its stored bytes (read by the caller, e.g. in a
    /// multi-read of several collections' rows).
    pub fn decode_row(id: &str, bytes: &[u8]) -> Result<T, CollectionError> {
        Self::decode(id, bytes)
    }

    fn decode(id: &str, bytes: &[u8]) -> Result<T, CollectionError> {
        Self::from_value(id, Self::decode_value(id, bytes)?)
    }

    /// Reads row `id`; `Ok(None)` when there is none, `Err` when the store
    /// fails or the row is unreadable.
    pub async fn get(&self, id: &str) -> Result<Option<T>, CollectionError> {
        match self.store.get(&Self::row_key(id)).await? {
            Some(bytes) => Ok(Some(Self::decode(id, &bytes)?)),
            None => Ok(None),
        }
    }

    /// Stores `row` (reading the stored version first to update indexes).
    pub async fn upsert(&self, row: &T) -> Result<(), CollectionError> {
        let old = self.get(&row.id()).await?;
        self.store
            .batch(Self::upsert_ops(old.as_ref(), row))
            .await?;
        Ok(())
    }

    /// Deletes row `id` and its index entries; a missing row is not an error.
    pub async fn delete(&self, id: &str) -> Result<(), CollectionError> {
        if let Some(old) = self.get(id).await? {
            self.store.batch(Self::delete_ops(&old)).await?;
        }
        Ok(())
    }

    /// One page of `query`.
    pub async fn query(&self, query: &Query) -> Result<Page<T>, CollectionError> {
        // Which keys to walk: the order field's index, else an index that
        // an equality filter pins to one value, else the rows themselves.
        let (prefix, from_index) = match &query.order_by {
            Some((field, _)) => {
                if !T::INDEXED.contains(&field.as_str()) {
                    return Err(CollectionError::BadQuery {
                        collection: T::COLLECTION,
                        message: format!(
                            "cannot order by '{field}': it has no index (indexed: {})",
                            T::INDEXED.join(", ")
                        ),
                    });
                }
                (Self::index_prefix(field).finish(), true)
            }
            None => match query.filters.iter().find_map(|f| match f {
                Filter::Eq(field, v) => Self::eq_prefix(field, &IndexValue::from_json(v)?),
                _ => None,
            }) {
                Some(prefix) => (prefix, true),
                None => (Self::row_prefix().finish(), false),
            },
        };
        let descending = query.order_by.as_ref().is_some_and(|(_, d)| *d);
        self.walk(ScanRange::prefix(&prefix), from_index, descending, query)
            .await
    }

    /// The rows whose index entries lie in `range` (keys of an index whose
    /// values are row ids, e.g. an index kept outside the collection's own)
    /// and match `query`'s filters, in key order (`descending`: reversed),
    /// a page of `query.limit` continuing after `query.after`.
    pub async fn query_index_range(
        &self,
        range: ScanRange,
        descending: bool,
        query: &Query,
    ) -> Result<Page<T>, CollectionError> {
        self.walk(range, true, descending, query).await
    }

    /// Walks `range` (index entries when `from_index`, else rows) for the
    /// rows matching `query`.
    async fn walk(
        &self,
        range: ScanRange,
        from_index: bool,
        descending: bool,
        query: &Query,
    ) -> Result<Page<T>, CollectionError> {
        let filter = Filter::And(query.filters.clone());
        let limit = query.limit.unwrap_or(usize::MAX);
        let mut range = range.with_reverse(descending);
        let mut rows = Vec::new();
        let mut keys = Vec::new();
        let mut last_key: Option<Vec<u8>> = None;
        if let Some(after) = &query.after {
            if descending {
                range.end = Bound::Excluded(after.clone());
            } else {
                range.start = Bound::Excluded(after.clone());
            }
        }
        // A small page reads a small chunk (more chunks follow if filters
        // reject rows).
        let chunk_len = SCAN_CHUNK.min(limit).max(1);
        loop {
            // A long walk over a store that answers at once (memory) must
            // not hold the worker: other requests run between chunks.
            tokio::task::consume_budget().await;
            let chunk = self.store.scan(range.clone().with_limit(chunk_len)).await?;
            let exhausted = chunk.len() < chunk_len;
            let ids: Vec<(Vec<u8>, String, Option<Vec<u8>>)> = chunk
                .into_iter()
                .map(|pair| {
                    if from_index {
                        // An index entry's value is the row id.
                        let id = String::from_utf8_lossy(&pair.value).into_owned();
                        (pair.key, id, None)
                    } else {
                        let id = Self::id_of_row_key(&pair.key).unwrap_or_default();
                        (pair.key, id, Some(pair.value))
                    }
                })
                .collect();
            // Index walks load their rows in one multi-read per chunk.
            let loaded = if from_index {
                let keys: Vec<Vec<u8>> = ids.iter().map(|(_, id, _)| Self::row_key(id)).collect();
                self.store.get_many(&keys).await?
            } else {
                ids.iter().map(|(_, _, v)| v.clone()).collect()
            };
            for ((key, id, _), bytes) in ids.iter().zip(loaded) {
                // Past this key whatever it holds (a chunk of nothing but
                // stale entries must still move the walk on).
                last_key = Some(key.clone());
                let Some(bytes) = bytes else {
                    continue; // an index entry whose row was deleted meanwhile
                };
                // Filter on the stored JSON; only matching rows are typed.
                let data = Self::decode_value(id, &bytes)?;
                if filter.matches(&data) {
                    rows.push(Self::from_value(id, data)?);
                    keys.push(key.clone());
                    if rows.len() >= limit {
                        return Ok(Page {
                            rows,
                            next: Some(key.clone()),
                            keys,
                        });
                    }
                }
            }
            if exhausted {
                return Ok(Page {
                    rows,
                    next: None,
                    keys,
                });
            }
            if let Some(k) = &last_key {
                if descending {
                    range.end = Bound::Excluded(k.clone());
                } else {
                    range.start = Bound::Excluded(k.clone());
                }
            }
        }
    }

    /// Every row whose id starts with `prefix` (ids with no `\0` byte in
    /// the prefix), in id order, read exhaustively. Rows that a caller
    /// always reads by an id prefix (a process's tasks: `pid/tid`) need no
    /// secondary index.
    pub async fn get_by_id_prefix(&self, prefix: &str) -> Result<Vec<T>, CollectionError> {
        let key_prefix = Self::row_prefix().str_prefix(prefix).finish();
        let mut rows = Vec::new();
        self.scan_all(&key_prefix, SCAN_CHUNK, |chunk| {
            for pair in chunk {
                let id = Self::id_of_row_key(&pair.key).unwrap_or_default();
                rows.push(Self::decode(&id, &pair.value)?);
            }
            Ok(())
        })
        .await?;
        Ok(rows)
    }

    /// Every key under `prefix`, in key order, `chunk` pairs per store
    /// read, each chunk handed to `each` (which may stop the scan with an
    /// error).
    pub(super) async fn scan_all(
        &self,
        prefix: &[u8],
        chunk: usize,
        mut each: impl FnMut(Vec<acts_store::KvPair>) -> Result<(), CollectionError>,
    ) -> Result<(), CollectionError> {
        let mut range = ScanRange::prefix(prefix);
        loop {
            let pairs = self.store.scan(range.clone().with_limit(chunk)).await?;
            let exhausted = pairs.len() < chunk;
            let last = pairs.last().map(|p| p.key.clone());
            each(pairs)?;
            match last {
                Some(k) if !exhausted => range.start = Bound::Excluded(k),
                _ => return Ok(()),
            }
        }
    }

    /// Every row matching `query`, reading page after page until the end
    /// (for recovery and cleanup: never silently truncated).
    pub async fn query_all(&self, query: &Query) -> Result<Vec<T>, CollectionError> {
        let mut q = query.clone();
        let mut all = Vec::new();
        loop {
            let page = self.query(&q).await?;
            all.extend(page.rows);
            match page.next {
                Some(next) => q.after = Some(next),
                None => return Ok(all),
            }
        }
    }
}
