//! A caller's W3C `traceparent` is stored with what its request starts or
//! answers, also when the server exports no traces (so a trace can
//! continue once it does, or on another node); a malformed one is ignored.

use acts::Engine;
use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

const APPROVAL: &str = r#"
id: approval
ver: "1"
steps:
  - id: ask
    uses: acts.core.irq
    params: { key: approve }
"#;

const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const ANSWER: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

async fn call(app: &Router, method: Method, uri: &str, tp: Option<&str>, body: Value) -> Value {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json");
    if let Some(tp) = tp {
        req = req.header("traceparent", tp);
    }
    let req = req
        .body(Body::from(body.to_string()))
        .expect("a valid request");
    let res = app.clone().oneshot(req).await.expect("the router answers");
    let status = res.status();
    let bytes = res.into_body().collect().await.expect("a body").to_bytes();
    assert!(status.is_success(), "{uri}: {status} {bytes:?}");
    if status == StatusCode::NO_CONTENT {
        return Value::Null;
    }
    serde_json::from_slice(&bytes).expect("JSON")
}

/// The root task and the interrupt of process `pid`.
async fn root_and_irq(app: &Router, pid: &str) -> (Value, Value) {
    let uri = format!("/api/v1/processes/{pid}");
    let p = call(app, Method::GET, &uri, None, Value::Null).await;
    let tasks = p["tasks"].as_array().expect("tasks");
    let find = |want: &dyn Fn(&Value) -> bool| tasks.iter().find(|t| want(t)).cloned();
    let root = find(&|t| t["kind"] == "workflow").expect("the root");
    let irq = find(&|t| t["uses"] == "acts.core.irq" && t["kind"] == "act").expect("the irq");
    (root, irq)
}

/// The stored `__traceparent` of the root task and of the interrupt.
async fn stored(app: &Router, pid: &str) -> (Value, Value) {
    let (root, irq) = root_and_irq(app, pid).await;
    (
        root["data"]["__traceparent"].clone(),
        irq["data"]["__traceparent"].clone(),
    )
}

/// The interrupt's task id.
async fn irq_of(app: &Router, pid: &str) -> String {
    let (_, irq) = root_and_irq(app, pid).await;
    irq["tid"].as_str().expect("a task id").to_owned()
}

#[tokio::test]
async fn the_callers_trace_context_is_stored_with_the_process_and_the_answer() {
    let engine = Engine::builder().start().await.expect("engine starts");
    let app = acts_server::router(engine.clone());
    engine
        .executor()
        .model()
        .deploy_yaml(APPROVAL)
        .await
        .expect("deploys");
    let start = json!({"model": "approval", "vars": {"pid": "p1"}});
    call(&app, Method::POST, "/api/v1/processes", Some(CALLER), start).await;
    let tid = irq_of(&app, "p1").await;
    let uri = format!("/api/v1/processes/p1/tasks/{tid}/complete");
    call(&app, Method::POST, &uri, Some(ANSWER), json!({"ok": true})).await;
    assert_eq!(stored(&app, "p1").await, (json!(CALLER), json!(ANSWER)));

    // Malformed or absent: nothing is stored (and nothing fails).
    let start = json!({"model": "approval", "vars": {"pid": "p2"}});
    call(
        &app,
        Method::POST,
        "/api/v1/processes",
        Some("00-zz-yy-01"),
        start,
    )
    .await;
    let tid = irq_of(&app, "p2").await;
    let uri = format!("/api/v1/processes/p2/tasks/{tid}/complete");
    call(&app, Method::POST, &uri, None, json!({})).await;
    assert_eq!(stored(&app, "p2").await, (Value::Null, Value::Null));
    engine.close().await;
}
