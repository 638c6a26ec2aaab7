//! Calls that concern every partition: listings (every partition's
//! answer, merged, with one cursor over all), a call for any one of them,
//! migrations and joined views. Model changes, made on one partition and
//! followed by all through the catalog: `model_changes.rs`.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use tokio::task::JoinSet;

use crate::call::{Answer, Call, error};
use crate::merge::{Run, merge};
use crate::node::ClusterNode;

/// Most characters of a merged listing's cursor.
const MAX_CURSOR_CHARS: usize = 256 * 1024;

/// Per-partition cursors of a merged listing: a partition missing from
/// the map starts at its beginning; `None` means it is done.
type Cursors = BTreeMap<u32, Option<String>>;

fn encode_cursors(c: &Cursors) -> String {
    let json = serde_json::to_string(c).unwrap_or_default();
    format!("c{}", acts::encode_cursor(json.as_bytes()))
}

fn decode_cursors(s: &str) -> Option<Cursors> {
    let bytes = acts::hex_bytes(s.strip_prefix('c')?, MAX_CURSOR_CHARS)?;
    serde_json::from_slice(&bytes).ok()
}

/// The cursor of a listing call (in its body or its query string).
fn call_cursor(call: &Call, in_body: bool) -> Option<String> {
    if in_body {
        let v: Value = serde_json::from_slice(&call.body).ok()?;
        v.get("cursor")?.as_str().map(str::to_owned)
    } else {
        call.uri
            .query()?
            .split('&')
            .find_map(|kv| kv.strip_prefix("cursor=").map(str::to_owned))
    }
}

/// `call` with its cursor replaced by `cursor` (or removed).
fn with_cursor(call: &Call, in_body: bool, cursor: Option<&str>) -> Call {
    let mut out = call.clone();
    if in_body {
        if let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(&call.body) {
            match cursor {
                Some(c) => body.insert("cursor".into(), Value::String(c.to_owned())),
                None => body.remove("cursor"),
            };
            out.body = Bytes::from(Value::Object(body).to_string());
        }
    } else {
        let mut query: Vec<String> = call
            .uri
            .query()
            .unwrap_or("")
            .split('&')
            .filter(|kv| !kv.is_empty() && !kv.starts_with("cursor="))
            .map(str::to_owned)
            .collect();
        if let Some(c) = cursor {
            query.push(format!("cursor={c}"));
        }
        let pq = if query.is_empty() {
            call.uri.path().to_owned()
        } else {
            format!("{}?{}", call.uri.path(), query.join("&"))
        };
        if let Ok(uri) = pq.parse() {
            out.uri = uri;
        }
    }
    out
}

/// Asks every partition (concurrently) for its answer to its call; the
/// first failure answers for all (a listing that
/// silently left a partition out would be wrong).
pub(crate) async fn ask_all(
    node: &ClusterNode,
    calls: Vec<(u32, Call)>,
) -> Result<Vec<(u32, Value)>, Box<Response>> {
    let mut set = JoinSet::new();
    for (p, call) in calls {
        let node = node.clone();
        set.spawn(async move { (p, node.on_partition(p, &call).await) });
    }
    let mut out = Vec::new();
    while let Some(done) = set.join_next().await {
        let (p, answer) = done.map_err(|e| {
            Box::new(error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("a partition's call failed: {e}"),
            ))
        })?;
        if !answer.status.is_success() {
            return Err(Box::new(answer.into_response()));
        }
        out.push((p, answer.json().unwrap_or(Value::Null)));
    }
    out.sort_by_key(|(p, _)| *p);
    Ok(out)
}

/// A listing with a cursor, over every partition, with the summed total
/// and one cursor that holds every partition's own. Processes,
/// deliveries and tasks come in one order with the call's exact limit
/// (each partition's page merged by its items' own cursors, `merge.rs`);
/// other listings (a bulk job's report) are each partition's page (up to
/// the limit each) in partition order.
pub(crate) async fn paged(
    node: &ClusterNode,
    call: Call,
    items: &'static str,
    cursor_in_body: bool,
) -> Response {
    let cursors = match call_cursor(&call, cursor_in_body) {
        None => Cursors::new(),
        Some(c) => match decode_cursors(&c) {
            Some(c) => c,
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "bad_query",
                    "the cursor is not one this cluster returned",
                );
            }
        },
    };
    let ordered = matches!(items, "processes" | "deliveries" | "tasks");
    let mut call = call;
    if ordered {
        call.headers.insert(
            acts_server::ITEM_CURSORS,
            axum::http::HeaderValue::from_static("1"),
        );
    }
    let calls: Vec<(u32, Call)> = (0..node.partitions())
        .filter_map(|p| match cursors.get(&p) {
            Some(None) => None,
            Some(Some(c)) => Some((p, with_cursor(&call, cursor_in_body, Some(c)))),
            None => Some((p, with_cursor(&call, cursor_in_body, None))),
        })
        .collect();
    let answers = match ask_all(node, calls).await {
        Ok(a) => a,
        Err(r) => return *r,
    };
    let total = answers.iter().try_fold(0u64, |t, (_, v)| {
        v.get("total").and_then(Value::as_u64).map(|n| t + n)
    });
    let mut next = cursors.clone();
    let runs: Option<Vec<Run>> = answers
        .iter()
        .map(|(p, v)| {
            let list = v
                .get(items)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let own: Vec<String> = v
                .get("cursors")
                .and_then(Value::as_array)
                .map(|c| {
                    c.iter()
                        .filter_map(|x| x.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            (ordered && own.len() == list.len()).then(|| Run {
                partition: *p,
                items: list,
                cursors: own,
                next: v.get("next").and_then(Value::as_str).map(str::to_owned),
            })
        })
        .collect();
    let merged = match runs {
        Some(runs) => {
            let (limit, descending) = listing_order(&call, cursor_in_body);
            let m = merge(runs, limit, descending);
            for (p, at) in m.after {
                if let Some(at) = at {
                    next.insert(p, at);
                }
            }
            m.items
        }
        // Each partition's page after the other's.
        None => {
            let mut all = Vec::new();
            for (p, v) in &answers {
                if let Some(list) = v.get(items).and_then(Value::as_array) {
                    all.extend(list.iter().cloned());
                }
                next.insert(*p, v.get("next").and_then(Value::as_str).map(str::to_owned));
            }
            all
        }
    };
    let more = (0..node.partitions()).any(|p| !matches!(next.get(&p), Some(None)));
    let mut out = Map::new();
    out.insert(items.into(), Value::Array(merged));
    out.insert(
        "next".into(),
        if more {
            Value::String(encode_cursors(&next))
        } else {
            Value::Null
        },
    );
    out.insert("total".into(), total.map_or(Value::Null, |t| json!(t)));
    axum::Json(Value::Object(out)).into_response()
}

/// A listing call's limit (default 100, at most 1,000, as the engine
/// takes it) and whether it walks backwards.
fn listing_order(call: &Call, in_body: bool) -> (usize, bool) {
    let (limit, descending) = if in_body {
        let v: Value = serde_json::from_slice(&call.body).unwrap_or(Value::Null);
        (
            v.get("limit").and_then(Value::as_u64),
            // (a task query's order is its process query's)
            v.get("descending")
                .or_else(|| v.get("process").and_then(|p| p.get("descending")))
                == Some(&Value::Bool(true)),
        )
    } else {
        let query = call.uri.query().unwrap_or("");
        let param = |name: &str| {
            query
                .split('&')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        };
        (
            param("limit").and_then(|v| v.parse().ok()),
            param("order") == Some("desc"),
        )
    };
    let limit = limit.map_or(100, |l| usize::try_from(l).unwrap_or(acts::MAX_PAGE));
    (limit.clamp(1, acts::MAX_PAGE), descending)
}

/// A call about something one partition has (a delivery to acknowledge,
/// redeliver or discard), asked of every partition: the first success
/// answers; with `every` (removing a durable channel) every partition
/// makes it, and it succeeds if any had it. Without a success, the most
/// telling failure answers (anything before a 404).
pub(crate) async fn one_of(node: &ClusterNode, call: Call, every: bool) -> Response {
    let mut set = JoinSet::new();
    for p in 0..node.partitions() {
        let (node, call) = (node.clone(), call.clone());
        set.spawn(async move { node.on_partition(p, &call).await });
    }
    let mut success: Option<Answer> = None;
    let mut failure: Option<Answer> = None;
    while let Some(done) = set.join_next().await {
        let Ok(answer) = done else { continue };
        if answer.status.is_success() {
            success.get_or_insert(answer);
            if !every {
                set.abort_all();
                break;
            }
        } else if failure.as_ref().is_none_or(|f| {
            f.status == StatusCode::NOT_FOUND && answer.status != StatusCode::NOT_FOUND
        }) {
            failure = Some(answer);
        }
    }
    match success.or(failure) {
        Some(a) => a.into_response(),
        None => error(StatusCode::NOT_FOUND, "not_found", "no partition answered"),
    }
}

/// A migration over every partition: each migrates its own processes
/// (each process in one batch or not at all, as on one node); the report
/// holds every partition's processes. A partition that fails answers for
/// all (the others' processes have moved: running the migration again
/// moves the rest).
pub(crate) async fn migrate(node: &ClusterNode, call: Call) -> Response {
    let calls = (0..node.partitions()).map(|p| (p, call.clone())).collect();
    match ask_all(node, calls).await {
        Ok(answers) => {
            let mut processes = Vec::new();
            let mut report = Value::Null;
            for (_, v) in answers {
                if let Some(list) = v.get("processes").and_then(Value::as_array) {
                    processes.extend(list.iter().cloned());
                }
                if report.is_null() {
                    report = v;
                }
            }
            if let Value::Object(map) = &mut report {
                map.insert("processes".into(), Value::Array(processes));
            }
            axum::Json(report).into_response()
        }
        Err(r) => *r,
    }
}

/// A listing without a cursor, over every partition: the arrays joined.
pub(crate) async fn joined(node: &ClusterNode, call: Call) -> Response {
    let calls = (0..node.partitions()).map(|p| (p, call.clone())).collect();
    match ask_all(node, calls).await {
        Ok(answers) => {
            let all: Vec<Value> = answers
                .into_iter()
                .flat_map(|(_, v)| match v {
                    Value::Array(a) => a,
                    _ => Vec::new(),
                })
                .collect();
            axum::Json(Value::Array(all)).into_response()
        }
        Err(r) => *r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_cursors_round_trip_and_refuse_garbage() {
        let mut c = Cursors::new();
        c.insert(0, None);
        c.insert(3, Some("0a0b".into()));
        assert_eq!(decode_cursors(&encode_cursors(&c)), Some(c));
        assert_eq!(decode_cursors("0a0b"), None);
        assert_eq!(decode_cursors("czz"), None);
        assert_eq!(decode_cursors("cé0"), None);
    }
}
