//! # acts: an embeddable, durable workflow engine
//!
//! Deploy YAML workflows (steps, branches, acts), start processes, answer
//! their interrupt requests from your application, and hear what they do on
//! channels — with every acknowledged change durable on the store you
//! choose.
//!
//! This is the facade crate applications depend on: it re-exports, by
//! name, what an embedder of the engine (`acts-core`) needs — and nothing
//! of its insides (the writer, the scheduler's process, the rows) — and
//! opens a store from a URL ([`open_store`], [`open_store_family`]), with
//! one cargo feature per backend: `redb` (default, embedded), `rocksdb`,
//! `redis`, `postgres`. The list of what it exports is kept in `public-api.txt` and
//! checked by `tests/public_api.rs`: a new export is a decision, not an
//! accident.
//!
//! **Layering rule:** depends on `acts-core`, `acts-store` and, behind
//! features, the backend crates; only applications and `acts-cli` depend
//! on it. Start reading at [`Engine`] and [`Executor`].
//!
//! ## Quickstart
//!
//! ```
//! use acts::{ChannelOptions, Engine, Vars};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = acts::open_store("memory:").await?;
//! let engine = Engine::builder().store(store).start().await?;
//! let exec = engine.executor();
//! exec.model().deploy_yaml(r#"
//! id: approval
//! ver: "1"
//! steps:
//!   - id: ask
//!     uses: acts.core.irq
//!     params: { key: approve }
//!   - id: record
//!     uses: acts.transform.code
//!     params: "return { approved_by: who }"
//! "#).await?;
//!
//! // Hear the interrupt request, answer it.
//! let mut messages = engine.channel(ChannelOptions::default()).subscribe();
//! let proc = exec.proc().start("approval", Vars::new()).await?;
//! let irq = loop {
//!     let m = messages.recv().await.expect("engine running");
//!     if m.key.as_deref() == Some("approve") && m.state == "created" { break m; }
//! };
//! let mut answer = Vars::new();
//! answer.insert("who".into(), "ada".into());
//! exec.act().complete(&proc.pid, &irq.tid, answer).await?;
//!
//! // The process ends; read its outputs.
//! loop {
//!     let m = messages.recv().await.expect("engine running");
//!     if m.r#type == "workflow" && m.state == "completed" { break; }
//! }
//! let outputs = exec.proc().get(&proc.pid).await?.outputs;
//! assert_eq!(outputs["approved_by"], "ada");
//! engine.close().await;
//! # Ok(()) }
//! ```

use std::sync::Arc;

// What an embedder needs, by name (nothing else of acts-core is public
// here; `tests/public_api.rs` keeps the list in `public-api.txt`).
pub use acts_core::durable::{COMMIT_MICROS_BOUNDS, GROUP_SIZE_BOUNDS, WriterConfig};
pub use acts_core::engine::{
    ActOps, ActPackage, BulkAction, BulkItem, BulkJob, BulkOps, BulkOutcome, BulkPreview,
    BulkRequest, BulkState, CURSOR_PATTERN, Cache, Census, Channel, ChannelOps, ChannelOptions,
    DEFAULT_BULK_RATE, DeliveryInfo, DeliveryOps, DeliveryQuery, DeliveryState, Engine,
    EngineBuilder, EngineConfig, EngineError, EngineStats, Executor, GateCourier, GateKeyUse,
    GateReply, GateRoute, KeyUse, LeaseConfig, LeaseInfo, MAX_BULK_RATE, MAX_BULK_REASON, MAX_PAGE,
    MigrationPlan, MigrationReport, ModelInfo, ModelOps, ModelVersionInfo, PackageContext,
    PackageFailure, PackageInfo, PackageOps, Page, PidFilter, Principal, ProcInfo, ProcOps,
    ProcessMigration, ProcessQuery, ROLE_ADMIN, ROLE_OPERATOR, RuntimeOps, STORE_FORMAT,
    SealOptions, SealedData, SealedEntry, SpanExport, StorageOps, TASK_CURSOR_PATTERN, TaskInfo,
    TaskMoveInfo, TaskOps, TaskQuery, TriggerInfo, TriggerOps, USER_ACTIONS, VarFilter, WaitingFor,
    encode_cursor, hex_bytes, whole_numbers_as_integers,
};
pub use acts_core::model::{
    Act, Branch, Concurrency, ModelError, ModelLimits, Rate, Step, Trigger, UnknownKey, Vars,
    Workflow, lint,
};
pub use acts_core::package::{Catalog, PackageDefinition, RunAs};
pub use acts_core::scheduler::trace::{SpanSink, TRACEPARENT_KEY, TaskSpan, TraceContext};
pub use acts_core::scheduler::{
    Action, ActionError, Message, MessageState, MessageType, RunLimits, TaskError, TaskEvent,
    TaskState, UnknownAction,
};
pub use acts_core::script::ScriptLimits;
pub use acts_core::time::{Clock, ManualClock, SystemClock};
pub use acts_core::tree::long_id;
pub use acts_store::backup::backup_advice;
pub use acts_store::{
    BackupInfo, ErrorKind as StoreErrorKind, KvStore, MemoryStore, Persistence, StoreError,
    redacted_url,
};

mod census;
mod family;
pub use census::{CensusError, census_of};
pub use family::{StoreFamily, open_store_family};

/// The README's code, compiled and run as a doc test.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// Why [`open_store`] could not open a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenStoreError {
    /// The URL names no known store (the URL as shown: its password, if
    /// any, replaced by `***`, as in every variant).
    #[error(
        "unknown store URL '{0}': use memory:, redb:PATH, rocksdb:PATH, redis://HOST:PORT/NAMESPACE, redis+sentinel://HOST:PORT,.../MASTER/NAMESPACE, redis+cluster://HOST:PORT,.../NAMESPACE or postgres://USER@HOST:PORT/DB?namespace=NAME"
    )]
    UnknownScheme(String),
    /// The store's backend was not compiled in.
    #[error(
        "store URL '{url}' needs the '{feature}' feature of the acts crate (enable it in Cargo.toml)"
    )]
    FeatureDisabled {
        /// The URL.
        url: String,
        /// The cargo feature to enable.
        feature: &'static str,
    },
    /// A URL option that is not understood.
    #[error("store URL '{url}': {message}")]
    BadOption {
        /// The URL.
        url: String,
        /// What is wrong.
        message: String,
    },
    /// The backend refused to open.
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[cfg(any(feature = "redb", feature = "rocksdb"))]
/// Splits `PATH?key=value&...` into the path and its options.
fn path_and_options(rest: &str) -> (&str, Vec<(&str, &str)>) {
    match rest.split_once('?') {
        Some((path, query)) => (
            path,
            query
                .split('&')
                .filter(|kv| !kv.is_empty())
                .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
                .collect(),
        ),
        None => (rest, Vec::new()),
    }
}

#[cfg(any(feature = "redb", feature = "rocksdb"))]
/// Reads a boolean URL option (`true`/`false`, `1`/`0`).
fn flag(url: &str, key: &str, value: &str) -> Result<bool, OpenStoreError> {
    match value {
        "true" | "1" | "on" => Ok(true),
        "false" | "0" | "off" => Ok(false),
        _ => Err(OpenStoreError::BadOption {
            url: acts_store::redacted_url(url),
            message: format!("option '{key}' must be true or false, got '{value}'"),
        }),
    }
}

#[cfg(any(feature = "redb", feature = "rocksdb", feature = "redis"))]
fn unknown_option(url: &str, key: &str, known: &str) -> OpenStoreError {
    OpenStoreError::BadOption {
        url: acts_store::redacted_url(url),
        message: format!("unknown option '{key}' (known: {known})"),
    }
}

/// Opens the store a URL names:
///
/// - `memory:` — in memory (lost when the process exits);
/// - `redb:PATH` — the embedded redb file at PATH (feature `redb`, the
///   default); `?fsync=false` skips the fsync of every commit;
///   `?cache_mb=N` sets redb's page cache to N MiB (default 64 MiB);
/// - `rocksdb:PATH` — a RocksDB directory (feature `rocksdb`);
///   `?sync=false` skips the WAL sync;
/// - `redis://HOST:PORT/NAMESPACE` — keys under `NAMESPACE` on a Redis
///   server (feature `redis`); a server that evicts keys
///   (`maxmemory-policy` other than `noeviction`) is refused unless
///   `?allow_eviction=true`;
/// - `redis+sentinel://HOST:PORT,HOST:PORT,.../MASTER/NAMESPACE` — keys
///   under `NAMESPACE` on the master named `MASTER` that the Redis
///   Sentinels at the addresses watch, followed through failovers (feature
///   `redis`);
/// - `redis+cluster://HOST:PORT,HOST:PORT,.../NAMESPACE` — keys under
///   `NAMESPACE` on a Redis Cluster (any reachable node finds the rest; the
///   namespace lives in one slot; feature `redis`).
///
/// The Redis URLs take `?wait_replicas=N` (a write is acknowledged once N
/// replicas have it), `wait_ms=MS` and `allow_eviction=true`.
pub async fn open_store(url: &str) -> Result<Arc<dyn KvStore>, OpenStoreError> {
    if url == "memory:" || url == "memory" {
        return Ok(Arc::new(MemoryStore::new()));
    }
    if let Some(rest) = url.strip_prefix("redb:") {
        return open_redb(url, rest);
    }
    if let Some(rest) = url.strip_prefix("rocksdb:") {
        return open_rocksdb(url, rest);
    }
    if url.starts_with("redis://")
        || url.starts_with("redis+cluster://")
        || url.starts_with("redis+sentinel://")
    {
        return open_redis(url).await;
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return open_postgres(url).await;
    }
    Err(OpenStoreError::UnknownScheme(acts_store::redacted_url(url)))
}

#[cfg(feature = "postgres")]
async fn open_postgres(url: &str) -> Result<Arc<dyn KvStore>, OpenStoreError> {
    Ok(Arc::new(
        acts_store_postgres::PostgresStore::connect(url).await?,
    ))
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(url: &str) -> Result<Arc<dyn KvStore>, OpenStoreError> {
    Err(OpenStoreError::FeatureDisabled {
        url: acts_store::redacted_url(url),
        feature: "postgres",
    })
}

#[cfg(feature = "redb")]
fn open_redb(url: &str, rest: &str) -> Result<Arc<dyn KvStore>, OpenStoreError> {
    use acts_store_redb::{Durability, RedbOptions, RedbStore};
    let (path, options) = path_and_options(rest);
    let mut o = RedbOptions::default();
    for (k, v) in options {
        match k {
            "fsync" => {
                o = o.with_durability(if flag(url, k, v)? {
                    Durability::Immediate
                } else {
                    Durability::None
                })
            }
            "cache_mb" => {
                let mb: usize = v.parse().ok().filter(|mb| *mb > 0).ok_or_else(|| {
                    OpenStoreError::BadOption {
                        url: acts_store::redacted_url(url),
                        message: format!(
                            "cache_mb must be a whole number of MiB above 0, not '{v}'"
                        ),
                    }
                })?;
                o.cache_size = Some(mb.saturating_mul(1 << 20));
            }
            _ => return Err(unknown_option(url, k, "fsync, cache_mb")),
        }
    }
    Ok(Arc::new(RedbStore::open(path, o)?))
}

#[cfg(not(feature = "redb"))]
fn open_redb(url: &str, _rest: &str) -> Result<Arc<dyn KvStore>, OpenStoreError> {
    Err(OpenStoreError::FeatureDisabled {
        url: acts_store::redacted_url(url),
        feature: "redb",
    })
}

#[cfg(feature = "rocksdb")]
fn open_rocksdb(url: &str, rest: &str) -> Result<Arc<dyn KvStore>, OpenStoreError> {
    use acts_store_rocksdb::{RocksOptions, RocksStore};
    let (path, options) = path_and_options(rest);
    let mut o = RocksOptions::default();
    for (k, v) in options {
        match k {
            "sync" => o = o.with_sync(flag(url, k, v)?),
            _ => return Err(unknown_option(url, k, "sync")),
        }
    }
    Ok(Arc::new(RocksStore::open(path, o)?))
}

#[cfg(not(feature = "rocksdb"))]
fn open_rocksdb(url: &str, _rest: &str) -> Result<Arc<dyn KvStore>, OpenStoreError> {
    Err(OpenStoreError::FeatureDisabled {
        url: acts_store::redacted_url(url),
        feature: "rocksdb",
    })
}

#[cfg(feature = "redis")]
async fn open_redis(url: &str) -> Result<Arc<dyn KvStore>, OpenStoreError> {
    Ok(Arc::new(open_redis_store(url).await?))
}

/// How a Redis URL reaches the server.
#[cfg(feature = "redis")]
#[derive(Clone, Copy, PartialEq, Eq)]
enum RedisShape {
    Single,
    Sentinel,
    Cluster,
}

/// The Redis store a `redis://`, `redis+sentinel://` or `redis+cluster://`
/// URL names.
#[cfg(feature = "redis")]
async fn open_redis_store(url: &str) -> Result<acts_store_redis::RedisStore, OpenStoreError> {
    let (shape, rest) = if let Some(rest) = url.strip_prefix("redis+cluster://") {
        (RedisShape::Cluster, rest)
    } else if let Some(rest) = url.strip_prefix("redis+sentinel://") {
        (RedisShape::Sentinel, rest)
    } else {
        (RedisShape::Single, &url["redis://".len()..])
    };
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let mut options = acts_store_redis::RedisOptions::default();
    for (k, v) in query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
    {
        match k {
            "wait_replicas" => {
                options.wait_replicas = v.parse().map_err(|_| OpenStoreError::BadOption {
                    url: acts_store::redacted_url(url),
                    message: format!("wait_replicas must be a whole number of replicas, not '{v}'"),
                })?;
            }
            "wait_ms" => {
                let ms: u64 = v.parse().ok().filter(|ms| *ms > 0).ok_or_else(|| {
                    OpenStoreError::BadOption {
                        url: acts_store::redacted_url(url),
                        message: format!("wait_ms must be a whole number of ms above 0, not '{v}'"),
                    }
                })?;
                options.wait_timeout = std::time::Duration::from_millis(ms);
            }
            "allow_eviction" => options.allow_eviction = flag(url, k, v)?,
            _ => {
                return Err(unknown_option(
                    url,
                    k,
                    "wait_replicas, wait_ms, allow_eviction",
                ));
            }
        }
    }
    let bad = |message: &str| OpenStoreError::BadOption {
        url: acts_store::redacted_url(url),
        message: message.into(),
    };
    let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
    // `USER:PASSWORD@` before the addresses is every address's.
    let (auth, addr_list) = match hosts.rsplit_once('@') {
        Some((auth, list)) => (format!("{auth}@"), list),
        None => (String::new(), hosts),
    };
    let addrs: Vec<String> = addr_list
        .split(',')
        .filter(|h| !h.is_empty())
        .map(|h| format!("redis://{auth}{h}/"))
        .collect();
    match shape {
        RedisShape::Single => {
            if path.is_empty() || path.contains('/') {
                return Err(bad(
                    "name one namespace after the address: redis://HOST:PORT/NAMESPACE",
                ));
            }
            let server = format!("redis://{hosts}/");
            Ok(acts_store_redis::RedisStore::connect_with(&server, path, options).await?)
        }
        RedisShape::Sentinel => {
            let (master, namespace) = path.split_once('/').unwrap_or(("", ""));
            if addrs.is_empty()
                || master.is_empty()
                || namespace.is_empty()
                || namespace.contains('/')
            {
                return Err(bad(
                    "name the sentinels, the master's name and one namespace: \
                     redis+sentinel://HOST:PORT,HOST:PORT/MASTER/NAMESPACE",
                ));
            }
            Ok(
                acts_store_redis::RedisStore::connect_sentinel(&addrs, master, namespace, options)
                    .await?,
            )
        }
        RedisShape::Cluster => {
            if path.is_empty() || path.contains('/') {
                return Err(bad(
                    "name one namespace after the nodes: redis+cluster://HOST:PORT,HOST:PORT/NAMESPACE",
                ));
            }
            if addrs.is_empty() {
                return Err(bad(
                    "name at least one node: redis+cluster://HOST:PORT,.../NAMESPACE",
                ));
            }
            Ok(acts_store_redis::RedisStore::connect_cluster(&addrs, path, options).await?)
        }
    }
}

#[cfg(not(feature = "redis"))]
async fn open_redis(url: &str) -> Result<Arc<dyn KvStore>, OpenStoreError> {
    Err(OpenStoreError::FeatureDisabled {
        url: acts_store::redacted_url(url),
        feature: "redis",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn urls_open_stores_or_say_what_is_wrong() {
        let mem = open_store("memory:").await.unwrap();
        mem.put(b"k", b"v").await.unwrap();
        assert_eq!(mem.get(b"k").await.unwrap().as_deref(), Some(&b"v"[..]));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        let url = format!("redb:{}?fsync=false", path.display());
        let redb = open_store(&url).await.unwrap();
        redb.put(b"k", b"v").await.unwrap();
        drop(redb);
        let again = open_store(&format!("redb:{}", path.display()))
            .await
            .unwrap();
        assert_eq!(again.get(b"k").await.unwrap().as_deref(), Some(&b"v"[..]));
        drop(again);
        let small = open_store(&format!("redb:{}?cache_mb=8&fsync=false", path.display()))
            .await
            .unwrap();
        assert_eq!(small.get(b"k").await.unwrap().as_deref(), Some(&b"v"[..]));
        drop(small);
        for bad in ["0", "lots", ""] {
            let err = open_store(&format!("redb:{}?cache_mb={bad}", path.display()))
                .await
                .err()
                .unwrap()
                .to_string();
            assert!(err.contains("cache_mb must be"), "{err}");
        }

        let err = open_store("mysql://x").await.err().unwrap().to_string();
        assert!(err.contains("memory:, redb:PATH"), "{err}");
        // PostgreSQL: a server that is not there (or, without the feature,
        // the feature to enable) — never "unknown".
        let err = open_store("postgres://acts@127.0.0.1:1/acts")
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("unreachable") || err.contains("'postgres' feature"),
            "{err}"
        );
        let err = open_store(&format!("redb:{}?fsync=maybe", path.display()))
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("fsync"), "{err}");
        let err = open_store(&format!("redb:{}?speed=max", path.display()))
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("unknown option 'speed'"), "{err}");
    }

    #[cfg(feature = "redis")]
    #[tokio::test]
    async fn a_sentinel_url_names_the_sentinels_the_master_and_a_namespace() {
        for bad in [
            "redis+sentinel://127.0.0.1:1/ns",
            "redis+sentinel:///acts/ns",
            "redis+sentinel://127.0.0.1:1/acts/",
            "redis+sentinel://127.0.0.1:1/acts/ns/more",
        ] {
            let err = open_store(bad).await.err().unwrap().to_string();
            assert!(
                err.contains("redis+sentinel://HOST:PORT,HOST:PORT/MASTER/NAMESPACE"),
                "{bad}: {err}"
            );
        }
        let err = open_store("redis+sentinel://127.0.0.1:1/acts/ns?speed=max")
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("unknown option 'speed'"), "{err}");
        // No sentinel there: the error names the master and the sentinels.
        let err = open_store("redis+sentinel://127.0.0.1:1,127.0.0.1:2/acts/ns")
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains(
                "master 'acts' of the sentinels redis://127.0.0.1:1/,redis://127.0.0.1:2/"
            ),
            "{err}"
        );
    }

    #[cfg(not(feature = "rocksdb"))]
    #[tokio::test]
    async fn a_disabled_backend_names_its_feature() {
        let err = open_store("rocksdb:/tmp/x")
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("'rocksdb' feature"), "{err}");
    }
}
