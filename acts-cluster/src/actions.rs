//! `POST /api/v1/actions/{name}` on a cluster (the acts 0.25 action
//! table, which a node's gRPC server sends through the front): routed by
//! the action and its options, as the HTTP routes they stand for are —
//! an action on a process to its partition, a start to the partition of
//! the pid drawn for it (or of its concurrency key), a model change
//! through the catalog, the listings merged over every partition (one
//! order: `timestamp`, then `id`), a message's action to the partition
//! that has it, sealed data to the partition its name hashes to.

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::call::{Call, error};
use crate::node::ClusterNode;
use crate::placement::{key_partition, pid_in};

/// Routes action `name` of `call`.
pub(crate) async fn route(node: &ClusterNode, call: Call, name: &str) -> Response {
    if !acts_server::is_action_name(name) {
        return error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("not found action '{name}'"),
        );
    }
    let options = match options_of(&call.body) {
        Some(o) => o,
        // Not an object: any partition answers with the action's error.
        None => return any(node, &call).await,
    };
    let pid = options.get("pid").and_then(Value::as_str);
    match name {
        "model:deploy" | "model:rm" => crate::model_changes::catalog_change(node, call).await,
        "proc:start" => start(node, call, options).await,
        "proc:start_from_model" => start_from_model(node, call, options).await,
        "proc:ls" | "task:ls" => match filtered_pid(&options) {
            Some(pid) => on_pid(node, &call, &pid).await,
            None => listing(node, call, options, Rows::Plain).await,
        },
        "msg:ls" => listing(node, call, options, Rows::Messages).await,
        "msg:get" | "msg:ack" | "msg:rm" => one_message(node, call, &options).await,
        "msg:redo" | "msg:clear" if options.contains_key("id") => {
            one_message(node, call, &options).await
        }
        "msg:clear" if pid.is_some() => on_pid(node, &call, pid.unwrap_or_default()).await,
        "msg:redo" | "msg:clear" | "msg:unsub" => crate::fanout::one_of(node, call, true).await,
        _ if name.starts_with("snap:") => match options.get("name").and_then(Value::as_str) {
            Some(target) => {
                let p = key_partition(&format!("snap:{target}"), node.partitions());
                node.on_partition(p, &call).await.into_response()
            }
            None => any(node, &call).await,
        },
        _ => match pid {
            Some(pid) => on_pid(node, &call, pid).await,
            None => any(node, &call).await,
        },
    }
}

/// A REST route of the acts 0.25 web plugin: routed as the action it
/// stands for, answered in the plugin's envelope (a route that stands for
/// no action, or a body that is not the route's: any partition answers).
pub(crate) async fn rest(node: &ClusterNode, mut call: Call) -> Response {
    let Some(Ok((name, options))) = acts_server::rest_action(call.uri.path(), &call.body) else {
        return any(node, &call).await;
    };
    let Ok(uri) = format!("/api/v1/actions/{name}").parse() else {
        return any(node, &call).await;
    };
    call.uri = uri;
    call.body = Bytes::from(Value::Object(options).to_string());
    call.headers.insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    let answer = route(node, call, name).await;
    let status = answer.status();
    match axum::body::to_bytes(answer.into_body(), 64 * acts_server::MAX_BODY_BYTES).await {
        Ok(body) => acts_server::rest_envelope(status, &body),
        Err(e) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!("the answer was cut off: {e}"),
        ),
    }
}

/// The options of a call's body (none: no options); `None` when the body
/// is not a JSON object.
fn options_of(body: &[u8]) -> Option<Map<String, Value>> {
    if body.trim_ascii().is_empty() {
        return Some(Map::new());
    }
    match serde_json::from_slice(body) {
        Ok(Value::Object(o)) => Some(o),
        Ok(Value::Null) => Some(Map::new()),
        _ => None,
    }
}

/// An action on one message (`id`): on the partition its id names (a
/// message of this cluster's streams), else on the one that has it.
async fn one_message(node: &ClusterNode, call: Call, options: &Map<String, Value>) -> Response {
    let named = options
        .get("id")
        .and_then(Value::as_str)
        .and_then(acts_server::ack_partition)
        .filter(|p| *p < node.partitions());
    match named {
        Some(p) => node.on_partition(p, &call).await.into_response(),
        None => crate::fanout::one_of(node, call, false).await,
    }
}

async fn any(node: &ClusterNode, call: &Call) -> Response {
    let p = node.any_partition();
    node.on_partition(p, call).await.into_response()
}

async fn on_pid(node: &ClusterNode, call: &Call, pid: &str) -> Response {
    let p = node.partition_of(pid);
    node.on_partition(p, call).await.into_response()
}

/// The pid a listing's query filters on (`{key: "pid", value}`).
fn filtered_pid(options: &Map<String, Value>) -> Option<String> {
    let exprs = options
        .get("query")?
        .get("filter")?
        .get("exprs")?
        .as_array()?;
    exprs.iter().find_map(|e| {
        (e.get("key")?.as_str()? == "pid")
            .then(|| e.get("value")?.as_str().map(str::to_owned))
            .flatten()
    })
}

/// A start: the pid the options name, or one drawn here (of the
/// partition of the model's concurrency key, if it has one).
async fn start(node: &ClusterNode, mut call: Call, mut options: Map<String, Value>) -> Response {
    let pid = match options.get("pid") {
        Some(Value::String(pid)) => pid.clone(),
        Some(_) => return any(node, &call).await,
        None => {
            let model = options.get("id").cloned().unwrap_or(Value::Null);
            let body = json!({"model": model, "vars": options});
            let pid = match concurrency_key(node, &body).await {
                Some(key) => {
                    let partitions = node.partitions();
                    pid_in(key_partition(&key, partitions), partitions)
                }
                None => acts::long_id(),
            };
            options.insert("pid".into(), Value::String(pid.clone()));
            call.body = Bytes::from(Value::Object(options).to_string());
            pid
        }
    };
    on_pid(node, &call, &pid).await
}

/// `proc:start_from_model`: the model deployed through the catalog (as
/// `model:deploy`), then started (as `proc:start`).
async fn start_from_model(
    node: &ClusterNode,
    call: Call,
    mut options: Map<String, Value>,
) -> Response {
    let text = options
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let workflow = match options.get("fmt").and_then(Value::as_str) {
        Some("yaml" | "yml") => acts::Workflow::from_yaml(text).ok(),
        Some("json") => acts::Workflow::from_json(text).ok(),
        _ => None,
    };
    let Some(yaml) = workflow.as_ref().and_then(|w| w.to_yaml().ok()) else {
        // Any partition says what is wrong with it.
        return any(node, &call).await;
    };
    let id = workflow.map(|w| w.id).unwrap_or_default();
    let mut deploy = call.clone();
    deploy.uri = axum::http::Uri::from_static("/api/v1/actions/model:deploy");
    deploy.body = Bytes::from(json!({ "model": yaml }).to_string());
    let deployed = crate::model_changes::catalog_change(node, deploy).await;
    if !deployed.status().is_success() {
        return deployed;
    }
    options.remove("model");
    options.remove("fmt");
    options.insert("id".into(), Value::String(id));
    let mut start_call = call;
    start_call.uri = axum::http::Uri::from_static("/api/v1/actions/proc:start");
    start_call.body = Bytes::from(Value::Object(options.clone()).to_string());
    start(node, start_call, options).await
}

/// The concurrency key the start in `body` (`{model, rev, vars}`) would
/// have, evaluated by an engine this node holds (every partition has the
/// whole catalog); `None` without one, or when it cannot be said here
/// (the partition that starts it then says what is wrong).
pub(crate) async fn concurrency_key(node: &ClusterNode, body: &Value) -> Option<String> {
    let engine = node.engine(node.any_partition())?;
    let model = body.get("model")?.as_str()?;
    let revision = match body.get("rev") {
        Some(r) => Some(u32::try_from(r.as_u64()?).ok()?),
        None => None,
    };
    let vars = body
        .get("vars")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let exec = engine.executor();
    exec.proc()
        .concurrency_key(model, revision, &vars)
        .await
        .ok()?
}

/// What a merged listing's rows are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rows {
    Plain,
    /// Deliveries: each one's id is made to name its partition, so an
    /// action on it (`msg:ack`, `msg:get`, ...) goes to that partition
    /// alone.
    Messages,
}

/// A listing of the reference's (`{offset, limit, ...}`) over every
/// partition (the pid's alone when it filters on one): each answers the
/// first `offset + limit` rows, the rows are merged in one order, the
/// window taken from them; `count` is the sum.
async fn listing(
    node: &ClusterNode,
    call: Call,
    mut options: Map<String, Value>,
    kind: Rows,
) -> Response {
    let asked: Vec<u32> = match filtered_pid(&options) {
        Some(pid) => vec![node.partition_of(&pid)],
        None => (0..node.partitions()).collect(),
    };
    let query = options.get("query").cloned().unwrap_or(json!({}));
    let offset = query.get("offset").and_then(Value::as_u64).unwrap_or(0) as usize;
    let limit = (query.get("limit").and_then(Value::as_u64).unwrap_or(100) as usize).max(1);
    let descending = query
        .get("order_by")
        .and_then(Value::as_array)
        .and_then(|o| o.last())
        .and_then(|o| o.get("order"))
        .is_some_and(|o| o == "desc");
    let mut each = query.clone();
    if let Value::Object(q) = &mut each {
        q.insert("offset".into(), json!(0));
        q.insert("limit".into(), json!(offset.saturating_add(limit)));
    }
    options.insert("query".into(), each);
    let mut per_partition = call;
    per_partition.body = Bytes::from(Value::Object(options).to_string());
    let calls = asked
        .into_iter()
        .map(|p| (p, per_partition.clone()))
        .collect();
    let answers = match crate::fanout::ask_all(node, calls).await {
        Ok(a) => a,
        Err(refused) => return *refused,
    };
    let mut count = 0;
    let mut rows = Vec::new();
    for (p, mut page) in answers {
        count += page["count"].as_u64().unwrap_or(0) as usize;
        if let Some(r) = page["rows"].as_array_mut() {
            if kind == Rows::Messages {
                for row in r.iter_mut() {
                    let routed = row["id"]
                        .as_str()
                        .and_then(|id| acts_server::ack_id_on(id, p));
                    if let Some(id) = routed {
                        row["id"] = Value::String(id);
                    }
                }
            }
            rows.append(r);
        }
    }
    rows.sort_by(|a, b| {
        let key = |v: &Value| {
            (
                v["timestamp"].as_i64().unwrap_or(0),
                v["id"].as_str().unwrap_or_default().to_owned(),
            )
        };
        let order = key(a).cmp(&key(b));
        if descending { order.reverse() } else { order }
    });
    let rows: Vec<Value> = rows.into_iter().skip(offset).take(limit).collect();
    let page = acts_server::grpc_page(rows, count, offset, limit);
    (StatusCode::OK, axum::Json(page)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_filtered_on_one_process_names_its_pid() {
        let o = options_of(
            br#"{"query":{"filter":{"type":"and","exprs":[{"key":"state","value":"running"},{"key":"pid","value":"p1"}]}}}"#,
        )
        .expect("an object");
        assert_eq!(filtered_pid(&o).as_deref(), Some("p1"));
        let none = options_of(br#"{"query":{"limit":3}}"#).expect("an object");
        assert_eq!(filtered_pid(&none), None);
        assert!(options_of(b"").is_some_and(|o| o.is_empty()));
        assert!(options_of(b"[1]").is_none());
    }
}
