//! The catalog, compacted: what a partition that knows nothing must apply
//! is, per model, its changes from its last removal on (a removal resets
//! its versions; every deploy after it numbers one, so all are kept) — the
//! rest is superseded. At every [`COMPACT_EVERY`]th change the node that
//! made it writes a **snapshot** (`catalog-snapshot`: up to which change
//! it speaks, and the numbers of the changes still needed) and deletes the
//! superseded ones, in one batch conditioned on the snapshot it read (two
//! compacting nodes never both win). A partition taken over reads the
//! snapshot's changes and those after it — not every change since the
//! first; a partition far behind (its changes deleted meanwhile) does too,
//! and catches up as a takeover does.
//!
//! May use: the metadata namespace (`meta`) and its `error`.

use std::collections::BTreeSet;

use acts_store::{BatchOp, Condition, ScanRange};
use serde::{Deserialize, Serialize};

use crate::error::ClusterError;
use crate::meta::{CatalogOp, Meta, catalog_key, decode, encode};

const SNAPSHOT_KEY: &[u8] = b"catalog-snapshot";

/// Changes between two snapshots.
pub(crate) const COMPACT_EVERY: u64 = 64;

/// Most superseded changes one compaction deletes (the rest go with the
/// next one).
const MAX_DELETES: usize = 4096;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Snapshot {
    /// The last change it speaks for.
    upto: u64,
    /// The changes up to `upto` still needed, in order.
    keep: Vec<u64>,
}

/// The changes a partition must apply, as [`Meta::changes_since`] found
/// them.
pub(crate) struct Changes {
    /// The changes, in catalog order.
    pub(crate) changes: Vec<(u64, CatalogOp)>,
    /// Whether they are the compacted catalog (apply with
    /// `catalog::catch_up`, which finds where each model stands) rather
    /// than exactly the changes after the partition's last.
    pub(crate) whole: bool,
}

/// The changes of `all` (in order) a partition that knows nothing needs:
/// per model, from its last removal on.
fn needed(all: &[(u64, CatalogOp)]) -> Vec<u64> {
    let mut seen_removal: BTreeSet<&str> = BTreeSet::new();
    let mut keep = Vec::new();
    for (seq, op) in all.iter().rev() {
        if seen_removal.contains(op.model()) {
            continue;
        }
        keep.push(*seq);
        if matches!(op, CatalogOp::Remove { .. }) {
            seen_removal.insert(op.model());
        }
    }
    keep.reverse();
    keep
}

impl Meta {
    async fn snapshot(&self) -> Result<(Option<Vec<u8>>, Snapshot), ClusterError> {
        match self.store().get(SNAPSHOT_KEY).await? {
            Some(raw) => {
                let snap = decode("the catalog snapshot", &raw)?;
                Ok((Some(raw), snap))
            }
            None => Ok((None, Snapshot::default())),
        }
    }

    /// `snap`'s changes and every change after it, up to `upto`.
    async fn compacted(
        &self,
        snap: &Snapshot,
        upto: u64,
    ) -> Result<Vec<(u64, CatalogOp)>, ClusterError> {
        let mut out = Vec::new();
        for seqs in snap.keep.chunks(512) {
            let keys: Vec<Vec<u8>> = seqs.iter().map(|s| catalog_key(*s)).collect();
            let values = self.store().get_many(&keys).await?;
            for (seq, value) in seqs.iter().zip(values) {
                let Some(value) = value else {
                    return Err(ClusterError::Corrupt(format!(
                        "catalog change {seq}, which the snapshot keeps, is missing"
                    )));
                };
                out.push((*seq, decode(&format!("catalog change {seq}"), &value)?));
            }
        }
        out.extend(self.catalog_range(snap.upto, upto).await?);
        Ok(out)
    }

    /// What a partition that applied every change up to `after` must
    /// apply to reach `upto` (see the module docs). A change deleted by a
    /// compaction racing this read is read again from the new snapshot.
    pub(crate) async fn changes_since(
        &self,
        after: u64,
        upto: u64,
    ) -> Result<Changes, ClusterError> {
        let mut last_error = None;
        for _ in 0..4 {
            let (_, snap) = self.snapshot().await?;
            let read = if after >= snap.upto {
                self.catalog_range(after, upto)
                    .await
                    .map(|changes| Changes {
                        changes,
                        whole: false,
                    })
            } else {
                self.compacted(&snap, upto).await.map(|changes| Changes {
                    changes,
                    whole: true,
                })
            };
            match read {
                Ok(c) => return Ok(c),
                // Compacted meanwhile: the snapshot moved on.
                Err(ClusterError::Corrupt(why)) => {
                    let (_, now) = self.snapshot().await?;
                    if now.upto == snap.upto {
                        return Err(ClusterError::Corrupt(why));
                    }
                    last_error = Some(ClusterError::Corrupt(why));
                }
                Err(e) => return Err(e),
            }
        }
        Err(last_error.unwrap_or_else(|| ClusterError::Corrupt("the catalog keeps moving".into())))
    }

    /// Writes a new snapshot once [`COMPACT_EVERY`] changes came after the
    /// last, deleting the changes it supersedes. `Ok(false)`: nothing to
    /// do, or another node compacted first.
    pub(crate) async fn compact(&self) -> Result<bool, ClusterError> {
        let seq = self.catalog_seq().await?;
        let (raw, snap) = self.snapshot().await?;
        if seq < snap.upto.saturating_add(COMPACT_EVERY) {
            return Ok(false);
        }
        let all = self.compacted(&snap, seq).await?;
        let keep = needed(&all);
        let kept: BTreeSet<u64> = keep.iter().copied().collect();
        let stale = self
            .store()
            .scan(
                ScanRange::between(catalog_key(0), catalog_key(seq + 1))
                    .with_limit(MAX_DELETES * 2),
            )
            .await?;
        let mut ops = vec![BatchOp::put(
            SNAPSHOT_KEY,
            encode(&Snapshot { upto: seq, keep }),
        )];
        ops.extend(
            stale
                .into_iter()
                .filter(|r| crate::meta::catalog_seq_of(&r.key).is_some_and(|s| !kept.contains(&s)))
                .take(MAX_DELETES)
                .map(|r| BatchOp::delete(r.key)),
        );
        let condition = match raw {
            Some(bytes) => Condition::equals(SNAPSHOT_KEY, bytes),
            None => Condition::absent(SNAPSHOT_KEY),
        };
        Ok(self.store().batch_if(vec![condition], ops).await?)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use acts_store::{KvStore, MemoryStore};

    use super::*;

    fn deploy(model: &str, v: u32) -> CatalogOp {
        CatalogOp::Deploy {
            model: model.into(),
            json: format!("{{\"v\":{v}}}"),
        }
    }

    #[test]
    fn a_model_needs_its_changes_from_its_last_removal() {
        let all = vec![
            (1, deploy("a", 1)),
            (2, deploy("b", 1)),
            (3, CatalogOp::Remove { model: "a".into() }),
            (4, deploy("a", 2)),
            (5, deploy("b", 2)),
            (
                6,
                CatalogOp::RemoveVersion {
                    model: "b".into(),
                    revision: 1,
                },
            ),
            (7, CatalogOp::Remove { model: "c".into() }),
        ];
        assert_eq!(needed(&all), [2, 3, 4, 5, 6, 7]);
    }

    #[tokio::test]
    async fn a_compacted_catalog_reads_from_its_snapshot_and_drops_what_is_superseded() {
        let store = Arc::new(MemoryStore::new());
        let meta = Meta::new(store.clone());
        // 70 deploys of "a", each removed again, then one of "b".
        for i in 0..35 {
            meta.append(&deploy("a", i)).await.expect("append");
            meta.append(&CatalogOp::Remove { model: "a".into() })
                .await
                .expect("append");
        }
        meta.append(&deploy("b", 1)).await.expect("append");
        assert!(meta.compact().await.expect("compact"));
        assert!(
            !meta.compact().await.expect("nothing more"),
            "too soon again"
        );
        // Kept: the last removal of "a" (70) and "b" (71).
        let from_zero = meta.changes_since(0, 71).await.expect("read");
        assert!(from_zero.whole);
        assert_eq!(
            from_zero
                .changes
                .iter()
                .map(|(s, _)| *s)
                .collect::<Vec<_>>(),
            [70, 71]
        );
        let left = store
            .scan(ScanRange::prefix(b"catalog/"))
            .await
            .expect("scan");
        assert_eq!(left.len(), 2, "the superseded changes are deleted");
        // A partition up to date reads what comes after, in order.
        meta.append(&deploy("b", 2)).await.expect("append");
        let after = meta.changes_since(71, 72).await.expect("read");
        assert!(!after.whole);
        assert_eq!(after.changes.len(), 1);
        // One that was behind the snapshot reads the compacted catalog.
        let behind = meta.changes_since(10, 72).await.expect("read");
        assert!(behind.whole);
        assert_eq!(
            behind.changes.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            [70, 71, 72]
        );
    }
}
