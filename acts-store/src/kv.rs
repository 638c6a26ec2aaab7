//! The [`KvStore`] trait and the values it takes and returns.

use std::ops::Bound;

use async_trait::async_trait;

use crate::error::{ErrorKind, StoreError, StoreOp, StoreResult};
use crate::keys::prefix_successor;

/// The longest key the contract accepts, in bytes. Longer keys are rejected
/// with [`ErrorKind::InvalidInput`] by every backend alike.
pub const MAX_KEY_LEN: usize = 16 * 1024;

/// The largest value the contract accepts, in bytes (Redis caps a string at
/// 512 MiB; we stay well below every backend's limit).
pub const MAX_VALUE_LEN: usize = 128 * 1024 * 1024;

/// What an acknowledged write survives, as a store is set up now
/// ([`KvStore::persistence`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Persistence {
    /// Every acknowledged write is on disk (synced) before `Ok`: a crash of
    /// the store or of its machine loses nothing acknowledged.
    Synced,
    /// Acknowledged writes can be lost: when, and which setting to change.
    Weak(String),
    /// The store cannot tell (a managed Redis that refuses `CONFIG GET`,
    /// say): why.
    Unknown(String),
}

impl Persistence {
    /// Whether every acknowledged write is synced to disk.
    pub fn is_synced(&self) -> bool {
        matches!(self, Persistence::Synced)
    }
}

impl std::fmt::Display for Persistence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Persistence::Synced => f.write_str("every acknowledged write is synced to disk"),
            Persistence::Weak(why) => write!(f, "acknowledged work can be lost: {why}"),
            Persistence::Unknown(why) => write!(f, "what the store keeps is not known: {why}"),
        }
    }
}

/// One key and its value, as returned by scans.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct KvPair {
    /// The key.
    pub key: Vec<u8>,
    /// The value stored under it.
    pub value: Vec<u8>,
}

impl KvPair {
    /// A pair from anything that converts into bytes.
    pub fn new(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
        }
    }
}

/// A condition of a [conditional batch](KvStore::batch_if): `key` holds
/// exactly `value`, or (`value: None`) `key` is absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// The key checked.
    pub key: Vec<u8>,
    /// The value it must hold; `None`: it must be absent.
    pub value: Option<Vec<u8>>,
}

impl Condition {
    /// `key` holds exactly `value`.
    pub fn equals(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Self {
        Self {
            key: key.into(),
            value: Some(value.into()),
        }
    }

    /// `key` is absent.
    pub fn absent(key: impl Into<Vec<u8>>) -> Self {
        Self {
            key: key.into(),
            value: None,
        }
    }

    /// Whether the condition holds when its key holds `current`.
    pub fn holds(&self, current: Option<&[u8]>) -> bool {
        self.value.as_deref() == current
    }
}

/// One write of an atomic batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOp {
    /// Set `key` to `value`, replacing any previous value.
    Put {
        /// The key to write.
        key: Vec<u8>,
        /// The new value.
        value: Vec<u8>,
    },
    /// Remove `key`; removing a missing key is not an error.
    Delete {
        /// The key to remove.
        key: Vec<u8>,
    },
}

impl BatchOp {
    /// A put.
    pub fn put(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Self {
        BatchOp::Put {
            key: key.into(),
            value: value.into(),
        }
    }

    /// A delete.
    pub fn delete(key: impl Into<Vec<u8>>) -> Self {
        BatchOp::Delete { key: key.into() }
    }

    /// The key this op writes.
    pub fn key(&self) -> &[u8] {
        match self {
            BatchOp::Put { key, .. } | BatchOp::Delete { key } => key,
        }
    }
}

/// What a scan reads: a key range, an optional limit and a direction.
///
/// Keys are compared as unsigned bytes. A range whose start lies after its end
/// is empty (not an error). `limit: Some(0)` returns nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanRange {
    /// Lower bound of the keys returned.
    pub start: Bound<Vec<u8>>,
    /// Upper bound of the keys returned.
    pub end: Bound<Vec<u8>>,
    /// At most this many pairs are returned (the first ones in scan order).
    pub limit: Option<usize>,
    /// Return keys in descending order; the limit then keeps the largest keys.
    pub reverse: bool,
}

impl ScanRange {
    /// Every key, ascending, no limit.
    pub fn all() -> Self {
        Self::new(Bound::Unbounded, Bound::Unbounded)
    }

    /// The keys between `start` and `end`, ascending, no limit.
    pub fn new(start: Bound<Vec<u8>>, end: Bound<Vec<u8>>) -> Self {
        Self {
            start,
            end,
            limit: None,
            reverse: false,
        }
    }

    /// The half-open range `start..end`.
    pub fn between(start: impl Into<Vec<u8>>, end: impl Into<Vec<u8>>) -> Self {
        Self::new(Bound::Included(start.into()), Bound::Excluded(end.into()))
    }

    /// Every key that starts with `prefix` (the empty prefix is every key).
    pub fn prefix(prefix: &[u8]) -> Self {
        let end = match prefix_successor(prefix) {
            Some(succ) => Bound::Excluded(succ),
            None => Bound::Unbounded,
        };
        Self::new(Bound::Included(prefix.to_vec()), end)
    }

    /// Keeps at most `limit` pairs.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Returns keys in descending order.
    pub fn reversed(mut self) -> Self {
        self.reverse = true;
        self
    }

    /// Sets the direction explicitly.
    pub fn with_reverse(mut self, reverse: bool) -> Self {
        self.reverse = reverse;
        self
    }

    /// Whether `key` lies inside the bounds (limit and direction aside).
    pub fn contains(&self, key: &[u8]) -> bool {
        let after_start = match &self.start {
            Bound::Included(s) => key >= s.as_slice(),
            Bound::Excluded(s) => key > s.as_slice(),
            Bound::Unbounded => true,
        };
        let before_end = match &self.end {
            Bound::Included(e) => key <= e.as_slice(),
            Bound::Excluded(e) => key < e.as_slice(),
            Bound::Unbounded => true,
        };
        after_start && before_end
    }

    /// Whether no key at all can satisfy the bounds or the limit. Backends
    /// check this first: some range APIs (e.g. `BTreeMap::range`) panic on an
    /// inverted range.
    pub fn is_empty(&self) -> bool {
        if self.limit == Some(0) {
            return true;
        }
        match (&self.start, &self.end) {
            (Bound::Included(s), Bound::Included(e)) => s > e,
            (Bound::Included(s), Bound::Excluded(e)) | (Bound::Excluded(s), Bound::Included(e)) => {
                s >= e
            }
            (Bound::Excluded(s), Bound::Excluded(e)) => {
                // (s, e) is empty when e <= s, or when e is the immediate
                // successor of s in byte order (s followed by 0x00).
                s >= e || (e.len() == s.len() + 1 && e.starts_with(s) && e[s.len()] == 0)
            }
            _ => false,
        }
    }

    /// The limit as a number (`usize::MAX` when unlimited).
    pub fn limit_or_max(&self) -> usize {
        self.limit.unwrap_or(usize::MAX)
    }
}

/// Checks a key against the contract's limits.
pub fn validate_key(backend: &'static str, op: StoreOp, key: &[u8]) -> StoreResult<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(StoreError::new(
            backend,
            op,
            ErrorKind::InvalidInput,
            format!(
                "key of {} bytes is longer than the {MAX_KEY_LEN}-byte limit",
                key.len()
            ),
        ));
    }
    Ok(())
}

/// Checks every key of a multi-read against the contract's limits.
pub fn validate_keys(backend: &'static str, op: StoreOp, keys: &[Vec<u8>]) -> StoreResult<()> {
    keys.iter()
        .try_for_each(|key| validate_key(backend, op, key))
}

/// Checks every op of a batch against the contract's limits, before anything
/// is written (so a rejected batch applies nothing).
pub fn validate_batch(backend: &'static str, op: StoreOp, ops: &[BatchOp]) -> StoreResult<()> {
    for (index, batch_op) in ops.iter().enumerate() {
        validate_key(backend, op, batch_op.key()).map_err(|e| {
            StoreError::new(
                backend,
                op,
                e.kind(),
                format!("op {index}: {}", e.message()),
            )
        })?;
        if let BatchOp::Put { value, .. } = batch_op
            && value.len() > MAX_VALUE_LEN
        {
            return Err(StoreError::new(
                backend,
                op,
                ErrorKind::InvalidInput,
                format!(
                    "op {index}: value of {} bytes is larger than the {MAX_VALUE_LEN}-byte limit",
                    value.len()
                ),
            ));
        }
    }
    Ok(())
}

/// Checks the keys of a conditional batch's conditions and its ops
/// against the contract's limits, before anything is read or written.
pub fn validate_conditional(
    backend: &'static str,
    conditions: &[Condition],
    ops: &[BatchOp],
) -> StoreResult<()> {
    for (index, c) in conditions.iter().enumerate() {
        validate_key(backend, StoreOp::BatchIf, &c.key).map_err(|e| {
            StoreError::new(
                backend,
                StoreOp::BatchIf,
                e.kind(),
                format!("condition {index}: {}", e.message()),
            )
        })?;
    }
    validate_batch(backend, StoreOp::BatchIf, ops)
}

/// An ordered key-value store: the only thing the engine needs from a backend.
///
/// Object safe: the engine holds an `Arc<dyn KvStore>`. Every backend must
/// behave identically under this contract; `acts-testkit`'s conformance suite
/// checks it.
///
/// # Guarantees every implementation gives
///
/// - **Ordering.** Keys are ordered by their bytes (unsigned, lexicographic,
///   shorter prefix first). Scans return keys in that order, or the reverse.
/// - **Atomicity.** [`batch`](KvStore::batch) applies all of its ops or none.
///   Ops in one batch apply in order, so a later op on the same key wins.
/// - **Conditions.** [`batch_if`](KvStore::batch_if) checks its conditions
///   and applies its ops as one atomic step: no other write comes between
///   the check and the ops, and a condition that does not hold applies
///   nothing. This is what fences a writer that lost its lease: every batch
///   it sends is conditional on the epoch it holds.
/// - **Visibility.** Once a write returns `Ok`, every later read on any handle
///   of the same store sees it. No read (point, multi or scan) ever observes
///   part of a batch: each read call sees the store either before or after a
///   whole batch.
/// - **Durability.** Once a write returns `Ok` it is as durable as the
///   backend's durability setting promises (see each backend's docs). On `Err`
///   nothing of that call was applied, except where the error kind is
///   [`ErrorKind::Timeout`], whose outcome is unknown.
/// - **Errors are not absence.** A missing key is `Ok(None)`; a failing
///   backend is `Err`, never `Ok(None)` or an empty scan.
/// - **Limits.** Keys up to [`MAX_KEY_LEN`] bytes (the empty key included) and
///   values up to [`MAX_VALUE_LEN`] bytes are accepted; larger ones are
///   rejected with [`ErrorKind::InvalidInput`] and change nothing.
#[async_trait]
pub trait KvStore: Send + Sync + 'static {
    /// The backend's short name, used in errors and logs (`"memory"`,
    /// `"redb"`, `"rocksdb"`, `"redis"`).
    fn backend(&self) -> &'static str;

    /// Reads one key. `Ok(None)` when the key is missing.
    async fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>>;

    /// Reads several keys from one consistent view of the store (no batch is
    /// seen half-applied across the keys). The result has one entry per key,
    /// in the order given; duplicate keys are allowed.
    async fn get_many(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>>;

    /// Writes one key. Equivalent to a batch of one put.
    async fn put(&self, key: &[u8], value: &[u8]) -> StoreResult<()> {
        self.batch(vec![BatchOp::put(key, value)])
            .await
            .map_err(|e| e.with_op(StoreOp::Put))
    }

    /// Removes one key; a missing key is not an error. Equivalent to a batch
    /// of one delete.
    async fn delete(&self, key: &[u8]) -> StoreResult<()> {
        self.batch(vec![BatchOp::delete(key)])
            .await
            .map_err(|e| e.with_op(StoreOp::Delete))
    }

    /// Applies `ops` atomically and in order (see the trait docs). An empty
    /// batch succeeds and changes nothing.
    async fn batch(&self, ops: Vec<BatchOp>) -> StoreResult<()>;

    /// Applies `ops` atomically and in order if every condition holds at
    /// that moment, checked in the same atomic step (see the trait docs):
    /// `Ok(true)` when applied, `Ok(false)` when a condition did not hold
    /// and nothing was applied. Without conditions it is a plain batch.
    async fn batch_if(&self, conditions: Vec<Condition>, ops: Vec<BatchOp>) -> StoreResult<bool>;

    /// Reads the pairs inside `range` in key order (descending when
    /// `range.reverse`), at most `range.limit` of them, from one consistent
    /// view of the store.
    async fn scan(&self, range: ScanRange) -> StoreResult<Vec<KvPair>>;

    /// What an acknowledged write survives as the store is set up now (a
    /// server's settings may change while it runs). The default: not
    /// known.
    fn persistence(&self) -> Persistence {
        Persistence::Unknown(format!("the {} store does not say", self.backend()))
    }

    /// Whether the store can take writes now, checked afresh: a store that
    /// refuses writes (a Redis that evicts keys, a file store that failed
    /// on an I/O error and could not be reopened yet) says why. A file
    /// store whose commit failed on an I/O error tries to reopen here. The
    /// default: `Ok`.
    async fn health(&self) -> StoreResult<()> {
        Ok(())
    }

    /// The store's traffic so far, if it talks to a server and counts it
    /// (round trips, commands, bytes). The default: not counted.
    fn io(&self) -> Option<crate::StoreIo> {
        None
    }

    /// Writes a consistent copy of the whole store — every pair as of one
    /// moment — to `to`, a path that must not exist yet (a file or a
    /// folder, as the backend keeps its data), while the store stays in
    /// use: commits go on meanwhile, never waiting for the copy (a redb
    /// read transaction's snapshot, a RocksDB checkpoint). The copy is
    /// written under a temporary name and renamed into place when
    /// complete and synced, so `to` is whole or absent. A backend whose
    /// server keeps its own backups (Redis, PostgreSQL) answers
    /// `InvalidInput` naming what to use instead (the default).
    async fn backup(&self, to: &std::path::Path) -> StoreResult<crate::BackupInfo> {
        let _ = to;
        Err(crate::backup::no_online_copy(self.backend()))
    }

    /// Reads the pairs whose key starts with `prefix`; see [`scan`](KvStore::scan).
    async fn scan_prefix(
        &self,
        prefix: &[u8],
        limit: Option<usize>,
        reverse: bool,
    ) -> StoreResult<Vec<KvPair>> {
        let mut range = ScanRange::prefix(prefix).with_reverse(reverse);
        range.limit = limit;
        self.scan(range).await
    }
}

/// A shared store is a store: wrappers (the testkit's gated, failing and
/// crash stores, say) can wrap an `Arc<dyn KvStore>` as well as a concrete
/// backend.
#[async_trait]
impl KvStore for std::sync::Arc<dyn KvStore> {
    fn backend(&self) -> &'static str {
        (**self).backend()
    }

    async fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        (**self).get(key).await
    }

    async fn get_many(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        (**self).get_many(keys).await
    }

    async fn put(&self, key: &[u8], value: &[u8]) -> StoreResult<()> {
        (**self).put(key, value).await
    }

    async fn delete(&self, key: &[u8]) -> StoreResult<()> {
        (**self).delete(key).await
    }

    async fn batch(&self, ops: Vec<BatchOp>) -> StoreResult<()> {
        (**self).batch(ops).await
    }

    async fn batch_if(&self, conditions: Vec<Condition>, ops: Vec<BatchOp>) -> StoreResult<bool> {
        (**self).batch_if(conditions, ops).await
    }

    async fn scan(&self, range: ScanRange) -> StoreResult<Vec<KvPair>> {
        (**self).scan(range).await
    }

    fn persistence(&self) -> Persistence {
        (**self).persistence()
    }

    async fn health(&self) -> StoreResult<()> {
        (**self).health().await
    }

    fn io(&self) -> Option<crate::StoreIo> {
        (**self).io()
    }

    async fn backup(&self, to: &std::path::Path) -> StoreResult<crate::BackupInfo> {
        (**self).backup(to).await
    }

    async fn scan_prefix(
        &self,
        prefix: &[u8],
        limit: Option<usize>,
        reverse: bool,
    ) -> StoreResult<Vec<KvPair>> {
        (**self).scan_prefix(prefix, limit, reverse).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverted_and_degenerate_ranges_are_empty() {
        let r = |s: Bound<&[u8]>, e: Bound<&[u8]>| {
            ScanRange::new(s.map(|b| b.to_vec()), e.map(|b| b.to_vec()))
        };
        assert!(r(Bound::Included(b"b"), Bound::Included(b"a")).is_empty());
        assert!(!r(Bound::Included(b"a"), Bound::Included(b"a")).is_empty());
        assert!(r(Bound::Included(b"a"), Bound::Excluded(b"a")).is_empty());
        assert!(r(Bound::Excluded(b"a"), Bound::Excluded(b"a\0")).is_empty());
        assert!(!r(Bound::Excluded(b"a"), Bound::Excluded(b"a\0\0")).is_empty());
        assert!(!r(Bound::Unbounded, Bound::Excluded(b"")).contains(b""));
        assert!(ScanRange::all().with_limit(0).is_empty());
        assert!(!ScanRange::all().is_empty());
    }

    #[test]
    fn prefix_range_contains_exactly_the_prefixed_keys() {
        let r = ScanRange::prefix(b"ab\xff");
        assert!(r.contains(b"ab\xff"));
        assert!(r.contains(b"ab\xff\xff\xff"));
        assert!(!r.contains(b"ac"));
        assert!(!r.contains(b"ab\xfe\xff"));
        let all = ScanRange::prefix(b"\xff\xff");
        assert!(all.contains(b"\xff\xff\x00"));
        assert!(!all.contains(b"\xff\xfe"));
        assert_eq!(all.end, Bound::Unbounded);
    }

    #[test]
    fn oversized_input_is_rejected_naming_the_op() {
        let big_key = vec![0u8; MAX_KEY_LEN + 1];
        let err = validate_batch(
            "memory",
            StoreOp::Batch,
            &[BatchOp::put("ok", "v"), BatchOp::delete(big_key)],
        )
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(
            err.message().starts_with("op 1: key of 16385 bytes"),
            "{err}"
        );
        assert!(validate_key("memory", StoreOp::Get, &vec![0u8; MAX_KEY_LEN]).is_ok());
    }
}
