//! acts as a service: the HTTP API over a running [`Engine`] — JSON under
//! `/api/v1` (models, processes, task actions), a live message stream as
//! Server-Sent Events, `/healthz`, `/readyz` and `/metrics` (Prometheus
//! text) — and beside it the gRPC protocol of acts-server 0.25
//! ([`serve_grpc`], module `grpc/`), with bearer-token access control ([`Auth`]; the checks
//! themselves are the engine executor's), errors as `{"error": {"code",
//! "message"}}`, a request size limit, and a graceful shutdown that
//! finishes what is in flight and closes the engine. `acts serve` (in
//! `acts-cli`) runs it.
//!
//! May depend on: the facade `acts` (the engine and its types), axum and
//! tower-http, tonic and prost, metrics, utoipa; never on a store backend (the caller opens the
//! store).
//!
//! Start reading at [`router`] (the routers of every resource merged, one
//! file each under `routes/`) and [`serve`]. The OpenAPI 3.1 document
//! ([`openapi_document`], served at `/api/v1/openapi.json`) is generated
//! from the same handlers (`openapi.rs`). What handlers share is in
//! `state.rs`; what they take from a request (the caller's executor, a
//! JSON body, query parameters — each failing with the API's error body)
//! in `extract.rs`. The web dashboard (served at `/`) is `ui/` (embedded by
//! `dashboard.rs`).

mod actions;
mod auth;
mod contract;
mod dashboard;
mod error;
mod extract;
mod grpc;
mod guard;
mod listener;
mod metrics;
mod openapi;
mod options;
mod reply;
mod routes;
mod state;
mod stream;
mod telemetry;

use std::future::Future;

use acts::Engine;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use tokio::net::TcpListener;

pub use actions::{
    ACTIONS as GRPC_ACTIONS, EXTENSIONS as GRPC_EXTENSIONS, ack_id_on, ack_partition,
    is_action_name, page as grpc_page,
};
pub use auth::{Auth, LOCAL_ADMIN, TokenConfig, hash_token};
pub use error::ApiError;
pub use grpc::{serve_grpc, serve_grpc_front};
pub use guard::Guard;
pub use listener::StallListener;
pub use openapi::{OPENAPI_PATH, document as openapi_document, openapi_json_text};
pub use options::{MAX_BODY_BYTES, ServerOptions};
pub use reply::ITEM_CURSORS;
pub use routes::compat::{rest_action, rest_envelope};
pub use stream::{STREAM_QUEUE, StreamLimits};
pub use telemetry::{OTEL_TARGET, OtlpConfig, OtlpProtocol, Telemetry, TelemetryError};

/// The API over `engine` without tokens: every request is the local
/// admin (see [`router_with`]).
pub fn router(engine: Engine) -> Router {
    router_with(engine, ServerOptions::default())
}

/// The API over `engine` (every route; see the crate docs), each request
/// acting for the principal of its token in `options.auth`, behind the
/// [`Guard`] of a server with or without tokens whose port is not known
/// (any port of a loopback host is taken; [`serve`] knows its port and
/// checks it).
pub fn router_with(engine: Engine, options: impl Into<ServerOptions>) -> Router {
    app(engine, options.into(), None)
}

/// `router` behind `guard` (the cluster's front puts its own routes
/// behind the same checks).
pub fn guarded(router: Router, guard: Guard) -> Router {
    router.layer(axum::middleware::from_fn_with_state(
        std::sync::Arc::new(guard),
        guard::enforce,
    ))
}

fn app(engine: Engine, options: ServerOptions, port: Option<u16>) -> Router {
    let auth = options.auth;
    let guard = Guard::new(auth.is_enabled(), port);
    let metrics = metrics::Metrics::new();
    let api = routes(state::AppState {
        engine,
        metrics: metrics.clone(),
        tokens: auth.is_enabled(),
        streams: options.streams,
        backup_dir: options.backup_dir,
    })
    .layer(axum::middleware::from_fn_with_state(
        std::sync::Arc::new(auth),
        auth::authenticate,
    ))
    .layer(axum::middleware::from_fn_with_state(
        metrics,
        metrics::Metrics::track,
    ))
    .layer(axum::middleware::from_fn(telemetry::trace_http_request))
    .layer(DefaultBodyLimit::max(MAX_BODY_BYTES));
    guarded(api, guard)
}

/// Every resource's router, and a 404 in the API's error body for the
/// rest (without the body limit and the request counter, which [`app`]
/// adds).
fn routes(state: state::AppState) -> Router {
    openapi::router()
        .merge(routes::compat::router())
        .fallback(|| async { ApiError::not_found("no such endpoint (the API is under /api/v1)") })
        .with_state(state)
}

/// Serves the API over `engine` on `listener` until `shutdown` resolves:
/// then stops accepting, lets the requests in flight finish (their
/// transitions are durable before they answer), and closes the engine
/// (flushing what is queued and letting go of the store). A connection
/// whose client takes no byte for `options.streams.stall` is dropped
/// ([`StallListener`]).
pub async fn serve(
    engine: Engine,
    options: impl Into<ServerOptions>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let options = options.into();
    let port = listener.local_addr()?.port();
    let stall = options.stream_limits().stall;
    let app = app(engine.clone(), options, Some(port));
    let served = axum::serve(StallListener::new(listener, stall), app)
        .with_graceful_shutdown(shutdown)
        .await;
    engine.close().await;
    served
}

/// Resolves on Ctrl-C or SIGTERM (the signals a service manager sends).
/// The handlers are installed when this is called, not when the future is
/// first polled: call it before saying the server listens, so a stop sent
/// right after that is never the default action (killed by the signal).
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let (mut term, mut int) = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::terminate()).ok(),
            signal(SignalKind::interrupt()).ok(),
        )
    };
    async move {
        #[cfg(unix)]
        {
            let term = async {
                match term.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let int = async {
                match int.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = term => {}
                () = int => {}
            }
        }
        #[cfg(not(unix))]
        {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        tracing::info!("shutting down: finishing the requests in flight");
    }
}
