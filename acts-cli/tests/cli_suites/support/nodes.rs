//! A cluster of `acts serve --cluster` processes as the tests drive it:
//! starting a node, API calls through whichever node answers, deploying,
//! starting processes, answering their questions through a store's
//! failover and counting the acknowledged answers a process lost.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::task::JoinSet;

/// The partitions of every test cluster.
pub const PARTITIONS: u32 = 16;
/// The nodes' lease, in seconds.
pub const TTL_SECS: u64 = 2;

pub const ASK: &str = r#"
id: ask
ver: "1"
steps:
  - id: question
    uses: acts.core.irq
    params: { key: ask }
  - id: done
    uses: acts.transform.set
    params: { done: true }
exposes:
  - name: answer
  - name: done
"#;

/// One `acts serve --cluster` process.
pub struct NodeProc {
    pub id: String,
    pub url: String,
    /// The gRPC address (`HOST:PORT`) of a node started with `--grpc`.
    pub grpc: Option<String>,
    pub child: Child,
    pub log: Arc<Mutex<Vec<String>>>,
}

impl NodeProc {
    pub fn spawn(store: &str, id: &str) -> Self {
        Self::spawn_with(store, id, &[])
    }

    /// [`NodeProc::spawn`] with more arguments of `acts serve` (with
    /// `--grpc`, waits for the gRPC listener too).
    pub fn spawn_with(store: &str, id: &str, extra: &[&str]) -> Self {
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("acts"))
            .args([
                "serve",
                "--cluster",
                store,
                "--node",
                id,
                "--partitions",
                &PARTITIONS.to_string(),
                "--lease-ttl",
                &TTL_SECS.to_string(),
                "--listen",
                "127.0.0.1:0",
            ])
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("acts serve starts");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let (grpc_tx, grpc_rx) = std::sync::mpsc::channel();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let url = rest.split([',', ' ']).next().unwrap_or("").to_owned();
                    let _ = tx.send(url);
                }
                if let Some(rest) = line.split("0.25 on ").nth(1) {
                    let at = rest.split([',', ' ']).next().unwrap_or("").to_owned();
                    let _ = grpc_tx.send(at);
                }
                sink.lock().expect("log").push(line);
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("node {id} never listened: {:?}", log.lock().expect("log")));
        let grpc = extra.contains(&"--grpc").then(|| {
            grpc_rx
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| {
                    panic!(
                        "node {id} never served gRPC: {:?}",
                        log.lock().expect("log")
                    )
                })
        });
        Self {
            id: id.to_owned(),
            url,
            grpc,
            child,
            log,
        }
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("kill runs")
            .success();
        assert!(ok, "kill {sig} {}", self.id);
    }
}

impl Drop for NodeProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One API call; `Err` on a network failure.
pub async fn try_api(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    body: Option<Value>,
    headers: &[(&str, String)],
) -> Result<(u16, Value), String> {
    let mut req = http.request(method, url);
    if let Some(b) = body {
        req = req.json(&b);
    }
    for (k, v) in headers {
        req = req.header(*k, v.clone());
    }
    let resp = req.send().await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let text = resp.text().await.map_err(|e| e.to_string())?;
    Ok((
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    ))
}

/// One API call through the first of `nodes` that answers, tried again
/// (hang guard: 60 s) while the cluster is moving partitions (503) or a
/// node is unreachable.
pub async fn api(
    http: &reqwest::Client,
    nodes: &[String],
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut i = 0;
    loop {
        let base = &nodes[i % nodes.len()];
        i += 1;
        match try_api(
            http,
            method.clone(),
            format!("{base}{path}"),
            body.clone(),
            &[],
        )
        .await
        {
            Ok((503, v)) | Ok((502, v)) if Instant::now() < deadline => {
                let _ = v;
            }
            Ok(answer) => return answer,
            Err(e) if Instant::now() >= deadline => panic!("{path}: {e}"),
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn deploy(http: &reqwest::Client, node: &str, text: &str) {
    let resp = http
        .post(format!("{node}/api/v1/models"))
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

/// Waits until `node` sees exactly `live` nodes, every partition owned by
/// one of them.
pub async fn settled(http: &reqwest::Client, node: &str, live: &[&str]) -> Value {
    settled_as(http, node, live, None).await
}

/// [`settled`], asked with bearer `token`.
pub async fn settled_as(
    http: &reqwest::Client,
    node: &str,
    live: &[&str],
    token: Option<&str>,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    let headers: Vec<(&str, String)> = token
        .map(|t| ("authorization", format!("Bearer {t}")))
        .into_iter()
        .collect();
    loop {
        if let Ok((200, s)) = try_api(
            http,
            reqwest::Method::GET,
            format!("{node}/api/v1/cluster/status"),
            None,
            &headers,
        )
        .await
        {
            let nodes: Vec<&str> = s["nodes"]
                .as_array()
                .map(|a| a.iter().filter_map(|n| n["node"].as_str()).collect())
                .unwrap_or_default();
            let owned = s["owners"].as_array().is_some_and(|a| {
                a.iter()
                    .all(|p| p["owner"].as_str().is_some_and(|o| live.contains(&o)))
            });
            let mut want: Vec<&str> = live.to_vec();
            want.sort_unstable();
            let mut got = nodes.clone();
            got.sort_unstable();
            if owned && got == want {
                return s;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the cluster never settled on {live:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `GET /api/v1/processes/{pid}` through `nodes`.
pub async fn process(http: &reqwest::Client, nodes: &[String], pid: &str) -> (u16, Value) {
    api(
        http,
        nodes,
        reqwest::Method::GET,
        &format!("/api/v1/processes/{pid}"),
        None,
    )
    .await
}

pub async fn start_all(http: &reqwest::Client, nodes: &[String], work: &[(String, &'static str)]) {
    let mut set = JoinSet::new();
    for (i, (pid, model)) in work.iter().enumerate() {
        while set.len() >= 16 {
            set.join_next().await.expect("a task").expect("starting");
        }
        let http = http.clone();
        let via = vec![nodes[i % nodes.len()].clone()];
        let body = json!({"model": model, "vars": {"pid": pid}});
        set.spawn(async move {
            let (status, out) = api(
                &http,
                &via,
                reqwest::Method::POST,
                "/api/v1/processes",
                Some(body),
            )
            .await;
            assert_eq!(status, 201, "{out}");
        });
    }
    while let Some(r) = set.join_next().await {
        r.expect("starting");
    }
}

/// What a run through a Redis master's crash did to the acknowledged
/// answers.
pub struct FailoverReport {
    pub acknowledged: usize,
    pub lost: Vec<String>,
    pub seconds: f64,
}

/// Answers `pid`'s question once; when the node acknowledged it (204),
/// when the acknowledged call was sent. A call that failed (the store was
/// failing over) is tried again while the question is still open.
pub async fn answer_once(
    http: &reqwest::Client,
    nodes: &[String],
    pid: &str,
    n: u64,
) -> Option<Instant> {
    let deadline = Instant::now() + Duration::from_secs(90);
    while Instant::now() < deadline {
        let (status, body) = process(http, nodes, pid).await;
        if status == 200 && body["process"]["state"] != "running" {
            return None;
        }
        let open = body["tasks"].as_array().and_then(|ts| {
            ts.iter()
                .find(|t| t["key"] == "ask" && t["state"] == "interrupted")
                .and_then(|t| t["tid"].as_str())
                .map(str::to_owned)
        });
        if let Some(tid) = open {
            let sent = Instant::now();
            let (status, _) = api(
                http,
                nodes,
                reqwest::Method::POST,
                &format!("/api/v1/processes/{pid}/tasks/{tid}/complete"),
                Some(json!({"answer": n})),
            )
            .await;
            if status == 204 {
                return Some(sent);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// The acknowledged answers: pid, answer, when the acknowledged call was
/// sent.
pub type Acked = Arc<Mutex<Vec<(String, u64, Instant)>>>;

/// Answers the processes `ask{i}` for `i` in `range` (8 at a time), each
/// once, noting the acknowledged ones in `acked`.
pub async fn answer_all(
    http: &reqwest::Client,
    nodes: &[String],
    acked: &Acked,
    range: std::ops::Range<usize>,
) -> Result<(), tokio::task::JoinError> {
    let mut set = JoinSet::new();
    for i in range {
        while set.len() >= 8 {
            set.join_next().await.expect("a task")?;
        }
        let (http, nodes, acked) = (http.clone(), nodes.to_vec(), acked.clone());
        set.spawn(async move {
            let pid = format!("ask{i}");
            if let Some(sent) = answer_once(&http, &nodes, &pid, i as u64).await {
                acked.lock().expect("acked").push((pid, i as u64, sent));
            }
        });
    }
    while let Some(r) = set.join_next().await {
        r?;
    }
    Ok(())
}

/// The acknowledged answers that are not in their processes (each
/// process completed with its answer), waited for with one hang guard for
/// all: a lost answer is not waited for again.
pub async fn lost_answers(
    http: &reqwest::Client,
    nodes: &[String],
    acked: &[(String, u64, Instant)],
) -> Vec<String> {
    let mut lost = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    for (pid, n, _) in acked {
        loop {
            let (_, body) = process(http, nodes, pid).await;
            if body["process"]["state"] == "completed"
                && body["process"]["outputs"]["answer"] == json!(n)
            {
                break;
            }
            if Instant::now() > deadline {
                lost.push(format!(
                    "{pid} ({}, answer {})",
                    body["process"]["state"], body["process"]["outputs"]["answer"]
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    lost
}

/// The count in environment variable `name`, or `default`.
pub fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Drives a window that began at `stopped` (a standby or replica cut
/// off) while answers are being sent: with `safe`, asserts for the 5 s
/// the window lasts that no answer sent in it is acknowledged (`unsafe_ack`
/// is the failure's message); without, waits until at least three are (a
/// hang guard of 90 s).
pub async fn drive_window(acked: &Acked, stopped: Instant, safe: bool, unsafe_ack: &str) {
    loop {
        let in_window = acked
            .lock()
            .expect("acked")
            .iter()
            .filter(|(_, _, sent)| *sent >= stopped)
            .count();
        let done = if safe {
            assert_eq!(in_window, 0, "{unsafe_ack}");
            stopped.elapsed() >= Duration::from_secs(5)
        } else {
            in_window >= 3
        };
        if done {
            return;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(90),
            "no answers were acknowledged in the window"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Two `acts serve --cluster` nodes asking questions: see
/// [`two_nodes_asking`].
pub struct AskingNodes {
    pub n1: NodeProc,
    pub n2: NodeProc,
    /// Their URLs.
    pub nodes: Vec<String>,
    /// The answers acknowledged so far.
    pub acked: Acked,
    /// When the answering began.
    pub started: Instant,
}

/// Two nodes `n1`, `n2` on `store`, the [`ASK`] model deployed, `asks`
/// processes `ask{i}` started, and the first quarter of them answered
/// (before a failover test's window).
pub async fn two_nodes_asking(http: &reqwest::Client, store: &str, asks: usize) -> AskingNodes {
    let n1 = NodeProc::spawn(store, "n1");
    let n2 = NodeProc::spawn(store, "n2");
    settled(http, &n1.url, &["n1", "n2"]).await;
    deploy(http, &n1.url, ASK).await;
    let nodes = vec![n1.url.clone(), n2.url.clone()];
    let work: Vec<(String, &'static str)> = (0..asks).map(|i| (format!("ask{i}"), "ask")).collect();
    start_all(http, &nodes, &work).await;
    let started = Instant::now();
    let acked: Acked = Arc::default();
    answer_all(http, &nodes, &acked, 0..asks / 4)
        .await
        .expect("answering before the window");
    AskingNodes {
        n1,
        n2,
        nodes,
        acked,
        started,
    }
}
