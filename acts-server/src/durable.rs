//! Durable channels, triggers and deliveries over HTTP: register a durable
//! channel, receive its messages as Server-Sent Events (what is still
//! unacknowledged first, after a reconnect or a server restart), ack each
//! message; start a trigger, send a hook; list deliveries (the dead-letter
//! view is `state=failed`).

use std::convert::Infallible;

use acts::{ChannelOptions, DeliveryState};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::sse::{Event, Sse};
use futures_util::Stream;
use serde::Deserialize;
use serde_json::Value;

use crate::auth::Exec;
use crate::error::ApiError;
use crate::routes::{AppState, json_body, optional_json_body};
use crate::stream::{StreamFilter, Subscription};

type ApiResult<T> = Result<T, ApiError>;

/// Opens durable channel `id` with the filters of the query (registering
/// it, or updating its filters) and streams its messages: first every one
/// not acknowledged yet, then new ones. Each event's id is the message id
/// to ack.
pub(crate) async fn stream(
    State(s): State<AppState>,
    x: Exec,
    Path(id): Path<String>,
    Query(f): Query<StreamFilter>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    x.need_operator("a durable channel")?;
    let options: ChannelOptions = f.options();
    let channel = s.engine.durable_channel(&id, options).await?;
    let sub = Subscription::open(&s.streams, channel.clone(), &x)?;
    channel.resend_pending().await?;
    Ok(sub.into_sse())
}

/// Acknowledges one message of durable channel `id`: it is not sent again.
pub(crate) async fn ack(
    State(s): State<AppState>,
    x: Exec,
    Path((id, msg_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    x.need_operator("a durable channel")?;
    s.engine.ack(&id, &msg_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Forgets durable channel `id` and its deliveries.
pub(crate) async fn remove(
    State(s): State<AppState>,
    x: Exec,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    x.need_operator("a durable channel")?;
    if s.engine.remove_channel(&id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("no durable channel '{id}'")))
    }
}

/// The filters and page of a delivery listing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListDeliveries {
    channel: Option<String>,
    /// `pending`, `acked`, `failed` (the dead letters) or `closed`.
    state: Option<String>,
    /// At most this many (default and most: 1,000).
    limit: Option<usize>,
    /// Where the previous page ended (its `x-acts-next` header).
    cursor: Option<String>,
}

/// The header that carries the cursor of a listing's next page.
pub(crate) const NEXT_HEADER: &str = "x-acts-next";

/// One page of deliveries as an array (at most 1,000); the cursor of the
/// next page, if any, in the `x-acts-next` header.
pub(crate) async fn deliveries(
    Exec(x, _): Exec,
    Query(q): Query<ListDeliveries>,
) -> ApiResult<impl IntoResponse> {
    let state = match q.state.as_deref() {
        None => None,
        Some("pending") => Some(DeliveryState::Pending),
        Some("acked") => Some(DeliveryState::Acked),
        Some("failed") => Some(DeliveryState::Failed),
        Some("closed") => Some(DeliveryState::Closed),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unknown delivery state '{other}' (one of: pending, acked, failed, closed)"
            )));
        }
    };
    let query = acts::DeliveryQuery {
        channel: q.channel,
        state,
        limit: Some(q.limit.unwrap_or(acts::MAX_PAGE).clamp(1, acts::MAX_PAGE)),
        cursor: q.cursor,
        ..acts::DeliveryQuery::default()
    };
    let page = x.find_deliveries(&query).await?;
    let mut headers = axum::http::HeaderMap::new();
    if let Some(next) = page.next.and_then(|n| n.parse().ok()) {
        headers.insert(NEXT_HEADER, next);
    }
    Ok((headers, Json(page.deliveries)))
}

/// A delivery query (the body: an `acts::DeliveryQuery` as JSON): one
/// page, and with `?count=true` the number of every match.
pub(crate) async fn query_deliveries(
    Exec(x, _): Exec,
    Query(o): Query<crate::routes::QueryOptions>,
    body: Bytes,
) -> ApiResult<impl IntoResponse> {
    let query: acts::DeliveryQuery = json_body(&body)?;
    let page = x.find_deliveries(&query).await?;
    let total = if o.count {
        Some(x.count_deliveries_matching(&query).await?)
    } else {
        None
    };
    Ok(Json(
        serde_json::json!({"deliveries": page.deliveries, "next": page.next, "total": total}),
    ))
}

/// Gives a dead letter another round.
pub(crate) async fn redeliver(
    Exec(x, _): Exec,
    Path((channel, msg_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    x.redeliver(&channel, &msg_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Discards a dead letter.
pub(crate) async fn discard(
    Exec(x, _): Exec,
    Path((channel, msg_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    x.discard(&channel, &msg_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(crate) async fn triggers(Exec(x, _): Exec) -> ApiResult<impl IntoResponse> {
    Ok(Json(x.triggers().await?))
}

/// Starts the model of a manual or hook trigger (`MODEL:TRIGGER`) with the
/// body as its payload (none: the trigger's default params).
pub(crate) async fn start_trigger(
    Exec(x, _): Exec,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<impl IntoResponse> {
    let payload: Value = optional_json_body(&body)?;
    let info = x.start_trigger(&id, payload).await?;
    Ok((StatusCode::CREATED, Json(info)))
}

/// The options of a hook call.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HookQuery {
    /// Wait up to this many milliseconds (at most [`MAX_HOOK_WAIT_MS`])
    /// for the processes started to end, and answer with their outputs.
    wait_ms: Option<u64>,
}

/// The longest a hook call may wait for its processes: 5 minutes.
pub(crate) const MAX_HOOK_WAIT_MS: u64 = 300_000;

/// Sends hook event `name`: every model with a hook trigger of that name
/// starts with the body as its payload; answers with the processes started
/// — with `?wait_ms=N`, once they have ended (or N ms have passed: the ones
/// still running are answered as they are), with their outputs.
pub(crate) async fn hook(
    State(s): State<AppState>,
    x: Exec,
    Path(name): Path<String>,
    Query(q): Query<HookQuery>,
    body: Bytes,
) -> ApiResult<impl IntoResponse> {
    let exec = &x.0;
    let payload: Value = optional_json_body(&body)?;
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
        &x,
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
