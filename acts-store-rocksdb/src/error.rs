//! Maps RocksDB's errors into [`StoreError`], in one place.

use std::path::Path;

use acts_store::{ErrorKind, StoreError, StoreOp};
use rocksdb::ErrorKind as Rocks;

pub(crate) const BACKEND: &str = "rocksdb";

/// Converts a RocksDB error into a [`StoreError`] for `op`, naming the
/// directory when one is known (at open).
pub(crate) fn map_err(op: StoreOp, path: Option<&Path>, e: rocksdb::Error) -> StoreError {
    let text = e.to_string();
    let lock_held = text.contains("lock")
        && (text.contains("LOCK") || text.contains("Resource temporarily unavailable"));
    let (kind, what) = match e.kind() {
        _ if op == StoreOp::Open && lock_held => (
            ErrorKind::Conflict,
            format!(
                "the database is already open in another handle or process; close it first ({text})"
            ),
        ),
        _ if op == StoreOp::Open && is_bad_path(&text) => (
            ErrorKind::InvalidInput,
            format!("cannot hold a database here: {text}"),
        ),
        Rocks::Corruption => (
            ErrorKind::Corruption,
            format!("the database is corrupt: {text}"),
        ),
        Rocks::InvalidArgument | Rocks::NotSupported => (ErrorKind::InvalidInput, text),
        Rocks::IOError => (ErrorKind::Unavailable, format!("I/O error: {text}")),
        Rocks::TimedOut => (ErrorKind::Timeout, text),
        Rocks::Busy | Rocks::TryAgain => (ErrorKind::Conflict, text),
        Rocks::ShutdownInProgress => (ErrorKind::Closed, text),
        _ => (ErrorKind::Backend, text),
    };
    let message = match path {
        Some(path) => format!("{}: {what}", path.display()),
        None => what,
    };
    StoreError::new(BACKEND, op, kind, message).with_source(e)
}

fn is_bad_path(text: &str) -> bool {
    [
        "Not a directory",
        "No such file or directory",
        "Permission denied",
        "File exists",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}
