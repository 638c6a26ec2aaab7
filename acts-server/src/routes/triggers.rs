//! Triggers and hooks: list the triggers, start a manual or hook
//! trigger's model, send a hook event (optionally waiting for the
//! processes it started to end).

use acts::ChannelOptions;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::extract::{Exec, OptionalBody, Params};
use crate::state::AppState;
use crate::stream::Subscription;

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/triggers", get(triggers))
        .route("/api/v1/triggers/{id}/start", post(start_trigger))
        .route("/api/v1/hooks/{name}", post(hook))
}

async fn triggers(Exec(x, _): Exec) -> ApiResult<impl IntoResponse> {
    Ok(Json(x.triggers().await?))
}

/// Starts the model of a manual or hook trigger (`MODEL:TRIGGER`) with the
/// body as its payload (none: the trigger's default params).
async fn start_trigger(
    Exec(x, _): Exec,
    Path(id): Path<String>,
    OptionalBody(payload): OptionalBody<Value>,
) -> ApiResult<impl IntoResponse> {
    let info = x.start_trigger(&id, payload).await?;
    Ok((StatusCode::CREATED, Json(info)))
}

/// The options of a hook call.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HookQuery {
    /// Wait up to this many milliseconds (at most [`MAX_HOOK_WAIT_MS`])
    /// for the processes started to end, and answer with their outputs.
    wait_ms: Option<u64>,
}

/// The longest a hook call may wait for its processes: 5 minutes.
const MAX_HOOK_WAIT_MS: u64 = 300_000;

/// Sends hook event `name`: every model with a hook trigger of that name
/// starts with the body as its payload; answers with the processes started
/// — with `?wait_ms=N`, once they have ended (or N ms have passed: the ones
/// still running are answered as they are), with their outputs.
async fn hook(
    State(s): State<AppState>,
    x: Exec,
    Path(name): Path<String>,
    Params(q): Params<HookQuery>,
    OptionalBody(payload): OptionalBody<Value>,
) -> ApiResult<impl IntoResponse> {
    let exec = &x.0;
    let Some(wait) = q.wait_ms else {
        return Ok(Json(exec.hook(&name, payload).await?));
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
    let started = exec.hook(&name, payload).await?;
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
        out.push(exec.process(&p.pid).await?);
    }
    Ok(Json(out))
}
