//! Fenced ownership of a store by one engine node at a time.
//!
//! The store holds an **epoch** (a counter, under its own key) and a
//! **lease** (which node owns the store, at which epoch, until when). A
//! node takes the store by raising the epoch in one conditional batch —
//! only if the epoch is still the one it read, and only if the lease has
//! expired or is its own — and from then on every commit of its writer is
//! conditional on that epoch ([`GroupCommitWriter::set_fence`](crate::durable::GroupCommitWriter::set_fence)).
//! A node that lost the store (frozen past its lease, cut off, or simply
//! slower) can therefore never apply anything: the store refuses its
//! batches, and it steps down (every later call fails with
//! [`EngineError::Fenced`]). The lease only decides when a takeover is
//! allowed; the epoch is what fences.
//!
//! The owner renews its lease every third of its TTL (in the background,
//! and on each housekeeping tick); a clean close hands it over at once (the
//! lease expires now). The partitions of a cluster (`docs/CLUSTER.md`) are
//! each such a store.

use std::time::Duration;

use acts_store::keys::KeyBuilder;
use acts_store::{BatchOp, Condition};
use serde::{Deserialize, Serialize};

use crate::engine::kernel::config::HeldLease;
pub use crate::engine::kernel::config::LeaseConfig;
use crate::engine::services::On;
use crate::engine::types::error::EngineError;

/// Who owns a store (what [`Engine::lease`](crate::engine::Engine::lease)
/// answers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LeaseInfo {
    /// The owning node.
    pub owner: String,
    /// The epoch it took the store at.
    pub epoch: u64,
    /// When the lease expires unless renewed (ms on the engine clock).
    pub expires_at: i64,
}

/// A lease as stored (its own shape: [`LeaseInfo`] may grow without
/// changing what is stored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredLease {
    pub(crate) owner: String,
    pub(crate) epoch: u64,
    pub(crate) expires_at: i64,
}

impl From<StoredLease> for LeaseInfo {
    fn from(l: StoredLease) -> Self {
        Self {
            owner: l.owner,
            epoch: l.epoch,
            expires_at: l.expires_at,
        }
    }
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

impl On<'_> {
    /// The store's lease as stored (`None`: no node ever owned it).
    pub(crate) async fn read_lease(&self) -> Result<Option<StoredLease>, EngineError> {
        let Some(bytes) = self.store().get(&lease_key()).await? else {
            return Ok(None);
        };
        if bytes.len() > MAX_LEASE_BYTES {
            return Err(corrupt("lease"));
        }
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|_| corrupt("lease"))
    }

    /// Fails with [`EngineError::LeaseHeld`] if a node's lease on the
    /// store runs (an engine without a lease must not write there).
    pub(crate) async fn refuse_if_owned(&self) -> Result<(), EngineError> {
        match self.read_lease().await? {
            Some(l) if l.expires_at > self.now() => Err(EngineError::LeaseHeld {
                remaining_ms: l.expires_at - self.now(),
                owner: l.owner,
                epoch: l.epoch,
                until: l.expires_at,
            }),
            _ => Ok(()),
        }
    }

    /// Takes the store for `config.node` (see the module docs): raises the
    /// epoch and fences the writer on it. Refused with
    /// [`EngineError::LeaseHeld`] while another node's lease runs.
    pub(crate) async fn acquire_lease(&self, config: &LeaseConfig) -> Result<u64, EngineError> {
        let now = self.now();
        let current = self.read_lease().await?;
        if let Some(l) = &current
            && l.owner != config.node
            && l.expires_at > now
        {
            return Err(EngineError::LeaseHeld {
                owner: l.owner.clone(),
                epoch: l.epoch,
                until: l.expires_at,
                remaining_ms: l.expires_at - now,
            });
        }
        let stored = self.store().get(&epoch_key()).await?;
        let epoch = match &stored {
            Some(b) => epoch_number(b).ok_or_else(|| corrupt("epoch"))?,
            None => 0,
        };
        let next = epoch + 1;
        let condition = match stored {
            Some(b) => Condition::equals(epoch_key(), b),
            None => Condition::absent(epoch_key()),
        };
        // The fence is the epoch and a token drawn now: should a store
        // forget this raise (a failover losing the last unreplicated
        // writes) and another node raise the same number, the two fences
        // still differ, so this node's writes can never land under the
        // other's (found by the cluster simulation, `acts-sim --cluster`).
        let fence = format!("{next}:{}", crate::tree::long_id());
        let ops = vec![
            BatchOp::put(epoch_key(), fence.clone()),
            BatchOp::put(lease_key(), self.lease_bytes(config, next, now)),
        ];
        if !self.store().batch_if(vec![condition], ops).await? {
            // Another node raised the epoch between the read and the batch.
            let l = self.read_lease().await?;
            let until = l.as_ref().map_or(now, |l| l.expires_at);
            return Err(EngineError::LeaseHeld {
                owner: l.as_ref().map_or_else(String::new, |l| l.owner.clone()),
                epoch: l.as_ref().map_or(next, |l| l.epoch),
                until,
                remaining_ms: (until - now).max(0),
            });
        }
        self.writer()
            .set_fence(Some(Condition::equals(epoch_key(), fence)));
        *self.services.lease.lock() = Some(HeldLease {
            config: config.clone(),
            epoch: next,
        });
        tracing::info!(node = %config.node, epoch = next, "took the store's lease");
        Ok(next)
    }

    fn lease_bytes(&self, config: &LeaseConfig, epoch: u64, expires_from: i64) -> Vec<u8> {
        let ttl = i64::try_from(config.ttl.as_millis()).unwrap_or(i64::MAX);
        let info = StoredLease {
            owner: config.node.clone(),
            epoch,
            expires_at: expires_from.saturating_add(ttl),
        };
        // A struct of a string and numbers always serializes.
        serde_json::to_vec(&info).unwrap_or_default()
    }

    /// Renews this node's lease (a fenced write: refused, and this node
    /// steps down, once another node took the store). Nothing to do
    /// without a lease.
    pub(crate) async fn renew_lease(&self) -> Result<(), EngineError> {
        let Some(held) = self.services.lease.lock().clone() else {
            return Ok(());
        };
        let bytes = self.lease_bytes(&held.config, held.epoch, self.now());
        self.write(None, vec![BatchOp::put(lease_key(), bytes)])
            .await
    }

    /// Hands the lease over on a clean close: it expires now, so another
    /// node may take the store at once (a fenced write: a node that lost
    /// the store changes nothing).
    pub(crate) async fn release_lease(&self) {
        let Some(held) = self.services.lease.lock().take() else {
            return;
        };
        if self.writer().fenced().is_some() {
            return;
        }
        let mut lapsed = held.config.clone();
        lapsed.ttl = Duration::ZERO;
        let bytes = self.lease_bytes(&lapsed, held.epoch, self.now());
        match self
            .write(None, vec![BatchOp::put(lease_key(), bytes)])
            .await
        {
            Ok(()) => {
                tracing::info!(node = %held.config.node, epoch = held.epoch, "handed the store's lease over")
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not hand the lease over; it expires on its own")
            }
        }
    }

    /// Renews the lease every third of its TTL until the engine closes or
    /// is fenced off (with [`LeaseConfig::background_renewal`]).
    pub(crate) fn spawn_lease_renewal(&self) {
        let Some(held) = self.services.lease.lock().clone() else {
            return;
        };
        if !held.config.background_renewal {
            return;
        }
        let Some(rt) = self.this() else {
            return;
        };
        let every = (held.config.ttl / 3).max(Duration::from_millis(10));
        let weak = std::sync::Arc::downgrade(&rt);
        let services = self.services.me.clone();
        drop(rt);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let (Some(rt), Some(services)) = (weak.upgrade(), services.upgrade()) else {
                    return;
                };
                if rt.is_closed() {
                    return;
                }
                if let Err(e) = On::new(&rt, &services).renew_lease().await {
                    tracing::error!(error = %e, "renewing the store's lease failed");
                    if matches!(e, EngineError::Fenced(_)) {
                        return;
                    }
                }
            }
        });
    }
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
