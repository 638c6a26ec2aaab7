//! What a chain of steps hands to its parent when its last step declares
//! `exposes` — a deliberate difference from acts 0.25 (COMPATIBILITY.md,
//! "A chain's last step's `exposes`"): a step's `exposes` filters that
//! step's own outputs, and the earlier steps' outputs have already folded
//! into the parent, so they reach the process outputs; the workflow's
//! `exposes` filters the process outputs, as in the reference. Runs on
//! every backend (`scripts/test.sh`'s engine suites).

use crate::common;

use common::*;

use serde_json::json;

async fn outputs_of(yaml: &str, model: &str) -> serde_json::Value {
    let (engine, end) = run_to_end(yaml, model).await;
    assert_eq!(end.state, "completed", "{end:?}");
    engine.close().await;
    let mut outputs = serde_json::to_value(&end.outputs).expect("json");
    if let Some(o) = outputs.as_object_mut() {
        o.remove("pid");
    }
    outputs
}

const CHAIN: &str = "steps:
  - id: first
    uses: acts.transform.set
    params: { early: 1 }
  - id: last
    uses: acts.transform.set
    params: { shown: 2, hidden: 3 }
    exposes:
      - { name: shown }
";

#[tokio::test]
async fn the_last_steps_exposes_filters_its_own_outputs_only() {
    let outputs = outputs_of(&format!("id: chain\nver: '1'\n{CHAIN}"), "chain").await;
    assert_eq!(
        outputs,
        json!({"early": 1, "shown": 2}),
        "the last step hands on `shown` only; `early` folded into the process when `first` ended"
    );
}

#[tokio::test]
async fn the_workflows_exposes_filters_the_process_outputs() {
    let outputs = outputs_of(
        &format!("id: filtered\nver: '1'\n{CHAIN}exposes:\n  - {{ name: shown }}\n"),
        "filtered",
    )
    .await;
    assert_eq!(outputs, json!({"shown": 2}));
}
