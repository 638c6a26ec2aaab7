//! Model versions: listing them, removing one, removing a model — and the
//! pins that keep a version from being removed while a start is using it.
//!
//! A version may be deleted only when no stored process runs on it (a
//! finished process keeps its version, so it can still be shown) and no
//! start is using it. A start pins the version it read from the catalog
//! ([`VersionPin`]) until its process row is durable; from then on the
//! row itself is what keeps the version. A removal marks the versions it
//! is about to delete as *going* (new pins fail), keeps every version that
//! is pinned or used by a stored process, writes, updates the catalog and
//! only then lifts the mark: a start either pinned before the mark (and
//! the removal keeps its version) or finds nothing to start.

use super::Catalog;
use crate::engine::persist::model_rows::ModelRows;
use crate::engine::persist::model_rows::{ModelRow, ModelVersionRow};
use crate::engine::persist::proc_rows::ProcRows;
use crate::engine::persist::rows::ProcRow;
use crate::engine::types::error::EngineError;
use crate::engine::types::info::{ModelInfo, ModelVersionInfo};

/// Who runs on a version: stored processes, and how many have not ended.
struct Users {
    stored: usize,
    unfinished: usize,
    example: Option<String>,
}

impl Catalog {
    /// The stored versions of model `id`, oldest first; for a store written
    /// before versions existed, the latest (kept in the model row only)
    /// too.
    async fn stored_versions(
        &self,
        id: &str,
        latest: Option<&ModelRow>,
    ) -> Result<Vec<ModelVersionRow>, EngineError> {
        let mut rows = ModelRows::new(&self.store).versions(id).await?;
        if let Some(l) = latest
            && !rows.iter().any(|v| v.revision == l.revision)
        {
            rows.push(l.into());
        }
        rows.sort_by_key(|r| r.revision);
        Ok(rows)
    }

    /// The highest revision model `id` ever had among its stored versions
    /// (0 if none): a new deploy of a removed model continues after it.
    pub(super) async fn last_revision(&self, id: &str) -> Result<u32, EngineError> {
        let versions = self.stored_versions(id, None).await?;
        Ok(versions.last().map_or(0, |v| v.revision))
    }

    /// The stored processes of version `revision` of model `id` (read
    /// through the process index, never a scan of all processes).
    async fn version_users(&self, id: &str, revision: u32) -> Result<Users, EngineError> {
        let procs = ProcRows::new(&self.store);
        let mut ids = Vec::new();
        procs
            .ids_on_version(id, revision, |chunk| ids.extend(chunk))
            .await?;
        let mut rows = Vec::with_capacity(ids.len());
        for pid in ids {
            // An entry whose row was removed meanwhile is skipped.
            rows.extend(procs.get(&pid).await?);
        }
        let unfinished: Vec<&ProcRow> = rows.iter().filter(|r| !r.state.is_terminal()).collect();
        Ok(Users {
            stored: rows.len(),
            unfinished: unfinished.len(),
            example: unfinished
                .first()
                .or(rows.first().as_ref())
                .map(|r| r.id.clone()),
        })
    }

    /// Every stored version of model `id`, oldest first, with how many
    /// stored and unfinished processes run on each.
    pub(crate) async fn versions(&self, id: &str) -> Result<Vec<ModelVersionInfo>, EngineError> {
        let latest = ModelRows::new(&self.store).model(id).await?;
        let rows = self.stored_versions(id, latest.as_ref()).await?;
        if rows.is_empty() {
            return Err(EngineError::ModelNotFound(id.to_owned()));
        }
        let mut out = Vec::with_capacity(rows.len());
        for v in rows {
            let users = self.version_users(id, v.revision).await?;
            out.push(ModelVersionInfo {
                latest: latest.as_ref().is_some_and(|l| l.revision == v.revision),
                model: ModelInfo::from(&ModelRow::from(&v)),
                processes: users.stored,
                unfinished: users.unfinished,
            });
        }
        Ok(out)
    }

    /// Removes version `revision` of model `id`. Refused while it is the
    /// model's latest, while a stored process runs on it (finished ones
    /// too: they are shown with it) or while a start uses it. Returns
    /// whether it existed.
    pub(crate) async fn remove_version(
        &self,
        id: &str,
        revision: u32,
    ) -> Result<bool, EngineError> {
        let host = self.host()?;
        host.check_open()?;
        let _changes = self.lock_changes().await;
        let stored = ModelRows::new(&self.store);
        let Some(row) = stored.version(id, revision).await? else {
            return Ok(false);
        };
        let refuse = |reason: String| EngineError::VersionInUse {
            model: id.to_owned(),
            revision,
            reason,
        };
        let latest = stored.model(id).await?;
        if latest.is_some_and(|l| l.revision == revision) {
            return Err(refuse(
                "it is the model's latest version (deploy a newer one first, or remove the model)"
                    .into(),
            ));
        }
        let (_mark, pinned) = self.mark_going(id, &[revision]);
        if !pinned.is_empty() {
            return Err(refuse("a process is starting on it; try again".into()));
        }
        let users = self.version_users(id, revision).await?;
        if let Some(pid) = users.example {
            return Err(refuse(format!(
                "{} stored process(es) run on it ({} unfinished), e.g. '{pid}'; remove them first",
                users.stored, users.unfinished
            )));
        }
        host.write(ModelRows::delete_version_ops(&row)).await?;
        self.forget_version(id, revision);
        Ok(true)
    }

    /// Removes model `id`: no process can start from it any more. Its
    /// versions go too, but for those stored processes run on or a start
    /// is using (they stay, listed by `versions`, until removed with
    /// [`Catalog::remove_version`]). Returns whether it existed.
    pub(crate) async fn remove_model(&self, id: &str) -> Result<bool, EngineError> {
        let host = self.host()?;
        host.check_open()?;
        let _changes = self.lock_changes().await;
        let stored = ModelRows::new(&self.store);
        let Some(row) = stored.model(id).await? else {
            return Ok(false);
        };
        let versions = self.stored_versions(id, Some(&row)).await?;
        let revisions: Vec<u32> = versions.iter().map(|v| v.revision).collect();
        let (_mark, mut kept) = self.mark_going(id, &revisions);
        let mut ops = ModelRows::delete_model_ops(&row);
        let only_in_model_row = stored.version(id, row.revision).await?.is_none();
        for v in &versions {
            let in_use =
                kept.contains(&v.revision) || self.version_users(id, v.revision).await?.stored > 0;
            let stored = !(only_in_model_row && v.revision == row.revision);
            match (in_use, stored) {
                (true, true) => kept.push(v.revision),
                // Its processes need it once the model row is gone.
                (true, false) => {
                    ops.extend(ModelRows::insert_version_ops(v));
                    kept.push(v.revision);
                }
                (false, true) => ops.extend(ModelRows::delete_version_ops(v)),
                (false, false) => {}
            }
        }
        ops.extend(host.trigger_delete_ops(id).await?);
        host.write(ops).await?;
        self.retire(id, &kept);
        Ok(true)
    }
}
