//! What a script's result may be, as in the reference (acts 0.25 spec,
//! "JS → JSON conversion"): a number that is not finite (`0 / 0`, `1 / 0`)
//! is a conversion error — a code step fails its act (JSON has no such
//! number, and a silent `null` would hide the bug), and so does every
//! helper that writes one (`$set`, `$set_process_var`, `$env`, a step
//! global), as in the reference; a substituted param
//! becomes `null` as any failing substitution does in the reference — while
//! a real `null` stays `null`; and a global named by a step id reads and
//! writes that step's latest task (spec §1.8). Runs on every backend
//! (`scripts/test.sh`'s engine suites).

use crate::common;

use common::*;

use serde_json::json;

#[tokio::test]
async fn a_code_result_that_is_not_a_finite_number_fails_the_act() {
    let (engine, end) = run_to_end(
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

/// Every helper that writes a variable from a script refuses a number
/// that is not finite: the act fails naming the number and where it was,
/// and nothing is written (the reference: "non-finite numbers have no JSON
/// representation").
#[tokio::test]
async fn a_helper_that_writes_a_number_that_is_not_finite_fails_the_act() {
    for (n, script, at) in [
        (1, "$set_process_var('bad', 0 / 0)", "NaN"),
        (2, "$set('bad', { deep: [1, 1 / 0] })", "Infinity"),
        (3, "$env.bad = -1 / 0", "-Infinity"),
        (
            4,
            "$set_process_var('fine', 1); $set('bad', { ratio: 0 / 0 })",
            "ratio",
        ),
    ] {
        let model = format!(
            "id: w{n}\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.transform.code\n    params: \"{script}\"\n"
        );
        let (engine, end) = run_to_end(&model, &format!("w{n}")).await;
        assert_eq!(end.state, "error", "{script}: {end:?}");
        let err = end.err.clone().expect("an error");
        assert!(
            err.message.contains("not finite") && err.message.contains(at),
            "{script}: {}",
            err.message
        );
        assert!(
            !end.outputs.contains_key("bad"),
            "{script}: {:?}",
            end.outputs
        );
        engine.close().await;
    }
    // A step global written from a later step: the same.
    let (engine, end) = run_to_end(
        "id: g\nver: '1'\nsteps:\n  - id: first\n    uses: acts.transform.set\n    params: { a: 1 }\n  - id: second\n    uses: acts.transform.code\n    params: 'second.note = 0 / 0'\n",
        "g",
    )
    .await;
    assert_eq!(end.state, "error", "{end:?}");
    assert!(
        end.err
            .clone()
            .expect("an error")
            .message
            .contains("not finite"),
        "{end:?}"
    );
    engine.close().await;
    // Null itself is fine, and an object with a null in it.
    let (engine, end) = run_to_end(
        "id: nl\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.transform.code\n    params: \"$set_process_var('none', null); $set_process_var('obj', { a: null, b: 2 })\"\n",
        "nl",
    )
    .await;
    assert_eq!(end.state, "completed", "{end:?}");
    assert_eq!(end.outputs.get("obj"), Some(&json!({"a": null, "b": 2})));
    engine.close().await;
}

/// A `}}` inside a string (or an object literal) of an expression does not
/// end it — `${{ 'x}}y' }}` is one expression, as in the reference — while
/// two expressions in one string stay two (where the reference's greedy
/// match was wrong).
#[tokio::test]
async fn a_close_inside_a_string_does_not_end_an_expression_and_two_stay_two() {
    let (engine, end) = run_to_end(
        "id: cl\nver: '1'\nvars:\n  - { name: a, value: 1 }\n  - { name: b, value: 2 }\nsteps:\n  - id: s1\n    uses: acts.transform.set\n    params:\n      text: \"${{ 'x}}y' }}\"\n      both: '${{ a }}-${{ b }}'\n      obj: '${{ ({k: {v: 3}}).k.v }}'\n      tpl: '${{ `<${a}}>` }} and ${{ \"}}\" }}'\n",
        "cl",
    )
    .await;
    assert_eq!(end.state, "completed", "{end:?}");
    assert_eq!(end.outputs.get("text"), Some(&json!("x}}y")));
    assert_eq!(end.outputs.get("both"), Some(&json!("1-2")));
    assert_eq!(end.outputs.get("obj"), Some(&json!(3)));
    assert_eq!(end.outputs.get("tpl"), Some(&json!("<1}> and }}")));
    engine.close().await;
}

/// In a substituted param a failing expression is `null` (the reference's
/// rule for substitution, spec §1.7.3: warned, not failed) — a non-finite
/// result is such a failure, not a number; a real `null` stays `null`.
#[tokio::test]
async fn a_substituted_infinite_value_is_the_reference_null_and_a_real_null_stays() {
    let (engine, end) = run_to_end(
        "id: inf\nver: '1'\nvars:\n  - { name: n, value: 0 }\nsteps:\n  - id: s1\n    uses: acts.transform.set\n    params: { big: '${{ 1 / n }}', fine: '${{ 2 / 4 }}' }\n",
        "inf",
    )
    .await;
    assert_eq!(end.state, "completed", "{end:?}");
    assert_eq!(end.outputs.get("big"), Some(&json!(null)));
    assert_eq!(end.outputs.get("fine"), Some(&json!(0.5)));
    engine.close().await;
    let (engine, end) = run_to_end(
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

/// A global named by a step's id reads and writes the latest task of that
/// step (the reference's §1.8): `first.a` is what `first` sees, an absent
/// key is `null`, `first.data()` / `first.inputs()` its own data, a step id
/// that is not an identifier is `globalThis['my-step']`, and
/// `second.note = v` (a running step) is a fold-up write on it.
#[tokio::test]
async fn a_global_named_by_a_step_id_reads_and_writes_that_step() {
    let (engine, end) = run_to_end(
        r#"
id: steps
ver: '1'
steps:
  - id: first
    uses: acts.transform.code
    params: "return { a: 1, b: 'two' }"
  - id: my-step
    uses: acts.transform.code
    params: "return { c: 3 }"
  - id: second
    uses: acts.transform.code
    params: "second.note = 'written'; const d = first.data(); const i = first.inputs(); return { read: first.a, missing: first.missing, data_a: d.a, data_b: d.b, inputs_a: i.a, dashed: globalThis['my-step'].c, note: second.note }"
"#,
        "steps",
    )
    .await;
    assert_eq!(end.state, "completed", "{end:?}");
    for (key, want) in [
        ("read", json!(1)),
        ("missing", json!(null)),
        ("data_a", json!(1)),
        ("data_b", json!("two")),
        ("inputs_a", json!(1)),
        ("dashed", json!(3)),
        ("note", json!("written")),
    ] {
        assert_eq!(
            end.outputs.get(key),
            Some(&want),
            "{key}: {:?}",
            end.outputs
        );
    }
    engine.close().await;
}

/// A step that has ended cannot be written through its global (the
/// reference's error), and a variable of the same name as a step wins
/// over the step's global.
#[tokio::test]
async fn an_ended_step_is_not_written_and_a_variable_wins_over_a_step_name() {
    let (engine, end) = run_to_end(
        r#"
id: ended
ver: '1'
steps:
  - id: first
    uses: acts.transform.code
    params: "return { a: 1 }"
  - id: second
    uses: acts.transform.code
    params: "first.a = 2; return {}"
"#,
        "ended",
    )
    .await;
    assert_eq!(end.state, "error", "{end:?}");
    let err = end.err.clone().expect("an error");
    assert!(
        err.message.contains("step 'first' has ended"),
        "{}",
        err.message
    );
    engine.close().await;
    let (engine, end) = run_to_end(
        r#"
id: shadow
ver: '1'
vars:
  - { name: first, value: 'a variable' }
steps:
  - id: first
    uses: acts.transform.code
    params: "return { a: 1 }"
  - id: second
    uses: acts.transform.code
    params: "return { kind: typeof first, value: String(first) }"
"#,
        "shadow",
    )
    .await;
    assert_eq!(end.state, "completed", "{end:?}");
    assert_eq!(end.outputs.get("kind"), Some(&json!("string")));
    assert_eq!(end.outputs.get("value"), Some(&json!("a variable")));
    engine.close().await;
}

/// Integers cross exactly, as in the reference: one beyond a JavaScript
/// number's exact range reaches the script as a `BigInt` (through the
/// variables, `$get` and a step's data alike) and comes back the same
/// integer; a `BigInt` a script makes becomes that JSON integer; a key
/// whose value is `undefined` is kept as `null`; a string that looks like
/// the engine's own marks stays a string.
#[tokio::test]
async fn big_integers_cross_exactly_and_undefined_keys_are_kept_as_null() {
    let model = r#"
id: big
ver: '1'
steps:
  - id: s1
    uses: acts.transform.code
    params: |
      $set_process_var('r', {
        same: big, t: typeof big, next: big + 1n, tsafe: typeof safe,
        max: max, neg: neg, got: $get('big'), made: 12345678901234567890n,
        gone: undefined, list: [undefined, 1], mark: '\u0000acts:n:5',
        text: '12345678901234567890'
      });
      return { fromResult: big * 2n, nothing: undefined };
  - id: s2
    uses: acts.transform.code
    params: "$set_process_var('again', $get('r').same === 9007199254740993n)"
"#;
    let big = json!({
        "big": 9_007_199_254_740_993u64,
        "max": u64::MAX,
        "neg": i64::MIN,
        "safe": 9_007_199_254_740_991u64
    });
    let (engine, end) = run_with_vars(model, "big", vars(big.clone())).await;
    assert_eq!(end.state, "completed", "{end:?}");
    let r = end.outputs.get("r").cloned().expect("r was set");
    assert_eq!(r["same"], json!(9_007_199_254_740_993u64), "{r}");
    assert_eq!(r["t"], json!("bigint"), "{r}");
    assert_eq!(r["next"], json!(9_007_199_254_740_994u64), "{r}");
    assert_eq!(r["tsafe"], json!("number"), "{r}");
    assert_eq!(r["max"], json!(u64::MAX), "{r}");
    assert_eq!(r["neg"], json!(i64::MIN), "{r}");
    assert_eq!(r["got"], json!(9_007_199_254_740_993u64), "{r}");
    assert_eq!(r["made"], json!(12_345_678_901_234_567_890u64), "{r}");
    assert_eq!(r.get("gone"), Some(&json!(null)), "{r}");
    assert_eq!(r["list"], json!([null, 1]), "{r}");
    assert_eq!(r["mark"], json!("\u{0}acts:n:5"), "{r}");
    assert_eq!(r["text"], json!("12345678901234567890"), "{r}");
    assert_eq!(end.outputs.get("again"), Some(&json!(true)), "{end:?}");
    engine.close().await;

    // A script's result: the same crossing.
    let (engine, end) = run_with_vars(
        "id: res\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.transform.code\n    params: 'return { doubled: big * 2n, nothing: undefined }'\n  - id: s2\n    uses: acts.transform.set\n    params: { doubled: '${{ s1.doubled }}', nothing: '${{ s1.nothing }}' }\n",
        "res",
        vars(big),
    )
    .await;
    assert_eq!(end.state, "completed", "{end:?}");
    assert_eq!(
        end.outputs.get("doubled"),
        Some(&json!(18_014_398_509_481_986u64)),
        "{end:?}"
    );
    engine.close().await;

    // Beyond 64 bits there is no JSON integer here: the act fails, saying so.
    for (n, script) in [
        (1, "return { huge: 2n ** 70n }"),
        (2, "$set_process_var('huge', -(2n ** 64n))"),
    ] {
        let (engine, end) = run_to_end(
            &format!(
                "id: huge{n}\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.transform.code\n    params: \"{script}\"\n"
            ),
            &format!("huge{n}"),
        )
        .await;
        assert_eq!(end.state, "error", "{script}: {end:?}");
        let err = end.err.clone().expect("an error");
        assert!(
            err.message.contains("outside the i64/u64 range"),
            "{script}: {}",
            err.message
        );
        engine.close().await;
    }
}
