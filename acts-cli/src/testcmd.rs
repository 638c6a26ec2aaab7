//! `acts test`: run models against the expectations in their test files.
//!
//! A test file sits beside its model (`NAME.yml` → `NAME.test.yml`, or
//! `.json`) and says how to run it and what must come out:
//!
//! ```yaml
//! vars: { amount: 5000 }               # start vars
//! deploy: [subflow-child.yml]          # models to deploy first (relative)
//! answers:                             # as an --answers file
//!   approve: { action: complete, vars: { ok: true } }
//!   # review: [{ action: cancel, refused: true }, { action: complete }]
//!   #   an answer the engine must refuse; the next one follows
//! serve:                              # canned HTTP answers (acts.core.http);
//!   - { path: /rates, body: { eur: 1.1 } }   # the model gets `serve_url`
//! expect:
//!   state: completed                   # or error, aborted, stalled, invalid, rejected ...
//!   outputs: { level: director }       # these keys, these values
//!   error: E_NO                        # the error code
//!   messages: [workflow/created, act/created, ...]   # or {type, key, state, name, uses}
//!   unordered: false                   # compare messages as a multiset
//! ```
//!
//! A Markdown document (`acts test docs/MODEL.md`) holds its examples in
//! fenced blocks: ```` ```yaml model=NAME ```` for a model and
//! ```` ```yaml test=NAME ```` for its test file (see [`crate::doctests`]).
//! A test without an expected `state` still fails when the model or its
//! start is refused.
//!
//! Each test runs on a fresh in-memory store with a virtual clock, so
//! timeouts fire without waiting. One PASS/FAIL line per test, with what
//! differed; then `N passed, M failed`. Exit 0 only if all pass.

use std::path::{Path, PathBuf};
use std::time::Instant;

use acts::{Clock, ManualClock, SystemClock, Vars};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::answers::AnswerFile;
use crate::driver::Mode;
use crate::failure::Failure;
use crate::report::Report;
use crate::session::{RunSpec, open_engine, run_model};

/// A test file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TestFile {
    #[serde(default)]
    vars: Vars,
    #[serde(default)]
    deploy: Vec<PathBuf>,
    #[serde(default)]
    answers: Option<Value>,
    /// Canned HTTP answers on a loopback server (`crate::mockserve`).
    #[serde(default)]
    serve: Vec<crate::mockserve::Route>,
    #[serde(default)]
    expect: Expect,
}

/// What must come out.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    outputs: Option<Vars>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    messages: Option<Vec<Value>>,
    #[serde(default)]
    unordered: bool,
}

const TEST_SUFFIXES: [&str; 3] = [".test.yml", ".test.yaml", ".test.json"];
const MODEL_SUFFIXES: [&str; 3] = [".yml", ".yaml", ".json"];

/// One test to run.
struct Case {
    model: PathBuf,
    test: PathBuf,
    /// How results name it.
    label: String,
    /// An example of a Markdown document (its files are scratch files).
    from_doc: bool,
}

/// The tests named by `paths`; examples of Markdown documents are written
/// into `scratch`.
fn discover(paths: &[PathBuf], scratch: &Path) -> Result<Vec<Case>, Failure> {
    let mut out = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        if p.is_file() && p.extension().is_some_and(|e| e == "md") {
            let dir = scratch.join(i.to_string());
            std::fs::create_dir_all(&dir)
                .map_err(|e| Failure::run(format!("cannot make '{}': {e}", dir.display())))?;
            for (model, test, label) in crate::doctests::write_examples(p, &dir)? {
                out.push(Case {
                    model,
                    test,
                    label,
                    from_doc: true,
                });
            }
            continue;
        }
        let mut pairs = Vec::new();
        discover_files(p, &mut pairs)?;
        out.extend(pairs.into_iter().map(|(model, test)| Case {
            label: test.display().to_string(),
            model,
            test,
            from_doc: false,
        }));
    }
    if out.is_empty() {
        return Err(Failure::input(
            "no tests found (a test is NAME.test.yml beside NAME.yml, or a Markdown document with ```yaml model=NAME blocks)",
        ));
    }
    Ok(out)
}

/// The (model, test file) pairs under `p` (a folder, a test or a model).
fn discover_files(p: &Path, out: &mut Vec<(PathBuf, PathBuf)>) -> Result<(), Failure> {
    {
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| Failure::input(format!("cannot read folder '{}': {e}", p.display())))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            entries.sort();
            for f in entries {
                if is_test(&f) {
                    out.push((model_of(&f)?, f));
                }
            }
        } else if is_test(p) {
            out.push((model_of(p)?, p.to_path_buf()));
        } else if p.is_file() {
            let test = test_of(p).ok_or_else(|| {
                Failure::input(format!(
                    "no test file beside '{}' (expected NAME.test.yml)",
                    p.display()
                ))
            })?;
            out.push((p.to_path_buf(), test));
        } else {
            return Err(Failure::input(format!("'{}' does not exist", p.display())));
        }
    }
    Ok(())
}

fn is_test(p: &Path) -> bool {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    TEST_SUFFIXES.iter().any(|s| name.ends_with(s))
}

fn model_of(test: &Path) -> Result<PathBuf, Failure> {
    let name = test
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = TEST_SUFFIXES
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(&name)
        .to_owned();
    MODEL_SUFFIXES
        .iter()
        .map(|s| test.with_file_name(format!("{stem}{s}")))
        .find(|m| m.is_file())
        .ok_or_else(|| {
            Failure::input(format!(
                "test '{}' has no model {stem}.yml beside it",
                test.display()
            ))
        })
}

fn test_of(model: &Path) -> Option<PathBuf> {
    let name = model.file_name()?.to_string_lossy().into_owned();
    let stem = MODEL_SUFFIXES
        .iter()
        .find_map(|s| name.strip_suffix(s))?
        .to_owned();
    TEST_SUFFIXES
        .iter()
        .map(|s| model.with_file_name(format!("{stem}{s}")))
        .find(|t| t.is_file())
}

/// A message as `type/state`, or an object whose given fields must match.
fn message_matches(expected: &Value, got: &Value) -> bool {
    match expected {
        Value::String(s) => {
            let short = format!(
                "{}/{}",
                got["type"].as_str().unwrap_or_default(),
                got["state"].as_str().unwrap_or_default()
            );
            *s == short
        }
        Value::Object(fields) => fields.iter().all(|(k, v)| got.get(k) == Some(v)),
        _ => false,
    }
}

fn short(m: &Value) -> String {
    let key = m["key"]
        .as_str()
        .map(|k| format!(" [{k}]"))
        .unwrap_or_default();
    format!(
        "{}/{}{key}",
        m["type"].as_str().unwrap_or_default(),
        m["state"].as_str().unwrap_or_default()
    )
}

/// What differs between `report` and `expect`.
fn compare(expect: &Expect, report: &Report) -> Vec<String> {
    let mut diffs = Vec::new();
    match &expect.state {
        Some(s) if *s != report.state => {
            // why it ended otherwise, when it says
            let why = report
                .error
                .as_ref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default();
            diffs.push(format!("state: expected {s}, got {}{why}", report.state));
        }
        // Without an expected state, a refused model or start still fails.
        None if report.exit_code() == 2 => diffs.push(format!(
            "the run was refused ({}): {}",
            report.state,
            report
                .error
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default()
        )),
        _ => {}
    }
    // An answer the engine refused must say so (`refused: true`), and an
    // answer that says so must be refused.
    for r in report.refused.iter().filter(|r| !r.expected) {
        diffs.push(format!(
            "answers: '{}' to act '{}' was refused: {} (write `refused: true` on the answer if \
             that is expected)",
            r.action, r.act, r.message
        ));
    }
    diffs.extend(
        report
            .taken_but_expected_refused
            .iter()
            .map(|t| format!("answers: {t}")),
    );
    if let Some(outputs) = &expect.outputs {
        for (k, v) in outputs {
            match report.outputs.get(k) {
                Some(got) if got == v => {}
                Some(got) => diffs.push(format!("outputs.{k}: expected {v}, got {got}")),
                None => diffs.push(format!("outputs.{k}: expected {v}, missing")),
            }
        }
    }
    if let Some(e) = &expect.error {
        let matches = report
            .error
            .as_ref()
            .is_some_and(|got| got.ecode == *e || got.message.contains(e.as_str()));
        if !matches {
            let got = report.error.as_ref().map(ToString::to_string);
            diffs.push(format!(
                "error: expected {e}, got {}",
                got.as_deref().unwrap_or("none")
            ));
        }
    }
    if let Some(expected) = &expect.messages {
        let got = &report.messages;
        if expect.unordered {
            let mut left: Vec<&Value> = got.iter().collect();
            for e in expected {
                match left.iter().position(|g| message_matches(e, g)) {
                    Some(i) => {
                        left.remove(i);
                    }
                    None => diffs.push(format!("messages: expected {e} not received")),
                }
            }
            for g in left {
                diffs.push(format!("messages: unexpected {}", short(g)));
            }
        } else {
            for (i, e) in expected.iter().enumerate() {
                match got.get(i) {
                    Some(g) if message_matches(e, g) => {}
                    Some(g) => diffs.push(format!("messages[{i}]: expected {e}, got {}", short(g))),
                    None => diffs.push(format!("messages[{i}]: expected {e}, got nothing")),
                }
            }
            for (i, g) in got.iter().enumerate().skip(expected.len()) {
                diffs.push(format!("messages[{i}]: unexpected {}", short(g)));
            }
        }
    }
    diffs
}

async fn run_one(
    model: &Path,
    test: &Path,
    packages: &acts_packages::PackagesConfig,
) -> Result<Vec<String>, Failure> {
    let text = std::fs::read_to_string(test)
        .map_err(|e| Failure::input(format!("cannot read test '{}': {e}", test.display())))?;
    // Test files are YAML (JSON is YAML too).
    let spec: TestFile = serde_norway::from_str(&text)
        .map_err(|e| Failure::input(format!("test '{}': {e}", test.display())))?;
    let mode = match spec.answers {
        Some(a) => Mode::Script(
            AnswerFile::from_value(a)
                .map_err(|e| Failure::input(format!("test '{}': answers: {e}", test.display())))?,
        ),
        None => Mode::Auto,
    };
    let base = test.parent().unwrap_or(Path::new("."));
    let deploy: Vec<PathBuf> = spec.deploy.iter().map(|d| base.join(d)).collect();
    let clock = ManualClock::new(SystemClock.now_millis());
    let mut vars = spec.vars.clone();
    let mut packages = packages.clone();
    let server = if spec.serve.is_empty() {
        None
    } else {
        let server = crate::mockserve::start(spec.serve.clone())
            .await
            .map_err(|e| Failure::input(format!("test '{}': {e}", test.display())))?;
        vars.insert("serve_url".into(), Value::String(server.url.clone()));
        // that one loopback address, not every private one
        packages
            .http
            .allowed_private_networks
            .push("127.0.0.1/32".into());
        Some(server)
    };
    let engine = open_engine("memory:", Some(clock.clone()), &packages).await?;
    let run = RunSpec {
        model,
        deploy: &deploy,
        vars,
        json: true,
        strict: false,
    };
    let report = run_model(&engine, &run, mode, Some(clock)).await;
    engine.close().await;
    drop(server);
    Ok(compare(&spec.expect, &report?))
}

/// Runs the tests under `paths`; prints results; returns the exit code.
pub async fn run(
    paths: &[PathBuf],
    json: bool,
    packages: &acts_packages::PackagesConfig,
) -> Result<u8, Failure> {
    let scratch = tempfile::tempdir()
        .map_err(|e| Failure::run(format!("cannot make a temporary folder: {e}")))?;
    let tests = discover(paths, scratch.path())?;
    let (mut passed, mut failed) = (0, 0);
    for Case {
        model,
        test,
        label,
        from_doc,
    } in tests
    {
        let started = Instant::now();
        let diffs = match run_one(&model, &test, packages).await {
            Ok(d) => d,
            Err(f) => vec![f.message],
        };
        // Name a document's example by its place, not the scratch file.
        let scratch_dir = model.parent().map(|d| d.display().to_string());
        let diffs: Vec<String> = match scratch_dir.filter(|_| from_doc) {
            Some(d) => diffs
                .into_iter()
                .map(|x| x.replace(&d, "example"))
                .collect(),
            None => diffs,
        };
        let ms = started.elapsed().as_millis();
        let ok = diffs.is_empty();
        if ok {
            passed += 1;
        } else {
            failed += 1;
        }
        if json {
            println!(
                "{}",
                json!({"test": label, "model": if from_doc { label.clone() } else { model.display().to_string() }, "pass": ok, "diffs": diffs, "ms": ms})
            );
        } else {
            println!("{} {label} ({ms} ms)", if ok { "PASS" } else { "FAIL" });
            for d in &diffs {
                println!("    {d}");
            }
        }
    }
    if json {
        println!("{}", json!({"passed": passed, "failed": failed}));
    } else {
        println!("{passed} passed, {failed} failed");
    }
    Ok(u8::from(failed > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A test file of any text is read or refused, never a panic.
        #[test]
        fn any_test_file_text_reads_or_fails_cleanly(text in "\\PC{0,300}") {
            let _ = serde_norway::from_str::<TestFile>(&text);
        }

        /// YAML-shaped test files.
        #[test]
        fn yaml_shaped_test_files_read_or_fail_cleanly(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just("vars: "),
                    proptest::strategy::Just("answers:\n"),
                    proptest::strategy::Just("expect:\n"),
                    proptest::strategy::Just("  state: "),
                    proptest::strategy::Just("  outputs: {"),
                    proptest::strategy::Just("  messages:\n"),
                    proptest::strategy::Just("    - "),
                    proptest::strategy::Just("{ action: complete }"),
                    proptest::strategy::Just("}"),
                    proptest::strategy::Just("["),
                    proptest::strategy::Just("]"),
                    proptest::strategy::Just("\n"),
                    proptest::strategy::Just("&a "),
                    proptest::strategy::Just("*a"),
                ],
                0..30,
            )
        ) {
            let _ = serde_norway::from_str::<TestFile>(&parts.concat());
        }
    }
}
