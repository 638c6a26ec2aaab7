//! Property: any workflow generated from a grammar of steps, branches and
//! acts either fails validation with an error, or runs to a terminal state
//! when every interrupt is answered — no hang, no panic.

use std::sync::Arc;

use acts_core::model::{Branch, Step, Vars, Workflow, validate};
use acts_core::package::PackageRegistry;
use acts_core::scheduler::{Action, Process, Services, TaskState};
use acts_core::script::ScriptEngine;
use acts_core::tree::ModelTree;
use proptest::prelude::*;
use serde_json::{Value, json};

fn leaf() -> impl Strategy<Value = Step> {
    (
        prop::option::of(prop_oneof![
            3 => Just(("acts.core.irq", json!({"key": "k"}))),
            2 => Just(("acts.core.msg", json!({"note": 1}))),
            2 => Just(("acts.transform.set", json!({"x": 1}))),
            2 => Just(("acts.transform.code", json!("return { y: 2 }"))),
            1 => Just(("acts.transform.code", json!("throw new Error('boom')"))),
            1 => Just(("acts.core.nope", Value::Null)),
            1 => Just(("acts.core.block", json!({"mode": "sequence", "acts": [{"uses": "acts.core.irq"}, {"uses": "acts.core.msg"}]}))),
            1 => Just(("acts.core.parallel", json!({"in": ["a", "b"], "acts": [{"uses": "acts.core.irq"}]}))),
            1 => Just(("acts.core.action", json!({"action": "skip"}))),
        ]),
        prop::option::of(prop_oneof![
            Just("true"),
            Just("false"),
            Just("x === 1"),
            Just("undefined_name > 1")
        ]),
    )
        .prop_map(|(uses, cond)| {
            let mut s = Step::new();
            if let Some((u, params)) = uses {
                s = s.with_uses(u, params);
            }
            s.r#if = cond.map(str::to_owned);
            s
        })
}

fn step() -> impl Strategy<Value = Step> {
    leaf().prop_recursive(3, 20, 3, |inner| {
        (
            leaf(),
            prop::collection::vec(
                (
                    prop::collection::vec(inner.clone(), 0..3),
                    any::<bool>(),
                    prop::option::of(prop_oneof![Just("true"), Just("false")]),
                )
                    .prop_map(|(steps, is_else, cond)| {
                        let mut b = Branch::default();
                        b.steps = steps;
                        b.r#else = is_else;
                        b.r#if = cond.map(str::to_owned);
                        b
                    }),
                0..3,
            ),
            prop::collection::vec(inner, 0..2),
        )
            .prop_map(|(mut s, branches, catches)| {
                s.branches = branches;
                s.catches = catches;
                s
            })
    })
}

fn workflow() -> impl Strategy<Value = Workflow> {
    prop::collection::vec(step(), 0..4).prop_map(|steps| {
        let mut w = Workflow::new().with_id("generated");
        w.steps = steps;
        w
    })
}

/// How many generated workflows passed validation and ran (the property
/// must not pass by rejecting everything).
static RAN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

proptest! {
    #![proptest_config(ProptestConfig { cases: acts_testkit::proptest_cases(96), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_valid_workflow_always_reaches_a_terminal_state(w in workflow()) {
        let packages = PackageRegistry::with_builtins();
        let scripts = ScriptEngine::default();
        let svc = Services { scripts: &scripts, packages: &packages, seals: None, models: None, limits: Default::default(), interest: Default::default() };
        if validate(&w, &Default::default(), &packages).is_err() {
            return Ok(()); // rejected with an error: fine
        }
        let tree = Arc::new(ModelTree::build(&w).map_err(|e| TestCaseError::fail(e.to_string()))?);
        RAN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut p = Process::new("prop", tree, Vars::new());
        p.run(svc);
        // Answer every interrupt until the process ends; a bounded number of
        // rounds proves it does not hang.
        for _ in 0..200 {
            if p.state().is_terminal() {
                break;
            }
            let waiting: Vec<String> = p
                .tasks
                .all()
                .filter(|(_, t)| t.state == TaskState::Interrupt)
                .map(|(_, t)| t.id.clone())
                .collect();
            prop_assert!(!waiting.is_empty(), "the process is stuck in {:?} with nothing to answer", p.state());
            for tid in waiting {
                // An earlier answer in this round may have ended the act.
                let _ = p.act(&tid, Action::Complete, Vars::new(), svc);
            }
        }
        prop_assert!(p.state().is_terminal(), "not terminal after 200 rounds: {:?}", p.state());
    }
}

#[test]
fn most_generated_workflows_are_valid_and_run() {
    // Runs the property on its own and checks the share that ran.
    a_valid_workflow_always_reaches_a_terminal_state();
    let ran = RAN.load(std::sync::atomic::Ordering::SeqCst);
    assert!(ran >= 30, "only {ran} of 96 generated workflows ran");
}
