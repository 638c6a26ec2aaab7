//! `GET /api/v1/cluster/status` (what `acts cluster status` shows) and
//! `POST /api/v1/cluster/sync` (apply the model catalog now).

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use crate::call::error;
use crate::node::ClusterNode;

/// A cluster as one node sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterStatus {
    /// The node that answered.
    pub node: String,
    /// How many partitions the cluster has.
    pub partitions: u32,
    /// The lease and heartbeat TTL of the answering node (ms).
    pub lease_ttl_ms: u64,
    /// The last change of the model catalog.
    pub catalog_seq: u64,
    /// The live members.
    pub nodes: Vec<NodeStatus>,
    /// Every partition and its owner.
    pub owners: Vec<PartitionStatus>,
}

/// A live member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// Its id.
    pub node: String,
    /// Where its API listens.
    pub addr: String,
    /// How many partitions it holds.
    pub held: usize,
    /// How old its last heartbeat is (ms; a third of the TTL is normal).
    pub heartbeat_age_ms: i64,
}

/// A partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionStatus {
    /// The partition.
    pub partition: u32,
    /// Its owner (`None`: no live node holds it — it is moving).
    pub owner: Option<String>,
    /// The epoch of its owner's lease.
    pub epoch: Option<u64>,
    /// Catalog changes its owner has not applied yet (known for this
    /// node's partitions only).
    pub catalog_lag: Option<u64>,
    /// Processes in flight on it (this node's partitions only).
    pub admitted: Option<usize>,
}

impl ClusterNode {
    /// The cluster as this node sees it (as of its last tick).
    pub async fn status(&self) -> Result<ClusterStatus, crate::ClusterError> {
        let catalog_seq = self.inner.meta.catalog_seq().await?;
        let ttl = self.inner.config.lease_ttl;
        let ttl_ms = crate::node::ttl_ms(&self.inner.config);
        let now = self.inner.config.clock.now_millis();
        let state = self.inner.state.read();
        let nodes = state
            .live
            .iter()
            .map(|m| NodeStatus {
                node: m.node.clone(),
                addr: m.addr.clone(),
                held: if m.node == self.id() {
                    state.held.len()
                } else {
                    m.partitions.len()
                },
                heartbeat_age_ms: (now - (m.until - ttl_ms)).max(0),
            })
            .collect();
        let owners = (0..self.partitions())
            .map(|p| {
                let owner = state.owners.get(p as usize).cloned().flatten();
                let local = state.held.get(&p);
                PartitionStatus {
                    partition: p,
                    owner: owner.as_ref().map(|o| o.node.clone()),
                    epoch: owner.as_ref().map(|o| o.epoch),
                    catalog_lag: local.map(|h| catalog_seq.saturating_sub(h.synced)),
                    admitted: local.map(|h| h.engine.runtime().stats().admitted),
                }
            })
            .collect();
        Ok(ClusterStatus {
            node: self.id().to_owned(),
            partitions: self.partitions(),
            lease_ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
            catalog_seq,
            nodes,
            owners,
        })
    }

    /// An operator (or admin) may read the status and trigger a sync: the
    /// refusal otherwise.
    fn refuse_unless_operator(&self, req: &Request, what: &str) -> Option<Response> {
        let principal = match self.inner.server.auth().caller(req.headers()) {
            Ok(p) => p,
            Err(e) => return Some(e.into_response()),
        };
        principal
            .check_operator(what)
            .err()
            .map(|e| error(StatusCode::FORBIDDEN, "forbidden", e.to_string()))
    }
}

pub(crate) async fn status(State(node): State<ClusterNode>, req: Request) -> Response {
    if let Some(r) = node.refuse_unless_operator(&req, "reading the cluster's status") {
        return r;
    }
    match node.status().await {
        Ok(s) => axum::Json(s).into_response(),
        Err(e) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            e.to_string(),
        ),
    }
}

pub(crate) async fn sync(State(node): State<ClusterNode>, req: Request) -> Response {
    if let Some(r) = node.refuse_unless_operator(&req, "applying the model catalog") {
        return r;
    }
    match node.sync_catalog().await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            e.to_string(),
        ),
    }
}
