//! The cluster's metadata, in its own store namespace (`NAME:meta`): the
//! partition count fixed at creation, the members' heartbeats (each with
//! the partitions the member holds), and the model catalog every
//! partition follows.

use std::sync::Arc;

use acts::KvStore;
use acts_store::{BatchOp, Condition};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::ClusterError;

/// Most bytes of one metadata record (a member lists its partitions; a
/// catalog entry holds a model, whose own limit is 1 MiB by default).
const MAX_RECORD_BYTES: usize = 4 * 1024 * 1024;

const CLUSTER_KEY: &[u8] = b"cluster";
const MEMBER_PREFIX: &[u8] = b"member/";
const CATALOG_SEQ_KEY: &[u8] = b"catalog-seq";
const CATALOG_PREFIX: &[u8] = b"catalog/";
const SECRET_KEY: &[u8] = b"node-secret";

/// What a cluster is, fixed when its first node starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterInfo {
    /// How many partitions the processes are split into.
    pub partitions: u32,
    /// When the cluster was created (ms since the Unix epoch).
    pub created_at: i64,
}

/// A partition a member holds, at the epoch it took it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldPartition {
    /// The partition.
    pub partition: u32,
    /// The epoch of its lease.
    pub epoch: u64,
}

/// A node's heartbeat record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// The node's id.
    pub node: String,
    /// Where its API listens (`http://HOST:PORT`): other nodes forward
    /// calls there.
    pub addr: String,
    /// Live until then (ms) unless it heartbeats again.
    pub until: i64,
    /// When it joined (ms).
    pub started_at: i64,
    /// The partitions it holds.
    pub partitions: Vec<HeldPartition>,
}

/// A change to the models every partition must follow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum CatalogOp {
    /// Deploy this model (its definition as stored: JSON).
    Deploy {
        /// The model id.
        model: String,
        /// The definition.
        json: String,
    },
    /// Remove the model.
    Remove {
        /// The model id.
        model: String,
    },
    /// Remove one version of the model.
    RemoveVersion {
        /// The model id.
        model: String,
        /// The version.
        revision: u32,
    },
}

impl CatalogOp {
    /// The model the change is about.
    pub fn model(&self) -> &str {
        match self {
            Self::Deploy { model, .. }
            | Self::Remove { model }
            | Self::RemoveVersion { model, .. } => model,
        }
    }
}

/// The metadata namespace.
#[derive(Clone)]
pub(crate) struct Meta {
    store: Arc<dyn KvStore>,
}

impl Meta {
    /// The metadata store's traffic so far, if it counts it.
    pub(crate) fn io(&self) -> Option<acts_store::StoreIo> {
        self.store.io()
    }
}

pub(crate) fn decode<T: DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<T, ClusterError> {
    if bytes.len() > MAX_RECORD_BYTES {
        return Err(ClusterError::Corrupt(format!(
            "{what} is {} bytes, more than any record the cluster writes",
            bytes.len()
        )));
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ClusterError::Corrupt(format!("{what} is unreadable: {e}")))
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Plain data types of this file: serializing them cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}

fn member_key(node: &str) -> Vec<u8> {
    [MEMBER_PREFIX, node.as_bytes()].concat()
}

pub(crate) fn catalog_key(seq: u64) -> Vec<u8> {
    [CATALOG_PREFIX, format!("{seq:020}").as_bytes()].concat()
}

/// The number of the catalog change kept under `key`.
pub(crate) fn catalog_seq_of(key: &[u8]) -> Option<u64> {
    std::str::from_utf8(key.strip_prefix(CATALOG_PREFIX)?)
        .ok()?
        .parse()
        .ok()
}

impl Meta {
    pub(crate) fn new(store: Arc<dyn KvStore>) -> Self {
        Self { store }
    }

    /// The metadata namespace's store (`compact.rs`).
    pub(crate) fn store(&self) -> &Arc<dyn KvStore> {
        &self.store
    }

    /// Creates the cluster with `partitions` if it does not exist, and
    /// returns what it is; a cluster created with another count refuses.
    pub(crate) async fn join(
        &self,
        partitions: u32,
        now: i64,
    ) -> Result<ClusterInfo, ClusterError> {
        let wanted = ClusterInfo {
            partitions,
            created_at: now,
        };
        // Whoever creates it first wins; the rest read what it wrote.
        self.store
            .batch_if(
                vec![Condition::absent(CLUSTER_KEY)],
                vec![BatchOp::put(CLUSTER_KEY, encode(&wanted))],
            )
            .await?;
        let stored = self
            .store
            .get(CLUSTER_KEY)
            .await?
            .ok_or_else(|| ClusterError::Corrupt("the cluster record vanished".into()))?;
        let info: ClusterInfo = decode("the cluster record", &stored)?;
        if info.partitions != partitions {
            return Err(ClusterError::PartitionCount {
                asked: partitions,
                cluster: info.partitions,
            });
        }
        Ok(info)
    }

    /// The secret the nodes prove their calls to each other with (the
    /// gates' calls between partitions): drawn by the first node that
    /// asks, read by the rest. Whoever can read the store has it — and
    /// everything else of the cluster anyway.
    pub(crate) async fn node_secret(&self) -> Result<String, ClusterError> {
        let drawn = format!("{}{}", acts::long_id(), acts::long_id());
        self.store
            .batch_if(
                vec![Condition::absent(SECRET_KEY)],
                vec![BatchOp::put(SECRET_KEY, encode(&drawn))],
            )
            .await?;
        let stored = self
            .store
            .get(SECRET_KEY)
            .await?
            .ok_or_else(|| ClusterError::Corrupt("the node secret vanished".into()))?;
        decode("the node secret", &stored)
    }

    /// Writes `member`'s heartbeat.
    pub(crate) async fn heartbeat(&self, member: &Member) -> Result<(), ClusterError> {
        self.store
            .put(&member_key(&member.node), &encode(member))
            .await?;
        Ok(())
    }

    /// Removes `node`'s heartbeat (a clean leave).
    pub(crate) async fn leave(&self, node: &str) -> Result<(), ClusterError> {
        self.store.delete(&member_key(node)).await?;
        Ok(())
    }

    /// Every member record, live or not, by node id.
    pub(crate) async fn members(&self) -> Result<Vec<Member>, ClusterError> {
        let rows = self.store.scan_prefix(MEMBER_PREFIX, None, false).await?;
        rows.iter()
            .map(|r| {
                let what = format!("member record '{}'", String::from_utf8_lossy(&r.key));
                decode(&what, &r.value)
            })
            .collect()
    }

    /// The number of the last catalog change (0: none yet).
    pub(crate) async fn catalog_seq(&self) -> Result<u64, ClusterError> {
        match self.store.get(CATALOG_SEQ_KEY).await? {
            Some(bytes) => decode("the catalog counter", &bytes),
            None => Ok(0),
        }
    }

    /// Appends `op` to the catalog (numbered after the last change, by a
    /// compare-and-set on the counter, so racing appends all land, one
    /// after another) and returns its number.
    pub(crate) async fn append(&self, op: &CatalogOp) -> Result<u64, ClusterError> {
        loop {
            let current = self.store.get(CATALOG_SEQ_KEY).await?;
            let seq: u64 = match &current {
                Some(bytes) => decode("the catalog counter", bytes)?,
                None => 0,
            };
            let next = seq + 1;
            let condition = match current {
                Some(bytes) => Condition::equals(CATALOG_SEQ_KEY, bytes),
                None => Condition::absent(CATALOG_SEQ_KEY),
            };
            let applied = self
                .store
                .batch_if(
                    vec![condition],
                    vec![
                        BatchOp::put(CATALOG_SEQ_KEY, encode(&next)),
                        BatchOp::put(catalog_key(next), encode(op)),
                    ],
                )
                .await?;
            if applied {
                return Ok(next);
            }
        }
    }

    /// The catalog changes numbered `after + 1 ..= upto`, in order, read
    /// by their keys (512 at a time), not by a scan of the whole catalog.
    /// A number the counter passed but whose change is missing is damage:
    /// the counter and the change are written in one batch.
    pub(crate) async fn catalog_range(
        &self,
        after: u64,
        upto: u64,
    ) -> Result<Vec<(u64, CatalogOp)>, ClusterError> {
        let mut out = Vec::new();
        let mut next = after.saturating_add(1);
        while next <= upto {
            let end = upto.min(next.saturating_add(511));
            let keys: Vec<Vec<u8>> = (next..=end).map(catalog_key).collect();
            let values = self.store.get_many(&keys).await?;
            for (seq, value) in (next..=end).zip(values) {
                let Some(value) = value else {
                    return Err(ClusterError::Corrupt(format!(
                        "catalog change {seq} is missing (the catalog counter is at {upto})"
                    )));
                };
                out.push((seq, decode(&format!("catalog change {seq}"), &value)?));
            }
            next = end.saturating_add(1);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use acts_store::{KvStore, MemoryStore};

    use super::{CatalogOp, Meta, catalog_key};
    use crate::error::ClusterError;

    #[tokio::test]
    async fn the_catalog_is_read_by_number_and_a_missing_change_is_damage() {
        let store = Arc::new(MemoryStore::new());
        let meta = Meta::new(store.clone());
        for i in 0..3 {
            let op = CatalogOp::Remove {
                model: format!("m{i}"),
            };
            assert_eq!(meta.append(&op).await.expect("append"), i + 1);
        }
        let all = meta.catalog_range(0, 3).await.expect("the catalog");
        assert_eq!(all.iter().map(|(s, _)| *s).collect::<Vec<_>>(), [1, 2, 3]);
        let tail = meta.catalog_range(2, 3).await.expect("the tail");
        assert_eq!(tail.len(), 1);
        assert_eq!(tail[0].1.model(), "m2");
        assert!(meta.catalog_range(3, 3).await.expect("none").is_empty());

        store.delete(&catalog_key(2)).await.expect("delete");
        match meta.catalog_range(0, 3).await {
            Err(ClusterError::Corrupt(why)) => assert!(why.contains("change 2"), "{why}"),
            other => panic!("a missing change read as {other:?}"),
        }
    }
}
