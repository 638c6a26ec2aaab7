//! Models: deploy, list, read, remove; their versions; migrating running
//! processes between versions.

use acts::{MigrationPlan, MigrationReport, ModelInfo, ModelVersionInfo, Vars, Workflow};

use axum::Json;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ApiResult, Errors};
use crate::extract::{Body, Exec, Path, Text};
use crate::state::AppState;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_models, deploy_model))
        .routes(routes!(get_model, remove_model))
        .routes(routes!(list_versions))
        .routes(routes!(migrate_model))
        .routes(routes!(get_version, remove_version))
}

/// The model of the document's examples (the one docs/SERVER.md uses).
const EXAMPLE_MODEL: &str = "id: approval\nver: \"1\"\nsteps:\n  - id: review\n    uses: acts.core.irq\n    params: { key: approve }\n  - id: done\n    uses: acts.transform.set\n    params: { approved: true }\n";

/// Deploys a model (a new version when it differs from the latest).
#[utoipa::path(
    post, path = "/api/v1/models", tag = "models",
    request_body(
        content((Object = "application/yaml", example = json!(EXAMPLE_MODEL)), (Object = "application/json")),
        description = "The model: its YAML text (`application/yaml`, `application/x-yaml` or `text/yaml`), or the same as JSON — a mapping. Its shape is all the document says: its rules are docs/MODEL.md's, and a model that breaks one is answered 400 bad_model, naming the rule."
    ),
    responses(
        (status = 201, description = "The deployed version (`unchanged` when it equals the latest, which is kept).", body = ModelInfo),
        Errors
    )
)]
async fn deploy_model(Exec(x, _): Exec, Text(text): Text) -> ApiResult<impl IntoResponse> {
    let info = x.model().deploy_yaml(&text).await?;
    Ok((StatusCode::CREATED, Json(info)))
}

/// The deployed models.
#[utoipa::path(
    get, path = "/api/v1/models", tag = "models",
    responses((status = 200, description = "Every deployed model (its latest version).", body = Vec<ModelInfo>), Errors)
)]
async fn list_models(Exec(x, _): Exec) -> ApiResult<impl IntoResponse> {
    Ok(Json(x.model().list().await?))
}

/// A model's latest version and its definition.
#[utoipa::path(
    get, path = "/api/v1/models/{id}", tag = "models",
    params(("id" = String, Path, description = "The model id.", example = "approval")),
    responses((status = 200, description = "The model.", body = ModelDetail), Errors)
)]
async fn get_model(Exec(x, _): Exec, Path(id): Path<String>) -> ApiResult<impl IntoResponse> {
    let (info, workflow) = x.model().get(&id).await?;
    Ok(model_json(info, &workflow))
}

/// A model version and its definition (JSON and YAML).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ModelDetail {
    /// The version.
    model: ModelInfo,
    /// The parsed model, as JSON.
    #[schema(value_type = Object)]
    definition: Value,
    /// The model as YAML.
    yaml: Option<String>,
}

fn model_json(info: ModelInfo, workflow: &Workflow) -> Json<ModelDetail> {
    let definition: Value = serde_json::from_str(&workflow.to_json()).unwrap_or(Value::Null);
    Json(ModelDetail {
        model: info,
        definition,
        yaml: workflow.to_yaml().ok(),
    })
}

/// A migration: the versions, the map and the vars (the model is the
/// path's), and whether it is a dry run.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"from": 1, "to": 2, "map": {"review": "check"}, "dry_run": true}))]
struct MigrateRequest {
    /// The model: the path's. Not in the document (JSON Schema cannot
    /// compare a field with the path); a body naming the same model, as
    /// earlier clients send, is taken.
    #[serde(default)]
    #[schema(ignore)]
    model: Option<String>,
    /// The version whose live processes move.
    from: u32,
    /// The version they move to.
    to: u32,
    /// Old node id to new node id, for nodes renamed or removed.
    #[serde(default)]
    map: std::collections::BTreeMap<String, String>,
    /// Process variables to set as each process moves.
    #[serde(default)]
    #[schema(value_type = Object)]
    vars: Vars,
    /// Report what would happen and change nothing.
    #[serde(default)]
    dry_run: bool,
}

/// (admin) Moves the live processes of one version to another.
#[utoipa::path(
    post, path = "/api/v1/models/{id}/migrate", tag = "models",
    params(("id" = String, Path, description = "The model id.")),
    request_body = MigrateRequest,
    responses((status = 200, description = "What happened (or would) to each live process of `from`.", body = MigrationReport), Errors)
)]
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
    Ok(Json(x.model().migrate(&plan, req.dry_run).await?))
}

/// Every version of a model, oldest first.
#[utoipa::path(
    get, path = "/api/v1/models/{id}/versions", tag = "models",
    params(("id" = String, Path, description = "The model id.")),
    responses((status = 200, description = "Each version with `latest`, `processes` and `unfinished`.", body = Vec<ModelVersionInfo>), Errors)
)]
async fn list_versions(Exec(x, _): Exec, Path(id): Path<String>) -> ApiResult<impl IntoResponse> {
    Ok(Json(x.model().versions(&id).await?))
}

/// One version of a model and its definition.
#[utoipa::path(
    get, path = "/api/v1/models/{id}/versions/{rev}", tag = "models",
    params(("id" = String, Path, description = "The model id."), ("rev" = u32, Path, description = "The version (its revision).")),
    responses((status = 200, description = "The version.", body = ModelDetail), Errors)
)]
async fn get_version(
    Exec(x, _): Exec,
    Path((id, rev)): Path<(String, u32)>,
) -> ApiResult<impl IntoResponse> {
    let (info, workflow) = x.model().version(&id, rev).await?;
    Ok(model_json(info, &workflow))
}

/// (admin) Removes a version no process runs on and that is not the latest.
#[utoipa::path(
    delete, path = "/api/v1/models/{id}/versions/{rev}", tag = "models",
    params(("id" = String, Path, description = "The model id."), ("rev" = u32, Path, description = "The version.")),
    responses((status = 204, description = "Removed."), Errors)
)]
async fn remove_version(
    Exec(x, _): Exec,
    Path((id, rev)): Path<(String, u32)>,
) -> ApiResult<StatusCode> {
    if x.model().remove_version(&id, rev).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!(
            "model '{id}' has no version {rev}"
        )))
    }
}

/// Removes a model (the versions processes run on are kept).
#[utoipa::path(
    delete, path = "/api/v1/models/{id}", tag = "models",
    params(("id" = String, Path, description = "The model id.")),
    responses((status = 204, description = "Removed."), Errors)
)]
async fn remove_model(Exec(x, _): Exec, Path(id): Path<String>) -> ApiResult<StatusCode> {
    if x.model().remove(&id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("model '{id}' is not deployed")))
    }
}
