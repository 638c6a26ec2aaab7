//! Maps the PostgreSQL client's and the pool's errors into [`StoreError`],
//! in one place: a lost or refused connection is `Unavailable` (never "no
//! record"), a serialization failure or deadlock `Conflict`, a value of the
//! wrong type (a damaged table) `Corruption`.

use acts_store::{ErrorKind, StoreError, StoreOp};
use deadpool_postgres::PoolError;
use tokio_postgres::error::SqlState;

pub(crate) const BACKEND: &str = "postgres";

/// A PostgreSQL error of `op` as a [`StoreError`].
pub(crate) fn map_err(op: StoreOp, e: tokio_postgres::Error) -> StoreError {
    let text = with_causes(&e);
    let kind = match e.code() {
        Some(code) => kind_of(code),
        // No server error: the connection is gone, or a value did not
        // convert (the table holds something else than bytes).
        None if e.is_closed() || text.contains("connect") || from_io(&e) => ErrorKind::Unavailable,
        None if text.contains("error deserializing") || text.contains("WrongType") => {
            ErrorKind::Corruption
        }
        None => ErrorKind::Backend,
    };
    let what = match kind {
        ErrorKind::Unavailable => format!("the PostgreSQL server is unreachable: {text}"),
        ErrorKind::Corruption => format!("the store's table is damaged: {text}"),
        ErrorKind::Conflict => format!("a concurrent transaction conflicted: {text}"),
        _ => format!("PostgreSQL: {text}"),
    };
    StoreError::new(BACKEND, op, kind, what).with_source(e)
}

/// `e`'s text with its causes' ("error connecting to server: Connection
/// refused (os error 111)"), each said once.
fn with_causes(e: &tokio_postgres::Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

/// Whether an I/O error (the socket) is among `e`'s causes.
fn from_io(e: &tokio_postgres::Error) -> bool {
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        if c.is::<std::io::Error>() {
            return true;
        }
        cause = c.source();
    }
    false
}

/// The kind of a server error, by its SQLSTATE.
fn kind_of(code: &SqlState) -> ErrorKind {
    let class = &code.code()[..2];
    if *code == SqlState::T_R_SERIALIZATION_FAILURE
        || *code == SqlState::T_R_DEADLOCK_DETECTED
        || *code == SqlState::LOCK_NOT_AVAILABLE
    {
        ErrorKind::Conflict
    } else if *code == SqlState::QUERY_CANCELED {
        ErrorKind::Timeout
    } else if *code == SqlState::READ_ONLY_SQL_TRANSACTION
        || *code == SqlState::ADMIN_SHUTDOWN
        || *code == SqlState::CRASH_SHUTDOWN
        || *code == SqlState::CANNOT_CONNECT_NOW
        || *code == SqlState::TOO_MANY_CONNECTIONS
        || class == "08"
        || class == "53"
        || class == "57"
    {
        // Connection exceptions, insufficient resources (a full disk),
        // operator intervention, a standby that takes no writes.
        ErrorKind::Unavailable
    } else if *code == SqlState::DATATYPE_MISMATCH
        || *code == SqlState::UNDEFINED_COLUMN
        || *code == SqlState::UNDEFINED_TABLE
        || class == "XX"
    {
        ErrorKind::Corruption
    } else if class == "28" || class == "3D" || class == "42" {
        // Authentication, an unknown database, a bad statement.
        ErrorKind::InvalidInput
    } else {
        ErrorKind::Backend
    }
}

/// A pool error of `op` (no connection could be had) as a [`StoreError`].
pub(crate) fn map_pool_err(op: StoreOp, e: PoolError) -> StoreError {
    match e {
        PoolError::Backend(e) => map_err(op, e),
        PoolError::Timeout(_) => StoreError::new(
            BACKEND,
            op,
            ErrorKind::Timeout,
            "no connection to the PostgreSQL server within the pool's wait limit",
        ),
        other => StoreError::new(
            BACKEND,
            op,
            ErrorKind::Unavailable,
            format!("no connection to the PostgreSQL server: {other}"),
        ),
    }
}
