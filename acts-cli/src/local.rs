//! [`Acts`] over the engine in this process (the commands on a store):
//! each call is the executor's, its errors mapped to exit codes.

use std::time::Duration;

use acts::{
    Action, BulkItem, BulkJob, BulkOutcome, BulkPreview, BulkRequest, DeliveryInfo, DeliveryQuery,
    EngineError, Executor, MigrationPlan, MigrationReport, ModelInfo, ModelVersionInfo, ProcInfo,
    ProcessQuery, TaskInfo, TaskQuery, Vars,
};
use async_trait::async_trait;

use crate::api::{Acts, Control, Paged};
use crate::failure::Failure;

/// The engine's executor, as the commands use it.
pub(crate) struct Local(pub(crate) Executor);

#[async_trait]
impl Acts for Local {
    async fn deploy(&self, text: String) -> Result<ModelInfo, Failure> {
        self.0.deploy_yaml(&text).await.map_err(|e| match e {
            EngineError::Model(_) | EngineError::TooLarge { .. } => Failure::input(e.to_string()),
            other => Failure::run(other.to_string()),
        })
    }

    async fn models(&self) -> Result<Vec<ModelInfo>, Failure> {
        self.0.models().await.map_err(Failure::engine)
    }

    async fn versions(&self, model: &str) -> Result<Vec<ModelVersionInfo>, Failure> {
        self.0.versions(model).await.map_err(Failure::action)
    }

    async fn remove_version(&self, model: &str, rev: u32) -> Result<(), Failure> {
        if self
            .0
            .remove_version(model, rev)
            .await
            .map_err(Failure::action)?
        {
            Ok(())
        } else {
            Err(Failure::input(format!(
                "model '{model}' has no version {rev} (`acts versions {model}` lists them)"
            )))
        }
    }

    async fn migrate(
        &self,
        plan: &MigrationPlan,
        dry_run: bool,
    ) -> Result<MigrationReport, Failure> {
        self.0.migrate(plan, dry_run).await.map_err(Failure::action)
    }

    async fn start(&self, model: &str, rev: Option<u32>, vars: Vars) -> Result<ProcInfo, Failure> {
        match rev {
            Some(r) => self.0.start_version(model, r, vars).await,
            None => self.0.start(model, vars).await,
        }
        .map_err(Failure::action)
    }

    async fn process(&self, pid: &str) -> Result<(ProcInfo, Vec<TaskInfo>), Failure> {
        let info = self.0.process(pid).await.map_err(Failure::action)?;
        let tasks = self.0.tasks(pid).await.map_err(Failure::action)?;
        Ok((info, tasks))
    }

    async fn stuck(&self, after: Duration) -> Result<Vec<ProcInfo>, Failure> {
        self.0
            .stuck_processes(Some(after))
            .await
            .map_err(Failure::engine)
    }

    async fn find_processes(&self, q: &ProcessQuery) -> Result<Paged<ProcInfo>, Failure> {
        let page = self.0.find_processes(q).await.map_err(Failure::action)?;
        Ok((page.items, page.next))
    }

    async fn count_processes(&self, q: &ProcessQuery) -> Result<usize, Failure> {
        self.0.count_matching(q).await.map_err(Failure::action)
    }

    async fn find_tasks(&self, q: &TaskQuery) -> Result<Paged<TaskInfo>, Failure> {
        let page = self.0.find_tasks(q).await.map_err(Failure::action)?;
        Ok((page.items, page.next))
    }

    async fn count_tasks(&self, q: &TaskQuery) -> Result<usize, Failure> {
        self.0.count_tasks(q).await.map_err(Failure::action)
    }

    async fn find_deliveries(&self, q: &DeliveryQuery) -> Result<Paged<DeliveryInfo>, Failure> {
        let page = self.0.find_deliveries(q).await.map_err(Failure::action)?;
        Ok((page.items, page.next))
    }

    async fn count_deliveries(&self, q: &DeliveryQuery) -> Result<usize, Failure> {
        self.0
            .count_deliveries_matching(q)
            .await
            .map_err(Failure::action)
    }

    async fn act(&self, pid: &str, tid: &str, action: &str, vars: Vars) -> Result<(), Failure> {
        if action == "push" {
            return self.0.push(pid, tid, vars).await.map_err(Failure::action);
        }
        let a = action
            .parse::<Action>()
            .map_err(|e| Failure::input(format!("{e} (or push)")))?;
        self.0
            .act(pid, tid, a, vars)
            .await
            .map(drop)
            .map_err(Failure::action)
    }

    async fn control(&self, pid: &str, control: Control) -> Result<(), Failure> {
        match control {
            Control::Pause { reason } => self.0.pause_process(pid, &reason).await,
            Control::Resume => self.0.unpause_process(pid).await,
            Control::Terminate { reason } => self.0.terminate_process(pid, &reason).await,
            Control::Rewind { to, vars } => self.0.rewind_process(pid, &to, vars).await,
            Control::Retry { task, vars } => self.0.retry_process(pid, task.as_deref(), vars).await,
        }
        .map_err(Failure::action)
    }

    async fn redeliver(&self, channel: &str, msg: &str) -> Result<(), Failure> {
        self.0
            .redeliver(channel, msg)
            .await
            .map_err(Failure::action)
    }

    async fn discard(&self, channel: &str, msg: &str) -> Result<(), Failure> {
        self.0.discard(channel, msg).await.map_err(Failure::action)
    }

    async fn bulk_preview(&self, r: &BulkRequest) -> Result<BulkPreview, Failure> {
        self.0.bulk_preview(r).await.map_err(Failure::action)
    }

    async fn bulk_start(&self, r: BulkRequest) -> Result<BulkJob, Failure> {
        self.0.bulk_start(r).await.map_err(Failure::action)
    }

    async fn bulk_job(&self, id: &str) -> Result<BulkJob, Failure> {
        self.0.bulk_job(id).await.map_err(Failure::action)
    }

    async fn bulk_jobs(&self, cursor: Option<&str>) -> Result<Paged<BulkJob>, Failure> {
        let page = self
            .0
            .bulk_jobs(None, cursor)
            .await
            .map_err(Failure::action)?;
        Ok((page.items, page.next))
    }

    async fn bulk_items(
        &self,
        id: &str,
        outcome: Option<BulkOutcome>,
        cursor: Option<&str>,
    ) -> Result<Paged<BulkItem>, Failure> {
        let page = self
            .0
            .bulk_items(id, outcome, Some(acts::MAX_PAGE), cursor)
            .await
            .map_err(Failure::action)?;
        Ok((page.items, page.next))
    }

    async fn remove_bulk(&self, id: &str) -> Result<(), Failure> {
        self.0.remove_bulk(id).await.map_err(Failure::action)
    }

    async fn cancel_bulk(&self, id: &str) -> Result<BulkJob, Failure> {
        self.0.cancel_bulk(id).await.map_err(Failure::action)
    }

    async fn resume_bulk(&self, id: &str) -> Result<(), Failure> {
        self.0.resume_bulk(id).await.map_err(Failure::action)
    }
}
