//! Point reads that arrive together go to the server as one statement.
//!
//! The engine reads one key per call (is this process id taken? what does
//! this process hold?), and a burst makes thousands of such calls at once:
//! one round trip each would cost the server and this process more than
//! the writes do. A reader task takes the `get`s waiting in its queue (up
//! to [`MAX_KEYS`] keys or [`MAX_KEY_BYTES`] of keys), reads them with one
//! `SELECT … WHERE k = ANY($1)` and answers each; at most [`IN_FLIGHT`]
//! such statements run at once, and what arrives meanwhile waits for the
//! next. A read is sent after it was asked, so it sees every write
//! acknowledged before it was asked.
//!
//! The queue holds at most [`QUEUE`] requests (a caller waits for room),
//! so at most `QUEUE × 16 KiB` of keys.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use acts_store::{StoreError, StoreOp, StoreResult};
use deadpool_postgres::{GenericClient, Pool};
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::error::{BACKEND, map_err, map_pool_err};
use crate::sql::Sql;

/// Keys one statement reads at most.
const MAX_KEYS: usize = 512;
/// Key bytes one statement reads at most.
const MAX_KEY_BYTES: usize = 1 << 20;
/// Statements of the reader that run at once.
const IN_FLIGHT: usize = 4;
/// Requests the queue holds.
const QUEUE: usize = 1024;

type Reply = oneshot::Sender<StoreResult<Option<Vec<u8>>>>;

/// The queue of a namespace's point reads.
#[derive(Debug, Clone)]
pub(crate) struct PointReads {
    queue: mpsc::Sender<(Vec<u8>, Reply)>,
    statements: Arc<AtomicU64>,
}

impl PointReads {
    /// Starts the reader task of `sql`'s table on `pool` (on the current
    /// runtime); it ends when the last handle is dropped.
    pub(crate) fn start(pool: Pool, sql: Sql) -> Self {
        let (queue, requests) = mpsc::channel(QUEUE);
        let statements = Arc::new(AtomicU64::new(0));
        tokio::spawn(reader(pool, sql, requests, statements.clone()));
        Self { queue, statements }
    }

    /// How many statements the reader has sent.
    pub(crate) fn statements(&self) -> u64 {
        self.statements.load(Ordering::Relaxed)
    }

    /// Reads `key` with whatever else is asked meanwhile. `None` when the
    /// reader is gone (its runtime ended): the caller reads on its own.
    pub(crate) async fn get(&self, key: &[u8]) -> Option<StoreResult<Option<Vec<u8>>>> {
        let (reply, answer) = oneshot::channel();
        self.queue.send((key.to_vec(), reply)).await.ok()?;
        answer.await.ok()
    }
}

async fn reader(
    pool: Pool,
    sql: Sql,
    mut requests: mpsc::Receiver<(Vec<u8>, Reply)>,
    statements: Arc<AtomicU64>,
) {
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    while let Some(first) = requests.recv().await {
        // Wait for a slot first: what arrives meanwhile joins this batch.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut bytes = first.0.len();
        let mut batch = vec![first];
        while batch.len() < MAX_KEYS && bytes < MAX_KEY_BYTES {
            match requests.try_recv() {
                Ok(r) => {
                    bytes += r.0.len();
                    batch.push(r);
                }
                Err(_) => break,
            }
        }
        let (pool, sql) = (pool.clone(), sql.clone());
        statements.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            let keys: Vec<Vec<u8>> = batch.iter().map(|(k, _)| k.clone()).collect();
            match read_from_pool(&pool, &sql, StoreOp::Get, &keys).await {
                Ok(found) => {
                    for (k, reply) in batch {
                        let _ = reply.send(Ok(found.get(&k).cloned()));
                    }
                }
                Err(e) => {
                    for (_, reply) in batch {
                        let _ = reply.send(Err(StoreError::new(
                            BACKEND,
                            StoreOp::Get,
                            e.kind(),
                            e.to_string(),
                        )));
                    }
                }
            }
            drop(slot);
        });
    }
}

/// The values of those of `keys` that are present, by key, read with one
/// statement on a connection of `pool`.
pub(crate) async fn read_from_pool(
    pool: &Pool,
    sql: &Sql,
    op: StoreOp,
    keys: &[Vec<u8>],
) -> StoreResult<HashMap<Vec<u8>, Vec<u8>>> {
    let client = pool.get().await.map_err(|e| map_pool_err(op, e))?;
    read_many(&client, sql, op, keys).await
}

/// The values of those of `keys` that are present, by key, read with one
/// statement on `client` (a connection, or a transaction).
pub(crate) async fn read_many(
    client: &impl GenericClient,
    sql: &Sql,
    op: StoreOp,
    keys: &[Vec<u8>],
) -> StoreResult<HashMap<Vec<u8>, Vec<u8>>> {
    let stmt = client
        .prepare_cached(&sql.get_many())
        .await
        .map_err(|e| map_err(op, e))?;
    let rows = client
        .query(&stmt, &[&keys])
        .await
        .map_err(|e| map_err(op, e))?;
    let mut found = HashMap::with_capacity(rows.len());
    for r in rows {
        let k: Vec<u8> = r.try_get(0).map_err(|e| map_err(op, e))?;
        let v: Vec<u8> = r.try_get(1).map_err(|e| map_err(op, e))?;
        found.insert(k, v);
    }
    Ok(found)
}
