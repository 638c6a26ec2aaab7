//! The store's own keys, outside any collection: its fence and lease (see
//! the lease service) — the epoch under its own key, the lease beside it,
//! and the one conditional batch that raises the epoch — and the key a
//! readiness probe commits.

use std::sync::Arc;

use acts_store::keys::KeyBuilder;
use acts_store::{BatchOp, Condition, KvStore};
use serde::{Deserialize, Serialize};

use crate::engine::types::error::EngineError;

/// A lease as stored (its own shape: the public `LeaseInfo` may grow
/// without changing what is stored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredLease {
    pub(crate) owner: String,
    pub(crate) epoch: u64,
    pub(crate) expires_at: i64,
}

/// The epoch as read: its number and the stored fence (`None`: never
/// raised), which the raise is conditional on.
pub(crate) struct StoredEpoch {
    pub(crate) number: u64,
    stored: Option<Vec<u8>>,
}

/// Most bytes of a stored lease (a bigger one is damage, not a lease).
const MAX_LEASE_BYTES: usize = 4096;

fn epoch_key() -> Vec<u8> {
    KeyBuilder::new().str("fence").str("epoch").finish()
}

fn lease_key() -> Vec<u8> {
    KeyBuilder::new().str("fence").str("lease").finish()
}

/// The epoch number of a stored fence: `N:TOKEN` (or a bare `N`, as
/// stores written before the token kept it).
fn epoch_number(stored: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(stored).ok()?;
    text.split_once(':').map_or(text, |(n, _)| n).parse().ok()
}

fn corrupt(what: &str) -> EngineError {
    EngineError::Corrupt(format!(
        "the store's {what} is unreadable; repair it (or delete it if no node owns the store)"
    ))
}

/// The fence and lease of one store.
pub(crate) struct LeaseRows<'s> {
    store: &'s Arc<dyn KvStore>,
}

impl<'s> LeaseRows<'s> {
    pub(crate) fn new(store: &'s Arc<dyn KvStore>) -> Self {
        Self { store }
    }

    /// The lease as stored (`None`: no node ever owned the store).
    pub(crate) async fn lease(&self) -> Result<Option<StoredLease>, EngineError> {
        let Some(bytes) = self.store.get(&lease_key()).await? else {
            return Ok(None);
        };
        if bytes.len() > MAX_LEASE_BYTES {
            return Err(corrupt("lease"));
        }
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|_| corrupt("lease"))
    }

    /// The epoch as stored.
    pub(crate) async fn epoch(&self) -> Result<StoredEpoch, EngineError> {
        let stored = self.store.get(&epoch_key()).await?;
        let number = match &stored {
            Some(b) => epoch_number(b).ok_or_else(|| corrupt("epoch"))?,
            None => 0,
        };
        Ok(StoredEpoch { number, stored })
    }

    /// Raises the epoch read as `read` to `fence` and stores `lease`, in
    /// one batch conditional on the epoch still being `read`; `false`:
    /// another node raised it in between (nothing was written).
    pub(crate) async fn raise(
        &self,
        read: StoredEpoch,
        fence: &str,
        lease: &StoredLease,
    ) -> Result<bool, EngineError> {
        let condition = match read.stored {
            Some(b) => Condition::equals(epoch_key(), b),
            None => Condition::absent(epoch_key()),
        };
        let ops = vec![
            BatchOp::put(epoch_key(), fence.to_owned()),
            Self::put_lease_op(lease),
        ];
        Ok(self.store.batch_if(vec![condition], ops).await?)
    }

    /// The condition every write of the holder of `fence` carries.
    pub(crate) fn fence_condition(fence: &str) -> Condition {
        Condition::equals(epoch_key(), fence.to_owned())
    }

    /// The op that stores `lease` (a renewal, a hand-over).
    pub(crate) fn put_lease_op(lease: &StoredLease) -> BatchOp {
        // A struct of a string and numbers always serializes.
        BatchOp::put(lease_key(), serde_json::to_vec(lease).unwrap_or_default())
    }
}

/// The op a readiness probe commits: the time of the probe (ms) under a
/// key of its own.
pub(crate) fn health_probe_op(now: i64) -> BatchOp {
    BatchOp::put(
        KeyBuilder::new().str("health").str("probe").finish(),
        now.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::epoch_number;

    #[test]
    fn a_fence_reads_as_its_epoch_with_or_without_its_token() {
        assert_eq!(epoch_number(b"7:Ab3dE6gHxx"), Some(7));
        assert_eq!(epoch_number(b"12"), Some(12));
        assert_eq!(epoch_number(b"x:1"), None);
        assert_eq!(epoch_number(b""), None);
        assert_eq!(epoch_number(&[0xff, b'1']), None);
    }
}
