//! The document says every rule the server enforces: each request the
//! server once refused although the document allowed it (found by the
//! API fuzzer with `positive_data_acceptance` on) is now either outside
//! the document and refused by the server, or inside it and taken.

use acts::Engine;
use axum::Router;
use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::common::contract;

const APPROVAL: &str = "id: approval\nver: '1'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: approve }\n";

async fn call(app: &Router, method: &str, uri: &str, body: Option<&Value>) -> (u16, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(body.map(Value::to_string).unwrap_or_default()))
        .expect("a request");
    let res = app.clone().oneshot(req).await.expect("an answer");
    let status = res.status().as_u16();
    let bytes = res.into_body().collect().await.expect("a body").to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn doc() -> Value {
    serde_json::from_str(&acts_server::openapi_json_text()).expect("the document is JSON")
}

/// Whether the document allows `body` as the JSON request body of
/// `method template`.
fn body_allowed(template: &str, method: &str, body: &Value) -> Result<(), String> {
    let schema =
        doc()["paths"][template][method]["requestBody"]["content"]["application/json"]["schema"]
            .clone();
    assert!(!schema.is_null(), "{method} {template} has a JSON body");
    contract::validate(&schema, body)
}

/// Whether the document allows `value` for the parameter `name` of
/// `method template`.
fn param_allowed(template: &str, method: &str, name: &str, value: Value) -> Result<(), String> {
    let params = doc()["paths"][template][method]["parameters"].clone();
    let p = params
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{method} {template} has a parameter {name}"))
        .clone();
    contract::validate(&p["schema"], &value)
}

/// Refused by the document and by the server (a 4xx that says so).
async fn refused_by_both(app: &Router, method: &str, template: &str, uri: &str, body: &Value) {
    assert!(
        body_allowed(template, &method.to_lowercase(), body).is_err(),
        "the document allows {method} {uri} {body}"
    );
    let (status, answer) = call(app, method, uri, Some(body)).await;
    assert_eq!(status, 400, "{method} {uri} {body}: {answer}");
}

/// Allowed by the document and taken by the server (`ok`: the status).
async fn taken(
    app: &Router,
    method: &str,
    template: &str,
    uri: &str,
    body: &Value,
    ok: u16,
) -> Value {
    if let Err(e) = body_allowed(template, &method.to_lowercase(), body) {
        panic!("the document refuses {method} {uri} {body}: {e}");
    }
    let (status, answer) = call(app, method, uri, Some(body)).await;
    assert_eq!(status, ok, "{method} {uri} {body}: {answer}");
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rule_the_server_enforces_is_in_the_document() {
    let engine = Engine::builder().start().await.expect("engine");
    engine
        .executor()
        .model()
        .deploy_yaml(APPROVAL)
        .await
        .expect("deploy");
    let app = acts_server::router(engine.clone());

    // A revision beyond u32: outside the document (its bounds), refused.
    let rev = "/api/v1/models/{id}/versions/{rev}";
    assert!(param_allowed(rev, "get", "rev", json!(4_294_967_296u64)).is_err());
    assert!(param_allowed(rev, "get", "rev", json!(4_294_967_295u64)).is_ok());
    let (status, _) = call(
        &app,
        "GET",
        "/api/v1/models/approval/versions/4294967296",
        None,
    )
    .await;
    assert_eq!(status, 400);
    refused_by_both(
        &app,
        "POST",
        "/api/v1/processes",
        "/api/v1/processes",
        &json!({"model": "approval", "rev": 4_294_967_296u64}),
    )
    .await;
    // A limit beyond what the server reads: outside the document.
    assert!(param_allowed("/api/v1/bulk/{id}/items", "get", "limit", json!(1e30)).is_err());

    // Cursors: text of another shape is outside the document; every text of
    // the shape is a place to go on from.
    for (template, method) in [
        ("/api/v1/processes", "get"),
        ("/api/v1/deliveries", "get"),
        ("/api/v1/bulk", "get"),
    ] {
        assert!(
            param_allowed(template, method, "cursor", json!("\u{84}'")).is_err(),
            "{template}"
        );
        assert!(
            param_allowed(template, method, "cursor", json!("00ff")).is_ok(),
            "{template}"
        );
        let (status, answer) = call(&app, "GET", &format!("{template}?cursor=00ff"), None).await;
        assert_eq!(status, 200, "{template}: {answer}");
        let (status, _) = call(&app, "GET", &format!("{template}?cursor=nothex"), None).await;
        assert_eq!(status, 400, "{template}");
    }
    refused_by_both(
        &app,
        "POST",
        "/api/v1/tasks/query",
        "/api/v1/tasks/query",
        &json!({"cursor": "not-a-cursor"}),
    )
    .await;
    let page = taken(
        &app,
        "POST",
        "/api/v1/tasks/query",
        "/api/v1/tasks/query",
        &json!({"cursor": "-6e6f"}),
        200,
    )
    .await;
    assert!(page["tasks"].is_array(), "{page}");
    taken(
        &app,
        "POST",
        "/api/v1/tasks/query",
        "/api/v1/tasks/query",
        &json!({"cursor": ""}),
        200,
    )
    .await;
    refused_by_both(
        &app,
        "POST",
        "/api/v1/tasks/query",
        "/api/v1/tasks/query",
        &json!({"process": {"cursor": "zz"}}),
    )
    .await;
    taken(
        &app,
        "POST",
        "/api/v1/deliveries/query",
        "/api/v1/deliveries/query",
        &json!({"cursor": "0a"}),
        200,
    )
    .await;

    // An integer written with a fraction of zero is that integer.
    taken(
        &app,
        "POST",
        "/api/v1/deliveries/query",
        "/api/v1/deliveries/query",
        &json!({"limit": 9640.0}),
        200,
    )
    .await;
    // ... but an integer beyond its range is not (the server reads it as
    // a float; beyond 2^53 a float is not taken for an integer).
    let req = Request::post("/api/v1/processes/query")
        .header("content-type", "application/json")
        .body(Body::from(r#"{"started_before": -9223372036854775809}"#))
        .expect("a request");
    let res = app.clone().oneshot(req).await.expect("an answer");
    assert_eq!(res.status().as_u16(), 400);

    // A bulk job: a pace of 0, no filter without `all`, options its action
    // does not take, a query that is not an object — outside the document.
    let bulk = "/api/v1/bulk/dry-run";
    for body in [
        json!({"action": "pause", "all": true, "per_second": 0}),
        json!({"action": "pause"}),
        json!({"action": "pause", "where": {"limit": 5, "descending": true}}),
        json!({"action": "resume", "all": true, "reason": "why"}),
        json!({"action": "rewind", "all": true}),
        json!({"action": "migrate", "all": true, "step": "ask", "version": 2}),
        json!({"action": "pause", "all": true, "id": "no spaces"}),
        json!({"action": "pause", "where": [null, null], "all": true}),
        json!({"action": "pause", "all": true, "where": {"cursor": "\u{84}"}}),
    ] {
        refused_by_both(&app, "POST", bulk, bulk, &body).await;
    }
    for body in [
        json!({"action": "pause", "all": true, "per_second": 1}),
        json!({"action": "pause", "where": {"model": "approval"}, "reason": "r"}),
        json!({"action": "rewind", "where": {"state": "running"}, "step": "ask"}),
        json!({"action": "pause", "all": true, "reason": "é".repeat(acts::MAX_BULK_REASON)}),
    ] {
        taken(&app, "POST", bulk, bulk, &body, 200).await;
    }

    // A variable condition needs its model; a model that does not index
    // the variable is what is deployed, not the request: 409.
    let query = "/api/v1/processes/query";
    refused_by_both(
        &app,
        "POST",
        query,
        query,
        &json!({"var": {"name": "amount", "eq": 1}}),
    )
    .await;
    refused_by_both(
        &app,
        "POST",
        query,
        query,
        &json!({"model": "approval", "var": {"name": "amount", "min": 1, "max": "z"}}),
    )
    .await;
    refused_by_both(
        &app,
        "POST",
        query,
        query,
        &json!({"model": "approval", "var": {"name": "amount"}}),
    )
    .await;
    let answer = taken(
        &app,
        "POST",
        query,
        query,
        &json!({"model": "approval", "var": {"name": "amount", "eq": 1}}),
        409,
    )
    .await;
    assert_eq!(answer["error"]["code"], "conflict", "{answer}");

    // Waiting for a gate while parked: nothing matches (an empty page).
    let page = taken(
        &app,
        "POST",
        query,
        query,
        &json!({"state": "none", "waiting_for": "gate"}),
        200,
    )
    .await;
    assert_eq!(page["processes"], json!([]), "{page}");
    let (status, page) = call(
        &app,
        "GET",
        "/api/v1/processes?state=running&waiting_for=admission",
        None,
    )
    .await;
    assert_eq!((status, &page["processes"]), (200, &json!([])), "{page}");

    // A migration to the version the processes are on: 409, as the map
    // naming a step the version lacks.
    let migrate = "/api/v1/models/{id}/migrate";
    let answer = taken(
        &app,
        "POST",
        migrate,
        "/api/v1/models/approval/migrate",
        &json!({"from": 1, "to": 1, "dry_run": true}),
        409,
    )
    .await;
    assert_eq!(answer["error"]["code"], "conflict", "{answer}");
    // The body's model is the path's: the document leaves it out.
    assert!(body_allowed(migrate, "post", &json!({"from": 1, "to": 2, "model": "x"})).is_err());

    // A model is a mapping: a JSON string is outside the document.
    let models = doc()["paths"]["/api/v1/models"]["post"]["requestBody"]["content"].clone();
    for media in ["application/json", "application/yaml"] {
        assert!(
            contract::validate(&models[media]["schema"], &json!("id: x")).is_err(),
            "{media}"
        );
    }
    engine.close().await;
}
