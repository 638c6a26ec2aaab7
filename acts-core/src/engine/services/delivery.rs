//! Durable deliveries: messages owed to durable channels, their ack, the
//! retry timer with its dead-letter end, and the sweeper that removes a
//! finished process once everything owed for it is settled.
//!
//! - A message that passes a durable channel's filters gets a message row
//!   and one delivery row per such channel, **in the batch of the
//!   transition that produced it** (invariant 2). Without durable channels
//!   nothing extra is written.
//! - A delivery is `pending` until the client acks it, or until its task
//!   ends (it is then `closed`: an answered interrupt is not re-sent); the housekeeping
//!   timer re-sends due pending deliveries to their own channel only (when
//!   its client is connected), and after `delivery_max_tries` sends marks
//!   it `failed` — visible through [`DeliveryOps::list`](super::DeliveryOps::list),
//!   never dropped silently. A delivery whose message row is gone is
//!   removed with an error log.
//! - With a retention set, a finished process whose deliveries are all
//!   settled (acked or failed) and whose end is older than the retention
//!   is swept: all its rows are deleted. Nothing unacked is ever swept.

use acts_store::BatchOp;
use tracing::{error, warn};

use crate::scheduler::{Message, MessageState, TaskState};

use crate::engine::persist;
use crate::engine::persist::delivery_rows::DeliveryRows;
use crate::engine::persist::delivery_rows::{ChannelRow, DeliveryRow, MessageRow};
use crate::engine::persist::proc_rows::ProcRows;
use crate::engine::services::On;
use crate::engine::types::error::EngineError;
use crate::engine::types::filter::ChannelOptions;
use crate::engine::types::info::DeliveryState;

impl On<'_> {
    /// Stores the registration of durable channel `id`.
    pub(crate) async fn register_channel(
        &self,
        id: &str,
        options: &ChannelOptions,
    ) -> Result<(), EngineError> {
        self.check_open()?;
        if id.is_empty() || id.contains('/') {
            return Err(EngineError::Channel(format!(
                "invalid durable channel id '{id}': it must be non-empty and contain no '/'"
            )));
        }
        let row = ChannelRow {
            id: id.to_owned(),
            options: options.clone(),
        };
        self.write(None, vec![DeliveryRows::put_channel_op(&row)])
            .await?;
        Ok(())
    }

    /// Forgets durable channel `id` and deletes its deliveries.
    pub(crate) async fn remove_channel(&self, id: &str) -> Result<bool, EngineError> {
        let rows = DeliveryRows::new(self.store());
        let existed = rows.channel(id).await?.is_some();
        self.emitter().unregister_durable(id);
        let deliveries = rows.matching(Some(id), None).await?;
        let mut ops = vec![DeliveryRows::delete_channel_op(id)];
        for d in &deliveries {
            ops.extend(DeliveryRows::delete_ops(d));
        }
        self.write(None, ops).await?;
        Ok(existed)
    }

    /// Registers the durable channels stored by earlier runs (no client
    /// connected yet: their deliveries are recorded, not sent).
    pub(crate) async fn load_channels(&self) -> Result<(), EngineError> {
        for r in DeliveryRows::new(self.store()).channels().await? {
            self.emitter().register_durable(&r.id, &r.options, None);
        }
        Ok(())
    }

    /// Every delivery of process `pid` (what a transition that ends tasks
    /// checks for pending ones to close).
    pub(crate) async fn deliveries_of(&self, pid: &str) -> Result<Vec<DeliveryRow>, EngineError> {
        Ok(DeliveryRows::new(self.store()).of_process(pid).await?)
    }

    /// The rows that make `messages` durable for the durable channels they
    /// pass: a message row each, a delivery row per channel. A message that
    /// ends its task closes the task's `created` deliveries still pending
    /// (the reference's rule): an answered interrupt is not re-sent. An
    /// earlier end message of the task (a process's `error` before a
    /// retry) stays owed.
    /// `known_pending`: the process's deliveries as read before its lane
    /// was taken (`None`: read them now).
    pub(crate) async fn delivery_ops(
        &self,
        messages: &[Message],
        known_pending: Option<Vec<DeliveryRow>>,
    ) -> Result<Vec<BatchOp>, EngineError> {
        if !self.emitter().has_durable() {
            return Ok(Vec::new());
        }
        let now = self.now();
        let retry = self.config().delivery_retry.as_millis() as i64;
        let mut ops = Vec::new();
        // Tasks that end in this transition: (pid, tid).
        let ended: std::collections::HashSet<(&str, &str)> = messages
            .iter()
            .filter(|m| m.state != MessageState::Created && m.state != MessageState::Stuck)
            .map(|m| (m.pid.as_str(), m.tid.as_str()))
            .collect();
        let pids: std::collections::BTreeSet<&str> = ended.iter().map(|(p, _)| *p).collect();
        // Pending deliveries of earlier transitions for tasks that end now:
        // read before the lane was taken when still current, else here.
        let mut earlier = Vec::new();
        match known_pending {
            Some(rows) => earlier = rows,
            None => {
                for pid in pids {
                    earlier.extend(self.deliveries_of(pid).await?);
                }
            }
        }
        for old in earlier {
            if old.state == DeliveryState::Pending
                && old.closes_with_task
                && ended.contains(&(old.pid.as_str(), old.tid.as_str()))
            {
                let new = DeliveryRow {
                    state: DeliveryState::Closed,
                    ..old.clone()
                };
                ops.extend(DeliveryRows::update_ops(&old, &new));
            }
        }
        for m in messages {
            let targets = self.emitter().durable_targets(m);
            if targets.is_empty() {
                continue;
            }
            ops.extend(DeliveryRows::insert_message_ops(&MessageRow {
                id: m.id.clone(),
                pid: m.pid.clone(),
                message: m.clone(),
            }));
            for (channel, live) in targets {
                // A task that ends in this same transition leaves nothing
                // of its earlier messages to re-send.
                let closed = m.state == MessageState::Created
                    && ended.contains(&(m.pid.as_str(), m.tid.as_str()));
                let row = DeliveryRow {
                    channel,
                    msg_id: m.id.clone(),
                    pid: m.pid.clone(),
                    tid: m.tid.clone(),
                    state: if closed {
                        DeliveryState::Closed
                    } else {
                        DeliveryState::Pending
                    },
                    // The send right after the commit is the first try.
                    tries: u32::from(live),
                    next_at: now + retry,
                    created_at: now,
                    seq: self
                        .services
                        .delivery_seq
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                    closes_with_task: m.state == MessageState::Created,
                };
                ops.extend(DeliveryRows::insert_ops(&row));
            }
        }
        Ok(ops)
    }

    /// Marks the delivery of `msg_id` to `channel` acknowledged.
    pub(crate) async fn ack_delivery(
        &self,
        channel: &str,
        msg_id: &str,
    ) -> Result<(), EngineError> {
        let Some(old) = DeliveryRows::new(self.store()).get(channel, msg_id).await? else {
            return Err(EngineError::DeliveryNotFound {
                channel: channel.to_owned(),
                msg_id: msg_id.to_owned(),
            });
        };
        // Settled already — acked, or closed because its task ended in the
        // transition that answered it: nothing is owed, nothing to write
        // (an answer-then-ack round trip costs no extra commit).
        if matches!(old.state, DeliveryState::Acked | DeliveryState::Closed) {
            return Ok(());
        }
        let new = DeliveryRow {
            state: DeliveryState::Acked,
            ..old.clone()
        };
        self.write(None, DeliveryRows::update_ops(&old, &new)).await
    }

    /// A dead letter (a failed delivery) of `msg_id` to `channel`: the row,
    /// or why there is none to act on.
    async fn dead_letter(&self, channel: &str, msg_id: &str) -> Result<DeliveryRow, EngineError> {
        let row = DeliveryRows::new(self.store())
            .get(channel, msg_id)
            .await?
            .ok_or_else(|| EngineError::DeliveryNotFound {
                channel: channel.to_owned(),
                msg_id: msg_id.to_owned(),
            })?;
        if row.state != DeliveryState::Failed {
            return Err(EngineError::Channel(format!(
                "the delivery of message '{msg_id}' on channel '{channel}' is {}, not failed: only a dead letter can be redelivered or discarded",
                row.state.as_str()
            )));
        }
        Ok(row)
    }

    /// Gives a dead letter another round: pending again with its tries
    /// reset, sent at once when the channel's client is connected (else on
    /// the retry timer).
    pub(crate) async fn redeliver(&self, channel: &str, msg_id: &str) -> Result<(), EngineError> {
        let old = self.dead_letter(channel, msg_id).await?;
        let new = DeliveryRow {
            state: DeliveryState::Pending,
            tries: 0,
            next_at: self.now(),
            ..old.clone()
        };
        self.write(None, DeliveryRows::update_ops(&old, &new))
            .await?;
        self.resend(vec![new], true).await?;
        Ok(())
    }

    /// Discards a dead letter: its delivery row is deleted (nothing is
    /// owed any more; its process can be swept).
    pub(crate) async fn discard(&self, channel: &str, msg_id: &str) -> Result<(), EngineError> {
        let old = self.dead_letter(channel, msg_id).await?;
        self.write(None, DeliveryRows::delete_ops(&old)).await
    }

    /// Deliveries of `channel` (all channels if `None`) in `state` (all if
    /// `None`), oldest first: the dead-letter view is `state = Failed`.
    pub(crate) async fn deliveries(
        &self,
        channel: Option<&str>,
        state: Option<DeliveryState>,
    ) -> Result<Vec<DeliveryRow>, EngineError> {
        Ok(DeliveryRows::new(self.store())
            .matching(channel, state)
            .await?)
    }

    /// Sends every pending delivery of `channel` to its connected client
    /// again, oldest first; counts as a try.
    pub(crate) async fn resend_channel(&self, channel: &str) -> Result<usize, EngineError> {
        let pending = self
            .deliveries(Some(channel), Some(DeliveryState::Pending))
            .await?;
        self.resend(pending, true).await
    }

    /// Re-sends the pending deliveries whose time has come (to their own
    /// channel, when connected), failing those out of tries.
    pub(crate) async fn resend_due(&self) -> Result<usize, EngineError> {
        let now = self.now();
        let due: Vec<DeliveryRow> = self
            .deliveries(None, Some(DeliveryState::Pending))
            .await?
            .into_iter()
            .filter(|d| d.next_at <= now)
            .collect();
        self.resend(due, false).await
    }

    async fn resend(&self, rows: Vec<DeliveryRow>, forced: bool) -> Result<usize, EngineError> {
        let now = self.now();
        let retry = self.config().delivery_retry.as_millis() as i64;
        let stored = DeliveryRows::new(self.store());
        let mut ops = Vec::new();
        let mut sent = 0;
        for old in rows {
            let Some(msg) = stored.message(&old.msg_id).await? else {
                error!(channel = %old.channel, msg_id = %old.msg_id, "delivery without its message row: removed");
                ops.extend(DeliveryRows::delete_ops(&old));
                continue;
            };
            if !forced && old.tries >= self.config().delivery_max_tries {
                warn!(channel = %old.channel, msg_id = %old.msg_id, tries = old.tries, "delivery failed: out of tries");
                let new = DeliveryRow {
                    state: DeliveryState::Failed,
                    ..old.clone()
                };
                ops.extend(DeliveryRows::update_ops(&old, &new));
                continue;
            }
            if self.emitter().resend(&old.channel, &msg.message) {
                sent += 1;
                let new = DeliveryRow {
                    tries: old.tries + 1,
                    next_at: now + retry,
                    ..old.clone()
                };
                ops.push(DeliveryRows::rewrite_op(&new));
            }
        }
        self.write(None, ops).await?;
        Ok(sent)
    }

    /// Deletes finished processes whose deliveries are all settled and
    /// whose end is older than the retention. Returns how many.
    pub(crate) async fn sweep(&self) -> Result<usize, EngineError> {
        let Some(retention) = self.config().retention else {
            return Ok(0);
        };
        let cutoff = self.now() - retention.as_millis() as i64;
        let procs = ProcRows::new(self.store());
        let deliveries = DeliveryRows::new(self.store());
        let mut swept = 0;
        for state in TaskState::ALL.into_iter().filter(|s| s.is_terminal()) {
            let rows = procs.in_state(state).await?;
            for row in rows.into_iter().filter(|r| r.end_time <= cutoff) {
                let owed = deliveries.of_process(&row.id).await?;
                if owed
                    .iter()
                    .any(|d| matches!(d.state, DeliveryState::Pending | DeliveryState::Failed))
                {
                    // Something is still owed to a client: a pending
                    // delivery, or a dead letter nobody settled yet (an
                    // acked or closed one is settled).
                    continue;
                }
                let Some(stored) = persist::read_process(self.store(), &row.id).await? else {
                    continue;
                };
                let mut ops = persist::delete_ops(&stored);
                ops.extend(self.message_delete_ops(&row.id, &owed).await?);
                self.write(None, ops).await?;
                swept += 1;
            }
        }
        Ok(swept)
    }

    /// The ops that delete process `pid`'s messages and `deliveries` (its
    /// deliveries, read by the caller).
    async fn message_delete_ops(
        &self,
        pid: &str,
        deliveries: &[DeliveryRow],
    ) -> Result<Vec<BatchOp>, EngineError> {
        let mut ops = Vec::new();
        for d in deliveries {
            ops.extend(DeliveryRows::delete_ops(d));
        }
        for m in DeliveryRows::new(self.store()).messages_of(pid).await? {
            ops.extend(DeliveryRows::delete_message_ops(&m));
        }
        Ok(ops)
    }

    /// The ops that delete every message and delivery of process `pid`
    /// (what removing the process removes with it).
    pub(crate) async fn process_message_ops(&self, pid: &str) -> Result<Vec<BatchOp>, EngineError> {
        let deliveries = DeliveryRows::new(self.store()).of_process(pid).await?;
        self.message_delete_ops(pid, &deliveries).await
    }

    /// The periodic work: re-send due deliveries, drop expired snapshot
    /// entries, retry outbox records, sweep settled processes (on the timer
    /// at most once per `sweep_interval`; always when `force`); then
    /// re-arm.
    pub(crate) async fn housekeeping(&self, force: bool) {
        if let Err(e) = self.renew_lease().await {
            warn!(error = %e, "renewing the store's lease failed");
        }
        if let Err(e) = self.resend_due().await {
            warn!(error = %e, "re-sending deliveries failed; retried on the next tick");
        }
        // Outbox records applied again; queued and parked work whose load
        // failed earlier gets its place; processes whose automatic
        // transition failed run again.
        if let Err(e) = self.kernel_housekeeping().await {
            warn!(error = %e, "reading the outbox failed; retried on the next tick");
        }
        if let Err(e) = self.report_stuck().await {
            warn!(error = %e, "checking for stuck processes failed; retried on the next tick");
        }
        let now = self.now();
        let last = self
            .services
            .last_sweep
            .load(std::sync::atomic::Ordering::Acquire);
        let due = force
            || last == i64::MIN
            || now.saturating_sub(last) >= self.config().sweep_interval.as_millis() as i64;
        if due {
            self.services
                .last_sweep
                .store(now, std::sync::atomic::Ordering::Release);
        }
        if due && let Err(e) = self.sweep().await {
            warn!(error = %e, "sweeping finished processes failed; retried on the next tick");
        }
        self.rearm_housekeeping();
    }
}
