//! [`StoreError`]: the one error type every backend maps its faults into.

use std::fmt;

/// The operation of the [`KvStore`](crate::KvStore) contract that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreOp {
    /// Opening or connecting to the store.
    Open,
    /// A point read ([`KvStore::get`](crate::KvStore::get)).
    Get,
    /// A multi-read ([`KvStore::get_many`](crate::KvStore::get_many)).
    GetMany,
    /// A single put.
    Put,
    /// A single delete.
    Delete,
    /// An atomic batch of puts and deletes.
    Batch,
    /// A conditional batch ([`KvStore::batch_if`](crate::KvStore::batch_if)).
    BatchIf,
    /// An ordered range or prefix scan.
    Scan,
    /// A check that the store can take writes now
    /// ([`KvStore::health`](crate::KvStore::health)).
    Health,
    /// An online copy of the store
    /// ([`KvStore::backup`](crate::KvStore::backup)).
    Backup,
}

impl StoreOp {
    /// Whether this operation only reads.
    pub fn is_read(self) -> bool {
        matches!(self, StoreOp::Get | StoreOp::GetMany | StoreOp::Scan)
    }
}

impl fmt::Display for StoreOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StoreOp::Open => "open",
            StoreOp::Get => "get",
            StoreOp::GetMany => "get_many",
            StoreOp::Put => "put",
            StoreOp::Delete => "delete",
            StoreOp::Batch => "batch",
            StoreOp::BatchIf => "batch_if",
            StoreOp::Scan => "scan",
            StoreOp::Health => "health",
            StoreOp::Backup => "backup",
        })
    }
}

/// Why an operation failed. The first three kinds are transient: the same call
/// may succeed later. The others will fail again until something changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The backend cannot be reached (connection refused, server down, disk
    /// gone). Retryable.
    Unavailable,
    /// The backend did not answer within its time limit. Retryable; a write
    /// that timed out may or may not have been applied.
    Timeout,
    /// The operation lost a race with another writer or lock holder (e.g. a
    /// database file locked by another process). Retryable.
    Conflict,
    /// Stored data is damaged or not in the expected format. Not retryable.
    Corruption,
    /// The caller passed something the contract does not accept (an oversized
    /// key or value, a path that is not a database). Not retryable.
    InvalidInput,
    /// The store was closed, or its process "died" (crash tests). Not
    /// retryable on this handle.
    Closed,
    /// Any other backend failure (I/O error, unexpected reply). Not retryable.
    Backend,
}

impl ErrorKind {
    /// Whether retrying the same call later may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorKind::Unavailable | ErrorKind::Timeout | ErrorKind::Conflict
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::Unavailable => "store unavailable",
            ErrorKind::Timeout => "store timed out",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Corruption => "corrupt data",
            ErrorKind::InvalidInput => "invalid input",
            ErrorKind::Closed => "store closed",
            ErrorKind::Backend => "backend error",
        })
    }
}

type BoxedSource = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A failed store operation: which backend, which operation, what kind of
/// fault, and a message a person can act on. The backend's own error, if any,
/// is kept as the [`source`](std::error::Error::source).
///
/// A missing key is never an error (`Ok(None)`), and a failing backend is
/// never reported as an empty result: callers can rely on `Err` meaning "we do
/// not know", not "there is nothing".
#[derive(Debug, thiserror::Error)]
#[error("{backend} store, {op}: {kind}: {message}")]
pub struct StoreError {
    backend: &'static str,
    op: StoreOp,
    kind: ErrorKind,
    message: String,
    #[source]
    source: Option<BoxedSource>,
}

impl StoreError {
    /// A new error of `kind` for `op` on `backend`.
    pub fn new(
        backend: &'static str,
        op: StoreOp,
        kind: ErrorKind,
        message: impl Into<String>,
    ) -> Self {
        Self {
            backend,
            op,
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// Attaches the backend's own error as the source.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// Reports the error under another operation, e.g. a `put` that a
    /// backend carried out as a one-op batch.
    pub fn with_op(mut self, op: StoreOp) -> Self {
        self.op = op;
        self
    }

    /// Puts `context` (a path, a URL, a model id) in front of the message.
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }

    /// The backend that failed (`"memory"`, `"redb"`, ...).
    pub fn backend(&self) -> &'static str {
        self.backend
    }

    /// The operation that failed.
    pub fn op(&self) -> StoreOp {
        self.op
    }

    /// The kind of fault.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The human-readable explanation (without backend, op and kind).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether retrying the same call later may succeed.
    pub fn is_retryable(&self) -> bool {
        self.kind.is_retryable()
    }
}

/// The result of a store operation.
pub type StoreResult<T> = Result<T, StoreError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_backend_op_kind_and_message() {
        let e = StoreError::new(
            "redb",
            StoreOp::Batch,
            ErrorKind::Unavailable,
            "disk is gone",
        );
        assert_eq!(
            e.to_string(),
            "redb store, batch: store unavailable: disk is gone"
        );
        assert!(e.is_retryable());
    }

    #[test]
    fn retryable_kinds_are_exactly_the_transient_ones() {
        let retryable: Vec<_> = [
            ErrorKind::Unavailable,
            ErrorKind::Timeout,
            ErrorKind::Conflict,
            ErrorKind::Corruption,
            ErrorKind::InvalidInput,
            ErrorKind::Closed,
            ErrorKind::Backend,
        ]
        .into_iter()
        .filter(|k| k.is_retryable())
        .collect();
        assert_eq!(
            retryable,
            vec![
                ErrorKind::Unavailable,
                ErrorKind::Timeout,
                ErrorKind::Conflict
            ]
        );
    }

    #[test]
    fn source_is_kept() {
        let io = std::io::Error::other("boom");
        let e = StoreError::new("memory", StoreOp::Get, ErrorKind::Backend, "read failed")
            .with_source(io);
        let src = std::error::Error::source(&e).map(|s| s.to_string());
        assert_eq!(src.as_deref(), Some("boom"));
    }
}
