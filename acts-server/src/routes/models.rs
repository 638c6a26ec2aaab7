//! Models: deploy, list, read, remove; their versions; migrating running
//! processes between versions.

use acts::{MigrationPlan, ModelInfo, Vars, Workflow};
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::extract::{Body, Exec, Text};
use crate::state::AppState;

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/models", get(list_models).post(deploy_model))
        .route("/api/v1/models/{id}", get(get_model).delete(remove_model))
        .route("/api/v1/models/{id}/versions", get(list_versions))
        .route("/api/v1/models/{id}/migrate", post(migrate_model))
        .route(
            "/api/v1/models/{id}/versions/{rev}",
            get(get_version).delete(remove_version),
        )
}

async fn deploy_model(Exec(x, _): Exec, Text(text): Text) -> ApiResult<impl IntoResponse> {
    let info = x.deploy_yaml(&text).await?;
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
    Body(req): Body<MigrateRequest>,
) -> ApiResult<impl IntoResponse> {
    if req.model.as_deref().is_some_and(|m| m != id) {
        return Err(ApiError::bad_request(format!(
            "the body names model '{}' but the path '{id}'",
            req.model.unwrap_or_default()
        )));
    }
    let plan = {
        let mut v = MigrationPlan::default();
        v.model = id;
        v.from = req.from;
        v.to = req.to;
        v.map = req.map;
        v.vars = req.vars;
        v
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
