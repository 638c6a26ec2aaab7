//! [`Executor::evt`], [`Executor::msg`], [`Executor::pack`], [`Executor::bulk`]: the handles of triggers, deliveries, packages and bulk operations.
//!
//! Each handle borrows the executor (and so its principal) and groups
//! what belongs to one concern; `Executor`'s own methods are only these
//! accessors and who it acts for.
use serde_json::Value;

use crate::engine::api::bulk::{BulkItem, BulkJob, BulkPreview, BulkRequest};
use crate::engine::api::executor::Executor;
use crate::engine::api::find_deliveries::DeliveryQuery;
use crate::engine::types::bulk::BulkOutcome;
use crate::engine::types::error::EngineError;
use crate::engine::types::info::{DeliveryInfo, DeliveryState, PackageInfo, ProcInfo, TriggerInfo};
use crate::engine::types::page::Page;

impl Executor {
    /// The triggers: starting one by name, a hook, listing them.
    pub fn evt(&self) -> TriggerOps<'_> {
        TriggerOps { exec: self }
    }
}

/// The triggers: starting one by name, a hook, listing them. From [`Executor::evt`].
#[derive(Debug, Clone, Copy)]
pub struct TriggerOps<'a> {
    exec: &'a Executor,
}

impl TriggerOps<'_> {
    /// Starts the model of trigger `trigger_id` (`<model id>:<trigger
    /// id>`, of kind `manual` or `hook`) with `payload` (null: the
    /// trigger's default params).
    pub async fn start(self, trigger_id: &str, payload: Value) -> Result<ProcInfo, EngineError> {
        self.exec.start_trigger(trigger_id, payload).await
    }

    /// Sends hook event `name`: every model with a hook trigger of that id
    /// starts with `payload`. Returns the processes started.
    pub async fn hook(self, name: &str, payload: Value) -> Result<Vec<ProcInfo>, EngineError> {
        self.exec.hook(name, payload).await
    }

    /// The triggers of every deployed model (with the schedules' next and
    /// last runs).
    pub async fn list(self) -> Result<Vec<TriggerInfo>, EngineError> {
        self.exec.triggers().await
    }
}

impl Executor {
    /// The durable deliveries of messages: listing, finding, counting, redelivering, discarding.
    pub fn msg(&self) -> DeliveryOps<'_> {
        DeliveryOps { exec: self }
    }
}

/// The durable deliveries of messages: listing, finding, counting, redelivering, discarding. From [`Executor::msg`].
#[derive(Debug, Clone, Copy)]
pub struct DeliveryOps<'a> {
    exec: &'a Executor,
}

impl DeliveryOps<'_> {
    /// Deliveries of durable channel `channel` (all if `None`) in `state`
    /// (all if `None`), oldest first. `Some(DeliveryState::Failed)` is the
    /// dead-letter view.
    pub async fn list(
        self,
        channel: Option<&str>,
        state: Option<DeliveryState>,
    ) -> Result<Vec<DeliveryInfo>, EngineError> {
        self.exec.deliveries(channel, state).await
    }

    /// How many deliveries are in `state` over every durable channel
    /// (counted from the state index; no delivery row is read).
    pub async fn count(self, state: DeliveryState) -> Result<usize, EngineError> {
        self.exec.count_deliveries(state).await
    }

    /// One page of the deliveries matching `q` (operators and admins),
    /// from an index: only the entries of the state, the channel or the
    /// process asked for are read.
    pub async fn find(self, q: &DeliveryQuery) -> Result<Page<DeliveryInfo>, EngineError> {
        self.exec.find_deliveries(q).await
    }

    /// How many deliveries match `q` (operators and admins; its cursor and
    /// limit ignored): a query on a state or a channel alone counts index
    /// keys only.
    pub async fn count_matching(self, q: &DeliveryQuery) -> Result<usize, EngineError> {
        self.exec.count_deliveries_matching(q).await
    }

    /// Gives dead letter `msg_id` of channel `channel` another round
    /// (pending again, tries reset, sent at once to a connected client).
    /// Only a failed delivery can be redelivered.
    pub async fn redeliver(self, channel: &str, msg_id: &str) -> Result<(), EngineError> {
        self.exec.redeliver(channel, msg_id).await
    }

    /// Discards dead letter `msg_id` of channel `channel` (its delivery is
    /// deleted). Only a failed delivery can be discarded.
    pub async fn discard(self, channel: &str, msg_id: &str) -> Result<(), EngineError> {
        self.exec.discard(channel, msg_id).await
    }
}

impl Executor {
    /// The packages the engine knows.
    pub fn pack(&self) -> PackageOps<'_> {
        PackageOps { exec: self }
    }
}

/// The packages the engine knows. From [`Executor::pack`].
#[derive(Debug, Clone, Copy)]
pub struct PackageOps<'a> {
    exec: &'a Executor,
}

impl PackageOps<'_> {
    /// Every package the engine knows, by id.
    pub async fn list(self) -> Result<Vec<PackageInfo>, EngineError> {
        self.exec.packages().await
    }
}

impl Executor {
    /// Bulk operations over the processes a query matches: preview, start, follow, cancel, remove, resume.
    pub fn bulk(&self) -> BulkOps<'_> {
        BulkOps { exec: self }
    }
}

/// Bulk operations over the processes a query matches: preview, start, follow, cancel, remove, resume. From [`Executor::bulk`].
#[derive(Debug, Clone, Copy)]
pub struct BulkOps<'a> {
    exec: &'a Executor,
}

impl BulkOps<'_> {
    /// How many processes `request` would touch now and the first of them
    /// (operator); nothing is written.
    pub async fn preview(self, request: &BulkRequest) -> Result<BulkPreview, EngineError> {
        self.exec.bulk_preview(request).await
    }

    /// Starts a bulk job (operator): stored at once, then worked on in the
    /// background (see the module docs); returns it as stored.
    pub async fn start(self, request: BulkRequest) -> Result<BulkJob, EngineError> {
        self.exec.bulk_start(request).await
    }

    /// Bulk job `id` (operator).
    pub async fn get(self, id: &str) -> Result<BulkJob, EngineError> {
        self.exec.bulk_job(id).await
    }

    /// One page of the bulk jobs, newest first (operator).
    pub async fn list(
        self,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<Page<BulkJob>, EngineError> {
        self.exec.bulk_jobs(limit, cursor).await
    }

    /// One page of what job `id` did to each process (operator), in pid
    /// order; `outcome`: only those.
    pub async fn items(
        self,
        id: &str,
        outcome: Option<BulkOutcome>,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<Page<BulkItem>, EngineError> {
        self.exec.bulk_items(id, outcome, limit, cursor).await
    }

    /// Cancels bulk job `id` (operator): it stops after the processes it
    /// is acting on now; what it did stays done. Returns it as it ends (a
    /// job that had stopped already is returned as it is).
    pub async fn cancel(self, id: &str) -> Result<BulkJob, EngineError> {
        self.exec.cancel_bulk(id).await
    }

    /// Removes bulk job `id` and its report (operator); refused while it
    /// runs (cancel it first). The processes keep what it did.
    pub async fn remove(self, id: &str) -> Result<(), EngineError> {
        self.exec.remove_bulk(id).await
    }

    /// Works on running bulk job `id` in this engine if nobody does
    /// (operator; an engine that resumes its store does this for every
    /// running job at its start).
    pub async fn resume(self, id: &str) -> Result<(), EngineError> {
        self.exec.resume_bulk(id).await
    }
}
