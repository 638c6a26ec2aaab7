//! [`Engine`]: a running engine and what it offers (executor, channels,
//! housekeeping, close); built by [`EngineBuilder`](super::builder::EngineBuilder).

use std::sync::Arc;

use acts_store::KvStore;

use crate::engine::api::channel::Channel;
use crate::engine::api::executor::Executor;
use crate::engine::kernel::cache::Cache;
#[cfg(feature = "testing")]
use crate::engine::kernel::cache::ProcHandle;
use crate::engine::kernel::hooks::ServiceHooks;
use crate::engine::kernel::shared::Kernel;
use crate::engine::services::sealed::SealedData;
use crate::engine::services::{On, Services};
use crate::engine::types::error::EngineError;
use crate::engine::types::filter::ChannelOptions;
use crate::time::Clock;

/// What an engine has done since it started and holds now
/// ([`RuntimeOps::stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EngineStats {
    /// Transitions committed.
    pub transitions: u64,
    /// The group-commit writer's commits, batches, failures and time.
    pub writer: crate::durable::WriterStats,
    /// Processes in flight (admitted).
    pub admitted: usize,
    /// Processes held in memory.
    pub resident: usize,
    /// Parked processes this engine knows of.
    pub parked: usize,
    /// Write batches waiting for a commit.
    pub queued_writes: usize,
    /// Script evaluations and the limits they hit.
    pub scripts: crate::script::ScriptStats,
    /// Processes the stuck detector found stuck at its last check.
    pub stuck: usize,
    /// Processes whose automatic transition (a resume, a continuation, a
    /// timer's tick) failed on the store and waits for the housekeeping
    /// tick to run again.
    pub stalled: usize,
}

/// A running engine. Cheap to clone; [`close`](Self::close) stops it.
#[derive(Clone)]
pub struct Engine {
    /// The kernel (the builder makes both).
    pub(super) rt: Arc<Kernel>,
    pub(super) services: Arc<Services>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("cache", &self.rt.cache())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// The client API.
    pub fn executor(&self) -> Executor {
        Executor::new(self.rt.clone(), self.services.clone())
    }

    /// A new channel with `options`' filters.
    pub fn channel(&self, options: ChannelOptions) -> Channel {
        Channel::open(
            self.rt.emitter(),
            &options,
            None,
            Arc::downgrade(&self.rt),
            Arc::downgrade(&self.services),
        )
    }

    /// `channels().durable` ([`ChannelOps::durable`](super::ChannelOps::durable)).
    pub(crate) async fn durable_channel(
        &self,
        id: &str,
        options: ChannelOptions,
    ) -> Result<Channel, EngineError> {
        On::new(&self.rt, &self.services)
            .register_channel(id, &options)
            .await?;
        Ok(Channel::open(
            self.rt.emitter(),
            &options,
            Some(id.to_owned()),
            Arc::downgrade(&self.rt),
            Arc::downgrade(&self.services),
        ))
    }

    /// `runtime().stats` ([`RuntimeOps::stats`](super::RuntimeOps::stats)).
    pub(crate) fn stats(&self) -> EngineStats {
        let cache = &self.rt.cache();
        EngineStats {
            transitions: self.rt.transitions(),
            writer: self.rt.writer().stats(),
            admitted: cache.count(),
            resident: cache.resident_count(),
            parked: cache.parked().len(),
            queued_writes: self.rt.writer().queued(),
            scripts: self.rt.scripts().stats(),
            stuck: self.services.stuck_reported().len(),
            stalled: self.rt.stalled_pids().len(),
        }
    }

    /// `runtime().instance_faults` ([`RuntimeOps::instance_faults`](super::RuntimeOps::instance_faults)).
    #[cfg(feature = "testing")]
    pub(crate) fn instance_faults(&self) -> Vec<String> {
        self.rt.instances().faults(self.rt.cache())
    }

    /// `runtime().residue` ([`RuntimeOps::residue`](super::RuntimeOps::residue)).
    #[cfg(feature = "testing")]
    pub(crate) fn residue(&self) -> Vec<String> {
        let rt = &self.rt;
        let mut out = Vec::new();
        let admitted = rt.cache().count();
        if admitted > 0 {
            out.push(format!("{admitted} admitted"));
        }
        let mut note = |what: &str, pids: Vec<String>| {
            if !pids.is_empty() {
                out.push(format!("{what}: {}", pids.join(", ")));
            }
        };
        note("resident", rt.cache().resident());
        note("parked", rt.cache().parked());
        note("waiting for a place", rt.cache().pending_resume());
        note("stalled", rt.stalled_pids());
        note("timers", rt.timer_pids());
        note("stuck reports", self.services.stuck_reported());
        note("instances held", rt.instances().held());
        out
    }

    /// `channels().ack` ([`ChannelOps::ack`](super::ChannelOps::ack)).
    pub(crate) async fn ack(&self, channel: &str, msg_id: &str) -> Result<(), EngineError> {
        On::new(&self.rt, &self.services)
            .ack_delivery(channel, msg_id)
            .await
    }

    /// `channels().remove` ([`ChannelOps::remove`](super::ChannelOps::remove)).
    pub(crate) async fn remove_channel(&self, id: &str) -> Result<bool, EngineError> {
        On::new(&self.rt, &self.services).remove_channel(id).await
    }

    /// `runtime().sealed_data` ([`RuntimeOps::sealed_data`](super::RuntimeOps::sealed_data)).
    pub(crate) fn sealed_data(&self) -> &SealedData {
        self.services.sealed()
    }

    /// `runtime().housekeeping` ([`RuntimeOps::housekeeping`](super::RuntimeOps::housekeeping)).
    pub(crate) async fn housekeeping(&self) {
        self.services.housekeeping(&self.rt, true).await;
    }

    /// `storage().renew_lease` ([`StorageOps::renew_lease`](super::StorageOps::renew_lease)).
    pub(crate) async fn renew_lease(&self) -> Result<(), EngineError> {
        self.rt.check_open()?;
        On::new(&self.rt, &self.services).renew_lease().await
    }

    /// `storage().lease` ([`StorageOps::lease`](super::StorageOps::lease)).
    pub(crate) async fn lease(&self) -> Result<Option<crate::engine::LeaseInfo>, EngineError> {
        Ok(On::new(&self.rt, &self.services)
            .read_lease()
            .await?
            .map(Into::into))
    }

    /// `runtime().gate_keys` ([`RuntimeOps::gate_keys`](super::RuntimeOps::gate_keys)).
    pub(crate) fn gate_keys(&self) -> Vec<crate::engine::api::GateKeyUse> {
        self.rt.gates().keys()
    }

    /// `runtime().gate_call` ([`RuntimeOps::gate_call`](super::RuntimeOps::gate_call)).
    pub(crate) async fn gate_call(
        &self,
        call: serde_json::Value,
    ) -> Result<serde_json::Value, EngineError> {
        self.rt.check_open()?;
        self.rt.gates().call(call).await
    }

    /// `runtime().cache` ([`RuntimeOps::cache`](super::RuntimeOps::cache)).
    pub(crate) fn cache(&self) -> &Cache {
        self.rt.cache()
    }

    /// `runtime().process_handle` ([`RuntimeOps::process_handle`](super::RuntimeOps::process_handle)).
    #[cfg(feature = "testing")]
    pub(crate) async fn process_handle(
        &self,
        pid: &str,
    ) -> Result<Option<Arc<ProcHandle>>, EngineError> {
        self.rt.handle(pid).await
    }

    /// `storage().store` ([`StorageOps::store`](super::StorageOps::store)).
    pub(crate) fn store(&self) -> Arc<dyn KvStore> {
        self.rt.store().clone()
    }

    /// `runtime().clock` ([`RuntimeOps::clock`](super::RuntimeOps::clock)).
    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        self.rt.clock().clone()
    }

    /// `runtime().resume` ([`RuntimeOps::resume`](super::RuntimeOps::resume)).
    pub(crate) async fn resume(&self) -> Result<(), EngineError> {
        self.rt.recovery().resume_all().await?;
        self.executor().resume_bulk_jobs().await
    }

    /// `runtime().start_parked` ([`RuntimeOps::start_parked`](super::RuntimeOps::start_parked)).
    pub(crate) async fn start_parked(&self) -> Result<(), EngineError> {
        self.rt.recovery().start_parked().await
    }

    /// `runtime().is_idle` ([`RuntimeOps::is_idle`](super::RuntimeOps::is_idle)).
    pub(crate) fn is_idle(&self) -> bool {
        self.rt.is_idle()
    }

    /// `storage().queued_writes` ([`StorageOps::queued_writes`](super::StorageOps::queued_writes)).
    #[cfg(feature = "testing")]
    pub(crate) fn queued_writes(&self) -> usize {
        self.rt.writer().queued()
    }

    /// `storage().writer_epoch` ([`StorageOps::writer_epoch`](super::StorageOps::writer_epoch)).
    #[cfg(feature = "testing")]
    pub(crate) fn writer_epoch(&self) -> u64 {
        self.rt.writer().epoch()
    }

    /// `runtime().next_timer_of` ([`RuntimeOps::next_timer_of`](super::RuntimeOps::next_timer_of)).
    pub(crate) fn next_timer_of(&self, pid: &str) -> Option<i64> {
        self.rt.next_timer_of(pid)
    }

    /// `storage().readiness` ([`StorageOps::readiness`](super::StorageOps::readiness)).
    pub(crate) async fn readiness(&self) -> Result<(), EngineError> {
        On::new(&self.rt, &self.services).readiness().await
    }

    /// `storage().persistence` ([`StorageOps::persistence`](super::StorageOps::persistence)).
    pub(crate) fn persistence(&self) -> acts_store::Persistence {
        self.rt.store().persistence()
    }

    /// `storage().store_io` ([`StorageOps::store_io`](super::StorageOps::store_io)).
    pub(crate) fn store_io(&self) -> Option<acts_store::StoreIo> {
        self.rt.store().io()
    }

    /// `storage().flush` ([`StorageOps::flush`](super::StorageOps::flush)).
    pub(crate) async fn flush(&self) -> Result<(), EngineError> {
        self.rt
            .writer()
            .flush()
            .await
            .map_err(|source| EngineError::Commit {
                pid: String::new(),
                source,
            })
    }

    /// `storage().is_fenced` ([`StorageOps::is_fenced`](super::StorageOps::is_fenced)).
    pub(crate) fn is_fenced(&self) -> bool {
        self.rt.writer().fenced().is_some()
    }

    /// `storage().lease_epoch` ([`StorageOps::lease_epoch`](super::StorageOps::lease_epoch)).
    pub(crate) fn lease_epoch(&self) -> Option<u64> {
        self.services.lease_epoch()
    }

    /// `storage().close_without_handover` ([`StorageOps::close_without_handover`](super::StorageOps::close_without_handover)).
    pub(crate) async fn close_without_handover(&self) {
        self.services.drop_lease();
        self.rt.close().await;
    }

    /// Stops timers and new work, and waits for the writes in flight.
    pub async fn close(&self) {
        self.rt.close().await;
    }
}
