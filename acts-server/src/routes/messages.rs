//! The live message stream (`GET /api/v1/messages`, Server-Sent Events),
//! filtered by the query and by what the caller may see.

use std::convert::Infallible;

use axum::extract::State;
use axum::response::sse::{Event, Sse};
use futures_util::Stream;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiResult, Errors};
use crate::extract::{Exec, Params};
use crate::state::AppState;
use crate::stream::{StreamFilter, Subscription};

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(messages))
}

/// The live message stream.
///
/// A user's stream carries only the messages of processes they may see.
/// Closing the connection ends the subscription.
#[utoipa::path(
    get, path = "/api/v1/messages", tag = "messages",
    params(StreamFilter),
    responses((status = 200, description = "Server-Sent Events: one per message (`event:` its type, `id:` its id, `data:` a `Message` as JSON); `event: lagged` ends a stream whose client fell behind.", content_type = "text/event-stream", body = String), Errors)
)]
async fn messages(
    State(s): State<AppState>,
    x: Exec,
    Params(f): Params<StreamFilter>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    // The subscription ends when the client goes (the stream, and with it
    // the subscription, is dropped).
    Ok(Subscription::open(&s.streams, s.engine.channel(f.options()?), &x.0, &x.1)?.into_sse())
}
