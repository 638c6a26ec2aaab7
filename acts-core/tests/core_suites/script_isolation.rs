//! One evaluation can never see or change what another sees: every
//! evaluation starts from a pristine global environment, the engine's
//! plumbing is out of reach, and a promise result is settled (or fails)
//! before the evaluation ends.
//!
//! Each test runs a "spy" script and then a "victim" script on one engine
//! whose pool holds a single runtime, so both run on the same QuickJS
//! runtime — the case where leaks would show.

use std::time::Duration;

use acts_core::model::Vars;
use acts_core::script::{
    ScriptEngine, ScriptError, ScriptKind, ScriptLimits, ScriptScope, substitute,
};
use serde_json::{Value, json};

fn scope(v: Value) -> ScriptScope {
    ScriptScope::from_vars(v.as_object().cloned().unwrap_or_default())
}

fn expr(e: &ScriptEngine, src: &str, s: ScriptScope) -> Result<Value, ScriptError> {
    e.eval(ScriptKind::Expression, src, s).map(|o| o.value)
}

fn code(e: &ScriptEngine, src: &str, s: ScriptScope) -> Result<Value, ScriptError> {
    e.eval(ScriptKind::Code, src, s).map(|o| o.value)
}

/// An engine whose evaluations all share one runtime (evaluated one after
/// another from one thread, the pool hands the same runtime back).
fn one_runtime() -> ScriptEngine {
    let e = ScriptEngine::default();
    e.warm(1);
    e
}

/// The evaluations of `e` all ran on the one runtime `one_runtime` built:
/// what they were kept apart from was really there.
fn shared_one_runtime(e: &ScriptEngine) {
    assert_eq!(
        e.stats().runtimes,
        1,
        "every evaluation ran on the same runtime (no runtime was built per script)"
    );
}

#[test]
fn a_setter_on_global_this_neither_sees_nor_changes_the_next_evaluation() {
    let e = one_runtime();
    let spy = r#"
      Object.defineProperty(globalThis, 'amount', {
        configurable: false,
        get() { return 1; },
        set(v) { globalThis.stolen = (globalThis.stolen || []).concat([v]); },
      });
      true
    "#;
    assert_eq!(expr(&e, spy, ScriptScope::default()), Ok(json!(true)));
    // The victim's condition is evaluated on its own data.
    assert_eq!(
        expr(&e, "amount < 1000", scope(json!({"amount": 5000}))),
        Ok(json!(false))
    );
    assert_eq!(
        expr(&e, "typeof stolen", ScriptScope::default()),
        Ok(json!("undefined")),
        "the spy's global is gone, and it never saw the victim's amount"
    );
    shared_one_runtime(&e);
}

#[test]
fn prototype_changes_and_sloppy_globals_do_not_leak() {
    let e = one_runtime();
    let spy = r#"
      Object.prototype.injected = 'x';
      Array.prototype.map = function () { return ['hijacked']; };
      JSON.stringify = function () { return '{"hijacked":true}'; };
      leaked = 42;
      return 1;
    "#;
    assert_eq!(code(&e, spy, ScriptScope::default()), Ok(json!(1)));
    assert_eq!(
        code(
            &e,
            "return { inj: ({}).injected === undefined, map: [1, 2].map((x) => x * 2), leaked: typeof leaked }",
            ScriptScope::default()
        ),
        Ok(json!({"inj": true, "map": [2, 4], "leaked": "undefined"}))
    );
    shared_one_runtime(&e);
}

#[test]
fn the_engine_plumbing_is_out_of_reach_and_replaced_helpers_do_not_survive() {
    let e = one_runtime();
    assert_eq!(
        expr(
            &e,
            "[typeof __acts_get, typeof __acts_set, typeof __acts_cache, typeof __acts_eval, typeof __acts_freeze, typeof eval]",
            ScriptScope::default()
        ),
        Ok(json!([
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined"
        ]))
    );
    // A spy tries to replace the helpers to record what others read: the
    // helpers are read-only, in its own evaluation too.
    let spy = r#"
      const real = $get;
      globalThis.$get = (n) => { globalThis.seen = n; return 'forged'; };
      globalThis.$set = () => {};
      let redefined = true;
      try { Object.defineProperty(globalThis, '$get', { value: () => 'forged' }); } catch (_) { redefined = false; }
      return [$get('a'), $get === real, redefined];
    "#;
    assert_eq!(
        code(&e, spy, scope(json!({"a": 7}))),
        Ok(json!([7, true, false]))
    );
    let out = e
        .eval(
            ScriptKind::Code,
            "$set('b', $get('a') + 1); return [$get('a'), typeof seen]",
            scope(json!({"a": 1})),
        )
        .expect("the victim runs");
    assert_eq!(out.value, json!([1, "undefined"]));
    assert_eq!(
        out.effects,
        vec![acts_core::script::ScriptEffect::Set {
            name: "b".into(),
            value: json!(2)
        }],
        "the victim's own writes, and only those"
    );
    shared_one_runtime(&e);
}

#[test]
fn sealed_data_stays_frozen_for_the_script() {
    let e = one_runtime();
    let mut v = Vars::new();
    v.insert("$cfg".into(), json!({"limit": 10}));
    let out = code(
        &e,
        "try { $cfg.limit = 99 } catch (_) {} return $cfg.limit",
        ScriptScope::from_vars(v),
    );
    assert_eq!(out, Ok(json!(10)));
    shared_one_runtime(&e);
}

#[test]
fn a_rejected_promise_is_an_error_naming_the_reason() {
    let e = one_runtime();
    let r = code(
        &e,
        "return Promise.reject(new Error('no funds'))",
        ScriptScope::default(),
    );
    assert!(
        matches!(&r, Err(ScriptError::Rejected { message, .. }) if message.contains("no funds")),
        "{r:?}"
    );
    let r = code(
        &e,
        "return (async () => { throw new Error('async boom') })()",
        ScriptScope::default(),
    );
    assert!(
        matches!(&r, Err(ScriptError::Rejected { message, .. }) if message.contains("async boom")),
        "{r:?}"
    );
    assert!(r.unwrap_err().to_string().contains("rejected"));
}

#[test]
fn a_promise_that_never_settles_is_an_error_not_a_completion() {
    let e = one_runtime();
    let r = code(&e, "return new Promise(() => {})", ScriptScope::default());
    assert!(matches!(r, Err(ScriptError::Unsettled { .. })), "{r:?}");
    // The engine goes on: the next evaluation is unaffected.
    assert_eq!(expr(&e, "1 + 1", ScriptScope::default()), Ok(json!(2)));
}

#[test]
fn a_settled_promise_gives_its_value() {
    let e = one_runtime();
    assert_eq!(
        code(
            &e,
            "return (async () => { const x = await Promise.resolve(20); return { b: x + 1 } })()",
            ScriptScope::default()
        ),
        Ok(json!({"b": 21}))
    );
}

#[test]
fn an_endless_microtask_chain_is_stopped_by_the_time_limit() {
    let e = ScriptEngine::new({
        let mut v = ScriptLimits::default();
        v.time = Duration::from_millis(100);
        v
    });
    let r = code(
        &e,
        "return new Promise(() => { const spin = () => Promise.resolve().then(spin); spin(); })",
        ScriptScope::default(),
    );
    assert!(matches!(r, Err(ScriptError::Timeout { .. })), "{r:?}");
}

#[test]
fn a_limit_hit_inside_substitution_is_an_error_but_an_undefined_name_is_null() {
    let e = ScriptEngine::new({
        let mut v = ScriptLimits::default();
        v.time = Duration::from_millis(100);
        v
    });
    let r = substitute::params(
        &e,
        &json!({"x": "${{ (() => { while (true) {} })() }}"}),
        &ScriptScope::default(),
    );
    assert!(matches!(r, Err(ScriptError::Timeout { .. })), "{r:?}");
    let r = substitute::vars(
        &e,
        &json!({"y": "${{ Promise.reject(new Error('late')) }}"}),
        &ScriptScope::default(),
    );
    assert!(matches!(r, Err(ScriptError::Rejected { .. })), "{r:?}");
    let r = substitute::params(&e, &json!({"z": "${{ nope.x }}"}), &ScriptScope::default());
    assert_eq!(r, Ok(json!({"z": null})));
}

#[test]
fn intrinsics_without_a_global_name_are_frozen_too() {
    let e = one_runtime();
    // A spy tries to plant a value on every intrinsic it can reach without
    // a global name, and to wrap the functions scripts use.
    let spy = r#"
      const targets = [
        Object.getPrototypeOf(function* () {}),
        Object.getPrototypeOf(async function () {}),
        Object.getPrototypeOf(async function* () {}),
        // (a generator object's own prototype is its function's, made
        // fresh with it; the one above that is shared)
        Object.getPrototypeOf(Object.getPrototypeOf((function* () {})())),
        Object.getPrototypeOf(Object.getPrototypeOf((async function* () {})())),
        Object.getPrototypeOf([][Symbol.iterator]()),
        Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]())),
        Object.getPrototypeOf(new Map()[Symbol.iterator]()),
        Object.getPrototypeOf(new Set()[Symbol.iterator]()),
        Object.getPrototypeOf(''[Symbol.iterator]()),
        Object.getPrototypeOf(/a/[Symbol.matchAll]('a')),
        Object.getPrototypeOf(Int8Array),
        Function.prototype, Error.prototype, Promise.prototype, console, JSON, Math,
      ];
      for (const t of targets) { try { t.planted = 'x'; } catch (_) {} }
      try { Promise.prototype.then = () => 'hijacked'; } catch (_) {}
      return targets.every((t) => Object.isFrozen(t));
    "#;
    assert_eq!(code(&e, spy, ScriptScope::default()), Ok(json!(true)));
    let victim = r#"
      const gen = Object.getPrototypeOf(function* () {});
      return [gen.planted, Function.prototype.planted, Math.planted, typeof Promise.prototype.then];
    "#;
    assert_eq!(
        code(&e, victim, ScriptScope::default()),
        Ok(json!([null, null, null, "function"]))
    );
    shared_one_runtime(&e);
}

#[test]
fn what_a_script_does_to_the_global_object_ends_with_it() {
    let e = one_runtime();
    let spies = [
        "Object.setPrototypeOf(globalThis, { leak: 1 }); return 1",
        "Object.preventExtensions(globalThis); return 1",
        "globalThis[Symbol.for('leak')] = 1; globalThis.leak = 1; return 1",
        "Object.defineProperty(globalThis, 'leak', { value: 1, enumerable: false, configurable: false }); return 1",
        "(function () {}).constructor('leak = 1')(); return 1",
        "arguments.callee.leak = 1; return 1",
    ];
    for spy in spies {
        assert_eq!(code(&e, spy, ScriptScope::default()), Ok(json!(1)), "{spy}");
        // The next evaluation, on the same runtime, sees none of it, and
        // can still make its own (sloppy-mode) globals.
        assert_eq!(
            code(
                &e,
                "own = 2; return [typeof leak, globalThis[Symbol.for('leak')] === undefined, own, arguments.callee.leak === undefined]",
                ScriptScope::default()
            ),
            Ok(json!(["undefined", true, 2, true])),
            "after {spy}"
        );
    }
    shared_one_runtime(&e);
}

#[test]
fn variables_shadow_globals_and_statement_lists_still_run() {
    let e = one_runtime();
    // A variable named like a global is the variable, for that script only.
    assert_eq!(
        expr(&e, "Math + os", scope(json!({"Math": 1, "os": 2}))),
        Ok(json!(3))
    );
    assert_eq!(
        expr(&e, "typeof Math.max", ScriptScope::default()),
        Ok(json!("function"))
    );
    // Writing a variable changes only this evaluation's copy.
    assert_eq!(
        code(&e, "a = a + 1; return a", scope(json!({"a": 1}))),
        Ok(json!(2))
    );
    // A statement list's completion value, with declarations kept local.
    assert_eq!(
        expr(
            &e,
            "var v = 2; let w = 3; v * w * a",
            scope(json!({"a": 2}))
        ),
        Ok(json!(12))
    );
    assert_eq!(
        expr(&e, "typeof v", ScriptScope::default()),
        Ok(json!("undefined"))
    );
    // An undefined name is still an error, as in the reference.
    assert!(expr(&e, "aproved == true", scope(json!({"approved": true}))).is_err());
    shared_one_runtime(&e);
}

#[test]
fn a_script_compiled_once_runs_each_time_on_its_own_variables_and_keeps_nothing() {
    let e = one_runtime();
    // The same texts again and again (each compiled once per realm): every
    // run sees its own variables, and what one run writes is gone.
    for i in 0..5 {
        assert_eq!(
            code(
                &e,
                "if (typeof kept !== 'undefined') return 'leaked'; kept = a; return { b: a + 10 }",
                scope(json!({ "a": i }))
            ),
            Ok(json!({ "b": i + 10 }))
        );
        assert_eq!(
            expr(&e, "a * 2", scope(json!({ "a": i }))),
            Ok(json!(i * 2))
        );
    }
    // The compiled function cannot be reached to hang state on it: an
    // expression has no `arguments` of its own, and code's `arguments`
    // belong to a fresh inner function each time.
    assert!(expr(&e, "arguments.callee.leak = a", scope(json!({ "a": 1 }))).is_err());
    assert_eq!(
        code(
            &e,
            "const f = arguments.callee; const had = f.leak; f.leak = a; return had ?? null",
            scope(json!({ "a": 1 }))
        ),
        Ok(json!(null))
    );
    assert_eq!(
        code(
            &e,
            "const f = arguments.callee; const had = f.leak; f.leak = a; return had ?? null",
            scope(json!({ "a": 2 }))
        ),
        Ok(json!(null)),
        "the second run of the same text did not see the first's"
    );
    // `Function.prototype.caller` never yields the compiled function.
    assert_eq!(
        code(
            &e,
            "try { return (function inner() { return inner.caller; })() ?? null } catch (err) { return 'thrown' }",
            ScriptScope::default()
        )
        .map(|v| v == json!(null) || v == json!("thrown")),
        Ok(true)
    );
    shared_one_runtime(&e);
}

#[test]
fn more_scripts_than_a_realm_keeps_still_run_and_a_statement_list_runs_each_time() {
    let e = one_runtime();
    // More distinct texts than the realm keeps compiled: each still runs.
    for i in 0..600 {
        assert_eq!(
            expr(&e, &format!("a + {i}"), scope(json!({ "a": 1 }))),
            Ok(json!(1 + i))
        );
    }
    // A text too long to keep is compiled for each evaluation.
    let long = format!("a{}", " + 1".repeat(2_000));
    for a in [1, 5] {
        assert_eq!(
            expr(&e, &long, scope(json!({ "a": a }))),
            Ok(json!(a + 2_000))
        );
    }
    // A statement list (run in a fresh context) remembered as such: it
    // runs again with new variables, and a syntax error stays an error.
    for i in 0..3 {
        assert_eq!(
            expr(&e, "let x = 2; x * a", scope(json!({ "a": i }))),
            Ok(json!(2 * i))
        );
        let err = expr(&e, "a +", scope(json!({ "a": i })));
        assert!(
            matches!(&err, Err(ScriptError::Exception { message, .. }) if message.contains("unexpected token")),
            "{err:?}"
        );
    }
    shared_one_runtime(&e);
}
