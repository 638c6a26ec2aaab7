//! Deliveries of durable channels: list (the dead-letter view is
//! `state=failed`) and query them, give a dead letter another round, or
//! discard it.

use acts::{DeliveryInfo, DeliveryQuery, DeliveryState};
use axum::Json;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ApiResult, Errors};
use crate::extract::{Body, CountParam, Exec, Params, Path};
use crate::reply::{DeliveryPage, wants_item_cursors};
use crate::state::AppState;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(deliveries))
        .routes(routes!(query_deliveries))
        .routes(routes!(discard))
        .routes(routes!(redeliver))
}

/// The filters and page of a delivery listing.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ListDeliveries {
    /// Of this durable channel.
    channel: Option<String>,
    /// `pending`, `acked`, `failed` (the dead letters) or `closed`.
    #[param(value_type = Option<DeliveryState>)]
    state: Option<String>,
    /// At most this many (default 1,000; more is read as 1,000).
    limit: Option<usize>,
    /// Where the previous page ended (its `x-acts-next` header).
    cursor: Option<String>,
}

/// The header that carries the cursor of a listing's next page.
const NEXT_HEADER: &str = "x-acts-next";

/// The deliveries of durable channels, a page at a time.
///
/// One page as an array (at most 1,000); the cursor of the next page, if
/// any, in the `x-acts-next` header.
#[utoipa::path(
    get, path = "/api/v1/deliveries", tag = "deliveries",
    params(ListDeliveries),
    responses(
        (status = 200, description = "One page of deliveries.", body = Vec<DeliveryInfo>,
         headers(("x-acts-next" = String, description = "The cursor of the next page, if any."))),
        Errors
    )
)]
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
        let mut v = DeliveryQuery::default();
        v.channel = q.channel;
        v.state = state;
        v.limit = Some(q.limit.unwrap_or(acts::MAX_PAGE).clamp(1, acts::MAX_PAGE));
        v.cursor = q.cursor;
        v
    };
    let page = x.msg().find(&query).await?;
    let mut headers = axum::http::HeaderMap::new();
    if let Some(next) = page.next.and_then(|n| n.parse().ok()) {
        headers.insert(NEXT_HEADER, next);
    }
    Ok((headers, Json(page.items)))
}

/// Finds deliveries, a page at a time.
///
/// With `?count=true`, also the number of every match.
#[utoipa::path(
    post, path = "/api/v1/deliveries/query", tag = "deliveries",
    params(CountParam),
    request_body(content = DeliveryQuery, example = json!({"state": "failed", "messages": true})),
    responses((status = 200, description = "One page of deliveries.", body = DeliveryPage), Errors)
)]
async fn query_deliveries(
    Exec(x, _): Exec,
    Params(o): Params<CountParam>,
    headers: axum::http::HeaderMap,
    Body(mut query): Body<DeliveryQuery>,
) -> ApiResult<impl IntoResponse> {
    query.item_cursors = wants_item_cursors(&headers);
    let page = x.msg().find(&query).await?;
    let total = o.total(|| x.msg().count_matching(&query)).await?;
    Ok(DeliveryPage::reply(page, total))
}

/// Gives a dead letter another round.
///
/// It is pending again with its tries reset, sent at once to a connected
/// client; `409` for a delivery that is not failed.
#[utoipa::path(
    post, path = "/api/v1/deliveries/{channel}/{msg_id}/redeliver", tag = "deliveries",
    params(("channel" = String, Path, description = "The durable channel's id."), ("msg_id" = String, Path, description = "The message id.")),
    responses((status = 204, description = "Pending again."), Errors)
)]
async fn redeliver(
    Exec(x, _): Exec,
    Path((channel, msg_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    x.msg().redeliver(&channel, &msg_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Discards a dead letter.
///
/// Its process can then be swept; `409` for a delivery that is not
/// failed.
#[utoipa::path(
    delete, path = "/api/v1/deliveries/{channel}/{msg_id}", tag = "deliveries",
    params(("channel" = String, Path, description = "The durable channel's id."), ("msg_id" = String, Path, description = "The message id.")),
    responses((status = 204, description = "Discarded."), Errors)
)]
async fn discard(
    Exec(x, _): Exec,
    Path((channel, msg_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    x.msg().discard(&channel, &msg_id).await?;
    Ok(StatusCode::NO_CONTENT)
}
