//! The live message stream (`GET /api/v1/messages`, Server-Sent Events),
//! filtered by the query and by what the caller may see.

use std::convert::Infallible;

use axum::Router;
use axum::extract::State;
use axum::response::sse::{Event, Sse};
use axum::routing::get;
use futures_util::Stream;

use crate::error::ApiResult;
use crate::extract::{Exec, Params};
use crate::state::AppState;
use crate::stream::{StreamFilter, Subscription};

pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/api/v1/messages", get(messages))
}

async fn messages(
    State(s): State<AppState>,
    x: Exec,
    Params(f): Params<StreamFilter>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    // The subscription ends when the client goes (the stream, and with it
    // the subscription, is dropped).
    Ok(Subscription::open(&s.streams, s.engine.channel(f.options()), &x.0, &x.1)?.into_sse())
}
