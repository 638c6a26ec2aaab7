//! The OpenAPI 3.1 document of the HTTP API, generated from the code: the
//! paths from each handler's `#[utoipa::path]` (the same annotations
//! register the routes, so a route cannot be missing from it), the
//! schemas from the JSON types themselves (the engine's, through the
//! facade's `openapi` feature). Served at `GET /api/v1/openapi.json` (no
//! token needed) and committed as `docs/openapi.json`, which a test keeps
//! equal to what this builds.
//!
//! The REST routes of acts 0.25's web plugin (`routes/compat.rs`) are not
//! in it: they are the reference's contract, kept for its clients.
//!
//! May use: `routes` (their routers), `state` (their state), `error` and
//! `contract` (the rules written into the document).

use std::sync::OnceLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::OpenApi as Document;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::ErrorBody;
use crate::state::AppState;

/// Where the document is served.
pub const OPENAPI_PATH: &str = "/api/v1/openapi.json";

/// What the document says before its paths: the API, its tags, the token
/// scheme (every call needs one unless it says `security: [{}]`), and the
/// schemas no path names directly.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "acts",
        description = "The HTTP API of `acts serve`: deploy workflow models, start processes, \
answer the interrupts they raise, stream their messages (Server-Sent Events) and operate them. \
Every failure is `{\"error\": {\"code\", \"message\"}}`. See docs/SERVER.md.",
        license(name = "MIT OR Apache-2.0")
    ),
    security(("bearer" = [])),
    modifiers(&BearerToken),
    components(schemas(ErrorBody, acts::Message)),
    tags(
        (name = "models", description = "Deploy, read, version and migrate models."),
        (name = "processes", description = "Start, find, read and operate processes."),
        (name = "tasks", description = "Find tasks and act on them (answer interrupts)."),
        (name = "messages", description = "The live message stream."),
        (name = "channels", description = "Durable channels: messages kept until acknowledged."),
        (name = "deliveries", description = "What durable channels owe: pending, acknowledged, dead letters."),
        (name = "triggers", description = "Triggers and hooks."),
        (name = "bulk", description = "Bulk jobs: one operator action on every process a query matches."),
        (name = "actions", description = "The acts 0.25 action table (what its gRPC `Send` answers), in its shapes."),
        (name = "service", description = "Health, readiness, metrics, who am I, this document."),
        (name = "dashboard", description = "The web dashboard."),
    )
)]
struct Top;

/// The `bearer` security scheme: `Authorization: Bearer TOKEN`.
struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, doc: &mut Document) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A token of the server's token file (`acts serve --tokens`); \
                         without tokens every request is the local admin.",
                    ))
                    .build(),
            ),
        );
    }
}

/// Every documented route (each resource's router, and this document's
/// own).
pub(crate) fn router() -> axum::Router<AppState> {
    build().0
}

/// The document (built once per process), as JSON.
pub fn document() -> &'static serde_json::Value {
    static DOCUMENT: OnceLock<serde_json::Value> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        // (utoipa's types serialize whatever they hold)
        let mut doc = serde_json::to_value(build().1).unwrap_or_default();
        // The rules the handlers' types cannot say, written in (see
        // `contract`).
        crate::contract::tighten(&mut doc);
        doc
    })
}

fn build() -> (axum::Router<AppState>, Document) {
    OpenApiRouter::with_openapi(Top::openapi())
        .routes(routes!(openapi_json))
        .merge(crate::routes::all())
        .split_for_parts()
}

/// The document as pretty JSON (what `docs/openapi.json` holds, with a
/// final newline).
pub fn openapi_json_text() -> String {
    let mut text = serde_json::to_string_pretty(document()).unwrap_or_default();
    text.push('\n');
    text
}

/// This document (no token needed).
#[utoipa::path(
    get, path = "/api/v1/openapi.json", tag = "service", security(()),
    responses((status = 200, description = "The OpenAPI 3.1 document of this API.", content_type = "application/json", body = Object))
)]
async fn openapi_json() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        openapi_json_text(),
    )
        .into_response()
}
