//! Processes of `nodes::ASK` driven over HTTP: read one, find its open
//! question, answer it, wait for its end (each wait bounded by a minute,
//! a hang guard).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::http;

/// `GET path`, which must answer 200 with JSON.
pub fn get(addr: &str, path: &str) -> Value {
    let (status, body) = http(addr, "GET", path, "");
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).expect("JSON")
}

/// The open question of `pid`, if it is waiting.
pub fn open_question(addr: &str, pid: &str) -> Option<String> {
    let body = get(addr, &format!("/api/v1/processes/{pid}"));
    body["tasks"].as_array().and_then(|ts| {
        ts.iter()
            .find(|t| t["key"] == "ask" && t["state"] == "interrupted")
            .and_then(|t| t["tid"].as_str())
            .map(str::to_owned)
    })
}

/// Answers `pid`'s question with `answer` (waiting for the question).
pub fn answer(addr: &str, pid: &str, answer: &Value) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let tid = loop {
        if let Some(tid) = open_question(addr, pid) {
            break tid;
        }
        assert!(Instant::now() < deadline, "{pid} never asked");
        std::thread::sleep(Duration::from_millis(20));
    };
    let (status, body) = http(
        addr,
        "POST",
        &format!("/api/v1/processes/{pid}/tasks/{tid}/complete"),
        &json!({ "answer": answer }).to_string(),
    );
    assert_eq!(status, 204, "{pid}: {body}");
}

/// Waits until `pid` has completed with `answer` as its answer.
pub fn wait_completed(addr: &str, pid: &str, answer: &Value) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let body = get(addr, &format!("/api/v1/processes/{pid}"));
        if body["process"]["state"] == "completed" {
            assert_eq!(&body["process"]["outputs"]["answer"], answer, "{body}");
            return;
        }
        assert!(Instant::now() < deadline, "{pid} did not complete: {body}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A process whose answer may or may not have landed: ends it — it has
/// completed, or its question is answered now (with `"late"`) and it
/// completes.
pub fn wait_completed_or_answer(addr: &str, pid: &str) {
    let body = get(addr, &format!("/api/v1/processes/{pid}"));
    if body["process"]["state"] == "completed" {
        return;
    }
    answer(addr, pid, &json!("late"));
    wait_completed(addr, pid, &json!("late"));
}
