//! Listings over a cluster come in one order with an exact limit: each
//! partition's page is merged by its items' own cursors, so paging
//! through processes spread very unevenly over the partitions gives every
//! process once, in the order they were started, `limit` at a time — and
//! every task once, in its process's order.

use crate::support;

use std::time::Duration;

use acts::ManualClock;
use acts_testkit::models::ASKING;
use serde_json::{Value, json};
use support::*;

/// A listing call with a cursor (or none): its method, URL and body.
type Listing = dyn Fn(Option<&str>) -> (reqwest::Method, String, Option<Value>);

/// Every page of `listing` (`limit` 7): each page's pids.
async fn pages(listing: &Listing) -> Vec<Vec<String>> {
    pages_of(listing, "processes", |p| {
        p["pid"].as_str().expect("pid").to_owned()
    })
    .await
}

/// Every page of `listing`: each page's items under `field`, as `id`
/// names them.
async fn pages_of(listing: &Listing, field: &str, id: fn(&Value) -> String) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let (method, url, body) = listing(cursor.as_deref());
        let page = expect_call(method, url, body, 200).await;
        assert!(
            page.get("cursors").is_none(),
            "the item cursors stay inside: {page}"
        );
        let pids: Vec<String> = page[field]
            .as_array()
            .expect(field)
            .iter()
            .map(id)
            .collect();
        out.push(pids);
        match page["next"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return out,
        }
    }
    panic!("the listing never ended: {out:?}");
}

/// Pages of 7, each full but the last, together `want` in order.
fn check(pages: &[Vec<String>], want: &[String]) {
    let (last, full) = pages.split_last().expect("a page");
    for p in full {
        assert_eq!(p.len(), 7, "{pages:?}");
    }
    assert!(last.len() <= 7, "{pages:?}");
    let all: Vec<String> = pages.concat();
    assert_eq!(all, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_pages_in_one_order_across_uneven_partitions() {
    let family = family("listings").await;
    let clock = ManualClock::new(1_700_000_000_000);
    let n1 = node(&family, &clock, "n1").await.expect("n1 joins");
    let n2 = node(&family, &clock, "n2").await.expect("n2 joins");
    tick_all(&[&n1, &n2]).await;
    deploy(&n1, ASKING).await;
    // 20 processes on partition 0 and 10 on the others, every third
    // start: very uneven.
    let mut started = Vec::new();
    let mut i = 0;
    for k in 0..30 {
        let want_zero = k % 3 != 2;
        let pid = loop {
            let pid = format!("u{i}");
            i += 1;
            if (n1.node.partition_of(&pid) == 0) == want_zero {
                break pid;
            }
        };
        start([&n1, &n2][k % 2], "asking", &pid).await;
        clock.advance(Duration::from_millis(1));
        started.push(pid);
    }
    let zero = started
        .iter()
        .filter(|p| n1.node.partition_of(p) == 0)
        .count();
    assert_eq!(zero, 20);

    let url = n2.url.clone();
    let get = |order: &'static str| {
        let url = url.clone();
        move |cursor: Option<&str>| {
            let mut u = format!("{url}/api/v1/processes?limit=7&order={order}");
            if let Some(c) = cursor {
                u.push_str(&format!("&cursor={c}"));
            }
            (reqwest::Method::GET, u, None)
        }
    };
    check(&pages(&get("asc")).await, &started);
    let mut newest_first = started.clone();
    newest_first.reverse();
    check(&pages(&get("desc")).await, &newest_first);
    let query = {
        let url = n1.url.clone();
        move |cursor: Option<&str>| {
            let mut body = json!({"model": "asking", "limit": 7});
            if let Some(c) = cursor {
                body["cursor"] = json!(c);
            }
            (
                reqwest::Method::POST,
                format!("{url}/api/v1/processes/query"),
                Some(body),
            )
        }
    };
    check(&pages(&query).await, &started);

    // Tasks too: in their processes' order, each process's in its own
    // (three each: the workflow, its step, the interrupt), pages ending
    // inside a process.
    let tasks = |descending: bool| {
        let url = n2.url.clone();
        move |cursor: Option<&str>| {
            let mut body =
                json!({"process": {"model": "asking", "descending": descending}, "limit": 7});
            if let Some(c) = cursor {
                body["cursor"] = json!(c);
            }
            (
                reqwest::Method::POST,
                format!("{url}/api/v1/tasks/query"),
                Some(body),
            )
        }
    };
    let task_id = |t: &Value| {
        format!(
            "{}/{}",
            t["pid"].as_str().expect("pid"),
            t["kind"].as_str().expect("kind")
        )
    };
    let of = |pids: &[String]| -> Vec<String> {
        pids.iter()
            .flat_map(|p| ["workflow", "step", "act"].map(|k| format!("{p}/{k}")))
            .collect()
    };
    check(
        &pages_of(&tasks(false), "tasks", task_id).await,
        &of(&started),
    );
    check(
        &pages_of(&tasks(true), "tasks", task_id).await,
        &of(&newest_first),
    );
}
