//! The service itself: `/healthz`, `/readyz`, `/metrics` and who the
//! caller is (`/api/v1/me`).

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, Errors};
use crate::extract::Exec;
use crate::state::AppState;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
        .routes(routes!(whoami))
}

/// Whether the server runs (no token needed).
#[utoipa::path(
    get, path = "/healthz", tag = "service", security(()),
    responses((status = 200, description = "`ok` while the process runs.", content_type = "text/plain", body = String, example = "ok"))
)]
async fn healthz() -> &'static str {
    "ok"
}

/// Whether the server can take work (no token needed).
///
/// `ready` when the store answers and the next transition can commit —
/// followed, when the store does not keep every acknowledged write (its
/// settings, or something seen while it ran: a Redis that evicted keys),
/// by `; warning: ` and what can be or may have been lost; else the error,
/// with status 503.
#[utoipa::path(
    get, path = "/readyz", tag = "service", security(()),
    responses(
        (status = 200, description = "Ready.", content_type = "text/plain", body = String, example = "ready"),
        (status = 503, description = "Not ready, and why.", body = crate::error::ErrorBody)
    )
)]
async fn readyz(State(s): State<AppState>) -> Response {
    match s.engine.storage().readiness().await {
        Ok(()) => match s.engine.storage().persistence() {
            p if p.is_synced() => "ready".into_response(),
            p => format!("ready; warning: {p}").into_response(),
        },
        Err(e) => {
            let mut e = ApiError::from(e);
            e.status = StatusCode::SERVICE_UNAVAILABLE;
            e.into_response()
        }
    }
}

/// (operator) The Prometheus metrics.
///
/// The server's requests, the engine's transitions, commits, processes,
/// scripts and deliveries, and the store's traffic (see docs/SERVER.md).
#[utoipa::path(
    get, path = "/metrics", tag = "service",
    responses((status = 200, description = "Prometheus text, version 0.0.4.", content_type = "text/plain; version=0.0.4", body = String), Errors)
)]
async fn metrics(State(s): State<AppState>, x: Exec) -> Response {
    if let Err(e) = x.need_operator("reading the metrics") {
        return e.into_response();
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.metrics.render(&s.engine, &s.streams).await,
    )
        .into_response()
}

/// Who the caller is.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"principal": "alice", "roles": ["operator"], "admin": false, "operator": true, "tokens": true}))]
pub(crate) struct WhoAmI {
    /// The principal of the token (the local admin without tokens).
    principal: String,
    /// Its roles.
    roles: Vec<String>,
    /// Whether it is an admin.
    admin: bool,
    /// Whether it is an operator (admins are).
    operator: bool,
    /// Whether the server has tokens configured.
    tokens: bool,
}

/// Who the token is.
#[utoipa::path(
    get, path = "/api/v1/me", tag = "service",
    responses((status = 200, description = "The caller.", body = WhoAmI), Errors)
)]
async fn whoami(State(s): State<AppState>, Exec(_, who): Exec) -> Json<WhoAmI> {
    Json(WhoAmI {
        admin: who.is_admin(),
        operator: who.is_operator(),
        principal: who.id,
        roles: who.roles,
        tokens: s.tokens,
    })
}
