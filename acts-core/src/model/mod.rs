//! The workflow model: what a YAML or JSON model deserializes into, the
//! builder API, and validation before deploy.
//!
//! - [`Workflow`] is the root; [`Step`], [`Branch`], [`Act`] and [`Trigger`]
//!   are its nodes; [`Variant`] and [`ActSchema`] describe variables and
//!   input schemas.
//! - [`Workflow::load_yaml`] keeps the positions of nodes in the source so
//!   [`validate`] can say which line to fix.
//! - Unknown keys are ignored at every level, as in the reference engine.
//!
//! May use: nothing else of the crate.

mod action;
mod error;
mod expression;
mod gates;
mod limits;
mod lint;
mod nodes;
mod params;
mod scripts;
mod source;
mod timeout;
mod unknown_keys;
mod validate;
mod variant;
mod workflow;

pub use action::{ACTION_NAMES, Action, UnknownAction};
pub use error::{ModelError, NodeKind, NodeRef};
pub use expression::expression_len;
pub use gates::{
    Concurrency, MAX_CONCURRENCY_KEY, MAX_CONCURRENCY_LIMIT, MAX_RATE_BURST, MAX_RATE_PER_SECOND,
    Rate, gate_problem,
};
pub use limits::ModelLimits;
pub use lint::lint;
pub use nodes::{Act, Branch, Step, Trigger};
pub use params::Params;
pub use scripts::{ScriptSite, script_sites};
pub use source::{Location, SourceMap};
pub use timeout::{TimeUnit, TimeoutLimit, cost_in_literals};
pub use unknown_keys::{UnknownKey, unknown_keys};
pub use validate::{PackageLookup, has_expression, validate};
pub use variant::{ActSchema, Variant, VariantType, variants_to_vars, whole_expression};
pub use workflow::{LoadedWorkflow, Workflow, has_node_gates};

/// A JSON object: variables, options, outputs.
pub type Vars = serde_json::Map<String, serde_json::Value>;
