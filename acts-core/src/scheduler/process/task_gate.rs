//! What a gated task waits for: its evaluated `concurrency:` and `rate:`
//! ([`TaskGate`], kept in its data under [`GATE_KEY`]), and what the engine
//! answers when it lets the task through ([`GatePass`]). The waiting
//! itself is in `gate.rs`.

use serde::{Deserialize, Serialize};

/// Where a gated task keeps its evaluated gate (its data).
pub(crate) const GATE_KEY: &str = "__gate";

/// A task's evaluated `concurrency:` and `rate:` (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskGate {
    /// The concurrency key, if the node has `concurrency:`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Its limit.
    #[serde(default)]
    pub limit: u32,
    /// The rate key and bucket, if the node has `rate:`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateGate>,
    /// When the task began to wait (ms, engine clock): the queues' order.
    pub since: i64,
    /// The task's place in its process's creation order: the order of
    /// its process's tasks that began to wait in the same millisecond.
    #[serde(default)]
    pub seq: u32,
}

/// A task's evaluated `rate:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateGate {
    /// The evaluated key.
    pub key: String,
    /// Tokens per second.
    pub per_second: f64,
    /// The bucket's size.
    pub burst: u32,
}

/// What a task is when part of its gate is granted
/// ([`Process::gate_granted`]).
#[derive(Debug, Clone, PartialEq)]
pub enum GatePass {
    /// It still waits: for the next part of `TaskGate` (its rate token).
    Waits(TaskGate),
    /// It waits for nothing more: its gate opens ([`Process::open_gate`]).
    Opens,
    /// It runs (let through before).
    Runs,
    /// It ended or went: its place is free.
    Gone,
}

/// A gated task that has not ended ([`Process::gates`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateUse {
    /// The task.
    pub tid: String,
    /// Its gate.
    pub gate: TaskGate,
    /// Whether its gate opened (it runs, holding its key's slot).
    pub open: bool,
}
