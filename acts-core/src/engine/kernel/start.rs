//! Starting processes: admission (resident or parked) and the first
//! transition.

use std::sync::Arc;

use serde_json::Value;
use tracing::{Instrument, debug, info_span};

use crate::model::{MAX_CONCURRENCY_KEY, Vars, variants_to_vars};
use crate::scheduler::Process;
use crate::script::{ScriptScope, substitute};
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
        let slot = self.concurrency_slot(model, &vars)?;
        let order = self.queue_order(model, &vars)?;
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

    /// The concurrency slot of a process of `model` started with `vars`:
    /// the model's `concurrency:` with its key evaluated over the start
    /// options (and the workflow's `vars` they override); `None` without
    /// one. A key with an expression that fails or has no value (it reads
    /// a start option that was not given), or that comes out empty or too
    /// long, refuses the start.
    pub(crate) fn concurrency_slot(
        &self,
        model: &DeployedModel,
        vars: &Vars,
    ) -> Result<Option<ConcurrencySlot>, EngineError> {
        let Some(slot) = self.evaluate_key(model, vars)? else {
            return Ok(None);
        };
        if let Some(home) = &self.config.key_home
            && !home.accepts(&slot.key)
        {
            return Err(EngineError::Inputs {
                model: model.row.id.clone(),
                message: format!(
                    "its concurrency key '{}' is kept by another partition of the cluster: start it through the cluster without naming its `pid` (it is then routed to its key's partition); a subflow child cannot take a key its parent's partition does not keep",
                    slot.key
                ),
            });
        }
        Ok(Some(slot))
    }

    /// The concurrency slot of a subflow child of `model` with start
    /// options `vars`, whose parent has key `parent_key`: refused when it
    /// is the parent's own key with limit 1 (the parent holds the only
    /// slot while it waits for the child: the child would never start).
    pub(crate) fn child_slot(
        &self,
        model: &DeployedModel,
        vars: &Vars,
        parent_key: Option<&str>,
    ) -> Result<Option<ConcurrencySlot>, EngineError> {
        let slot = self.concurrency_slot(model, vars)?;
        if let Some(s) = &slot
            && s.limit == 1
            && parent_key == Some(s.key.as_str())
        {
            return Err(EngineError::Inputs {
                model: model.row.id.clone(),
                message: format!(
                    "its concurrency key '{}' (limit 1) is held by its parent process, which waits for this child: it would never start; give the child model another key",
                    s.key
                ),
            });
        }
        Ok(slot)
    }

    /// [`concurrency_slot`](Self::concurrency_slot) without asking whether
    /// this engine keeps the key.
    fn evaluate_key(
        &self,
        model: &DeployedModel,
        vars: &Vars,
    ) -> Result<Option<ConcurrencySlot>, EngineError> {
        let declaration = model.declaration();
        let Some(c) = &declaration.concurrency else {
            return Ok(None);
        };
        let refuse = |message: String| EngineError::Inputs {
            model: model.row.id.clone(),
            message,
        };
        let scope = start_scope(model, vars);
        let key = substitute::text_strict(&self.scripts, &c.key, &scope).map_err(|e| {
            refuse(format!(
                "its concurrency key `{}` cannot be evaluated for these start options: {e}; give the start options it reads",
                c.key
            ))
        })?;
        if key.trim().is_empty() {
            return Err(refuse(format!(
                "its concurrency key `{}` is empty for these start options",
                c.key
            )));
        }
        if key.len() > MAX_CONCURRENCY_KEY {
            return Err(refuse(format!(
                "its concurrency key `{}` is {} bytes for these start options; at most {MAX_CONCURRENCY_KEY}",
                c.key,
                key.len()
            )));
        }
        Ok(Some(ConcurrencySlot {
            key,
            limit: c.limit,
        }))
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
        Ok(self.evaluate_key(&model, vars)?.map(|s| s.key))
    }

    /// Where a parked start of `model` with start options `vars` goes in
    /// its queue: the model's `priority:` (a number, or an expression that
    /// gives 1 to 5) and `fairness_key:` evaluated over them; `None` when
    /// both are the defaults. A priority or key that does not evaluate
    /// refuses the start.
    pub(crate) fn queue_order(
        &self,
        model: &DeployedModel,
        vars: &Vars,
    ) -> Result<Option<QueueOrder>, EngineError> {
        let declaration = model.declaration();
        if declaration.priority.is_none() && declaration.fairness_key.is_none() {
            return Ok(None);
        }
        let refuse = |message: String| EngineError::Inputs {
            model: model.row.id.clone(),
            message,
        };
        let scope = start_scope(model, vars);
        let priority = match &declaration.priority {
            None => 3,
            Some(Value::String(text)) => {
                let got = substitute::text_strict(&self.scripts, text, &scope).map_err(|e| {
                    refuse(format!("its priority `{text}` cannot be evaluated: {e}"))
                })?;
                got.trim()
                    .parse::<u8>()
                    .ok()
                    .filter(|p| (1..=5).contains(p))
                    .ok_or_else(|| {
                        refuse(format!("its priority `{text}` is {got:?} for these start options; it must give 1 to 5"))
                    })?
            }
            Some(v) => v
                .as_u64()
                .and_then(|p| u8::try_from(p).ok())
                .filter(|p| (1..=5).contains(p))
                .ok_or_else(|| refuse(format!("its priority {v} is not 1 to 5")))?,
        };
        let fairness = match &declaration.fairness_key {
            None => String::new(),
            Some(text) => substitute::text_strict(&self.scripts, text, &scope).map_err(|e| {
                refuse(format!(
                    "its fairness key `{text}` cannot be evaluated: {e}"
                ))
            })?,
        };
        if fairness.len() > MAX_CONCURRENCY_KEY {
            return Err(refuse(format!(
                "its fairness key is {} bytes for these start options; at most {MAX_CONCURRENCY_KEY}",
                fairness.len()
            )));
        }
        Ok(Some(QueueOrder { priority, fairness }))
    }

    /// The row of process `pid`, if stored.
    pub(crate) async fn proc_row(&self, pid: &str) -> Result<Option<ProcRow>, EngineError> {
        Ok(ProcRows::new(&self.store).get(pid).await?)
    }
}

/// What a start's expressions (its concurrency key, priority, fairness
/// key) see: the start options over the workflow's `vars`.
fn start_scope(model: &DeployedModel, vars: &Vars) -> ScriptScope {
    let mut known = variants_to_vars(&model.declaration().vars);
    known.extend(vars.iter().map(|(k, v)| (k.clone(), v.clone())));
    ScriptScope::from_vars(known)
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
