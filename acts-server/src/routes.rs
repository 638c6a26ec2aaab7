//! The HTTP API under `/api/v1`: models, processes, task actions and the
//! live message stream, plus `/healthz`, `/readyz` and `/metrics`.

use std::convert::Infallible;
use std::str::FromStr;
use std::sync::Arc;

use acts::{
    Action, Engine, MigrationPlan, ModelInfo, ProcessQuery, TaskQuery, TaskState, Vars, Workflow,
};
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::Stream;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Exec;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::stream::{StreamFilter, Streams, Subscription};

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    pub engine: Engine,
    pub metrics: Metrics,
    /// Whether access tokens are configured (the dashboard offers to sign
    /// out only then).
    pub tokens: bool,
    /// The bounds and the accounts of live streams.
    pub streams: Arc<Streams>,
}

type ApiResult<T> = Result<T, ApiError>;

/// The routes (without the body limit and the request counter, which
/// [`crate::router`] adds).
pub(crate) fn routes(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/", get(crate::dashboard::index))
        .route("/ui/{file}", get(crate::dashboard::file))
        .route("/api/v1/me", get(whoami))
        .route("/api/v1/inbox", get(inbox))
        .route("/api/v1/models", get(list_models).post(deploy_model))
        .route("/api/v1/models/{id}", get(get_model).delete(remove_model))
        .route("/api/v1/models/{id}/versions", get(list_versions))
        .route("/api/v1/models/{id}/migrate", post(migrate_model))
        .route(
            "/api/v1/models/{id}/versions/{rev}",
            get(get_version).delete(remove_version),
        )
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
        .route("/api/v1/processes/{pid}/tasks/{tid}/{action}", post(act))
        .route("/api/v1/messages", get(messages))
        .route(
            "/api/v1/channels/{id}",
            axum::routing::delete(crate::durable::remove),
        )
        .route("/api/v1/channels/{id}/stream", get(crate::durable::stream))
        .route(
            "/api/v1/channels/{id}/ack/{msg_id}",
            post(crate::durable::ack),
        )
        .route("/api/v1/deliveries", get(crate::durable::deliveries))
        .route(
            "/api/v1/deliveries/query",
            post(crate::durable::query_deliveries),
        )
        .route("/api/v1/tasks/query", post(query_tasks))
        .route(
            "/api/v1/deliveries/{channel}/{msg_id}",
            axum::routing::delete(crate::durable::discard),
        )
        .route(
            "/api/v1/deliveries/{channel}/{msg_id}/redeliver",
            post(crate::durable::redeliver),
        )
        .route("/api/v1/triggers", get(crate::durable::triggers))
        .route(
            "/api/v1/triggers/{id}/start",
            post(crate::durable::start_trigger),
        )
        .route("/api/v1/hooks/{name}", post(crate::durable::hook))
        .fallback(|| async { ApiError::not_found("no such endpoint (the API is under /api/v1)") })
        .with_state(state)
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

// ---- models -----------------------------------------------------------------

async fn deploy_model(Exec(x, _): Exec, body: Bytes) -> ApiResult<impl IntoResponse> {
    let text = std::str::from_utf8(&body)
        .map_err(|_| ApiError::bad_request("the model must be UTF-8 text (YAML or JSON)"))?;
    let info = x.deploy_yaml(text).await?;
    Ok((StatusCode::CREATED, Json(info)))
}

async fn list_models(Exec(x, _): Exec) -> ApiResult<impl IntoResponse> {
    Ok(Json(x.models().await?))
}

async fn get_model(Exec(x, _): Exec, Path(id): Path<String>) -> ApiResult<impl IntoResponse> {
    let (info, workflow) = x.model(&id).await?;
    Ok(model_json(&info, &workflow))
}

/// A model version and its definition (JSON and YAML).
fn model_json(info: &ModelInfo, workflow: &Workflow) -> Json<Value> {
    let definition: Value = serde_json::from_str(&workflow.to_json()).unwrap_or(Value::Null);
    let yaml = workflow.to_yaml().ok();
    Json(json!({"model": info, "definition": definition, "yaml": yaml}))
}

/// A migration request: the plan (its model is the path's) and whether
/// it is a dry run.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MigrateRequest {
    #[serde(default)]
    model: Option<String>,
    from: u32,
    to: u32,
    #[serde(default)]
    map: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    vars: Vars,
    #[serde(default)]
    dry_run: bool,
}

async fn migrate_model(
    Exec(x, _): Exec,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<impl IntoResponse> {
    let req: MigrateRequest = json_body(&body)?;
    if req.model.as_deref().is_some_and(|m| m != id) {
        return Err(ApiError::bad_request(format!(
            "the body names model '{}' but the path '{id}'",
            req.model.unwrap_or_default()
        )));
    }
    let plan = MigrationPlan {
        model: id,
        from: req.from,
        to: req.to,
        map: req.map,
        vars: req.vars,
    };
    Ok(Json(x.migrate(&plan, req.dry_run).await?))
}

async fn list_versions(Exec(x, _): Exec, Path(id): Path<String>) -> ApiResult<impl IntoResponse> {
    Ok(Json(x.versions(&id).await?))
}

async fn get_version(
    Exec(x, _): Exec,
    Path((id, rev)): Path<(String, u32)>,
) -> ApiResult<impl IntoResponse> {
    let (info, workflow) = x.model_version(&id, rev).await?;
    Ok(model_json(&info, &workflow))
}

async fn remove_version(
    Exec(x, _): Exec,
    Path((id, rev)): Path<(String, u32)>,
) -> ApiResult<StatusCode> {
    if x.remove_version(&id, rev).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!(
            "model '{id}' has no version {rev}"
        )))
    }
}

async fn remove_model(Exec(x, _): Exec, Path(id): Path<String>) -> ApiResult<StatusCode> {
    if x.remove_model(&id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("model '{id}' is not deployed")))
    }
}

// ---- processes --------------------------------------------------------------

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

async fn start_process(Exec(x, _): Exec, body: Bytes) -> ApiResult<impl IntoResponse> {
    let req: StartRequest = json_body(&body)?;
    let info = match req.rev {
        Some(rev) => x.start_version(&req.model, rev, req.vars).await?,
        None => x.start(&req.model, req.vars).await?,
    };
    Ok((StatusCode::CREATED, Json(info)))
}

/// Whether a query also counts its matches.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueryOptions {
    /// Also count every match (`total`).
    #[serde(default)]
    pub(crate) count: bool,
}

/// A query (the body: an `acts::ProcessQuery` as JSON).
async fn query_processes(
    Exec(x, _): Exec,
    Query(o): Query<QueryOptions>,
    body: Bytes,
) -> ApiResult<impl IntoResponse> {
    let query: ProcessQuery = json_body(&body)?;
    let page = x.find_processes(&query).await?;
    let total = if o.count {
        Some(x.count_matching(&query).await?)
    } else {
        None
    };
    Ok(Json(
        json!({"processes": page.processes, "next": page.next, "total": total}),
    ))
}

/// A task query (the body: an `acts::TaskQuery` as JSON): one page, and
/// with `?count=true` the number of every match the caller may see.
async fn query_tasks(
    Exec(x, _): Exec,
    Query(o): Query<QueryOptions>,
    body: Bytes,
) -> ApiResult<impl IntoResponse> {
    let query: TaskQuery = json_body(&body)?;
    let page = x.find_tasks(&query).await?;
    let total = if o.count {
        Some(x.count_tasks(&query).await?)
    } else {
        None
    };
    Ok(Json(
        json!({"tasks": page.tasks, "next": page.next, "total": total}),
    ))
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
    Query(q): Query<ListProcesses>,
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
    let query = ProcessQuery {
        state,
        model: q.model,
        started_after: q.started_after,
        started_before: q.started_before,
        descending,
        limit: q.limit,
        cursor: q.cursor,
        ..ProcessQuery::default()
    };
    let page = x.find_processes(&query).await?;
    let total = x.count_matching(&query).await?;
    Ok(Json(
        json!({"processes": page.processes, "total": total, "next": page.next}),
    ))
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
    Query(q): Query<StuckQuery>,
) -> ApiResult<impl IntoResponse> {
    let after = q.after_secs.map(std::time::Duration::from_secs);
    Ok(Json(x.stuck_processes(after).await?))
}

/// The optional body of an operator control: why.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ControlRequest {
    #[serde(default)]
    reason: String,
}

/// The control's body: none, or `{"reason": "..."}`.
fn control_body(body: &Bytes) -> ApiResult<ControlRequest> {
    if body.is_empty() {
        return Ok(ControlRequest::default());
    }
    json_body(body)
}

async fn pause_process(
    Exec(x, _): Exec,
    Path(pid): Path<String>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    let req = control_body(&body)?;
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
    body: Bytes,
) -> ApiResult<StatusCode> {
    let req = control_body(&body)?;
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
    body: Bytes,
) -> ApiResult<StatusCode> {
    let req: RewindRequest = json_body(&body)?;
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
    body: Bytes,
) -> ApiResult<StatusCode> {
    let req: RetryRequest = if body.is_empty() {
        RetryRequest::default()
    } else {
        json_body(&body)?
    };
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

// ---- task actions -----------------------------------------------------------

async fn act(
    Exec(x, _): Exec,
    Path((pid, tid, action)): Path<(String, String, String)>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    let options: Vars = optional_json_body(&body)?;
    if action == "push" {
        x.push(&pid, &tid, options).await?;
        return Ok(StatusCode::NO_CONTENT);
    }
    let action = Action::from_str(&action)
        .map_err(|e| ApiError::bad_request(format!("{e} (or push, under a step task)")))?;
    x.act(&pid, &tid, action, options).await?;
    Ok(StatusCode::NO_CONTENT)
}

// ---- the message stream -----------------------------------------------------

async fn messages(
    State(s): State<AppState>,
    x: Exec,
    Query(f): Query<StreamFilter>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    // The subscription ends when the client goes (the stream, and with it
    // the subscription, is dropped).
    Ok(Subscription::open(&s.streams, s.engine.channel(f.options()), &x)?.into_sse())
}

/// A JSON request body that may be absent (then `T::default()`: no
/// options, a null payload).
pub(crate) fn optional_json_body<T: serde::de::DeserializeOwned + Default>(
    body: &Bytes,
) -> ApiResult<T> {
    if body.is_empty() {
        Ok(T::default())
    } else {
        json_body(body)
    }
}

/// A JSON request body, with a 400 that says what is wrong.
pub(crate) fn json_body<T: serde::de::DeserializeOwned>(body: &Bytes) -> ApiResult<T> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the request body is not valid JSON for this call: {e}"
        ))
    })
}
