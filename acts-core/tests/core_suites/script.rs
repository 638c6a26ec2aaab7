//! JavaScript evaluation: results, helpers, effects, limits, substitution.

use std::sync::Arc;
use std::time::Duration;

use acts_core::model::Vars;
use acts_core::script::{
    ScriptEffect, ScriptEngine, ScriptError, ScriptKind, ScriptLimits, ScriptScope, substitute,
};
use serde_json::{Value, json};

fn vars(v: Value) -> Vars {
    v.as_object().cloned().expect("an object")
}

fn scope(v: Value) -> ScriptScope {
    ScriptScope::from_vars(vars(v))
}

fn eval(engine: &ScriptEngine, src: &str, s: ScriptScope) -> Result<Value, ScriptError> {
    engine.eval(ScriptKind::Expression, src, s).map(|o| o.value)
}

#[test]
fn expressions_and_blocks_give_their_value() {
    let e = ScriptEngine::default();
    assert_eq!(eval(&e, "a + 10", scope(json!({"a": 10}))), Ok(json!(20)));
    assert_eq!(
        eval(&e, "let x = 2; x * a", scope(json!({"a": 21}))),
        Ok(json!(42))
    );
    assert_eq!(
        eval(
            &e,
            "({ s: 'x', n: [1, 2.5], b: true, z: null })",
            ScriptScope::default()
        ),
        Ok(json!({"s": "x", "n": [1, 2.5], "b": true, "z": null}))
    );
    assert_eq!(
        eval(&e, "undefined", ScriptScope::default()),
        Ok(Value::Null)
    );
    let code = e
        .eval(
            ScriptKind::Code,
            "return { b: a + 10 };",
            scope(json!({"a": 10})),
        )
        .unwrap();
    assert_eq!(code.value, json!({"b": 20}));
}

#[test]
fn conditions_must_be_boolean() {
    let e = ScriptEngine::default();
    assert_eq!(e.eval_bool("v > 100", scope(json!({"v": 500}))), Ok(true));
    assert_eq!(e.eval_bool("v > 100", scope(json!({"v": 50}))), Ok(false));
    let err = e.eval_bool("v + 1", scope(json!({"v": 1}))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "condition `v + 1` must give true or false, got 2"
    );
}

#[test]
fn thrown_errors_and_unknown_names_are_exceptions() {
    let e = ScriptEngine::default();
    match eval(&e, "throw new Error('nope')", ScriptScope::default()) {
        Err(ScriptError::Exception { message, .. }) => assert_eq!(message, "nope"),
        other => panic!("{other:?}"),
    }
    match eval(&e, "missing_name + 1", ScriptScope::default()) {
        Err(ScriptError::Exception { message, .. }) => {
            assert!(message.contains("missing_name"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    match eval(&e, "a +* 2", ScriptScope::default()) {
        Err(ScriptError::Exception { message, .. }) => assert!(
            message.to_lowercase().contains("unexpected")
                || message.contains("SyntaxError")
                || !message.is_empty()
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        eval(&e, "eval('1')", ScriptScope::default()).is_err(),
        "eval is not available to scripts"
    );
}

#[test]
fn variables_do_not_leak_between_evaluations() {
    let e = ScriptEngine::new(ScriptLimits::default());
    assert_eq!(
        eval(&e, "secret", scope(json!({"secret": 1}))),
        Ok(json!(1))
    );
    assert!(
        eval(&e, "secret", ScriptScope::default()).is_err(),
        "a later evaluation must not see it"
    );
}

#[test]
fn helpers_read_the_scope_and_record_effects() {
    let e = ScriptEngine::default();
    let s = ScriptScope {
        own: vars(json!({"v": 2, "ecode": "E1"})),
        ancestors: vec![vars(json!({"v": 3, "p": "parent"}))],
        inputs: Some(vars(json!({"i": 1}))),
        env: vars(json!({"region": "eu"})),
        cost_millis: 90 * 60 * 1000,
        steps: Vec::new(),
    };
    let src = "$set('x', $get('v') + 1); $set_process_var('done', true); $env.tier = 'gold';
               [$get('x'), $get('p'), v, $inputs().i, $data().v, $ecode(), $env.region, $cost_in('1h'), $cost_in('1h', '1h'), typeof os]";
    let out = e.eval(ScriptKind::Expression, src, s).unwrap();
    assert_eq!(
        out.value,
        json!([3, "parent", 3, 1, 2, "E1", "eu", true, false, "string"])
    );
    assert_eq!(
        out.effects,
        vec![
            ScriptEffect::Set {
                name: "x".into(),
                value: json!(3)
            },
            ScriptEffect::SetProcessVar {
                name: "done".into(),
                value: json!(true)
            },
            ScriptEffect::SetEnv {
                name: "tier".into(),
                value: json!("gold")
            },
        ]
    );
}

#[test]
fn array_set_helpers_sort_and_deduplicate() {
    let e = ScriptEngine::default();
    let v = eval(&e, "[['b','a','a'].union(['c']), ['a','b','c'].intersection(['c','a']), ['a','b'].difference(['b'])]", ScriptScope::default()).unwrap();
    assert_eq!(v, json!([["a", "b", "c"], ["a", "c"], ["a"]]));
}

#[test]
fn an_endless_loop_is_stopped_and_others_keep_working() {
    let e = Arc::new(ScriptEngine::new({
        let mut v = ScriptLimits::default();
        v.time = Duration::from_millis(100);
        v
    }));
    let looping = {
        let e = e.clone();
        std::thread::spawn(move || eval(&e, "while (true) {}", ScriptScope::default()))
    };
    // Another evaluation proceeds while the loop runs (separate runtime).
    assert_eq!(eval(&e, "1 + 1", ScriptScope::default()), Ok(json!(2)));
    match looping.join().unwrap() {
        Err(ScriptError::Timeout { limit, .. }) => assert_eq!(limit, Duration::from_millis(100)),
        other => panic!("expected a timeout, got {other:?}"),
    }
    // The engine still works afterwards.
    assert_eq!(eval(&e, "2 * 3", ScriptScope::default()), Ok(json!(6)));
}

#[test]
fn unbounded_allocation_is_stopped() {
    let e = ScriptEngine::new({
        let mut v = ScriptLimits::default();
        v.memory_bytes = 4 * 1024 * 1024;
        v
    });
    let r = eval(
        &e,
        "let a = []; while (true) { a.push('x'.repeat(1024)); }",
        ScriptScope::default(),
    );
    assert!(matches!(r, Err(ScriptError::OutOfMemory { .. })), "{r:?}");
    assert_eq!(eval(&e, "40 + 2", ScriptScope::default()), Ok(json!(42)));
}

#[test]
fn vars_substitution_evaluates_whole_expressions_only() {
    let e = ScriptEngine::default();
    let s = scope(json!({"a": 10, "name": "ann"}));
    let v = substitute::vars(
        &e,
        &json!({"x": "${{ a + 1 }}", "y": "keep ${{ a }}", "o": {"z": "${{ name }}"}, "l": ["${{ a }}"]}),
        &s,
    )
    .expect("no limit is hit");
    assert_eq!(
        v,
        json!({"x": 11, "y": "keep ${{ a }}", "o": {"z": "ann"}, "l": ["${{ a }}"]})
    );
}

#[test]
fn params_substitution_keeps_types_and_interpolates_text() {
    let e = ScriptEngine::default();
    let s = scope(json!({"a": 10, "users": ["u1", "u2"], "name": "ann"}));
    let v = substitute::params(
        &e,
        &json!({"in": "${{ users }}", "msg": "hi ${{ name }}, a=${{ a }}", "n": ["${{ a * 2 }}"], "bad": "${{ nope.x }}"}),
        &s,
    )
    .expect("an undefined name is not a hard failure");
    assert_eq!(
        v,
        json!({"in": ["u1", "u2"], "msg": "hi ann, a=10", "n": [20], "bad": null})
    );
}
