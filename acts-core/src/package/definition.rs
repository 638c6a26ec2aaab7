//! [`PackageDefinition`]: what a package is, how its acts run, and the
//! schema of its params.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How an act of a package runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunAs {
    /// In-process: the package's code runs and the act completes.
    Func,
    /// An interrupt: the act waits for a client action.
    #[default]
    Irq,
    /// A message: clients are told, nothing waits.
    Msg,
}

/// The group a package is listed under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Catalog {
    /// Built-in flow control (`acts.core.*`).
    Core,
    /// Event sources.
    Event,
    /// Outputs.
    Output,
    /// Data transforms (`acts.transform.*`).
    Transform,
    /// Forms.
    Form,
    /// AI.
    Ai,
    /// Application packages (the default).
    #[default]
    App,
}

/// The static description of a package.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackageDefinition {
    /// The id acts name in `uses` (e.g. `acts.core.irq`).
    pub id: String,
    /// Display name.
    pub name: String,
    /// Description.
    #[serde(default)]
    pub desc: String,
    /// Version.
    #[serde(default)]
    pub version: String,
    /// JSON Schema of the params (`{}` accepts anything).
    #[serde(default)]
    pub schema: Value,
    /// How its acts run.
    #[serde(default)]
    pub run_as: RunAs,
    /// Its group.
    #[serde(default)]
    pub catalog: Catalog,
}

impl PackageDefinition {
    /// A definition with `id`, `run_as` and a params `schema`.
    pub fn new(id: impl Into<String>, run_as: RunAs, schema: Value) -> Self {
        let id = id.into();
        Self {
            name: id.clone(),
            id,
            desc: String::new(),
            version: "0.1.0".into(),
            schema,
            run_as,
            catalog: Catalog::App,
        }
    }
}
