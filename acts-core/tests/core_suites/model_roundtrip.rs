//! Property test: any model built from the grammar of steps, branches and
//! acts survives YAML and JSON round-trips unchanged, and its tree builds.

use acts_core::model::{Branch, Step, Variant, Workflow};
use acts_core::tree::ModelTree;
use proptest::prelude::*;
use serde_json::{Value, json};

fn ident() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,6}"
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        "[ -~]{0,12}".prop_map(Value::String),
    ]
}

fn variant() -> impl Strategy<Value = Variant> {
    (ident(), scalar()).prop_map(|(n, v)| Variant::create(n, v))
}

fn leaf_step() -> impl Strategy<Value = Step> {
    (
        prop::option::of(prop_oneof![
            Just("acts.core.irq"),
            Just("acts.core.msg"),
            Just("acts.transform.set")
        ]),
        prop::option::of("[a-z]{1,3} > [0-9]{1,3}"),
        prop::collection::vec(variant(), 0..3),
        prop::collection::btree_map(ident(), scalar(), 0..3),
    )
        .prop_map(|(uses, cond, vars, params)| {
            let mut s = Step::new();
            if let Some(u) = uses {
                s = s.with_uses(u, Value::Object(params.into_iter().collect()));
            }
            s.r#if = cond;
            s.vars = vars;
            s
        })
}

fn step() -> impl Strategy<Value = Step> {
    leaf_step().prop_recursive(3, 24, 4, |inner| {
        (
            leaf_step(),
            prop::collection::vec(
                (
                    prop::collection::vec(inner.clone(), 0..3),
                    any::<bool>(),
                    prop::option::of("[a-z] == 1"),
                )
                    .prop_map(|(steps, is_else, cond)| {
                        let mut b = Branch::default();
                        b.steps = steps;
                        b.r#else = is_else;
                        b.r#if = cond;
                        b
                    }),
                0..3,
            ),
            prop::collection::vec(inner.clone(), 0..2),
            prop::collection::vec(inner, 0..2),
        )
            .prop_map(|(mut s, branches, catches, timeouts)| {
                s.branches = branches;
                s.catches = catches;
                s.timeouts = timeouts;
                s
            })
    })
}

/// Gives every node a distinct id, in traversal order.
fn number(steps: &mut [Step], n: &mut usize) {
    for s in steps {
        *n += 1;
        s.id = format!("s{n}");
        for b in &mut s.branches {
            *n += 1;
            b.id = format!("b{n}");
            number(&mut b.steps, n);
        }
        number(&mut s.catches, n);
        number(&mut s.timeouts, n);
    }
}

fn workflow() -> impl Strategy<Value = Workflow> {
    (
        prop::collection::vec(step(), 0..4),
        prop::collection::vec(variant(), 0..3),
        ident(),
    )
        .prop_map(|(mut steps, vars, id)| {
            let mut n = 0;
            number(&mut steps, &mut n);
            // Node ids are s<n>/b<n>; the model id is the root node's id and
            // must not collide with them.
            let mut w = Workflow::new().with_id(format!("wf_{id}"));
            w.steps = steps;
            w.vars = vars;
            w
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: acts_testkit::proptest_cases(128), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn yaml_and_json_round_trips_are_exact(w in workflow()) {
        let yaml = w.to_yaml().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let from_yaml = Workflow::from_yaml(&yaml).map_err(|e| TestCaseError::fail(format!("{e}\n{yaml}")))?;
        prop_assert_eq!(&from_yaml, &w, "YAML:\n{}", yaml);
        let from_json = Workflow::from_json(&w.to_json()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&from_json, &w);
    }

    #[test]
    fn every_generated_model_builds_a_tree_with_one_node_per_step_and_branch(w in workflow()) {
        fn count(steps: &[Step]) -> usize {
            steps.iter().map(|s| 1 + s.branches.iter().map(|b| 1 + count(&b.steps)).sum::<usize>() + count(&s.catches) + count(&s.timeouts)).sum()
        }
        let tree = ModelTree::build(&w).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(tree.len(), 1 + count(&w.steps));
    }
}
