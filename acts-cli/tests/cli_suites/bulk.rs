//! `acts bulk` through the shipped binary: on a redb file (the job runs
//! in the command that follows it) and through `acts serve` (the job runs
//! on the server): a dry run changes nothing, a retry of every failed
//! process retries each once and reports it, mistakes are exit 2 with
//! what to give, a job is listed, cancelled, and taken up again after
//! the server restarts.

use crate::support;

use std::time::Duration;

use acts_testkit::models::FLAKY_CHARGE as FLAKY;
use assert_cmd::Command;
use serde_json::Value;

/// `acts` on `target`: `--store URL` or `--server URL`.
fn acts(target: &[&str]) -> Command {
    let mut c = Command::cargo_bin("acts").expect("the acts binary is built");
    c.args(target).timeout(Duration::from_secs(120));
    c
}

fn ok(target: &[&str], args: &[&str]) -> String {
    let out = acts(target).args(args).assert().success();
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

fn bad(target: &[&str], args: &[&str]) -> String {
    let out = acts(target).args(args).assert().code(2);
    String::from_utf8_lossy(&out.get_output().stderr).into_owned()
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Deploys FLAKY and starts `failing` processes that fail and `fine`
/// that wait at their interrupt.
fn seeded(target: &[&str], dir: &std::path::Path, failing: usize, fine: usize) {
    let model = dir.join("flaky.yml");
    std::fs::write(&model, FLAKY).expect("the model file");
    ok(target, &["deploy", model.to_str().expect("a UTF-8 path")]);
    for _ in 0..failing {
        ok(target, &["start", "flaky", "-q"]);
    }
    for _ in 0..fine {
        ok(target, &["start", "flaky", "-q", "--var", "fixed=true"]);
    }
}

fn count(target: &[&str], args: &[&str]) -> u64 {
    let mut all = vec!["ps", "--count"];
    all.extend_from_slice(args);
    ok(target, &all).trim().parse().expect("a count")
}

/// What every transport must do alike.
fn retries_each_failed_process_once(target: &[&str]) {
    let preview = json(&ok(
        target,
        &[
            "bulk",
            "retry",
            "--ecode",
            "declined",
            "--dry-run",
            "--json",
        ],
    ));
    assert_eq!(preview["count"], 12, "{preview}");
    assert_eq!(preview["sample"].as_array().map(Vec::len), Some(12));
    assert_eq!(
        count(target, &["--state", "error"]),
        12,
        "a dry run changes nothing"
    );

    let job = json(&ok(
        target,
        &[
            "bulk",
            "retry",
            "--ecode",
            "declined",
            "--var",
            "fixed=true",
            "--json",
        ],
    ));
    assert_eq!(job["state"], "done", "{job}");
    assert_eq!(
        (job["total"].as_u64(), job["done"].as_u64()),
        (Some(12), Some(12))
    );
    assert_eq!(count(target, &["--state", "error"]), 0);
    assert_eq!(count(target, &["--state", "running"]), 15);
    let id = job["id"].as_str().expect("an id");
    let report = json(&ok(target, &["bulk", "report", id, "--json"]));
    let report = report.as_array().expect("an array");
    assert_eq!(report.len(), 12);
    assert!(report.iter().all(|i| i["outcome"] == "done"), "{report:?}");
    let status = ok(target, &["bulk", "status", id]);
    assert!(
        status.contains("state:    done") && status.contains("12/12"),
        "{status}"
    );
    let listed = ok(target, &["bulk", "ls"]);
    assert!(listed.contains(id) && listed.contains("retry"), "{listed}");

    // Mistakes: what to give instead, exit 2, nothing started.
    let err = bad(target, &["bulk", "terminate"]);
    assert!(err.contains("--all"), "{err}");
    let err = bad(target, &["bulk", "rewind", "--model", "flaky"]);
    assert!(err.contains("step"), "{err}");
    let err = bad(target, &["bulk", "retry", "--state", "eror"]);
    assert!(err.contains("unknown state 'eror'"), "{err}");
    let err = bad(
        target,
        &[
            "bulk",
            "pause",
            "--model",
            "flaky",
            "--started-after",
            "yesterday",
        ],
    );
    assert!(err.contains("RFC 3339"), "{err}");
    let err = bad(target, &["bulk", "status", "bulk-nope"]);
    assert!(err.contains("cannot find bulk job 'bulk-nope'"), "{err}");
    let err = bad(target, &["bulk", "report", id, "--outcome", "fine"]);
    assert!(err.contains("done, skipped or failed"), "{err}");
    let jobs = json(&ok(target, &["bulk", "ls", "--json"]));
    assert_eq!(jobs.as_array().map(Vec::len), Some(1), "{jobs}");
    // Removed with its report; the processes keep what it did.
    ok(target, &["bulk", "rm", id]);
    let err = bad(target, &["bulk", "report", id]);
    assert!(err.contains("cannot find bulk job"), "{err}");
    assert_eq!(count(target, &["--state", "running"]), 15);
    assert_eq!(ok(target, &["bulk", "ls", "--json"]).trim(), "[]");
}

#[test]
fn on_a_store_a_bulk_retry_retries_each_failed_process_once() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = format!("redb:{}", dir.path().join("acts.db").display());
    let target = ["--store", store.as_str()];
    seeded(&target, dir.path(), 12, 3);
    retries_each_failed_process_once(&target);
}

#[test]
fn through_a_server_a_job_runs_is_cancelled_and_goes_on_after_a_restart() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = format!("redb:{}", dir.path().join("acts.db").display());
    let (server, addr) = support::serve(&store);
    let url = format!("http://{addr}");
    let target = ["--server", url.as_str()];
    seeded(&target, dir.path(), 12, 3);
    retries_each_failed_process_once(&target);

    // A slow job, cancelled: it keeps what it did.
    let slow = json(&ok(
        &target,
        &[
            "bulk",
            "pause",
            "--state",
            "running",
            "--per-second",
            "2",
            "--detach",
            "--json",
        ],
    ));
    let id = slow["id"].as_str().expect("an id").to_owned();
    let cancelled = ok(&target, &["bulk", "cancel", &id]);
    assert!(cancelled.contains("state:"), "{cancelled}");
    let job = json(&ok(&target, &["bulk", "status", &id, "--json"]));
    assert!(
        job["state"] == "cancelled" || (job["state"] == "done" && job["done"] == 15),
        "{job}"
    );
    let paused = json(&ok(&target, &["ps", "--state", "running", "--json"]))
        .as_array()
        .expect("an array")
        .iter()
        .filter(|p| !p["paused"].is_null())
        .count();
    assert_eq!(paused as u64, job["done"].as_u64().expect("done"), "{job}");

    // A slow job the server is stopped in the middle of goes on when it
    // is served again, each process once.
    let resume = json(&ok(
        &target,
        &[
            "bulk",
            "resume",
            "--state",
            "running",
            "--per-second",
            "4",
            "--detach",
            "--json",
        ],
    ));
    let id = resume["id"].as_str().expect("an id").to_owned();
    assert_eq!(support::stop(server), Some(0));
    let (server, addr) = support::serve(&store);
    let url = format!("http://{addr}");
    let target = ["--server", url.as_str()];
    // `wait` follows it to its end (exit 0: done).
    acts(&target).args(["bulk", "wait", &id]).assert().success();
    let job = json(&ok(&target, &["bulk", "status", &id, "--json"]));
    assert_eq!(job["state"], "done", "{job}");
    assert_eq!(
        job["done"].as_u64().expect("done") + job["skipped"].as_u64().expect("skipped"),
        15,
        "{job}"
    );
    assert_eq!(
        job["done"], paused as u64,
        "each paused one resumed once: {job}"
    );
    let still_paused = json(&ok(&target, &["ps", "--state", "running", "--json"]))
        .as_array()
        .expect("an array")
        .iter()
        .filter(|p| !p["paused"].is_null())
        .count();
    assert_eq!(still_paused, 0);
    assert_eq!(support::stop(server), Some(0));
}
