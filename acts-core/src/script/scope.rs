//! What a script sees and what it changes: a [`ScriptScope`] snapshot taken
//! before the evaluation, and the [`ScriptEffect`]s it records.
//!
//! Scripts never touch the engine's state directly: the scheduler builds a
//! scope from the task's data, runs the script, then applies the effects in
//! the same transition. Evaluation is therefore pure and easy to test.

use serde_json::Value;

use crate::model::Vars;

/// A write a script asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum ScriptEffect {
    /// `$set(name, value)`: a fold-up write on the current task.
    Set {
        /// The key.
        name: String,
        /// The value.
        value: Value,
    },
    /// `$set_process_var(name, value)`: a plain write into the root data.
    SetProcessVar {
        /// The key.
        name: String,
        /// The value.
        value: Value,
    },
    /// `step.name = value`: a fold-up write on the latest task of the step
    /// a global names (see [`StepView`]).
    SetStep {
        /// The id of the step's task.
        task: String,
        /// The key.
        name: String,
        /// The value.
        value: Value,
    },
    /// `$env.name = value`: a write into the process environment.
    SetEnv {
        /// The key.
        name: String,
        /// The value.
        value: Value,
    },
}

/// The data visible to one evaluation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScriptScope {
    /// The current task's own data (`$data()`).
    pub own: Vars,
    /// The ancestors' data, nearest first (`$get` looks here after `own`).
    pub ancestors: Vec<Vars>,
    /// The task's inputs (`$inputs()`); `None`: what it finds by name
    /// ([`visible`](Self::visible)), which is what the reference's copied
    /// inputs hold (COMPATIBILITY.md, "Where a step's data lives").
    pub inputs: Option<Vars>,
    /// The process environment (`$env`).
    pub env: Vars,
    /// Elapsed milliseconds used by `$cost()` and `$cost_in()`.
    pub cost_millis: u64,
    /// The steps the script names, each as a global of its id (a task
    /// variable of the same name wins).
    pub steps: Vec<StepView>,
}

/// What a script sees of a step it names by id (`first.a`,
/// `first.a = v`, `first.data()`, `first.inputs()`): the latest task of
/// that step in the process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepView {
    /// The step's id (the name of the global).
    pub id: String,
    /// The id of its latest task.
    pub task: String,
    /// That task's own data (`first.data()`, `first.inputs()`).
    pub data: Vars,
    /// What that task sees: its own data over its ancestors' (`first.a`).
    pub visible: Vars,
    /// Whether that task has ended (its data can no longer be written).
    pub ended: bool,
}

impl ScriptScope {
    /// The step `id` names, if the script was given it.
    pub fn step(&self, id: &str) -> Option<&StepView> {
        self.steps.iter().find(|s| s.id == id)
    }

    /// `step.name = value` on the step `id` names: recorded in the view
    /// (later reads in the same evaluation see it) and returned as the
    /// effect to apply; an error a script can read when the step's task
    /// has ended or the step was not given.
    pub fn set_step(&mut self, id: &str, name: &str, value: Value) -> Result<ScriptEffect, String> {
        let Some(step) = self.steps.iter_mut().find(|s| s.id == id) else {
            return Err(format!("step '{id}' has no task in this process"));
        };
        if step.ended {
            return Err(format!(
                "step '{id}' has ended: its data can no longer be written (write '{name}' with $set or into a running step)"
            ));
        }
        step.data.insert(name.to_owned(), value.clone());
        step.visible.insert(name.to_owned(), value.clone());
        Ok(ScriptEffect::SetStep {
            task: step.task.clone(),
            name: name.to_owned(),
            value,
        })
    }
}

/// The names in `source` that may name a step: every run of identifier
/// characters, and every quoted string (`globalThis['my-step']`).
pub fn named_ids(source: &str) -> impl Iterator<Item = &str> {
    let words = source
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
        .filter(|w| !w.is_empty());
    let quoted = ['\'', '"', '`']
        .into_iter()
        .flat_map(move |q| source.split(q).skip(1).step_by(2).filter(|w| !w.is_empty()));
    words.chain(quoted)
}

impl ScriptScope {
    /// A scope whose own data is `vars` (no ancestors): what an expression
    /// outside a task sees, and what tests use.
    pub fn from_vars(vars: Vars) -> Self {
        Self {
            own: vars,
            ..Self::default()
        }
    }

    /// What the task finds by name: its own data over its ancestors',
    /// the nearer ancestor winning — the `$inputs()` of a task of the
    /// engine, which holds a chain's earlier outputs in the parent rather
    /// than in copies (COMPATIBILITY.md, "Where a step's data lives").
    pub fn visible(&self) -> Vars {
        let mut all = Vars::new();
        for a in self.ancestors.iter().rev() {
            all.extend(a.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        all.extend(self.own.iter().map(|(k, v)| (k.clone(), v.clone())));
        all
    }

    /// `$get(name)`: the task's own value, else the nearest ancestor's.
    pub fn find(&self, name: &str) -> Option<&Value> {
        self.own
            .get(name)
            .or_else(|| self.ancestors.iter().find_map(|a| a.get(name)))
    }

    /// The variables a script sees as globals: every key of the task's data
    /// and its ancestors', where ancestors override the task and nearer
    /// ancestors override farther ones (the reference engine's priority).
    ///
    /// Sealed snapshot values (`__sealed.<name>`) become `$<name>` (the
    /// task's own first, then the nearest ancestor's), which the engine
    /// deep-freezes.
    pub fn globals(&self) -> Vars {
        let mut all = self.own.clone();
        for scope in self.ancestors.iter().rev() {
            for (k, v) in scope {
                all.insert(k.clone(), v.clone());
            }
        }
        all.remove(SEALED_KEY);
        for scope in self
            .ancestors
            .iter()
            .rev()
            .chain(std::iter::once(&self.own))
        {
            if let Some(Value::Object(sealed)) = scope.get(SEALED_KEY) {
                for (name, v) in sealed {
                    all.insert(format!("${name}"), v.clone());
                }
            }
        }
        all
    }

    /// The value global `name` of [`globals`](Self::globals) has, without
    /// building them all (`$`-names of sealed values excepted).
    pub fn global(&self, name: &str) -> Option<&Value> {
        if name == SEALED_KEY {
            return None;
        }
        self.ancestors
            .iter()
            .find_map(|a| a.get(name))
            .or_else(|| self.own.get(name))
    }

    /// `$ecode()`: the `ecode` the task sees (its own, else the nearest
    /// ancestor's: a catch reads the error of the step it handles), if a
    /// string.
    pub fn ecode(&self) -> Option<&str> {
        self.find("ecode").and_then(Value::as_str)
    }

    /// `$env` read: private keys read as missing; then the process
    /// environment; then the OS environment variable.
    pub fn env_get(&self, name: &str) -> Option<Value> {
        if name.starts_with("__") {
            return None;
        }
        self.env
            .get(name)
            .cloned()
            .or_else(|| std::env::var(name).ok().map(Value::String))
    }
}

/// The data key of sealed snapshot values (see `scheduler::seal`).
const SEALED_KEY: &str = "__sealed";

/// Whether a data key is private (never an output, never folded up).
pub fn is_private(key: &str) -> bool {
    key.starts_with("__")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(v: Value) -> Vars {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn find_is_own_first_but_globals_are_ancestors_first() {
        let scope = ScriptScope {
            own: vars(json!({"v": 2, "mine": 1})),
            ancestors: vec![vars(json!({"v": 3})), vars(json!({"v": 1, "root": true}))],
            ..ScriptScope::default()
        };
        assert_eq!(scope.find("v"), Some(&json!(2)));
        let g = scope.globals();
        assert_eq!(
            g["v"],
            json!(3),
            "the parent overrides the task and the root"
        );
        assert_eq!(g["mine"], json!(1));
        assert_eq!(g["root"], json!(true));
        for name in ["v", "mine", "root", "none"] {
            assert_eq!(scope.global(name), g.get(name), "{name}");
        }
    }

    #[test]
    fn env_hides_private_keys() {
        let scope = ScriptScope {
            env: vars(json!({"__owner": "x", "region": "eu"})),
            ..ScriptScope::default()
        };
        assert_eq!(scope.env_get("__owner"), None);
        assert_eq!(scope.env_get("region"), Some(json!("eu")));
    }
}
