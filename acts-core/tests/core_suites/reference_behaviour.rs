//! What acts 0.25 models do, held against this engine: each scenario is
//! one place where the engine differed from the reference (or from what
//! the reference documents), with the behaviour now expected.

use crate::common;
use common::*;

use acts_core::engine::{ChannelOptions, Engine};
use acts_core::model::Vars;
use acts_core::scheduler::MessageState;
use serde_json::{Value, json};

async fn engine_on(store: std::sync::Arc<dyn acts_store::KvStore>) -> Engine {
    Engine::builder()
        .store(store)
        .start()
        .await
        .expect("the engine starts")
}

/// An engine on the test store with `yaml` deployed.
async fn deployed(yaml: &str) -> Engine {
    let engine = engine_on(store().await).await;
    engine
        .executor()
        .model()
        .deploy_yaml(yaml)
        .await
        .expect("deploys");
    engine
}

#[tokio::test]
async fn workflow_exposes_written_as_expressions_are_evaluated_and_kept() {
    let kv = store().await;
    let engine = engine_on(kv.clone()).await;
    let exec = engine.executor();
    exec.model()
        .deploy_yaml(
            r#"
id: totals
ver: "1"
vars:
  - { name: a, value: 1 }
  - { name: b, value: 2 }
steps:
  - id: s1
    uses: acts.transform.set
    params: { c: 10 }
exposes:
  - { name: total, value: "${{ a + b + c }}" }
  - { name: a }
  - { name: label, value: fixed }
"#,
        )
        .await
        .expect("deploys");
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = exec
        .proc()
        .start("totals", Vars::new())
        .await
        .expect("starts");
    let end = recv_where(&mut rx, ends(&p.pid)).await;
    assert_eq!(end.state, "completed");
    let want = json!({"total": 13, "a": 1, "label": "fixed"});
    assert_eq!(serde_json::to_value(&end.outputs).ok(), Some(want.clone()));
    let outputs = exec.proc().get(&p.pid).await.expect("readable").outputs;
    assert_eq!(serde_json::to_value(&outputs).ok(), Some(want.clone()));
    engine.close().await;
    drop(engine);
    // Read back by another engine on the same store: the same values.
    let again = engine_on(kv).await;
    let outputs = again
        .executor()
        .proc()
        .get(&p.pid)
        .await
        .expect("readable")
        .outputs;
    assert_eq!(serde_json::to_value(&outputs).ok(), Some(want));
    again.close().await;
}

#[tokio::test]
async fn an_exposed_name_not_set_yet_does_not_overwrite_a_later_set_process_var() {
    let engine = deployed(
        r#"
id: late_set
ver: "1"
steps:
  - id: s1
    uses: acts.transform.code
    params: |
      $set_process_var("result", 42);
      return {};
  - id: s2
    uses: acts.transform.set
    params: { other: 1 }
exposes:
  - { name: result }
  - { name: other }
"#,
    )
    .await;
    let (state, outputs) = run_to_end(&engine, "late_set").await;
    assert_eq!(state, MessageState::Completed);
    assert_eq!(outputs["result"], json!(42), "{outputs:?}");
    assert_eq!(outputs["other"], json!(1));
    engine.close().await;
}

#[tokio::test]
async fn expression_exposes_are_evaluated_at_the_end_not_for_the_first_steps_inputs() {
    let engine = deployed(
        r#"
id: early
ver: "1"
steps:
  - id: s1
    uses: acts.transform.code
    params: "return { early: $get('summary'), n: 2 }"
exposes:
  - { name: early }
  - { name: summary, value: "${{ 'n=' + $get('n') }}" }
"#,
    )
    .await;
    let (_, outputs) = run_to_end(&engine, "early").await;
    assert_eq!(outputs["early"], Value::Null, "{outputs:?}");
    assert_eq!(outputs["summary"], json!("n=2"));
    engine.close().await;
}

#[tokio::test]
async fn a_subflow_child_returns_its_evaluated_exposes_to_the_parent_act() {
    let engine = deployed(
        "id: child\nver: '1'\nsteps:\n  - id: c1\n    uses: acts.transform.set\n    params: { seen: true }\nexposes:\n  - { name: doubled, value: '${{ n * 2 }}' }\n",
    )
    .await;
    let exec = engine.executor();
    exec.model().deploy_yaml(
        "id: parent\nver: '1'\nsteps:\n  - id: call\n    uses: acts.core.subflow\n    params:\n      to: child\n      options: { n: 21 }\n  - id: after\n    uses: acts.transform.code\n    params: 'return { got: doubled }'\nexposes:\n  - { name: got }\n",
    )
    .await
    .expect("deploys");
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let parent = exec
        .proc()
        .start("parent", Vars::new())
        .await
        .expect("starts");
    let end = recv_where(&mut rx, ends(&parent.pid)).await;
    assert_eq!(end.state, "completed");
    assert_eq!(
        end.outputs.get("got"),
        Some(&json!(42)),
        "{:?}",
        end.outputs
    );
    engine.close().await;
}

#[tokio::test]
async fn process_outputs_that_break_their_declared_type_end_the_process_in_error() {
    let engine = deployed(
        r#"
id: typed
ver: "1"
steps:
  - id: s1
    uses: acts.transform.set
    params: { total: "twelve", count: 3 }
exposes:
  - { name: count, type: number }
  - { name: total, type: number }
"#,
    )
    .await;
    let exec = engine.executor();
    let mut rx = engine
        .channel(ChannelOptions::default().with_type("workflow"))
        .subscribe();
    let p = exec
        .proc()
        .start("typed", Vars::new())
        .await
        .expect("starts");
    let end = recv_where(&mut rx, ends(&p.pid)).await;
    assert_eq!(end.state, "error", "never `completed` first");
    let err = end.err.clone().expect("an error");
    assert_eq!(err.ecode, "exposes");
    assert!(
        err.message
            .contains("output 'total' must be a number, got \"twelve\""),
        "{}",
        err.message
    );
    // Nothing else was announced for the process's end.
    assert!(rx.try_recv().is_err());
    let info = exec.proc().get(&p.pid).await.expect("readable");
    assert_eq!(info.state, acts_core::scheduler::TaskState::Error);
    // Matching outputs complete as before.
    exec.model().deploy_yaml(
        "id: fine\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.transform.set\n    params: { count: 3 }\nexposes:\n  - { name: count, type: number }\n",
    )
    .await
    .expect("deploys");
    let p = exec
        .proc()
        .start("fine", Vars::new())
        .await
        .expect("starts");
    assert_eq!(recv_where(&mut rx, ends(&p.pid)).await.state, "completed");
    engine.close().await;
}

#[tokio::test]
async fn a_branch_run_script_writes_what_it_sets() {
    let engine = deployed(
        r#"
id: branchy
ver: "1"
vars:
  - { name: v, value: 50 }
steps:
  - id: s1
    branches:
      - id: big
        if: v > 10
        run: |
          $set_process_var("route", "big");
          $set("seen_in_branch", v * 2);
          $env.touched = true;
        steps:
          - id: inner
            uses: acts.transform.code
            params: "return { inner_saw: seen_in_branch }"
      - id: small
        else: true
        run: $set_process_var("route", "small")
  - id: after
    uses: acts.transform.code
    params: "return { env_touched: $env.touched }"
"#,
    )
    .await;
    let exec = engine.executor();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = exec
        .proc()
        .start("branchy", Vars::new())
        .await
        .expect("starts");
    let end = recv_where(&mut rx, ends(&p.pid)).await;
    assert_eq!(end.state, "completed", "{:?}", end.err);
    let out = &end.outputs;
    assert_eq!(out.get("route"), Some(&json!("big")), "{out:?}");
    assert_eq!(out.get("inner_saw"), Some(&json!(100)), "{out:?}");
    assert_eq!(out.get("env_touched"), Some(&json!(true)), "{out:?}");
    engine.close().await;
}

/// Starts `yaml` (model id `model`) on an engine with a manual clock,
/// waits for its interrupt, and lets an hour and a second pass.
/// Starts `model` with no vars, waits for the end of its process, and
/// returns the end state and the process outputs.
async fn run_to_end(engine: &Engine, model: &str) -> (MessageState, Vars) {
    let exec = engine.executor();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = exec.proc().start(model, Vars::new()).await.expect("starts");
    let done = recv_where(&mut rx, |m| {
        m.r#type == "workflow" && m.pid == p.pid && m.state != MessageState::Created
    })
    .await;
    let outputs = exec.proc().get(&p.pid).await.expect("reads").outputs;
    (done.state, outputs)
}

async fn wait_an_hour(
    model: &str,
    yaml: &str,
) -> (
    Engine,
    tokio::sync::mpsc::UnboundedReceiver<acts_core::scheduler::Message>,
    String,
) {
    let clock = acts_core::time::ManualClock::new(1_000_000);
    let engine = Engine::builder()
        .store(store().await)
        .clock(std::sync::Arc::new(clock.clone()))
        .start()
        .await
        .expect("the engine starts");
    let exec = engine.executor();
    exec.model().deploy_yaml(yaml).await.expect("deploys");
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = exec.proc().start(model, Vars::new()).await.expect("starts");
    recv_where(&mut rx, irq_created).await;
    clock.advance(std::time::Duration::from_secs(3601));
    (engine, rx, p.pid)
}

#[tokio::test]
async fn a_timeout_rule_due_at_once_runs_as_soon_as_the_one_before_it_ends() {
    let (engine, mut rx, pid) = wait_an_hour(
        "escalate",
        r#"
id: escalate
ver: "1"
steps:
  - id: wait
    uses: acts.core.irq
    params: { key: approve }
    timeouts:
      - id: first
        if: $cost_in("1h")
        branches:
          - id: notify_branch
            if: "true"
            steps:
              - id: notify
                uses: acts.core.msg
                params: { key: first_notice }
      - id: second
        if: $cost_in("0s")
        uses: acts.core.msg
        params: { key: second_notice }
"#,
    )
    .await;
    recv_where(&mut rx, |m| m.key.as_deref() == Some("first_notice")).await;
    // No more time passes: the second rule is due already.
    let second = recv_where(&mut rx, |m| m.key.as_deref() == Some("second_notice")).await;
    assert_eq!(second.pid, pid);
    engine.close().await;
}

#[tokio::test]
async fn a_later_timeout_rule_waits_until_the_fired_one_before_it_has_ended() {
    let (engine, mut rx, pid) = wait_an_hour(
        "escalate_wait",
        r#"
id: escalate_wait
ver: "1"
steps:
  - id: wait
    uses: acts.core.irq
    params: { key: approve }
    timeouts:
      - id: first
        if: $cost_in("1h")
        branches:
          - id: ask_branch
            if: "true"
            steps:
              - id: ask
                uses: acts.core.irq
                params: { key: boss }
      - id: second
        if: $cost_in("0s")
        uses: acts.core.msg
        params: { key: second_notice }
"#,
    )
    .await;
    let boss = recv_where(&mut rx, |m| {
        m.key.as_deref() == Some("boss") && m.state == MessageState::Created
    })
    .await;
    // Hang guard only: the engine settles with the boss's answer pending.
    let settled = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while !engine.runtime().is_idle() {
            // Not a spin: the waited-for work gets the cores.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await;
    assert!(settled.is_ok(), "the engine settles");
    while let Ok(m) = rx.try_recv() {
        assert_ne!(
            m.key.as_deref(),
            Some("second_notice"),
            "the second rule fired while the first one still waits"
        );
    }
    let exec = engine.executor();
    exec.act()
        .complete(&pid, &boss.tid, Vars::new())
        .await
        .expect("the boss answers");
    let order: Vec<String> = {
        let mut seen = Vec::new();
        loop {
            let m = recv(&mut rx).await;
            let k = m.key.clone().unwrap_or_else(|| m.nid.clone());
            seen.push(format!("{k}/{}", m.state));
            if k == "second_notice" {
                break seen;
            }
        }
    };
    let at = |s: &str| order.iter().position(|x| x == s);
    let (first, second) = (at("first/completed"), at("second_notice/completed"));
    assert!(
        first.is_some() && first < second,
        "the first rule ends before the second fires: {order:?}"
    );
    engine.close().await;
}

#[tokio::test]
async fn a_catch_after_one_that_does_not_match_handles_the_error() {
    let engine = deployed(
        r#"
id: second_catch
ver: "1"
steps:
  - id: charge
    uses: acts.core.action
    params:
      action: error
      options: { ecode: E_CARD, message: card declined }
    catches:
      - id: other
        if: $ecode() == 'E_OTHER'
        uses: acts.transform.set
        params: { paid_by: nobody }
      - id: invoice_instead
        if: $ecode() == 'E_CARD'
        uses: acts.transform.set
        params: { paid_by: invoice }
  - id: ship
    uses: acts.transform.set
    params: { shipped: true }
"#,
    )
    .await;
    let (state, outputs) = run_to_end(&engine, "second_catch").await;
    assert_eq!(state, MessageState::Completed);
    assert_eq!(outputs["paid_by"], json!("invoice"));
    assert_eq!(outputs["shipped"], json!(true));
    engine.close().await;
}

#[tokio::test]
async fn a_timeout_that_raises_an_error_is_handled_by_the_steps_catches() {
    let (engine, mut rx, pid) = wait_an_hour(
        "late",
        r#"
id: late
ver: "1"
steps:
  - id: wait
    uses: acts.core.irq
    params: { key: approve }
    timeouts:
      - id: too_late
        if: $cost_in("1h")
        uses: acts.core.action
        params:
          action: error
          options: { ecode: E_TIMEOUT, message: nobody answered }
    catches:
      - id: escalate
        if: $ecode() == 'E_TIMEOUT'
        uses: acts.transform.set
        params: { escalated: true }
  - id: after
    uses: acts.transform.set
    params: { went_on: true }
"#,
    )
    .await;
    let end = recv_where(&mut rx, ends(&pid)).await;
    assert_eq!(end.state, "completed", "{:?}", end.err);
    assert_eq!(
        end.outputs.get("escalated"),
        Some(&json!(true)),
        "{:?}",
        end.outputs
    );
    assert_eq!(
        end.outputs.get("went_on"),
        Some(&json!(true)),
        "{:?}",
        end.outputs
    );
    engine.close().await;
}

#[tokio::test]
async fn act_messages_carry_what_reference_clients_read() {
    let engine = deployed(
        r#"
id: msgs
name: Messages
ver: "1"
options: { team: finance }
vars:
  - { name: who, value: ada }
steps:
  - id: review
    name: Review
    options: { tag: finance-review }
    uses: acts.core.irq
    params: { key: "approve_${{ who }}", to: "${{ who }}" }
  - id: listed
    uses: acts.core.block
    params:
      acts:
        - uses: acts.core.irq
          options: { tag: listed }
          params: { key: second, n: "${{ 1 + 1 }}" }
"#,
    )
    .await;
    let exec = engine.executor();
    let mut tagged = engine
        .channel(ChannelOptions::default().with_option("tag", "finance-*"))
        .subscribe();
    let mut rx = engine
        .channel(ChannelOptions::default().with_type("act"))
        .subscribe();
    let p = exec
        .proc()
        .start("msgs", Vars::new())
        .await
        .expect("starts");
    let irq = recv_where(&mut rx, irq_created).await;
    assert_eq!(
        irq.key.as_deref(),
        Some("approve_ada"),
        "the key as evaluated"
    );
    assert_eq!(irq.params, json!({"key": "approve_ada", "to": "ada"}));
    assert_eq!(irq.inputs.get("params"), Some(&irq.params));
    let step = irq.inputs.get("step").expect("the nearest step");
    assert_eq!(step["node_id"], "review");
    assert_eq!(step["node_name"], "Review");
    assert!(step["task_id"].as_str().is_some_and(|t| !t.is_empty()));
    assert_eq!(
        irq.inputs.get("model"),
        Some(&json!({"id": "msgs", "name": "Messages", "options": {"team": "finance"}}))
    );
    assert!(irq.start_time.is_some() && irq.end_time.is_none());
    // The step's options reach a channel filtering on them.
    let first_tagged = recv(&mut tagged).await;
    assert_eq!(first_tagged.nid, "review");
    exec.act()
        .complete(&p.pid, &irq.tid, Vars::new())
        .await
        .expect("answered");
    let done = recv_where(&mut rx, |m| m.tid == irq.tid && m.state == "completed").await;
    assert!(done.end_time.is_some());
    // An act of a block's `acts:` list: its params evaluated too.
    let second = recv_where(&mut rx, |m| {
        m.key.as_deref() == Some("second") && m.state == "created"
    })
    .await;
    assert_eq!(second.params["n"], json!(2));
    assert_eq!(second.inputs["options"], json!({"tag": "listed"}));
    assert_eq!(second.inputs["step"]["node_id"], "listed");
    engine.close().await;
}

#[tokio::test]
async fn a_script_with_a_syntax_error_is_refused_at_deploy_quoting_the_users_text() {
    let engine = engine_on(store().await).await;
    let exec = engine.executor();
    let cases = [
        (
            "id: m1\nver: '1'\nsteps:\n  - id: s1\n    if: amount >\n    uses: acts.transform.set\n    params: { a: 1 }\n",
            "if `amount >` is not valid JavaScript",
            Some(5),
        ),
        (
            "id: m2\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.transform.set\n    params: { a: '${{ 1 + }}' }\n",
            "params `1 +` is not valid JavaScript",
            Some(4),
        ),
        (
            "id: m3\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.transform.code\n    params: 'return {'\n",
            "params `return {` is not valid JavaScript",
            Some(4),
        ),
    ];
    for (yaml, want, line) in cases {
        let err = exec.model().deploy_yaml(yaml).await.expect_err("refused");
        let text = err.to_string();
        assert!(text.contains(want), "{text}");
        assert!(
            !text.contains("'}'") || want.contains('{'),
            "no brace the user never wrote: {text}"
        );
        if let Some(line) = line {
            assert!(text.contains(&format!("line {line},")), "{text}");
        }
    }
    // Nothing was deployed; a valid model still deploys, and reading an
    // undefined name is still only a run-time `null`.
    assert!(exec.model().list().await.expect("listable").is_empty());
    exec.model().deploy_yaml(
        "id: ok\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.transform.set\n    params: { a: '${{ nobody_set_this }}' }\n",
    )
    .await
    .expect("deploys");
    engine.close().await;
}
