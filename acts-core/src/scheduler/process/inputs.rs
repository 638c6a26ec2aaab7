//! What a task starts with: its params evaluated (`${{ }}` in its scope),
//! its inputs prepared (the previous task's outputs overlaid with its
//! node's vars), the scope its scripts see, and its conditions.

use crate::model::{Variant, Vars};
use crate::scheduler::{TaskError, TaskIx};
use crate::script::substitute;
use crate::tree::NodeContent;

use super::{Process, Services};

impl Process {
    /// `params` with their `${{ }}` evaluated in task `t`'s scope; literal
    /// params as they are (no scope — a copy of what the task sees — is
    /// built for them).
    pub(super) fn eval_params(
        &self,
        t: TaskIx,
        params: std::borrow::Cow<'_, serde_json::Value>,
        svc: Services<'_>,
    ) -> Result<serde_json::Value, TaskError> {
        if !crate::model::has_expression(&params) {
            return Ok(params.into_owned());
        }
        let scope = self.script_scope(t, &params.to_string());
        substitute::params(svc.scripts, &params, &scope)
            .map_err(|e| TaskError::new("", e.to_string()))
    }

    /// inputs = prev's outputs overlaid with the node's vars (evaluated).
    pub(super) fn prepare(&mut self, t: TaskIx, svc: Services<'_>) -> Result<(), TaskError> {
        let mut inputs = match self.tasks.get(t).and_then(|x| x.prev) {
            Some(prev) => {
                let parent = self.tasks.get(t).and_then(|x| x.parent);
                let mut outputs = if parent == Some(prev) && !self.state_of(prev).is_terminal() {
                    // A first child takes its running parent's outputs;
                    // `${{ }}` exposes describe the parent's end, so they
                    // are not evaluated (nor passed on) before it.
                    let exposes = self.exposes_of(prev);
                    let mut out = self.tasks.outputs(prev, &exposes);
                    for e in exposes.iter().filter(|e| e.is_whole_expression()) {
                        out.remove(&e.name);
                    }
                    out
                } else {
                    self.outputs_of(prev, svc)
                };
                // What the task sees through its ancestors anyway is not
                // copied into its data: a chain of steps then costs time
                // and memory linear in its length (each step's outputs fold
                // into the parent as it completes), and a stale copy cannot
                // fold back over a value set meanwhile (`$set_process_var`).
                // An exposed name nobody has set yet is not passed on as
                // `null` either.
                outputs.retain(|k, v| match parent.and_then(|p| self.tasks.find(p, k)) {
                    Some(visible) => visible != v,
                    None => !v.is_null() || self.tasks.find(prev, k).is_some(),
                });
                outputs
            }
            None => Vars::new(),
        };
        let node = self.tasks.get(t).and_then(|x| self.tree.node(x.node));
        let vars: Vec<Variant> = match node.map(|n| &*n.content) {
            Some(NodeContent::Workflow(w)) => w.vars.clone(),
            Some(NodeContent::Step(s)) => s.vars.clone(),
            Some(NodeContent::Branch(b)) => b.vars.clone(),
            Some(NodeContent::Act(a)) => a.vars.clone(),
            None => Vec::new(),
        };
        // The scope (a copy of what the task sees) only when there are vars
        // to evaluate: building it for every task would cost the whole
        // process data per step.
        if !vars.is_empty() {
            let texts: Vec<String> = vars.iter().map(|v| v.value.to_string()).collect();
            let scope = self.script_scope(t, &texts.join("\n"));
            for v in vars {
                let value = substitute::vars(svc.scripts, &v.value, &scope)
                    .map_err(|e| TaskError::new("", e.to_string()))?;
                inputs.insert(v.name.clone(), value);
            }
        }
        if t == self.root() {
            // Start options were set before; they win over the workflow vars.
            let options = self
                .tasks
                .get(t)
                .map(|x| x.data.to_vars())
                .unwrap_or_default();
            inputs.extend(options);
        }
        self.tasks.set_data(t, &inputs);
        Ok(())
    }

    /// What script `source` running in task `t` sees: its data and its
    /// ancestors', the process environment (`$env`), and the steps it
    /// names (`step_views.rs`).
    pub(super) fn script_scope(&self, t: TaskIx, source: &str) -> crate::script::ScriptScope {
        let mut scope = self.tasks.script_scope(t);
        scope.env = self.env.clone();
        scope.steps = self.step_views(source);
        scope
    }

    pub(super) fn condition(
        &self,
        t: TaskIx,
        expr: &str,
        svc: Services<'_>,
    ) -> Result<bool, TaskError> {
        svc.scripts
            .eval_bool(expr, self.script_scope(t, expr))
            .map_err(|e| TaskError::new("", e.to_string()))
    }
}
