//! # acts-store-redis: Redis backend, for stores shared by several services
//!
//! A [`KvStore`] on a Redis server ([`RedisStore::connect`]), on the
//! master a group of Redis Sentinels watches
//! ([`RedisStore::connect_sentinel`], followed through failovers), or on a
//! Redis Cluster ([`RedisStore::connect_cluster`]). Every key lives under
//! a *namespace*, so several engines (or test runs) share one server without
//! seeing each other's data.
//!
//! **Layering rule:** this crate depends only on `acts-store`, the `redis`
//! client and tokio. It knows nothing of workflows.
//!
//! ## Layout on the server
//!
//! For namespace `NS`:
//! - `acts:{NS}:v:<key>`: a string per pair, holding the value;
//! - `acts:{NS}:i`: a sorted set of every key (all scores 0), which Redis
//!   keeps in byte order. Scans read it with `ZRANGEBYLEX` /
//!   `ZREVRANGEBYLEX` and a `LIMIT`, so scans are ordered and paged exactly as
//!   on the other backends (never `SCAN`, whose order is a hash order).
//!
//! The `{NS}` braces are a Redis Cluster hash tag: every key of a namespace
//! maps to one cluster slot, which lets the multi-key scripts below run on a
//! cluster. It also means one namespace lives on one shard: a cluster scales
//! acts by giving different engines different namespaces, not by spreading one
//! namespace.
//!
//! ## Guarantees
//!
//! - A [`batch`](acts_store::KvStore::batch) is one Lua script: Redis runs it
//!   atomically, so values and the key index change together and no reader
//!   sees half a batch. The script checks the index before writing anything,
//!   so a damaged namespace fails the batch without applying part of it.
//! - A scan is one Lua script too (read the index, then the values), and a
//!   multi-read is one `MGET`: each reads one consistent state.
//! - **Durability is the server's.** `Ok` means the server applied the write
//!   in memory. Whether it survives a server crash depends on the server's
//!   persistence settings: with `appendonly yes` and `appendfsync always`, an
//!   acknowledged write is on disk; with `appendfsync everysec` (Redis's
//!   default when the AOF is on) up to about one second of acknowledged writes
//!   can be lost in a power failure; with RDB snapshots only, everything since
//!   the last snapshot can be lost. For a workflow store that must never lose
//!   an acknowledged transition, run Redis with `appendfsync always`.
//! - **Faults.** A dropped connection is re-established by the client's
//!   connection manager (on Sentinel, the master is looked up again). While the server is unreachable every call fails
//!   within [`RedisOptions::op_timeout`] with a retryable
//!   [`StoreError`] (`Unavailable` or `Timeout`);
//!   once the server is back, calls succeed again.
//!
//! ## Where to start reading
//!
//! [`RedisStore::connect`] (and `connect_sentinel`, `connect_cluster`),
//! then the `KvStore` impl; the two Lua scripts are in `scripts.rs`, the
//! connections in `conn.rs` and `sentinel.rs`, and errors are mapped in
//! `error.rs`. The `cluster` and `sentinel` test modules run the
//! conformance suite on a private 3 + 3 cluster and on a master with a
//! replica and three sentinels.

mod conn;
mod error;
mod scripts;
mod sentinel;
mod settings;

use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use acts_store::{
    BatchOp, Condition, ErrorKind, KvPair, KvStore, Persistence, PointReads, ScanRange, StoreError,
    StoreOp, StoreResult, validate_batch, validate_conditional, validate_key, validate_keys,
};
use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::conn::{Conn, Link};
use crate::error::{BACKEND, map_err};
use crate::settings::Watch;

/// Connection settings for [`RedisStore::connect_with`].
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Every call fails with [`ErrorKind::Timeout`] after this long.
    pub op_timeout: Duration,
    /// One attempt to open a connection gives up after this long.
    pub connect_timeout: Duration,
    /// How often the connection manager retries a reconnect before the
    /// waiting call fails (later calls start new attempts).
    pub reconnect_retries: usize,
    /// After each write, wait until this many replicas have it (`WAIT`);
    /// a write fewer replicas acknowledged within [`wait_timeout`](Self::wait_timeout)
    /// fails with [`ErrorKind::Unavailable`] — it is applied on the master
    /// but not acknowledged, because a failover could lose it. 0 (the
    /// default): acknowledged once the master applied it (Redis's
    /// asynchronous replication; see `docs/CLUSTER.md`).
    pub wait_replicas: u32,
    /// How long a write waits for its replicas (default 1 s).
    pub wait_timeout: Duration,
    /// Open (and keep writing to) a server that evicts keys when it is
    /// full (`maxmemory-policy` other than `noeviction`). Off by default:
    /// such a server silently drops acknowledged work, so the store
    /// refuses it (see `settings.rs`).
    pub allow_eviction: bool,
    /// How often the server's eviction policy and persistence are read
    /// again while the store is used (default 2 s).
    pub settings_interval: Duration,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            op_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(1),
            reconnect_retries: 2,
            wait_replicas: 0,
            wait_timeout: Duration::from_secs(1),
            allow_eviction: false,
            settings_interval: Duration::from_secs(2),
        }
    }
}

/// A [`KvStore`] on a Redis server or a Redis Cluster, under one
/// namespace. Cheap to clone (clones share the connection).
#[derive(Clone)]
pub struct RedisStore {
    conn: Conn,
    namespace: String,
    /// `acts:{NS}:i`
    index_key: Vec<u8>,
    /// `acts:{NS}:v:`
    value_prefix: Vec<u8>,
    op_timeout: Duration,
    /// Replicas every write waits for, and how long (`None`: no wait).
    wait: Option<(u32, Duration)>,
    /// The server's settings as last seen (shared by every namespace of
    /// this connection).
    watch: Arc<Watch>,
    /// This namespace's point reads, sent together (`None` outside a
    /// tokio runtime, and in the reader's own handle).
    reads: Option<PointReads>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to the server at `url` (`redis://HOST:PORT[/DB]`) and uses
    /// `namespace` for every key, with default [`RedisOptions`].
    pub async fn connect(url: &str, namespace: &str) -> StoreResult<Self> {
        Self::connect_with(url, namespace, RedisOptions::default()).await
    }

    /// Connects with explicit options.
    pub async fn connect_with(
        url: &str,
        namespace: &str,
        options: RedisOptions,
    ) -> StoreResult<Self> {
        let op = StoreOp::Open;
        check_namespace(namespace)?;
        let client = redis::Client::open(url).map_err(|e| {
            StoreError::new(
                BACKEND,
                op,
                ErrorKind::InvalidInput,
                format!(
                    "{} is not a Redis URL (expected redis://HOST:PORT): {e}",
                    acts_store::redacted_url(url)
                ),
            )
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(options.op_timeout))
            .set_number_of_retries(options.reconnect_retries)
            .set_max_delay(Duration::from_millis(200));
        let conn = tokio::time::timeout(
            options.op_timeout,
            ConnectionManager::new_with_config(client, config),
        )
        .await
        .map_err(|_| timeout_err(op, options.op_timeout))?
        .map_err(|e| map_err(op, e).context(acts_store::redacted_url(url)))?;
        tracing::debug!(url = %acts_store::redacted_url(url), namespace, "connected redis store");
        Self::on(Conn::new(Link::Single(conn)), namespace, &options)
            .await
            .map_err(|e| e.context(acts_store::redacted_url(url)))
    }

    /// Connects to the master named `master` that the Redis Sentinels at
    /// `sentinels` (`redis://HOST:PORT` each; one reachable sentinel is
    /// enough) watch, and uses `namespace` for every key. After a failover
    /// the store asks the sentinels again and writes to the promoted
    /// replica; a call made while the master fails over fails retryably.
    /// With [`RedisOptions::wait_replicas`], a write is acknowledged only
    /// once a replica has it, so a failover loses none.
    pub async fn connect_sentinel(
        sentinels: &[String],
        master: &str,
        namespace: &str,
        options: RedisOptions,
    ) -> StoreResult<Self> {
        let op = StoreOp::Open;
        check_namespace(namespace)?;
        let shown = format!(
            "master '{master}' of the sentinels {}",
            sentinels
                .iter()
                .map(|n| acts_store::redacted_url(n))
                .collect::<Vec<_>>()
                .join(",")
        );
        let link = tokio::time::timeout(
            options.op_timeout,
            sentinel::SentinelLink::connect(
                sentinels,
                master,
                options.connect_timeout,
                options.op_timeout,
            ),
        )
        .await
        .map_err(|_| timeout_err(op, options.op_timeout).context(&shown))?
        .map_err(|e| map_err(op, e).context(&shown))?;
        tracing::debug!(sentinels = %shown, namespace, "connected redis sentinel store");
        Self::on(Conn::new(Link::Sentinel(link)), namespace, &options)
            .await
            .map_err(|e| e.context(&shown))
    }

    /// Connects to the Redis Cluster that `nodes` (`redis://HOST:PORT`
    /// each; one reachable node is enough) belong to, and uses `namespace`
    /// for every key. The namespace's keys share one hash tag, so they live
    /// in one slot: every batch and scan is one single-slot script, atomic
    /// as on one server. Slot moves and failovers are followed by the
    /// client; a call made while a master fails over fails retryably.
    pub async fn connect_cluster(
        nodes: &[String],
        namespace: &str,
        options: RedisOptions,
    ) -> StoreResult<Self> {
        let op = StoreOp::Open;
        check_namespace(namespace)?;
        let shown = nodes
            .iter()
            .map(|n| acts_store::redacted_url(n))
            .collect::<Vec<_>>()
            .join(",");
        let client = redis::cluster::ClusterClient::builder(nodes.iter().map(String::as_str))
            .connection_timeout(options.connect_timeout)
            .response_timeout(options.op_timeout)
            .retries(u32::try_from(options.reconnect_retries).unwrap_or(u32::MAX))
            .build()
            .map_err(|e| {
                StoreError::new(
                    BACKEND,
                    op,
                    ErrorKind::InvalidInput,
                    format!("{shown} are not Redis Cluster node URLs (expected redis://HOST:PORT,...): {e}"),
                )
            })?;
        let conn = tokio::time::timeout(options.op_timeout, client.get_async_connection())
            .await
            .map_err(|_| timeout_err(op, options.op_timeout))?
            .map_err(|e| map_err(op, e).context(&shown))?;
        tracing::debug!(nodes = %shown, namespace, "connected redis cluster store");
        Self::on(Conn::new(Link::Cluster(conn)), namespace, &options)
            .await
            .map_err(|e| e.context(&shown))
    }

    /// The store over `conn`, once the server's settings are read (an
    /// evicting server is refused unless allowed) and followed.
    async fn on(conn: Conn, namespace: &str, options: &RedisOptions) -> StoreResult<Self> {
        let watch = Watch::open(&conn, options.allow_eviction, options.op_timeout).await?;
        watch.follow(conn.clone(), options.settings_interval, options.op_timeout);
        let tagged = format!("acts:{{{namespace}}}:");
        Ok(Self {
            conn,
            namespace: namespace.to_owned(),
            index_key: format!("{tagged}i").into_bytes(),
            value_prefix: format!("{tagged}v:").into_bytes(),
            op_timeout: options.op_timeout,
            wait: (options.wait_replicas > 0)
                .then_some((options.wait_replicas, options.wait_timeout)),
            watch,
            reads: None,
        }
        .with_point_reads())
    }

    /// This store with its own queue of point reads: `get`s asked at the
    /// same time go to the server as one `MGET` (a burst of starts reads
    /// thousands of keys in a few round trips, not one each).
    fn with_point_reads(mut self) -> Self {
        let mut raw = self.clone();
        raw.reads = None;
        self.reads = PointReads::start(move |keys: Vec<Vec<u8>>| {
            let raw = raw.clone();
            async move { raw.get_many(&keys).await }
        });
        self
    }

    /// The store of namespace `namespace` on the same server or cluster,
    /// sharing this store's connection (a cluster node opens the store of
    /// every partition this way: one connection, many namespaces).
    pub fn with_namespace(&self, namespace: &str) -> StoreResult<Self> {
        check_namespace(namespace)?;
        let mut other = self.clone();
        other.conn = self.conn.with_own_counts();
        let tagged = format!("acts:{{{namespace}}}:");
        other.namespace = namespace.to_owned();
        other.index_key = format!("{tagged}i").into_bytes();
        other.value_prefix = format!("{tagged}v:").into_bytes();
        Ok(other.with_point_reads())
    }

    /// The namespace every key of this store lives under.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The server key of the index of this namespace (for tools and tests).
    pub fn index_key(&self) -> &[u8] {
        &self.index_key
    }

    fn value_key(&self, key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.value_prefix.len() + key.len());
        k.extend_from_slice(&self.value_prefix);
        k.extend_from_slice(key);
        k
    }

    /// Runs one request with the store's time limit, mapping every failure.
    async fn run<T>(
        &self,
        op: StoreOp,
        request: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> StoreResult<T> {
        tokio::time::timeout(self.op_timeout, request)
            .await
            .map_err(|_| timeout_err(op, self.op_timeout))?
            .map_err(|e| map_err(op, e))
    }
}

/// A namespace is a hash tag's content: non-empty, no braces.
fn check_namespace(namespace: &str) -> StoreResult<()> {
    if namespace.is_empty() || namespace.contains(['{', '}']) {
        return Err(StoreError::new(
            BACKEND,
            StoreOp::Open,
            ErrorKind::InvalidInput,
            format!("namespace {namespace:?} must be non-empty and must not contain '{{' or '}}'"),
        ));
    }
    Ok(())
}

fn timeout_err(op: StoreOp, limit: Duration) -> StoreError {
    StoreError::new(
        BACKEND,
        op,
        ErrorKind::Timeout,
        format!("no answer from the Redis server within {limit:?}"),
    )
}

/// A `ZRANGEBYLEX` bound.
fn lex_bound(bound: &Bound<Vec<u8>>, unbounded: &[u8]) -> Vec<u8> {
    match bound {
        Bound::Included(k) => [b"[".as_slice(), k].concat(),
        Bound::Excluded(k) => [b"(".as_slice(), k].concat(),
        Bound::Unbounded => unbounded.to_vec(),
    }
}

impl RedisStore {
    /// Runs the batch script: `ops` applied if every condition holds, in
    /// one script on the server (nothing else runs between); `false` when
    /// a condition does not hold.
    async fn write(
        &self,
        op: StoreOp,
        conditions: &[Condition],
        ops: &[BatchOp],
    ) -> StoreResult<bool> {
        self.watch.check_writable(op)?;
        let mut invocation = scripts::batch().key(&self.index_key);
        invocation.arg(&self.value_prefix).arg(conditions.len());
        for c in conditions {
            match &c.value {
                Some(v) => invocation.arg("e").arg(&c.key).arg(v),
                None => invocation.arg("a").arg(&c.key).arg(""),
            };
        }
        for batch_op in ops {
            match batch_op {
                BatchOp::Put { key, value } => invocation.arg("p").arg(key).arg(value),
                BatchOp::Delete { key } => invocation.arg("d").arg(key).arg(""),
            };
        }
        let mut conn = self.conn.clone();
        let applied = self
            .run(op, invocation.invoke_async::<i64>(&mut conn))
            .await?;
        if applied >= 0
            && let Some((replicas, timeout)) = self.wait
        {
            self.wait_for_replicas(op, replicas, timeout).await?;
        }
        Ok(applied >= 0)
    }

    /// `WAIT replicas timeout` on the connection (the master) that just
    /// applied this namespace's write; fails unless enough replicas have
    /// it.
    async fn wait_for_replicas(
        &self,
        op: StoreOp,
        replicas: u32,
        timeout: Duration,
    ) -> StoreResult<()> {
        let millis = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let cmd = redis::cmd("WAIT").arg(replicas).arg(millis).clone();
        let acked: i64 = match &self.conn.link {
            Link::Single(_) | Link::Sentinel(_) => {
                let mut c = self.conn.clone();
                self.run(op, cmd.query_async(&mut c)).await?
            }
            Link::Cluster(c) => {
                use redis::cluster_routing::{
                    Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr,
                };
                // The master serving this namespace's slot: the node the
                // write went to.
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                    Route::with_slot(Slot::for_key(&self.index_key), SlotAddr::Master),
                ));
                let value = self.run(op, self.conn.route_command(c, cmd, route)).await?;
                redis::from_redis_value(value).map_err(|e| {
                    StoreError::new(
                        BACKEND,
                        op,
                        ErrorKind::Backend,
                        format!("WAIT answered something else than a count: {e}"),
                    )
                })?
            }
        };
        if acked < i64::from(replicas) {
            return Err(StoreError::new(
                BACKEND,
                op,
                ErrorKind::Unavailable,
                format!(
                    "the write reached {acked} of {replicas} replica(s) within {timeout:?} \
                     (wait_replicas): it is applied on the master but not acknowledged, since \
                     a failover could lose it; is every master's replica up?"
                ),
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl KvStore for RedisStore {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    async fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        let op = StoreOp::Get;
        validate_key(BACKEND, op, key)?;
        if let Some(reads) = &self.reads
            && let Some(answer) = reads.get(key).await
        {
            return answer.map_err(|e| e.with_op(op));
        }
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("GET").arg(self.value_key(key)).clone();
        self.run(op, cmd.query_async(&mut conn)).await
    }

    async fn get_many(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        let op = StoreOp::GetMany;
        validate_keys(BACKEND, op, keys)?;
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut cmd = redis::cmd("MGET");
        for key in keys {
            cmd.arg(self.value_key(key));
        }
        let mut conn = self.conn.clone();
        self.run(op, cmd.query_async(&mut conn)).await
    }

    async fn batch(&self, ops: Vec<BatchOp>) -> StoreResult<()> {
        let op = StoreOp::Batch;
        validate_batch(BACKEND, op, &ops)?;
        if ops.is_empty() {
            return Ok(());
        }
        self.write(op, &[], &ops).await.map(drop)
    }

    async fn batch_if(&self, conditions: Vec<Condition>, ops: Vec<BatchOp>) -> StoreResult<bool> {
        validate_conditional(BACKEND, &conditions, &ops)?;
        self.write(StoreOp::BatchIf, &conditions, &ops).await
    }

    async fn scan(&self, range: ScanRange) -> StoreResult<Vec<KvPair>> {
        let op = StoreOp::Scan;
        if range.is_empty() {
            return Ok(Vec::new());
        }
        let min = lex_bound(&range.start, b"-");
        let max = lex_bound(&range.end, b"+");
        let limit: i64 = range
            .limit
            .map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX));
        let mut invocation = scripts::scan().key(&self.index_key);
        invocation
            .arg(&self.value_prefix)
            .arg(min)
            .arg(max)
            .arg(limit)
            .arg(if range.reverse { "1" } else { "0" });
        let mut conn = self.conn.clone();
        let flat: Vec<Vec<u8>> = self.run(op, invocation.invoke_async(&mut conn)).await?;
        let mut pairs = Vec::with_capacity(flat.len() / 2);
        let mut items = flat.into_iter();
        while let (Some(key), Some(value)) = (items.next(), items.next()) {
            pairs.push(KvPair { key, value });
        }
        Ok(pairs)
    }

    fn persistence(&self) -> Persistence {
        self.watch.persistence()
    }

    /// Reads the server's settings again now: `Err` when it cannot be
    /// reached or evicts keys.
    fn io(&self) -> Option<acts_store::StoreIo> {
        Some(self.conn.io())
    }

    async fn health(&self) -> StoreResult<()> {
        self.watch.refresh(&self.conn, self.op_timeout).await?;
        self.watch.check_writable(StoreOp::Health)
    }
}
