//! Migrating the live processes of a model version to another version:
//! each process under its lane, in one batch of its own, or not at all
//! (see `persist::migrate` for how rows move); a dry run computes the same
//! and writes nothing.

use std::collections::HashMap;

use acts_store::BatchOp;

use crate::scheduler::TaskEvent;

use crate::engine::kernel::catalog::DeployedModel;
use crate::engine::kernel::shared::Kernel;
use crate::engine::persist;
use crate::engine::persist::migrate::{Target, migrate_rows};
use crate::engine::persist::proc_rows::ProcRows;
use crate::engine::persist::rows::ProcRow;
use crate::engine::types::error::EngineError;
use crate::engine::types::info::{MigrationPlan, MigrationReport, ProcessMigration, TaskMoveInfo};

impl Kernel {
    /// Applies (or, with `dry_run`, checks) `plan` on every live process of
    /// its old version, for principal `by`.
    pub(crate) async fn migrate(
        &self,
        plan: &MigrationPlan,
        dry_run: bool,
        by: Option<&str>,
    ) -> Result<MigrationReport, EngineError> {
        self.check_open()?;
        let from = self.models.model_version(&plan.model, plan.from).await?;
        if plan.from == plan.to {
            return Err(EngineError::Conflict(format!(
                "model '{}': the processes are on version {} already (a migration goes from one version to another)",
                plan.model, plan.from
            )));
        }
        // Pinned: the new version is not removed while processes move to it.
        let (to, _pin) = self.models.pinned_version(&plan.model, plan.to).await?;
        check_map(plan, &to)?;
        self.check_vars_size("the migration's vars", &plan.vars)?;
        let procs = ProcRows::new(&self.store);
        let mut pids = Vec::new();
        procs
            .ids_on_version(&plan.model, plan.from, |chunk| pids.extend(chunk))
            .await?;
        let mut processes = Vec::new();
        for pid in pids {
            let Some(row) = procs.get(&pid).await? else {
                continue;
            };
            if row.state.is_terminal() {
                continue; // finished processes stay on their version
            }
            processes.push(
                self.migrate_one(&row, &from, &to, plan, dry_run, by, Vec::new())
                    .await?,
            );
        }
        Ok(MigrationReport {
            plan: plan.clone(),
            dry_run,
            processes,
        })
    }

    /// Moves a parked process (admitted, not started: it has no tasks yet)
    /// to the new version: its row names version B and its start options
    /// take the plan's vars, in one batch, while it is held back from
    /// starting. It then starts on B.
    async fn migrate_parked(
        &self,
        row: &ProcRow,
        plan: &MigrationPlan,
        dry_run: bool,
        extra: Vec<BatchOp>,
    ) -> Result<ProcessMigration, EngineError> {
        let pid = row.id.as_str();
        let outcome = |outcome: &str, reason: Option<String>| ProcessMigration {
            pid: pid.to_owned(),
            outcome: outcome.into(),
            reason,
            moves: Vec::new(),
            kept_as_history: Vec::new(),
            reannounced: Vec::new(),
        };
        if !self.cache.hold_parked(pid) {
            return Ok(outcome(
                "unmigratable",
                Some("it is starting right now; migrate it once it runs".into()),
            ));
        }
        // Taken before the read: a removal after it skips the write.
        let born = self.writer.epoch();
        let result = async {
            let Some(stored) = ProcRows::new(&self.store).get(pid).await? else {
                return Ok(outcome(
                    "unmigratable",
                    Some("it was removed meanwhile".into()),
                ));
            };
            if stored.state != crate::scheduler::TaskState::None
                || stored.rev != plan.from
                || !stored.model.is_empty()
            {
                return Ok(outcome(
                    "unmigratable",
                    Some("it started or moved meanwhile; migrate it again".into()),
                ));
            }
            if dry_run {
                return Ok(outcome("would_migrate", None));
            }
            let mut moved = stored.clone();
            moved.rev = plan.to;
            for (k, v) in &plan.vars {
                moved.start_vars.insert(k.clone(), v.clone());
            }
            let mut ops = ProcRows::update_ops(&stored, &moved);
            ops.extend(extra);
            self.write(Some((pid, born)), ops).await?;
            Ok(outcome("migrated", None))
        }
        .await;
        self.cache
            .release_parked(pid, row.timestamp, &row.order.clone().unwrap_or_default());
        self.refill();
        result
    }

    /// Migrates process `pid` to version `to` of its model, with `map`
    /// and `vars` as a plan's (a bulk job's step): `extra` ops join its
    /// batch. A process that ended, or runs `to` already, is refused
    /// (outcome `unmigratable`).
    pub(crate) async fn migrate_process(
        &self,
        pid: &str,
        to: u32,
        map: &std::collections::BTreeMap<String, String>,
        vars: &crate::model::Vars,
        by: Option<&str>,
        extra: Vec<BatchOp>,
    ) -> Result<ProcessMigration, EngineError> {
        self.check_open()?;
        let row = ProcRows::new(&self.store)
            .get(pid)
            .await?
            .ok_or_else(|| EngineError::ProcessNotFound(pid.to_owned()))?;
        let refused = match row.state {
            s if s.is_terminal() => Some("it has ended".to_owned()),
            _ if row.rev == to => Some(format!("it runs version {to} already")),
            _ => None,
        };
        if let Some(reason) = refused {
            return Ok(unmigratable(pid, reason));
        }
        let plan = MigrationPlan {
            model: row.mid.clone(),
            from: row.rev,
            to,
            map: map.clone(),
            vars: vars.clone(),
        };
        let from = self.models.model_version(&plan.model, plan.from).await?;
        let (target, _pin) = self.models.pinned_version(&plan.model, to).await?;
        check_map(&plan, &target)?;
        self.migrate_one(&row, &from, &target, &plan, false, by, extra)
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn migrate_one(
        &self,
        row: &ProcRow,
        from: &DeployedModel,
        to: &DeployedModel,
        plan: &MigrationPlan,
        dry_run: bool,
        by: Option<&str>,
        extra: Vec<BatchOp>,
    ) -> Result<ProcessMigration, EngineError> {
        let pid = row.id.as_str();
        let refuse = |reason: String| unmigratable(pid, reason);
        if row.state == crate::scheduler::TaskState::None {
            return self.migrate_parked(row, plan, dry_run, extra).await;
        }
        let Some(handle) = self.handle(pid).await? else {
            return Ok(refuse("it was removed meanwhile".into()));
        };
        // Under the lane no transition of it runs: its stored rows are its
        // state.
        let mut slot = handle.lane.clone().lock_owned().await;
        let Some(stored) = persist::read_process(&self.store, pid).await? else {
            return Ok(refuse("it was removed meanwhile".into()));
        };
        if stored.row.rev != plan.from || !stored.row.model.is_empty() {
            return Ok(refuse(format!(
                "it runs version {} now, not {}",
                stored.row.rev, plan.from
            )));
        }
        if stored.row.state.is_terminal() {
            return Ok(refuse("it ended meanwhile".into()));
        }
        if !stored.row.pending.is_empty() {
            return Ok(refuse(
                "it is in the middle of a long run of automatic steps; migrate it once it waits"
                    .into(),
            ));
        }
        let map: HashMap<String, String> = plan.map.clone().into_iter().collect();
        let detail = format!(
            "version {} → {}{}{}",
            plan.from,
            plan.to,
            if map.is_empty() {
                String::new()
            } else {
                format!(", map {:?}", plan.map)
            },
            if plan.vars.is_empty() {
                String::new()
            } else {
                format!(", vars {}", serde_json::Value::Object(plan.vars.clone()))
            }
        );
        let target = Target {
            old: &from.tree,
            new: to.tree.clone(),
            revision: plan.to,
            map: &map,
            vars: &plan.vars,
            record: TaskEvent {
                action: "migrate".into(),
                by: by.map(str::to_owned),
                at: self.now(),
                from: Some(stored.row.state),
                detail: Some(detail),
            },
        };
        let mut m = match migrate_rows(&stored, &target) {
            Ok(m) => m,
            Err(reason) => return Ok(refuse(reason)),
        };
        let report = ProcessMigration {
            pid: pid.to_owned(),
            outcome: if dry_run { "would_migrate" } else { "migrated" }.into(),
            reason: None,
            moves: m
                .moves
                .iter()
                .map(|t| TaskMoveInfo {
                    tid: t.tid.clone(),
                    state: t.state,
                    from: t.from.clone(),
                    to: t.to.clone(),
                })
                .collect(),
            kept_as_history: m.kept_as_history.clone(),
            reannounced: m.reannounced.clone(),
        };
        if dry_run {
            return Ok(report);
        }
        let svc = self.services();
        for tid in &m.reannounced {
            if let Some(ix) = m.process.tasks.find_id(tid) {
                m.process.announce_again(ix, svc);
            }
        }
        let messages = m.process.take_messages();
        let mut ops = std::mem::take(&mut m.ops);
        ops.extend(self.hooks.delivery_ops(self, &messages, None).await?);
        ops.extend(extra);
        self.write(Some((pid, handle.born)), ops).await?;
        // The instance in memory runs the old version: dropped, so the
        // next use loads the migrated rows.
        slot.process = None;
        self.cache.forget(pid, &handle);
        drop(slot);
        self.arm_timer(pid, m.process.next_timer());
        self.emitter.deliver(&messages);
        Ok(report)
    }
}

/// The report of process `pid`, which a migration refused for `reason`.
fn unmigratable(pid: &str, reason: String) -> ProcessMigration {
    ProcessMigration {
        pid: pid.to_owned(),
        outcome: "unmigratable".into(),
        reason: Some(reason),
        moves: Vec::new(),
        kept_as_history: Vec::new(),
        reannounced: Vec::new(),
    }
}

/// Fails unless every node `plan`'s map sends to is in version `to`.
fn check_map(plan: &MigrationPlan, to: &DeployedModel) -> Result<(), EngineError> {
    match plan.map.iter().find(|(_, new)| to.tree.find(new).is_none()) {
        Some((old, new)) => Err(EngineError::Conflict(format!(
            "the map sends '{old}' to '{new}', which version {} of model '{}' does not have",
            plan.to, plan.model
        ))),
        None => Ok(()),
    }
}
