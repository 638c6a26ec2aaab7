//! Durable channels over HTTP: register one and receive its messages as
//! Server-Sent Events (what is still unacknowledged first, after a
//! reconnect or a server restart), ack each message, forget the channel.

use std::convert::Infallible;

use acts::ChannelOptions;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use futures_util::Stream;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ApiResult, Errors};
use crate::extract::{Exec, Params, Path};
use crate::state::AppState;
use crate::stream::{StreamFilter, Subscription};

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(remove))
        .routes(routes!(stream))
        .routes(routes!(ack))
}

/// (operator) Opens a durable channel and streams its messages.
///
/// Registers channel `id` with the filters of the query (or updates its
/// filters) and streams its messages: first every one not acknowledged
/// yet, then new ones. Each event's id is the message id to ack.
#[utoipa::path(
    get, path = "/api/v1/channels/{id}/stream", tag = "channels",
    params(("id" = String, Path, description = "The durable channel's id.", example = "billing"), StreamFilter),
    responses((status = 200, description = "Server-Sent Events: one per message (`event:` its type, `id:` its id, `data:` a `Message` as JSON); `event: lagged` ends a stream whose client fell behind.", content_type = "text/event-stream", body = String), Errors)
)]
async fn stream(
    State(s): State<AppState>,
    x: Exec,
    Path(id): Path<String>,
    Params(f): Params<StreamFilter>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    x.need_operator("a durable channel")?;
    let options: ChannelOptions = f.options()?;
    let channel = s.engine.channels().durable(&id, options).await?;
    let sub = Subscription::open(&s.streams, channel.clone(), &x.0, &x.1)?;
    channel.resend_pending().await?;
    Ok(sub.into_sse())
}

/// (operator) Acknowledges one message of a durable channel.
///
/// The message is not sent again; acking a settled one changes nothing.
#[utoipa::path(
    post, path = "/api/v1/channels/{id}/ack/{msg_id}", tag = "channels",
    params(("id" = String, Path, description = "The durable channel's id."), ("msg_id" = String, Path, description = "The message id (the event's id).")),
    responses((status = 204, description = "Acknowledged."), Errors)
)]
async fn ack(
    State(s): State<AppState>,
    x: Exec,
    Path((id, msg_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    x.need_operator("a durable channel")?;
    s.engine.channels().ack(&id, &msg_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// (operator) Forgets a durable channel and its deliveries.
#[utoipa::path(
    delete, path = "/api/v1/channels/{id}", tag = "channels",
    params(("id" = String, Path, description = "The durable channel's id.")),
    responses((status = 204, description = "Forgotten."), Errors)
)]
async fn remove(
    State(s): State<AppState>,
    x: Exec,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    x.need_operator("a durable channel")?;
    if s.engine.channels().remove(&id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("no durable channel '{id}'")))
    }
}
