//! Filling in the indexes of a store written before they existed (once
//! per store, at boot): the process and delivery indexes, the retired
//! indexes' entries, the wake index.

use crate::durable::Row;

use super::{IN_FLIGHT, Recovery};
use crate::engine::persist::boot_rows::BootRows;
use crate::engine::persist::delivery_rows::{
    DELIVERY_INDEX, DELIVERY_INDEX_GENERATION, DeliveryRow,
};
use crate::engine::persist::proc_rows::ProcRows;
use crate::engine::persist::rows::{
    PROC_INDEX, PROC_INDEX_ENTRIES_SINCE, PROC_INDEX_GENERATION, ProcRow, WAKE_INDEX_COMPLETE,
};
use crate::engine::types::error::EngineError;

impl Recovery {
    /// Boot, before anything else touches process or delivery rows: on a
    /// store whose rows were written before an index of [`ProcRow`] or
    /// [`DeliveryRow`] existed (its fact below the generation), writes
    /// every such row's index entries (idempotent puts, a batch per chunk
    /// of rows) and deletes the entries of indexes retired since
    /// ([`Row::RETIRED`]), then the facts in one batch, with `also` (the
    /// store format's fact). Once per store.
    pub(crate) async fn fill_indexes(
        &self,
        also: Option<acts_store::BatchOp>,
    ) -> Result<(), EngineError> {
        let host = self.host()?;
        let mut facts: Vec<_> = also.into_iter().collect();
        facts.extend(
            self.fill_index::<ProcRow>(PROC_INDEX, PROC_INDEX_GENERATION, PROC_INDEX_ENTRIES_SINCE)
                .await?,
        );
        facts.extend(
            self.fill_index::<DeliveryRow>(
                DELIVERY_INDEX,
                DELIVERY_INDEX_GENERATION,
                DELIVERY_INDEX_GENERATION,
            )
            .await?,
        );
        // The facts together, after every entry they vouch for.
        if !facts.is_empty() {
            host.write(facts).await?;
        }
        Ok(())
    }

    /// Fills in `R`'s index entries unless fact `fact` says `generation`
    /// is stored (only the retired ones' are deleted when it says
    /// `entries_since` or later); the op that then records the fact.
    async fn fill_index<R: Row>(
        &self,
        fact: &str,
        generation: u64,
        entries_since: u64,
    ) -> Result<Option<acts_store::BatchOp>, EngineError> {
        let host = self.host()?;
        let boot = BootRows::new(&self.store);
        let stored = boot.fact(fact).await?.and_then(|v| v.as_u64()).unwrap_or(0);
        if stored >= generation {
            return Ok(None);
        }
        let mut filled = 0usize;
        // Written since `entries_since`, with every row: nothing to fill.
        if stored < entries_since {
            let mut after = None;
            loop {
                let page = boot.fill_page::<R>(after).await?;
                filled += page.rows;
                if !page.ops.is_empty() {
                    host.write(page.ops).await?;
                }
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
        }
        // Entries of indexes the rows no longer keep: deleted, a batch per
        // chunk (nothing reads them; left, they would go stale).
        let mut retired = 0usize;
        loop {
            let ops = boot.retired_entries::<R>().await?;
            if ops.is_empty() {
                break;
            }
            retired += ops.len();
            host.write(ops).await?;
        }
        if filled > 0 || retired > 0 {
            tracing::info!(
                rows = filled,
                retired_entries = retired,
                collection = R::COLLECTION,
                "filled in the indexes of an older store"
            );
        }
        Ok(Some(BootRows::fact_op(
            fact,
            serde_json::Value::from(generation),
        )))
    }

    /// A store written before the wake index existed (or a fresh one):
    /// every in-flight process gets a wake row that says "resume" (its
    /// resume transition then writes what it really needs), and the index
    /// is marked complete in the last batch. (A process loaded on demand
    /// meanwhile may have its row overwritten: it is resumed once more,
    /// which writes its row again.)
    pub(super) async fn fill_wake_index(&self) -> Result<(), EngineError> {
        let host = self.host()?;
        if BootRows::new(&self.store)
            .fact(WAKE_INDEX_COMPLETE)
            .await?
            .is_some()
        {
            return Ok(());
        }
        let procs = ProcRows::new(&self.store);
        let mut ids = Vec::new();
        for state in IN_FLIGHT {
            procs.ids_in_state(state, |chunk| ids.extend(chunk)).await?;
        }
        for chunk in ids.chunks(1024) {
            let ops = chunk.iter().map(|id| BootRows::resume_op(id)).collect();
            host.write(ops).await?;
        }
        host.write(vec![BootRows::fact_op(
            WAKE_INDEX_COMPLETE,
            serde_json::Value::Bool(true),
        )])
        .await?;
        Ok(())
    }
}
