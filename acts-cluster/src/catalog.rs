//! Keeping every partition's models in step with the cluster's catalog.
//!
//! A deploy (or removal) is made on the catalog partition (partition 0)
//! first, by its owner, one change at a time (`fanout.rs`) — so a model
//! the engine refuses is refused with the engine's own error and never
//! enters the catalog, and the catalog's order is the order that partition
//! saw — then appended to the catalog, and every partition's owner
//! applies the catalog changes it has not applied yet, in catalog order:
//! at once (the deploying node tells the others), on every tick (a node
//! that missed the call), and when it takes a partition over (from what
//! that partition already holds). Deploying a definition a partition
//! already has as its latest changes nothing, so applying twice is
//! harmless and every partition numbers the same versions alike — also
//! when two deploys of one model race through two nodes.

use std::collections::BTreeMap;

use acts::{EngineError, Executor, Workflow};
use tracing::warn;

use crate::meta::CatalogOp;

/// The definition model `id` has on the partition `exec` acts on, as
/// stored (JSON); `None` when it has no such model.
async fn current_json(exec: &Executor, id: &str) -> Result<Option<String>, EngineError> {
    match exec.model().get(id).await {
        Ok((_, workflow)) => Ok(Some(workflow.to_json())),
        Err(EngineError::ModelNotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Applies one change on a partition. A change the partition refuses
/// (a version still in use there) is logged and skipped: the catalog is
/// what the cluster asked for, not a promise every partition can keep.
pub(crate) async fn apply(
    exec: &Executor,
    partition: u32,
    op: &CatalogOp,
) -> Result<(), EngineError> {
    let outcome = match op {
        CatalogOp::Deploy { json, model } => match Workflow::from_json(json) {
            Ok(workflow) => exec.model().deploy(&workflow).await.map(drop),
            Err(e) => {
                warn!(partition, model = %model, error = %e, "a catalog model does not load; skipped");
                Ok(())
            }
        },
        CatalogOp::Remove { model } => exec.model().remove(model).await.map(drop),
        CatalogOp::RemoveVersion { model, revision } => exec
            .model()
            .remove_version(model, *revision)
            .await
            .map(drop),
    };
    match outcome {
        Err(e) if is_store_fault(&e) => Err(e),
        Err(e) => {
            warn!(partition, model = %op.model(), error = %e, "a catalog change was refused on this partition");
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}

/// Whether an error is the store's or the engine's state (retry later),
/// not the partition refusing the change itself.
fn is_store_fault(e: &EngineError) -> bool {
    matches!(
        e,
        EngineError::Store(_)
            | EngineError::Commit { .. }
            | EngineError::Fenced(_)
            | EngineError::Closed
    )
}

/// Brings a partition just taken over up to the catalog: for each model,
/// the changes after the last one the partition already reflects (its
/// current definition's last deploy; after the last removal when it has
/// none).
pub(crate) async fn catch_up(
    exec: &Executor,
    partition: u32,
    catalog: &[(u64, CatalogOp)],
) -> Result<(), EngineError> {
    let mut by_model: BTreeMap<&str, Vec<&CatalogOp>> = BTreeMap::new();
    for (_, op) in catalog {
        by_model.entry(op.model()).or_default().push(op);
    }
    for (model, ops) in by_model {
        let current = current_json(exec, model).await?;
        let start = match &current {
            Some(json) => ops
                .iter()
                .rposition(|op| matches!(op, CatalogOp::Deploy { json: j, .. } if j == json))
                .map_or(0, |i| i + 1),
            None => ops
                .iter()
                .rposition(|op| matches!(op, CatalogOp::Remove { .. }))
                .map_or(0, |i| i + 1),
        };
        for op in &ops[start..] {
            apply(exec, partition, op).await?;
        }
    }
    Ok(())
}
