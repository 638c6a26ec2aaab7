//! Sealing external data into tasks (the reference's snapshots, §7.3): at
//! each task's prepare, every registered target's current value for the
//! task's scope is copied into the task (`__sealed.<name>`), where scripts
//! read it as the frozen global `$<name>`. The task keeps what it sealed
//! (replay determinism); the values live in the task's persisted scope.

use serde_json::Value;

use crate::model::Vars;

/// The data key holding a task's sealed values (name → data).
pub const SEALED: &str = "__sealed";

/// When a target is read for a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SealPolicy {
    /// Once per task lineage: descendants inherit the first sealed value.
    #[default]
    PerProc,
    /// Every new task reads the latest value.
    PerTask,
}

/// What happens when a scope variable or the data is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnMissing {
    /// Seal nothing.
    #[default]
    Skip,
    /// Fail the task.
    Error,
}

/// A registered target as the core sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct SealTarget {
    /// The name (`$<name>` in scripts).
    pub name: String,
    /// When it is read.
    pub policy: SealPolicy,
    /// Task variables whose values, joined by `/`, form the scope key.
    pub scope: Vec<String>,
    /// What to do when something is missing.
    pub on_missing: OnMissing,
}

/// Where sealed values come from (the engine's snapshot registry).
pub trait Seals: Send + Sync {
    /// The registered targets.
    fn targets(&self) -> Vec<SealTarget>;
    /// The current data of target `name` for `scope` (`None`: absent or
    /// expired).
    fn read(&self, name: &str, scope: &str) -> Option<Vars>;
}

/// The scope key of `target` for a task, from `find` (own data, then
/// ancestors); `Err` lists the missing variables.
pub fn scope_key(
    target: &SealTarget,
    find: impl Fn(&str) -> Option<Value>,
) -> Result<String, Vec<String>> {
    let mut parts = Vec::new();
    let mut missing = Vec::new();
    for var in &target.scope {
        match find(var) {
            Some(Value::String(s)) => parts.push(s),
            Some(v) => parts.push(v.to_string()),
            None => missing.push(var.clone()),
        }
    }
    if missing.is_empty() {
        Ok(parts.join("/"))
    } else {
        Err(missing)
    }
}
