//! The acts 0.25 action table over HTTP: `POST /api/v1/actions/{name}`
//! runs one action of the table the gRPC protocol's `Send` answers (the
//! body is its options), in the reference's answer shapes. It is what a
//! cluster node's gRPC server sends through the node's front, and what a
//! client of the reference that speaks HTTP may call directly.

use acts::Vars;
use axum::extract::State;
use axum::{Extension, Json};
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiResult, Errors};
use crate::extract::{Exec, OptionalBody, Path};
use crate::state::AppState;
use crate::telemetry::CallerTrace;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(action))
}

/// Runs one action of the acts 0.25 table (what its gRPC `Send` takes).
///
/// `name` is an action of the reference's table (`proc:start`,
/// `act:complete`, `model:ls`, ...; docs/COMPATIBILITY.md lists them and
/// what acts answers for each); the body is its options, the answer its
/// data, both in the reference's shapes. A name of the table acts does not
/// support is `501 not_supported`; a name the table does not know is
/// `404`.
#[utoipa::path(
    post, path = "/api/v1/actions/{name}", tag = "actions",
    params(("name" = String, Path, description = "The action, `KIND:VERB`.", example = "proc:ls")),
    request_body(content = Option<Object>, description = "The action's options (optional).", example = json!({"query": {"offset": 0, "limit": 10}})),
    responses((status = 200, description = "The action's data, in the reference's shape.", body = Value), Errors)
)]
async fn action(
    State(s): State<AppState>,
    x: Exec,
    caller: Option<Extension<CallerTrace>>,
    Path(name): Path<String>,
    OptionalBody(options): OptionalBody<Vars>,
) -> ApiResult<Json<Value>> {
    let answer = crate::actions::apply(&s.engine, &x.1, &name, options, caller.as_deref()).await?;
    Ok(Json(answer))
}
