//! Starting processes: admission (resident or parked) and the first
//! transition.

use std::sync::Arc;

use serde_json::Value;

use tracing::{Instrument, debug, info_span};

use crate::model::Vars;
use crate::scheduler::Process;
use crate::tree::long_id;

use crate::engine::kernel::cache::{Admission, ProcHandle};
use crate::engine::kernel::catalog::DeployedModel;
use crate::engine::kernel::shared::Kernel;
use crate::engine::persist::Persisted;
use crate::engine::persist::proc_rows::ProcRows;
use crate::engine::persist::rows::{ConcurrencySlot, ProcRow, QueueOrder};
use crate::engine::types::error::EngineError;
use crate::engine::types::info::ProcInfo;

impl Kernel {
    // ---- starting processes ---------------------------------------------

    /// Starts a process of model `model_id` with start options `vars` (a
    /// `pid` option names it). Over the cache cap the process is parked and
    /// starts when a slot frees; the returned state is then `none`.
    /// `started_by` is the principal who asked (kept with the process).
    /// It runs the model's latest version, or version `revision`.
    pub(crate) async fn start(
        &self,
        model_id: &str,
        revision: Option<u32>,
        mut vars: Vars,
        started_by: Option<&str>,
    ) -> Result<ProcInfo, EngineError> {
        self.check_open()?;
        self.check_vars_size("the start options", &vars)?;
        // Pinned until the process row naming the version is durable.
        let (model, _pin) = match revision {
            None => self.models.pinned_latest(model_id).await?,
            Some(r) => self.models.pinned_version(model_id, r).await?,
        };
        let external_pid = match vars.get("pid") {
            Some(Value::String(p)) => Some(check_pid(p)?.to_owned()),
            Some(other) => {
                return Err(EngineError::BadPid {
                    pid: other.to_string(),
                    message: "a process id must be a string".into(),
                });
            }
            None => None,
        };
        // Other engine-owned keys are not start options.
        if let Some(key) = vars
            .keys()
            .find(|k| k.as_str() != "pid" && crate::scheduler::is_reserved(k))
        {
            return Err(EngineError::Inputs {
                model: model_id.to_owned(),
                message: format!(
                    "'{key}' is an engine-owned key of the process's data and cannot be a start option"
                ),
            });
        }
        // `pid` is the engine's start option, not a model input.
        let mut inputs = vars.clone();
        inputs.remove("pid");
        model
            .declaration()
            .inputs
            .check(&inputs)
            .map_err(|message| EngineError::Inputs {
                model: model_id.to_owned(),
                message,
            })?;
        let pid = external_pid
            .clone()
            .unwrap_or_else(|| match &self.config.pid_filter {
                Some(filter) => filter.draw(),
                None => long_id(),
            });
        vars.insert("pid".into(), Value::String(pid.clone()));
        self.start_with(&model, pid, vars, external_pid.is_some(), started_by)
            .await
    }

    async fn start_with(
        &self,
        model: &DeployedModel,
        pid: String,
        vars: Vars,
        check_store: bool,
        started_by: Option<&str>,
    ) -> Result<ProcInfo, EngineError> {
        let now = self.now();
        let placement = self.placement();
        let slot = placement.concurrency_slot(model, &vars)?;
        let order = placement.queue_order(model, &vars)?;
        let base = ProcRow {
            started_by: started_by.map(str::to_owned),
            slot: slot.clone(),
            order: order.clone(),
            ..ProcRow::unstarted(&pid, &model.row.id, model.row.revision, now, Vars::new())
        };
        let mut process = Process::new(pid.clone(), model.tree.clone(), vars.clone());
        process.audience.started_by = base.started_by.clone();
        process.concurrency_key = slot.as_ref().map(|s| s.key.clone());
        let born = self.writer.epoch();
        let handle = ProcHandle::new(process, Persisted::fresh(base.clone()), born);
        // A fresh mutex: nobody else can hold it yet.
        let Ok(guard) = handle.lane.clone().try_lock_owned() else {
            unreachable!("a new lane is unlocked");
        };
        let order = order.unwrap_or_default();
        let Ok(admission) = self.admit_after_count(&handle, slot.as_ref(), &order).await else {
            return Err(EngineError::Duplicated(pid.clone()));
        };
        // Tracked once claimed (a refused duplicate is never an instance).
        self.instances.track(&handle);
        if admission == Admission::Admitted {
            handle.hold_place();
        }
        let stored = if check_store {
            self.proc_row(&pid).await.map(|row| row.is_some())
        } else {
            Ok(false)
        };
        if !matches!(stored, Ok(false)) {
            // Already stored (or the store cannot say): give the claim back.
            match admission {
                Admission::Admitted => {
                    self.cache.forget(&pid, &handle);
                    if handle.give_place_back() {
                        self.cache.release(&pid);
                    }
                    self.refill();
                }
                Admission::Parked | Admission::Waiting | Admission::Counting => {
                    self.cache.unpark(&pid)
                }
            }
            stored?;
            return Err(EngineError::Duplicated(pid));
        }
        match admission {
            Admission::Admitted => {
                self.transition_locked(
                    &handle,
                    guard,
                    Vec::new(),
                    // Deliveries are matched by (pid, tid), and a new
                    // instance's task ids are new: none of its tasks has
                    // an earlier delivery to close.
                    Some(Vec::new()),
                    |p, svc| {
                        p.run(svc);
                        Ok(())
                    },
                    |(), p| ProcInfo::of(p),
                )
                .instrument(info_span!("start", pid = %pid))
                .await
            }
            Admission::Parked | Admission::Waiting | Admission::Counting => {
                drop(guard);
                let row = ProcRow {
                    start_vars: vars,
                    ..base
                };
                let ops = ProcRows::insert_ops(&row);
                if let Err(e) = self.write(Some((&pid, handle.born)), ops).await {
                    self.cache.unpark(&pid);
                    return Err(e);
                }
                self.cache.parked_written(&pid, now, &order);
                // Slots may have freed while the row was written.
                self.refill();
                if admission == Admission::Waiting {
                    debug!(pid = %pid, "parked: waits for its concurrency key");
                } else {
                    debug!(pid = %pid, "parked: the resident set is full");
                }
                let mut info = ProcInfo::from(&row);
                info.waiting_for = self.waiting_for(&pid, row.state, row.slot.is_some(), false);
                Ok(info)
            }
        }
    }

    /// [`Cache::admit`](crate::engine::kernel::cache::Cache::admit) for a
    /// fresh instance, waiting out the boot count (it runs briefly): never
    /// [`Admission::Counting`].
    pub(crate) async fn admit_after_count(
        &self,
        handle: &Arc<ProcHandle>,
        slot: Option<&ConcurrencySlot>,
        order: &QueueOrder,
    ) -> Result<Admission, ()> {
        loop {
            match self.cache.admit(handle, slot, order) {
                Ok(Admission::Counting) => self.cache.counted().await,
                other => return other,
            }
        }
    }

    /// The concurrency key a start of model `model_id` (its latest version,
    /// or `revision`) with start options `vars` would have (`None`: the
    /// model has no `concurrency:`), whether or not this engine keeps it.
    pub(crate) async fn concurrency_key_of(
        &self,
        model_id: &str,
        revision: Option<u32>,
        vars: &Vars,
    ) -> Result<Option<String>, EngineError> {
        let model = match revision {
            None => self.models.model(model_id).await?,
            Some(r) => self.models.model_version(model_id, r).await?,
        };
        Ok(self.placement().evaluate_key(&model, vars)?.map(|s| s.key))
    }

    /// The row of process `pid`, if stored.
    pub(crate) async fn proc_row(&self, pid: &str) -> Result<Option<ProcRow>, EngineError> {
        Ok(ProcRows::new(&self.store).get(pid).await?)
    }
}

/// Checks an external process id.
fn check_pid(pid: &str) -> Result<&str, EngineError> {
    let bad = |message: &str| EngineError::BadPid {
        pid: pid.to_owned(),
        message: message.to_owned(),
    };
    if pid.is_empty() {
        return Err(bad("external process id cannot be empty"));
    }
    if pid.contains('-') || pid.contains('/') {
        return Err(bad("external process id cannot contain '-' or '/'"));
    }
    if pid.len() > 256 {
        return Err(bad("external process id is longer than 256 bytes"));
    }
    Ok(pid)
}
