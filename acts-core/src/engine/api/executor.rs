//! [`Executor`]: the client API — models, processes, tasks and actions.
//!
//! Every call that changes a process returns once its transition is
//! durable; an error means nothing changed. An executor with a principal
//! ([`Executor::as_principal`]) checks each call against its roles (see
//! [`Principal`]); a denial is [`EngineError::Denied`].

use std::sync::Arc;

use serde_json::Value;

use crate::durable::Query;
use crate::model::{Vars, Workflow};
use crate::scheduler::{Action, TaskError, TaskState};

use crate::engine::kernel::shared::Kernel;
use crate::engine::persist::model_rows::{ModelRow, PackageRow};
use crate::engine::persist::trigger_rows::TriggerRow;
use crate::engine::services::{On, Services};
use crate::engine::types::access::Principal;
use crate::engine::types::error::EngineError;
use crate::engine::types::info::DeliveryState;
use crate::engine::types::info::{
    DeliveryInfo, MigrationPlan, MigrationReport, ModelInfo, ModelVersionInfo, PackageInfo,
    ProcInfo, TaskInfo, TriggerInfo,
};

/// The client API of an engine (cheap to clone).
#[derive(Clone)]
pub struct Executor {
    pub(super) rt: Arc<Kernel>,
    pub(super) services: Arc<Services>,
    /// Who is asking (`None`: the embedding application, which may do
    /// everything).
    pub(super) principal: Option<Arc<Principal>>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("principal", &self.principal.as_ref().map(|p| &p.id))
            .finish_non_exhaustive()
    }
}

impl Executor {
    pub(crate) fn new(rt: Arc<Kernel>, services: Arc<Services>) -> Self {
        Self {
            rt,
            services,
            principal: None,
        }
    }

    /// This executor acting for `principal`: every call is checked against
    /// its roles, and what it does is recorded as done by it.
    pub fn as_principal(&self, principal: Principal) -> Executor {
        Self {
            rt: self.rt.clone(),
            services: self.services.clone(),
            principal: Some(Arc::new(principal)),
        }
    }

    /// Who this executor acts for (`None`: the application itself).
    pub fn principal(&self) -> Option<&Principal> {
        self.principal.as_deref()
    }

    /// Whether this executor's principal may see the process of `row`.
    pub(super) fn may_see_row(&self, r: &crate::engine::persist::rows::ProcRow) -> bool {
        self.principal.as_ref().is_none_or(|who| {
            who.may_see(
                r.started_by.as_deref(),
                r.audience.iter().map(String::as_str),
            )
        })
    }

    pub(super) fn by(&self) -> Option<&str> {
        self.principal.as_ref().map(|p| p.id.as_str())
    }

    fn need_admin(&self, what: &str) -> Result<(), EngineError> {
        self.principal
            .as_ref()
            .map_or(Ok(()), |p| p.check_admin(what))
    }

    pub(super) fn need_operator(&self, what: &str) -> Result<(), EngineError> {
        self.principal
            .as_ref()
            .map_or(Ok(()), |p| p.check_operator(what))
    }

    fn check_see(&self, p: &crate::scheduler::Process) -> Result<(), EngineError> {
        self.principal
            .as_ref()
            .map_or(Ok(()), |who| who.check_see(p))
    }

    /// `proc().may_see` ([`ProcOps::may_see`](super::ProcOps::may_see)).
    pub(crate) async fn may_see_process(&self, pid: &str) -> Result<bool, EngineError> {
        let Some(who) = &self.principal else {
            return Ok(true);
        };
        if who.is_operator() {
            return Ok(true);
        }
        Ok(self
            .rt
            .with_process(pid, |p| who.may_see_process(p))
            .await?
            .unwrap_or(false))
    }

    // ---- models ---------------------------------------------------------

    /// `model().deploy` ([`ModelOps::deploy`](super::ModelOps::deploy)).
    pub(crate) async fn deploy(&self, workflow: &Workflow) -> Result<ModelInfo, EngineError> {
        self.need_admin("deploying a model")?;
        let mut info = self
            .rt
            .catalog()
            .deploy(workflow, &Default::default())
            .await?;
        info.warnings = crate::model::lint(workflow, &[]);
        Ok(info)
    }

    /// `model().deploy_yaml` ([`ModelOps::deploy_yaml`](super::ModelOps::deploy_yaml)).
    pub(crate) async fn deploy_yaml(&self, text: &str) -> Result<ModelInfo, EngineError> {
        self.need_admin("deploying a model")?;
        let loaded = Workflow::load_yaml_within(text, &self.rt.config().model_limits)?;
        let mut info = self
            .rt
            .catalog()
            .deploy(&loaded.workflow, &loaded.source)
            .await?;
        info.warnings = crate::model::lint(&loaded.workflow, &loaded.unknown_keys);
        Ok(info)
    }

    /// `model().get` ([`ModelOps::get`](super::ModelOps::get)).
    pub(crate) async fn model_of(&self, id: &str) -> Result<(ModelInfo, Workflow), EngineError> {
        let m = self.rt.catalog().model(id).await?;
        Ok((ModelInfo::from(&m.row), self.rt.definition(&m).await?))
    }

    /// `model().info` ([`ModelOps::info`](super::ModelOps::info)).
    pub(crate) async fn model_info(&self, id: &str) -> Result<ModelInfo, EngineError> {
        Ok(ModelInfo::from(&self.rt.catalog().model(id).await?.row))
    }

    /// `model().list` ([`ModelOps::list`](super::ModelOps::list)).
    pub(crate) async fn models(&self) -> Result<Vec<ModelInfo>, EngineError> {
        let rows: Vec<ModelRow> = self
            .rt
            .reads()
            .all(&Query::new().order_by("deployed_at", false))
            .await?;
        Ok(rows.iter().map(ModelInfo::from).collect())
    }

    /// `model().remove` ([`ModelOps::remove`](super::ModelOps::remove)).
    pub(crate) async fn remove_model(&self, id: &str) -> Result<bool, EngineError> {
        self.need_admin("removing a model")?;
        self.rt.catalog().remove_model(id).await
    }

    /// `model().versions` ([`ModelOps::versions`](super::ModelOps::versions)).
    pub(crate) async fn versions(&self, id: &str) -> Result<Vec<ModelVersionInfo>, EngineError> {
        self.rt.catalog().versions(id).await
    }

    /// `model().version` ([`ModelOps::version`](super::ModelOps::version)).
    pub(crate) async fn model_version(
        &self,
        id: &str,
        revision: u32,
    ) -> Result<(ModelInfo, Workflow), EngineError> {
        let m = self.rt.catalog().model_version(id, revision).await?;
        Ok((ModelInfo::from(&m.row), self.rt.definition(&m).await?))
    }

    /// `model().migrate` ([`ModelOps::migrate`](super::ModelOps::migrate)).
    pub(crate) async fn migrate(
        &self,
        plan: &MigrationPlan,
        dry_run: bool,
    ) -> Result<MigrationReport, EngineError> {
        self.need_admin("migrating processes")?;
        self.rt.migrate(plan, dry_run, self.by()).await
    }

    /// `model().remove_version` ([`ModelOps::remove_version`](super::ModelOps::remove_version)).
    pub(crate) async fn remove_version(
        &self,
        id: &str,
        revision: u32,
    ) -> Result<bool, EngineError> {
        self.need_admin("removing a model version")?;
        self.rt.catalog().remove_version(id, revision).await
    }

    // ---- processes ----------------------------------------------------------

    /// `proc().start` ([`ProcOps::start`](super::ProcOps::start)).
    pub(crate) async fn start(&self, model_id: &str, vars: Vars) -> Result<ProcInfo, EngineError> {
        self.rt.start(model_id, None, vars, self.by()).await
    }

    /// `proc().start_version` ([`ProcOps::start_version`](super::ProcOps::start_version)).
    pub(crate) async fn start_version(
        &self,
        model_id: &str,
        revision: u32,
        vars: Vars,
    ) -> Result<ProcInfo, EngineError> {
        self.rt
            .start(model_id, Some(revision), vars, self.by())
            .await
    }

    /// `proc().concurrency_key` ([`ProcOps::concurrency_key`](super::ProcOps::concurrency_key)).
    pub(crate) async fn concurrency_key(
        &self,
        model_id: &str,
        revision: Option<u32>,
        vars: &Vars,
    ) -> Result<Option<String>, EngineError> {
        self.rt.concurrency_key_of(model_id, revision, vars).await
    }

    /// `proc().get` ([`ProcOps::get`](super::ProcOps::get)).
    pub(crate) async fn process(&self, pid: &str) -> Result<ProcInfo, EngineError> {
        let info = self
            .rt
            .with_process(pid, |p| {
                let gated = p.gates().iter().any(|g| !g.open);
                self.check_see(p).map(|()| (ProcInfo::of(p), gated))
            })
            .await?
            .ok_or_else(|| EngineError::ProcessNotFound(pid.to_owned()))??;
        let (mut info, gated) = info;
        info.waiting_for =
            self.rt
                .waiting_for(pid, info.state, info.concurrency_key.is_some(), gated);
        Ok(info)
    }

    /// `proc().model` ([`ProcOps::model`](super::ProcOps::model)).
    pub(crate) async fn process_model(&self, pid: &str) -> Result<Workflow, EngineError> {
        let row = self
            .rt
            .proc_row(pid)
            .await?
            .ok_or_else(|| EngineError::ProcessNotFound(pid.to_owned()))?;
        if let Some(who) = &self.principal {
            who.check_sees(
                pid,
                row.started_by.as_deref(),
                row.audience.iter().map(String::as_str),
            )?;
        }
        let deployed = self.rt.catalog().deployed_of(&row).await?;
        self.rt.definition(&deployed).await
    }

    /// `proc().count` ([`ProcOps::count`](super::ProcOps::count)).
    pub(crate) async fn count_processes(&self, state: TaskState) -> Result<usize, EngineError> {
        self.need_operator("counting every process")?;
        self.count_in_state::<crate::engine::persist::rows::ProcRow>(state.as_str())
            .await
    }

    /// How many rows of `R` have `state` (from its state index: keys only).
    async fn count_in_state<R: crate::durable::Row>(
        &self,
        state: &str,
    ) -> Result<usize, EngineError> {
        Ok(self.rt.reads().count_in_state::<R>(state).await?)
    }

    /// `proc().abort` ([`ProcOps::abort`](super::ProcOps::abort)).
    pub(crate) async fn abort_process(&self, pid: &str) -> Result<(), EngineError> {
        self.need_operator("aborting a process")?;
        let by = self.by();
        self.rt
            .on_process(pid, |p, svc| {
                p.abort_process(svc)?;
                let root = p.root();
                p.tasks.record(root, "abort", by);
                Ok(())
            })
            .await
    }

    /// `proc().remove` ([`ProcOps::remove`](super::ProcOps::remove)).
    pub(crate) async fn remove_process(&self, pid: &str) -> Result<bool, EngineError> {
        self.need_operator("removing a process")?;
        self.rt.remove_process(pid).await
    }

    /// `pack().list` ([`PackageOps::list`](super::PackageOps::list)).
    pub(crate) async fn packages(&self) -> Result<Vec<PackageInfo>, EngineError> {
        let mut rows: Vec<PackageRow> = self.rt.reads().all(&Query::new()).await?;
        rows.sort_by(|a, b| a.package.id.cmp(&b.package.id));
        Ok(rows.iter().map(PackageInfo::from).collect())
    }

    // ---- triggers and deliveries ----------------------------------------------

    /// `evt().start` ([`TriggerOps::start`](super::TriggerOps::start)).
    pub(crate) async fn start_trigger(
        &self,
        trigger_id: &str,
        payload: Value,
    ) -> Result<ProcInfo, EngineError> {
        On::new(&self.rt, &self.services)
            .start_trigger(trigger_id, payload, self.by())
            .await
    }

    /// `evt().hook` ([`TriggerOps::hook`](super::TriggerOps::hook)).
    pub(crate) async fn hook(
        &self,
        name: &str,
        payload: Value,
    ) -> Result<Vec<ProcInfo>, EngineError> {
        On::new(&self.rt, &self.services)
            .hook(name, payload, self.by())
            .await
    }

    /// `evt().list` ([`TriggerOps::list`](super::TriggerOps::list)).
    pub(crate) async fn triggers(&self) -> Result<Vec<TriggerInfo>, EngineError> {
        let rows: Vec<TriggerRow> = self.rt.reads().all(&Query::new()).await?;
        Ok(rows.iter().map(TriggerInfo::from).collect())
    }

    /// `msg().list` ([`DeliveryOps::list`](super::DeliveryOps::list)).
    pub(crate) async fn deliveries(
        &self,
        channel: Option<&str>,
        state: Option<DeliveryState>,
    ) -> Result<Vec<DeliveryInfo>, EngineError> {
        self.need_operator("reading deliveries")?;
        let rows = On::new(&self.rt, &self.services)
            .deliveries(channel, state)
            .await?;
        Ok(rows.iter().map(DeliveryInfo::from).collect())
    }

    /// `msg().count` ([`DeliveryOps::count`](super::DeliveryOps::count)).
    pub(crate) async fn count_deliveries(
        &self,
        state: DeliveryState,
    ) -> Result<usize, EngineError> {
        self.need_operator("reading deliveries")?;
        self.count_in_state::<crate::engine::persist::delivery_rows::DeliveryRow>(state.as_str())
            .await
    }

    /// `msg().redeliver` ([`DeliveryOps::redeliver`](super::DeliveryOps::redeliver)).
    pub(crate) async fn redeliver(&self, channel: &str, msg_id: &str) -> Result<(), EngineError> {
        self.need_operator("redelivering a dead letter")?;
        On::new(&self.rt, &self.services)
            .redeliver(channel, msg_id)
            .await
    }

    /// `msg().discard` ([`DeliveryOps::discard`](super::DeliveryOps::discard)).
    pub(crate) async fn discard(&self, channel: &str, msg_id: &str) -> Result<(), EngineError> {
        self.need_operator("discarding a dead letter")?;
        On::new(&self.rt, &self.services)
            .discard(channel, msg_id)
            .await
    }

    // ---- tasks --------------------------------------------------------------

    /// `task().get` ([`TaskOps::get`](super::TaskOps::get)).
    pub(crate) async fn task_of(&self, pid: &str, tid: &str) -> Result<TaskInfo, EngineError> {
        self.rt
            .with_process(pid, |p| {
                self.check_see(p)
                    .map(|()| p.tasks.find_id(tid).and_then(|ix| TaskInfo::of(p, ix)))
            })
            .await?
            .ok_or_else(|| EngineError::ProcessNotFound(pid.to_owned()))??
            .ok_or_else(|| EngineError::TaskNotFound {
                pid: pid.to_owned(),
                tid: tid.to_owned(),
            })
    }

    /// `task().list` ([`TaskOps::list`](super::TaskOps::list)).
    pub(crate) async fn tasks(&self, pid: &str) -> Result<Vec<TaskInfo>, EngineError> {
        self.rt
            .with_process(pid, |p| {
                self.check_see(p).map(|()| {
                    p.tasks
                        .all()
                        .filter_map(|(ix, _)| TaskInfo::of(p, ix))
                        .collect()
                })
            })
            .await?
            .ok_or_else(|| EngineError::ProcessNotFound(pid.to_owned()))?
    }

    // ---- actions ------------------------------------------------------------

    /// `act().apply` ([`ActOps::apply`](super::ActOps::apply)).
    pub(crate) async fn act_on(
        &self,
        pid: &str,
        tid: &str,
        action: Action,
        options: Vars,
    ) -> Result<(), EngineError> {
        self.rt
            .act(pid, tid, action, options, self.principal.as_deref())
            .await
    }

    /// `act().complete` ([`ActOps::complete`](super::ActOps::complete)).
    pub(crate) async fn complete(
        &self,
        pid: &str,
        tid: &str,
        vars: Vars,
    ) -> Result<(), EngineError> {
        self.act().apply(pid, tid, Action::Complete, vars).await
    }

    /// `act().submit` ([`ActOps::submit`](super::ActOps::submit)).
    pub(crate) async fn submit(&self, pid: &str, tid: &str, vars: Vars) -> Result<(), EngineError> {
        self.act().apply(pid, tid, Action::Submit, vars).await
    }

    /// `act().skip` ([`ActOps::skip`](super::ActOps::skip)).
    pub(crate) async fn skip(&self, pid: &str, tid: &str, vars: Vars) -> Result<(), EngineError> {
        self.act().apply(pid, tid, Action::Skip, vars).await
    }

    /// `act().abort` ([`ActOps::abort`](super::ActOps::abort)).
    pub(crate) async fn abort(&self, pid: &str, tid: &str, vars: Vars) -> Result<(), EngineError> {
        self.act().apply(pid, tid, Action::Abort, vars).await
    }

    /// `act().error` ([`ActOps::error`](super::ActOps::error)).
    pub(crate) async fn error(
        &self,
        pid: &str,
        tid: &str,
        ecode: &str,
        message: &str,
    ) -> Result<(), EngineError> {
        let options = TaskError::new(ecode, message).to_vars();
        self.act().apply(pid, tid, Action::Error, options).await
    }

    /// `act().back` ([`ActOps::back`](super::ActOps::back)).
    pub(crate) async fn back(&self, pid: &str, tid: &str, to: &str) -> Result<(), EngineError> {
        let mut o = Vars::new();
        o.insert("to".into(), Value::String(to.into()));
        self.act().apply(pid, tid, Action::Back, o).await
    }

    /// `act().cancel` ([`ActOps::cancel`](super::ActOps::cancel)).
    pub(crate) async fn cancel(&self, pid: &str, tid: &str) -> Result<(), EngineError> {
        self.act()
            .apply(pid, tid, Action::Cancel, Vars::new())
            .await
    }

    /// `act().remove` ([`ActOps::remove`](super::ActOps::remove)).
    pub(crate) async fn remove(&self, pid: &str, tid: &str) -> Result<(), EngineError> {
        self.act()
            .apply(pid, tid, Action::Remove, Vars::new())
            .await
    }

    /// `act().set_process_vars` ([`ActOps::set_process_vars`](super::ActOps::set_process_vars)).
    pub(crate) async fn set_process_vars(
        &self,
        pid: &str,
        tid: &str,
        vars: Vars,
    ) -> Result<(), EngineError> {
        self.act()
            .apply(pid, tid, Action::SetProcessVars, vars)
            .await
    }

    /// `act().push` ([`ActOps::push`](super::ActOps::push)).
    pub(crate) async fn push(&self, pid: &str, tid: &str, act: Vars) -> Result<(), EngineError> {
        self.need_operator("pushing an act")?;
        self.rt.check_vars_size("the pushed act", &act)?;
        let by = self.by();
        self.rt
            .on_process(pid, |p, svc| {
                p.refuse_if_paused()?;
                p.push(tid, act, svc)?;
                if let Some(ix) = p.tasks.find_id(tid) {
                    p.tasks.record(ix, "push", by);
                }
                Ok(())
            })
            .await
    }
}
