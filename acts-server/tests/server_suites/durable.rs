//! Durable channels over HTTP across a server restart: nothing
//! unacknowledged is lost, nothing acknowledged is sent again. Triggers and
//! hooks start processes; deliveries are listed by state.

use std::time::Duration;

use acts::Engine;
use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

const APPROVAL: &str = "id: approval\nver: '1'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: approve }\n";

const HOOKED: &str = "id: hooked\nver: '1'\non:\n  - id: order\n    kind: hook\nsteps:\n  - id: s\n    uses: acts.transform.set\n    params: { seen: true }\n";

/// Hang guard for reads of a stream (never what decides an outcome).
const GUARD: Duration = Duration::from_secs(60);

async fn call(app: &Router, method: Method, uri: &str, body: &str) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .body(Body::from(body.to_owned()))
        .expect("a request");
    let res = app.clone().oneshot(req).await.expect("an answer");
    let status = res.status();
    let bytes = res.into_body().collect().await.expect("a body").to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// Reads events off an SSE body.
struct Events {
    body: Body,
    buf: String,
}

impl Events {
    async fn open(app: &Router, uri: &str) -> Self {
        let req = Request::builder()
            .uri(uri)
            .body(Body::empty())
            .expect("a request");
        let res = app.clone().oneshot(req).await.expect("the stream opens");
        assert_eq!(res.status(), StatusCode::OK);
        Self {
            body: res.into_body(),
            buf: String::new(),
        }
    }

    /// The next event's id and data (keep-alive comments skipped).
    async fn next(&mut self) -> (String, Value) {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let event: String = self.buf.drain(..end + 2).collect();
                let id = event.lines().find_map(|l| l.strip_prefix("id: "));
                let data = event.lines().find_map(|l| l.strip_prefix("data: "));
                if let (Some(id), Some(data)) = (id, data) {
                    return (
                        id.to_owned(),
                        serde_json::from_str(data).expect("JSON data"),
                    );
                }
                continue;
            }
            let frame = tokio::time::timeout(GUARD, self.body.frame())
                .await
                .expect("an event arrives (hang guard)")
                .expect("the stream is open")
                .expect("a frame");
            if let Ok(data) = frame.into_data() {
                self.buf.push_str(&String::from_utf8_lossy(&data));
            }
        }
    }
}

async fn engine_on(url: &str) -> Engine {
    let store = acts::open_store(url).await.expect("the store opens");
    Engine::builder()
        .store(store)
        .start()
        .await
        .expect("engine starts")
}

async fn start(app: &Router, pid: &str) {
    let body = format!(r#"{{"model": "approval", "vars": {{"pid": "{pid}"}}}}"#);
    let (status, v) = call(app, Method::POST, "/api/v1/processes", &body).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
}

const STREAM: &str = "/api/v1/channels/inbox/stream?type=act&state=created";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_channel_keeps_what_was_not_acked_across_a_restart() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let url = format!("redb:{}", dir.path().join("d.db").display());
    let (acked, kept) = {
        let engine = engine_on(&url).await;
        let app = acts_server::router(engine.clone());
        let (status, _) = call(&app, Method::POST, "/api/v1/models", APPROVAL).await;
        assert_eq!(status, StatusCode::CREATED);
        let mut events = Events::open(&app, STREAM).await;
        start(&app, "p1").await;
        let (m1, data) = events.next().await;
        assert_eq!(data["pid"], "p1");
        let (status, _) = call(
            &app,
            Method::POST,
            &format!("/api/v1/channels/inbox/ack/{m1}"),
            "",
        )
        .await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        start(&app, "p2").await;
        let (m2, data) = events.next().await;
        assert_eq!(data["pid"], "p2");
        // m2 is not acked; the server stops.
        drop(events);
        engine.close().await;
        (m1, m2)
    };
    let engine = engine_on(&url).await;
    let app = acts_server::router(engine.clone());
    let (status, pending) = call(
        &app,
        Method::GET,
        "/api/v1/deliveries?channel=inbox&state=pending",
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(pending.as_array().map(Vec::len), Some(1), "{pending}");
    let mut events = Events::open(&app, STREAM).await;
    let (first, data) = events.next().await;
    assert_eq!(first, kept, "the unacked message comes first");
    assert_eq!(data["pid"], "p2");
    start(&app, "p3").await;
    let (next, data) = events.next().await;
    assert_ne!(next, acked, "an acked message is never sent again");
    assert_eq!(data["pid"], "p3");
    // Unknown ids are 404s.
    let (status, _) = call(&app, Method::POST, "/api/v1/channels/inbox/ack/nope", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = call(&app, Method::GET, "/api/v1/deliveries?state=lost", "").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    drop(events);
    let (status, _) = call(&app, Method::DELETE, "/api/v1/channels/inbox", "").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = call(&app, Method::DELETE, "/api/v1/channels/inbox", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    engine.close().await;
}

#[tokio::test]
async fn hooks_and_triggers_start_processes() {
    let engine = Engine::builder().start().await.expect("engine starts");
    let app = acts_server::router(engine.clone());
    let (status, v) = call(&app, Method::POST, "/api/v1/models", HOOKED).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let (status, triggers) = call(&app, Method::GET, "/api/v1/triggers", "").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        triggers.as_array().is_some_and(|t| !t.is_empty()),
        "{triggers}"
    );
    let (status, started) = call(&app, Method::POST, "/api/v1/hooks/order", r#"{"n": 1}"#).await;
    assert_eq!(status, StatusCode::OK, "{started}");
    assert_eq!(started.as_array().map(Vec::len), Some(1), "{started}");
    let (status, one) = call(
        &app,
        Method::POST,
        "/api/v1/triggers/hooked:order/start",
        "",
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{one}");
    assert_eq!(one["model_id"], "hooked");
    // An unknown trigger is an unknown resource: 404, as every other.
    let (status, body) = call(&app, Method::POST, "/api/v1/triggers/nope:x/start", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"]["code"], "not_found", "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_listed_redelivered_and_discarded() {
    let clock = acts::ManualClock::new(1_000_000);
    let engine = Engine::builder()
        .clock(std::sync::Arc::new(clock.clone()))
        .config({
            let mut v = acts::EngineConfig::default();
            v.delivery_retry = Duration::from_secs(1);
            v.delivery_max_tries = 1;
            v
        })
        .start()
        .await
        .expect("engine starts");
    let app = acts_server::router(engine.clone());
    let (status, _) = call(&app, Method::POST, "/api/v1/models", APPROVAL).await;
    assert_eq!(status, StatusCode::CREATED);
    let mut events = Events::open(&app, STREAM).await;
    start(&app, "d").await;
    let (msg, _) = events.next().await;
    // Never acked: out of its one try, it is a dead letter.
    clock.advance(Duration::from_secs(2));
    engine.runtime().housekeeping().await;
    let (_, dead) = call(&app, Method::GET, "/api/v1/deliveries?state=failed", "").await;
    assert_eq!(dead.as_array().map(Vec::len), Some(1), "{dead}");
    // The same through a paged query, counted.
    let (status, page) = call(
        &app,
        Method::POST,
        "/api/v1/deliveries/query?count=true",
        r#"{"state": "failed", "channel": "inbox", "limit": 10}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["total"], 1);
    assert_eq!(page["deliveries"][0]["msg_id"], msg.as_str());
    assert_eq!(page["next"], Value::Null);
    let (status, _) = call(
        &app,
        Method::POST,
        "/api/v1/deliveries/query",
        r#"{"state": "lost"}"#,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "an unknown state");
    let req = Request::builder()
        .uri("/metrics")
        .body(Body::empty())
        .expect("a request");
    let res = app.clone().oneshot(req).await.expect("an answer");
    let bytes = res.into_body().collect().await.expect("a body").to_bytes();
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("acts_deliveries_dead 1"), "{text}");
    let path = format!("/api/v1/deliveries/inbox/{msg}");
    let (status, v) = call(&app, Method::POST, &format!("{path}/redeliver"), "").await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{v}");
    let (again, _) = events.next().await;
    assert_eq!(again, msg, "redelivered at once, same id");
    // Pending again: neither redelivered nor discarded until it fails.
    let (status, v) = call(&app, Method::POST, &format!("{path}/redeliver"), "").await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    let (status, _) = call(&app, Method::DELETE, &path, "").await;
    assert_eq!(status, StatusCode::CONFLICT);
    clock.advance(Duration::from_secs(2));
    engine.runtime().housekeeping().await;
    let (status, _) = call(&app, Method::DELETE, &path, "").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, dead) = call(&app, Method::GET, "/api/v1/deliveries?state=failed", "").await;
    assert_eq!(dead.as_array().map(Vec::len), Some(0), "{dead}");
    let (status, _) = call(&app, Method::DELETE, &path, "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    engine.close().await;
}

/// `GET /api/v1/deliveries` answers one bounded page (`limit`, at most
/// 1,000) and the cursor of the next in `x-acts-next`: a million dead
/// letters are never one body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delivery_listing_is_paged() {
    let engine = engine_on("memory:").await;
    let app = acts_server::router(engine.clone());
    let (status, _) = call(&app, Method::POST, "/api/v1/models", APPROVAL).await;
    assert_eq!(status, StatusCode::CREATED);
    let mut events = Events::open(&app, STREAM).await;
    for pid in ["a", "b", "c"] {
        start(&app, pid).await;
        events.next().await;
    }
    let page = |uri: String| {
        let app = app.clone();
        async move {
            let req = Request::builder()
                .uri(uri)
                .body(Body::empty())
                .expect("a request");
            let res = app.oneshot(req).await.expect("an answer");
            assert_eq!(res.status(), StatusCode::OK);
            let next = res
                .headers()
                .get("x-acts-next")
                .map(|v| v.to_str().expect("text").to_owned());
            let bytes = res.into_body().collect().await.expect("a body").to_bytes();
            let items: Vec<Value> = serde_json::from_slice(&bytes).expect("an array");
            (items, next)
        }
    };
    let (first, next) = page("/api/v1/deliveries?channel=inbox&limit=2".into()).await;
    assert_eq!(first.len(), 2);
    let next = next.expect("a cursor: one more is left");
    let (rest, last) = page(format!(
        "/api/v1/deliveries?channel=inbox&limit=2&cursor={next}"
    ))
    .await;
    assert_eq!(rest.len(), 1);
    assert_eq!(last, None, "the last page");
    let mut pids: Vec<&str> = first
        .iter()
        .chain(&rest)
        .filter_map(|d| d["pid"].as_str())
        .collect();
    pids.sort_unstable();
    assert_eq!(pids, ["a", "b", "c"]);
    drop(events);
    engine.close().await;
}
