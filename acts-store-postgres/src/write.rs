//! The write path: a batch's ops folded to the last op of each key, in key
//! order, written with one statement (the puts and the deletes together):
//! outside a transaction a batch is one round trip.

use std::collections::BTreeMap;

use acts_store::{BatchOp, StoreOp, StoreResult};
use deadpool_postgres::GenericClient;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use crate::PostgresStore;
use crate::error::map_err;
use crate::sql::{Write, Writers};

/// Keys from which a write updates the present keys and inserts the
/// others rather than upserting (below it the upsert's extra cost is
/// smaller than a second try's round trip when the first meets a
/// concurrent insert).
const LARGE_WRITE: usize = 256;

impl PostgresStore {
    /// Applies `ops` (validated) on `client` — a connection (the statement
    /// is its own transaction) or a transaction — folded to the last op of
    /// each key, in key order (two batches that share keys lock them in
    /// the same order), as one statement.
    ///
    /// A large write updates the present keys and inserts the others — a
    /// third cheaper than an upsert's speculative insertion — unless
    /// another transaction inserts one of its keys meanwhile: the statement
    /// then fails having written nothing, and the upsert runs instead. Only
    /// a write that may meet other writers can meet that; a conditional
    /// batch holds the table's writer lock. (In a transaction a failed
    /// statement would end the transaction, so there the first try is
    /// taken only under the lock.)
    pub(crate) async fn apply(
        &self,
        client: &impl GenericClient,
        op: StoreOp,
        writers: Writers,
        ops: Vec<BatchOp>,
    ) -> StoreResult<()> {
        // The last op of each key, in key order.
        let mut last: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        for o in ops {
            match o {
                BatchOp::Put { key, value } => last.insert(key, Some(value)),
                BatchOp::Delete { key } => last.insert(key, None),
            };
        }
        let (mut keys, mut values, mut deletes) = (Vec::new(), Vec::new(), Vec::new());
        for (k, v) in last {
            match v {
                Some(v) => {
                    keys.push(k);
                    values.push(v);
                }
                None => deletes.push(k),
            }
        }
        if keys.is_empty() {
            let stmt = client
                .prepare_cached(&self.sql.delete())
                .await
                .map_err(|e| map_err(op, e))?;
            client
                .execute(&stmt, &[&deletes])
                .await
                .map_err(|e| map_err(op, e))?;
            return Ok(());
        }
        let with_deletes = !deletes.is_empty();
        let params: Vec<&(dyn ToSql + Sync)> = if with_deletes {
            vec![&keys, &values, &deletes]
        } else {
            vec![&keys, &values]
        };
        if keys.len() >= LARGE_WRITE {
            let stmt = client
                .prepare_cached(&self.sql.write(Write::UpdateThenInsert, with_deletes))
                .await
                .map_err(|e| map_err(op, e))?;
            match client.execute(&stmt, &params).await {
                Ok(_) => return Ok(()),
                Err(e)
                    if writers == Writers::Others
                        && e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {}
                Err(e) => return Err(map_err(op, e)),
            }
        }
        let stmt = client
            .prepare_cached(&self.sql.write(Write::Upsert, with_deletes))
            .await
            .map_err(|e| map_err(op, e))?;
        client
            .execute(&stmt, &params)
            .await
            .map_err(|e| map_err(op, e))?;
        Ok(())
    }
}
