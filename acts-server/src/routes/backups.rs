//! Online backups of the server's store: `POST /api/v1/backups` (admins
//! only) copies a redb store (a snapshot) or a RocksDB store (a
//! checkpoint) into the folder `acts serve --backup-dir` names, while
//! commits go on, and counts what the copy holds by opening it.

use std::path::Path;
use std::time::Instant;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ApiResult, Errors};
use crate::extract::{Body, Exec};
use crate::state::AppState;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(backup))
}

/// The longest backup name.
const MAX_NAME: usize = 128;

/// A backup to make.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "acts-2026-12-07.redb"}))]
pub(crate) struct BackupRequest {
    /// The copy's name in the server's backup folder: letters, digits,
    /// `.`, `-` and `_`, not starting with `.`, at most 128 characters;
    /// nothing of that name may exist there.
    #[schema(
        example = "acts-2026-12-07.redb",
        pattern = "^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$"
    )]
    name: String,
}

/// A backup made, and what it holds.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "path": "/var/backups/acts/acts-2026-12-07.redb", "pairs": 7240, "bytes": 1441792, "millis": 38,
    "holds": {"models": 1, "processes": 490, "by_state": {"completed": 430, "running": 60}}
}))]
pub(crate) struct BackupReply {
    /// Where the copy is, on the server's machine.
    path: String,
    /// The key-value pairs copied.
    pairs: u64,
    /// The bytes the copy takes.
    bytes: u64,
    /// How long the copy took (ms).
    millis: u64,
    /// What the copy holds (it was opened and counted).
    holds: acts::Census,
}

/// `Ok` if `name` is a plain file name a backup may take.
fn check_name(name: &str) -> ApiResult<()> {
    let plain = !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if plain {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "backup name '{}': use letters, digits, '.', '-' and '_' (not first '.'), at most {MAX_NAME} characters: a name in the server's backup folder, not a path",
            name.chars().take(MAX_NAME).collect::<String>()
        )))
    }
}

/// (admin) Back up the store while it runs.
///
/// Copies the store as of one moment into the server's backup folder
/// (`acts serve --backup-dir DIR`) while commits go on — a redb store's
/// snapshot, a RocksDB checkpoint — then opens the copy and counts what
/// it holds. Redis and PostgreSQL keep their own backups (BGSAVE,
/// `pg_dump`: docs/OPERATIONS.md); on them, and when the server has no
/// backup folder, the call is refused (`not_supported`).
#[utoipa::path(
    post, path = "/api/v1/backups", tag = "service",
    request_body = BackupRequest,
    responses((status = 201, description = "The copy, checked.", body = BackupReply), Errors)
)]
async fn backup(
    State(s): State<AppState>,
    x: Exec,
    Body(req): Body<BackupRequest>,
) -> ApiResult<(StatusCode, Json<BackupReply>)> {
    x.need_admin("backing up the store")?;
    check_name(&req.name)?;
    let Some(dir) = s.backup_dir.as_deref() else {
        return Err(not_supported(
            "backups through the API are off: start acts serve with --backup-dir DIR (or run `acts backup --to PATH` on a stopped store)",
        ));
    };
    let store = s.engine.storage().store();
    let scheme = match store.backend() {
        "redb" => "redb",
        "rocksdb" => "rocksdb",
        other => {
            return Err(not_supported(acts_store_advice(other)));
        }
    };
    let to = dir.join(&req.name);
    let started = Instant::now();
    let info = store.backup(&to).await.map_err(|e| match e.kind() {
        acts::StoreErrorKind::InvalidInput => ApiError {
            status: StatusCode::CONFLICT,
            code: "conflict",
            message: e.to_string(),
        },
        _ => ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: "unavailable",
            message: format!("the backup failed: {e}"),
        },
    })?;
    let millis = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let holds = acts::census_of(&format!("{scheme}:{}", to.display()))
        .await
        .map_err(|e| ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: "internal",
            message: format!("the copy at {} is not usable: {e}", to.display()),
        })?;
    tracing::info!(path = %to.display(), pairs = info.pairs, bytes = info.bytes, millis, "backed up the store");
    Ok((
        StatusCode::CREATED,
        Json(BackupReply {
            path: path_text(&to),
            pairs: info.pairs,
            bytes: info.bytes,
            millis,
            holds,
        }),
    ))
}

fn path_text(p: &Path) -> String {
    p.display().to_string()
}

fn not_supported(message: impl Into<String>) -> ApiError {
    ApiError {
        status: StatusCode::CONFLICT,
        code: "not_supported",
        message: message.into(),
    }
}

/// What to use instead on a store acts does not copy itself.
fn acts_store_advice(backend: &str) -> String {
    format!(
        "the store is on {backend}, which acts does not copy: {}",
        acts::backup_advice(backend)
    )
}
