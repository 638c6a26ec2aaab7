//! The HTTP API under `/api/v1`: models, processes, task actions and the
//! live message stream, plus `/healthz`, `/readyz` and `/metrics`.

use std::collections::HashSet;
use std::convert::Infallible;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use acts::{
    Action, ChannelOptions, Engine, MigrationPlan, ModelInfo, ProcessQuery, TaskQuery, TaskState,
    Vars, Workflow,
};
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::Stream;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use crate::auth::Exec;
use crate::error::ApiError;
use crate::metrics::Metrics;

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    pub engine: Engine,
    pub metrics: Metrics,
    /// Whether access tokens are configured (the dashboard offers to sign
    /// out only then).
    pub tokens: bool,
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

/// Ready when the store answers.
async fn readyz(State(s): State<AppState>) -> Response {
    match s.engine.executor().models().await {
        Ok(_) => "ready".into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}

async fn metrics(State(s): State<AppState>, x: Exec) -> Response {
    if let Err(e) = x.need_operator("reading the metrics") {
        return e.into_response();
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.metrics.render(&s.engine).await,
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

/// The filters of a message stream: globs, as channel options.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StreamFilter {
    r#type: Option<String>,
    state: Option<String>,
    key: Option<String>,
    uses: Option<String>,
    model: Option<String>,
}

impl StreamFilter {
    /// The channel options these filters stand for (absent: any).
    pub(crate) fn options(self) -> ChannelOptions {
        let mut options = ChannelOptions::default();
        if let Some(v) = self.r#type {
            options = options.with_type(v);
        }
        if let Some(v) = self.state {
            options = options.with_state(v);
        }
        if let Some(v) = self.key {
            options = options.with_key(v);
        }
        if let Some(v) = self.uses {
            options = options.with_uses(v);
        }
        if let Some(v) = self.model {
            options = options.with_model(v);
        }
        options
    }
}

/// One message as an event: its type as the event name, its id as the
/// event id, the message as JSON data.
pub(crate) fn event_of(m: &acts::Message) -> Event {
    Event::default()
        .event(m.r#type.to_string())
        .id(m.id.clone())
        .json_data(m)
        .unwrap_or_else(|_| Event::default().comment("unserializable message"))
}

async fn messages(
    State(s): State<AppState>,
    x: Exec,
    Query(f): Query<StreamFilter>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    // The subscription ends when the client goes (the stream, and with it
    // the subscription, is dropped).
    Subscription::open(s.engine.channel(f.options()))
        .for_caller(&x)
        .into_sse()
}

/// Most messages queued for one stream's client. A client that falls this
/// far behind is cut off — its stream ends with a `lagged` event — rather
/// than let the server's memory grow with it (a durable channel re-sends
/// what was not acknowledged when the client reconnects).
pub const STREAM_QUEUE: usize = 1024;

/// A stream's channel: its handlers are removed when the stream is
/// dropped, so a client that goes leaves nothing behind (a durable
/// channel's registration and deliveries stay).
pub(crate) struct Subscription {
    channel: acts::Channel,
    rx: mpsc::Receiver<acts::Message>,
    lagged: Arc<AtomicBool>,
    /// For a caller who is not an operator: the executor that says which
    /// processes it may see, and the pids it may (once seen, a process
    /// stays visible: its audience only grows).
    visible_to: Option<(acts::Executor, HashSet<String>)>,
}

impl Subscription {
    /// Listens on `channel` through a queue of [`STREAM_QUEUE`] messages.
    pub(crate) fn open(channel: acts::Channel) -> Self {
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        let sender = Mutex::new(Some(tx));
        let lagged = Arc::new(AtomicBool::new(false));
        let lag = lagged.clone();
        channel.on_message(move |m| {
            let mut slot = sender.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(tx) = slot.as_ref()
                && let Err(TrySendError::Full(_)) = tx.try_send(m.clone())
            {
                // Too slow: stop queueing; the stream ends once drained.
                lag.store(true, Ordering::Relaxed);
                *slot = None;
            }
        });
        Self {
            channel,
            rx,
            lagged,
            visible_to: None,
        }
    }

    /// Only the messages of processes `x`'s caller may see (everything for
    /// an operator or admin).
    pub(crate) fn for_caller(mut self, x: &Exec) -> Self {
        if !x.1.is_operator() {
            self.visible_to = Some((x.0.clone(), HashSet::new()));
        }
        self
    }

    /// The next message the caller may see (`None`: the stream ended).
    pub(crate) async fn next(&mut self) -> Option<acts::Message> {
        loop {
            let m = self.rx.recv().await?;
            let Some((x, seen)) = &mut self.visible_to else {
                return Some(m);
            };
            if seen.contains(&m.pid) || x.may_see_process(&m.pid).await.unwrap_or(false) {
                seen.insert(m.pid.clone());
                return Some(m);
            }
        }
    }

    /// Its messages as a Server-Sent Events response, one event each
    /// ([`event_of`]), kept alive while idle; a client cut off for reading
    /// too slowly gets a last `lagged` event.
    pub(crate) fn into_sse(self) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
        let stream = futures_util::stream::unfold(Some(self), |sub| async move {
            let mut sub = sub?;
            match sub.next().await {
                Some(m) => Some((Ok(event_of(&m)), Some(sub))),
                None if sub.lagged.load(Ordering::Relaxed) => {
                    let note = Event::default().event("lagged").data(format!(
                        "the client read too slowly ({STREAM_QUEUE} messages were waiting); reconnect (a durable channel re-sends what was not acknowledged)"
                    ));
                    Some((Ok(note), None))
                }
                None => None,
            }
        });
        Sse::new(stream).keep_alive(KeepAlive::default())
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.channel.close();
    }
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
