//! The acts 0.25 gRPC protocol (`acts.grpc.ActsService`, what the
//! reference's client `acts-channel` speaks), beside the HTTP API and as
//! thin over the engine's executor: `Send` runs one action of the
//! reference's table (`table.rs`; what an action takes in `call.rs`; the
//! actions by concern in `work.rs`, `catalog.rs`, `delivery.rs`; listings
//! in `listing.rs`; answers in the reference's shapes, `shapes.rs`),
//! `OnMessage` streams messages (`service.rs`; subscription keys and ack
//! ids in `keys.rs`; acks applied behind the answer in `acks.rs`). Over a
//! cluster node's front instead of one engine, both go through its HTTP
//! routes (`front.rs`). Callers
//! are the bearer tokens' principals of the HTTP API (`auth.rs`), and
//! streams share its bounds (`stream.rs`).
//!
//! May use: the facade `acts`, tonic and prost, axum (a front), the server's auth,
//! streams, errors and request traces (`telemetry`).

mod acks;
mod call;
mod catalog;
mod delivery;
mod front;
mod keys;
mod listing;
mod proto;
mod service;
mod shapes;
mod table;
mod work;

use std::future::Future;
use std::time::Duration;

use acts::Engine;
use tokio::net::TcpListener;

pub use shapes::page;
pub use table::{ACTIONS, EXTENSIONS, is_action_name};

pub(crate) use keys::{ack_id, channel_key};
pub use keys::{ack_id_on, ack_partition};

/// Runs action `name` of the reference's table for `who` with `options`
/// (the REST routes of the reference's web plugin and `/api/v1/actions`
/// use it too), continuing `caller`'s trace in what it starts or
/// answers; a refusal as the HTTP API's error.
pub(crate) async fn apply(
    engine: &Engine,
    who: &acts::Principal,
    name: &str,
    mut options: acts::Vars,
    caller: Option<&crate::telemetry::CallerTrace>,
) -> Result<serde_json::Value, crate::ApiError> {
    carry_trace(name, caller, &mut options);
    let call = call::Call {
        exec: engine.executor().as_principal(who.clone()),
        engine: engine.clone(),
        who: who.clone(),
        options,
        acks: None,
    };
    table::apply(name, call)
        .await
        .map_err(call::Refusal::into_api)
}

/// Stores `caller`'s trace in the options of an action that starts or
/// answers (so the process's trace continues the caller's).
fn carry_trace(
    name: &str,
    caller: Option<&crate::telemetry::CallerTrace>,
    options: &mut acts::Vars,
) {
    if matches!(
        name,
        "proc:start" | "proc:start_from_model" | "act:complete" | "act:submit"
    ) {
        crate::telemetry::CallerTrace::carry(caller, options);
    }
}

/// The message shape of the reference's streams, with `id` as its id.
pub(crate) fn message_json(m: &acts::Message, id: &str) -> String {
    shapes::message(m, id).to_string()
}

use crate::{MAX_BODY_BYTES, ServerOptions};

/// Serves the gRPC protocol over `engine` on `listener` until `shutdown`
/// resolves, for the principals of `options` (none: every call is the
/// local admin, so the caller listens on loopback only) and within its
/// stream bounds; returns once every ack it answered is applied. The
/// engine is not closed here: the HTTP server that runs beside it does
/// that, after this returns.
pub async fn serve_grpc(
    engine: Engine,
    options: impl Into<ServerOptions>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let acks = std::sync::Arc::new(acks::Acks::new(engine.clone()));
    let target = service::Target::Engine(engine);
    let served = serve_on(
        target,
        Some(acks.clone()),
        options.into(),
        listener,
        shutdown,
    )
    .await;
    // every ack answered is applied before the engine may close
    acks.drain().await;
    served
}

/// Serves the gRPC protocol over `front`, a router serving `/api/v1` (a
/// cluster node's front, which routes each call to the partition it
/// concerns): every action is `POST /api/v1/actions/{name}` through it
/// and a subscription its message stream, with the caller's bearer token
/// (checked here with the principals of `options`, and again by the
/// front). Until `shutdown` resolves.
pub async fn serve_grpc_front(
    front: axum::Router,
    options: impl Into<ServerOptions>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let target = service::Target::Front(front::Front(front));
    serve_on(target, None, options.into(), listener, shutdown).await
}

async fn serve_on(
    target: service::Target,
    acks: Option<std::sync::Arc<acks::Acks>>,
    options: ServerOptions,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    // Streams end at the stop (a graceful shutdown waits for every open
    // call, and a subscription never ends by itself).
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let shutdown = async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    };
    let service = service::Service {
        target,
        auth: std::sync::Arc::new(options.auth),
        streams: options.streams,
        stop,
        acks,
    };
    let server = proto::acts_service_server::ActsServiceServer::new(service)
        .max_decoding_message_size(MAX_BODY_BYTES)
        .max_encoding_message_size(front::MAX_ANSWER_BYTES);
    tonic::transport::Server::builder()
        // an answer is due within a minute (a stream's first message
        // need not come: the stream itself is the answer)
        .timeout(Duration::from_secs(60))
        .http2_keepalive_interval(Some(Duration::from_secs(20)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .max_concurrent_streams(Some(256))
        .layer(crate::telemetry::GrpcTraceLayer)
        .add_service(server)
        .serve_with_incoming_shutdown(
            // no Nagle: an answer leaves at once, not after the peer's
            // delayed ACK (40 ms per call otherwise)
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            shutdown,
        )
        .await
}
