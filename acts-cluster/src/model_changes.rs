//! Model changes across the cluster (deploy, remove a model, remove a
//! version): made on the catalog partition first, then appended to the
//! catalog, applied on this node's partitions and announced to the other
//! live nodes.

use std::time::Duration;

use axum::http::{StatusCode, header};
use axum::response::Response;
use serde_json::Value;
use tokio::task::JoinSet;
use tracing::warn;

use crate::call::{Answer, Call, FORWARDED, Target, error};
use crate::meta::CatalogOp;
use crate::node::ClusterNode;

/// The partition every model change is made on first.
const CATALOG_PARTITION: u32 = 0;

/// A model change (deploy, remove a model, remove a version): made on the
/// catalog partition first — so the engine's own checks answer a bad
/// request — then appended to the catalog, applied on this node's
/// partitions, and announced to every other live node (which apply it
/// before this call answers, or on their next tick if they cannot be
/// reached).
///
/// Changes are serialized: only the catalog partition's owner makes them
/// (another node hands it the whole call), one at a time, so the order in
/// which that partition numbered the versions is the catalog's order —
/// and every other partition, which applies the catalog in order, numbers
/// them alike, also when two deploys of one model race through two nodes.
pub(crate) async fn catalog_change(node: &ClusterNode, call: Call) -> Response {
    let p = CATALOG_PARTITION;
    if node.engine(p).is_none() {
        // Its owner makes the whole change.
        return node.on_partition_whole(p, &call).await;
    }
    let _one_at_a_time = node.inner.catalog_changes.lock().await;
    if node.engine(p).is_none() {
        // Handed over while this change waited for the previous one.
        return node.on_partition_whole(p, &call).await;
    }
    let answer = node.on_partition(p, &call).await;
    if !answer.status.is_success() {
        return answer.into_response();
    }
    let op = match describe(node, p, &call, &answer).await {
        Ok(Some(op)) => op,
        Ok(None) => return answer.into_response(),
        Err(e) => return *e,
    };
    let seq = match node.inner.meta.append(&op).await {
        Ok(seq) => seq,
        Err(e) => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                format!(
                    "the change was made on partition {p} but not recorded for the others ({e}); \
                 make it again"
                ),
            );
        }
    };
    if let Err(e) = node.sync_catalog().await {
        warn!(error = %e, "applying the catalog here failed; the next tick tries again");
    }
    // (changes are made one at a time: each multiple is reached once)
    if seq.is_multiple_of(crate::compact::COMPACT_EVERY)
        && let Err(e) = node.inner.meta.compact().await
    {
        warn!(error = %e, "compacting the catalog failed; the next snapshot's change tries again");
    }
    announce(node, &call).await;
    answer.into_response()
}

/// The catalog change a successful model call made.
async fn describe(
    node: &ClusterNode,
    p: u32,
    call: &Call,
    answer: &Answer,
) -> Result<Option<CatalogOp>, Box<Response>> {
    let segments: Vec<&str> = call
        .uri
        .path()
        .trim_start_matches("/api/v1/")
        .split('/')
        .collect();
    match (call.method.as_str(), segments.as_slice()) {
        ("POST", ["models"]) => {
            let info = answer.json().unwrap_or(Value::Null);
            match info["id"].as_str() {
                Some(id) => deployed(node, p, id).await,
                None => Ok(None),
            }
        }
        ("POST", ["actions", "model:deploy"]) => {
            // the model's id: `mid`, else the model's own
            let options: Value = serde_json::from_slice(&call.body).unwrap_or(Value::Null);
            let id = match options["mid"].as_str() {
                Some(mid) => Some(mid.to_owned()),
                None => options["model"]
                    .as_str()
                    .and_then(|text| acts::Workflow::from_yaml(text).ok())
                    .map(|w| w.id),
            };
            match id {
                Some(id) => deployed(node, p, &id).await,
                None => Ok(None),
            }
        }
        ("POST", ["actions", "model:rm"]) => {
            let options: Value = serde_json::from_slice(&call.body).unwrap_or(Value::Null);
            let removed = answer.json().is_some_and(|v| v == Value::Bool(true));
            Ok(options["id"]
                .as_str()
                .filter(|_| removed)
                .map(|id| CatalogOp::Remove {
                    model: id.to_owned(),
                }))
        }
        ("DELETE", ["models", id]) => Ok(Some(CatalogOp::Remove {
            model: (*id).to_owned(),
        })),
        ("DELETE", ["models", id, "versions", rev]) => {
            Ok(rev.parse().ok().map(|revision| CatalogOp::RemoveVersion {
                model: (*id).to_owned(),
                revision,
            }))
        }
        _ => Ok(None),
    }
}

/// The catalog change of model `id` deployed on partition `p`: the model
/// as it reads back there.
async fn deployed(
    node: &ClusterNode,
    p: u32,
    id: &str,
) -> Result<Option<CatalogOp>, Box<Response>> {
    let Some(engine) = node.engine(p) else {
        return Ok(None);
    };
    match engine.executor().model().get(id).await {
        Ok((_, workflow)) => Ok(Some(CatalogOp::Deploy {
            model: id.to_owned(),
            json: workflow.to_json(),
        })),
        Err(e) => Err(Box::new(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!(
                "model '{id}' was deployed on partition {p} but cannot be read back ({e}); deploy it again"
            ),
        ))),
    }
}

/// Tells every other live node to apply the catalog now, and waits (a
/// bounded time) for them.
async fn announce(node: &ClusterNode, call: &Call) {
    let others: Vec<String> = node
        .inner
        .state
        .read()
        .live
        .iter()
        .filter(|m| m.node != node.id())
        .map(|m| m.addr.clone())
        .collect();
    let mut calls = JoinSet::new();
    for addr in others {
        let mut req = node
            .inner
            .http
            .post(format!(
                "{}/api/v1/cluster/sync",
                addr.trim_end_matches('/')
            ))
            .header(FORWARDED, node.id())
            .timeout(Duration::from_secs(10));
        if let Some(v) = call.headers.get(header::AUTHORIZATION) {
            req = req.header(header::AUTHORIZATION, v.clone());
        }
        calls.spawn(async move { (addr, req.send().await) });
    }
    while let Some(done) = calls.join_next().await {
        match done {
            Ok((_, Ok(r))) if r.status().is_success() => {}
            Ok((addr, Ok(r))) => {
                warn!(node = %addr, status = %r.status(), "a node did not apply the catalog now; it will on its next tick")
            }
            Ok((addr, Err(e))) => {
                warn!(node = %addr, error = %e, "a node could not be told of the catalog change; it will apply it on its next tick")
            }
            Err(e) => warn!(error = %e, "announcing a catalog change failed"),
        }
    }
}

impl ClusterNode {
    /// Sends a whole call to partition `p`'s owner as a plain call (not
    /// pinned to the partition), for it to handle as its own (a model
    /// change is made by the catalog partition's owner).
    async fn on_partition_whole(&self, p: u32, call: &Call) -> Response {
        let owner = match self.target(p) {
            Target::Remote(owner) if !call.headers.contains_key(FORWARDED) => owner,
            _ => {
                return error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    format!(
                        "node '{}' does not hold partition {p} (where model changes are made) \
                         and it has no other live owner; try again",
                        self.id()
                    ),
                );
            }
        };
        match self.forward(&owner, None, call).await {
            Some(answer) => answer.into_response(),
            None => error(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                format!(
                    "node '{}' (the owner of partition {p}) did not answer; try again",
                    owner.node
                ),
            ),
        }
    }
}
