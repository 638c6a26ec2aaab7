//! [`Placement`]: where a start goes — its concurrency key's slot and its
//! place in the parked queue (the model's `concurrency:`, `priority:` and
//! `fairness_key:` evaluated over the start options). It sees only the
//! script runtimes and which keys this engine keeps.

use serde_json::Value;

use crate::model::{MAX_CONCURRENCY_KEY, Vars, variants_to_vars};
use crate::script::{ScriptEngine, ScriptScope, substitute};

use crate::engine::kernel::catalog::DeployedModel;
use crate::engine::kernel::config::PidFilter;
use crate::engine::persist::rows::{ConcurrencySlot, QueueOrder};
use crate::engine::types::error::EngineError;

/// Where a start goes (see the module docs).
pub(crate) struct Placement<'a> {
    scripts: &'a ScriptEngine,
    /// The keys this engine keeps (`None`: all).
    key_home: Option<&'a PidFilter>,
}

impl<'a> Placement<'a> {
    /// Placement with `scripts`, on an engine keeping the keys `key_home`
    /// accepts (`None`: all).
    pub(crate) fn new(scripts: &'a ScriptEngine, key_home: Option<&'a PidFilter>) -> Self {
        Self { scripts, key_home }
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
        if let Some(home) = self.key_home
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
    pub(crate) fn evaluate_key(
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
        let key = substitute::text_strict(self.scripts, &c.key, &scope).map_err(|e| {
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
                let got = substitute::text_strict(self.scripts, text, &scope).map_err(|e| {
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
            Some(text) => substitute::text_strict(self.scripts, text, &scope).map_err(|e| {
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
}

/// What a start's expressions (its concurrency key, priority, fairness
/// key) see: the start options over the workflow's `vars`.
fn start_scope(model: &DeployedModel, vars: &Vars) -> ScriptScope {
    let mut known = variants_to_vars(&model.declaration().vars);
    known.extend(vars.iter().map(|(k, v)| (k.clone(), v.clone())));
    ScriptScope::from_vars(known)
}
