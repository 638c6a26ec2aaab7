//! Maps redb's errors into [`StoreError`], in one place.

use std::path::Path;

use acts_store::{ErrorKind, StoreError, StoreOp};

pub(crate) const BACKEND: &str = "redb";

/// Converts any redb error into a [`StoreError`] for `op`, naming the file
/// when one is known (at open).
pub(crate) fn map_err(op: StoreOp, path: Option<&Path>, e: impl Into<redb::Error>) -> StoreError {
    let e: redb::Error = e.into();
    let (kind, what) = classify(op, &e);
    let message = match path {
        Some(path) => format!("{}: {what}", path.display()),
        None => what,
    };
    StoreError::new(BACKEND, op, kind, message).with_source(e)
}

fn classify(op: StoreOp, e: &redb::Error) -> (ErrorKind, String) {
    use redb::Error as E;
    match e {
        E::DatabaseAlreadyOpen => (
            ErrorKind::Conflict,
            "the database is already open in another handle or process; close it first".into(),
        ),
        E::LockProtocolMismatch => (
            ErrorKind::Conflict,
            "another process holds the database with an incompatible redb version".into(),
        ),
        E::Corrupted(detail) if op == StoreOp::Open => (
            ErrorKind::InvalidInput,
            format!("not a readable redb database ({detail})"),
        ),
        E::Corrupted(detail) => (
            ErrorKind::Corruption,
            format!("the database is corrupt: {detail}"),
        ),
        E::UpgradeRequired(version) => (
            ErrorKind::InvalidInput,
            format!(
                "the file is in redb format {version} and must be upgraded with a redb tool first"
            ),
        ),
        E::ValueTooLarge(len) => (
            ErrorKind::InvalidInput,
            format!("a value of {len} bytes is larger than redb accepts"),
        ),
        E::DatabaseClosed => (ErrorKind::Closed, "the database is closed".into()),
        E::Io(io) => {
            use std::io::ErrorKind as Io;
            let kind = match io.kind() {
                Io::NotFound | Io::PermissionDenied | Io::IsADirectory | Io::InvalidInput
                    if op == StoreOp::Open =>
                {
                    ErrorKind::InvalidInput
                }
                Io::InvalidData | Io::UnexpectedEof if op == StoreOp::Open => {
                    ErrorKind::InvalidInput
                }
                Io::InvalidData | Io::UnexpectedEof => ErrorKind::Corruption,
                Io::TimedOut => ErrorKind::Timeout,
                _ => ErrorKind::Unavailable,
            };
            (kind, format!("I/O error: {io}"))
        }
        other => (ErrorKind::Backend, other.to_string()),
    }
}
