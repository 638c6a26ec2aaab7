//! acts as a cluster: many engine nodes on one shared store (a Redis
//! server or a Redis Cluster), the processes split into a fixed number of
//! **partitions**, each owned by exactly one live node at a time —
//! ownership by lease, every write fenced by the partition's epoch, so a
//! node that lost a partition can never apply anything there.
//!
//! - [`placement`]: the partition of a pid (a subflow child lives with
//!   its root) and the owner of a partition (rendezvous hashing over the
//!   live nodes) — pure functions every node agrees on.
//! - [`ClusterNode`] (`node.rs`): membership (heartbeats in the cluster's
//!   metadata namespace), taking and handing over partitions (one leased
//!   engine each, resumed as after a restart), the model catalog every
//!   partition follows (`catalog.rs`, `meta.rs`; compacted into a
//!   snapshot every 64 changes: `compact.rs`).
//! - [`ClusterNode::router`] (`front.rs`: what a call is about and where
//!   it goes): the HTTP API of `acts serve`, accepted by any node and
//!   routed to the owner of the partition it concerns (`forward.rs`: run
//!   here or forwarded once, tried again while a partition moves);
//!   listings merged over every partition (`fanout.rs`; one order with
//!   an exact limit: `merge.rs`); the live message
//!   stream of every partition (`stream.rs`); `/api/v1/cluster/status`
//!   (`status.rs`); metrics (`metrics.rs`). What the front and these
//!   spokes share about a call is in `call.rs`: no spoke imports the front.
//! - The gates of steps and acts across partitions (`gates.rs`): each key
//!   kept by the partition it hashes to, asked through the courier every
//!   partition's engine gets (`node.rs`), node to node over
//!   `POST /api/v1/cluster/gates` proven with the cluster's node secret.
//! - Bulk jobs (`bulk.rs`): a part on every partition under one id, their
//!   progress summed.
//! - The acts 0.25 action table (`/api/v1/actions/{name}`, `actions.rs`):
//!   routed by the action and its options; [`serve_grpc`] serves the
//!   acts 0.25 gRPC protocol over the node's front.
//! - [`ClusterConfig`] (`config.rs`): how a node joins, and its checks.
//!
//! May depend on: the facade `acts` (engines, the store family),
//! `acts-server` (each partition's API), `acts-store` (the store
//! contract: conditional batches); never on a backend directly.
//!
//! Start reading at [`ClusterNode::join`] and [`ClusterNode::tick`];
//! `docs/CLUSTER.md` is the user's guide and the design.

mod actions;
mod bulk;
mod call;
mod catalog;
mod compact;
mod config;
mod error;
mod fanout;
mod forward;
mod front;
mod gates;
mod holding;
mod merge;
mod meta;
mod metrics;
mod model_changes;
mod node;
pub mod placement;
mod status;
mod stream;

pub use config::{ClusterConfig, MAX_PARTITIONS};
pub use error::ClusterError;
pub use meta::{CatalogOp, ClusterInfo, HeldPartition, Member};
pub use node::ClusterNode;
pub use status::{ClusterStatus, NodeStatus, PartitionStatus};

/// Serves `node`'s API on `listener` until `shutdown` resolves, then
/// leaves the cluster cleanly (every partition handed over at once).
pub async fn serve(
    node: ClusterNode,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let port = listener.local_addr()?.port();
    // A client that takes no byte for the stall time is dropped, as on
    // `acts serve`.
    let stall = node.inner.server.stream_limits().stall;
    let listener = acts_server::StallListener::new(listener, stall);
    let served = axum::serve(listener, node.router(Some(port)))
        .with_graceful_shutdown(shutdown)
        .await;
    node.leave().await;
    served
}

/// Serves the acts 0.25 gRPC protocol (`acts serve --cluster --grpc`) on
/// `listener` over `node`'s front until `shutdown` resolves: every action
/// routed as `/api/v1/actions/{name}` is, every subscription the merged
/// message stream of every partition (a durable one: the durable
/// channel's on every partition). The node's tokens are checked as on
/// its HTTP API.
pub async fn serve_grpc(
    node: ClusterNode,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let options = node.inner.server.clone();
    acts_server::serve_grpc_front(node.front(), options, listener, shutdown)
        .await
        .map_err(std::io::Error::other)
}
