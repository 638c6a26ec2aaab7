//! What `acts` logs carries the process and task it came from:
//! `--log-format json` lines have the `process` span (`pid`, `model`) and
//! the `task` span (`tid`, `nid`) of a script's `console.log`; the text
//! format names them before the message; an unknown format is refused
//! with the ones there are.

use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;

const LOGS: &str = r#"
id: logs
ver: "1"
steps:
  - id: hello
    uses: acts.transform.code
    params: |
      console.log("hello from a step");
"#;

/// Runs the model with `format`; what `acts` said on stderr and the pid of
/// the process it ran (from `acts ps`).
fn run_with(format: &str) -> (String, String) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let model = dir.path().join("logs.yml");
    std::fs::write(&model, LOGS).expect("the model");
    let store = format!("redb:{}", dir.path().join("acts.db").display());
    let out = Command::cargo_bin("acts")
        .expect("the acts binary")
        .args(["--store", &store, "--log-format", format, "run"])
        .arg(&model)
        .arg("--auto")
        .timeout(Duration::from_secs(60))
        .output()
        .expect("acts runs");
    assert!(out.status.success(), "{out:?}");
    let ps = Command::cargo_bin("acts")
        .expect("the acts binary")
        .args(["--store", &store, "ps"])
        .timeout(Duration::from_secs(60))
        .output()
        .expect("acts ps runs");
    let listing = String::from_utf8_lossy(&ps.stdout).into_owned();
    let pid = listing
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("a process in: {listing}"))
        .to_owned();
    (String::from_utf8_lossy(&out.stderr).into_owned(), pid)
}

#[test]
fn a_scripts_log_line_names_its_process_and_task() {
    let (said, pid) = run_with("json");
    let line: Value = said
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["fields"]["message"] == "hello from a step")
        .unwrap_or_else(|| panic!("the script's line as JSON in: {said}"));
    assert_eq!(line["target"], "acts::script", "{line}");
    let spans = line["spans"].as_array().expect("the span list");
    let process = spans
        .iter()
        .find(|s| s["name"] == "process")
        .unwrap_or_else(|| panic!("a process span: {line}"));
    assert_eq!(process["pid"], pid.as_str(), "{line}");
    assert_eq!(process["model"], "logs", "{line}");
    let task = &line["span"];
    assert_eq!(task["name"], "task", "{line}");
    assert!(
        task["tid"].as_str().is_some_and(|t| !t.is_empty())
            && task["nid"].as_str().is_some_and(|n| !n.is_empty()),
        "{line}"
    );

    let (said, pid) = run_with("text");
    let line = said
        .lines()
        .find(|l| l.contains("hello from a step"))
        .unwrap_or_else(|| panic!("the script's line in: {said}"));
    assert!(
        line.contains(&format!("pid={pid}")) && line.contains("model=logs"),
        "{line}"
    );
    assert!(!line.contains('\u{1b}'), "no colours into a pipe: {line:?}");
}

#[test]
fn an_unknown_log_format_is_refused_with_the_known_ones() {
    let out = Command::cargo_bin("acts")
        .expect("the acts binary")
        .args(["--log-format", "xml", "models"])
        .timeout(Duration::from_secs(60))
        .output()
        .expect("acts runs");
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("text") && said.contains("json"), "{said}");
}
