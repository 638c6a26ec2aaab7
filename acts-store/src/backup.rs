//! Online copies of a store: what [`KvStore::backup`](crate::KvStore::backup)
//! reports, and what a backend without a copy of its own says instead.

use std::path::{Path, PathBuf};

use crate::{ErrorKind, StoreError, StoreOp};

/// What a backup wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BackupInfo {
    /// The pairs copied.
    pub pairs: u64,
    /// The bytes the copy takes on disk.
    pub bytes: u64,
}

/// How to back up a store of `backend` (`redis`, `postgres`, ...) that
/// acts does not copy itself — the one wording the store's error, the
/// CLI and the server's API give.
pub fn backup_advice(backend: &str) -> &'static str {
    match backend {
        "redis" => {
            "Redis keeps its own backups: BGSAVE (or the AOF) on the server, then copy its \
             dump.rdb (docs/OPERATIONS.md, \"Backups\")"
        }
        "postgres" => {
            "PostgreSQL keeps its own backups: pg_dump, or base backups with the WAL archived \
             (docs/OPERATIONS.md, \"Backups\")"
        }
        "memory" => "it lives in this process only; there is nothing on disk to copy",
        _ => "stop what uses it and copy what it holds",
    }
}

/// The error of a backend that keeps its backups its own way (a server):
/// what to use instead ([`backup_advice`]).
pub fn no_online_copy(backend: &'static str) -> StoreError {
    let instead = backup_advice(backend);
    StoreError::new(
        backend,
        StoreOp::Backup,
        ErrorKind::InvalidInput,
        format!("the {backend} store has no online copy in acts: {instead}"),
    )
}

/// Refuses a backup target that exists already (a backup never writes over
/// anything).
pub fn check_target(backend: &'static str, to: &Path) -> Result<(), StoreError> {
    if to.exists() {
        return Err(StoreError::new(
            backend,
            StoreOp::Backup,
            ErrorKind::InvalidInput,
            format!(
                "{} exists already: a backup goes to a new path (move the old one away, or pick another name)",
                to.display()
            ),
        ));
    }
    Ok(())
}

/// The bytes the file or folder at `path` takes (a folder's files summed).
pub fn size_on_disk(path: &Path) -> u64 {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => m.len(),
        Ok(m) if m.is_dir() => std::fs::read_dir(path)
            .map(|entries| entries.flatten().map(|e| size_on_disk(&e.path())).sum())
            .unwrap_or(0),
        _ => 0,
    }
}

/// The name a copy to `to` is written under until it is complete
/// (`.NAME.partial` beside it).
pub fn partial_path(to: &Path) -> PathBuf {
    let name = to
        .file_name()
        .map_or_else(|| "backup".into(), |n| n.to_string_lossy().into_owned());
    to.with_file_name(format!(".{name}.partial"))
}

/// Syncs the folder that holds `path` (so a name just given to it
/// survives a crash).
pub fn sync_parent(path: &Path) -> std::io::Result<()> {
    match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) => std::fs::File::open(dir)?.sync_all(),
        None => std::fs::File::open(".")?.sync_all(),
    }
}
