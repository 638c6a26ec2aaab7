//! The acts 0.25 gRPC protocol (`acts.grpc.ActsService`, what the
//! reference's client `acts-channel` speaks), beside the HTTP API and as
//! thin over the engine's executor: `Send` runs one action of the
//! reference's table (the `actions` room, which the REST routes use too),
//! `OnMessage` streams messages (`service.rs`). Over a cluster node's
//! front instead of one engine, both go through its HTTP routes
//! (`front.rs`). Callers are the bearer tokens' principals of the HTTP API
//! (`auth.rs`), and streams share its bounds (`stream.rs`).
//!
//! May use: the facade `acts`, tonic and prost, axum (a front), and of the
//! server `actions`, `auth`, `stream`, `error`, `options` and `telemetry`
//! (request traces) — never the REST routes.

mod front;
mod proto;
mod service;

use std::future::Future;
use std::time::Duration;

use acts::Engine;
use tokio::net::TcpListener;

use crate::options::{MAX_BODY_BYTES, ServerOptions};

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
    let acks = std::sync::Arc::new(crate::actions::Acks::new(engine.clone()));
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
    acks: Option<std::sync::Arc<crate::actions::Acks>>,
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
