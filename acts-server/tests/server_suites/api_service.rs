//! The HTTP API's service side end to end over the router: health,
//! readiness and metrics, the live message stream (its filters, a client
//! too slow for its queue), and a store that cannot answer.

use crate::common;
use common::api::*;
use common::*;

use acts::Engine;
use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use tower::ServiceExt;

#[tokio::test]
async fn health_readiness_and_metrics() {
    let (app, _engine) = app().await;
    let (status, _) = call(&app, Method::GET, "/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(&app, Method::GET, "/readyz", None).await;
    assert_eq!(status, StatusCode::OK);
    deploy(&app).await;
    start(&app, "m").await;
    let (status, body) = call(&app, Method::GET, "/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
    let text = body.as_str().expect("text");
    assert!(text.contains("acts_processes_admitted 1"), "{text}");
    assert!(text.contains("acts_deliveries_dead 0"), "{text}");
    // A deploy and a start: at least the start's transition, committed.
    assert!(text.contains("acts_transitions_total 1"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("acts_commits_total ") && l != "acts_commits_total 0"),
        "{text}"
    );
    assert!(
        text.contains(
            "acts_http_requests_total{method=\"POST\",route=\"/api/v1/processes\",status=\"201\"} 1"
        ),
        "{text}"
    );
    // Processes by state, from the state index.
    assert_eq!(
        metric(text, "acts_processes{state=\"running\"}"),
        1.0,
        "{text}"
    );
    assert_eq!(
        metric(text, "acts_processes{state=\"completed\"}"),
        0.0,
        "{text}"
    );
    // The commit histograms: every commit in a bucket, and the sums.
    let commits = metric(text, "acts_commits_total");
    assert_eq!(metric(text, "acts_commit_group_size_count"), commits);
    assert_eq!(
        metric(text, "acts_commit_group_size_bucket{le=\"+Inf\"}"),
        commits
    );
    assert_eq!(
        metric(text, "acts_commit_group_size_sum"),
        metric(text, "acts_commit_batches_total")
    );
    assert_eq!(
        metric(text, "acts_commit_seconds_count"),
        commits + metric(text, "acts_commit_failures_total")
    );
    assert!(
        text.contains("# TYPE acts_commit_seconds histogram"),
        "{text}"
    );
    // Script evaluations: a code step runs one.
    let (status, _) = call(
        &app,
        Method::POST,
        "/api/v1/models",
        Some("id: code\nver: '1'\nsteps:\n  - id: c\n    uses: acts.transform.code\n    params: 'return { x: 1 + 1 }'\n"),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = call(
        &app,
        Method::POST,
        "/api/v1/processes",
        Some(r#"{"model": "code"}"#),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, body) = call(&app, Method::GET, "/metrics", None).await;
    let text = body.as_str().expect("text");
    assert!(
        metric(text, "acts_script_evaluations_total") >= 1.0,
        "{text}"
    );
    assert_eq!(
        metric(text, "acts_script_limit_hits_total{limit=\"time\"}"),
        0.0,
        "{text}"
    );
    assert_eq!(
        metric(text, "acts_processes{state=\"completed\"}"),
        1.0,
        "{text}"
    );
}

/// The value of the sample `name` (with its labels) in a scrape.
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sample '{name}' in:\n{text}"))
}

/// Opens a stream (its response, to read the body of).
async fn open_stream(app: &Router, uri: &str) -> axum::response::Response {
    let req = Request::builder()
        .uri(uri)
        .body(Body::empty())
        .expect("a request");
    app.clone().oneshot(req).await.expect("the stream opens")
}

#[tokio::test]
async fn the_message_stream_carries_what_its_filters_pass() {
    let (app, _engine) = app().await;
    deploy(&app).await;
    let res = open_stream(&app, "/api/v1/messages?type=act&state=created").await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        res.headers()["content-type"].to_str().unwrap_or_default(),
        "text/event-stream"
    );
    let mut body = res.into_body();
    start(&app, "s").await;
    let seen = next_event(&mut body).await;
    assert!(seen.starts_with("event: act\n"), "{seen}");
    let m = event_data(&seen);
    assert_eq!(m["pid"], "s");
    assert_eq!(m["key"], "approve");
    assert_eq!(m["state"], "created");
}

#[tokio::test]
async fn a_client_that_reads_too_slowly_is_cut_off_with_a_lagged_event() {
    let (app, _engine) = app().await;
    deploy(&app).await;
    let res = open_stream(&app, "/api/v1/messages").await;
    let mut body = res.into_body();
    // Nothing is read while more messages than the queue holds are sent
    // (every start sends at least its workflow, step and act messages).
    let starts = acts_server::STREAM_QUEUE / 3 + 10;
    for i in 0..starts {
        start(&app, &format!("p{i}")).await;
    }
    let mut text = String::new();
    loop {
        let frame = tokio::time::timeout(GUARD, body.frame())
            .await
            .expect("the stream moves (hang guard)");
        match frame {
            Some(Ok(f)) => {
                if let Ok(data) = f.into_data() {
                    text.push_str(&String::from_utf8_lossy(&data));
                }
            }
            Some(Err(e)) => panic!("the stream failed: {e}"),
            None => break,
        }
    }
    // The queue was emptied when the client was cut off (its memory given
    // back at once, read or not): what is left is the note.
    let events = text.matches("\n\n").count();
    assert_eq!(events, 1, "only the note: {text}");
    assert!(
        text.starts_with("event: lagged\n") && text.contains("messages were waiting"),
        "{text}"
    );
}

#[tokio::test]
async fn a_store_that_cannot_answer_is_a_503_and_a_closing_engine_too() {
    use acts_testkit::{FailPlan, FailingStore, OpSet};
    let failing = std::sync::Arc::new(FailingStore::new(acts::MemoryStore::new()));
    let engine = Engine::builder()
        .store(failing.clone())
        .start()
        .await
        .expect("engine starts");
    let app = acts_server::router(engine.clone());
    deploy(&app).await;
    failing.set_plan(FailPlan::always(
        OpSet::ALL,
        acts_store::ErrorKind::Unavailable,
    ));
    let (status, body) = call(&app, Method::GET, "/readyz", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(error_code(&body), "unavailable");
    let start_one = || {
        call(
            &app,
            Method::POST,
            "/api/v1/processes",
            Some(r#"{"model": "approval"}"#),
        )
    };
    let (status, body) = start_one().await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(error_code(&body), "unavailable");
    // Nothing was started: once the store answers again, none is there.
    failing.heal();
    let (status, body) = call(&app, Method::GET, "/api/v1/processes", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["total"], 0, "{body}");
    let (status, _) = call(&app, Method::GET, "/readyz", None).await;
    assert_eq!(status, StatusCode::OK);
    engine.close().await;
    let (status, body) = start_one().await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(error_code(&body), "closing");
}
