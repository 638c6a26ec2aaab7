//! Taking and letting go of partitions: starting a partition's engine
//! when its lease is free (its lease, its pid filter, its keys' homes, the
//! gate courier, the catalog caught up, its router), handing it over, and
//! stepping down from those another node took.
//!
//! May use: the `node`, the `catalog`, the `gates`' courier, the
//! `placement` and the `error`.

use std::sync::atomic::Ordering;

use acts::{Engine, EngineError, LeaseConfig, PidFilter};
use tracing::{debug, info, warn};

use crate::catalog;
use crate::error::ClusterError;
use crate::gates::courier;
use crate::node::{ClusterNode, Held};
use crate::placement::{key_partition, partition_of};

impl ClusterNode {
    /// Drops the partitions whose engine was fenced off (another node took
    /// them while this one was frozen or cut off) or lost its lease.
    pub(crate) async fn drop_lost_partitions(&self) {
        let held: Vec<(u32, Engine)> = self
            .inner
            .state
            .read()
            .held
            .iter()
            .map(|(p, h)| (*p, h.engine.clone()))
            .collect();
        for (p, engine) in held {
            let lost = if engine.storage().is_fenced() {
                true
            } else if self.inner.config.background {
                false
            } else {
                matches!(
                    engine.storage().renew_lease().await,
                    Err(EngineError::Fenced(_) | EngineError::LeaseHeld { .. })
                )
            };
            if lost {
                warn!(
                    partition = p,
                    "another node took this partition over; stepping down from it"
                );
                self.inner.state.write().held.remove(&p);
                engine.close().await;
            }
        }
    }

    /// Takes partition `p` if its lease is free: starts its engine (which
    /// takes the lease, raising the epoch, and resumes the partition's
    /// in-flight processes as a restart does) and brings its models up to
    /// the catalog. `Ok(false)`: another node's lease still runs.
    pub(crate) async fn take(&self, p: u32) -> Result<bool, ClusterError> {
        let config = &self.inner.config;
        let store = self.inner.family.member(&format!("p{p}")).await?;
        let mut engine_config = config.engine.clone();
        engine_config.lease = Some({
            let mut v = LeaseConfig::new(&config.node);
            v.ttl = config.lease_ttl;
            v.background_renewal = config.background;
            v
        });
        // Schedules fire once per cluster: on partition 0's owner.
        engine_config.run_schedules = config.engine.run_schedules && p == 0;
        let partitions = self.inner.info.partitions;
        engine_config.pid_filter = Some(PidFilter::new(move |pid| {
            partition_of(pid, partitions) == p
        }));
        // The concurrency keys hashing here are counted here only.
        engine_config.key_home = Some(PidFilter::new(move |key| {
            key_partition(key, partitions) == p
        }));
        // A step's or act's key is kept by the partition it hashes to;
        // the others ask it (`gates.rs`).
        engine_config.gate_courier = Some(courier(&self.inner));
        let started = config
            .packages
            .iter()
            .fold(Engine::builder(), |b, p| b.package(p.clone()))
            .store(store)
            .clock(config.clock.clone())
            .config(engine_config)
            .start()
            .await;
        let engine = match started {
            Ok(engine) => engine,
            Err(EngineError::LeaseHeld {
                owner,
                remaining_ms,
                ..
            }) => {
                debug!(partition = p, owner = %owner, remaining_ms, "partition still leased");
                return Ok(false);
            }
            Err(source) => {
                return Err(ClusterError::Engine {
                    partition: p,
                    source,
                });
            }
        };
        // Until it is held, nothing else closes this engine: on any error
        // it is closed here (handing its lease over), never left running.
        let catalog = async {
            let seq = self.inner.meta.catalog_seq().await?;
            // (the compacted catalog: its snapshot and what came after)
            let changes = self.inner.meta.changes_since(0, seq).await?.changes;
            catalog::catch_up(&engine.executor(), p, &changes)
                .await
                .map_err(|source| ClusterError::Engine {
                    partition: p,
                    source,
                })?;
            Ok::<_, ClusterError>((seq, changes))
        };
        let (seq, changes) = match catalog.await {
            Ok(c) => c,
            Err(e) => {
                engine.close().await;
                return Err(e);
            }
        };
        let synced = changes.last().map_or(seq, |(s, _)| (*s).max(seq));
        let epoch = engine.storage().lease_epoch().unwrap_or(0);
        let router = acts_server::router_with(engine.clone(), self.inner.server.clone());
        info!(partition = p, epoch, "took the partition");
        let holding = self.inner.takings.fetch_add(1, Ordering::Relaxed);
        self.inner.state.write().held.insert(
            p,
            Held {
                engine,
                router,
                epoch,
                synced,
                holding,
            },
        );
        Ok(true)
    }

    /// Hands partition `p` over: closes its engine (the writes in flight
    /// finish; the lease expires at once, so its new owner takes it on its
    /// next tick).
    pub(crate) async fn hand_over(&self, p: u32) {
        let held = self.inner.state.write().held.remove(&p);
        if let Some(held) = held {
            info!(partition = p, "handing the partition over");
            held.engine.close().await;
        }
    }
}
