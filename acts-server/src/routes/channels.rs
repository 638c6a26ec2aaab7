//! Durable channels over HTTP: register one and receive its messages as
//! Server-Sent Events (what is still unacknowledged first, after a
//! reconnect or a server restart), ack each message, forget the channel.

use std::convert::Infallible;

use acts::ChannelOptions;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::routing::{delete, get, post};
use futures_util::Stream;

use crate::error::{ApiError, ApiResult};
use crate::extract::{Exec, Params};
use crate::state::AppState;
use crate::stream::{StreamFilter, Subscription};

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/channels/{id}", delete(remove))
        .route("/api/v1/channels/{id}/stream", get(stream))
        .route("/api/v1/channels/{id}/ack/{msg_id}", post(ack))
}

/// Opens durable channel `id` with the filters of the query (registering
/// it, or updating its filters) and streams its messages: first every one
/// not acknowledged yet, then new ones. Each event's id is the message id
/// to ack.
async fn stream(
    State(s): State<AppState>,
    x: Exec,
    Path(id): Path<String>,
    Params(f): Params<StreamFilter>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    x.need_operator("a durable channel")?;
    let options: ChannelOptions = f.options();
    let channel = s.engine.durable_channel(&id, options).await?;
    let sub = Subscription::open(&s.streams, channel.clone(), &x.0, &x.1)?;
    channel.resend_pending().await?;
    Ok(sub.into_sse())
}

/// Acknowledges one message of durable channel `id`: it is not sent again.
async fn ack(
    State(s): State<AppState>,
    x: Exec,
    Path((id, msg_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    x.need_operator("a durable channel")?;
    s.engine.ack(&id, &msg_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Forgets durable channel `id` and its deliveries.
async fn remove(
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
