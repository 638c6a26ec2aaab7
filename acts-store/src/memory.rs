//! [`MemoryStore`]: the embedded default store, an ordered map in memory.

use std::collections::BTreeMap;
use std::ops::Bound;

use async_trait::async_trait;
use parking_lot::RwLock;

use crate::error::{StoreOp, StoreResult};
use crate::kv::{
    BatchOp, Condition, KvPair, KvStore, ScanRange, validate_batch, validate_conditional,
    validate_key, validate_keys,
};

const BACKEND: &str = "memory";

/// An in-memory [`KvStore`] over a `BTreeMap`.
///
/// Keys and values are kept as boxed slices of exactly their length (a
/// value serialized into a growing buffer would otherwise keep its
/// spare capacity for as long as it is stored).
///
/// Durability: none; the data lives as long as the value. A batch is applied
/// under one write lock, and every read (point, multi, scan) runs under one
/// read lock, so no reader ever sees half a batch. Locks are never held across
/// an `.await`: every method finishes its work synchronously.
#[derive(Debug, Default)]
pub struct MemoryStore {
    map: RwLock<Pairs>,
}

/// The stored pairs, in key order.
type Pairs = BTreeMap<Box<[u8]>, Box<[u8]>>;

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many keys are stored.
    pub fn len(&self) -> usize {
        self.map.read().len()
    }

    /// Whether the store holds no key.
    pub fn is_empty(&self) -> bool {
        self.map.read().is_empty()
    }

    /// A copy of every pair, in key order (for tests and debugging).
    pub fn snapshot(&self) -> Vec<KvPair> {
        self.map.read().iter().map(|(k, v)| pair(k, v)).collect()
    }

    /// Applies `ops` in order; the caller holds the write lock.
    fn apply(map: &mut Pairs, ops: Vec<BatchOp>) {
        for op in ops {
            match op {
                BatchOp::Put { key, value } => {
                    map.insert(key.into_boxed_slice(), value.into_boxed_slice());
                }
                BatchOp::Delete { key } => {
                    map.remove(key.as_slice());
                }
            }
        }
    }
}

#[async_trait]
impl KvStore for MemoryStore {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    fn persistence(&self) -> crate::Persistence {
        crate::Persistence::Weak(
            "the memory store lives in this process: everything is gone when it ends".into(),
        )
    }

    async fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        validate_key(BACKEND, StoreOp::Get, key)?;
        Ok(self.map.read().get(key).map(|v| v.to_vec()))
    }

    async fn get_many(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        validate_keys(BACKEND, StoreOp::GetMany, keys)?;
        let map = self.map.read();
        Ok(keys
            .iter()
            .map(|k| map.get(k.as_slice()).map(|v| v.to_vec()))
            .collect())
    }

    async fn batch(&self, ops: Vec<BatchOp>) -> StoreResult<()> {
        validate_batch(BACKEND, StoreOp::Batch, &ops)?;
        if ops.is_empty() {
            return Ok(());
        }
        Self::apply(&mut self.map.write(), ops);
        Ok(())
    }

    async fn batch_if(&self, conditions: Vec<Condition>, ops: Vec<BatchOp>) -> StoreResult<bool> {
        validate_conditional(BACKEND, &conditions, &ops)?;
        // One write lock for the check and the ops.
        let mut map = self.map.write();
        if !conditions
            .iter()
            .all(|c| c.holds(map.get(c.key.as_slice()).map(|v| &**v)))
        {
            return Ok(false);
        }
        Self::apply(&mut map, ops);
        Ok(true)
    }

    async fn scan(&self, range: ScanRange) -> StoreResult<Vec<KvPair>> {
        if range.is_empty() {
            return Ok(Vec::new());
        }
        let map = self.map.read();
        let bounds = (as_slice(&range.start), as_slice(&range.end));
        let iter = map.range::<[u8], _>(bounds);
        let limit = range.limit_or_max();
        Ok(if range.reverse {
            iter.rev().take(limit).map(|(k, v)| pair(k, v)).collect()
        } else {
            iter.take(limit).map(|(k, v)| pair(k, v)).collect()
        })
    }
}

/// A stored pair, copied out.
fn pair(key: &[u8], value: &[u8]) -> KvPair {
    KvPair::new(key.to_vec(), value.to_vec())
}

fn as_slice(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(v) => Bound::Included(v.as_slice()),
        Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn scan_of_inverted_range_is_empty_not_a_panic() {
        let store = MemoryStore::new();
        store.put(b"a", b"1").await.unwrap();
        let range = ScanRange::new(
            Bound::Excluded(b"b".to_vec()),
            Bound::Excluded(b"a".to_vec()),
        );
        assert!(store.scan(range).await.unwrap().is_empty());
        assert_eq!(store.len(), 1);
    }
}
