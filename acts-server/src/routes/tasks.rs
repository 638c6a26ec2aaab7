//! Tasks: the caller's inbox, task queries across processes, and the
//! actions on one task (complete, submit, back, ..., push).

use std::str::FromStr;

use acts::{Action, TaskInfo, TaskQuery, Vars};
use axum::{Extension, Json};

use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ApiResult, Errors};
use crate::extract::{Body, CountParam, Exec, OptionalBody, Params, Path};
use crate::reply::TaskPage;
use crate::state::AppState;
use crate::telemetry::CallerTrace;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(inbox))
        .routes(routes!(query_tasks))
        .routes(routes!(act))
}

/// Most interrupts the inbox lists.
const INBOX_LIMIT: usize = 500;

/// An open interrupt and the model of its process.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct InboxTask {
    /// The task.
    #[serde(flatten)]
    task: TaskInfo,
    /// The model its process runs.
    model_id: String,
}

/// The open interrupts the caller may answer.
#[utoipa::path(
    get, path = "/api/v1/inbox", tag = "tasks",
    responses((status = 200, description = "At most 500, oldest process first.", body = Vec<InboxTask>), Errors)
)]
async fn inbox(Exec(x, _): Exec) -> ApiResult<impl IntoResponse> {
    let out: Vec<InboxTask> = x
        .task()
        .inbox(INBOX_LIMIT)
        .await?
        .into_iter()
        .map(|(p, task)| InboxTask {
            task,
            model_id: p.model_id,
        })
        .collect();
    Ok(Json(out))
}

/// Finds tasks (in the processes a process query finds), a page at a time.
#[utoipa::path(
    post, path = "/api/v1/tasks/query", tag = "tasks",
    params(CountParam),
    request_body(content = TaskQuery, example = json!({"state": "interrupted", "answerable": true})),
    responses((status = 200, description = "One page of tasks.", body = TaskPage), Errors)
)]
async fn query_tasks(
    Exec(x, _): Exec,
    Params(o): Params<CountParam>,
    headers: axum::http::HeaderMap,
    Body(mut query): Body<TaskQuery>,
) -> ApiResult<impl IntoResponse> {
    query.item_cursors = crate::reply::wants_item_cursors(&headers);
    let page = x.task().find(&query).await?;
    let total = o.total(|| x.task().count(&query)).await?;
    Ok(TaskPage::reply(page, total))
}

/// The task and the action of a path.
#[derive(Debug, serde::Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
struct ActPath {
    /// The process id.
    #[param(example = "order_42")]
    pid: String,
    /// The task id.
    tid: String,
    /// The action.
    #[param(inline, value_type = String, pattern = "^(complete|submit|back|cancel|abort|skip|error|push|remove|set_vars)$", example = "complete")]
    action: String,
}

/// Applies an action to a task (answers an interrupt, pushes an act, ...).
#[utoipa::path(
    post, path = "/api/v1/processes/{pid}/tasks/{tid}/{action}", tag = "tasks",
    params(ActPath),
    request_body(
        content = Option<Object>,
        description = "The action's options (optional): `to` for back, `ecode`/`message` for error, the act for push, the answer's variables otherwise.",
        example = json!({"approved": true})
    ),
    responses((status = 204, description = "Applied."), Errors)
)]
async fn act(
    Exec(x, _): Exec,
    Path((pid, tid, action)): Path<(String, String, String)>,
    caller: Option<Extension<CallerTrace>>,
    OptionalBody(mut options): OptionalBody<Vars>,
) -> ApiResult<StatusCode> {
    if action == "push" {
        x.act().push(&pid, &tid, options).await?;
        return Ok(StatusCode::NO_CONTENT);
    }
    let action = Action::from_str(&action)
        .map_err(|e| ApiError::bad_request(format!("{e} (or push, under a step task)")))?;
    if matches!(action, Action::Complete | Action::Submit) {
        CallerTrace::carry(caller.as_deref(), &mut options);
    }
    x.act().apply(&pid, &tid, action, options).await?;
    Ok(StatusCode::NO_CONTENT)
}
