//! The API's routes, one router per resource (each file's `router()`),
//! merged by [`crate::router`]: the service itself (health, readiness,
//! metrics, who am I), backups, models, processes, tasks, the live message stream,
//! durable channels, deliveries, triggers and hooks, bulk jobs, and the
//! acts 0.25 action table (`actions.rs`).
//!
//! Handlers are thin: they take the [`crate::extract`] extractors and call
//! the executor; nothing here parses a body or keeps state.
//!
//! Each handler's `#[utoipa::path]` both registers its route and
//! describes it in the OpenAPI document (built in `openapi.rs`).
//!
//! May use: `state`, the extractors (`extract`), `error`, the stream budget
//! (`stream`), the page types (`reply`), the request's trace context
//! (`telemetry`), the action table (`actions`; from `actions.rs` and
//! `compat.rs`), the dashboard's pages (`dashboard`) and the facade `acts`;
//! no route file uses another, and none the gRPC module.

use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

pub(crate) mod actions;
pub(crate) mod backups;
pub(crate) mod bulk;
pub(crate) mod channels;
pub(crate) mod compat;
pub(crate) mod deliveries;
pub(crate) mod messages;
pub(crate) mod models;
pub(crate) mod processes;
pub(crate) mod service;
pub(crate) mod tasks;
pub(crate) mod triggers;

/// Every documented resource's router (all but the acts 0.25 routes of
/// `compat.rs`), and the dashboard's.
pub(crate) fn all() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(service::router())
        .merge(crate::dashboard::router())
        .merge(models::router())
        .merge(processes::router())
        .merge(tasks::router())
        .merge(messages::router())
        .merge(channels::router())
        .merge(deliveries::router())
        .merge(triggers::router())
        .merge(bulk::router())
        .merge(backups::router())
        .merge(actions::router())
}
