//! The contract, end to end: every operation of the OpenAPI document is
//! called with its documented example (path parameters from the example
//! or, where only the server can know them, from earlier answers) and
//! every answer is checked against the document. A route added without
//! being called here fails the test, and so does an example that does not
//! work.

use crate::common;
use common::{GUARD, contract, next_event};

use std::collections::{BTreeMap, BTreeSet};

use acts::Engine;
use axum::Router;
use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

/// Models the examples need beside the document's own (`approval`): the
/// trigger and the hook the examples name.
const NIGHTLY: &str = r#"
id: nightly
ver: "1"
on:
  - id: by_hand
    kind: manual
    params: { rows: 0 }
  - id: order-placed
    kind: hook
steps:
  - id: report
    uses: acts.core.msg
    params: { key: report_ready }
"#;

fn doc() -> Value {
    serde_json::from_str(&acts_server::openapi_json_text()).expect("the document is JSON")
}

/// The example request body of `op`, and its media type.
fn example_body(op: &Value) -> Option<(String, Value)> {
    let content = op["requestBody"]["content"].as_object()?;
    // The media type with an example, else the first.
    let (media, spec) = content
        .iter()
        .find(|(_, spec)| spec.get("example").is_some())
        .or_else(|| content.iter().next())?;
    let example = spec
        .get("example")
        .cloned()
        .or_else(|| {
            let schema = &spec["schema"];
            let name = schema["$ref"].as_str()?.rsplit('/').next()?.to_owned();
            doc()["components"]["schemas"][name]["example"]
                .as_object()
                .map(|o| Value::Object(o.clone()))
        })
        .unwrap_or(Value::Null);
    Some((media.clone(), example))
}

/// What the test knows that the examples cannot (ids the server made).
#[derive(Default)]
struct Known(BTreeMap<&'static str, String>);

/// Fills `template`'s parameters: the document's example, else `known`.
fn fill(template: &str, op: &Value, known: &Known) -> String {
    let mut path = template.to_owned();
    for p in op["parameters"].as_array().into_iter().flatten() {
        if p["in"] != "path" {
            continue;
        }
        let name = p["name"].as_str().expect("a name");
        let value = known
            .0
            .get(name)
            .cloned()
            .or_else(|| p["example"].as_str().map(str::to_owned))
            .or_else(|| p["example"].as_u64().map(|n| n.to_string()))
            .unwrap_or_else(|| panic!("{template}: no example and no known value for '{name}'"));
        path = path.replace(&format!("{{{name}}}"), &value);
    }
    path
}

struct Caller {
    app: Router,
    doc: Value,
    called: BTreeSet<String>,
    /// The body of the last stream opened.
    open: Option<Body>,
}

impl Caller {
    /// Calls `method template` with its example; checks the answer
    /// against the document; the status and the body (JSON, or the text
    /// of the first event of a stream).
    async fn call(&mut self, method: &str, template: &str, known: &Known) -> (u16, Value) {
        let op = self.doc["paths"][template][method.to_ascii_lowercase()].clone();
        assert!(op.is_object(), "the document has no {method} {template}");
        self.called.insert(format!("{method} {template}"));
        let uri = fill(template, &op, known);
        let mut req = Request::builder().method(method).uri(&uri);
        let body = match example_body(&op) {
            Some((media, Value::String(text))) if media != "application/json" => {
                req = req.header("content-type", media);
                Body::from(text)
            }
            Some((media, Value::Null)) => {
                let _ = media;
                Body::empty()
            }
            Some((media, example)) => {
                req = req.header("content-type", media);
                Body::from(example.to_string())
            }
            None => Body::empty(),
        };
        let res = self
            .app
            .clone()
            .oneshot(req.body(body).expect("a request"))
            .await
            .expect("an answer");
        let status = res.status().as_u16();
        let ctype = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if ctype.as_deref() == Some("text/event-stream") {
            // A stream: its status and type are checked; its events are
            // read by the caller (`stream`).
            contract::check(method, &uri, status, ctype.as_deref(), b"")
                .or_else(|e| {
                    if e.contains("empty body") {
                        Ok(())
                    } else {
                        Err(e)
                    }
                })
                .unwrap_or_else(|e| panic!("{e}"));
            self.open = Some(res.into_body());
            return (status, Value::Null);
        }
        let bytes = res.into_body().collect().await.expect("a body").to_bytes();
        contract::check(method, &uri, status, ctype.as_deref(), &bytes)
            .unwrap_or_else(|e| panic!("the answer breaks the document: {e}"));
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, value)
    }

    /// Opens the stream `template` with its example (the subscription
    /// is open when this returns); its body.
    async fn stream(&mut self, template: &str, known: &Known) -> Body {
        let (status, _) = self.call("GET", template, known).await;
        assert_eq!(status, 200, "GET {template}");
        self.open.take().expect("a stream")
    }

    /// As [`call`](Self::call), requiring a success.
    async fn ok(&mut self, method: &str, template: &str, known: &Known) -> Value {
        let (status, body) = self.call(method, template, known).await;
        assert!(
            (200..300).contains(&status),
            "{method} {template} with its example answered {status}: {body}"
        );
        body
    }
}

#[tokio::test]
async fn every_operation_answers_its_example_as_the_document_says() {
    let engine = Engine::builder().start().await.expect("engine");
    let doc = doc();
    let mut c = Caller {
        app: acts_server::router(engine.clone()),
        doc: doc.clone(),
        called: BTreeSet::new(),
        open: None,
    };
    let mut k = Known::default();
    engine
        .executor()
        .model()
        .deploy_yaml(NIGHTLY)
        .await
        .expect("the trigger model deploys");

    // The service and the dashboard.
    for (m, p) in [
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("GET", "/metrics"),
        ("GET", "/api/v1/me"),
        ("GET", "/api/v1/openapi.json"),
        ("GET", "/"),
        ("GET", "/ui/{file}"),
    ] {
        c.ok(m, p, &k).await;
    }

    // Models: the example deploys; a second deploy of another text makes
    // version 2 (for the migration's and the versions' examples).
    let info = c.ok("POST", "/api/v1/models", &k).await;
    assert_eq!(info["id"], "approval", "{info}");
    k.0.insert("id", "approval".into());
    c.ok("GET", "/api/v1/models", &k).await;
    c.ok("GET", "/api/v1/models/{id}", &k).await;
    c.ok("GET", "/api/v1/models/{id}/versions", &k).await;
    k.0.insert("rev", "1".into());
    c.ok("GET", "/api/v1/models/{id}/versions/{rev}", &k).await;

    // A process from the start example, and its interrupt.
    let p = c.ok("POST", "/api/v1/processes", &k).await;
    assert_eq!(p["pid"], "order_42", "{p}");
    c.ok("GET", "/api/v1/processes", &k).await;
    c.ok("POST", "/api/v1/processes/query", &k).await;
    c.ok("GET", "/api/v1/processes/{pid}", &k).await;
    c.ok("GET", "/api/v1/processes/{pid}/model", &k).await;
    c.ok("GET", "/api/v1/stuck", &k).await;
    let inbox = c.ok("GET", "/api/v1/inbox", &k).await;
    let tid = inbox[0]["tid"]
        .as_str()
        .expect("the interrupt is in the inbox");
    k.0.insert("tid", tid.to_owned());
    c.ok("POST", "/api/v1/tasks/query", &k).await;

    // The operator controls, in an order their examples allow.
    c.ok("POST", "/api/v1/processes/{pid}/pause", &k).await;
    c.ok("POST", "/api/v1/processes/{pid}/resume", &k).await;
    c.ok("POST", "/api/v1/processes/{pid}/rewind", &k).await;
    // Retry needs an errored process: the example's answer is the 409.
    let (status, _) = c.call("POST", "/api/v1/processes/{pid}/retry", &k).await;
    assert_eq!(status, 409);
    // The rewind made a new interrupt; answer it with the example.
    let inbox = c.ok("GET", "/api/v1/inbox", &k).await;
    k.0.insert(
        "tid",
        inbox[0]["tid"].as_str().expect("an interrupt").into(),
    );
    c.ok("POST", "/api/v1/processes/{pid}/tasks/{tid}/{action}", &k)
        .await;
    let done = c.ok("GET", "/api/v1/processes/{pid}", &k).await;
    assert_eq!(done["process"]["state"], "completed", "{done}");
    // Terminate and abort, each on a process of its own.
    let x = engine.executor();
    for pid in ["p_terminate", "p_abort"] {
        let mut vars = acts::Vars::new();
        vars.insert("pid".into(), json!(pid));
        x.proc().start("approval", vars).await.expect("a start");
    }
    let mut tk = Known::default();
    tk.0.insert("pid", "p_terminate".into());
    c.ok("POST", "/api/v1/processes/{pid}/terminate", &tk).await;
    tk.0.insert("pid", "p_abort".into());
    c.ok("POST", "/api/v1/processes/{pid}/abort", &tk).await;

    // Migration (a dry run from 1 to 2) needs a version 2.
    engine
        .executor()
        .model().deploy_yaml("id: approval\nver: \"2\"\nsteps:\n  - id: check\n    uses: acts.core.irq\n    params: { key: approve }\n")
        .await
        .expect("version 2");
    c.ok("POST", "/api/v1/models/{id}/migrate", &k).await;

    // Triggers and hooks.
    // (their ids from the examples alone)
    let none = Known::default();
    c.ok("GET", "/api/v1/triggers", &none).await;
    let p = c.ok("POST", "/api/v1/triggers/{id}/start", &none).await;
    assert_eq!(p["model_id"], "nightly", "{p}");
    let started = c.ok("POST", "/api/v1/hooks/{name}", &none).await;
    assert_eq!(started[0]["model_id"], "nightly", "{started}");

    // The live stream and a durable channel: a new process's messages
    // (started once the stream is open, so it sees them).
    let x = engine.executor();
    let mut live = c.stream("/api/v1/messages", &k).await;
    x.proc()
        .start("approval", Default::default())
        .await
        .expect("a start");
    let event = tokio::time::timeout(GUARD * 6, next_event(&mut live))
        .await
        .expect("an event in time");
    assert!(event.contains("data:"), "{event}");
    let mut ck = Known::default();
    ck.0.insert("id", "billing".into());
    let mut durable = c.stream("/api/v1/channels/{id}/stream", &ck).await;
    x.proc()
        .start("approval", Default::default())
        .await
        .expect("a start");
    let event = tokio::time::timeout(GUARD * 6, next_event(&mut durable))
        .await
        .expect("an event in time");
    let msg_id = event
        .lines()
        .find_map(|l| l.strip_prefix("id:"))
        .expect("the event has an id")
        .trim()
        .to_owned();
    let mut dk = Known::default();
    dk.0.insert("id", "billing".into());
    dk.0.insert("channel", "billing".into());
    dk.0.insert("msg_id", msg_id);
    c.ok("GET", "/api/v1/deliveries", &dk).await;
    c.ok("POST", "/api/v1/deliveries/query", &dk).await;
    // Not a dead letter: redeliver and discard refuse with a 409.
    let (status, _) = c
        .call(
            "POST",
            "/api/v1/deliveries/{channel}/{msg_id}/redeliver",
            &dk,
        )
        .await;
    assert_eq!(status, 409);
    let (status, _) = c
        .call("DELETE", "/api/v1/deliveries/{channel}/{msg_id}", &dk)
        .await;
    assert_eq!(status, 409);
    c.ok("POST", "/api/v1/channels/{id}/ack/{msg_id}", &dk)
        .await;
    c.ok("DELETE", "/api/v1/channels/{id}", &dk).await;

    // A bulk job: previewed, started (it finds nothing to retry), read,
    // listed, reported on, cancelled (it had ended: returned as it is).
    let none = Known::default();
    let preview = c.ok("POST", "/api/v1/bulk/dry-run", &none).await;
    assert!(preview["count"].is_u64(), "{preview}");
    let job = c.ok("POST", "/api/v1/bulk", &none).await;
    let mut bk = Known::default();
    bk.0.insert("id", job["id"].as_str().expect("a job id").into());
    c.ok("GET", "/api/v1/bulk", &bk).await;
    c.ok("GET", "/api/v1/bulk/{id}", &bk).await;
    c.ok("GET", "/api/v1/bulk/{id}/items", &bk).await;
    let cancelled = c.ok("POST", "/api/v1/bulk/{id}/cancel", &bk).await;
    assert_eq!(cancelled["id"], job["id"], "{cancelled}");
    c.ok("DELETE", "/api/v1/bulk/{id}", &bk).await;

    // The acts 0.25 table: its example lists the processes in the
    // reference's page shape.
    let page = c.ok("POST", "/api/v1/actions/{name}", &none).await;
    assert!(
        page["count"].as_u64().is_some_and(|n| n >= 1) && page["rows"].is_array(),
        "{page}"
    );

    // A backup: this server has no backup folder (and a memory store),
    // so it is refused as the document says.
    let (status, body) = c.call("POST", "/api/v1/backups", &none).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "not_supported", "{body}");

    // The removals last.
    c.ok("DELETE", "/api/v1/processes/{pid}", &k).await;
    // Version 1 is not the latest, but stored processes run on it.
    let (status, _) = c
        .call("DELETE", "/api/v1/models/{id}/versions/{rev}", &k)
        .await;
    assert_eq!(status, 409);
    c.ok("DELETE", "/api/v1/models/{id}", &k).await;

    // Every operation was called.
    let mut all = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("item").keys() {
            all.insert(format!("{} {path}", method.to_uppercase()));
        }
    }
    let missed: Vec<_> = all.difference(&c.called).collect();
    assert!(
        missed.is_empty(),
        "operations this test does not call: {missed:?}"
    );
}
