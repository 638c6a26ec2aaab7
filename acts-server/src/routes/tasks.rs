//! Tasks: the caller's inbox, task queries across processes, and the
//! actions on one task (complete, submit, back, ..., push).

use std::str::FromStr;

use acts::{Action, TaskQuery, Vars};
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::extract::{Body, CountParam, Exec, OptionalBody, Params};
use crate::reply::page_json;
use crate::state::AppState;

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/inbox", get(inbox))
        .route("/api/v1/tasks/query", post(query_tasks))
        .route("/api/v1/processes/{pid}/tasks/{tid}/{action}", post(act))
}

/// Most open interrupts one inbox answer lists.
const INBOX_LIMIT: usize = 500;

/// The open interrupts the caller may answer, with their process's model.
async fn inbox(Exec(x, _): Exec) -> ApiResult<impl IntoResponse> {
    let out: Vec<Value> = x
        .inbox(INBOX_LIMIT)
        .await?
        .into_iter()
        .map(|(p, t)| {
            let mut v = serde_json::to_value(&t).unwrap_or(Value::Null);
            v["model_id"] = Value::String(p.model_id);
            v
        })
        .collect();
    Ok(Json(out))
}

/// A task query (the body: an `acts::TaskQuery` as JSON): one page, and
/// with `?count=true` the number of every match the caller may see.
async fn query_tasks(
    Exec(x, _): Exec,
    Params(o): Params<CountParam>,
    Body(query): Body<TaskQuery>,
) -> ApiResult<impl IntoResponse> {
    let page = x.find_tasks(&query).await?;
    let total = o.total(|| x.count_tasks(&query)).await?;
    Ok(page_json("tasks", page, total))
}

/// An action on a task, its options the body (none: no options).
async fn act(
    Exec(x, _): Exec,
    Path((pid, tid, action)): Path<(String, String, String)>,
    OptionalBody(options): OptionalBody<Vars>,
) -> ApiResult<StatusCode> {
    if action == "push" {
        x.push(&pid, &tid, options).await?;
        return Ok(StatusCode::NO_CONTENT);
    }
    let action = Action::from_str(&action)
        .map_err(|e| ApiError::bad_request(format!("{e} (or push, under a step task)")))?;
    x.act(&pid, &tid, action, options).await?;
    Ok(StatusCode::NO_CONTENT)
}
