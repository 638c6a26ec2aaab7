//! `acts.core.http` through the engine, against a local HTTP server on
//! 127.0.0.2 (allowed as one private network, so loopback proper stays
//! refused): the reference's example model, every refused address, a
//! redirect into loopback, timeouts, a 50 MB answer cut at the cap, error
//! statuses as ecodes, retries, and a crash between the request and its
//! commit retried with the same `Idempotency-Key`.

use crate::support;
use support::*;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use acts::{ChannelOptions, TaskState, Vars};
use acts_packages::{HttpConfig, PackagesConfig};
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

/// What the server saw and the switches a test turns.
#[derive(Default)]
struct Seen {
    /// Every request: its path and its `Idempotency-Key`.
    calls: Mutex<Vec<(String, Option<String>)>>,
    /// Chunks of `/big` produced.
    big_chunks: AtomicUsize,
    /// `/flaky` calls.
    flaky: AtomicUsize,
    /// Keys `/pay` applied (a server that honours the header).
    applied: Mutex<HashMap<String, u32>>,
    /// Told when `/pay` is called.
    pay_called: Mutex<Option<mpsc::UnboundedSender<()>>>,
    /// `/pay` answers once this is true.
    pay_release: Mutex<Option<watch::Receiver<bool>>>,
}

struct Server {
    addr: SocketAddr,
    seen: Arc<Seen>,
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn calls(&self) -> Vec<(String, Option<String>)> {
        self.seen.calls.lock().clone()
    }
}

fn key(h: &HeaderMap) -> Option<String> {
    h.get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

async fn serve() -> Server {
    let seen = Arc::new(Seen::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0")
        .await
        .expect("bind 127.0.0.2");
    let addr = listener.local_addr().expect("addr");
    let app = axum::Router::new()
        .route(
            "/hello",
            get(
                |h: HeaderMap, Query(q): Query<HashMap<String, String>>| async move {
                    Json(json!({"query": q, "key": key(&h)}))
                },
            ),
        )
        .route(
            "/world",
            post(|Json(body): Json<Value>| async move { Json(json!({"got": body})) }),
        )
        .route(
            "/status/{code}",
            get(|Path(code): Path<u16>| async move {
                (
                    StatusCode::from_u16(code).unwrap_or(StatusCode::IM_A_TEAPOT),
                    "no such thing",
                )
            }),
        )
        .route(
            "/big",
            get(|State(seen): State<Arc<Seen>>| async move {
                let chunks = futures_util::stream::iter(0..50).map(move |_| {
                    seen.big_chunks.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, std::io::Error>(vec![b'x'; 1024 * 1024])
                });
                Response::builder()
                    .header("content-type", "application/octet-stream")
                    .body(Body::from_stream(chunks))
                    .expect("response")
            }),
        )
        .route(
            "/slow",
            get(|| async {
                std::future::pending::<()>().await;
                "never"
            }),
        )
        .route(
            "/to-loopback",
            get(move || async move {
                Redirect::temporary(&format!("http://127.0.0.1:{}/hello", addr.port()))
            }),
        )
        .route(
            "/to-self",
            get(move || async move { Redirect::temporary(&format!("http://{addr}/hello")) }),
        )
        .route("/flaky", get(flaky).post(flaky))
        .route("/pay", post(pay))
        .layer(axum::middleware::from_fn_with_state(seen.clone(), record))
        .with_state(seen.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Server { addr, seen }
}

async fn record(
    State(seen): State<Arc<Seen>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    seen.calls
        .lock()
        .push((req.uri().path().to_owned(), key(req.headers())));
    next.run(req).await
}

async fn flaky(State(seen): State<Arc<Seen>>) -> Response {
    if seen.flaky.fetch_add(1, Ordering::SeqCst) < 2 {
        (StatusCode::SERVICE_UNAVAILABLE, "later").into_response()
    } else {
        Json(json!({"ok": true})).into_response()
    }
}

async fn pay(State(seen): State<Arc<Seen>>, h: HeaderMap) -> Response {
    let k = key(&h).unwrap_or_default();
    if let Some(tx) = seen.pay_called.lock().take() {
        let _ = tx.send(());
    }
    let release = seen.pay_release.lock().clone();
    if let Some(mut r) = release {
        let _ = r.wait_for(|go| *go).await;
    }
    let times = {
        let mut applied = seen.applied.lock();
        let n = applied.entry(k.clone()).or_insert(0);
        *n += 1;
        *n
    };
    Json(json!({"paid": k, "seen": times})).into_response()
}

use futures_util::StreamExt as _;

/// The packages with 127.0.0.2 allowed (and every other private address
/// refused), quick retries.
fn config() -> PackagesConfig {
    PackagesConfig {
        http: HttpConfig {
            allowed_private_networks: vec!["127.0.0.2/32".into()],
            retry_backoff_ms: 1,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn get_act(url: &str) -> String {
    one_act(
        "get",
        "acts.core.http",
        &format!("{{ url: '{url}', method: GET }}"),
    )
}

#[tokio::test]
async fn the_reference_example_model_runs() {
    let server = serve().await;
    let engine = engine(&config(), None).await;
    let model = format!(
        r#"
name: http example
id: http-example
ver: "1"
inputs:
  key1: 1
  key2: 2
steps:
  - name: http step
    id: one
    uses: acts.core.http
    params:
      url: {hello}
      method: GET
      params:
        - key: key1
          value: '${{{{ key1 }}}}'
        - key: key2
          value: '${{{{ key2 }}}}'
  - name: http step 2
    id: two
    uses: acts.core.http
    params:
      url: {world}
      method: POST
      content-type: json
      body:
        data: '${{{{ $inputs().data }}}}'
"#,
        hello = server.url("/hello"),
        world = server.url("/world"),
    );
    // acts 0.25 reads `inputs:` as a schema of the start options (its
    // README's example is older): the values come with the start
    let start = json!({"key1": 1, "key2": 2})
        .as_object()
        .cloned()
        .unwrap_or_default();
    let p = run(&engine, &model, start).await;
    assert_eq!(p.state, TaskState::Completed, "{p:?}");
    let got = &p.outputs["data"]["got"]["data"];
    assert_eq!(got["query"], json!({"key1": "1", "key2": "2"}), "{p:?}");
    let k = got["key"].as_str().expect("an Idempotency-Key was sent");
    assert!(k.starts_with(&format!("acts-{}-", p.pid)), "{k}");
    let calls = server.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_ne!(calls[0].1, calls[1].1, "each act has its own key");
    engine.close().await;
}

#[tokio::test]
async fn refused_addresses_fail_the_act_and_nothing_is_sent() {
    let server = serve().await;
    let port = server.addr.port();
    let strict = PackagesConfig::default();
    let engine = engine(&strict, None).await;
    for url in [
        server.url("/hello"),
        format!("http://127.0.0.1:{port}/hello"),
        format!("http://localhost:{port}/hello"),
        format!("http://0x7f000001:{port}/hello"),
        format!("http://[::ffff:127.0.0.1]:{port}/hello"),
        format!("http://[::1]:{port}/hello"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://10.0.0.1/".to_owned(),
        "http://192.168.0.1/".to_owned(),
        "file:///etc/passwd".to_owned(),
    ] {
        let p = run(&engine, &get_act(&url), Vars::new()).await;
        assert_eq!(p.state, TaskState::Error, "{url}: {p:?}");
        let (ecode, message) = failure(&p);
        assert_eq!(ecode, "http.refused", "{url}: {message}");
    }
    engine.close().await;
    // even with private addresses allowed, metadata stays refused
    let open = PackagesConfig {
        http: HttpConfig {
            allow_private_addresses: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let engine = support::engine(&open, None).await;
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://100.100.100.200/",
    ] {
        let p = run(&engine, &get_act(url), Vars::new()).await;
        assert_eq!(failure(&p).0, "http.refused", "{url}");
    }
    assert!(server.calls().is_empty(), "{:?}", server.calls());
    engine.close().await;
}

#[tokio::test]
async fn a_redirect_into_loopback_is_refused_and_an_allowed_one_followed() {
    let server = serve().await;
    let engine = engine(&config(), None).await;
    let p = run(&engine, &get_act(&server.url("/to-loopback")), Vars::new()).await;
    let (ecode, message) = failure(&p);
    assert_eq!(ecode, "http.refused", "{message}");
    assert!(message.contains("loopback"), "{message}");
    let paths: Vec<String> = server.calls().into_iter().map(|c| c.0).collect();
    assert_eq!(paths, vec!["/to-loopback"]);
    let p = run(&engine, &get_act(&server.url("/to-self")), Vars::new()).await;
    assert_eq!(p.state, TaskState::Completed, "{p:?}");
    assert_eq!(p.outputs["data"]["query"], json!({}));
    engine.close().await;
}

#[tokio::test]
async fn the_host_allow_list_refuses_other_hosts() {
    let server = serve().await;
    let mut c = config();
    c.http.allowed_hosts = vec!["*.example.com".into()];
    let engine = engine(&c, None).await;
    let p = run(&engine, &get_act(&server.url("/hello")), Vars::new()).await;
    let (ecode, message) = failure(&p);
    assert_eq!(ecode, "http.refused");
    assert!(message.contains("allowed-hosts"), "{message}");
    assert!(server.calls().is_empty());
    engine.close().await;
}

#[tokio::test]
async fn timeouts_fail_the_act_and_an_act_may_only_tighten_them() {
    let server = serve().await;
    let mut c = config();
    c.http.retries = 0;
    let engine = engine(&c, None).await;
    let slow = one_act(
        "slow",
        "acts.core.http",
        &format!(
            "{{ url: '{}', method: GET, timeout-ms: 200 }}",
            server.url("/slow")
        ),
    );
    let p = run(&engine, &slow, Vars::new()).await;
    assert_eq!(failure(&p).0, "http.timeout", "{p:?}");
    let wide = one_act(
        "wide",
        "acts.core.http",
        &format!(
            "{{ url: '{}', method: GET, timeout-ms: 3600000 }}",
            server.url("/slow")
        ),
    );
    let p = run(&engine, &wide, Vars::new()).await;
    let (ecode, message) = failure(&p);
    assert_eq!(ecode, "http.params");
    assert!(message.contains("only tighten"), "{message}");
    engine.close().await;
}

#[tokio::test]
async fn a_50_mb_answer_is_cut_at_the_cap() {
    let server = serve().await;
    let engine = engine(&config(), None).await;
    let p = run(&engine, &get_act(&server.url("/big")), Vars::new()).await;
    let (ecode, message) = failure(&p);
    assert_eq!(ecode, "http.too_large", "{message}");
    assert!(message.contains("1048576"), "{message}");
    // the client stopped reading: the server never produced the rest
    let made = server.seen.big_chunks.load(Ordering::SeqCst);
    assert!(made < 50, "all {made} chunks of 1 MiB were produced");
    engine.close().await;
}

#[tokio::test]
async fn an_error_status_fails_the_act_with_an_ecode_a_catch_matches() {
    let server = serve().await;
    let engine = engine(&config(), None).await;
    let caught = format!(
        r#"
id: caught
ver: "1"
steps:
  - id: s
    uses: acts.core.http
    params: {{ url: '{}', method: GET }}
    catches:
      - id: c
        on: "404"
        uses: acts.transform.set
        params: {{ missing: true }}
"#,
        server.url("/status/404")
    );
    let p = run(&engine, &caught, Vars::new()).await;
    assert_eq!(p.state, TaskState::Completed, "{p:?}");
    assert_eq!(p.outputs.get("missing"), Some(&json!(true)), "{p:?}");
    let p = run(&engine, &get_act(&server.url("/status/500")), Vars::new()).await;
    let (ecode, message) = failure(&p);
    assert_eq!(ecode, "500");
    assert!(message.contains("no such thing"), "{message}");
    engine.close().await;
}

#[tokio::test]
async fn idempotent_requests_are_retried_with_the_same_key_and_posts_are_not() {
    let server = serve().await;
    let engine = engine(&config(), None).await;
    let p = run(&engine, &get_act(&server.url("/flaky")), Vars::new()).await;
    assert_eq!(p.state, TaskState::Completed, "{p:?}");
    let calls = server.calls();
    assert_eq!(calls.len(), 3, "two 503s, then the answer: {calls:?}");
    assert!(calls.iter().all(|c| c.1 == calls[0].1 && c.1.is_some()));
    server.seen.flaky.store(0, Ordering::SeqCst);
    let post = one_act(
        "post",
        "acts.core.http",
        &format!("{{ url: '{}', method: POST }}", server.url("/flaky")),
    );
    let p = run(&engine, &post, Vars::new()).await;
    assert_eq!(failure(&p).0, "503", "{p:?}");
    assert_eq!(server.calls().len(), 4, "a POST is not retried on 503");
    engine.close().await;
}

#[tokio::test]
async fn a_crash_between_the_request_and_its_commit_retries_it_once_with_the_same_key() {
    let server = serve().await;
    let (called_tx, mut called) = mpsc::unbounded_channel();
    let (release_tx, release) = watch::channel(false);
    *server.seen.pay_called.lock() = Some(called_tx);
    *server.seen.pay_release.lock() = Some(release);
    let store = Arc::new(acts_testkit::CrashStore::new());
    let first = support::engine(&config(), Some(store.clone())).await;
    let model = one_act(
        "pay",
        "acts.core.http",
        &format!(
            "{{ url: '{}', method: POST, body: {{ amount: 5 }} }}",
            server.url("/pay")
        ),
    );
    let exec = first.executor();
    let info = exec.model().deploy_yaml(&model).await.expect("deploy");
    let pid = exec
        .proc()
        .start(&info.id, Vars::new())
        .await
        .expect("start")
        .pid;
    // the request is out; the process dies before its result is stored
    tokio::time::timeout(HANG, called.recv())
        .await
        .expect("the request is made");
    store.crash_after(store.committed().await);
    release_tx.send(true).expect("release");
    let _ = tokio::time::timeout(HANG, first.close()).await;
    // a restart finds the act running and makes the request again
    let recovered: Arc<dyn acts::KvStore> = Arc::new(store.recover().await);
    let second = support::builder(&config(), Some(recovered))
        .resume_on_start(false)
        .start()
        .await
        .expect("restart");
    let mut rx = second.channel(ChannelOptions::default()).subscribe();
    second.runtime().resume().await.expect("resume");
    let p = wait_end(&second, &mut rx, &pid).await;
    assert_eq!(p.state, TaskState::Completed, "{p:?}");
    let pays: Vec<Option<String>> = server
        .calls()
        .into_iter()
        .filter(|c| c.0 == "/pay")
        .map(|c| c.1)
        .collect();
    assert_eq!(pays.len(), 2, "once before the crash, once after: {pays:?}");
    assert_eq!(pays[0], pays[1], "the same Idempotency-Key both times");
    let applied = server.seen.applied.lock().clone();
    assert_eq!(applied.len(), 1, "one key: {applied:?}");
    assert_eq!(p.outputs["data"]["seen"], json!(2), "{p:?}");
    second.close().await;
}
