//! Scripted runs (`acts run --answers`) and `acts test`: every answer
//! action, lists of answers, `target`, `ignore`, `delay_ms` against a
//! timeout on the virtual clock, the extra final states with their exit
//! codes, and `acts test` output.

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use serde_json::{Value, json};

const REVIEW: &str = r#"
id: review
ver: "1"
steps:
  - id: s1
    uses: acts.core.irq
    params: { key: submit }
  - id: s2
    uses: acts.core.irq
    params: { key: approve }
  - id: s3
    uses: acts.transform.set
    params: { done: true }
"#;

const SLOW: &str = r#"
id: slow
ver: "1"
steps:
  - id: s1
    uses: acts.core.irq
    params: { key: pay }
    timeouts:
      - id: give_up
        if: $cost_in("1h")
        uses: acts.core.action
        params: { action: abort }
"#;

struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Self {
        Dir(tempfile::tempdir().expect("temp dir"))
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.path().join(name);
        std::fs::write(&p, text).expect("write");
        p
    }
}

fn acts() -> Command {
    let mut c = Command::cargo_bin("acts").expect("the acts binary is built");
    c.args(["--store", "memory:"])
        .timeout(Duration::from_secs(60));
    c
}

/// Runs `model` with `answers` (JSON) and returns (exit code, report).
fn run(dir: &Dir, model: &Path, answers: Value) -> (i32, Value) {
    let a = dir.file("answers.json", &answers.to_string());
    let out = acts()
        .arg("run")
        .arg(model)
        .arg("--answers")
        .arg(&a)
        .arg("--json")
        .output()
        .expect("acts runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let report =
        serde_json::from_str(text.lines().last().unwrap_or_default()).unwrap_or_else(|e| {
            panic!(
                "no report ({e}): {text} / {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    (out.status.code().unwrap_or(-1), report)
}

fn shorts(r: &Value) -> Vec<String> {
    r["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            let key = m["key"]
                .as_str()
                .map(|k| format!("[{k}]"))
                .unwrap_or_default();
            format!(
                "{}/{}{key}",
                m["type"].as_str().unwrap_or(""),
                m["state"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn count(r: &Value, short: &str) -> usize {
    shorts(r).iter().filter(|s| *s == short).count()
}

#[test]
fn complete_submit_skip_remove_and_lists_of_answers() {
    let d = Dir::new();
    let m = d.file("review.yml", REVIEW);
    let (code, r) = run(
        &d,
        &m,
        json!({"submit": {"action": "submit"}, "approve": {"action": "skip"}}),
    );
    assert_eq!((code, r["state"].as_str()), (0, Some("completed")), "{r}");
    assert_eq!(count(&r, "act/submitted[submit]"), 1);
    assert_eq!(count(&r, "act/skipped[approve]"), 1);
    let (code, r) = run(&d, &m, json!({"approve": {"action": "remove"}}));
    assert_eq!(code, 0, "{r}");
    assert_eq!(count(&r, "act/removed[approve]"), 1);
    // back, then (the list's next answer) complete.
    let (code, r) = run(
        &d,
        &m,
        json!({"approve": [{"action": "back", "vars": {"to": "s1"}}, {"action": "complete", "vars": {"ok": true}}]}),
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(count(&r, "act/backed[approve]"), 1);
    assert_eq!(count(&r, "act/created[submit]"), 2, "s1 ran again");
    assert_eq!(r["outputs"]["ok"], true);
}

#[test]
fn cancel_with_a_target_undoes_the_next_step() {
    let d = Dir::new();
    let m = d.file("review.yml", REVIEW);
    let (code, r) = run(
        &d,
        &m,
        json!({"approve": [{"action": "cancel", "target": "submit"}, {"action": "complete"}]}),
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(count(&r, "act/cancelled[approve]"), 1, "{:?}", shorts(&r));
    assert_eq!(count(&r, "act/created[submit]"), 2);
    assert_eq!(count(&r, "act/created[approve]"), 2);
    let (code, r) = run(
        &d,
        &m,
        json!({"approve": {"action": "cancel", "target": "nobody"}}),
    );
    assert_eq!(code, 1, "an unknown target fails the run: {r}");
}

#[test]
fn abort_and_error_end_the_process_with_exit_1() {
    let d = Dir::new();
    let m = d.file("review.yml", REVIEW);
    let (code, r) = run(&d, &m, json!({"submit": {"action": "abort"}}));
    assert_eq!((code, r["state"].as_str()), (1, Some("aborted")));
    let (code, r) = run(
        &d,
        &m,
        json!({"approve": {"action": "error", "vars": {"ecode": "E_NO", "message": "rejected"}}}),
    );
    assert_eq!((code, r["state"].as_str()), (1, Some("error")));
    assert_eq!(r["error"]["ecode"], "E_NO", "{r}");
}

#[test]
fn set_vars_then_complete_are_applied_in_order_to_one_interrupt() {
    let d = Dir::new();
    let m = d.file("review.yml", REVIEW);
    let (code, r) = run(
        &d,
        &m,
        json!({"approve": [{"action": "set_vars", "vars": {"flag": 1}}, {"action": "complete", "vars": {"ok": true}}]}),
    );
    assert_eq!((code, r["state"].as_str()), (0, Some("completed")), "{r}");
    assert_eq!(r["outputs"]["flag"], 1);
    assert_eq!(r["outputs"]["ok"], true);
    // Announced, re-announced after set_vars, completed once.
    assert_eq!(count(&r, "act/created[approve]"), 2, "{:?}", shorts(&r));
    assert_eq!(count(&r, "act/completed[approve]"), 1);
    // A lone set_vars is followed by complete (the list is used up).
    let (code, r) = run(
        &d,
        &m,
        json!({"approve": {"action": "set_vars", "vars": {"flag": 2}}}),
    );
    assert_eq!((code, r["state"].as_str()), (0, Some("completed")), "{r}");
    assert_eq!(r["outputs"]["flag"], 2);
}

#[test]
fn a_pushed_act_is_waited_for_and_answered_from_the_answers_file() {
    let d = Dir::new();
    let m = d.file("review.yml", REVIEW);
    let (code, r) = run(
        &d,
        &m,
        json!({
            "approve": {"action": "push", "vars": {"uses": "acts.core.irq", "params": {"key": "second"}}},
            "second": {"action": "complete", "vars": {"second_ok": true}}
        }),
    );
    assert_eq!((code, r["state"].as_str()), (0, Some("completed")), "{r}");
    assert_eq!(r["outputs"]["second_ok"], true);
    let order = shorts(&r);
    let pos = |s: &str| order.iter().position(|x| x == s).unwrap_or(usize::MAX);
    assert!(
        pos("act/completed[second]") < pos("step/completed[s2]"),
        "s2 waits for the pushed act: {order:?}"
    );
    assert_eq!(count(&r, "act/completed[approve]"), 1, "{order:?}");
}

#[test]
fn ignore_leaves_the_interrupt_waiting_stalled() {
    let d = Dir::new();
    let m = d.file("review.yml", REVIEW);
    let (code, r) = run(&d, &m, json!({"submit": {"action": "ignore"}}));
    assert_eq!((code, r["state"].as_str()), (1, Some("stalled")));
    assert_eq!(r["error"]["ecode"], "");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("nothing"),
        "{r}"
    );
}

#[test]
fn the_json_report_has_exactly_its_documented_fields() {
    let d = Dir::new();
    let m = d.file("review.yml", REVIEW);
    let (code, r) = run(
        &d,
        &m,
        json!({"approve": {"action": "error", "vars": {"ecode": "E_NO", "message": "rejected"}}}),
    );
    assert_eq!(code, 1);
    let keys = |v: &Value| {
        let mut k: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(
        keys(&r),
        [
            "error", "messages", "model", "outputs", "pid", "refused", "state"
        ]
    );
    assert_eq!(r["refused"], json!([]), "{r}");
    assert_eq!(r["model"], "review");
    assert_eq!(r["error"], json!({"ecode": "E_NO", "message": "rejected"}));
    assert!(r["outputs"].get("pid").is_none(), "{r}");
    let messages = r["messages"].as_array().expect("messages");
    for m in messages {
        assert_eq!(
            keys(m),
            ["key", "name", "nid", "state", "tid", "time", "type", "uses"],
            "{m}"
        );
        assert!(m["time"].as_i64().is_some(), "{m}");
    }
    let first = &messages[0];
    assert_eq!(
        (&first["type"], &first["key"], &first["nid"], &first["uses"]),
        (
            &json!("workflow"),
            &json!("review"),
            &json!("review"),
            &json!("")
        )
    );
    let step = messages
        .iter()
        .find(|m| m["type"] == "step" && m["nid"] == "s2")
        .expect("step s2");
    assert_eq!(step["key"], "s2", "a step's key is its node id");
    let act = messages
        .iter()
        .find(|m| m["type"] == "act" && m["key"] == "approve")
        .expect("the approve act");
    assert_eq!(act["uses"], "acts.core.irq");
    // A completed run: error null.
    let (code, r) = run(&d, &m, json!({}));
    assert_eq!((code, &r["error"]), (0, &Value::Null), "{r}");
}

#[test]
fn progress_lines_show_the_virtual_clock() {
    let d = Dir::new();
    let m = d.file("slow.yml", SLOW);
    let a = d.file(
        "answers.json",
        &json!({"pay": {"action": "complete", "delay_ms": 7_200_000}}).to_string(),
    );
    let out = acts()
        .arg("run")
        .arg(&m)
        .arg("--answers")
        .arg(&a)
        .output()
        .expect("acts runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let abort = text
        .lines()
        .find(|l| l.contains("step created") && l.contains("give_up"))
        .unwrap_or_else(|| panic!("no timeout step line: {text}"));
    assert!(abort.trim_start().starts_with("1h "), "{abort}");
    assert!(
        text.contains("on the virtual clock"),
        "the summary says which clock: {text}"
    );
}

#[test]
fn delayed_answers_race_timeouts_on_the_virtual_clock() {
    let d = Dir::new();
    let m = d.file("slow.yml", SLOW);
    let started = std::time::Instant::now();
    // Two hours late: the one-hour timeout aborts first.
    let (code, r) = run(
        &d,
        &m,
        json!({"pay": {"action": "complete", "delay_ms": 7_200_000}}),
    );
    assert_eq!((code, r["state"].as_str()), (1, Some("aborted")), "{r}");
    // Half an hour: in time.
    let (code, r) = run(
        &d,
        &m,
        json!({"pay": {"action": "complete", "delay_ms": 1_800_000}}),
    );
    assert_eq!((code, r["state"].as_str()), (0, Some("completed")), "{r}");
    // Hang guard only: hours of engine time took no such wall time.
    assert!(started.elapsed() < Duration::from_secs(50));
}

#[test]
fn invalid_and_rejected_runs_report_and_exit_2() {
    let d = Dir::new();
    let bad = d.file(
        "bad.yml",
        "id: bad\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.core.nope\n",
    );
    let (code, r) = run(&d, &bad, json!({}));
    assert_eq!((code, r["state"].as_str()), (2, Some("invalid")), "{r}");
    assert_eq!(r["outputs"], json!({}));
    assert_eq!(r["messages"], json!([]));
    let typed = d.file(
        "typed.yml",
        "id: typed\nver: '1'\ninputs:\n  - { name: n, type: number, required: true }\nsteps:\n  - id: s1\n",
    );
    let (code, r) = run(&d, &typed, json!({}));
    assert_eq!((code, r["state"].as_str()), (2, Some("rejected")), "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("'n' is required"),
        "{r}"
    );
}

#[test]
fn acts_test_prints_pass_and_fail_with_the_difference() {
    let d = Dir::new();
    d.file("review.yml", REVIEW);
    d.file(
        "review.test.yml",
        "answers:\n  approve: { action: complete }\nexpect:\n  state: completed\n  outputs: { done: true }\n",
    );
    d.file("slow.yml", SLOW);
    d.file(
        "slow.test.yml",
        "answers:\n  pay: { action: complete, delay_ms: 7200000 }\nexpect:\n  state: completed\n",
    );
    let out = acts().arg("test").arg(d.0.path()).output().expect("runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("PASS") && text.contains("review.test.yml"),
        "{text}"
    );
    assert!(
        text.contains("FAIL") && text.contains("slow.test.yml"),
        "{text}"
    );
    assert!(
        text.contains("state: expected completed, got aborted"),
        "{text}"
    );
    assert!(text.contains("1 passed, 1 failed"), "{text}");
    let out = acts()
        .arg("test")
        .arg(d.0.path().join("review.yml"))
        .arg("--json")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0));
    let last: Value = serde_json::from_str(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or_default(),
    )
    .expect("json summary");
    assert_eq!(last, json!({"passed": 1, "failed": 0}));
    acts()
        .arg("test")
        .arg(d.0.path().join("nothing"))
        .assert()
        .code(2);
}

#[test]
fn the_examples_pass_their_tests() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let out = acts().arg("test").arg(&examples).output().expect("runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("9 passed, 0 failed"), "{text}");
}

#[test]
fn acts_test_runs_the_examples_of_a_markdown_document_and_names_their_line() {
    let d = Dir::new();
    let doc = d.file(
        "guide.md",
        "# Guide\n\n```yaml model=child\nid: child\nver: '1'\nsteps:\n  - id: c\n    uses: acts.transform.set\n    params: { v: 7 }\nexposes:\n  - { name: v }\n```\n\n```yaml model=parent\nid: parent\nver: '1'\nsteps:\n  - id: call\n    uses: acts.core.subflow\n    params: { to: child }\n```\n\n```yaml test=parent\ndeploy: [child.yml]\nexpect: { state: completed, outputs: { v: 7 } }\n```\n\n```yaml model=wrong\nid: wrong\nver: '1'\nsteps:\n  - id: s\n    uses: acts.transform.set\n    params: { v: 1 }\n```\n\n```yaml test=wrong\nexpect: { outputs: { v: 2 } }\n```\n\n```yaml model=refused\nid: refused\nver: '1'\nsteps:\n  - id: s\n    uses: acts.core.nope\n```\n",
    );
    let out = acts().arg("test").arg(&doc).output().expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("PASS") && text.contains("guide.md:3 (child)"),
        "{text}"
    );
    assert!(text.contains("guide.md:14 (parent)"), "{text}");
    let wrong = text
        .lines()
        .skip_while(|l| !l.contains("(wrong)"))
        .take(2)
        .collect::<Vec<_>>();
    assert!(wrong[0].starts_with("FAIL"), "{text}");
    assert!(wrong[1].contains("outputs.v: expected 2, got 1"), "{text}");
    // A model block without a test must at least deploy and start.
    assert!(
        text.lines()
            .any(|l| l.starts_with("FAIL") && l.contains("(refused)")),
        "{text}"
    );
    assert!(text.contains("acts.core.nope"), "{text}");
    assert!(text.contains("2 passed, 2 failed"), "{text}");
    // In JSON, an example is named by its place too (not a scratch file).
    let out = acts()
        .arg("test")
        .arg(&doc)
        .arg("--json")
        .output()
        .expect("runs");
    let first: Value = serde_json::from_str(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default(),
    )
    .expect("a JSON line per example");
    assert_eq!(first["model"], first["test"], "{first}");
    assert!(
        first["test"]
            .as_str()
            .unwrap()
            .ends_with("guide.md:3 (child)"),
        "{first}"
    );
    // A test block naming no model is an error with its line.
    let orphan = d.file("orphan.md", "```yaml test=ghost\n{}\n```\n");
    let out = acts().arg("test").arg(&orphan).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 1") && err.contains("ghost"), "{err}");
}
