//! Triggers (`on:` in a model): manual and hook triggers fired through the
//! executor, and cron schedules fired by the engine's timer.
//!
//! Deploy writes one trigger row per trigger (`<model>:<trigger>`) in the
//! same batch as the model. A schedule's `next_run` is the next fire time
//! after the deploy (cron with six fields, evaluated in UTC); a re-deploy
//! keeps it unless the cron text changed. The schedule timer fires every
//! due schedule — starting the model with the trigger's params — and
//! rolls `next_run` past *now* even when the start failed, so a schedule
//! missed while the engine was down fires once on restart, not once per
//! missed tick. The start happens before the row update: a crash between
//! the two fires again (at least once).

use std::str::FromStr;

use acts_store::BatchOp;
use serde_json::Value;
use tracing::warn;

use crate::model::{Vars, Workflow};

use crate::engine::kernel::timers::TimerKey;
use crate::engine::persist::trigger_rows::TriggerRow;
use crate::engine::persist::trigger_rows::TriggerRows;
use crate::engine::services::On;
use crate::engine::types::error::EngineError;
use crate::engine::types::info::ProcInfo;

/// The next fire time of `cron` strictly after `after_ms` (0: never).
pub(crate) fn next_fire(cron: &str, after_ms: i64) -> Result<i64, String> {
    let schedule = cron::Schedule::from_str(cron).map_err(|e| e.to_string())?;
    let Some(after) = chrono::DateTime::from_timestamp_millis(after_ms) else {
        return Ok(0);
    };
    Ok(schedule
        .after(&after)
        .next()
        .map_or(0, |t| t.timestamp_millis()))
}

impl On<'_> {
    /// The trigger rows of `workflow`'s triggers (keeping the schedule state
    /// of unchanged crons), and deletes of triggers no longer declared.
    pub(crate) async fn trigger_ops(
        &self,
        workflow: &Workflow,
    ) -> Result<Vec<BatchOp>, EngineError> {
        let old = TriggerRows::new(self.store())
            .of_model(&workflow.id)
            .await?;
        let now = self.now();
        let mut ops = Vec::new();
        let mut keep = Vec::new();
        for t in &workflow.on {
            let id = format!("{}:{}", workflow.id, t.id);
            let previous = old.iter().find(|o| o.id == id);
            let (next_run, last_run) = match (&t.schedule, t.kind.as_str()) {
                (Some(cron), "schedule") => match previous {
                    Some(p) if p.schedule.as_deref() == Some(cron.as_str()) => {
                        (p.next_run, p.last_run)
                    }
                    _ => (
                        next_fire(cron, now).map_err(|message| EngineError::Trigger {
                            id: id.clone(),
                            message: format!("invalid schedule '{cron}': {message}"),
                        })?,
                        0,
                    ),
                },
                _ => (0, 0),
            };
            let row = TriggerRow {
                id: id.clone(),
                mid: workflow.id.clone(),
                trigger: t.id.clone(),
                kind: t.kind.clone(),
                params: t.params.clone(),
                schedule: t.schedule.clone(),
                next_run,
                last_run,
            };
            ops.extend(TriggerRows::upsert_ops(previous, &row));
            keep.push(id);
        }
        for o in old.iter().filter(|o| !keep.contains(&o.id)) {
            ops.extend(TriggerRows::delete_ops(o));
        }
        Ok(ops)
    }

    /// The deletes of every trigger of model `mid`.
    pub(crate) async fn trigger_delete_ops(&self, mid: &str) -> Result<Vec<BatchOp>, EngineError> {
        let rows = TriggerRows::new(self.store()).of_model(mid).await?;
        Ok(rows.iter().flat_map(TriggerRows::delete_ops).collect())
    }

    /// Starts the model of trigger `trigger_id` (`<model>:<trigger>`) with `payload` (null:
    /// the trigger's default params): manual and hook triggers start the
    /// model; a schedule cannot be fired by hand. `by`: who asked.
    pub(crate) async fn start_trigger(
        &self,
        trigger_id: &str,
        payload: Value,
        by: Option<&str>,
    ) -> Result<ProcInfo, EngineError> {
        let row = TriggerRows::new(self.store())
            .get(trigger_id)
            .await?
            .ok_or_else(|| EngineError::TriggerNotFound(trigger_id.to_owned()))?;
        match row.kind.as_str() {
            "manual" | "hook" => {}
            "schedule" => {
                return Err(EngineError::Trigger {
                    id: trigger_id.to_owned(),
                    message: "cannot start the schedule trigger manually".into(),
                });
            }
            other => {
                return Err(EngineError::Trigger {
                    id: trigger_id.to_owned(),
                    message: format!("trigger kind '{other}' has no starter in this engine"),
                });
            }
        }
        let payload = if payload.is_null() {
            row.params.clone()
        } else {
            payload
        };
        let vars = match payload {
            Value::Null => Vars::new(),
            Value::Object(m) => m,
            other => {
                return Err(EngineError::Trigger {
                    id: trigger_id.to_owned(),
                    message: format!("invalid trigger payload: expected an object, got {other}"),
                });
            }
        };
        self.start(&row.mid, None, vars, by).await
    }

    /// Fires every hook trigger whose id is `name` (across models) with
    /// `payload`; returns the processes started. `by`: who asked.
    pub(crate) async fn hook(
        &self,
        name: &str,
        payload: Value,
        by: Option<&str>,
    ) -> Result<Vec<ProcInfo>, EngineError> {
        let rows = TriggerRows::new(self.store()).of_kind("hook").await?;
        let mut started = Vec::new();
        for r in rows.into_iter().filter(|r| r.trigger == name) {
            started.push(self.start_trigger(&r.id, payload.clone(), by).await?);
        }
        Ok(started)
    }

    /// Fires every due schedule, rolls it forward, and re-arms the timer.
    pub(crate) async fn fire_schedules(&self) {
        if let Err(e) = self.fire_due_schedules().await {
            warn!(error = %e, "schedule timer: cannot read the schedules; retried on the next tick");
            self.arm_schedules_at(Some(self.now() + self.config().tick.as_millis() as i64));
            return;
        }
        if let Err(e) = self.arm_schedules().await {
            warn!(error = %e, "schedule timer: cannot re-arm");
        }
    }

    async fn fire_due_schedules(&self) -> Result<(), EngineError> {
        let now = self.now();
        let due: Vec<TriggerRow> = TriggerRows::new(self.store())
            .of_kind("schedule")
            .await?
            .into_iter()
            .filter(|r| r.next_run > 0 && r.next_run <= now)
            .collect();
        for row in due {
            let vars = row.params.as_object().cloned().unwrap_or_default();
            if let Err(e) = self.start(&row.mid, None, vars, None).await {
                warn!(event = %row.id, error = %e, "scheduled start failed; the schedule moves on");
            }
            let cron = row.schedule.clone().unwrap_or_default();
            let next_run = next_fire(&cron, now).unwrap_or(0);
            let new = TriggerRow {
                last_run: now,
                next_run,
                ..row.clone()
            };
            self.write(None, vec![TriggerRows::rewrite_op(&new)])
                .await?;
        }
        Ok(())
    }

    /// Arms the schedule timer for the earliest `next_run`.
    pub(crate) async fn arm_schedules(&self) -> Result<(), EngineError> {
        let rows = TriggerRows::new(self.store()).of_kind("schedule").await?;
        let due = rows.iter().map(|r| r.next_run).filter(|n| *n > 0).min();
        self.arm_schedules_at(due);
        Ok(())
    }

    fn arm_schedules_at(&self, due: Option<i64>) {
        // An engine that does not run schedules (all but one partition of
        // a cluster) never arms their timer.
        let due = due.filter(|_| self.config().run_schedules);
        let mut slot = self.services.schedule_timer.lock();
        if let Some(id) = slot.take() {
            self.disarm(id);
        }
        *slot = due.map(|d| self.arm(d, TimerKey::Schedules));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_fire_is_strictly_after() {
        // Every day at 06:00:00 UTC.
        let day = 86_400_000;
        let six = 6 * 3_600_000;
        assert_eq!(next_fire("0 0 6 * * *", 0).unwrap(), six);
        assert_eq!(next_fire("0 0 6 * * *", six).unwrap(), day + six);
        assert!(next_fire("not a cron", 0).is_err());
    }
}
