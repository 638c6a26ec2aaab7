//! The REST routes of acts 0.25's web plugin, beside `/api/v1`, so its
//! clients work unchanged: `POST /api/model/{list,get,rm,deploy}`, `POST
//! /api/proc/start`, `POST /api/pack/list`, `GET /api/pack/catalogs`,
//! `POST /api/pack`, `GET /api/msg/sse`, `POST /api/msg/ack`, `POST
//! /api/snap/{upsert,remove,get,ls}`, `POST /hooks/{event_id}`, `GET
//! /health`. Each runs one action of the reference's table (the gRPC
//! server's) and answers in the plugin's envelope: `{"code": "ok",
//! "data": ...}`, or `{"code": "error", "message": ...}` with the status
//! of the error.
//!
//! May use: the state, the extractors, the error type, the stream budget,
//! the transport-neutral action table and the facade `acts`.

use std::sync::Arc;

use acts::{ChannelOptions, Vars, Workflow};
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::extract::{Body, Exec, OptionalBody, Params, Path, Payload};
use crate::state::AppState;
use crate::stream::Subscription;

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/api/model/list", post(model_list))
        .route("/api/model/get", post(by_body("model:get")))
        .route("/api/model/rm", post(by_body("model:rm")))
        .route("/api/model/deploy", post(model_deploy))
        .route("/api/proc/start", post(proc_start))
        .route("/api/pack/list", post(pack_list))
        .route("/api/pack/catalogs", get(pack_catalogs))
        .route("/api/pack", post(by_body("pack:get")))
        .route("/api/msg/sse", get(msg_sse))
        .route("/api/msg/ack", post(by_body("msg:ack")))
        .route("/api/snap/upsert", post(by_body("snap:upsert")))
        .route("/api/snap/remove", post(by_body("snap:remove")))
        .route("/api/snap/get", post(by_body("snap:get")))
        .route("/api/snap/ls", post(by_body("snap:ls")))
        .route("/hooks/{event_id}", post(hook))
        .route("/health", get(|| async { "ok" }))
}

/// The plugin's envelope.
struct Envelope(Result<Value, ApiError>);

impl IntoResponse for Envelope {
    fn into_response(self) -> Response {
        match self.0 {
            Ok(data) => Json(json!({"code": "ok", "data": data})).into_response(),
            Err(e) => (
                e.status,
                Json(json!({"code": "error", "message": e.message, "details": e.code})),
            )
                .into_response(),
        }
    }
}

async fn run(s: &AppState, x: &Exec, name: &str, options: Vars) -> Envelope {
    Envelope(crate::actions::apply(&s.engine, &x.1, name, options, None).await)
}

/// A route whose JSON body is the action's options.
fn by_body(
    name: &'static str,
) -> impl Fn(
    State<AppState>,
    Exec,
    Body<Vars>,
) -> std::pin::Pin<Box<dyn Future<Output = Envelope> + Send>>
+ Clone
+ Send
+ Sync
+ 'static {
    move |State(s), x, Body(options)| Box::pin(async move { run(&s, &x, name, options).await })
}

fn vars(v: Value) -> Vars {
    match v {
        Value::Object(m) => m,
        _ => Vars::new(),
    }
}

async fn model_list(State(s): State<AppState>, x: Exec, Payload(q): Payload) -> Envelope {
    run(&s, &x, "model:ls", vars(json!({ "query": q }))).await
}

/// `{fmt: json|yml|yaml, model}`: a JSON model as an object (or its
/// text), a YAML model as its text.
#[derive(Deserialize)]
struct Deploy {
    fmt: String,
    model: Value,
}

/// A model of `fmt` given as `model`, as YAML text for `model:deploy`.
fn model_text(fmt: &str, model: &Value) -> Result<String, ApiError> {
    let text = match model {
        Value::String(t) => t.clone(),
        other => other.to_string(),
    };
    let w = match fmt {
        "json" => Workflow::from_json(&text),
        "yml" | "yaml" | "ymal" => Workflow::from_yaml(&text),
        other => {
            return Err(ApiError::bad_request(format!(
                "fmt '{other}' is not correct, it should be one of 'json' or 'yml'"
            )));
        }
    }
    .map_err(|e| ApiError::bad_request(e.to_string()))?;
    w.to_yaml()
        .map_err(|e| ApiError::bad_request(e.to_string()))
}

async fn model_deploy(State(s): State<AppState>, x: Exec, Body(d): Body<Deploy>) -> Envelope {
    match deploy_action(d) {
        Ok((name, options)) => run(&s, &x, name, options).await,
        Err(e) => Envelope(Err(e)),
    }
}

/// The action of `/api/model/deploy`.
fn deploy_action(d: Deploy) -> Result<(&'static str, Vars), ApiError> {
    let text = model_text(&d.fmt, &d.model)?;
    Ok(("model:deploy", vars(json!({ "model": text }))))
}

/// `{mode: id|model, id, fmt, model, options}`.
#[derive(Deserialize)]
struct Start {
    mode: String,
    id: Option<String>,
    fmt: Option<String>,
    model: Option<Value>,
    #[serde(default)]
    options: Vars,
}

async fn proc_start(State(s): State<AppState>, x: Exec, Body(b): Body<Start>) -> Envelope {
    match start_action(b) {
        Ok((name, options)) => run(&s, &x, name, options).await,
        Err(e) => Envelope(Err(e)),
    }
}

/// The action of `/api/proc/start`: `proc:start` (mode `id`) or
/// `proc:start_from_model` (mode `model`).
fn start_action(b: Start) -> Result<(&'static str, Vars), ApiError> {
    let mut options = b.options;
    let name = match b.mode.as_str() {
        "id" => {
            let Some(id) = b.id else {
                return Err(ApiError::bad_request("id is required"));
            };
            options.insert("id".into(), Value::String(id));
            "proc:start"
        }
        "model" => {
            let (Some(fmt), Some(model)) = (b.fmt, b.model) else {
                return Err(ApiError::bad_request("fmt and model are required"));
            };
            let text = match &model {
                Value::String(t) => t.clone(),
                other => other.to_string(),
            };
            options.insert("fmt".into(), Value::String(fmt));
            options.insert("model".into(), Value::String(text));
            "proc:start_from_model"
        }
        other => {
            return Err(ApiError::bad_request(format!(
                "mode '{other}' is not correct, it should be one of 'model' or 'id'"
            )));
        }
    };
    Ok((name, options))
}

/// The action of the acts 0.25 table a REST route of its web plugin
/// stands for, with its options, for the routes a cluster node must route
/// by what they change (a model change through the catalog, a start to
/// its partition, an ack to the partition that has the message, sealed
/// data to its partition); `None` for the others (every partition
/// answers them alike, or the node merges their stream), and for a body
/// that is not one of the route's (`Some(Err)`: a partition answers it
/// with the route's own error).
pub fn rest_action(path: &str, body: &[u8]) -> Option<Result<(&'static str, Vars), ApiError>> {
    let parse = |body: &[u8]| -> Result<Value, ApiError> {
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))
    };
    let typed = |v: Value| -> Result<Vars, ApiError> {
        match v {
            Value::Object(m) => Ok(m),
            _ => Err(ApiError::bad_request("the body must be a JSON object")),
        }
    };
    let name = match path {
        "/api/model/deploy" => {
            return Some(parse(body).and_then(|v| {
                serde_json::from_value::<Deploy>(v)
                    .map_err(|e| ApiError::bad_request(e.to_string()))
                    .and_then(deploy_action)
            }));
        }
        "/api/proc/start" => {
            return Some(parse(body).and_then(|v| {
                serde_json::from_value::<Start>(v)
                    .map_err(|e| ApiError::bad_request(e.to_string()))
                    .and_then(start_action)
            }));
        }
        "/api/model/rm" => "model:rm",
        "/api/msg/ack" => "msg:ack",
        "/api/snap/upsert" => "snap:upsert",
        "/api/snap/remove" => "snap:remove",
        "/api/snap/get" => "snap:get",
        "/api/snap/ls" => "snap:ls",
        _ => return None,
    };
    Some(parse(body).and_then(typed).map(|options| (name, options)))
}

/// The answer of a REST route of the plugin from an action's answer
/// through `/api/v1/actions` (`status` and its JSON body): the plugin's
/// envelope.
pub fn rest_envelope(status: axum::http::StatusCode, body: &[u8]) -> Response {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    if status.is_success() {
        return Envelope(Ok(v)).into_response();
    }
    let e = &v["error"];
    let message = e["message"]
        .as_str()
        .unwrap_or("the action failed")
        .to_owned();
    let details = e["code"].as_str().unwrap_or("error").to_owned();
    (
        status,
        Json(json!({"code": "error", "message": message, "details": details})),
    )
        .into_response()
}

/// `{catalog, search, order, size, page}`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct PackList {
    catalog: Option<String>,
    search: Option<String>,
    order: Option<String>,
    size: Option<usize>,
    page: Option<usize>,
}

async fn pack_list(
    State(s): State<AppState>,
    x: Exec,
    OptionalBody(p): OptionalBody<PackList>,
) -> Envelope {
    let all = crate::actions::apply(
        &s.engine,
        &x.1,
        "pack:ls",
        vars(json!({"query": {"limit": 10_000}})),
        None,
    )
    .await;
    let rows = match all {
        Ok(page) => page["rows"].as_array().cloned().unwrap_or_default(),
        Err(e) => return Envelope(Err(e)),
    };
    let mut rows: Vec<Value> = rows
        .into_iter()
        .filter(|r| p.catalog.as_deref().is_none_or(|c| r["catalog"] == c))
        .filter(|r| {
            p.search.as_deref().is_none_or(|q| {
                let q = q.to_lowercase();
                ["id", "name", "desc"].iter().any(|k| {
                    r[*k]
                        .as_str()
                        .is_some_and(|v| v.to_lowercase().contains(&q))
                })
            })
        })
        .collect();
    match p.order.as_deref() {
        Some("asc") => rows.sort_by(|a, b| a["version"].as_str().cmp(&b["version"].as_str())),
        Some("desc") => rows.sort_by(|a, b| b["version"].as_str().cmp(&a["version"].as_str())),
        _ => {}
    }
    let count = rows.len();
    let size = p.size.unwrap_or(count.max(1)).max(1);
    let page = p.page.unwrap_or(1).max(1);
    let shown: Vec<Value> = rows
        .into_iter()
        .skip((page - 1) * size)
        .take(size)
        .collect();
    Envelope(Ok(json!({
        "count": count, "page_size": size, "page_num": page,
        "page_count": count.div_ceil(size), "rows": shown,
    })))
}

async fn pack_catalogs() -> Envelope {
    let c = |id: &str, name: &str, desc: &str| json!({"id": id, "name": name, "icon": "", "desc": desc});
    Envelope(Ok(json!([
        c("core", "Core", "The basic packages of acts"),
        c("transform", "Transform", "Packages that transform data"),
        c("ai", "AI", "Packages that call AI models"),
        c("form", "Form", "Packages for form submissions"),
        c("app", "App", "Packages of applications"),
    ])))
}

/// `?id=CLIENT&type=&state=&uses=`: the plugin's message stream, a durable
/// subscription of the caller named by `id`.
#[derive(Deserialize)]
struct SseQuery {
    id: String,
    r#type: Option<String>,
    state: Option<String>,
    uses: Option<String>,
    #[allow(dead_code)]
    key: Option<String>,
}

async fn msg_sse(State(s): State<AppState>, x: Exec, Params(q): Params<SseQuery>) -> Response {
    if let Err(e) = x.need_operator("a durable message stream") {
        return Envelope(Err(e)).into_response();
    }
    let set = |v: &Option<String>| {
        v.as_deref()
            .filter(|v| !v.is_empty() && *v != "*")
            .map(str::to_owned)
    };
    let mut options = ChannelOptions::default();
    if let Some(v) = set(&q.r#type) {
        options = options.with_type(v);
    }
    if let Some(v) = set(&q.state) {
        options = options.with_state(v);
    }
    if let Some(v) = set(&q.uses) {
        options = options.with_uses(v);
    }
    let key = crate::actions::channel_key(&x.1.id, &format!("acts-flow-client-{}", q.id));
    let channel = match s.engine.channels().durable(&key, options).await {
        Ok(c) => c,
        Err(e) => return Envelope(Err(e.into())).into_response(),
    };
    let owned = key.clone();
    let format = Arc::new(move |m: &acts::Message| {
        crate::actions::message_json(m, &crate::actions::ack_id(&owned, &m.id))
    });
    let sub = match Subscription::open_as(&s.streams, channel.clone(), &x.0, &x.1, format) {
        Ok(sub) => sub,
        Err(e) => return Envelope(Err(e)).into_response(),
    };
    if let Err(e) = channel.resend_pending().await {
        return Envelope(Err(e.into())).into_response();
    }
    sub.into_sse_as(false).into_response()
}

async fn hook(
    State(s): State<AppState>,
    x: Exec,
    Path(event_id): Path<String>,
    Payload(params): Payload,
) -> Envelope {
    run(
        &s,
        &x,
        "evt:start",
        vars(json!({"id": event_id, "params": params})),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_is_read_in_its_format_and_a_bad_one_is_a_400() {
        let yaml = "id: m\nsteps:\n  - id: a\n    uses: acts.core.msg\n";
        assert!(model_text("yml", &Value::String(yaml.into())).is_ok());
        let json_model = json!({"id": "m", "steps": [{"id": "a", "uses": "acts.core.msg"}]});
        assert!(model_text("json", &json_model).is_ok());
        let e = model_text("xml", &Value::String(yaml.into())).unwrap_err();
        assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST);
        assert!(e.message.contains("'xml'"));
    }
}
