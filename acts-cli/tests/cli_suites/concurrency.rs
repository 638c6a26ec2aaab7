//! Concurrency keys through the shipped binary on a redb file: a start
//! past its key's limit says it waits, `acts ps --waiting-for` and
//! `acts show` say why, mistakes are exit 2 with what to give, and the
//! waiter whose turn came starts with the command that ended the holder.

use std::time::Duration;

use acts_testkit::models::{ONE_DESK as DESK, ONE_PER_CUSTOMER};
use assert_cmd::Command;
use serde_json::Value;

fn acts(store: &str) -> Command {
    let mut c = Command::cargo_bin("acts").expect("the acts binary is built");
    c.arg("--store").arg(store).timeout(Duration::from_secs(60));
    c
}

/// Runs `acts` with `args`; its stdout (it must succeed).
fn ok(store: &str, args: &[&str]) -> String {
    let out = acts(store).args(args).assert().success();
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

/// Runs `acts` with `args`; it must fail with exit 2 (bad input): its
/// stderr.
fn bad(store: &str, args: &[&str]) -> String {
    let out = acts(store).args(args).assert().code(2);
    String::from_utf8_lossy(&out.get_output().stderr).into_owned()
}

#[test]
fn a_start_past_its_key_waits_is_listed_and_starts_when_its_holder_ends() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let model = dir.path().join("order.yml");
    std::fs::write(&model, ONE_PER_CUSTOMER).expect("the model file");
    let store = format!("redb:{}", dir.path().join("acts.db").display());
    ok(&store, &["deploy", model.to_str().expect("a UTF-8 path")]);
    let first = ok(&store, &["start", "order", "--var", "customer=\"c1\""]);
    let second = ok(&store, &["start", "order", "--var", "customer=\"c1\""]);
    // "PID STATE": each start is its own engine; the second still finds
    // the key held (counted from the store).
    let (p1, s1) = first.trim().split_once(' ').expect("pid and state");
    let (p2, s2) = second.trim().split_once(' ').expect("pid and state");
    assert_eq!((s1, s2), ("running", "none"));

    let listed: Value = serde_json::from_str(&ok(
        &store,
        &["ps", "--waiting-for", "concurrency", "--json"],
    ))
    .expect("JSON");
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["pid"], p2);
    assert_eq!(listed[0]["waiting_for"], "concurrency");
    assert_eq!(
        ok(&store, &["ps", "--key", "cust-c1", "--count"]).trim(),
        "2"
    );
    let shown = ok(&store, &["show", p2]);
    assert!(shown.contains("concurrency key: cust-c1"), "{shown}");
    assert!(
        shown.contains("waiting for: a free slot of its concurrency key"),
        "{shown}"
    );

    let err = bad(&store, &["ps", "--waiting-for", "slot"]);
    assert!(
        err.contains("concurrency") && err.contains("admission"),
        "{err}"
    );
    let err = bad(&store, &["start", "order"]);
    assert!(
        err.contains("concurrency key") && err.contains("customer"),
        "{err}"
    );

    // The answer ends p1: the same command starts p2, whose turn came.
    ok(&store, &["act", "complete", p1, "approve"]);
    let listed: Value =
        serde_json::from_str(&ok(&store, &["ps", "--key", "cust-c1", "--json"])).expect("JSON");
    let state_of = |pid: &str| {
        listed
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["pid"] == pid))
            .map(|p| p["state"].clone())
    };
    assert_eq!(state_of(p1), Some("completed".into()), "{listed}");
    assert_eq!(state_of(p2), Some("running".into()), "{listed}");
    let report = ok(&store, &["resume", "--auto", "--json"]);
    let last: Value = serde_json::from_str(report.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("a JSON report ({e}): {report}"));
    assert_eq!(last["pid"], p2, "{last}");
    assert_eq!(last["state"], "completed", "{last}");
}

#[test]
fn a_process_whose_task_waits_at_a_step_key_is_listed_and_says_so() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let model = dir.path().join("desk.yml");
    std::fs::write(&model, DESK).expect("the model file");
    let store = format!("redb:{}", dir.path().join("acts.db").display());
    ok(&store, &["deploy", model.to_str().expect("a UTF-8 path")]);
    let first = ok(&store, &["start", "desk"]);
    let second = ok(&store, &["start", "desk"]);
    let (p1, _) = first.trim().split_once(' ').expect("pid and state");
    let (p2, s2) = second.trim().split_once(' ').expect("pid and state");
    // It runs; its task waits for the desk.
    assert_eq!(s2, "running");
    let listed: Value =
        serde_json::from_str(&ok(&store, &["ps", "--waiting-for", "gate", "--json"]))
            .expect("JSON");
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["pid"], p2);
    assert_eq!(listed[0]["waiting_for"], "gate");
    let shown = ok(&store, &["show", p2]);
    assert!(shown.contains("waiting for: a task's gate"), "{shown}");
    let shown = ok(&store, &["show", p1]);
    assert!(!shown.contains("waiting for"), "{shown}");
    let err = bad(&store, &["ps", "--waiting-for", "gates"]);
    assert!(err.contains("gate (a task at"), "{err}");
    // A parked process (state none) has no task at a gate: nothing
    // matches, which is an empty listing, not an error.
    let none: Value = serde_json::from_str(&ok(
        &store,
        &["ps", "--state", "none", "--waiting-for", "gate", "--json"],
    ))
    .expect("JSON");
    assert_eq!(none, serde_json::json!([]));
    let none: Value = serde_json::from_str(&ok(
        &store,
        &[
            "ps",
            "--state",
            "running",
            "--waiting-for",
            "concurrency",
            "--json",
        ],
    ))
    .expect("JSON");
    assert_eq!(none, serde_json::json!([]));
}
