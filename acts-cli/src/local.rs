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
        self.0
            .model()
            .deploy_yaml(&text)
            .await
            .map_err(|e| match e {
                EngineError::Model(_) | EngineError::TooLarge { .. } => {
                    Failure::input(e.to_string())
                }
                other => Failure::run(other.to_string()),
            })
    }

    async fn models(&self) -> Result<Vec<ModelInfo>, Failure> {
        self.0.model().list().await.map_err(Failure::engine)
    }

    async fn versions(&self, model: &str) -> Result<Vec<ModelVersionInfo>, Failure> {
        self.0
            .model()
            .versions(model)
            .await
            .map_err(Failure::action)
    }

    async fn remove_version(&self, model: &str, rev: u32) -> Result<(), Failure> {
        if self
            .0
            .model()
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
        self.0
            .model()
            .migrate(plan, dry_run)
            .await
            .map_err(Failure::action)
    }

    async fn start(&self, model: &str, rev: Option<u32>, vars: Vars) -> Result<ProcInfo, Failure> {
        match rev {
            Some(r) => self.0.proc().start_version(model, r, vars).await,
            None => self.0.proc().start(model, vars).await,
        }
        .map_err(Failure::action)
    }

    async fn process(&self, pid: &str) -> Result<(ProcInfo, Vec<TaskInfo>), Failure> {
        let info = self.0.proc().get(pid).await.map_err(Failure::action)?;
        let tasks = self.0.task().list(pid).await.map_err(Failure::action)?;
        Ok((info, tasks))
    }

    async fn stuck(&self, after: Duration) -> Result<Vec<ProcInfo>, Failure> {
        self.0
            .proc()
            .stuck(Some(after))
            .await
            .map_err(Failure::engine)
    }

    async fn find_processes(&self, q: &ProcessQuery) -> Result<Paged<ProcInfo>, Failure> {
        let page = self.0.proc().find(q).await.map_err(Failure::action)?;
        Ok((page.items, page.next))
    }

    async fn count_processes(&self, q: &ProcessQuery) -> Result<usize, Failure> {
        self.0
            .proc()
            .count_matching(q)
            .await
            .map_err(Failure::action)
    }

    async fn find_tasks(&self, q: &TaskQuery) -> Result<Paged<TaskInfo>, Failure> {
        let page = self.0.task().find(q).await.map_err(Failure::action)?;
        Ok((page.items, page.next))
    }

    async fn count_tasks(&self, q: &TaskQuery) -> Result<usize, Failure> {
        self.0.task().count(q).await.map_err(Failure::action)
    }

    async fn find_deliveries(&self, q: &DeliveryQuery) -> Result<Paged<DeliveryInfo>, Failure> {
        let page = self.0.msg().find(q).await.map_err(Failure::action)?;
        Ok((page.items, page.next))
    }

    async fn count_deliveries(&self, q: &DeliveryQuery) -> Result<usize, Failure> {
        self.0
            .msg()
            .count_matching(q)
            .await
            .map_err(Failure::action)
    }

    async fn act(&self, pid: &str, tid: &str, action: &str, vars: Vars) -> Result<(), Failure> {
        if action == "push" {
            return self
                .0
                .act()
                .push(pid, tid, vars)
                .await
                .map_err(Failure::action);
        }
        let a = action
            .parse::<Action>()
            .map_err(|e| Failure::input(format!("{e} (or push)")))?;
        self.0
            .act()
            .apply(pid, tid, a, vars)
            .await
            .map(drop)
            .map_err(Failure::action)
    }

    async fn control(&self, pid: &str, control: Control) -> Result<(), Failure> {
        match control {
            Control::Pause { reason } => self.0.proc().pause(pid, &reason).await,
            Control::Resume => self.0.proc().unpause(pid).await,
            Control::Terminate { reason } => self.0.proc().terminate(pid, &reason).await,
            Control::Rewind { to, vars } => self.0.proc().rewind(pid, &to, vars).await,
            Control::Retry { task, vars } => self.0.proc().retry(pid, task.as_deref(), vars).await,
        }
        .map_err(Failure::action)
    }

    async fn redeliver(&self, channel: &str, msg: &str) -> Result<(), Failure> {
        self.0
            .msg()
            .redeliver(channel, msg)
            .await
            .map_err(Failure::action)
    }

    async fn discard(&self, channel: &str, msg: &str) -> Result<(), Failure> {
        self.0
            .msg()
            .discard(channel, msg)
            .await
            .map_err(Failure::action)
    }

    async fn bulk_preview(&self, r: &BulkRequest) -> Result<BulkPreview, Failure> {
        self.0.bulk().preview(r).await.map_err(Failure::action)
    }

    async fn bulk_start(&self, r: BulkRequest) -> Result<BulkJob, Failure> {
        self.0.bulk().start(r).await.map_err(Failure::action)
    }

    async fn bulk_job(&self, id: &str) -> Result<BulkJob, Failure> {
        self.0.bulk().get(id).await.map_err(Failure::action)
    }

    async fn bulk_jobs(&self, cursor: Option<&str>) -> Result<Paged<BulkJob>, Failure> {
        let page = self
            .0
            .bulk()
            .list(None, cursor)
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
            .bulk()
            .items(id, outcome, Some(acts::MAX_PAGE), cursor)
            .await
            .map_err(Failure::action)?;
        Ok((page.items, page.next))
    }

    async fn remove_bulk(&self, id: &str) -> Result<(), Failure> {
        self.0.bulk().remove(id).await.map_err(Failure::action)
    }

    async fn cancel_bulk(&self, id: &str) -> Result<BulkJob, Failure> {
        self.0.bulk().cancel(id).await.map_err(Failure::action)
    }

    async fn resume_bulk(&self, id: &str) -> Result<(), Failure> {
        self.0.bulk().resume(id).await.map_err(Failure::action)
    }
}
