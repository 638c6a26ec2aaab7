//! The write path: a batch's ops folded to the last op of each key, in key
//! order, written with one statement for the puts and one for the deletes
//! inside the caller's transaction.

use std::collections::HashMap;

use acts_store::{BatchOp, StoreOp, StoreResult};

use crate::PostgresStore;
use crate::error::map_err;

/// Keys from which a write takes the update-then-insert path (below it
/// the upsert's extra cost is smaller than a savepoint's round trip).
const LARGE_WRITE: usize = 256;

/// Whether a transaction may meet other writers of its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writers {
    /// It holds the table's writer lock (a conditional batch).
    Locked,
    /// Others may write the same keys at the same time.
    Others,
}

impl PostgresStore {
    /// Writes `keys` (distinct) with `values` in transaction `tx`. A large
    /// write updates the present keys and inserts the others — a third
    /// cheaper than an upsert's speculative insertion — unless another
    /// transaction inserts one of its keys meanwhile: then it falls back
    /// to the upsert from a savepoint. A write under the table's writer
    /// lock meets no other writer; a small one takes the upsert at once.
    async fn put(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        op: StoreOp,
        writers: Writers,
        keys: &[Vec<u8>],
        values: &[Vec<u8>],
    ) -> StoreResult<()> {
        let fast = keys.len() >= LARGE_WRITE;
        if fast {
            let stmt = tx
                .prepare_cached(&self.sql.update_then_insert())
                .await
                .map_err(|e| map_err(op, e))?;
            if writers == Writers::Locked {
                tx.execute(&stmt, &[&keys, &values])
                    .await
                    .map_err(|e| map_err(op, e))?;
                return Ok(());
            }
            tx.batch_execute("SAVEPOINT acts_put")
                .await
                .map_err(|e| map_err(op, e))?;
            match tx.execute(&stmt, &[&keys, &values]).await {
                Ok(_) => return Ok(()),
                Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => {
                    tx.batch_execute("ROLLBACK TO SAVEPOINT acts_put")
                        .await
                        .map_err(|e| map_err(op, e))?;
                }
                Err(e) => return Err(map_err(op, e)),
            }
        }
        let stmt = tx
            .prepare_cached(&self.sql.upsert())
            .await
            .map_err(|e| map_err(op, e))?;
        tx.execute(&stmt, &[&keys, &values])
            .await
            .map_err(|e| map_err(op, e))?;
        Ok(())
    }

    /// Applies `ops` (validated) in transaction `tx`: folded to the last op
    /// of each key, one write of the puts and one delete.
    pub(crate) async fn apply(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        op: StoreOp,
        writers: Writers,
        ops: Vec<BatchOp>,
    ) -> StoreResult<()> {
        let mut last: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::with_capacity(ops.len());
        for o in ops {
            match o {
                BatchOp::Put { key, value } => last.insert(key, Some(value)),
                BatchOp::Delete { key } => last.insert(key, None),
            };
        }
        // In key order: the index takes the rows page by page, and two
        // batches that share keys lock them in the same order.
        let mut last: Vec<(Vec<u8>, Option<Vec<u8>>)> = last.into_iter().collect();
        last.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let (mut put_keys, mut put_values, mut deletes) = (Vec::new(), Vec::new(), Vec::new());
        for (k, v) in last {
            match v {
                Some(v) => {
                    put_keys.push(k);
                    put_values.push(v);
                }
                None => deletes.push(k),
            }
        }
        if !put_keys.is_empty() {
            self.put(tx, op, writers, &put_keys, &put_values).await?;
        }
        if !deletes.is_empty() {
            let stmt = tx
                .prepare_cached(&self.sql.delete())
                .await
                .map_err(|e| map_err(op, e))?;
            tx.execute(&stmt, &[&deletes])
                .await
                .map_err(|e| map_err(op, e))?;
        }
        Ok(())
    }
}
