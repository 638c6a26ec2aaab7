//! The REST routes of acts 0.25's web plugin, beside `/api/v1`: deploy,
//! list, get and remove models, start by id and from a model, packages
//! and catalogues, the message stream (unnamed events, acked by id, the
//! unacked re-sent to a new stream), snapshots, hooks, `/health`; every
//! answer in the plugin's envelope; a `text/plain` body is refused (415).

use crate::common;
use common::*;

use acts::Engine;
use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

const APPROVAL: &str = "id: approval\nver: '1'\non:\n  - id: by_hand\n    kind: manual\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: approve }\n";

async fn app() -> Router {
    let engine = Engine::builder().start().await.expect("engine starts");
    acts_server::router(engine)
}

async fn post(app: &Router, uri: &str, body: Value) -> (StatusCode, Value) {
    call(
        app,
        Method::POST,
        uri,
        Some(body.to_string()),
        "application/json",
    )
    .await
}

async fn call(
    app: &Router,
    method: Method,
    uri: &str,
    body: Option<String>,
    content_type: &str,
) -> (StatusCode, Value) {
    let len = body.as_ref().map_or(0, String::len);
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .header("content-length", len)
        .body(body.map_or_else(Body::empty, Body::from))
        .expect("a valid request");
    let res = app.clone().oneshot(req).await.expect("the router answers");
    let status = res.status();
    let bytes = res
        .into_body()
        .collect()
        .await
        .expect("the body")
        .to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, value)
}

fn ok(r: (StatusCode, Value)) -> Value {
    assert_eq!(r.0, StatusCode::OK, "{}", r.1);
    assert_eq!(r.1["code"], "ok", "{}", r.1);
    r.1["data"].clone()
}

#[tokio::test]
async fn the_web_plugins_routes_answer_in_its_envelope() {
    let app = app().await;
    assert_eq!(
        call(&app, Method::GET, "/health", None, "text/plain").await,
        (StatusCode::OK, Value::String("ok".into()))
    );
    ok(post(
        &app,
        "/api/model/deploy",
        json!({"fmt": "yml", "model": APPROVAL}),
    )
    .await);
    let list = ok(post(
        &app,
        "/api/model/list",
        json!({"offset": 0, "limit": 10, "order_by": []}),
    )
    .await);
    assert_eq!(list["count"], 1);
    assert_eq!(list["rows"][0]["id"], "approval");
    let got = ok(post(
        &app,
        "/api/model/get",
        json!({"id": "approval", "fmt": "json"}),
    )
    .await);
    assert!(
        got["data"]
            .as_str()
            .is_some_and(|d| d.contains("acts.core.irq")),
        "{got}"
    );

    // start by id, and from a model (deployed, then started)
    let pid = ok(post(
        &app,
        "/api/proc/start",
        json!({"mode": "id", "id": "approval", "options": {"amount": 3}}),
    )
    .await);
    assert!(pid.as_str().is_some_and(|p| !p.is_empty()), "{pid}");
    let other = "id: other\nver: '1'\nsteps:\n  - id: s\n    uses: acts.core.msg\n";
    ok(post(
        &app,
        "/api/proc/start",
        json!({"mode": "model", "fmt": "yml", "model": other}),
    )
    .await);
    let (status, body) = post(&app, "/api/proc/start", json!({"mode": "nope"})).await;
    assert_eq!(
        (status, body["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("error"))
    );
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("'nope'")),
        "{body}"
    );

    // packages and catalogues
    let packs = ok(post(
        &app,
        "/api/pack/list",
        json!({"catalog": "core", "search": "irq"}),
    )
    .await);
    assert!(
        packs["rows"]
            .as_array()
            .is_some_and(|r| r.iter().any(|p| p["id"] == "acts.core.irq")),
        "{packs}"
    );
    let cats = ok(call(
        &app,
        Method::GET,
        "/api/pack/catalogs",
        None,
        "application/json",
    )
    .await);
    assert!(
        cats.as_array()
            .is_some_and(|c| c.iter().any(|c| c["id"] == "core"))
    );
    let irq = ok(post(&app, "/api/pack", json!({"id": "acts.core.irq"})).await);
    assert_eq!(irq["id"], "acts.core.irq");

    // snapshots
    ok(post(
        &app,
        "/api/snap/upsert",
        json!({"name": "profile", "scope": "u1", "rev": 2, "data": {"a": 1}}),
    )
    .await);
    let snap = ok(post(
        &app,
        "/api/snap/get",
        json!({"name": "profile", "scope": "u1"}),
    )
    .await);
    assert_eq!(snap["rev"], 2);
    assert_eq!(
        ok(post(&app, "/api/snap/ls", json!({"name": "profile"})).await)
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    ok(post(
        &app,
        "/api/snap/remove",
        json!({"name": "profile", "scope": "u1"}),
    )
    .await);
    assert_eq!(
        ok(post(
            &app,
            "/api/snap/get",
            json!({"name": "profile", "scope": "u1"})
        )
        .await),
        Value::Null
    );

    // hooks: a trigger started by a POST; an unknown one is refused by name
    // (404, the status of an unknown resource, in the plugin's envelope)
    let started = ok(post(&app, "/hooks/approval:by_hand", json!({"amount": 9})).await);
    assert!(started["pid"].is_string(), "{started}");
    let (status, body) = post(&app, "/hooks/approval:nope", json!({})).await;
    assert_eq!(
        (status, body["code"].clone()),
        (StatusCode::NOT_FOUND, json!("error"))
    );
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("approval:nope")),
        "{body}"
    );

    // a body that is not JSON is refused as the plugin does
    let (status, _) = call(
        &app,
        Method::POST,
        "/api/model/list",
        Some("{}".into()),
        "text/plain",
    )
    .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    ok(post(&app, "/api/model/rm", json!({"id": "other"})).await);
}

async fn open_stream(app: &Router) -> Body {
    let req = Request::builder()
        .uri("/api/msg/sse?id=web&type=act&state=created")
        .body(Body::empty())
        .expect("a request");
    let res = app.clone().oneshot(req).await.expect("the router answers");
    assert_eq!(res.status(), StatusCode::OK);
    res.into_body()
}

#[tokio::test]
async fn the_message_stream_re_sends_what_was_not_acked() {
    let app = app().await;
    ok(post(
        &app,
        "/api/model/deploy",
        json!({"fmt": "yml", "model": APPROVAL}),
    )
    .await);
    let mut body = open_stream(&app).await;
    let pid = ok(post(
        &app,
        "/api/proc/start",
        json!({"mode": "id", "id": "approval"}),
    )
    .await);
    let event = next_event(&mut body).await;
    assert!(!event.contains("event:"), "an unnamed event: {event}");
    let first = event_data(&event);
    assert_eq!(
        (first["pid"].clone(), first["state"].clone()),
        (pid.clone(), json!("created"))
    );
    drop(body);

    // a new stream of the same client gets the unacked message again
    let mut body = open_stream(&app).await;
    let again = event_data(&next_event(&mut body).await);
    assert_eq!(again["id"], first["id"]);
    ok(post(&app, "/api/msg/ack", json!({"id": again["id"]})).await);
    drop(body);

    // acked: a new stream's first message is the next process's
    let mut body = open_stream(&app).await;
    let next_pid = ok(post(
        &app,
        "/api/proc/start",
        json!({"mode": "id", "id": "approval"}),
    )
    .await);
    let next = event_data(&next_event(&mut body).await);
    assert_eq!(next["pid"], next_pid, "the acked message is not sent again");
}
