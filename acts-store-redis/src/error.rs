//! Maps the Redis client's errors into [`StoreError`], in one place.

use acts_store::{ErrorKind, StoreError, StoreOp};

pub(crate) const BACKEND: &str = "redis";

/// Converts a Redis client error into a [`StoreError`] for `op`.
pub(crate) fn map_err(op: StoreOp, e: redis::RedisError) -> StoreError {
    let text = e.to_string();
    let (kind, what) = if e.is_timeout() {
        (
            ErrorKind::Timeout,
            format!("the Redis server did not answer in time: {text}"),
        )
    } else if e.is_connection_refusal() || e.is_connection_dropped() || e.is_io_error() {
        (
            ErrorKind::Unavailable,
            format!("the Redis server is unreachable: {text}"),
        )
    } else if e.kind() == redis::ErrorKind::MasterNameNotFoundBySentinel {
        (
            ErrorKind::Unavailable,
            format!(
                "no master of that name answers through the sentinels (a failover in \
                 progress, or a wrong master name in the URL): {text}"
            ),
        )
    } else if matches!(e.code(), Some("READONLY" | "MASTERDOWN")) {
        (
            ErrorKind::Unavailable,
            format!(
                "the Redis server is not a master that can take writes now (a failover?): {text}"
            ),
        )
    } else if text.contains("ACTSCORRUPT") || text.contains("WRONGTYPE") {
        (
            ErrorKind::Corruption,
            format!("the namespace's data is damaged: {text}"),
        )
    } else if text.contains("LOADING") || text.contains("BUSY") || text.contains("TRYAGAIN") {
        (
            ErrorKind::Unavailable,
            format!("the Redis server is busy: {text}"),
        )
    } else if text.contains("OOM") {
        (
            ErrorKind::Unavailable,
            format!("the Redis server is out of memory: {text}"),
        )
    } else if matches!(
        e.kind(),
        redis::ErrorKind::AuthenticationFailed | redis::ErrorKind::InvalidClientConfig
    ) {
        (ErrorKind::InvalidInput, text)
    } else {
        (ErrorKind::Backend, text)
    };
    StoreError::new(BACKEND, op, kind, what).with_source(e)
}
