//! The gates of steps and acts (`concurrency:` and `rate:`) across the
//! cluster: each key is kept by the partition it hashes to (its home);
//! the engines ask it through the courier each partition's engine gets
//! (`acts::GateCourier`, made here by [`courier`]; the protocol is the engine's),
//! which carries their gate calls here: to the engine of a partition —
//! this node's, or over HTTP to the node that owns it (`POST
//! /api/v1/cluster/gates`, pinned to the partition and proven with the
//! cluster's node secret, so no client can forge one).
//!
//! May use: the `node`, the `call` helpers and the `placement`.

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use std::sync::{Arc, Weak};

use crate::call::{PARTITION, Target, error, pinned_partition};
use crate::node::{ClusterNode, Inner};
use crate::placement::{key_partition, partition_of};

/// Proves a gate call comes from a node of the cluster.
const SECRET: &str = "x-acts-node-secret";
/// At most this much of a gate call is read (a gate is a key or two).
const MAX_GATE_CALL: usize = 64 * 1024;

impl ClusterNode {
    /// Hands `call` to partition `p`'s engine: this node's, or its
    /// owner's.
    pub(crate) async fn gate_call(&self, p: u32, call: Value) -> Result<Value, String> {
        match self.target(p) {
            Target::Local(_) => match self.engine(p) {
                Some(engine) => engine
                    .runtime()
                    .gate_call(call)
                    .await
                    .map_err(|e| e.to_string()),
                None => Err(format!("partition {p} just moved")),
            },
            Target::Remote(owner) => {
                let url = format!("{}/api/v1/cluster/gates", owner.addr.trim_end_matches('/'));
                let sent = self
                    .inner
                    .http
                    .post(url)
                    .header(PARTITION, p.to_string())
                    .header(SECRET, &self.inner.node_secret)
                    .json(&call)
                    .send()
                    .await
                    .map_err(|e| format!("node '{}' (partition {p}): {e}", owner.node))?;
                let status = sent.status();
                let body = sent.bytes().await.map_err(|e| e.to_string())?;
                if !status.is_success() {
                    return Err(format!(
                        "node '{}' (partition {p}) answered {status}: {}",
                        owner.node,
                        String::from_utf8_lossy(&body)
                    ));
                }
                serde_json::from_slice(&body).map_err(|e| e.to_string())
            }
            Target::Nobody => Err(format!("partition {p} has no live owner yet")),
        }
    }
}

/// `POST /api/v1/cluster/gates`: a gate call another node sent to a
/// partition this node holds.
pub(crate) async fn serve(State(node): State<ClusterNode>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    if !proven(&parts.headers, &node.inner.node_secret) {
        return error(
            StatusCode::FORBIDDEN,
            "forbidden",
            "gate calls come from the cluster's nodes only",
        );
    }
    let p = match pinned_partition(&parts.headers, node.partitions()) {
        Some(Ok(p)) => p,
        Some(Err(refused)) => return refused,
        None => {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("a gate call names its partition ({PARTITION})"),
            );
        }
    };
    let body: Bytes = match axum::body::to_bytes(body, MAX_GATE_CALL).await {
        Ok(b) => b,
        Err(_) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!("a gate call is at most {MAX_GATE_CALL} bytes"),
            );
        }
    };
    let Ok(call) = serde_json::from_slice::<Value>(&body) else {
        return error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "a gate call is JSON",
        );
    };
    let Some(engine) = node.engine(p) else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "moving",
            format!("node '{}' does not hold partition {p}", node.id()),
        );
    };
    match engine.runtime().gate_call(call).await {
        Ok(answer) => axum::Json(answer).into_response(),
        // A call this engine cannot read (another version's, a bug's):
        // refused, not worth the sender's retries to this node.
        Err(e @ acts::EngineError::Corrupt(_)) => {
            error(StatusCode::BAD_REQUEST, "bad_request", e.to_string())
        }
        Err(e) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            e.to_string(),
        ),
    }
}

/// Whether `headers` carry `secret` (compared in constant time).
fn proven(headers: &HeaderMap, secret: &str) -> bool {
    let Some(given) = headers.get(SECRET).map(|v| v.as_bytes()) else {
        return false;
    };
    let want = secret.as_bytes();
    given.len() == want.len()
        && given
            .iter()
            .zip(want)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// The courier of the engines of `node`'s partitions.
pub(crate) fn courier(node: &Arc<Inner>) -> acts::GateCourier {
    acts::GateCourier::new(Arc::new(Route {
        node: Arc::downgrade(node),
    }))
}

struct Route {
    node: Weak<Inner>,
}

impl acts::GateRoute for Route {
    fn to_key_home(&self, key: &str, call: serde_json::Value) -> acts::GateReply {
        let node = self.node.clone();
        let key = key.to_owned();
        Box::pin(async move {
            let node = alive(&node)?;
            let p = key_partition(&key, node.partitions());
            node.gate_call(p, call).await
        })
    }

    fn to_process(&self, pid: &str, call: serde_json::Value) -> acts::GateReply {
        let node = self.node.clone();
        let pid = pid.to_owned();
        Box::pin(async move {
            let node = alive(&node)?;
            let p = partition_of(&pid, node.partitions());
            node.gate_call(p, call).await
        })
    }
}

fn alive(node: &Weak<Inner>) -> Result<ClusterNode, String> {
    node.upgrade()
        .map(|inner| ClusterNode { inner })
        .ok_or_else(|| "the node has left the cluster".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_secret_proves_a_call() {
        let mut h = HeaderMap::new();
        assert!(!proven(&h, "s3cret"));
        h.insert(SECRET, "s3cre".parse().unwrap());
        assert!(!proven(&h, "s3cret"));
        h.insert(SECRET, "s3crex".parse().unwrap());
        assert!(!proven(&h, "s3cret"));
        h.insert(SECRET, "s3cret".parse().unwrap());
        assert!(proven(&h, "s3cret"));
    }
}
