//! # acts-store-postgres: PostgreSQL backend, for the database teams already run
//!
//! A [`KvStore`] on a PostgreSQL server ([`PostgresStore::connect`], URL
//! `postgres://USER@HOST:PORT/DB?namespace=NAME`). Every namespace is one
//! table, `acts_kv_NAME (k bytea PRIMARY KEY, v bytea NOT NULL)`, created on
//! first use: `bytea` compares as unsigned bytes, shorter prefix first —
//! exactly the key order of the contract — so scans are index range scans.
//! A cluster's partitions are namespaces, so each is a table of its own
//! (measured against one shared table in `benches/README.md`).
//!
//! **Layering rule:** this crate depends only on `acts-store`, the
//! `tokio-postgres` client with the `deadpool-postgres` pool, and tokio. It
//! knows nothing of workflows.
//!
//! ## Guarantees
//!
//! - A [`batch`](KvStore::batch) is one transaction: its ops, folded to the
//!   last op of each key, become one statement — the puts and the deletes
//!   together, its own transaction, one round trip (`write.rs`; a large
//!   write updates the present keys and inserts the others, and runs as an
//!   upsert instead if a concurrent transaction inserts one of its keys).
//!   Readers see it whole or not at all.
//! - A [`batch_if`](KvStore::batch_if) is one transaction that first takes
//!   the table's `SHARE ROW EXCLUSIVE` lock — which every writer of the
//!   table conflicts with, readers do not — then reads its conditions and
//!   applies its ops: no write comes between the check and the ops, also
//!   for a key that does not exist yet.
//! - A read is one statement (one snapshot). Point reads asked at the same
//!   time share one statement ([`acts_store::PointReads`]): a burst of
//!   process starts reads thousands of keys in a few round trips, not one
//!   each. A scan
//!   with no limit pages
//!   through the table [`SCAN_PAGE`](sql::SCAN_PAGE) rows at a time inside
//!   one repeatable-read transaction, so no statement holds a huge result
//!   and every page reads the same snapshot.
//! - **Durability is the server's.** `Ok` means the transaction committed;
//!   with `fsync=on` and `synchronous_commit=on` (PostgreSQL's defaults) it
//!   is on disk. [`persistence`](KvStore::persistence) reads the server's
//!   settings and names a setting that can lose acknowledged work.
//! - **Faults.** A lost connection is replaced by the pool; while the
//!   server is unreachable every call fails within the operation time limit
//!   with a retryable [`StoreError`] (`Unavailable` or `Timeout`), never with
//!   "no record". A table whose shape is not the store's is `Corruption`.
//!
//! ## Where to start reading
//!
//! [`PostgresStore::connect`], then the `KvStore` impl; the statements are
//! in `sql.rs`, the error mapping in `error.rs`, the server's settings in
//! `settings.rs`, the write path in `write.rs`, the reads of many keys in
//! `reads.rs`.

mod error;
mod reads;
mod settings;
mod sql;
mod write;

use std::future::Future;
use std::ops::Bound;
use std::str::FromStr;
use std::time::Duration;

use acts_store::{
    BatchOp, Condition, ErrorKind, KvPair, KvStore, Persistence, PointReads, ScanRange, StoreError,
    StoreOp, StoreResult, validate_batch, validate_conditional, validate_key, validate_keys,
};
use async_trait::async_trait;
use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, QueueMode, RecyclingMethod, Runtime,
};
use tokio_postgres::NoTls;
use tokio_postgres::types::ToSql;

use crate::error::{BACKEND, map_err, map_pool_err};
use crate::reads::{read_in_order, read_many};
use crate::settings::Settings;
use crate::sql::Writers;
use crate::sql::{SCAN_PAGE, Sql};

/// The namespace of a URL that names none.
pub const DEFAULT_NAMESPACE: &str = "acts";

/// Connection settings for [`PostgresStore::connect_with`].
///
/// The pool hands out the connection it got back last (last in, first
/// out): work stays on the fewest server backends, whose prepared
/// statements and caches of the table are warm — a burst of process
/// starts runs a quarter faster than when each statement takes the
/// connection idle the longest (`benches/README.md`), and the
/// connections a quiet store does not need stay idle.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PostgresOptions {
    /// Most connections the store holds (default 16).
    pub pool_size: usize,
    /// Every call fails with [`ErrorKind::Timeout`] after this long
    /// (default 10 s).
    pub op_timeout: Duration,
    /// One attempt to connect gives up after this long (default 5 s).
    pub connect_timeout: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            pool_size: 16,
            op_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// A [`KvStore`] on one namespace (one table) of a PostgreSQL database.
/// Clones share the connections.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    sql: Sql,
    namespace: String,
    settings: std::sync::Arc<Settings>,
    op_timeout: Duration,
    /// Point reads, sent together (`None` outside a tokio runtime).
    reads: Option<PointReads>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// `url` without its `namespace` parameter, and the namespace it named.
fn split_namespace(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None);
    };
    let mut namespace = None;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.split_once('=') {
            Some(("namespace", v)) => {
                namespace = Some(v.to_owned());
                false
            }
            _ => !kv.is_empty(),
        })
        .collect();
    if rest.is_empty() {
        (base.to_owned(), namespace)
    } else {
        (format!("{base}?{}", rest.join("&")), namespace)
    }
}

fn invalid(message: String) -> StoreError {
    StoreError::new(BACKEND, StoreOp::Open, ErrorKind::InvalidInput, message)
}

impl PostgresStore {
    /// Connects to the server of `url` (`postgres://USER[:PASSWORD]@HOST:PORT/DB`,
    /// several hosts and libpq parameters such as
    /// `target_session_attrs=read-write` passed through) and opens the
    /// namespace its `namespace` parameter names ([`DEFAULT_NAMESPACE`]
    /// without one), creating its table on first use.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        let (base, namespace) = split_namespace(url);
        let ns = namespace.unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
        Self::connect_with(&base, &ns, PostgresOptions::default()).await
    }

    /// Connects to `url` (no `namespace` parameter) and opens namespace
    /// `namespace` with `options`.
    pub async fn connect_with(
        url: &str,
        namespace: &str,
        options: PostgresOptions,
    ) -> StoreResult<Self> {
        // A bad namespace is refused before anything connects.
        Sql::of(namespace)?;
        let mut config = tokio_postgres::Config::from_str(url).map_err(|e| {
            invalid(format!(
                "'{}' is not a PostgreSQL URL (postgres://USER@HOST:PORT/DB): {e}",
                acts_store::redacted_url(url)
            ))
        })?;
        config.connect_timeout(options.connect_timeout);
        if config.get_application_name().is_none() {
            config.application_name("acts");
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            // The connection given back last is the next one out (see
            // `PostgresOptions`).
            .queue_mode(QueueMode::Lifo)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.op_timeout))
            .create_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| invalid(format!("cannot set up a connection pool: {e}")))?;
        Self::open(pool, namespace, options.op_timeout).await
    }

    /// Namespace `namespace` of the same database, on this store's
    /// connections (a cluster's partitions), its table created on first use.
    pub async fn with_namespace(&self, namespace: &str) -> StoreResult<Self> {
        Self::open(self.pool.clone(), namespace, self.op_timeout).await
    }

    /// Namespace `namespace` on `pool`: its table created if missing and
    /// checked, the server's settings read.
    async fn open(pool: Pool, namespace: &str, op_timeout: Duration) -> StoreResult<Self> {
        let sql = Sql::of(namespace)?;
        let store = Self {
            reads: {
                let (pool, sql) = (pool.clone(), sql.clone());
                PointReads::start(move |keys: Vec<Vec<u8>>| {
                    let (pool, sql) = (pool.clone(), sql.clone());
                    async move { read_in_order(&pool, &sql, StoreOp::Get, &keys).await }
                })
            },
            pool,
            sql,
            namespace: namespace.to_owned(),
            settings: std::sync::Arc::default(),
            op_timeout,
        };
        store
            .timed(StoreOp::Open, async {
                let client = store.client(StoreOp::Open).await?;
                store.create_table(&client).await?;
                store.settings.refresh(&client).await
            })
            .await?;
        Ok(store)
    }

    /// The namespace (its table is `acts_kv_NAMESPACE`).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// How many statements this namespace's point reads have taken (reads
    /// asked at the same time share one; for tests and metrics).
    pub fn point_read_statements(&self) -> u64 {
        self.reads.as_ref().map_or(0, PointReads::batches)
    }

    /// The table of this namespace, quoted (for tests and tools).
    pub fn table(&self) -> &str {
        &self.sql.table
    }

    async fn client(&self, op: StoreOp) -> StoreResult<Object> {
        self.pool.get().await.map_err(|e| map_pool_err(op, e))
    }

    /// Runs `work` within the operation time limit.
    async fn timed<T>(
        &self,
        op: StoreOp,
        work: impl Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        match tokio::time::timeout(self.op_timeout, work).await {
            Ok(r) => r,
            Err(_) => Err(StoreError::new(
                BACKEND,
                op,
                ErrorKind::Timeout,
                format!(
                    "the PostgreSQL server did not answer within {:?}",
                    self.op_timeout
                ),
            )),
        }
    }

    /// Creates the namespace's table if it is missing, and checks that an
    /// existing one has the store's shape (a table of another shape is
    /// damage, not an empty store).
    async fn create_table(&self, client: &Object) -> StoreResult<()> {
        let created = client.batch_execute(&self.sql.create()).await;
        if let Err(e) = created {
            // Two stores creating the same table at once: one wins, the
            // other sees a unique violation on the catalog; the table is
            // there either way.
            if e.code() != Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) {
                return Err(map_err(StoreOp::Open, e));
            }
        }
        let rows = client
            .query(
                "SELECT column_name::text, data_type::text FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND table_name = $1",
                &[&self.sql.bare()],
            )
            .await
            .map_err(|e| map_err(StoreOp::Open, e))?;
        let mut columns: Vec<(String, String)> = rows
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
            .collect();
        columns.sort();
        let expected = [
            ("k".to_owned(), "bytea".to_owned()),
            ("v".to_owned(), "bytea".to_owned()),
        ];
        if columns != expected {
            return Err(StoreError::new(
                BACKEND,
                StoreOp::Open,
                ErrorKind::Corruption,
                format!(
                    "table {} is not an acts store (columns {columns:?}, expected k bytea, v bytea)",
                    self.sql.table
                ),
            ));
        }
        Ok(())
    }

    /// One statement of a scan: at most `limit` pairs of `range`.
    async fn scan_page(
        &self,
        client: &impl deadpool_postgres::GenericClient,
        range: &ScanRange,
        limit: usize,
    ) -> StoreResult<Vec<KvPair>> {
        let (text, lower, upper) = self.sql.scan(range);
        let bound = |b: &Bound<Vec<u8>>| match b {
            Bound::Included(k) | Bound::Excluded(k) => k.clone(),
            Bound::Unbounded => Vec::new(),
        };
        let (start, end) = (bound(&range.start), bound(&range.end));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(3);
        if lower {
            params.push(&start);
        }
        if upper {
            params.push(&end);
        }
        params.push(&limit);
        // One prepared statement per scan shape and connection.
        let stmt = client
            .prepare_cached(&text)
            .await
            .map_err(|e| map_err(StoreOp::Scan, e))?;
        let rows = client
            .query(&stmt, &params)
            .await
            .map_err(|e| map_err(StoreOp::Scan, e))?;
        rows.iter()
            .map(|r| {
                Ok(KvPair {
                    key: r.try_get(0).map_err(|e| map_err(StoreOp::Scan, e))?,
                    value: r.try_get(1).map_err(|e| map_err(StoreOp::Scan, e))?,
                })
            })
            .collect()
    }
}

#[async_trait]
impl KvStore for PostgresStore {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    async fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        validate_key(BACKEND, StoreOp::Get, key)?;
        self.timed(StoreOp::Get, async {
            if let Some(reads) = &self.reads
                && let Some(answer) = reads.get(key).await
            {
                return answer;
            }
            // The reader task is gone (its runtime ended): read alone.
            let mut found =
                read_in_order(&self.pool, &self.sql, StoreOp::Get, &[key.to_vec()]).await?;
            Ok(found.pop().flatten())
        })
        .await
    }

    async fn get_many(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        validate_keys(BACKEND, StoreOp::GetMany, keys)?;
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        self.timed(StoreOp::GetMany, async {
            read_in_order(&self.pool, &self.sql, StoreOp::GetMany, keys).await
        })
        .await
    }

    async fn batch(&self, ops: Vec<BatchOp>) -> StoreResult<()> {
        validate_batch(BACKEND, StoreOp::Batch, &ops)?;
        if ops.is_empty() {
            return Ok(());
        }
        self.timed(StoreOp::Batch, async {
            // One statement, its own transaction: one round trip.
            let client = self.client(StoreOp::Batch).await?;
            self.apply(&client, StoreOp::Batch, Writers::Others, ops)
                .await
        })
        .await
    }

    async fn batch_if(&self, conditions: Vec<Condition>, ops: Vec<BatchOp>) -> StoreResult<bool> {
        validate_conditional(BACKEND, &conditions, &ops)?;
        if conditions.is_empty() {
            return self
                .batch(ops)
                .await
                .map(|()| true)
                .map_err(|e| e.with_op(StoreOp::BatchIf));
        }
        self.timed(StoreOp::BatchIf, async {
            let op = StoreOp::BatchIf;
            let mut client = self.client(op).await?;
            let tx = client.transaction().await.map_err(|e| map_err(op, e))?;
            tx.batch_execute(&self.sql.lock_writers())
                .await
                .map_err(|e| map_err(op, e))?;
            let keys: Vec<Vec<u8>> = conditions.iter().map(|c| c.key.clone()).collect();
            let current = read_many(&tx, &self.sql, op, &keys).await?;
            if !conditions
                .iter()
                .all(|c| c.holds(current.get(&c.key).map(Vec::as_slice)))
            {
                // Nothing applied: the transaction rolls back when dropped.
                return Ok(false);
            }
            if !ops.is_empty() {
                self.apply(&tx, op, Writers::Locked, ops).await?;
            }
            tx.commit().await.map_err(|e| map_err(op, e))?;
            Ok(true)
        })
        .await
    }

    async fn scan(&self, range: ScanRange) -> StoreResult<Vec<KvPair>> {
        if range.is_empty() {
            return Ok(Vec::new());
        }
        self.timed(StoreOp::Scan, async {
            let mut client = self.client(StoreOp::Scan).await?;
            let wanted = range.limit_or_max();
            if wanted <= SCAN_PAGE {
                return self.scan_page(&client, &range, wanted).await;
            }
            // Page by page in one snapshot: every page reads the same state.
            let tx = client
                .build_transaction()
                .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await
                .map_err(|e| map_err(StoreOp::Scan, e))?;
            let mut out = Vec::new();
            let mut page = range.clone();
            loop {
                let n = SCAN_PAGE.min(wanted - out.len());
                let got = self.scan_page(&tx, &page, n).await?;
                let full = got.len() == n;
                if let Some(last) = got.last() {
                    let after = Bound::Excluded(last.key.clone());
                    if range.reverse {
                        page.end = after;
                    } else {
                        page.start = after;
                    }
                }
                out.extend(got);
                if !full || out.len() >= wanted {
                    break;
                }
            }
            tx.commit().await.map_err(|e| map_err(StoreOp::Scan, e))?;
            Ok(out)
        })
        .await
    }

    fn persistence(&self) -> Persistence {
        self.settings.persistence()
    }

    async fn health(&self) -> StoreResult<()> {
        self.timed(StoreOp::Health, async {
            let client = self.client(StoreOp::Health).await?;
            self.settings.refresh(&client).await?;
            self.settings.check_writable(&client).await
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::split_namespace;

    #[test]
    fn the_namespace_parameter_is_ours_the_rest_is_libpq() {
        assert_eq!(
            split_namespace("postgres://u@h:5/db?namespace=p1"),
            ("postgres://u@h:5/db".to_owned(), Some("p1".to_owned()))
        );
        assert_eq!(
            split_namespace("postgres://u@a:1,b:2/db?target_session_attrs=read-write&namespace=x"),
            (
                "postgres://u@a:1,b:2/db?target_session_attrs=read-write".to_owned(),
                Some("x".to_owned())
            )
        );
        assert_eq!(
            split_namespace("postgres://u@h/db"),
            ("postgres://u@h/db".to_owned(), None)
        );
    }
}
