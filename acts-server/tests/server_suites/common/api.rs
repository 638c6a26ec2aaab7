//! The HTTP API's test helpers: a router over a fresh engine, one call
//! with its answer checked against the OpenAPI document, and the approval
//! model's deploy, start and interrupt.

use acts::Engine;
use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::contract;

pub const APPROVAL: &str = r#"
id: approval
ver: "1"
steps:
  - id: ask
    uses: acts.core.irq
    params: { key: approve }
  - id: done
    uses: acts.transform.set
    params: { approved: true }
"#;

pub async fn app() -> (Router, Engine) {
    let engine = Engine::builder().start().await.expect("engine starts");
    (acts_server::router(engine.clone()), engine)
}

/// Sends one request; returns the status and the body as JSON (`Null`
/// when empty, a string when not JSON).
pub async fn call(
    app: &Router,
    method: Method,
    uri: &str,
    body: Option<&str>,
) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_owned())))
        .expect("a valid request");
    send(app, req).await
}

/// Sends `req`; the status and the body as [`call`] reads it. Every
/// answer is checked against the OpenAPI document.
pub async fn send(app: &Router, req: Request<Body>) -> (StatusCode, Value) {
    let (method, path) = (req.method().to_string(), req.uri().path().to_owned());
    let res = app.clone().oneshot(req).await.expect("the router answers");
    let status = res.status();
    let content_type = res
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bytes = res
        .into_body()
        .collect()
        .await
        .expect("the body")
        .to_bytes();
    if let Err(e) = contract::check(
        &method,
        &path,
        status.as_u16(),
        content_type.as_deref(),
        &bytes,
    ) {
        panic!("the answer breaks the OpenAPI document: {e}");
    }
    let value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    (status, value)
}

pub fn error_code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("<no error code>")
}

pub async fn deploy(app: &Router) {
    let (status, body) = call(app, Method::POST, "/api/v1/models", Some(APPROVAL)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

pub async fn start(app: &Router, pid: &str) -> Value {
    let (status, body) = start_with(app, json!({ "pid": pid })).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

/// Starts a process of `approval` with start options `vars`.
pub async fn start_with(app: &Router, vars: Value) -> (StatusCode, Value) {
    let req = json!({"model": "approval", "vars": vars});
    call(
        app,
        Method::POST,
        "/api/v1/processes",
        Some(&req.to_string()),
    )
    .await
}

/// The interrupt task of `pid` (it waits at `ask`).
pub async fn irq_tid(app: &Router, pid: &str) -> String {
    let (status, body) = call(app, Method::GET, &format!("/api/v1/processes/{pid}"), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .find(|t| t["state"] == "interrupted")
        .unwrap_or_else(|| panic!("an interrupt waits: {body}"))["tid"]
        .as_str()
        .expect("a tid")
        .to_owned()
}
