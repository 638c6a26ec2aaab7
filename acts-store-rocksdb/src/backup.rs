//! The online copy of a RocksDB store: a checkpoint (RocksDB's own
//! consistent copy: the memtable flushed, the table files hard-linked when
//! the copy is on the same file system, copied otherwise) made under a
//! temporary name while commits go on, its pairs counted by opening it
//! read-only, then renamed into place.

use std::path::Path;

use acts_store::backup::{check_target, partial_path, size_on_disk, sync_parent};
use acts_store::{BackupInfo, StoreOp, StoreResult};
use rocksdb::checkpoint::Checkpoint;
use rocksdb::{DB, IteratorMode, Options};

use crate::Inner;
use crate::error::map_err;

impl Inner {
    /// Checkpoints the store to `to` (see the module doc).
    pub(crate) fn backup_to(&self, to: &Path) -> StoreResult<BackupInfo> {
        let op = StoreOp::Backup;
        check_target(crate::error::BACKEND, to)?;
        let tmp = partial_path(to);
        // A copy a crash left half-made is not a backup.
        let _ = std::fs::remove_dir_all(&tmp);
        let made = Checkpoint::new(&self.db)
            .and_then(|c| c.create_checkpoint(&tmp))
            .map_err(|e| map_err(op, Some(&tmp), e))
            .and_then(|()| count_pairs(&tmp));
        let pairs = match made {
            Ok(pairs) => pairs,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        if let Err(e) = std::fs::rename(&tmp, to).and_then(|()| sync_parent(to)) {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(acts_store::StoreError::new(
                crate::error::BACKEND,
                op,
                acts_store::ErrorKind::Backend,
                format!("{}: {e}", to.display()),
            ));
        }
        Ok(BackupInfo {
            pairs,
            bytes: size_on_disk(to),
        })
    }
}

/// The pairs of the checkpoint at `path`, opened read-only.
fn count_pairs(path: &Path) -> StoreResult<u64> {
    let op = StoreOp::Backup;
    let db = DB::open_for_read_only(&Options::default(), path, false)
        .map_err(|e| map_err(op, Some(path), e))?;
    let mut pairs = 0u64;
    for item in db.iterator(IteratorMode::Start) {
        item.map_err(|e| map_err(op, Some(path), e))?;
        pairs += 1;
    }
    Ok(pairs)
}
