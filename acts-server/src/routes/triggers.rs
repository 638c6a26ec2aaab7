//! Triggers and hooks: list the triggers, start a manual or hook
//! trigger's model, send a hook event (optionally waiting for the
//! processes it started to end).

use acts::{ChannelOptions, ProcInfo, TriggerInfo};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ApiResult, Errors};
use crate::extract::{Exec, Params, Path, Payload};
use crate::state::AppState;
use crate::stream::Subscription;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(triggers))
        .routes(routes!(start_trigger))
        .routes(routes!(hook))
}

/// Every deployed model's triggers.
#[utoipa::path(
    get, path = "/api/v1/triggers", tag = "triggers",
    responses((status = 200, description = "The triggers (schedules with their next and last runs).", body = Vec<TriggerInfo>), Errors)
)]
async fn triggers(Exec(x, _): Exec) -> ApiResult<impl IntoResponse> {
    Ok(Json(x.evt().list().await?))
}

/// Starts the model of a manual or hook trigger.
///
/// The trigger is `MODEL:TRIGGER`; the body is the payload (none: the
/// trigger's default params).
#[utoipa::path(
    post, path = "/api/v1/triggers/{id}/start", tag = "triggers",
    params(("id" = String, Path, description = "`MODEL:TRIGGER`.", example = "nightly:by_hand")),
    request_body(content = Option<Value>, description = "The payload: any JSON (optional; none: the trigger's params).", example = json!({"rows": 10})),
    responses((status = 201, description = "The process started.", body = ProcInfo), Errors)
)]
async fn start_trigger(
    Exec(x, _): Exec,
    Path(id): Path<String>,
    Payload(payload): Payload,
) -> ApiResult<impl IntoResponse> {
    let info = x.evt().start(&id, payload).await?;
    Ok((StatusCode::CREATED, Json(info)))
}

/// The options of a hook call.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct HookQuery {
    /// Wait up to this many milliseconds (at most 300,000)
    /// for the processes started to end, and answer with their outputs.
    #[param(maximum = 300_000)]
    wait_ms: Option<u64>,
}

/// The longest a hook call may wait for its processes: 5 minutes.
const MAX_HOOK_WAIT_MS: u64 = 300_000;

/// Sends a hook event.
///
/// Every model with a hook trigger of that name starts with the body as
/// its payload; answers with the processes started — with `?wait_ms=N`,
/// once they have ended (or N ms have passed: the ones still running are
/// answered as they are), with their outputs.
#[utoipa::path(
    post, path = "/api/v1/hooks/{name}", tag = "triggers",
    params(("name" = String, Path, description = "The hook's name.", example = "order-placed"), HookQuery),
    request_body(content = Option<Value>, description = "The payload: any JSON (optional).", example = json!({"order": 42})),
    responses((status = 200, description = "The processes started (with `wait_ms`: once they ended or the time is up, with their states and outputs).", body = Vec<ProcInfo>), Errors)
)]
async fn hook(
    State(s): State<AppState>,
    x: Exec,
    Path(name): Path<String>,
    Params(q): Params<HookQuery>,
    Payload(payload): Payload,
) -> ApiResult<impl IntoResponse> {
    let exec = &x.0;
    let Some(wait) = q.wait_ms else {
        return Ok(Json(exec.evt().hook(&name, payload).await?));
    };
    if wait > MAX_HOOK_WAIT_MS {
        return Err(ApiError::bad_request(format!(
            "wait_ms {wait} is longer than the limit of {MAX_HOOK_WAIT_MS}"
        )));
    }
    // Listen before starting: a process that ends at once is heard.
    let mut sub = Subscription::open(
        &s.streams,
        s.engine
            .channel(ChannelOptions::default().with_type("workflow")),
        exec,
        &x.1,
    )?;
    let started = exec.evt().hook(&name, payload).await?;
    let mut open: std::collections::HashSet<String> = started
        .iter()
        .filter(|p| !p.state.is_terminal())
        .map(|p| p.pid.clone())
        .collect();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(wait);
    while !open.is_empty() {
        match tokio::time::timeout_at(deadline, sub.next_message()).await {
            Ok(Some(m)) if m["state"] != "created" && m["state"] != "stuck" => {
                open.remove(m["pid"].as_str().unwrap_or_default());
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
    let mut out = Vec::with_capacity(started.len());
    for p in started {
        out.push(exec.proc().get(&p.pid).await?);
    }
    Ok(Json(out))
}
