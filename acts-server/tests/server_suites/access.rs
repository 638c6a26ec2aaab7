//! Access control over HTTP: bearer tokens (by hash), 401 without a known
//! one, and for each role what is allowed and what is a 403 that changes
//! nothing; a user's listing and message stream hold only what they may
//! see; every action's principal is in the task's history.

use crate::common;
use common::*;

use acts::Engine;
use acts_server::{Auth, TokenConfig, hash_token};
use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

/// Finance approves; the model is deployed by the admin.
const EXPENSE: &str = r#"
id: expense
ver: "1"
steps:
  - id: approve
    uses: acts.core.irq
    params: { key: finance, to: [role:finance] }
"#;

/// Only Bob is asked.
const PRIVATE: &str = r#"
id: private
ver: "1"
steps:
  - id: ask
    uses: acts.core.irq
    params: { key: bob, to: user:bob }
"#;

fn token(principal: &str, roles: &[&str]) -> TokenConfig {
    TokenConfig {
        principal: principal.into(),
        roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        sha256: hash_token(&format!("{principal}-secret")),
    }
}

async fn app() -> Router {
    let engine = Engine::builder().start().await.expect("engine starts");
    let auth = Auth::from_tokens(&[
        token("root", &["admin"]),
        token("olga", &["operator"]),
        token("ann", &["finance"]),
        token("bob", &[]),
    ])
    .expect("valid tokens");
    acts_server::router_with(engine, auth)
}

/// One request as `who` (`None`: no Authorization header).
async fn call(
    app: &Router,
    who: Option<&str>,
    method: Method,
    uri: &str,
    body: Option<&str>,
) -> (StatusCode, Value) {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json");
    if let Some(w) = who {
        req = req.header(header::AUTHORIZATION, format!("Bearer {w}-secret"));
    }
    let req = req
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_owned())))
        .expect("a valid request");
    let res = app.clone().oneshot(req).await.expect("the router answers");
    let status = res.status();
    let bytes = res.into_body().collect().await.expect("a body").to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, value)
}

/// Only the status of one request as `who`.
async fn status(app: &Router, who: Option<&str>, method: Method, uri: &str) -> StatusCode {
    call(app, who, method, uri, None).await.0
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("<none>")
}

async fn start(app: &Router, who: &str, model: &str) -> String {
    let (s, b) = call(
        app,
        Some(who),
        Method::POST,
        "/api/v1/processes",
        Some(&json!({"model": model}).to_string()),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(b["started_by"], who);
    b["pid"].as_str().expect("a pid").to_owned()
}

async fn waiting_tid(app: &Router, pid: &str) -> String {
    let (_, b) = call(
        app,
        Some("root"),
        Method::GET,
        &format!("/api/v1/processes/{pid}"),
        None,
    )
    .await;
    b["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .find(|t| t["state"] == "interrupted")
        .unwrap_or_else(|| panic!("an interrupt waits: {b}"))["tid"]
        .as_str()
        .expect("tid")
        .to_owned()
}

#[tokio::test]
async fn requests_need_a_known_token_but_health_checks_do_not() {
    let app = app().await;
    let (s, b) = call(&app, None, Method::GET, "/api/v1/models", None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(code(&b), "unauthorized");
    let (s, _) = call(&app, Some("mallory"), Method::GET, "/api/v1/models", None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let req = Request::builder()
        .uri("/api/v1/models")
        .header(header::AUTHORIZATION, "Basic cm9vdDpzZWNyZXQ=")
        .body(Body::empty())
        .expect("request");
    let res = app.clone().oneshot(req).await.expect("answer");
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(res.headers()[header::WWW_AUTHENTICATE], "Bearer");
    for path in ["/healthz", "/readyz"] {
        let (s, _) = call(&app, None, Method::GET, path, None).await;
        assert_eq!(s, StatusCode::OK, "{path}");
    }
    // Metrics are an operator's.
    assert_eq!(
        status(&app, None, Method::GET, "/metrics").await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        status(&app, Some("ann"), Method::GET, "/metrics").await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status(&app, Some("olga"), Method::GET, "/metrics").await,
        StatusCode::OK
    );
}

#[tokio::test]
async fn each_role_may_do_its_part_and_a_denial_changes_nothing() {
    let app = app().await;
    // Models: the admin's.
    for who in ["ann", "olga"] {
        let (s, b) = call(
            &app,
            Some(who),
            Method::POST,
            "/api/v1/models",
            Some(EXPENSE),
        )
        .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{who}: {b}");
        assert_eq!(code(&b), "forbidden");
        assert!(
            b["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("admin role"),
            "{b}"
        );
    }
    let (_, models) = call(&app, Some("root"), Method::GET, "/api/v1/models", None).await;
    assert_eq!(models, json!([]), "nothing deployed");
    for m in [EXPENSE, PRIVATE] {
        let (s, b) = call(&app, Some("root"), Method::POST, "/api/v1/models", Some(m)).await;
        assert_eq!(s, StatusCode::CREATED, "{b}");
    }
    let (s, _) = call(
        &app,
        Some("olga"),
        Method::DELETE,
        "/api/v1/models/expense",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);

    // Ann starts an expense; Bob cannot see it, Ann and Olga can.
    let pid = start(&app, "ann", "expense").await;
    let private = start(&app, "root", "private").await;
    let uri = format!("/api/v1/processes/{pid}");
    assert_eq!(
        status(&app, Some("bob"), Method::GET, &uri).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status(&app, Some("bob"), Method::GET, &format!("{uri}/model")).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status(&app, Some("ann"), Method::GET, &format!("{uri}/model")).await,
        StatusCode::OK
    );
    assert_eq!(
        status(&app, Some("ann"), Method::GET, &uri).await,
        StatusCode::OK
    );
    let total = |v: &Value| v["total"].as_u64().unwrap_or(u64::MAX);
    let (_, list) = call(&app, Some("ann"), Method::GET, "/api/v1/processes", None).await;
    assert_eq!(total(&list), 1, "{list}");
    let (_, list) = call(&app, Some("bob"), Method::GET, "/api/v1/processes", None).await;
    assert_eq!(total(&list), 1, "bob sees only the private one: {list}");
    assert_eq!(list["processes"][0]["pid"], private.as_str());
    let (_, list) = call(&app, Some("olga"), Method::GET, "/api/v1/processes", None).await;
    assert_eq!(total(&list), 2);

    // Bob may not answer finance's interrupt; a user may not abort.
    let tid = waiting_tid(&app, &pid).await;
    let act = |a: &str| format!("/api/v1/processes/{pid}/tasks/{tid}/{a}");
    let (s, b) = call(&app, Some("bob"), Method::POST, &act("next"), None).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{b}");
    let (s, b) = call(&app, Some("ann"), Method::POST, &act("abort"), None).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{b}");
    let (s, _) = call(
        &app,
        Some("ann"),
        Method::POST,
        &format!("{uri}/abort"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, _) = call(&app, Some("ann"), Method::DELETE, &uri, None).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(waiting_tid(&app, &pid).await, tid, "still waiting");

    // Ann answers; the history says so.
    let (s, b) = call(
        &app,
        Some("ann"),
        Method::POST,
        &act("next"),
        Some(r#"{"ok": true}"#),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{b}");
    let (_, b) = call(&app, Some("ann"), Method::GET, &uri, None).await;
    assert_eq!(b["process"]["state"], "completed", "{b}");
    let task = b["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .find(|t| t["tid"] == tid.as_str())
        .expect("the answered task")
        .clone();
    assert_eq!(task["history"][0]["action"], "next");
    assert_eq!(task["history"][0]["by"], "ann");

    // Deliveries and durable channels: an operator's.
    assert_eq!(
        status(&app, Some("ann"), Method::GET, "/api/v1/deliveries").await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status(&app, Some("olga"), Method::GET, "/api/v1/deliveries").await,
        StatusCode::OK
    );
    assert_eq!(
        status(&app, Some("ann"), Method::GET, "/api/v1/channels/c1/stream").await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status(&app, Some("ann"), Method::DELETE, "/api/v1/channels/c1").await,
        StatusCode::FORBIDDEN
    );
    // The operator aborts Bob's process.
    let (s, _) = call(
        &app,
        Some("olga"),
        Method::POST,
        &format!("/api/v1/processes/{private}/abort"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn a_users_stream_carries_only_the_processes_they_may_see() {
    let app = app().await;
    for m in [EXPENSE, PRIVATE] {
        call(&app, Some("root"), Method::POST, "/api/v1/models", Some(m)).await;
    }
    let req = Request::builder()
        .uri("/api/v1/messages?type=act&state=created")
        .header(header::AUTHORIZATION, "Bearer ann-secret")
        .body(Body::empty())
        .expect("request");
    let res = app.clone().oneshot(req).await.expect("the stream opens");
    assert_eq!(res.status(), StatusCode::OK);
    let mut body = res.into_body();
    // First a process Ann may not see, then one she may.
    let hidden = start(&app, "root", "private").await;
    let mine = start(&app, "root", "expense").await;
    let seen = next_event(&mut body).await;
    let m = event_data(&seen);
    assert_eq!(m["pid"], mine.as_str(), "not {hidden}: {seen}");
}

#[tokio::test]
async fn the_dashboard_needs_no_token_but_its_data_does() {
    let app = app().await;
    let req = Request::builder()
        .uri("/")
        .body(Body::empty())
        .expect("request");
    let res = app.clone().oneshot(req).await.expect("answer");
    assert_eq!(res.status(), StatusCode::OK);
    let csp = res.headers()[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap_or_default()
        .to_owned();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    let html = res.into_body().collect().await.expect("body").to_bytes();
    assert!(String::from_utf8_lossy(&html).contains("/ui/app.js"));
    for (path, want) in [
        ("/ui/app.js", StatusCode::OK),
        ("/ui/app.css", StatusCode::OK),
        ("/ui/secrets", StatusCode::NOT_FOUND),
    ] {
        assert_eq!(status(&app, None, Method::GET, path).await, want, "{path}");
    }
    assert_eq!(
        status(&app, None, Method::GET, "/api/v1/me").await,
        StatusCode::UNAUTHORIZED
    );
    let (s, me) = call(&app, Some("ann"), Method::GET, "/api/v1/me", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        me,
        json!({"principal": "ann", "roles": ["finance"], "admin": false, "operator": false, "tokens": true})
    );
    // The inbox: what the caller may answer, with the process's model.
    for m in [EXPENSE, PRIVATE] {
        call(&app, Some("root"), Method::POST, "/api/v1/models", Some(m)).await;
    }
    let expense = start(&app, "root", "expense").await;
    let private = start(&app, "root", "private").await;
    let inbox = |who: &'static str| {
        let app = app.clone();
        async move {
            let (s, v) = call(&app, Some(who), Method::GET, "/api/v1/inbox", None).await;
            assert_eq!(s, StatusCode::OK, "{v}");
            let mut pids: Vec<String> = v
                .as_array()
                .expect("a list")
                .iter()
                .map(|t| {
                    format!(
                        "{}:{}",
                        t["model_id"].as_str().unwrap_or(""),
                        t["pid"].as_str().unwrap_or("")
                    )
                })
                .collect();
            pids.sort();
            pids
        }
    };
    assert_eq!(inbox("ann").await, vec![format!("expense:{expense}")]);
    assert_eq!(inbox("bob").await, vec![format!("private:{private}")]);
    let mut both = vec![format!("expense:{expense}"), format!("private:{private}")];
    both.sort();
    assert_eq!(inbox("olga").await, both);
}
