//! Running an act's package (set, code, irq, msg, block, parallel,
//! sequence, action) and applying a script's effects.

use serde_json::Value;

use crate::model::{Act, Vars};
use crate::package::RunAs;
use crate::scheduler::{Sign, TaskError, TaskIx, TaskState};
use crate::script::{ScriptEffect, ScriptKind};

use super::{Action, Process, Request, Services};

impl Process {
    pub(super) fn run_act(
        &mut self,
        t: TaskIx,
        act: &Act,
        svc: Services<'_>,
    ) -> Result<(), TaskError> {
        let Some(def) = svc.packages.get(&act.uses) else {
            return Err(TaskError::new(
                "",
                format!("unknown package '{}'", act.uses),
            ));
        };
        let run_as = def.run_as;
        let params = self.eval_params(t, act.params.as_value(), svc)?;
        svc.packages
            .check_params(&act.uses, &params)
            .map_err(|e| TaskError::new("", e.to_string()))?;
        let mut data = Vars::new();
        data.insert(
            "__run_as".into(),
            Value::String(format!("{run_as:?}").to_lowercase()),
        );
        if act.params != params {
            // Messages and clients see the evaluated params.
            data.insert(super::PARAMS_KEY.into(), params.clone());
        }
        self.tasks.set_data(t, &data);
        match run_as {
            RunAs::Irq => {
                self.audience.note(&params);
                self.tasks.set_state(t, TaskState::Interrupt);
            }
            RunAs::Msg => {}
            RunAs::Func => match act.uses.as_str() {
                "acts.transform.set" => {
                    if let Value::Object(vars) = params {
                        self.tasks.update_data(t, &vars);
                    }
                }
                "acts.transform.code" => {
                    let code = params.as_str().unwrap_or_default();
                    let out = svc
                        .scripts
                        .eval(ScriptKind::Code, code, self.script_scope(t, code))
                        .map_err(|e| TaskError::new("", e.to_string()))?;
                    self.apply_effects(t, out.effects);
                    if let Value::Object(vars) = out.value {
                        self.tasks.update_data(t, &vars);
                    }
                }
                "acts.core.block" => {
                    let sequence = params.get("mode").and_then(Value::as_str) != Some("parallel");
                    let acts = self.acts_param(&params, &act.options)?;
                    let node = self.node_of(t);
                    self.tree.build_acts(node, acts, sequence);
                }
                "acts.core.parallel" | "acts.core.sequence" => {
                    let items = params
                        .get("in")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    let mode = if act.uses == "acts.core.parallel" {
                        "parallel"
                    } else {
                        "sequence"
                    };
                    let inner = params
                        .get("acts")
                        .cloned()
                        .unwrap_or(Value::Array(Vec::new()));
                    let blocks: Vec<Act> = items
                        .into_iter()
                        .enumerate()
                        .map(|(i, v)| {
                            let mut b = Act::new(
                                "acts.core.block",
                                serde_json::json!({"mode": "parallel", "acts": inner}),
                            );
                            b.options.insert("$index".into(), Value::from(i));
                            b.options.insert("$value".into(), v);
                            b
                        })
                        .collect();
                    let node = self.node_of(t);
                    self.tree.build_acts(node, blocks, mode == "sequence");
                }
                "acts.core.action" => {
                    let name = params
                        .get("action")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let Ok(action) = name.parse::<Action>() else {
                        return Err(TaskError::new(
                            "",
                            format!(
                                "acts.core.action: action '{name}' cannot be applied by a package"
                            ),
                        ));
                    };
                    let options = params
                        .get("options")
                        .and_then(Value::as_object)
                        .cloned()
                        .unwrap_or_default();
                    self.apply_action(t, action, options, svc)
                        .map_err(|e| TaskError::new("", e.to_string()))?;
                }
                "acts.core.subflow" => {
                    let to = params
                        .get("to")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    if svc.models.is_some_and(|m| !m.has_model(&to)) {
                        return Err(TaskError::new(
                            "subflow",
                            format!(
                                "model '{to}' is not deployed (deploy it first, or check the id)"
                            ),
                        ));
                    }
                    let mut options = params
                        .get("options")
                        .and_then(Value::as_object)
                        .cloned()
                        .unwrap_or_default();
                    let tid = self.tasks.get(t).map(|x| x.id.clone()).unwrap_or_default();
                    options.insert("$parent_pid".into(), Value::String(self.pid.clone()));
                    options.insert("$parent_tid".into(), Value::String(tid.clone()));
                    // The child is part of this process's trace.
                    options.insert(
                        crate::scheduler::trace::TRACEPARENT_KEY.into(),
                        Value::String(self.child_traceparent(&tid)),
                    );
                    self.tasks.sign(t, Sign::NO_AUTO_COMPLETE | Sign::EXTERNAL);
                    self.requests.push(Request::StartSubflow {
                        child_pid: format!("{}_{tid}", self.pid),
                        tid,
                        to,
                        options,
                    });
                }
                uses => {
                    // An application package: the engine runs it and
                    // answers the act with an action.
                    let mut data = Vars::new();
                    data.insert(super::PARAMS_KEY.into(), params.clone());
                    self.tasks.set_data(t, &data);
                    self.tasks.sign(t, Sign::NO_AUTO_COMPLETE | Sign::EXTERNAL);
                    let inputs = self
                        .tasks
                        .get(t)
                        .map(|x| x.data.to_vars())
                        .unwrap_or_default();
                    self.requests.push(Request::RunPackage {
                        tid: self.tasks.get(t).map(|x| x.id.clone()).unwrap_or_default(),
                        uses: uses.to_owned(),
                        params: params.clone(),
                        inputs,
                    });
                }
            },
        }
        Ok(())
    }

    /// The `acts` list of a block's params, each act given the block's
    /// options (the reference moved them into the first act only).
    pub(super) fn acts_param(&self, params: &Value, options: &Vars) -> Result<Vec<Act>, TaskError> {
        let list = params
            .get("acts")
            .cloned()
            .unwrap_or(Value::Array(Vec::new()));
        let mut acts: Vec<Act> = serde_json::from_value(list)
            .map_err(|e| TaskError::new("", format!("`acts` is not a list of acts: {e}")))?;
        for a in &mut acts {
            for (k, v) in options {
                a.options.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        Ok(acts)
    }

    pub(super) fn apply_effects(&mut self, t: TaskIx, effects: Vec<ScriptEffect>) {
        for effect in effects {
            match effect {
                ScriptEffect::Set { name, value } => {
                    let mut v = Vars::new();
                    v.insert(name, value);
                    self.tasks.update_data(t, &v);
                }
                ScriptEffect::SetProcessVar { name, value } => {
                    let mut v = Vars::new();
                    v.insert(name, value);
                    let root = self.root();
                    self.tasks.set_user_data(root, &v);
                }
                ScriptEffect::SetStep { task, name, value } => {
                    if let Some(ix) = self.tasks.find_id(&task) {
                        let mut v = Vars::new();
                        v.insert(name, value);
                        self.tasks.update_data(ix, &v);
                    }
                }
                ScriptEffect::SetEnv { name, value } => {
                    self.env.insert(name, value);
                }
            }
        }
    }
}
