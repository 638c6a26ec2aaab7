//! Bulk jobs over a cluster: one job is a part on every partition under
//! one id, started, followed, listed, cancelled and removed through any
//! node; each process is acted on once, whichever partition it lives in.

use crate::support;

use std::time::Duration;

use acts::ManualClock;
use acts_testkit::models::ASKING as ASK;
use serde_json::{Value, json};
use support::*;

const PROCESSES: usize = 24;

/// Job `id` through `n`, once it is no longer running (hang guard: a
/// minute).
async fn finished(n: &Node, id: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let job = expect_call(
            reqwest::Method::GET,
            format!("{}/api/v1/bulk/{id}", n.url),
            None,
            200,
        )
        .await;
        if job["state"] != "running" {
            return job;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still running: {job}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_job_acts_once_on_every_partitions_processes() {
    let family = family("bulk").await;
    let clock = ManualClock::new(1_700_000_000_000);
    let n1 = node(&family, &clock, "n1").await.expect("n1 joins");
    let n2 = node(&family, &clock, "n2").await.expect("n2 joins");
    tick_all(&[&n1, &n2]).await;
    deploy(&n1, ASK).await;
    let pids: Vec<String> = (0..PROCESSES).map(|i| format!("ask{i}")).collect();
    for (i, pid) in pids.iter().enumerate() {
        start([&n1, &n2][i % 2], "asking", pid).await;
    }
    let parts: std::collections::BTreeSet<u32> =
        pids.iter().map(|p| n1.node.partition_of(p)).collect();
    assert!(parts.len() > 2, "spread over partitions: {parts:?}");

    let request = json!({
        "action": "terminate",
        "where": {"model": "asking", "state": "running"},
        "reason": "recalled",
    });
    // A dry run counts every partition's.
    let preview = expect_call(
        reqwest::Method::POST,
        format!("{}/api/v1/bulk/dry-run", n2.url),
        Some(request.clone()),
        200,
    )
    .await;
    assert_eq!(preview["count"], PROCESSES, "{preview}");
    assert_eq!(preview["sample"].as_array().map(Vec::len), Some(20));
    // A bad request is refused before any part starts.
    let (status, body) = call(
        reqwest::Method::POST,
        format!("{}/api/v1/bulk", n1.url),
        Some(json!({"action": "terminate", "where": {}})),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (_, jobs) = call(
        reqwest::Method::GET,
        format!("{}/api/v1/bulk", n1.url),
        None,
    )
    .await;
    assert_eq!(jobs["jobs"], json!([]), "{jobs}");

    let started = expect_call(
        reqwest::Method::POST,
        format!("{}/api/v1/bulk", n1.url),
        Some(request.clone()),
        202,
    )
    .await;
    let id = started["id"].as_str().expect("an id").to_owned();
    assert_eq!(started["request"]["per_second"], 1000, "{started}");
    let job = finished(&n2, &id).await;
    assert_eq!(job["state"], "done", "{job}");
    assert_eq!(
        (
            job["total"].clone(),
            job["done"].clone(),
            job["failed"].clone()
        ),
        (json!(PROCESSES), json!(PROCESSES), json!(0)),
        "{job}"
    );
    for pid in &pids {
        assert_ne!(process_state(&n1, pid).await, "running", "{pid}");
    }
    // The report holds every process once.
    let mut reported = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(c) => format!("{}/api/v1/bulk/{id}/items?limit=5&cursor={c}", n2.url),
            None => format!("{}/api/v1/bulk/{id}/items?limit=5", n2.url),
        };
        let page = expect_call(reqwest::Method::GET, url, None, 200).await;
        for item in page["items"].as_array().expect("items") {
            reported.push(item["pid"].as_str().expect("pid").to_owned());
        }
        match page["next"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    reported.sort();
    let mut want = pids.clone();
    want.sort();
    assert_eq!(reported, want);

    // Listed once, summed; the same start again is the same job, another
    // request under its id is refused.
    let jobs = expect_call(
        reqwest::Method::GET,
        format!("{}/api/v1/bulk", n2.url),
        None,
        200,
    )
    .await;
    assert_eq!(jobs["jobs"].as_array().map(Vec::len), Some(1), "{jobs}");
    assert_eq!(jobs["jobs"][0]["done"], PROCESSES, "{jobs}");
    let mut again = request.clone();
    again["id"] = json!(id);
    let same = expect_call(
        reqwest::Method::POST,
        format!("{}/api/v1/bulk", n2.url),
        Some(again.clone()),
        202,
    )
    .await;
    assert_eq!(
        (same["id"].clone(), same["done"].clone()),
        (json!(id), json!(PROCESSES))
    );
    again["reason"] = json!("another");
    let (status, body) = call(
        reqwest::Method::POST,
        format!("{}/api/v1/bulk", n1.url),
        Some(again),
    )
    .await;
    assert_eq!(status, 409, "{body}");

    // Removed from every partition.
    let (status, body) = call(
        reqwest::Method::DELETE,
        format!("{}/api/v1/bulk/{id}", n1.url),
        None,
    )
    .await;
    assert_eq!(status, 204, "{body}");
    let (status, body) = call(
        reqwest::Method::GET,
        format!("{}/api/v1/bulk/{id}", n2.url),
        None,
    )
    .await;
    assert_eq!(status, 404, "{body}");
}
