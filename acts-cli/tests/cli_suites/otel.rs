//! `acts serve --otlp-endpoint`: a process's trace, as a real OTLP/gRPC
//! receiver (started here, on the `opentelemetry-proto` types) gets it.
//!
//! One process of a model with a branch, a parallel and a subflow is
//! started with a caller's `traceparent`, waits at an interrupt, survives a
//! restart of the server, and is answered with another `traceparent`. The
//! receiver must get one trace, continuing the caller's: the request's span
//! under the caller's, the process's under the request's, each step,
//! branch and act under its parent task, the subflow child's workflow under
//! its act; the interrupt linked to the answering request; a span per
//! gRPC call and per group commit.

use crate::support;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use acts_testkit::{OtlpReceiver, OtlpSpan as Span};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use serde_json::{Value, json};

const PARENT: &str = r#"
id: traced
name: traced
ver: "1"
steps:
  - id: fork
    branches:
      - id: left
        if: 1 > 0
        steps:
          - id: left_work
            uses: acts.transform.set
            params: { side: left }
      - id: right
        else: true
        steps:
          - id: right_work
            uses: acts.transform.set
            params: { side: right }
  - id: fan
    uses: acts.core.parallel
    params:
      in: [a, b]
      acts:
        - uses: acts.transform.set
          params: { fanned: true }
  - id: sub
    uses: acts.core.subflow
    params: { to: traced_child }
  - id: review
    uses: acts.core.irq
    params: { key: approve }
"#;

const CHILD: &str = r#"
id: traced_child
name: traced child
ver: "1"
steps:
  - id: inner
    uses: acts.transform.set
    params: { child_done: true }
  - id: charge
    uses: acts.core.action
    params:
      action: error
      options: { ecode: E_CARD, message: card declined }
    catches:
      - id: invoice_instead
        uses: acts.transform.set
        params: { paid_by: invoice }
"#;

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
const ANSWER_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const ANSWER_SPAN: &str = "b7ad6b7169203331";

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn attr(s: &Span, key: &str) -> Option<String> {
    s.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
        .map(|v| match v {
            AnyValue::StringValue(s) => s.clone(),
            AnyValue::IntValue(i) => i.to_string(),
            AnyValue::BoolValue(b) => b.to_string(),
            other => format!("{other:?}"),
        })
}

/// `acts serve` over `store` (HTTP and gRPC), exporting to `otlp` in
/// batches every 50 ms; the child, its HTTP URL and its gRPC URL.
fn serve(store: &str, otlp: &str) -> (Child, String, String) {
    serve_with(store, otlp, "grpc")
}

/// [`serve`] exporting with OTLP protocol `protocol`.
fn serve_with(store: &str, otlp: &str, protocol: &str) -> (Child, String, String) {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("acts"))
        .args(["serve", "--store", store, "--listen", "127.0.0.1:0"])
        .args(["--grpc", "127.0.0.1:0"])
        .args(["--otlp-endpoint", otlp])
        .env("OTEL_BSP_SCHEDULE_DELAY", "50")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_SDK_DISABLED")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("acts serve starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
    let (mut http, mut grpc) = (None, None);
    while http.is_none() || grpc.is_none() {
        let line = lines
            .next()
            .expect("acts serve says where it listens")
            .expect("a line");
        if line.contains("listening on") {
            http = support::address_in(&line);
        } else if let Some(rest) = line.split("0.25 on ").nth(1) {
            grpc = rest.split_whitespace().next().map(str::to_owned);
        }
    }
    std::thread::spawn(move || lines.for_each(drop));
    let (http, grpc) = (http.unwrap_or_default(), grpc.unwrap_or_default());
    (child, format!("http://{http}"), format!("http://{grpc}"))
}

async fn call(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    traceparent: Option<String>,
    body: Option<Value>,
) -> Value {
    let mut req = http.request(method, &url);
    if let Some(tp) = traceparent {
        req = req.header("traceparent", tp);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.expect("the server answers");
    let status = resp.status();
    let text = resp.text().await.expect("a body");
    assert!(status.is_success(), "{url}: {status} {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_is_one_trace_continuing_its_caller_across_a_restart() {
    let (receiver, otlp) = OtlpReceiver::start().await.expect("a receiver");
    let dir = tempfile::tempdir().expect("a folder");
    let store = format!("redb:{}", dir.path().join("traced.db").display());
    let http = reqwest::Client::new();
    let (server, base, _) = serve(&store, &otlp);
    for model in [CHILD, PARENT] {
        let resp = http
            .post(format!("{base}/api/v1/models"))
            .header("content-type", "application/yaml")
            .body(model)
            .send()
            .await
            .expect("deploys");
        assert!(
            resp.status().is_success(),
            "{}",
            resp.text().await.unwrap_or_default()
        );
    }
    let started = call(
        &http,
        reqwest::Method::POST,
        format!("{base}/api/v1/processes"),
        Some(format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01")),
        Some(json!({"model": "traced", "vars": {"pid": "traced_1"}})),
    )
    .await;
    assert_eq!(started["pid"], "traced_1");
    // It waits at the interrupt once the branch, the parallel and the
    // subflow are done.
    let irq = loop_until_irq(&http, &base).await;
    // A restart between the start and the answer: the trace context is
    // stored with the process.
    assert_eq!(support::stop(server), Some(0), "a clean stop");
    let (server, base, grpc) = serve(&store, &otlp);
    // A gRPC call (acts-server 0.25's protocol) has a span too.
    let mut channel = acts_channel::ActsChannel::connect(&grpc)
        .await
        .expect("connects over gRPC");
    channel
        .send::<Value>("model:ls", acts_channel::Vars::new())
        .await
        .expect("a gRPC call");
    call(
        &http,
        reqwest::Method::POST,
        format!("{base}/api/v1/processes/traced_1/tasks/{irq}/complete"),
        Some(format!("00-{ANSWER_TRACE}-{ANSWER_SPAN}-01")),
        Some(json!({"approved": true})),
    )
    .await;
    // Every span the tree is checked on: the process's, the gRPC call's
    // and the answering request's — exported in batches of their own, in
    // any order (on a busy machine the request's batch can come after
    // the workflow's), so the check waits for all of them.
    let done = |spans: &[Span]| {
        let grpc = spans.iter().any(|s| s.name == "acts.grpc.ActsService/Send");
        let answer = spans
            .iter()
            .any(|s| s.name.starts_with("POST ") && hex(&s.trace_id) == ANSWER_TRACE);
        grpc && answer
            && spans.iter().any(|s| {
                s.name == "workflow traced" && attr(s, "acts.pid").as_deref() == Some("traced_1")
            })
    };
    // A clean stop flushes what the server still holds.
    assert_eq!(support::stop(server), Some(0));
    let Some(spans) = receiver.until(Duration::from_secs(120), done).await else {
        let names: Vec<String> = receiver.spans().into_iter().map(|s| s.name).collect();
        panic!("no workflow, gRPC and answer spans of traced_1 in two minutes; got: {names:?}");
    };
    check_tree(&spans, &irq);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_also_leave_over_otlp_http() {
    let (receiver, otlp) = OtlpReceiver::start_http().await.expect("a receiver");
    let http = reqwest::Client::new();
    let (server, base, _) = serve_with("memory:", &otlp, "http/protobuf");
    let resp = http
        .post(format!("{base}/api/v1/models"))
        .header("content-type", "application/yaml")
        .body(CHILD)
        .send()
        .await
        .expect("deploys");
    assert!(resp.status().is_success());
    let tp = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let body = json!({"model": "traced_child", "vars": {"pid": "over_http"}});
    let url = format!("{base}/api/v1/processes");
    call(&http, reqwest::Method::POST, url, Some(tp), Some(body)).await;
    let done = |spans: &[Span]| {
        spans.iter().any(|s| {
            s.name == "workflow traced child" && attr(s, "acts.pid").as_deref() == Some("over_http")
        })
    };
    let spans = receiver.until(Duration::from_secs(120), done).await;
    assert_eq!(support::stop(server), Some(0));
    let spans = spans.expect("the process's spans over OTLP/HTTP within two minutes");
    let root = spans
        .iter()
        .find(|s| s.name == "workflow traced child")
        .expect("the workflow span");
    assert_eq!(hex(&root.trace_id), CALLER_TRACE);
}

/// Polls (every 50 ms, two minutes at most) until the process waits at
/// its interrupt; the interrupt's task id.
async fn loop_until_irq(http: &reqwest::Client, base: &str) -> String {
    for _ in 0..2400 {
        let p = call(
            http,
            reqwest::Method::GET,
            format!("{base}/api/v1/processes/traced_1"),
            None,
            None,
        )
        .await;
        let irq = p["tasks"].as_array().and_then(|ts| {
            ts.iter()
                .find(|t| t["uses"] == "acts.core.irq" && t["state"] == "interrupted")
        });
        if let Some(t) = irq {
            return t["tid"].as_str().expect("a task id").to_owned();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the process never reached its interrupt");
}

fn check_tree(spans: &[Span], irq: &str) {
    let tasks: Vec<&Span> = spans
        .iter()
        .filter(|s| attr(s, "acts.pid").is_some())
        .collect();
    let by_id: HashMap<Vec<u8>, &Span> = spans.iter().map(|s| (s.span_id.clone(), s)).collect();
    let parent_of = |s: &Span| by_id.get(&s.parent_span_id).copied();
    let named = |name: &str, pid: &str| -> &Span {
        tasks
            .iter()
            .copied()
            .find(|s| s.name == name && attr(s, "acts.pid").as_deref() == Some(pid))
            .unwrap_or_else(|| {
                panic!(
                    "no span '{name}' of {pid}; spans: {:?}",
                    tasks.iter().map(|s| &s.name).collect::<Vec<_>>()
                )
            })
    };
    // One trace: the caller's.
    for s in &tasks {
        assert_eq!(
            hex(&s.trace_id),
            CALLER_TRACE,
            "{} is in another trace",
            s.name
        );
    }
    // The caller's span → the start request's → the process's.
    let root = named("workflow traced", "traced_1");
    let request = parent_of(root).expect("the process's parent is the start request's span");
    assert_eq!(request.name, "POST /api/v1/processes");
    assert_eq!(hex(&request.parent_span_id), CALLER_SPAN);
    assert_eq!(attr(root, "acts.model.id").as_deref(), Some("traced"));
    assert_eq!(attr(root, "acts.model.version").as_deref(), Some("1"));
    assert_eq!(attr(root, "acts.state").as_deref(), Some("completed"));
    // Steps under the process; branches under their step; acts under
    // the step (or the act) that runs them.
    for step in ["step fork", "step fan", "step sub", "step review"] {
        let s = named(step, "traced_1");
        assert_eq!(parent_of(s).map(|p| &p.name), Some(&root.name), "{step}");
        assert_eq!(attr(s, "acts.node.kind").as_deref(), Some("step"));
    }
    let fork = named("step fork", "traced_1");
    let left = named("branch left", "traced_1");
    let right = named("branch right", "traced_1");
    assert_eq!(
        parent_of(left).map(|p| p.span_id.clone()),
        Some(fork.span_id.clone())
    );
    assert_eq!(
        parent_of(right).map(|p| p.span_id.clone()),
        Some(fork.span_id.clone())
    );
    assert_eq!(attr(left, "acts.state").as_deref(), Some("completed"));
    assert_eq!(attr(right, "acts.state").as_deref(), Some("skipped"));
    let left_work = named("step left_work", "traced_1");
    assert_eq!(
        parent_of(left_work).map(|p| p.span_id.clone()),
        Some(left.span_id.clone())
    );
    // The parallel: its act under the step, one act per element under it
    // (each running the listed act).
    let fan = named("step fan", "traced_1");
    let parallel: Vec<&&Span> = tasks
        .iter()
        .filter(|s| attr(s, "acts.package").as_deref() == Some("acts.core.parallel"))
        .filter(|s| attr(s, "acts.node.kind").as_deref() == Some("act"))
        .collect();
    assert_eq!(parallel.len(), 1, "one parallel act");
    assert_eq!(
        parent_of(parallel[0]).map(|p| p.span_id.clone()),
        Some(fan.span_id.clone())
    );
    let sets_under_parallel = tasks
        .iter()
        .filter(|s| attr(s, "acts.package").as_deref() == Some("acts.transform.set"))
        .filter(|s| attr(s, "acts.node.kind").as_deref() == Some("act"))
        .filter(|s| {
            let mut cur = parent_of(s);
            while let Some(p) = cur {
                if p.span_id == parallel[0].span_id {
                    return true;
                }
                cur = parent_of(p);
            }
            false
        })
        .count();
    assert_eq!(
        sets_under_parallel, 2,
        "one set act per element, under the parallel"
    );
    // The subflow: the child's process under its act, same trace.
    let sub_act = tasks
        .iter()
        .copied()
        .find(|s| {
            attr(s, "acts.package").as_deref() == Some("acts.core.subflow")
                && attr(s, "acts.node.kind").as_deref() == Some("act")
        })
        .expect("the subflow act's span");
    let child_root = tasks
        .iter()
        .copied()
        .find(|s| s.name == "workflow traced child")
        .expect("the child's workflow span");
    assert_eq!(
        parent_of(child_root).map(|p| p.span_id.clone()),
        Some(sub_act.span_id.clone())
    );
    let child_pid = attr(child_root, "acts.pid").expect("a pid");
    let inner = named("step inner", &child_pid);
    assert_eq!(
        parent_of(inner).map(|p| p.span_id.clone()),
        Some(child_root.span_id.clone())
    );
    // A failed act says why (and its step, whose catch ran, completed).
    let failed = tasks
        .iter()
        .copied()
        .find(|s| {
            attr(s, "acts.package").as_deref() == Some("acts.core.action")
                && attr(s, "acts.node.kind").as_deref() == Some("act")
        })
        .expect("the failing act's span");
    assert_eq!(attr(failed, "acts.state").as_deref(), Some("error"));
    assert_eq!(attr(failed, "acts.error.code").as_deref(), Some("E_CARD"));
    let status = failed.status.as_ref().expect("a status");
    assert_eq!((status.code, status.message.as_str()), (2, "card declined"));
    let charge = named("step charge", &child_pid);
    assert_eq!(
        parent_of(failed).map(|p| p.span_id.clone()),
        Some(charge.span_id.clone())
    );
    assert_eq!(attr(charge, "acts.state").as_deref(), Some("completed"));
    // The interrupt: answered after the restart, linked to the answer.
    let review = tasks
        .iter()
        .copied()
        .find(|s| attr(s, "acts.tid").as_deref() == Some(irq))
        .expect("the interrupt's span");
    assert_eq!(
        attr(review, "acts.package").as_deref(),
        Some("acts.core.irq")
    );
    assert_eq!(attr(review, "acts.state").as_deref(), Some("completed"));
    let link = review
        .links
        .first()
        .expect("the interrupt links to its answer");
    // The answer's own request span (a child of the answering caller).
    let answer_request = by_id
        .get(&link.span_id)
        .expect("the answering request's span");
    assert_eq!(hex(&answer_request.trace_id), ANSWER_TRACE);
    assert_eq!(hex(&answer_request.parent_span_id), ANSWER_SPAN);
    assert_eq!(
        answer_request.name,
        "POST /api/v1/processes/{pid}/tasks/{tid}/{action}"
    );
    // gRPC calls and group commits have spans of their own.
    assert!(
        spans.iter().any(|s| s.name == "acts.grpc.ActsService/Send"),
        "a gRPC call's span"
    );
    assert!(
        spans.iter().any(|s| s.name == "group commit"),
        "group commit spans"
    );
}

#[test]
fn a_wrong_endpoint_or_protocol_stops_the_start_with_what_to_give() {
    let run = |endpoint: &str, protocol: Option<&str>| {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("acts"));
        cmd.args(["serve", "--store", "memory:", "--listen", "127.0.0.1:0"])
            .args(["--otlp-endpoint", endpoint])
            .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("OTEL_SDK_DISABLED");
        if let Some(p) = protocol {
            cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", p);
        }
        let out = cmd.output().expect("acts runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, said) = run("localhost:4317", None);
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("not an http:// URL (e.g. http://127.0.0.1:4317"),
        "{said}"
    );
    let (code, said) = run("https://collector:4317", None);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("no TLS"), "{said}");
    let (code, said) = run("http://127.0.0.1:4318", Some("http/json"));
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("use 'grpc' or 'http/protobuf'"), "{said}");
}
