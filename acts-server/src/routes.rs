//! The HTTP API under `/api/v1`: models, processes, task actions and the
//! live message stream, plus `/healthz`, `/readyz` and `/metrics`.

use std::convert::Infallible;
use std::str::FromStr;

use acts::{Action, ChannelOptions, Engine, TaskState, Vars};
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

use crate::error::ApiError;
use crate::metrics::Metrics;

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    pub engine: Engine,
    pub metrics: Metrics,
}

type ApiResult<T> = Result<T, ApiError>;

/// The routes (without the body limit and the request counter, which
/// [`crate::router`] adds).
pub(crate) fn routes(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/api/v1/models", get(list_models).post(deploy_model))
        .route("/api/v1/models/{id}", get(get_model).delete(remove_model))
        .route("/api/v1/processes", get(list_processes).post(start_process))
        .route(
            "/api/v1/processes/{pid}",
            get(get_process).delete(remove_process),
        )
        .route("/api/v1/processes/{pid}/abort", post(abort_process))
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

async fn metrics(State(s): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.metrics.render(&s.engine).await,
    )
        .into_response()
}

// ---- models -----------------------------------------------------------------

async fn deploy_model(State(s): State<AppState>, body: Bytes) -> ApiResult<impl IntoResponse> {
    let text = std::str::from_utf8(&body)
        .map_err(|_| ApiError::bad_request("the model must be UTF-8 text (YAML or JSON)"))?;
    let info = s.engine.executor().deploy_yaml(text).await?;
    Ok((StatusCode::CREATED, Json(info)))
}

async fn list_models(State(s): State<AppState>) -> ApiResult<impl IntoResponse> {
    Ok(Json(s.engine.executor().models().await?))
}

async fn get_model(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let (info, workflow) = s.engine.executor().model(&id).await?;
    let definition: Value = serde_json::from_str(&workflow.to_json()).unwrap_or(Value::Null);
    Ok(Json(json!({"model": info, "definition": definition})))
}

async fn remove_model(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    if s.engine.executor().remove_model(&id).await? {
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
}

async fn start_process(State(s): State<AppState>, body: Bytes) -> ApiResult<impl IntoResponse> {
    let req: StartRequest = json_body(&body)?;
    let info = s.engine.executor().start(&req.model, req.vars).await?;
    Ok((StatusCode::CREATED, Json(info)))
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

/// Most processes one page returns.
const MAX_PAGE: usize = 1000;

async fn list_processes(
    State(s): State<AppState>,
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
    let limit = q.limit.unwrap_or(100).clamp(1, MAX_PAGE);
    let offset: usize = match &q.cursor {
        Some(c) => c.parse().map_err(|_| {
            ApiError::bad_request(format!("cursor '{c}' is not one this server gave"))
        })?,
        None => 0,
    };
    let mut all = s
        .engine
        .executor()
        .processes(state, q.model.as_deref())
        .await?;
    all.retain(|p| {
        let started = p.start_time.unwrap_or(0);
        q.started_after.is_none_or(|a| started >= a) && q.started_before.is_none_or(|b| started < b)
    });
    match q.order.as_deref() {
        None | Some("asc") => {}
        Some("desc") => all.reverse(),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "order '{other}' is not 'asc' or 'desc'"
            )));
        }
    }
    let total = all.len();
    let page: Vec<_> = all.into_iter().skip(offset).take(limit).collect();
    let next = (offset + page.len() < total).then(|| (offset + page.len()).to_string());
    Ok(Json(
        json!({"processes": page, "total": total, "next": next}),
    ))
}

async fn get_process(
    State(s): State<AppState>,
    Path(pid): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let exec = s.engine.executor();
    let process = exec.process(&pid).await?;
    let tasks = exec.tasks(&pid).await?;
    Ok(Json(json!({"process": process, "tasks": tasks})))
}

async fn abort_process(
    State(s): State<AppState>,
    Path(pid): Path<String>,
) -> ApiResult<StatusCode> {
    s.engine.executor().abort_process(&pid).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn remove_process(
    State(s): State<AppState>,
    Path(pid): Path<String>,
) -> ApiResult<StatusCode> {
    if s.engine.executor().remove_process(&pid).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("cannot find process '{pid}'")))
    }
}

// ---- task actions -----------------------------------------------------------

async fn act(
    State(s): State<AppState>,
    Path((pid, tid, action)): Path<(String, String, String)>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    let action = Action::from_str(&action).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let options: Vars = optional_json_body(&body)?;
    s.engine.executor().act(&pid, &tid, action, options).await?;
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
    Query(f): Query<StreamFilter>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    // The subscription ends when the client goes (the stream, and with it
    // the subscription, is dropped).
    let channel = s.engine.channel(f.options());
    let rx = channel.subscribe();
    Subscription::new(channel, rx).into_sse()
}

/// A stream's channel: its handlers are removed when the stream is
/// dropped, so a client that goes leaves nothing behind (a durable
/// channel's registration and deliveries stay).
pub(crate) struct Subscription {
    channel: acts::Channel,
    pub(crate) rx: tokio::sync::mpsc::UnboundedReceiver<acts::Message>,
}

impl Subscription {
    pub(crate) fn new(
        channel: acts::Channel,
        rx: tokio::sync::mpsc::UnboundedReceiver<acts::Message>,
    ) -> Self {
        Self { channel, rx }
    }

    /// Its messages as a Server-Sent Events response, one event each
    /// ([`event_of`]), kept alive while idle.
    pub(crate) fn into_sse(self) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
        let stream = futures_util::stream::unfold(self, |mut sub| async move {
            let m = sub.rx.recv().await?;
            Some((Ok(event_of(&m)), sub))
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
