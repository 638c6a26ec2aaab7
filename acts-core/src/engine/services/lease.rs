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

use serde::Serialize;

use crate::engine::kernel::config::HeldLease;
pub use crate::engine::kernel::config::LeaseConfig;
use crate::engine::persist::lease_rows::{LeaseRows, StoredLease};
use crate::engine::services::On;
use crate::engine::types::error::EngineError;

/// Who owns a store (what [`StorageOps::lease`](crate::engine::StorageOps::lease)
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

impl From<StoredLease> for LeaseInfo {
    fn from(l: StoredLease) -> Self {
        Self {
            owner: l.owner,
            epoch: l.epoch,
            expires_at: l.expires_at,
        }
    }
}

/// The lease `config.node` holds at `epoch`, expiring a TTL after
/// `expires_from`.
fn lease_of(config: &LeaseConfig, epoch: u64, expires_from: i64) -> StoredLease {
    let ttl = i64::try_from(config.ttl.as_millis()).unwrap_or(i64::MAX);
    StoredLease {
        owner: config.node.clone(),
        epoch,
        expires_at: expires_from.saturating_add(ttl),
    }
}

impl On<'_> {
    /// The store's lease as stored (`None`: no node ever owned it).
    pub(crate) async fn read_lease(&self) -> Result<Option<StoredLease>, EngineError> {
        LeaseRows::new(self.store()).lease().await
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
        let rows = LeaseRows::new(self.store());
        let epoch = rows.epoch().await?;
        let next = epoch.number + 1;
        // The fence is the epoch and a token drawn now: should a store
        // forget this raise (a failover losing the last unreplicated
        // writes) and another node raise the same number, the two fences
        // still differ, so this node's writes can never land under the
        // other's (found by the cluster simulation, `acts-sim --cluster`).
        let fence = format!("{next}:{}", crate::tree::long_id());
        if !rows
            .raise(epoch, &fence, &lease_of(config, next, now))
            .await?
        {
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
            .set_fence(Some(LeaseRows::fence_condition(&fence)));
        *self.services.lease.lock() = Some(HeldLease {
            config: config.clone(),
            epoch: next,
        });
        tracing::info!(node = %config.node, epoch = next, "took the store's lease");
        Ok(next)
    }

    /// Renews this node's lease (a fenced write: refused, and this node
    /// steps down, once another node took the store). Nothing to do
    /// without a lease.
    pub(crate) async fn renew_lease(&self) -> Result<(), EngineError> {
        let Some(held) = self.services.lease.lock().clone() else {
            return Ok(());
        };
        let lease = lease_of(&held.config, held.epoch, self.now());
        self.write(None, vec![LeaseRows::put_lease_op(&lease)])
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
        let lease = lease_of(&lapsed, held.epoch, self.now());
        match self
            .write(None, vec![LeaseRows::put_lease_op(&lease)])
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
        let every = (held.config.ttl / 3).max(Duration::from_millis(10));
        let background = self.background();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let renewed = background.run(async |on| on.renew_lease().await).await;
                match renewed {
                    None => return,
                    Some(Ok(())) => {}
                    Some(Err(e)) => {
                        tracing::error!(error = %e, "renewing the store's lease failed");
                        if matches!(e, EngineError::Fenced(_)) {
                            return;
                        }
                    }
                }
            }
        });
    }
}
