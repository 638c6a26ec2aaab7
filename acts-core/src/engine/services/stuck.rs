//! The stuck detector: processes that are *quiet* — in flight, not paused,
//! yet with no interrupt, timer, package or subflow to wait for — for
//! longer than [`EngineConfig::stuck_after`](crate::engine::EngineConfig::stuck_after).
//! Nothing in the model can move such a process (a commit that keeps
//! failing, a fault, a bug), so an operator must look at it.
//!
//! Each transition stores whether it left its process quiet, and since
//! when, in the process row and its sparse `quiet` index (in the same
//! batch); the detector reads that index up to the threshold only — never
//! every process. Each housekeeping tick reports the newly stuck ones once:
//! a warning in the log and a `workflow` message in state `stuck` on the
//! channels (durable ones keep it as a delivery).

use std::time::Duration;

use tracing::warn;

use crate::scheduler::{Message, MessageState, MessageType};

use crate::engine::persist::proc_rows::ProcRows;
use crate::engine::persist::rows::ProcRow;
use crate::engine::services::On;
use crate::engine::types::error::EngineError;

/// Most stuck processes one check reads (the rest wait for the next).
const MAX_PER_CHECK: usize = 1000;

impl On<'_> {
    /// The processes quiet for longer than `after` (oldest quiet first, at
    /// most `limit`), read from the `quiet` index up to that bound.
    pub(crate) async fn stuck(
        &self,
        after: Duration,
        limit: usize,
    ) -> Result<Vec<ProcRow>, EngineError> {
        let bound = self
            .now()
            .saturating_sub(i64::try_from(after.as_millis()).unwrap_or(i64::MAX));
        let procs = ProcRows::new(self.store());
        let mut rows = Vec::new();
        for pid in procs.quiet_before(bound, limit).await? {
            // A row changed since its index entry was read is checked again.
            if let Some(r) = procs.get(&pid).await?
                && r.quiet_since.is_some_and(|q| q < bound)
                && !r.state.is_terminal()
            {
                rows.push(r);
            }
        }
        Ok(rows)
    }

    /// Reports the processes that became stuck since the last check (see
    /// the module docs).
    pub(crate) async fn report_stuck(&self) -> Result<(), EngineError> {
        let stuck = self.stuck(self.config().stuck_after, MAX_PER_CHECK).await?;
        let fresh: Vec<ProcRow> = {
            let mut reported = self.services.stuck_reported.lock();
            reported.retain(|pid, _| stuck.iter().any(|r| &r.id == pid));
            stuck
                .into_iter()
                .filter(|r| {
                    let since = r.quiet_since.unwrap_or_default();
                    reported.insert(r.id.clone(), since) != Some(since)
                })
                .collect()
        };
        if fresh.is_empty() {
            return Ok(());
        }
        let now = self.now();
        let messages: Vec<Message> = fresh
            .iter()
            .map(|r| {
                let since = r.quiet_since.unwrap_or_default();
                warn!(pid = %r.id, model = %r.mid, quiet_since = since, "process is stuck: in flight with nothing to wait for");
                let mut inputs = crate::model::Vars::new();
                inputs.insert("quiet_since".into(), since.into());
                Message {
                    id: crate::tree::long_id(),
                    model_id: r.mid.clone(),
                    r#type: MessageType::Workflow,
                    state: MessageState::Stuck,
                    pid: r.id.clone(),
                    tid: "$".into(), // the root task
                    nid: r.mid.clone(),
                    inputs,
                    time: now,
                    ..Message::default()
                }
            })
            .collect();
        // Durable channels keep it until acked, as any message.
        let ops = self.delivery_ops(&messages, None).await?;
        if !ops.is_empty() {
            self.write(None, ops).await?;
        }
        self.emitter().deliver(&messages);
        Ok(())
    }
}
