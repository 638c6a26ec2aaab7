//! Bulk jobs (operator): one action on every process a query matches —
//! preview it (a dry run), start it as a durable job, follow its progress,
//! read what it did to each process, cancel it, remove it.

use acts::{BulkJob, BulkOutcome, BulkPreview, BulkRequest};
use axum::Json;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiResult, Errors};
use crate::extract::{Body, Exec, Params, Path};
use crate::reply::{BulkItemPage, BulkJobPage};
use crate::state::AppState;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_jobs, start_job))
        .routes(routes!(preview_job))
        .routes(routes!(get_job, remove_job))
        .routes(routes!(cancel_job))
        .routes(routes!(job_items))
}

/// A page of a listing.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct PageParams {
    /// At most this many (default 100; more than 1,000 is read as 1,000).
    limit: Option<usize>,
    /// The cursor a previous page returned.
    cursor: Option<String>,
}

/// The filter and page of a job's report.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ItemParams {
    /// Only this outcome: `done`, `skipped` or `failed`.
    #[param(value_type = Option<BulkOutcome>)]
    outcome: Option<BulkOutcome>,
    /// At most this many (default 100; more than 1,000 is read as 1,000).
    limit: Option<usize>,
    /// The cursor a previous page returned.
    cursor: Option<String>,
}

/// Starts a bulk job.
///
/// Stored at once and worked on in the background at its pace
/// (`per_second`, default 1,000): each matching process once, even across
/// restarts. Follow it with `GET /api/v1/bulk/{id}`.
#[utoipa::path(
    post, path = "/api/v1/bulk", tag = "bulk",
    request_body(content = BulkRequest, example = json!({"action": "retry", "where": {"state": "error", "ecode": "timeout"}, "vars": {"attempt": 2}})),
    responses((status = 202, description = "The job, running.", body = BulkJob), Errors)
)]
async fn start_job(
    Exec(x, _): Exec,
    Body(request): Body<BulkRequest>,
) -> ApiResult<impl IntoResponse> {
    let job = x.bulk().start(request).await?;
    Ok((StatusCode::ACCEPTED, Json(job)))
}

/// Previews a bulk job (a dry run).
///
/// How many processes match now and the first 20; nothing is written.
#[utoipa::path(
    post, path = "/api/v1/bulk/dry-run", tag = "bulk",
    request_body(content = BulkRequest, example = json!({"action": "terminate", "where": {"model": "orders", "state": "running"}, "reason": "recalled"})),
    responses((status = 200, description = "The count and a sample.", body = BulkPreview), Errors)
)]
async fn preview_job(
    Exec(x, _): Exec,
    Body(request): Body<BulkRequest>,
) -> ApiResult<Json<BulkPreview>> {
    Ok(Json(x.bulk().preview(&request).await?))
}

/// The bulk jobs, newest first.
#[utoipa::path(
    get, path = "/api/v1/bulk", tag = "bulk",
    params(PageParams),
    responses((status = 200, description = "One page of jobs.", body = BulkJobPage), Errors)
)]
async fn list_jobs(
    Exec(x, _): Exec,
    Params(p): Params<PageParams>,
) -> ApiResult<Json<BulkJobPage>> {
    let page = x.bulk().list(p.limit, p.cursor.as_deref()).await?;
    Ok(BulkJobPage::reply(page, None))
}

/// One bulk job and its progress.
#[utoipa::path(
    get, path = "/api/v1/bulk/{id}", tag = "bulk",
    params(("id" = String, Path, description = "The job's id.")),
    responses((status = 200, description = "The job.", body = BulkJob), Errors)
)]
async fn get_job(Exec(x, _): Exec, Path(id): Path<String>) -> ApiResult<Json<BulkJob>> {
    Ok(Json(x.bulk().get(&id).await?))
}

/// Removes a bulk job and its report.
///
/// The processes keep what it did; `409` while it runs (cancel it first).
#[utoipa::path(
    delete, path = "/api/v1/bulk/{id}", tag = "bulk",
    params(("id" = String, Path, description = "The job's id.")),
    responses((status = 204, description = "Removed."), Errors)
)]
async fn remove_job(Exec(x, _): Exec, Path(id): Path<String>) -> ApiResult<StatusCode> {
    x.bulk().remove(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Cancels a bulk job.
///
/// It stops after the processes it is acting on now; what it did stays
/// done. A job that had stopped is returned as it is.
#[utoipa::path(
    post, path = "/api/v1/bulk/{id}/cancel", tag = "bulk",
    params(("id" = String, Path, description = "The job's id.")),
    responses((status = 200, description = "The job, stopped.", body = BulkJob), Errors)
)]
async fn cancel_job(Exec(x, _): Exec, Path(id): Path<String>) -> ApiResult<Json<BulkJob>> {
    Ok(Json(x.bulk().cancel(&id).await?))
}

/// What a bulk job did to each process, in pid order.
#[utoipa::path(
    get, path = "/api/v1/bulk/{id}/items", tag = "bulk",
    params(("id" = String, Path, description = "The job's id."), ItemParams),
    responses((status = 200, description = "One page of the report.", body = BulkItemPage), Errors)
)]
async fn job_items(
    Exec(x, _): Exec,
    Path(id): Path<String>,
    Params(p): Params<ItemParams>,
) -> ApiResult<Json<BulkItemPage>> {
    let page = x
        .bulk()
        .items(&id, p.outcome, p.limit, p.cursor.as_deref())
        .await?;
    Ok(BulkItemPage::reply(page, None))
}
