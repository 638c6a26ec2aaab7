//! Processes: start, list and query, read (with tasks and model), the
//! stuck listing, abort, the operator controls (pause, resume, terminate,
//! rewind, retry) and remove.

use acts::{ProcInfo, ProcessQuery, TaskInfo, TaskState, Vars, WaitingFor};
use axum::{Extension, Json};

use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ApiResult, Errors};
use crate::extract::{Body, CountParam, Exec, OptionalBody, Params, Path};
use crate::reply::{ProcessPage, wants_item_cursors};
use crate::state::AppState;
use crate::telemetry::CallerTrace;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_processes, start_process))
        .routes(routes!(query_processes))
        .routes(routes!(get_process, remove_process))
        .routes(routes!(stuck_processes))
        .routes(routes!(abort_process))
        .routes(routes!(pause_process))
        .routes(routes!(unpause_process))
        .routes(routes!(terminate_process))
        .routes(routes!(rewind_process))
        .routes(routes!(retry_process))
        .routes(routes!(process_model))
}

/// The body of a start.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"model": "approval", "vars": {"pid": "order_42", "amount": 120}}))]
struct StartRequest {
    /// The model id.
    model: String,
    /// Start variables (a `pid` names the process).
    #[serde(default)]
    #[schema(value_type = Object)]
    vars: Vars,
    /// The model version to run (default: the latest).
    #[serde(default)]
    rev: Option<u32>,
}

/// Starts a process.
#[utoipa::path(
    post, path = "/api/v1/processes", tag = "processes",
    request_body = StartRequest,
    responses(
        (status = 201, description = "The process (state `none` when it was parked at the admission cap).", body = ProcInfo),
        Errors
    )
)]
async fn start_process(
    Exec(x, _): Exec,
    caller: Option<Extension<CallerTrace>>,
    Body(mut req): Body<StartRequest>,
) -> ApiResult<impl IntoResponse> {
    CallerTrace::carry(caller.as_deref(), &mut req.vars);
    let info = match req.rev {
        Some(rev) => x.proc().start_version(&req.model, rev, req.vars).await?,
        None => x.proc().start(&req.model, req.vars).await?,
    };
    Ok((StatusCode::CREATED, Json(info)))
}

/// Finds processes from an index, a page at a time.
#[utoipa::path(
    post, path = "/api/v1/processes/query", tag = "processes",
    params(CountParam),
    request_body(content = ProcessQuery, example = json!({"model": "approval", "state": "running", "limit": 10})),
    responses((status = 200, description = "One page (`total` with `count=true`).", body = ProcessPage), Errors)
)]
async fn query_processes(
    Exec(x, _): Exec,
    Params(o): Params<CountParam>,
    headers: axum::http::HeaderMap,
    Body(mut query): Body<ProcessQuery>,
) -> ApiResult<impl IntoResponse> {
    query.item_cursors = wants_item_cursors(&headers);
    let page = x.proc().find(&query).await?;
    let total = o.total(|| x.proc().count_matching(&query)).await?;
    Ok(ProcessPage::reply(page, total))
}

/// The filters and page of a process listing.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ListProcesses {
    /// In this state.
    #[param(value_type = Option<TaskState>)]
    state: Option<String>,
    /// Of this model.
    model: Option<String>,
    /// Started at or after (ms).
    started_after: Option<i64>,
    /// Started before (ms).
    started_before: Option<i64>,
    /// Waiting for this: `concurrency` (parked, for a free slot of its
    /// concurrency key), `admission` (parked, for a place under the
    /// engine's cap) or `gate` (running, a task at a step's or act's
    /// concurrency or rate key).
    #[param(value_type = Option<WaitingFor>)]
    waiting_for: Option<WaitingFor>,
    /// Of this concurrency key.
    concurrency_key: Option<String>,
    /// Ended with this error code.
    ecode: Option<String>,
    /// `asc` (oldest first, the default) or `desc`.
    #[param(pattern = "^(asc|desc)$")]
    order: Option<String>,
    /// At most this many (default 100; more than 1,000 is read as 1,000).
    limit: Option<usize>,
    /// The cursor a previous page returned.
    cursor: Option<String>,
}

/// The processes, a page at a time, in admission order.
#[utoipa::path(
    get, path = "/api/v1/processes", tag = "processes",
    params(ListProcesses),
    responses((status = 200, description = "One page and the number of matches.", body = ProcessPage), Errors)
)]
async fn list_processes(
    Exec(x, _): Exec,
    Params(q): Params<ListProcesses>,
    headers: axum::http::HeaderMap,
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
        v.waiting_for = q.waiting_for;
        v.concurrency_key = q.concurrency_key;
        v.ecode = q.ecode;
        v.descending = descending;
        v.limit = q.limit;
        v.cursor = q.cursor;
        v.item_cursors = wants_item_cursors(&headers);
        v
    };
    let page = x.proc().find(&query).await?;
    let total = x.proc().count_matching(&query).await?;
    Ok(ProcessPage::reply(page, Some(total)))
}

/// A process and every task of it.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ProcessDetail {
    /// The process, with its outputs.
    process: ProcInfo,
    /// Every task, with its state, times and data.
    tasks: Vec<TaskInfo>,
}

/// A process and its tasks.
#[utoipa::path(
    get, path = "/api/v1/processes/{pid}", tag = "processes",
    params(PidParam),
    responses((status = 200, description = "The process and its tasks.", body = ProcessDetail), Errors)
)]
async fn get_process(Exec(x, _): Exec, Path(pid): Path<String>) -> ApiResult<impl IntoResponse> {
    let process = x.proc().get(&pid).await?;
    let tasks = x.task().list(&pid).await?;
    Ok(Json(ProcessDetail { process, tasks }))
}

/// The process id of a path.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub(crate) struct PidParam {
    /// The process id.
    #[param(example = "order_42")]
    #[allow(dead_code)]
    pid: String,
}

/// The model a process runs.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ProcessModel {
    /// The model, as deployed when the process started.
    #[schema(value_type = Object)]
    definition: Value,
}

/// The model a process runs, as deployed when it started.
#[utoipa::path(
    get, path = "/api/v1/processes/{pid}/model", tag = "processes",
    params(PidParam),
    responses((status = 200, description = "The model the process runs.", body = ProcessModel), Errors)
)]
async fn process_model(Exec(x, _): Exec, Path(pid): Path<String>) -> ApiResult<impl IntoResponse> {
    let workflow = x.proc().model(&pid).await?;
    let definition: Value = serde_json::from_str(&workflow.to_json()).unwrap_or(Value::Null);
    Ok(Json(ProcessModel { definition }))
}

/// Aborts a process.
#[utoipa::path(
    post, path = "/api/v1/processes/{pid}/abort", tag = "processes",
    params(PidParam),
    responses((status = 204, description = "Aborted."), Errors)
)]
async fn abort_process(Exec(x, _): Exec, Path(pid): Path<String>) -> ApiResult<StatusCode> {
    x.proc().abort(&pid).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The threshold of a stuck listing.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct StuckQuery {
    /// Quiet for longer than this many seconds (default: the engine's
    /// `stuck_after`; at most ten years).
    #[param(maximum = 315_360_000)]
    after_secs: Option<u64>,
}

/// The longest quiet a stuck listing takes: ten years.
const MAX_STUCK_AFTER_SECS: u64 = 315_360_000;

/// (operator) The processes quiet for longer than a threshold.
#[utoipa::path(
    get, path = "/api/v1/stuck", tag = "processes",
    params(StuckQuery),
    responses((status = 200, description = "The stuck processes, longest quiet first, at most 1,000.", body = Vec<ProcInfo>), Errors)
)]
async fn stuck_processes(
    Exec(x, _): Exec,
    Params(q): Params<StuckQuery>,
) -> ApiResult<impl IntoResponse> {
    if let Some(secs) = q.after_secs.filter(|s| *s > MAX_STUCK_AFTER_SECS) {
        return Err(ApiError::bad_request(format!(
            "after_secs {secs} is longer than the most, {MAX_STUCK_AFTER_SECS} (ten years)"
        )));
    }
    let after = q.after_secs.map(std::time::Duration::from_secs);
    Ok(Json(x.proc().stuck(after).await?))
}

/// The optional body of an operator control (none, or `{"reason": ...}`):
/// why.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"reason": "waiting for the payment provider"}))]
struct ControlRequest {
    /// Why (at most 1 KiB).
    #[serde(default)]
    reason: String,
}

/// (operator) Pauses a process.
///
/// Timers and automatic steps hold, client actions are refused until it
/// is resumed.
#[utoipa::path(
    post, path = "/api/v1/processes/{pid}/pause", tag = "processes",
    params(PidParam),
    request_body(content = Option<ControlRequest>, description = "Optional: why."),
    responses((status = 204, description = "Paused."), Errors)
)]
async fn pause_process(
    Exec(x, _): Exec,
    Path(pid): Path<String>,
    OptionalBody(req): OptionalBody<ControlRequest>,
) -> ApiResult<StatusCode> {
    x.proc().pause(&pid, &req.reason).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// (operator) Resumes a paused process.
#[utoipa::path(
    post, path = "/api/v1/processes/{pid}/resume", tag = "processes",
    params(PidParam),
    responses((status = 204, description = "Resumed: due timeouts fire, held work runs."), Errors)
)]
async fn unpause_process(Exec(x, _): Exec, Path(pid): Path<String>) -> ApiResult<StatusCode> {
    x.proc().unpause(&pid).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// (operator) Ends a process `aborted` with error `terminated`.
#[utoipa::path(
    post, path = "/api/v1/processes/{pid}/terminate", tag = "processes",
    params(PidParam),
    request_body(content = Option<ControlRequest>, description = "Optional: why."),
    responses((status = 204, description = "Terminated."), Errors)
)]
async fn terminate_process(
    Exec(x, _): Exec,
    Path(pid): Path<String>,
    OptionalBody(req): OptionalBody<ControlRequest>,
) -> ApiResult<StatusCode> {
    x.proc().terminate(&pid, &req.reason).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The body of a rewind: the step to run again and the vars to set.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"to": "review", "vars": {"amount": 90}}))]
struct RewindRequest {
    /// The step to run again (on the line of the active act).
    to: String,
    /// Variables to set first.
    #[serde(default)]
    #[schema(value_type = Object)]
    vars: Vars,
}

/// (operator) Runs a step again; what ran after it is backed.
#[utoipa::path(
    post, path = "/api/v1/processes/{pid}/rewind", tag = "processes",
    params(PidParam),
    request_body = RewindRequest,
    responses((status = 204, description = "Rewound."), Errors)
)]
async fn rewind_process(
    Exec(x, _): Exec,
    Path(pid): Path<String>,
    Body(req): Body<RewindRequest>,
) -> ApiResult<StatusCode> {
    x.proc().rewind(&pid, &req.to, req.vars).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The optional body of a retry: the errored step (or act) to run again
/// (default: where the error began) and the vars to set first.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"vars": {"endpoint": "https://backup.example.com"}}))]
struct RetryRequest {
    /// The errored step or act to run again (default: where the error
    /// began).
    #[serde(default)]
    task: Option<String>,
    /// Variables to set first.
    #[serde(default)]
    #[schema(value_type = Object)]
    vars: Vars,
}

/// (operator) Runs an errored process again from where it failed.
#[utoipa::path(
    post, path = "/api/v1/processes/{pid}/retry", tag = "processes",
    params(PidParam),
    request_body(content = Option<RetryRequest>, description = "Optional: what to run again, and vars to set."),
    responses((status = 204, description = "Running again."), Errors)
)]
async fn retry_process(
    Exec(x, _): Exec,
    Path(pid): Path<String>,
    OptionalBody(req): OptionalBody<RetryRequest>,
) -> ApiResult<StatusCode> {
    x.proc().retry(&pid, req.task.as_deref(), req.vars).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Removes a process and everything stored for it.
#[utoipa::path(
    delete, path = "/api/v1/processes/{pid}", tag = "processes",
    params(PidParam),
    responses((status = 204, description = "Removed."), Errors)
)]
async fn remove_process(Exec(x, _): Exec, Path(pid): Path<String>) -> ApiResult<StatusCode> {
    if x.proc().remove(&pid).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("cannot find process '{pid}'")))
    }
}
