//! The service itself: `/healthz`, `/readyz`, `/metrics` and who the
//! caller is (`/api/v1/me`).

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::extract::Exec;
use crate::state::AppState;

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/api/v1/me", get(whoami))
}

async fn healthz() -> &'static str {
    "ok"
}

/// Ready when the next transition can commit (`Engine::readiness`): a
/// 503 says why not.
async fn readyz(State(s): State<AppState>) -> Response {
    match s.engine.readiness().await {
        Ok(()) => "ready".into_response(),
        Err(e) => {
            let mut e = ApiError::from(e);
            e.status = StatusCode::SERVICE_UNAVAILABLE;
            e.into_response()
        }
    }
}

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

/// Who the caller is: principal, roles, and what they may do (the
/// dashboard shows only what they may use; the executor decides).
async fn whoami(State(s): State<AppState>, Exec(_, who): Exec) -> Json<Value> {
    Json(json!({
        "principal": who.id,
        "roles": who.roles,
        "admin": who.is_admin(),
        "operator": who.is_operator(),
        "tokens": s.tokens,
    }))
}
