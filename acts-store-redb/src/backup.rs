//! The online copy of a redb store: one read transaction (a snapshot: the
//! store as of one commit) copied into a new redb file while commits go
//! on — redb's readers never hold its writers back — written under a
//! temporary name, synced slice by slice (paced: it rests as long as each
//! slice took), and renamed into place.

use std::path::Path;
use std::time::Instant;

use acts_store::backup::{check_target, partial_path, size_on_disk, sync_parent};
use acts_store::{BackupInfo, StoreOp, StoreResult};
use redb::{Database, ReadableTable};

use crate::error::{BACKEND, map_err};
use crate::{Inner, TABLE};

/// How many pairs one write transaction of the copy holds (its dirty pages
/// stay in memory until it commits, then reach the disk in one sync).
const PAIRS_PER_COMMIT: usize = 2_000;

impl Inner {
    /// Copies the store as of one moment to `to` (see the module doc).
    pub(crate) fn backup_to(&self, to: &Path) -> StoreResult<BackupInfo> {
        let op = StoreOp::Backup;
        check_target(BACKEND, to)?;
        let tmp = partial_path(to);
        // A copy a crash left half-written is not a backup.
        let _ = std::fs::remove_file(&tmp);
        let copied = self.guarded(op, || {
            // The snapshot: every read below sees the store as of now.
            let table = self.read_table(op)?;
            let out = Database::builder()
                .create(&tmp)
                .map_err(|e| map_err(op, Some(&tmp), e))?;
            let mut pairs = 0u64;
            let mut iter = table.iter().map_err(|e| self.fail(op, e))?;
            loop {
                let slice = Instant::now();
                // Each slice committed and synced as it is written (redb's
                // default durability): the copy's writes reach the disk a
                // few MB at a time, not in one long sync at the end that
                // the store's own commits would queue behind.
                let txn = out.begin_write().map_err(|e| map_err(op, Some(&tmp), e))?;
                let mut done = true;
                {
                    let mut copy = txn
                        .open_table(TABLE)
                        .map_err(|e| map_err(op, Some(&tmp), e))?;
                    for _ in 0..PAIRS_PER_COMMIT {
                        let Some(item) = iter.next() else { break };
                        let (k, v) = item.map_err(|e| self.fail(op, e))?;
                        copy.insert(k.value(), v.value())
                            .map_err(|e| map_err(op, Some(&tmp), e))?;
                        pairs += 1;
                        done = false;
                    }
                }
                txn.commit().map_err(|e| map_err(op, Some(&tmp), e))?;
                if done {
                    break;
                }
                // Paced: the copy rests as long as its slice took, so it
                // works at most half the time and the store's own commits
                // keep a core and the disk (on two cores an unpaced copy
                // doubled the clients' round-trip p99: benches/README.md,
                // "Online backups").
                std::thread::sleep(slice.elapsed());
            }
            Ok(pairs)
        });
        let pairs = match copied {
            Ok(pairs) => pairs,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        let placed = std::fs::rename(&tmp, to).and_then(|()| sync_parent(to));
        if let Err(e) = placed {
            let _ = std::fs::remove_file(&tmp);
            return Err(map_err(op, Some(to), redb::Error::Io(e)));
        }
        Ok(BackupInfo {
            pairs,
            bytes: size_on_disk(to),
        })
    }
}
