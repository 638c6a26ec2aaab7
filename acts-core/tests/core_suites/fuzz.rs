//! Fuzzing what reads outside input, on stable Rust through proptest: the
//! model loader (any text, and generated model-shaped trees), `${{ }}`
//! substitution, and values crossing the JavaScript bridge — none may
//! panic, hang or grow past its limits. Then scripts under attack: each
//! stopped by a limit with an error that names it, the engine unaffected.
//!
//! `PROPTEST_CASES` sets the cases per property (CI: the default below); a
//! long run is `PROPTEST_CASES=100000 cargo test --release -p acts-core
//! --test core_suites -- fuzz::` (see `docs/TESTING.md`).

use std::time::{Duration, Instant};

use acts_core::model::{ModelLimits, Vars, Workflow};
use acts_core::script::{
    ScriptEngine, ScriptError, ScriptKind, ScriptLimits, ScriptScope, substitute,
};
use acts_core::tree::ModelTree;
use proptest::prelude::*;
use serde_json::{Value, json};

/// Cases per property unless `PROPTEST_CASES` says otherwise.
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: acts_testkit::proptest_cases(256),
        ..ProptestConfig::default()
    }
}

/// An engine with short limits (a fuzzed script that loops is stopped
/// quickly).
fn engine() -> ScriptEngine {
    ScriptEngine::new({
        let mut v = ScriptLimits::default();
        v.time = Duration::from_millis(200);
        v.memory_bytes = 8 * 1024 * 1024;
        v
    })
}

/// A hang guard for one case, far above every limit the case runs under
/// (a script's 200 ms): a case past it escaped its limits. Not a speed
/// claim.
const CASE_BOUND: Duration = Duration::from_secs(20);

/// Loads `text` as a model and, when it loads, builds its tree: either may
/// fail — with a message that says what is wrong — neither may panic or
/// run unbounded.
fn load(text: &str) -> Result<(), TestCaseError> {
    let started = Instant::now();
    match Workflow::load_yaml_within(text, &ModelLimits::default()) {
        Ok(loaded) => {
            if let Err(e) = ModelTree::build(&loaded.workflow) {
                prop_assert!(!e.to_string().is_empty(), "a tree error without a message");
            }
            let _ = acts_core::model::lint(&loaded.workflow, &loaded.unknown_keys);
        }
        Err(e) => prop_assert!(!e.to_string().is_empty(), "a load error without a message"),
    }
    prop_assert!(
        started.elapsed() < CASE_BOUND,
        "unbounded: {:?}",
        started.elapsed()
    );
    Ok(())
}

/// A script's failure, as a fuzzed script may cause it: thrown, stopped
/// at a limit, not valid JavaScript or not a value — never a broken
/// runtime — and saying so.
fn structured(e: &ScriptError) -> Result<(), TestCaseError> {
    prop_assert!(
        !matches!(e, ScriptError::Setup(_)),
        "the runtime broke: {e}"
    );
    prop_assert!(!e.to_string().is_empty());
    Ok(())
}

/// Text made of what YAML and our expressions give meaning to.
fn yamlish() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("id: ".to_owned()),
            Just("steps:\n".to_owned()),
            Just("  - ".to_owned()),
            Just("branches:".to_owned()),
            Just("uses: acts.core.irq".to_owned()),
            Just("params: {".to_owned()),
            Just("}".to_owned()),
            Just("[".to_owned()),
            Just("]".to_owned()),
            Just("${{ ".to_owned()),
            Just(" }}".to_owned()),
            Just("&a ".to_owned()),
            Just("*a".to_owned()),
            Just("<<: ".to_owned()),
            Just("!!binary ".to_owned()),
            Just("\n".to_owned()),
            Just("    ".to_owned()),
            Just("- ".to_owned()),
            Just(": ".to_owned()),
            Just("'".to_owned()),
            Just("\"".to_owned()),
            Just("#".to_owned()),
            Just("|\n".to_owned()),
            "[a-z0-9_.]{0,8}",
            "\\PC{0,4}",
        ],
        0..60,
    )
    .prop_map(|parts| parts.concat())
}

/// A JSON tree shaped like a model: known keys, any values.
fn model_tree() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z0-9_. ${}()'=<>!&|+-]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        let key = prop_oneof![
            Just("id"),
            Just("name"),
            Just("steps"),
            Just("branches"),
            Just("acts"),
            Just("uses"),
            Just("params"),
            Just("if"),
            Just("else"),
            Just("next"),
            Just("vars"),
            Just("inputs"),
            Just("exposes"),
            Just("catches"),
            Just("timeouts"),
            Just("setup"),
            Just("on"),
            Just("value"),
            Just("key"),
            Just("in"),
            Just("to"),
        ];
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(key.prop_map(str::to_owned), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// JSON values that survive JavaScript unchanged (integers within i32,
/// no `-0`, no `NaN`).
fn js_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        "\\PC{0,16}".prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 128, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            proptest::collection::btree_map("[a-zA-Z_][a-zA-Z0-9_]{0,6}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_text_loads_as_a_model_or_fails_cleanly(text in "\\PC{0,400}") {
        load(&text)?;
    }

    #[test]
    fn yaml_shaped_text_loads_or_fails_cleanly(text in yamlish()) {
        load(&text)?;
    }

    #[test]
    fn model_shaped_trees_load_or_fail_cleanly(tree in model_tree()) {
        let mut tree = tree;
        if let Value::Object(m) = &mut tree {
            m.entry("id").or_insert(json!("m"));
        }
        load(&tree.to_string())?;
    }

    #[test]
    fn substitution_never_panics(template in "[${} a-z0-9+*'\"`();\\\\.]{0,40}") {
        let e = engine();
        let scope = ScriptScope::from_vars(json!({"a": 1, "b": "x"}).as_object().cloned().unwrap_or_default());
        let started = Instant::now();
        if let Err(err) = substitute::vars(&e, &json!({"x": template, "y": [template.clone()]}), &scope) {
            structured(&err)?;
        }
        if let Err(err) = e.eval(ScriptKind::Expression, &template, scope) {
            structured(&err)?;
        }
        prop_assert!(started.elapsed() < CASE_BOUND, "unbounded: {:?}", started.elapsed());
    }

    #[test]
    fn values_cross_the_bridge_unchanged(v in js_value()) {
        let e = engine();
        let mut vars = Vars::new();
        vars.insert("v".into(), v.clone());
        let out = e.eval(ScriptKind::Expression, "v", ScriptScope::from_vars(vars));
        prop_assert_eq!(out.map(|o| o.value), Ok(v));
    }
}

fn eval(e: &ScriptEngine, src: &str) -> Result<Value, ScriptError> {
    e.eval(ScriptKind::Code, src, ScriptScope::default())
        .map(|o| o.value)
}

/// Each attack ends in an error, within its limit, and the engine answers
/// the next script.
#[test]
fn scripts_under_attack_are_stopped_by_their_limits() {
    let e = engine();
    let attacks = [
        ("an endless loop", "while (true) {}"),
        (
            "an allocation bomb",
            "let a = []; while (true) { a.push('x'.repeat(4096)); }",
        ),
        (
            "deep recursion",
            "function f(n) { return f(n + 1) + 1; } return f(0);",
        ),
        ("a 100 MB string", "return 'x'.repeat(100 * 1024 * 1024);"),
        ("a cyclic object", "const a = {}; a.self = a; return a;"),
        (
            "require",
            "return require('fs').readFileSync('/etc/passwd', 'utf8');",
        ),
        ("process", "return process.env;"),
        ("an import", "return import('fs');"),
        (
            "a Function constructor escape",
            "return Function('return this')().process.exit(1);",
        ),
    ];
    for (what, src) in attacks {
        let started = Instant::now();
        let r = eval(&e, src);
        assert!(r.is_err(), "{what}: expected an error, got {r:?}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{what}: stopped only after {:?}",
            started.elapsed()
        );
        assert_eq!(eval(&e, "return 40 + 2;"), Ok(json!(42)), "after {what}");
    }
    // The limits name themselves.
    match eval(&e, "while (true) {}") {
        Err(ScriptError::Timeout { limit, .. }) => assert_eq!(limit, Duration::from_millis(200)),
        other => panic!("expected the time limit, got {other:?}"),
    }
    assert!(matches!(
        eval(&e, "return 'x'.repeat(100 * 1024 * 1024);"),
        Err(ScriptError::OutOfMemory { .. })
    ));
}

/// A value nested deeper than data may be (an embedder can build one; no
/// JSON or YAML reader lets one in), handed to a script, is refused with
/// an error before a recursive serialization could overflow the stack.
#[test]
fn a_deeply_nested_value_is_refused_before_it_crosses() {
    let e = engine();
    let mut v = json!(1);
    for _ in 0..1_000 {
        v = json!([v]);
    }
    let mut vars = Vars::new();
    vars.insert("deep".into(), v);
    let r = e.eval(
        ScriptKind::Expression,
        "typeof deep",
        ScriptScope::from_vars(vars),
    );
    match r {
        Err(ScriptError::Exception { message, .. }) => {
            assert!(message.contains("nested more than 128 levels"), "{message}")
        }
        other => panic!("expected the depth error, got {other:?}"),
    }
    assert_eq!(eval(&e, "return 1;"), Ok(json!(1)));
}

/// A script that builds a value deeper than data may be gets an error,
/// for its result and for what it writes, never a silent null (found by
/// the fuzzer: such a result became `null`).
#[test]
fn a_deeply_nested_script_value_is_an_error_not_a_null() {
    let e = engine();
    let deep = "let a = 1; for (let i = 0; i < 500; i++) { a = [a]; }";
    for (what, tail) in [
        ("a result", "return a;"),
        ("a write", "$set('x', a); return 1;"),
    ] {
        let r = eval(&e, &format!("{deep} {tail}"));
        assert!(r.is_err(), "{what}: expected an error, got {r:?}");
    }
    // Within the limit it crosses.
    let r = eval(
        &e,
        "let a = 1; for (let i = 0; i < 100; i++) { a = [a]; } return a;",
    );
    assert!(matches!(r, Ok(Value::Array(_))), "{r:?}");
}
