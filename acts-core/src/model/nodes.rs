//! The node types of a workflow: [`Step`], [`Branch`], [`Act`] and
//! [`Trigger`], each with its builder methods.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::variant::Variant;
use super::{Params, Vars};

fn is_false(b: &bool) -> bool {
    !*b
}

/// A step: one stage of a workflow or of a branch.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Step {
    /// Node id, unique in the whole model (a short id is generated if empty).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Display name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Description.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub desc: String,
    /// Step-scope variables.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub vars: Vec<Variant>,
    /// Guard (JavaScript); false skips the step.
    #[serde(rename = "if", skip_serializing_if = "Option::is_none")]
    pub r#if: Option<String>,
    /// Loop gate (JavaScript), re-evaluated at every iteration.
    #[serde(rename = "while", skip_serializing_if = "Option::is_none")]
    pub r#while: Option<String>,
    /// Conditional or parallel sub-flows (ignored when `next` is set).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub branches: Vec<Branch>,
    /// Explicit jump target: the id of a step declared earlier.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// The package this step runs (one act).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uses: Option<String>,
    /// The package's params (`${{ }}` substitution applies).
    #[serde(skip_serializing_if = "Value::is_null")]
    pub params: Value,
    /// Error handlers: steps run when this step fails.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub catches: Vec<Step>,
    /// Timeout handlers: steps whose `if` (e.g. `$cost_in("2h")`) fires them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timeouts: Vec<Step>,
    /// Data sent to clients with this step's messages.
    #[serde(skip_serializing_if = "Vars::is_empty")]
    pub options: Vars,
    /// Data for tools, never sent to clients.
    #[serde(skip_serializing_if = "Vars::is_empty")]
    pub metadata: Vars,
    /// Output filter of this scope.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exposes: Vec<Variant>,
    /// At most `limit` tasks of this node's key running at once, across
    /// processes; a task past the limit waits (state `pending`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<super::gates::Concurrency>,
    /// A token bucket per key: a task past the budget waits (state
    /// `pending`) until a token comes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<super::gates::Rate>,
}

impl Step {
    /// An empty step.
    pub fn new() -> Self {
        Self::default()
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

    /// Runs `uses` with `params`.
    pub fn with_uses(mut self, uses: impl Into<String>, params: impl Into<Value>) -> Self {
        self.uses = Some(uses.into());
        self.params = params.into();
        self
    }

    /// Sets the guard.
    pub fn with_if(mut self, expr: impl Into<String>) -> Self {
        self.r#if = Some(expr.into());
        self
    }

    /// Sets the loop gate.
    pub fn with_while(mut self, expr: impl Into<String>) -> Self {
        self.r#while = Some(expr.into());
        self
    }

    /// Sets the explicit next step.
    pub fn with_next(mut self, id: impl Into<String>) -> Self {
        self.next = Some(id.into());
        self
    }

    /// Adds a step variable.
    pub fn with_var(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.vars.push(Variant::create(name, value));
        self
    }

    /// Adds a client option.
    pub fn with_option(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.options.insert(name.into(), value.into());
        self
    }

    /// Adds an exposed output.
    pub fn with_expose(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.exposes.push(Variant::create(name, value));
        self
    }

    /// Adds a branch built by `build`.
    pub fn with_branch(mut self, build: impl FnOnce(Branch) -> Branch) -> Self {
        self.branches.push(build(Branch::default()));
        self
    }

    /// Adds a catch step built by `build`.
    pub fn with_catch(mut self, build: impl FnOnce(Step) -> Step) -> Self {
        self.catches.push(build(Step::default()));
        self
    }

    /// Adds a timeout step built by `build`.
    pub fn with_timeout(mut self, build: impl FnOnce(Step) -> Step) -> Self {
        self.timeouts.push(build(Step::default()));
        self
    }
}

/// A branch of a step: a chain of steps that runs when its condition holds.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Branch {
    /// Node id, unique in the whole model (a short id is generated if empty).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Display name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Description.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub desc: String,
    /// Branch-scope variables.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub vars: Vec<Variant>,
    /// Condition (JavaScript).
    #[serde(rename = "if", skip_serializing_if = "Option::is_none")]
    pub r#if: Option<String>,
    /// The default branch: runs only if every sibling was skipped.
    #[serde(rename = "else", skip_serializing_if = "is_false")]
    pub r#else: bool,
    /// Waits until any one of these sibling branches has finished.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<String>,
    /// Script evaluated when the branch starts running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The branch's steps, run as a chain.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
    /// Parsed and kept, not used by the scheduler (as in the reference).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// Data sent to clients.
    #[serde(skip_serializing_if = "Vars::is_empty")]
    pub options: Vars,
    /// Data for tools, never sent.
    #[serde(skip_serializing_if = "Vars::is_empty")]
    pub metadata: Vars,
    /// Output filter of this scope.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exposes: Vec<Variant>,
}

impl Branch {
    /// Sets the id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Sets the condition.
    pub fn with_if(mut self, expr: impl Into<String>) -> Self {
        self.r#if = Some(expr.into());
        self
    }

    /// Makes this the default branch.
    pub fn with_else(mut self, is_else: bool) -> Self {
        self.r#else = is_else;
        self
    }

    /// Waits for a sibling branch.
    pub fn with_need(mut self, id: impl Into<String>) -> Self {
        self.needs.push(id.into());
        self
    }

    /// Adds a step built by `build`.
    pub fn with_step(mut self, build: impl FnOnce(Step) -> Step) -> Self {
        self.steps.push(build(Step::default()));
        self
    }
}

/// An act: one run of a package (an interrupt, a message, a transform, ...).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Act {
    /// Node id (a short id is generated if empty).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Display name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Description.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub desc: String,
    /// The package id.
    pub uses: String,
    /// The package's params (kept small: see [`Params`]).
    #[serde(skip_serializing_if = "Params::is_null")]
    pub params: Params,
    /// Guard (JavaScript).
    #[serde(rename = "if", skip_serializing_if = "Option::is_none")]
    pub r#if: Option<String>,
    /// Act-scope variables.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub vars: Vec<Variant>,
    /// Data sent to clients.
    #[serde(skip_serializing_if = "Vars::is_empty")]
    pub options: Vars,
    /// Data for tools, never sent.
    #[serde(skip_serializing_if = "Vars::is_empty")]
    pub metadata: Vars,
    /// Output filter.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exposes: Vec<Variant>,
    /// At most `limit` tasks of this node's key running at once, across
    /// processes; a task past the limit waits (state `pending`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<super::gates::Concurrency>,
    /// A token bucket per key: a task past the budget waits (state
    /// `pending`) until a token comes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<super::gates::Rate>,
}

impl Act {
    /// An act running `uses` with `params`.
    pub fn new(uses: impl Into<String>, params: impl Into<Value>) -> Self {
        Self {
            uses: uses.into(),
            params: Params::from(params.into()),
            ..Self::default()
        }
    }

    /// An interrupt request (`acts.core.irq`) with `params`.
    pub fn irq(params: impl Into<Value>) -> Self {
        Self::new("acts.core.irq", params)
    }

    /// Sets the id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Sets the guard.
    pub fn with_if(mut self, expr: impl Into<String>) -> Self {
        self.r#if = Some(expr.into());
        self
    }
}

/// A way to start a model: `manual`, `hook`, `schedule` (cron), `chat`, or
/// a custom package id.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Trigger {
    /// Id, unique within the model.
    pub id: String,
    /// Display name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Description.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub desc: String,
    /// `manual`, `hook`, `schedule`, `chat` or a package id.
    pub kind: String,
    /// Default start inputs.
    #[serde(skip_serializing_if = "Value::is_null")]
    pub params: Value,
    /// Cron expression (required for `schedule`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// Data for tools.
    #[serde(skip_serializing_if = "Vars::is_empty")]
    pub metadata: Vars,
}

impl Trigger {
    /// A trigger of `kind` with `id`.
    pub fn new(id: impl Into<String>, kind: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            kind: kind.into(),
            ..Self::default()
        }
    }

    /// Sets the cron expression.
    pub fn with_schedule(mut self, cron: impl Into<String>) -> Self {
        self.schedule = Some(cron.into());
        self
    }
}
