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

    /// Whether this executor may see process `pid` (`false` when it does
    /// not exist). What a message stream for a principal filters on.
    pub async fn may_see_process(&self, pid: &str) -> Result<bool, EngineError> {
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

    /// Validates and deploys `workflow` (a new deploy of an id replaces it
    /// for processes started afterwards).
    pub async fn deploy(&self, workflow: &Workflow) -> Result<ModelInfo, EngineError> {
        self.need_admin("deploying a model")?;
        let mut info = self
            .rt
            .catalog()
            .deploy(workflow, &Default::default())
            .await?;
        info.warnings = crate::model::lint(workflow, &[]);
        Ok(info)
    }

    /// Parses, validates and deploys a YAML model; errors name the line and
    /// column. What deploys but looks wrong (a key the language does not
    /// have, an interrupt without a key) comes back in
    /// [`ModelInfo::warnings`].
    pub async fn deploy_yaml(&self, text: &str) -> Result<ModelInfo, EngineError> {
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

    /// A deployed model and its definition.
    pub async fn model(&self, id: &str) -> Result<(ModelInfo, Workflow), EngineError> {
        let m = self.rt.catalog().model(id).await?;
        Ok((ModelInfo::from(&m.row), self.rt.definition(&m).await?))
    }

    /// Model `id`'s summary (its name, version, deploys), without reading
    /// its definition back: what a listing shows of it.
    pub async fn model_info(&self, id: &str) -> Result<ModelInfo, EngineError> {
        Ok(ModelInfo::from(&self.rt.catalog().model(id).await?.row))
    }

    /// Every deployed model, oldest deploy first.
    pub async fn models(&self) -> Result<Vec<ModelInfo>, EngineError> {
        let rows: Vec<ModelRow> = self
            .rt
            .reads()
            .all(&Query::new().order_by("deployed_at", false))
            .await?;
        Ok(rows.iter().map(ModelInfo::from).collect())
    }

    /// Removes a model: no process starts from it any more. Processes
    /// running on its versions end on them (those versions are kept, see
    /// [`versions`](Self::versions)). Returns whether it existed.
    pub async fn remove_model(&self, id: &str) -> Result<bool, EngineError> {
        self.need_admin("removing a model")?;
        self.rt.catalog().remove_model(id).await
    }

    /// Every stored version of model `id`, oldest first: its revision,
    /// `ver`, when it was deployed, whether new processes start on it, and
    /// how many stored (and unfinished) processes run on it.
    pub async fn versions(&self, id: &str) -> Result<Vec<ModelVersionInfo>, EngineError> {
        self.rt.catalog().versions(id).await
    }

    /// Version `revision` of model `id` and its definition.
    pub async fn model_version(
        &self,
        id: &str,
        revision: u32,
    ) -> Result<(ModelInfo, Workflow), EngineError> {
        let m = self.rt.catalog().model_version(id, revision).await?;
        Ok((ModelInfo::from(&m.row), self.rt.definition(&m).await?))
    }

    /// Moves the live processes of `plan.model` from version `plan.from` to
    /// `plan.to` (admin): each in one atomic batch or not at all, nodes
    /// mapped by id or by `plan.map`, `plan.vars` set, the move recorded in
    /// its history. With `dry_run` nothing is written and the report says
    /// what would happen to each process. See `docs/OPERATIONS.md`.
    pub async fn migrate(
        &self,
        plan: &MigrationPlan,
        dry_run: bool,
    ) -> Result<MigrationReport, EngineError> {
        self.need_admin("migrating processes")?;
        self.rt.migrate(plan, dry_run, self.by()).await
    }

    /// Removes version `revision` of model `id`; refused (nothing removed)
    /// while it is the latest or any stored process runs on it. Returns
    /// whether it existed.
    pub async fn remove_version(&self, id: &str, revision: u32) -> Result<bool, EngineError> {
        self.need_admin("removing a model version")?;
        self.rt.catalog().remove_version(id, revision).await
    }

    // ---- processes ----------------------------------------------------------

    /// Starts a process of model `model_id` with start options `vars`
    /// (checked against the model's `inputs`; a `pid` option names the
    /// process). Returns once the process's first transition is durable —
    /// a process with no interrupt may already be finished. Over the cache
    /// cap it is parked (state `none`) and starts when a slot frees.
    pub async fn start(&self, model_id: &str, vars: Vars) -> Result<ProcInfo, EngineError> {
        self.rt.start(model_id, None, vars, self.by()).await
    }

    /// [`start`](Self::start) on version `revision` of the model rather
    /// than its latest (see [`versions`](Self::versions)).
    pub async fn start_version(
        &self,
        model_id: &str,
        revision: u32,
        vars: Vars,
    ) -> Result<ProcInfo, EngineError> {
        self.rt
            .start(model_id, Some(revision), vars, self.by())
            .await
    }

    /// The concurrency key a start of `model_id` (its latest version, or
    /// `revision`) with start options `vars` would have; `None` when the
    /// model has no `concurrency:`. A cluster routes such a start by it.
    pub async fn concurrency_key(
        &self,
        model_id: &str,
        revision: Option<u32>,
        vars: &Vars,
    ) -> Result<Option<String>, EngineError> {
        self.rt.concurrency_key_of(model_id, revision, vars).await
    }

    /// A process, with its outputs.
    pub async fn process(&self, pid: &str) -> Result<ProcInfo, EngineError> {
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

    /// The model process `pid` runs: as deployed when it started (a later
    /// deploy of its id does not change it).
    pub async fn process_model(&self, pid: &str) -> Result<Workflow, EngineError> {
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

    /// How many processes are in `state` (counted from the state index;
    /// no process row is read). An operator's or admin's.
    pub async fn count_processes(&self, state: TaskState) -> Result<usize, EngineError> {
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

    /// Aborts a running process: running tasks are aborted, waiting ones
    /// skipped, and the process ends `aborted`.
    pub async fn abort_process(&self, pid: &str) -> Result<(), EngineError> {
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

    /// Removes a process and all its rows (a running one stops). Returns
    /// whether it existed.
    pub async fn remove_process(&self, pid: &str) -> Result<bool, EngineError> {
        self.need_operator("removing a process")?;
        self.rt.remove_process(pid).await
    }

    /// Every package the engine knows, by id.
    pub async fn packages(&self) -> Result<Vec<PackageInfo>, EngineError> {
        let mut rows: Vec<PackageRow> = self.rt.reads().all(&Query::new()).await?;
        rows.sort_by(|a, b| a.package.id.cmp(&b.package.id));
        Ok(rows.iter().map(PackageInfo::from).collect())
    }

    // ---- triggers and deliveries ----------------------------------------------

    /// Starts the model of trigger `trigger_id` (`<model id>:<trigger
    /// id>`, of kind `manual` or `hook`) with `payload` (null: the
    /// trigger's default params).
    pub async fn start_trigger(
        &self,
        trigger_id: &str,
        payload: Value,
    ) -> Result<ProcInfo, EngineError> {
        On::new(&self.rt, &self.services)
            .start_trigger(trigger_id, payload, self.by())
            .await
    }

    /// Sends hook event `name`: every model with a hook trigger of that id
    /// starts with `payload`. Returns the processes started.
    pub async fn hook(&self, name: &str, payload: Value) -> Result<Vec<ProcInfo>, EngineError> {
        On::new(&self.rt, &self.services)
            .hook(name, payload, self.by())
            .await
    }

    /// The triggers of every deployed model (with the schedules' next and
    /// last runs).
    pub async fn triggers(&self) -> Result<Vec<TriggerInfo>, EngineError> {
        let rows: Vec<TriggerRow> = self.rt.reads().all(&Query::new()).await?;
        Ok(rows.iter().map(TriggerInfo::from).collect())
    }

    /// Deliveries of durable channel `channel` (all if `None`) in `state`
    /// (all if `None`), oldest first. `Some(DeliveryState::Failed)` is the
    /// dead-letter view.
    pub async fn deliveries(
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

    /// How many deliveries are in `state` over every durable channel
    /// (counted from the state index; no delivery row is read).
    pub async fn count_deliveries(&self, state: DeliveryState) -> Result<usize, EngineError> {
        self.need_operator("reading deliveries")?;
        self.count_in_state::<crate::engine::persist::delivery_rows::DeliveryRow>(state.as_str())
            .await
    }

    /// Gives dead letter `msg_id` of channel `channel` another round
    /// (pending again, tries reset, sent at once to a connected client).
    /// Only a failed delivery can be redelivered.
    pub async fn redeliver(&self, channel: &str, msg_id: &str) -> Result<(), EngineError> {
        self.need_operator("redelivering a dead letter")?;
        On::new(&self.rt, &self.services)
            .redeliver(channel, msg_id)
            .await
    }

    /// Discards dead letter `msg_id` of channel `channel` (its delivery is
    /// deleted). Only a failed delivery can be discarded.
    pub async fn discard(&self, channel: &str, msg_id: &str) -> Result<(), EngineError> {
        self.need_operator("discarding a dead letter")?;
        On::new(&self.rt, &self.services)
            .discard(channel, msg_id)
            .await
    }

    // ---- tasks --------------------------------------------------------------

    /// One task of a process.
    pub async fn task(&self, pid: &str, tid: &str) -> Result<TaskInfo, EngineError> {
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

    /// Every task of a process, in creation order.
    pub async fn tasks(&self, pid: &str) -> Result<Vec<TaskInfo>, EngineError> {
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

    /// Applies `action` to act `tid` of process `pid` with `options`
    /// (recorded in the task's history with who applied it).
    pub async fn act(
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

    /// Completes an act (`next`), folding `vars` into it.
    pub async fn complete(&self, pid: &str, tid: &str, vars: Vars) -> Result<(), EngineError> {
        self.act(pid, tid, Action::Complete, vars).await
    }

    /// Submits an act.
    pub async fn submit(&self, pid: &str, tid: &str, vars: Vars) -> Result<(), EngineError> {
        self.act(pid, tid, Action::Submit, vars).await
    }

    /// Skips an act (and its waiting siblings).
    pub async fn skip(&self, pid: &str, tid: &str, vars: Vars) -> Result<(), EngineError> {
        self.act(pid, tid, Action::Skip, vars).await
    }

    /// Aborts an act and every ancestor: the process ends `aborted`.
    pub async fn abort(&self, pid: &str, tid: &str, vars: Vars) -> Result<(), EngineError> {
        self.act(pid, tid, Action::Abort, vars).await
    }

    /// Fails an act with `ecode` (what `catches` match) and `message`.
    pub async fn error(
        &self,
        pid: &str,
        tid: &str,
        ecode: &str,
        message: &str,
    ) -> Result<(), EngineError> {
        let options = TaskError::new(ecode, message).to_vars();
        self.act(pid, tid, Action::Error, options).await
    }

    /// Goes back from an act to the earlier step `to`, which runs again.
    pub async fn back(&self, pid: &str, tid: &str, to: &str) -> Result<(), EngineError> {
        let mut o = Vars::new();
        o.insert("to".into(), Value::String(to.into()));
        self.act(pid, tid, Action::Back, o).await
    }

    /// Withdraws a finished act: its step runs again and the steps that
    /// followed are undone.
    pub async fn cancel(&self, pid: &str, tid: &str) -> Result<(), EngineError> {
        self.act(pid, tid, Action::Cancel, Vars::new()).await
    }

    /// Removes an act.
    pub async fn remove(&self, pid: &str, tid: &str) -> Result<(), EngineError> {
        self.act(pid, tid, Action::Remove, Vars::new()).await
    }

    /// Writes `vars` into the process's root data (through act `tid`).
    pub async fn set_process_vars(
        &self,
        pid: &str,
        tid: &str,
        vars: Vars,
    ) -> Result<(), EngineError> {
        self.act(pid, tid, Action::SetProcessVars, vars).await
    }

    /// Runs a new act under step task `tid`; `act` holds its definition
    /// (`uses` required; `params`, `id`, `name`, `key` ...).
    pub async fn push(&self, pid: &str, tid: &str, act: Vars) -> Result<(), EngineError> {
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
