//! [`Workflow`]: the root of a model, with loading from YAML and JSON.

use super::limits::ModelLimits;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Vars;
use super::error::ModelError;
use super::gates::Concurrency;
use super::nodes::{Step, Trigger};
use super::source::{Location, SourceMap};
use super::variant::{ActSchema, Variant, variants_to_vars};

/// A workflow model: steps run as a chain, with variables, an input schema,
/// triggers and an output filter.
///
/// The struct is `#[non_exhaustive]` (so are [`Step`], [`Branch`](super::Branch),
/// [`Act`](super::Act) and [`Trigger`]): a model key added later is not a
/// breaking change for an embedder. Build one with [`Workflow::new`] and
/// its `with_*` methods (or set the fields of a value); a struct literal is
/// refused outside acts-core:
///
/// ```compile_fail
/// let w = acts_core::model::Workflow { id: "order".into(), ..Default::default() };
/// ```
///
/// ```
/// use acts_core::model::Workflow;
/// let mut w = Workflow::new()
///     .with_id("order")
///     .with_step(|s| s.with_id("ask").with_uses("acts.core.irq", serde_json::json!({"key": "ok"})));
/// w.name = "Orders".into();
/// assert_eq!((w.id.as_str(), w.steps.len()), ("order", 1));
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Workflow {
    /// Model id; required to deploy.
    pub id: String,
    /// Display name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Description.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub desc: String,
    /// Version; required to deploy.
    pub ver: String,
    /// Top-level steps, run as a chain in declaration order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
    /// Process environment (`$env` in scripts).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<Variant>,
    /// Root-scope variables; start options are appended (and win).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub vars: Vec<Variant>,
    /// Schema the start options must satisfy.
    #[serde(skip_serializing_if = "ActSchema::is_none")]
    pub inputs: ActSchema,
    /// Triggers that start the model.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub on: Vec<Trigger>,
    /// Data sent to clients with every message.
    #[serde(skip_serializing_if = "Vars::is_empty")]
    pub options: Vars,
    /// Data for tools, never sent to clients.
    #[serde(skip_serializing_if = "Vars::is_empty")]
    pub metadata: Vars,
    /// Output filter of the process.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exposes: Vec<Variant>,
    /// Process variables to index (`index: [customer, amount]`): their
    /// values (strings, integers, booleans) are kept in an index as the
    /// process runs, so processes can be found by them without a scan.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub index: Vec<String>,
    /// At most `limit` processes of one key in flight at a time
    /// (`concurrency: { key: ${{ customer }}, limit: 1 }`); a start past
    /// the limit waits, in order, until a process of its key ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<Concurrency>,
    /// The priority of its parked starts (1 to 5, higher first; default
    /// 3): a number, or a `${{ }}` expression over the start options.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<Value>,
    /// The fairness key of its parked starts (text with `${{ }}` parts):
    /// inside one priority, the keys take turns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fairness_key: Option<String>,
}

/// A model loaded from text, with the positions of its nodes when the text
/// was YAML (for error messages).
#[derive(Debug, Clone, Default)]
pub struct LoadedWorkflow {
    /// The model.
    pub workflow: Workflow,
    /// Where its nodes are in the source (empty for JSON and builders).
    pub source: SourceMap,
    /// Keys the model language does not have (ignored, so likely typos).
    pub unknown_keys: Vec<super::UnknownKey>,
}

impl Workflow {
    /// A new model at version `0.1.0`.
    pub fn new() -> Self {
        Self {
            ver: "0.1.0".into(),
            ..Self::default()
        }
    }

    /// Parses a YAML model.
    pub fn from_yaml(text: &str) -> Result<Self, ModelError> {
        serde_norway::from_str(text).map_err(|e| {
            let location = e.location().map(|l| Location {
                line: l.line(),
                column: l.column(),
            });
            ModelError::Parse {
                message: first_line(&e.to_string()),
                location,
            }
        })
    }

    /// Parses a YAML model and keeps its node positions for validation
    /// (a second, cheap pass over the text). The text is checked against
    /// the default [`ModelLimits`] first.
    pub fn load_yaml(text: &str) -> Result<LoadedWorkflow, ModelError> {
        Self::load_yaml_within(text, &ModelLimits::default())
    }

    /// [`load_yaml`](Self::load_yaml) under `limits`.
    pub fn load_yaml_within(
        text: &str,
        limits: &ModelLimits,
    ) -> Result<LoadedWorkflow, ModelError> {
        limits.check(text)?;
        Ok(LoadedWorkflow {
            workflow: Self::from_yaml(text)?,
            source: SourceMap::index(text),
            unknown_keys: super::unknown_keys(text),
        })
    }

    /// Parses a JSON model.
    pub fn from_json(text: &str) -> Result<Self, ModelError> {
        serde_json::from_str(text).map_err(|e| ModelError::Parse {
            message: e.to_string(),
            location: Some(Location {
                line: e.line(),
                column: e.column(),
            }),
        })
    }

    /// The model as YAML.
    pub fn to_yaml(&self) -> Result<String, ModelError> {
        serde_norway::to_string(self).map_err(|e| ModelError::Parse {
            message: format!("cannot write the model as YAML: {e}"),
            location: None,
        })
    }

    /// The model as JSON.
    pub fn to_json(&self) -> String {
        // A Workflow holds only strings, JSON values and lists of them, which
        // always serialize.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Sets the id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Sets the name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets the version.
    pub fn with_ver(mut self, ver: impl Into<String>) -> Self {
        self.ver = ver.into();
        self
    }

    /// Adds a root variable.
    pub fn with_var(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.vars.push(Variant::create(name, value));
        self
    }

    /// Sets (or replaces) an environment entry.
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        let v = Variant::create(name, value);
        self.env.retain(|e| e.name != v.name);
        self.env.push(v);
        self
    }

    /// Adds a client option.
    pub fn with_option(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.options.insert(name.into(), value.into());
        self
    }

    /// Sets the input schema.
    pub fn with_inputs(mut self, inputs: ActSchema) -> Self {
        self.inputs = inputs;
        self
    }

    /// Adds an exposed output.
    pub fn with_expose(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.exposes.push(Variant::create(name, value));
        self
    }

    /// Adds a step built by `build`.
    pub fn with_step(mut self, build: impl FnOnce(Step) -> Step) -> Self {
        self.steps.push(build(Step::default()));
        self
    }

    /// Adds a trigger.
    pub fn with_trigger(mut self, trigger: Trigger) -> Self {
        self.on.push(trigger);
        self
    }

    /// The root variables as a map (later entries win).
    pub fn vars(&self) -> Vars {
        variants_to_vars(&self.vars)
    }

    /// The environment as a map.
    pub fn env(&self) -> Vars {
        variants_to_vars(&self.env)
    }

    /// The top-level step with `id`, if any.
    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.id == id)
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or(s).to_owned()
}

/// Whether any step of `workflow`, or any act of a literal `acts:` list
/// in it, has a `concurrency:` or `rate:`.
pub fn has_node_gates(workflow: &Workflow) -> bool {
    fn acts_have(params: &serde_json::Value) -> bool {
        params
            .get("acts")
            .and_then(serde_json::Value::as_array)
            .is_some_and(|acts| {
                acts.iter().any(|a| {
                    a.get("concurrency").is_some()
                        || a.get("rate").is_some()
                        || acts_have(a.get("params").unwrap_or(&serde_json::Value::Null))
                })
            })
    }
    fn steps_have(steps: &[Step]) -> bool {
        steps.iter().any(|s| {
            s.concurrency.is_some()
                || s.rate.is_some()
                || acts_have(&s.params)
                || steps_have(&s.catches)
                || steps_have(&s.timeouts)
                || s.branches.iter().any(|b| steps_have(&b.steps))
        })
    }
    steps_have(&workflow.steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUICK_START: &str = "
id: my_model
ver: 0.1.0
name: my model
steps:
  - name: step 1
    uses: acts.transform.set
    params: { a: 10 }
  - name: step 2
    uses: acts.transform.code
    params: |
      return { data: a + 10 };
";

    #[test]
    fn loads_the_quick_start_model() {
        let w = Workflow::from_yaml(QUICK_START).unwrap();
        assert_eq!(w.id, "my_model");
        assert_eq!(w.steps.len(), 2);
        assert_eq!(w.steps[0].params, serde_json::json!({"a": 10}));
        assert_eq!(
            w.steps[1].params,
            serde_json::json!("return { data: a + 10 };\n")
        );
    }

    #[test]
    fn yaml_and_json_round_trip() {
        let w = Workflow::from_yaml(QUICK_START).unwrap();
        assert_eq!(Workflow::from_json(&w.to_json()).unwrap(), w);
        assert_eq!(Workflow::from_yaml(&w.to_yaml().unwrap()).unwrap(), w);
    }

    #[test]
    fn unknown_keys_are_ignored_as_in_the_reference() {
        let w = Workflow::from_yaml("id: m\nver: '1'\nsetup: []\nhooks: {}\n").unwrap();
        assert_eq!(w.id, "m");
    }

    #[test]
    fn parse_errors_say_where() {
        let err = Workflow::from_yaml("id: m\nsteps:\n  - id: [unclosed\n").unwrap_err();
        let location = err.location().expect("a location");
        assert_eq!(location.line, 3, "{err}");
        let err = Workflow::from_yaml("id: m\nsteps: 7\n").unwrap_err();
        assert!(matches!(err, ModelError::Parse { .. }), "{err}");
        let err = Workflow::from_json("{\"id\": 1}").unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
    }
}
