//! The store's format: which shapes of rows a store holds, recorded as a
//! [`MetaRow`] fact when an engine first starts on a store and checked
//! before anything else at every start, so an acts that cannot read a
//! store says so at open — naming both formats and what to do — instead
//! of at the first unreadable row, in the middle of work.
//!
//! Formats (raise [`STORE_FORMAT`] when a row is written in a shape an
//! earlier acts cannot read, and add a fixture of the new format to
//! `acts-cli/tests/fixtures/`):
//!
//! - **1**: every store written before the format was recorded. Read as it
//!   is; its first start fills in the indexes it lacks (resumably: each
//!   index set records its own generation) and then records format 2.
//! - **2**: the rows of acts 0.1 (task, scope and node rows without the ids
//!   their keys hold; the state-and-time and model-and-time process
//!   indexes; version rows; wake rows; delivery indexes).

use std::sync::Arc;

use acts_store::{BatchOp, KvStore, ScanRange};
use serde::{Deserialize, Serialize};

use crate::durable::Collection;
use crate::engine::persist::rows::MetaRow;
use crate::engine::types::error::EngineError;

/// The format this acts writes, and the newest it reads.
pub const STORE_FORMAT: u64 = 2;

/// The [`MetaRow`] that holds the store's [`StoreFormat`].
pub const STORE_FORMAT_FACT: &str = "store_format";

/// What the format fact records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreFormat {
    /// The format of the rows in the store.
    pub format: u64,
    /// The acts that recorded it (its crate version).
    pub written_by: String,
}

impl StoreFormat {
    /// The format this build writes.
    pub fn current() -> Self {
        Self {
            format: STORE_FORMAT,
            written_by: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }
}

/// What a store holds, as [`check`] found it before the start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// Nothing at all: a new store.
    Empty,
    /// Rows, but no format fact: written before formats were recorded
    /// (format 1).
    Unrecorded,
    /// The recorded format (no newer than [`STORE_FORMAT`]).
    Recorded(StoreFormat),
}

/// The store's format. A format newer than this acts reads is refused
/// with [`EngineError::StoreFormatTooNew`], before anything is written; an
/// unreadable fact is [`EngineError::Corrupt`].
pub(crate) async fn check(store: &Arc<dyn KvStore>) -> Result<Found, EngineError> {
    let meta = Collection::<MetaRow>::new(store.clone());
    let Some(row) = meta.get(STORE_FORMAT_FACT).await? else {
        let any = store.scan(ScanRange::all().with_limit(1)).await?;
        return Ok(if any.is_empty() {
            Found::Empty
        } else {
            Found::Unrecorded
        });
    };
    let found: StoreFormat = serde_json::from_value(row.value.clone()).map_err(|e| {
        EngineError::Corrupt(format!(
            "the store's format fact ('{STORE_FORMAT_FACT}' in meta) is unreadable: {e}; \
             it holds {}",
            row.value
        ))
    })?;
    if found.format > STORE_FORMAT {
        return Err(EngineError::StoreFormatTooNew {
            found: found.format,
            written_by: found.written_by,
            supported: STORE_FORMAT,
            this: env!("CARGO_PKG_VERSION"),
        });
    }
    Ok(Found::Recorded(found))
}

impl Found {
    /// The format the store held (1 when unrecorded; `None` when new).
    pub(crate) fn format(&self) -> Option<u64> {
        match self {
            Found::Empty => None,
            Found::Unrecorded => Some(1),
            Found::Recorded(f) => Some(f.format),
        }
    }

    /// Logs the upgrade [`record_op`](Self::record_op)'s fact recorded (a
    /// new store's first format is no upgrade, a current one none).
    pub(crate) fn log_upgrade(&self) {
        if let Some(from) = self.format().filter(|f| *f < STORE_FORMAT) {
            tracing::info!(from, to = STORE_FORMAT, "upgraded the store's format");
        }
    }

    /// The op that records this build's format, when the store's is older
    /// or unrecorded; `None` when it is current. Written after the
    /// start's upgrades (the index fills), so the fact vouches for every
    /// row.
    pub(crate) fn record_op(&self) -> Option<BatchOp> {
        if self.format().is_some_and(|f| f >= STORE_FORMAT) {
            return None;
        }
        let value = serde_json::to_value(StoreFormat::current()).ok()?;
        Some(Collection::<MetaRow>::put_row_op(&MetaRow {
            id: STORE_FORMAT_FACT.to_owned(),
            value,
        }))
    }
}
