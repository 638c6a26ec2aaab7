//! Deliveries of durable channels: list (the dead-letter view is
//! `state=failed`) and query them, give a dead letter another round, or
//! discard it.

use acts::DeliveryState;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;

use crate::error::{ApiError, ApiResult};
use crate::extract::{Body, CountParam, Exec, Params};
use crate::reply::page_json;
use crate::state::AppState;

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/deliveries", get(deliveries))
        .route("/api/v1/deliveries/query", post(query_deliveries))
        .route("/api/v1/deliveries/{channel}/{msg_id}", delete(discard))
        .route(
            "/api/v1/deliveries/{channel}/{msg_id}/redeliver",
            post(redeliver),
        )
}

/// The filters and page of a delivery listing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListDeliveries {
    channel: Option<String>,
    /// `pending`, `acked`, `failed` (the dead letters) or `closed`.
    state: Option<String>,
    /// At most this many (default and most: 1,000).
    limit: Option<usize>,
    /// Where the previous page ended (its `x-acts-next` header).
    cursor: Option<String>,
}

/// The header that carries the cursor of a listing's next page.
const NEXT_HEADER: &str = "x-acts-next";

/// One page of deliveries as an array (at most 1,000); the cursor of the
/// next page, if any, in the `x-acts-next` header.
async fn deliveries(
    Exec(x, _): Exec,
    Params(q): Params<ListDeliveries>,
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
    let query = {
        let mut v = acts::DeliveryQuery::default();
        v.channel = q.channel;
        v.state = state;
        v.limit = Some(q.limit.unwrap_or(acts::MAX_PAGE).clamp(1, acts::MAX_PAGE));
        v.cursor = q.cursor;
        v
    };
    let page = x.find_deliveries(&query).await?;
    let mut headers = axum::http::HeaderMap::new();
    if let Some(next) = page.next.and_then(|n| n.parse().ok()) {
        headers.insert(NEXT_HEADER, next);
    }
    Ok((headers, Json(page.items)))
}

/// A delivery query (the body: an `acts::DeliveryQuery` as JSON): one
/// page, and with `?count=true` the number of every match.
async fn query_deliveries(
    Exec(x, _): Exec,
    Params(o): Params<CountParam>,
    Body(query): Body<acts::DeliveryQuery>,
) -> ApiResult<impl IntoResponse> {
    let page = x.find_deliveries(&query).await?;
    let total = o.total(|| x.count_deliveries_matching(&query)).await?;
    Ok(page_json("deliveries", page, total))
}

/// Gives a dead letter another round.
async fn redeliver(
    Exec(x, _): Exec,
    Path((channel, msg_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    x.redeliver(&channel, &msg_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Discards a dead letter.
async fn discard(
    Exec(x, _): Exec,
    Path((channel, msg_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    x.discard(&channel, &msg_id).await?;
    Ok(StatusCode::NO_CONTENT)
}
