//! Bulk jobs over a cluster (`/api/v1/bulk…`): one job is a part on every
//! partition — each a durable job of that partition's engine over its own
//! processes, all under one id — so a job survives any node's death (the
//! partition's next owner resumes its part) and never acts on a process
//! twice. The front starts the parts (partition 0 first: a bad request is
//! refused by its engine before any part starts), sums their progress
//! into one job, and cancels or removes every part.
//!
//! May use: the `node`, the `call` helpers and the `fanout`'s `ask_all`.

use axum::body::Bytes;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::call::{Answer, Call, error};
use crate::node::ClusterNode;

/// Most jobs of one page of a cluster's job listing (each job is asked of
/// every partition).
const MAX_LISTED: u64 = 20;

/// Every call under `/api/v1/bulk`.
pub(crate) async fn route(node: &ClusterNode, call: Call) -> Response {
    let rest = call
        .uri
        .path()
        .trim_start_matches("/api/v1/bulk")
        .to_owned();
    let parts: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let method = call.method.clone();
    match (method, parts.as_slice()) {
        (Method::POST, []) => start(node, call).await,
        (Method::POST, ["dry-run"]) => preview(node, call).await,
        (Method::GET, []) => list(node, call).await,
        (Method::GET, [id]) => match one(node, &call, id).await {
            Ok(job) => axum::Json(job).into_response(),
            Err(r) => *r,
        },
        (Method::POST, [id, "cancel"]) => {
            if let Err(r) = every_part(node, &call).await {
                return *r;
            }
            let read = Call {
                method: Method::GET,
                uri: format!("/api/v1/bulk/{id}").parse().unwrap_or_default(),
                headers: call.headers.clone(),
                body: Bytes::new(),
            };
            match one(node, &read, id).await {
                Ok(job) => axum::Json(job).into_response(),
                Err(r) => *r,
            }
        }
        (Method::DELETE, [_]) => match every_part(node, &call).await {
            Ok(_) => StatusCode::NO_CONTENT.into_response(),
            Err(r) => *r,
        },
        (Method::GET, [_, "items"]) => crate::fanout::paged(node, call, "items", false).await,
        // Anything else: the API's own answer (404, 405, ...).
        _ => node.on_partition(0, &call).await.into_response(),
    }
}

/// `POST /api/v1/bulk`: a part on every partition, under one id, each at
/// its share of the pace.
async fn start(node: &ClusterNode, call: Call) -> Response {
    let body = match serde_json::from_slice::<Value>(&call.body) {
        Ok(Value::Object(map)) => map,
        // Not a request: partition 0's engine says what is wrong.
        _ => return node.on_partition(0, &call).await.into_response(),
    };
    let mut body = Value::Object(body);
    let id = match body.get("id") {
        Some(Value::String(id)) => id.clone(),
        Some(_) => return node.on_partition(0, &call).await.into_response(),
        None => format!("bulk-{}", acts::long_id()),
    };
    body["id"] = Value::String(id.clone());
    let partitions = u64::from(node.partitions());
    let rate = body
        .get("per_second")
        .and_then(Value::as_u64)
        .unwrap_or(u64::from(acts::DEFAULT_BULK_RATE));
    // (A pace out of range goes as given: the engine refuses it.)
    if (1..=u64::from(acts::MAX_BULK_RATE)).contains(&rate) {
        body["per_second"] = json!(rate.div_ceil(partitions).max(1));
    }
    let call = Call {
        body: Bytes::from(body.to_string()),
        ..call
    };
    let first = node.on_partition(0, &call).await;
    if !first.status.is_success() {
        return first.into_response();
    }
    let calls = (1..node.partitions()).map(|p| (p, call.clone())).collect();
    let rest = match crate::fanout::ask_all(node, calls).await {
        Ok(rest) => rest,
        Err(r) => return *r,
    };
    let mut parts = vec![first.json().unwrap_or(Value::Null)];
    parts.extend(rest.into_iter().map(|(_, v)| v));
    let mut job = combine(parts, node.partitions() as usize);
    job["request"]["per_second"] = json!(rate);
    (StatusCode::ACCEPTED, axum::Json(job)).into_response()
}

/// `POST /api/v1/bulk/dry-run`: every partition's count, summed; the
/// first 20 of their samples.
async fn preview(node: &ClusterNode, call: Call) -> Response {
    let calls = (0..node.partitions()).map(|p| (p, call.clone())).collect();
    let answers = match crate::fanout::ask_all(node, calls).await {
        Ok(a) => a,
        Err(r) => return *r,
    };
    let count: u64 = answers
        .iter()
        .filter_map(|(_, v)| v.get("count").and_then(Value::as_u64))
        .sum();
    let sample: Vec<Value> = answers
        .iter()
        .filter_map(|(_, v)| v.get("sample").and_then(Value::as_array))
        .flatten()
        .take(20)
        .cloned()
        .collect();
    axum::Json(json!({ "count": count, "sample": sample })).into_response()
}

/// `GET /api/v1/bulk`: the jobs as partition 0 lists them (every job has
/// a part there, started first), at most [`MAX_LISTED`] a page, each with
/// every partition's progress summed.
async fn list(node: &ClusterNode, call: Call) -> Response {
    let mut uri = call.uri.path().to_owned();
    let query: Vec<String> = call
        .uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter(|kv| !kv.is_empty() && !kv.starts_with("limit="))
        .map(str::to_owned)
        .chain(std::iter::once(format!("limit={}", listed_limit(&call))))
        .collect();
    uri.push('?');
    uri.push_str(&query.join("&"));
    let page_call = Call {
        uri: uri.parse().unwrap_or_else(|_| call.uri.clone()),
        ..call.clone()
    };
    let page = node.on_partition(0, &page_call).await;
    if !page.status.is_success() {
        return page.into_response();
    }
    let mut page = page.json().unwrap_or(Value::Null);
    let ids: Vec<String> = page["jobs"]
        .as_array()
        .map(|jobs| {
            jobs.iter()
                .filter_map(|j| j["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut set = JoinSet::new();
    for (i, id) in ids.into_iter().enumerate() {
        let (node, call) = (node.clone(), call.clone());
        set.spawn(async move {
            let read = Call {
                uri: format!("/api/v1/bulk/{id}")
                    .parse()
                    .unwrap_or_else(|_| call.uri.clone()),
                ..call
            };
            (i, one(&node, &read, &id).await)
        });
    }
    while let Some(done) = set.join_next().await {
        let Ok((i, summed)) = done else { continue };
        match summed {
            Ok(job) => page["jobs"][i] = job,
            Err(r) => return *r,
        }
    }
    axum::Json(page).into_response()
}

/// The page size a listing asked for, at most [`MAX_LISTED`].
fn listed_limit(call: &Call) -> u64 {
    call.uri
        .query()
        .unwrap_or_default()
        .split('&')
        .find_map(|kv| kv.strip_prefix("limit="))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(MAX_LISTED)
        .clamp(1, MAX_LISTED)
}

/// Job `id`: every partition's part, summed. A job no partition has is
/// the API's `404`.
async fn one(node: &ClusterNode, call: &Call, id: &str) -> Result<Value, Box<Response>> {
    let answers = all_parts(node, call).await;
    let mut parts = Vec::new();
    let mut missing = Vec::new();
    for (p, a) in answers {
        if a.status.is_success() {
            parts.push(a.json().unwrap_or(Value::Null));
        } else if a.status == StatusCode::NOT_FOUND {
            missing.push(p);
        } else {
            return Err(Box::new(a.into_response()));
        }
    }
    if parts.is_empty() {
        return Err(Box::new(error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("cannot find bulk job '{id}' (list the jobs with GET /api/v1/bulk)"),
        )));
    }
    let mut job = combine(parts, node.partitions() as usize);
    if !missing.is_empty() {
        job["error"] = json!(format!(
            "partitions {missing:?} have no part of this job (its start was cut short): start it again with the same request and id '{id}' to add them"
        ));
    }
    Ok(job)
}

/// The parts' answers to `call` (made on every partition).
async fn all_parts(node: &ClusterNode, call: &Call) -> Vec<(u32, Answer)> {
    let mut set = JoinSet::new();
    for p in 0..node.partitions() {
        let (node, call) = (node.clone(), call.clone());
        set.spawn(async move { (p, node.on_partition(p, &call).await) });
    }
    let mut out = Vec::new();
    while let Some(done) = set.join_next().await {
        if let Ok(answer) = done {
            out.push(answer);
        }
    }
    out.sort_by_key(|(p, _)| *p);
    out
}

/// `call` (cancel, remove) made on every part: fine when every part that
/// exists took it; the first other failure answers (`409`: a part still
/// runs), a job with no part is `404`.
async fn every_part(node: &ClusterNode, call: &Call) -> Result<(), Box<Response>> {
    let mut found = false;
    for (_, a) in all_parts(node, call).await {
        if a.status.is_success() {
            found = true;
        } else if a.status != StatusCode::NOT_FOUND {
            return Err(Box::new(a.into_response()));
        }
    }
    if found {
        Ok(())
    } else {
        Err(Box::new(error(
            StatusCode::NOT_FOUND,
            "not_found",
            "no partition has this bulk job",
        )))
    }
}

/// One job from its parts (`of` partitions): counts summed, running while
/// any part runs, the total known once every part knows its own.
fn combine(parts: Vec<Value>, of: usize) -> Value {
    let mut job = parts.first().cloned().unwrap_or(Value::Null);
    let sum = |field: &str| -> u64 { parts.iter().filter_map(|p| p[field].as_u64()).sum() };
    let all_known = parts.len() == of && parts.iter().all(|p| p["total"].is_u64());
    job["total"] = if all_known {
        json!(sum("total"))
    } else {
        Value::Null
    };
    for field in ["done", "skipped", "failed"] {
        job[field] = json!(sum(field));
    }
    job["active"] = json!(parts.iter().any(|p| p["active"] == true));
    let states: Vec<&str> = parts.iter().filter_map(|p| p["state"].as_str()).collect();
    let state = ["running", "failed", "cancelled"]
        .into_iter()
        .find(|s| states.contains(s))
        .unwrap_or("done");
    job["state"] = json!(state);
    job["finished_at"] = if state == "running" {
        Value::Null
    } else {
        parts
            .iter()
            .filter_map(|p| p["finished_at"].as_i64())
            .max()
            .map_or(Value::Null, |t| json!(t))
    };
    job["error"] = parts
        .iter()
        .find_map(|p| p["error"].as_str())
        .map_or(Value::Null, |e| json!(e));
    let pace: u64 = parts
        .iter()
        .filter_map(|p| p["request"]["per_second"].as_u64())
        .sum();
    if pace > 0 {
        job["request"]["per_second"] = json!(pace);
    }
    job
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_sum_into_one_job() {
        let part = |state: &str, total: Value, done: u64| {
            json!({"id": "j", "state": state, "total": total, "done": done, "skipped": 1,
                   "failed": 0, "active": state == "running", "finished_at": 5,
                   "request": {"action": "retry", "per_second": 10}})
        };
        let job = combine(
            vec![part("done", json!(3), 2), part("running", json!(4), 1)],
            2,
        );
        assert_eq!(job["total"], 7);
        assert_eq!(
            (job["done"].clone(), job["skipped"].clone()),
            (json!(3), json!(2))
        );
        assert_eq!(job["state"], "running");
        assert_eq!(job["active"], true);
        assert_eq!(job["finished_at"], Value::Null);
        assert_eq!(job["request"]["per_second"], 20);
        // A part not there: the total is not known.
        let job = combine(vec![part("done", json!(3), 3)], 2);
        assert_eq!(job["total"], Value::Null);
        assert_eq!(job["state"], "done");
        assert_eq!(job["finished_at"], 5);
    }
}
