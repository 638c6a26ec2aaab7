//! What a script's result may be, as in the reference (acts 0.25 spec,
//! "JS → JSON conversion"): a number that is not finite (`0 / 0`, `1 / 0`)
//! is a conversion error — a code step fails its act (JSON has no such
//! number, and a silent `null` would hide the bug), a substituted param
//! becomes `null` as any failing substitution does in the reference — while
//! a real `null` stays `null`. Runs on every backend
//! (`scripts/test.sh`'s engine suites).

mod common;

use common::*;

use acts_core::engine::{ChannelOptions, Engine};
use acts_core::model::Vars;
use serde_json::json;

async fn run(yaml: &str, model: &str) -> (Engine, acts_core::scheduler::Message) {
    let engine = Engine::builder()
        .store(store().await)
        .start()
        .await
        .expect("the engine starts");
    let exec = engine.executor();
    exec.deploy_yaml(yaml).await.expect("deploys");
    let mut rx = engine
        .channel(ChannelOptions::default().with_type("workflow"))
        .subscribe();
    let p = exec.start(model, Vars::new()).await.expect("starts");
    let end = recv_where(&mut rx, ends(&p.pid)).await;
    (engine, end)
}

#[tokio::test]
async fn a_code_result_that_is_not_a_finite_number_fails_the_act() {
    let (engine, end) = run(
        "id: nan\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.transform.code\n    params: 'return { ok: 1, ratio: 0 / 0 }'\n",
        "nan",
    )
    .await;
    assert_eq!(end.state, "error", "{end:?}");
    let err = end.err.clone().expect("an error");
    assert!(
        err.message.contains("not finite") && err.message.contains("ratio"),
        "{}",
        err.message
    );
    engine.close().await;
}

/// In a substituted param a failing expression is `null` (the reference's
/// rule for substitution, spec §1.7.3: warned, not failed) — a non-finite
/// result is such a failure, not a number; a real `null` stays `null`.
#[tokio::test]
async fn a_substituted_infinite_value_is_the_reference_null_and_a_real_null_stays() {
    let (engine, end) = run(
        "id: inf\nver: '1'\nvars:\n  - { name: n, value: 0 }\nsteps:\n  - id: s1\n    uses: acts.transform.set\n    params: { big: '${{ 1 / n }}', fine: '${{ 2 / 4 }}' }\n",
        "inf",
    )
    .await;
    assert_eq!(end.state, "completed", "{end:?}");
    assert_eq!(end.outputs.get("big"), Some(&json!(null)));
    assert_eq!(end.outputs.get("fine"), Some(&json!(0.5)));
    engine.close().await;
    let (engine, end) = run(
        "id: nul\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.transform.code\n    params: 'return { none: null, list: [1, null] }'\nexposes:\n  - { name: none }\n  - { name: list }\n",
        "nul",
    )
    .await;
    assert_eq!(end.state, "completed", "{end:?}");
    assert_eq!(
        serde_json::to_value(&end.outputs).ok(),
        Some(json!({"none": null, "list": [1, null]}))
    );
    engine.close().await;
}
