//! Sealing external data into a task as it starts (see
//! [`crate::scheduler::seal`]).

use serde_json::Value;

use crate::model::Vars;
use crate::scheduler::{TaskError, TaskIx};

use super::{Process, Services};

impl Process {
    /// Seals the registered sealed-data targets into task `t` (see
    /// [`super::seal`]).
    pub(super) fn seal(&mut self, t: TaskIx, svc: Services<'_>) -> Result<(), TaskError> {
        use crate::scheduler::seal::{OnMissing, SEALED, SealPolicy, scope_key};
        let Some(seals) = svc.seals else {
            return Ok(());
        };
        let mut sealed = self
            .tasks
            .get(t)
            .and_then(|x| x.data.get(SEALED))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let before = sealed.len();
        for target in seals.targets() {
            if sealed.contains_key(&target.name) {
                continue; // the task keeps what it sealed
            }
            if target.policy == SealPolicy::PerProc
                && self.tasks.ancestors(t).into_iter().any(|a| {
                    self.tasks
                        .get(a)
                        .and_then(|x| x.data.get(SEALED))
                        .and_then(|s| s.get(&target.name))
                        .is_some()
                })
            {
                continue; // inherited from the lineage
            }
            let missing = |message: String| -> Result<(), TaskError> {
                match target.on_missing {
                    OnMissing::Skip => Ok(()),
                    OnMissing::Error => Err(TaskError::new("", message)),
                }
            };
            let scope = match scope_key(&target, |v| self.tasks.find(t, v).cloned()) {
                Ok(s) => s,
                Err(vars) => {
                    missing(format!(
                        "sealed data '{}' missing required params: [{}]",
                        target.name,
                        vars.join(", ")
                    ))?;
                    continue;
                }
            };
            match seals.read(&target.name, &scope) {
                Some(data) => {
                    sealed.insert(target.name.clone(), Value::Object(data));
                }
                None => missing(format!(
                    "sealed data '{}' has no data for scope '{scope}'",
                    target.name
                ))?,
            }
        }
        if sealed.len() != before {
            let mut v = Vars::new();
            v.insert(SEALED.into(), Value::Object(sealed));
            self.tasks.set_data(t, &v);
        }
        Ok(())
    }
}
