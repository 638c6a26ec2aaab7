//! Processes: start, list and query, read (with tasks and model), the
//! stuck listing, abort, the operator controls (pause, resume, terminate,
//! rewind, retry) and remove.

use acts::{ProcessQuery, TaskState, Vars};
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::extract::{Body, CountParam, Exec, OptionalBody, Params};
use crate::reply::page_json;
use crate::state::AppState;

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/processes", get(list_processes).post(start_process))
        .route("/api/v1/processes/query", post(query_processes))
        .route(
            "/api/v1/processes/{pid}",
            get(get_process).delete(remove_process),
        )
        .route("/api/v1/stuck", get(stuck_processes))
        .route("/api/v1/processes/{pid}/abort", post(abort_process))
        .route("/api/v1/processes/{pid}/pause", post(pause_process))
        .route("/api/v1/processes/{pid}/resume", post(unpause_process))
        .route("/api/v1/processes/{pid}/terminate", post(terminate_process))
        .route("/api/v1/processes/{pid}/rewind", post(rewind_process))
        .route("/api/v1/processes/{pid}/retry", post(retry_process))
        .route("/api/v1/processes/{pid}/model", get(process_model))
}

/// The body of a start.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StartRequest {
    /// The model id.
    model: String,
    /// Start variables (a `pid` names the process).
    #[serde(default)]
    vars: Vars,
    /// The model version to run (default: the latest).
    #[serde(default)]
    rev: Option<u32>,
}

async fn start_process(
    Exec(x, _): Exec,
    Body(req): Body<StartRequest>,
) -> ApiResult<impl IntoResponse> {
    let info = match req.rev {
        Some(rev) => x.start_version(&req.model, rev, req.vars).await?,
        None => x.start(&req.model, req.vars).await?,
    };
    Ok((StatusCode::CREATED, Json(info)))
}

/// A query (the body: an `acts::ProcessQuery` as JSON).
async fn query_processes(
    Exec(x, _): Exec,
    Params(o): Params<CountParam>,
    Body(query): Body<ProcessQuery>,
) -> ApiResult<impl IntoResponse> {
    let page = x.find_processes(&query).await?;
    let total = o.total(|| x.count_matching(&query)).await?;
    Ok(page_json("processes", page, total))
}

/// The filters and page of a process listing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListProcesses {
    state: Option<String>,
    model: Option<String>,
    /// Started at or after (ms).
    started_after: Option<i64>,
    /// Started before (ms).
    started_before: Option<i64>,
    /// `asc` (oldest first, the default) or `desc`.
    order: Option<String>,
    /// At most this many (default 100, at most 1000).
    limit: Option<usize>,
    /// The cursor a previous page returned.
    cursor: Option<String>,
}

async fn list_processes(
    Exec(x, _): Exec,
    Params(q): Params<ListProcesses>,
) -> ApiResult<impl IntoResponse> {
    let state = q
        .state
        .as_deref()
        .map(|st| {
            TaskState::ALL
                .into_iter()
                .find(|t| t.as_str() == st)
                .ok_or_else(|| {
                    let names: Vec<&str> = TaskState::ALL.iter().map(|t| t.as_str()).collect();
                    ApiError::bad_request(format!(
                        "unknown state '{st}' (one of: {})",
                        names.join(", ")
                    ))
                })
        })
        .transpose()?;
    let descending = match q.order.as_deref() {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "order '{other}' is not 'asc' or 'desc'"
            )));
        }
    };
    // One page through the state's or the model's index; the total is
    // counted from the same walk (the caller's visible matches).
    let query = {
        let mut v = ProcessQuery::default();
        v.state = state;
        v.model = q.model;
        v.started_after = q.started_after;
        v.started_before = q.started_before;
        v.descending = descending;
        v.limit = q.limit;
        v.cursor = q.cursor;
        v
    };
    let page = x.find_processes(&query).await?;
    let total = x.count_matching(&query).await?;
    Ok(page_json("processes", page, Some(total)))
}

async fn get_process(Exec(x, _): Exec, Path(pid): Path<String>) -> ApiResult<impl IntoResponse> {
    let process = x.process(&pid).await?;
    let tasks = x.tasks(&pid).await?;
    Ok(Json(json!({"process": process, "tasks": tasks})))
}

/// The model the process runs (as deployed when it started).
async fn process_model(Exec(x, _): Exec, Path(pid): Path<String>) -> ApiResult<impl IntoResponse> {
    let workflow = x.process_model(&pid).await?;
    let definition: Value = serde_json::from_str(&workflow.to_json()).unwrap_or(Value::Null);
    Ok(Json(json!({"definition": definition})))
}

async fn abort_process(Exec(x, _): Exec, Path(pid): Path<String>) -> ApiResult<StatusCode> {
    x.abort_process(&pid).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The threshold of a stuck listing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StuckQuery {
    /// Quiet for longer than this many seconds (default: the engine's
    /// `stuck_after`).
    after_secs: Option<u64>,
}

async fn stuck_processes(
    Exec(x, _): Exec,
    Params(q): Params<StuckQuery>,
) -> ApiResult<impl IntoResponse> {
    let after = q.after_secs.map(std::time::Duration::from_secs);
    Ok(Json(x.stuck_processes(after).await?))
}

/// The optional body of an operator control (none, or `{"reason": ...}`):
/// why.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ControlRequest {
    #[serde(default)]
    reason: String,
}

async fn pause_process(
    Exec(x, _): Exec,
    Path(pid): Path<String>,
    OptionalBody(req): OptionalBody<ControlRequest>,
) -> ApiResult<StatusCode> {
    x.pause_process(&pid, &req.reason).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn unpause_process(Exec(x, _): Exec, Path(pid): Path<String>) -> ApiResult<StatusCode> {
    x.unpause_process(&pid).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn terminate_process(
    Exec(x, _): Exec,
    Path(pid): Path<String>,
    OptionalBody(req): OptionalBody<ControlRequest>,
) -> ApiResult<StatusCode> {
    x.terminate_process(&pid, &req.reason).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The body of a rewind: the step to run again and the vars to set.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RewindRequest {
    to: String,
    #[serde(default)]
    vars: Vars,
}

async fn rewind_process(
    Exec(x, _): Exec,
    Path(pid): Path<String>,
    Body(req): Body<RewindRequest>,
) -> ApiResult<StatusCode> {
    x.rewind_process(&pid, &req.to, req.vars).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The optional body of a retry: the errored step (or act) to run again
/// (default: where the error began) and the vars to set first.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetryRequest {
    #[serde(default)]
    task: Option<String>,
    #[serde(default)]
    vars: Vars,
}

async fn retry_process(
    Exec(x, _): Exec,
    Path(pid): Path<String>,
    OptionalBody(req): OptionalBody<RetryRequest>,
) -> ApiResult<StatusCode> {
    x.retry_process(&pid, req.task.as_deref(), req.vars).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn remove_process(Exec(x, _): Exec, Path(pid): Path<String>) -> ApiResult<StatusCode> {
    if x.remove_process(&pid).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("cannot find process '{pid}'")))
    }
}
