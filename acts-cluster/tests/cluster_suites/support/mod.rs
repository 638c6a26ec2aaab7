//! What the in-process cluster tests share: nodes on one store family
//! (in memory, or PostgreSQL with `ACTS_TEST_CLUSTER_STORE=postgres`) with
//! a manual clock and ticks the test drives, and the HTTP calls they make
//! through any node.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use acts::{EngineConfig, ManualClock, StoreFamily};
use acts_cluster::placement::owner_of;
use acts_cluster::{ClusterConfig, ClusterError, ClusterNode};
use serde_json::{Value, json};

pub const P: u32 = 8;
pub const TTL: Duration = Duration::from_secs(5);

pub struct Node {
    pub node: ClusterNode,
    pub url: String,
}

/// The store family of one test: in memory, or — with
/// `ACTS_TEST_CLUSTER_STORE=postgres` — a fresh family (one table per
/// partition) on the PostgreSQL server `ACTS_TEST_POSTGRES_URL` names
/// (`scripts/test.sh` runs these tests both ways).
pub async fn family(name: &str) -> StoreFamily {
    match std::env::var("ACTS_TEST_CLUSTER_STORE").as_deref() {
        Ok("postgres") => {
            let url = std::env::var("ACTS_TEST_POSTGRES_URL")
                .expect("ACTS_TEST_CLUSTER_STORE=postgres needs ACTS_TEST_POSTGRES_URL");
            let unique = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() % 1_000_000_000_000);
            let sep = if url.contains('?') { '&' } else { '?' };
            acts::open_store_family(&format!(
                "{url}{sep}namespace={name}_{}_{unique}",
                std::process::id()
            ))
            .await
            .expect("the PostgreSQL family opens")
        }
        Ok("memory") | Err(_) => StoreFamily::memory(name),
        Ok(other) => panic!("ACTS_TEST_CLUSTER_STORE={other}: use memory or postgres"),
    }
}

pub async fn node(
    family: &StoreFamily,
    clock: &ManualClock,
    id: &str,
) -> Result<Node, ClusterError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let mut config = ClusterConfig::new(id, &url, P);
    config.lease_ttl = TTL;
    config.clock = Arc::new(clock.clone());
    config.background = false;
    // No housekeeping in the test's time span: a "frozen" node renews
    // nothing on its own.
    config.engine = {
        let mut v = EngineConfig::default();
        v.tick = Duration::from_secs(3600);
        v
    };
    let node = ClusterNode::join(config, family.clone(), acts_server::Auth::none()).await?;
    let port = listener.local_addr().expect("address").port();
    let router = node.router(Some(port));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok(Node { node, url })
}

/// Reads `stream` into `seen` until `done(seen)` (false: the stream
/// ended, or the 30 s hang guard ran out).
pub async fn read_until(
    stream: &mut reqwest::Response,
    seen: &mut String,
    done: impl Fn(&str) -> bool,
) -> bool {
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(chunk)) = stream.chunk().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if done(seen) {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false)
}

/// Whether every partition's stream announced it is attached.
pub fn all_attached(seen: &str) -> bool {
    (0..P).all(|p| seen.contains(&format!(": partition {p} attached\n")))
}

pub async fn tick_all(nodes: &[&Node]) {
    // Twice: hand-overs of the first round are taken in the second.
    for _ in 0..2 {
        for n in nodes {
            n.node.tick().await.expect("tick");
        }
    }
}

pub fn check_balanced(nodes: &[&Node]) {
    let ids: Vec<String> = nodes.iter().map(|n| n.node.id().to_owned()).collect();
    let mut all = BTreeSet::new();
    for n in nodes {
        for p in n.node.held() {
            assert_eq!(owner_of(p, &ids), Some(n.node.id()), "partition {p}");
            assert!(all.insert(p), "partition {p} held twice");
        }
    }
    assert_eq!(all.len(), P as usize, "every partition held once");
}

/// [`call`], asserting the answer's status is `want`; its body.
pub async fn expect_call(
    method: reqwest::Method,
    url: String,
    body: Option<Value>,
    want: u16,
) -> Value {
    let (status, body) = call(method, url, body).await;
    assert_eq!(status, want, "{body}");
    body
}

pub async fn call(method: reqwest::Method, url: String, body: Option<Value>) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut req = client.request(method, url);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = tokio::time::timeout(Duration::from_secs(60), req.send())
        .await
        .expect("hang guard")
        .expect("the node answers");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("a body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

pub async fn deploy(n: &Node, text: &str) {
    let client = reqwest::Client::new();
    let resp = client
        .post(format!("{}/api/v1/models", n.url))
        .header("content-type", "application/yaml")
        .body(text.to_owned())
        .send()
        .await
        .expect("deploy answers");
    assert_eq!(
        resp.status().as_u16(),
        201,
        "{}",
        resp.text().await.unwrap_or_default()
    );
}

pub async fn start(n: &Node, model: &str, pid: &str) {
    expect_call(
        reqwest::Method::POST,
        format!("{}/api/v1/processes", n.url),
        Some(json!({"model": model, "vars": {"pid": pid}})),
        201,
    )
    .await;
}

/// The task of `pid` waiting with interrupt key `key`, asked through
/// `n` (any node); waits (hang guard) until it is there.
pub async fn waiting_task(n: &Node, pid: &str, key: &str) -> String {
    for _ in 0..400 {
        let (status, body) = call(
            reqwest::Method::GET,
            format!("{}/api/v1/processes/{pid}", n.url),
            None,
        )
        .await;
        if status == 200
            && let Some(t) = body["tasks"].as_array().and_then(|ts| {
                ts.iter()
                    .find(|t| t["key"] == key && t["state"] == "interrupted")
            })
        {
            return t["tid"].as_str().expect("tid").to_owned();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let (_, body) = call(
        reqwest::Method::GET,
        format!("{}/api/v1/processes/{pid}", n.url),
        None,
    )
    .await;
    panic!("process {pid} never waited at '{key}': {body}");
}

pub async fn process_state(n: &Node, pid: &str) -> String {
    let body = expect_call(
        reqwest::Method::GET,
        format!("{}/api/v1/processes/{pid}", n.url),
        None,
        200,
    )
    .await;
    body["process"]["state"].as_str().expect("state").to_owned()
}

pub async fn complete(n: &Node, pid: &str, tid: &str) -> (u16, Value) {
    call(
        reqwest::Method::POST,
        format!("{}/api/v1/processes/{pid}/tasks/{tid}/complete", n.url),
        Some(json!({})),
    )
    .await
}
