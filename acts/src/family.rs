//! A family of stores: many namespaces on one shared backend — the
//! partitions and the metadata of a cluster (`docs/CLUSTER.md`).

use std::collections::HashMap;
use std::sync::Arc;

use acts_store::{KvStore, MemoryStore};
use parking_lot::Mutex;

use crate::OpenStoreError;

/// Stores that share one backend, each under its own namespace: a cluster
/// keeps its metadata and each partition in a member of one family. On
/// Redis (a server or a Redis Cluster) the members share one connection
/// and each member's keys one hash tag; `memory:` keeps the members in
/// this process (a single-node cluster, tests).
#[derive(Clone)]
pub struct StoreFamily {
    name: String,
    backend: Backend,
}

/// What makes the members of a [`StoreFamily::custom`] family.
type MemberMaker = Arc<dyn Fn(&str) -> Arc<dyn KvStore> + Send + Sync>;

#[derive(Clone)]
enum Backend {
    Memory(Arc<Mutex<HashMap<String, Arc<MemoryStore>>>>),
    Custom(MemberMaker),
    #[cfg(feature = "redis")]
    Redis(acts_store_redis::RedisStore),
    #[cfg(feature = "postgres")]
    Postgres(acts_store_postgres::PostgresStore),
}

impl std::fmt::Debug for StoreFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreFamily")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl StoreFamily {
    /// A family kept in this process's memory (members live as long as
    /// the family or a clone of it).
    pub fn memory(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            backend: Backend::Memory(Arc::default()),
        }
    }

    /// A family whose members `maker` makes, given each member's
    /// namespace (`NAME:SUFFIX`): stores that are not a backend of their
    /// own — a simulator's shared store as one node sees it (cut off,
    /// paused), say. Every call of `member` calls `maker`.
    pub fn custom(
        name: &str,
        maker: impl Fn(&str) -> Arc<dyn KvStore> + Send + Sync + 'static,
    ) -> Self {
        Self {
            name: name.to_owned(),
            backend: Backend::Custom(Arc::new(maker)),
        }
    }

    /// The family's name (the URL's namespace): every member's namespace
    /// starts with it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What an acknowledged write survives on the family's backend, as it
    /// is set up now.
    pub fn persistence(&self) -> acts_store::Persistence {
        match &self.backend {
            Backend::Memory(_) => MemoryStore::new().persistence(),
            Backend::Custom(maker) => maker(&format!("{}:meta", self.name)).persistence(),
            #[cfg(feature = "redis")]
            Backend::Redis(base) => base.persistence(),
            #[cfg(feature = "postgres")]
            Backend::Postgres(base) => base.persistence(),
        }
    }

    /// The traffic of the family's own handle so far (the connection's
    /// settings checks; each member counts its own), if its store counts
    /// it ([`KvStore::io`]: Redis).
    pub fn io(&self) -> Option<acts_store::StoreIo> {
        match &self.backend {
            Backend::Memory(_) | Backend::Custom(_) => None,
            #[cfg(feature = "redis")]
            Backend::Redis(base) => base.io(),
            #[cfg(feature = "postgres")]
            Backend::Postgres(base) => base.io(),
        }
    }

    /// The member `suffix` (namespace `NAME:SUFFIX`), opened on the
    /// family's connection (on PostgreSQL its table is created on first
    /// use).
    pub async fn member(&self, suffix: &str) -> Result<Arc<dyn KvStore>, OpenStoreError> {
        let namespace = format!("{}:{suffix}", self.name);
        match &self.backend {
            Backend::Memory(members) => {
                let store = members
                    .lock()
                    .entry(namespace)
                    .or_insert_with(|| Arc::new(MemoryStore::new()))
                    .clone();
                Ok(store)
            }
            Backend::Custom(maker) => Ok(maker(&namespace)),
            #[cfg(feature = "redis")]
            Backend::Redis(base) => Ok(Arc::new(base.with_namespace(&namespace)?)),
            #[cfg(feature = "postgres")]
            Backend::Postgres(base) => Ok(Arc::new(base.with_namespace(&namespace).await?)),
        }
    }
}

/// Opens the family a cluster URL names: `redis://HOST:PORT/NAME`,
/// `redis+sentinel://HOST:PORT,.../MASTER/NAME`,
/// `redis+cluster://HOST:PORT,.../NAME` (the `redis` feature),
/// `postgres://USER@HOST:PORT/DB?namespace=NAME` (the `postgres` feature;
/// each member a table), or
/// `memory:` (one process only). Embedded stores (redb, RocksDB) belong
/// to one process and cannot hold a cluster.
pub async fn open_store_family(url: &str) -> Result<StoreFamily, OpenStoreError> {
    if url == "memory:" || url == "memory" {
        return Ok(StoreFamily::memory("acts"));
    }
    if url.starts_with("redb:") || url.starts_with("rocksdb:") {
        return Err(OpenStoreError::BadOption {
            url: acts_store::redacted_url(url),
            message: "a cluster needs a store every node reaches: redis://HOST:PORT/NAME, \
                      redis+sentinel://HOST:PORT,.../MASTER/NAME, \
                      redis+cluster://HOST:PORT,.../NAME or postgres://... (an embedded file belongs to one process)"
                .into(),
        });
    }
    if url.starts_with("redis://")
        || url.starts_with("redis+sentinel://")
        || url.starts_with("redis+cluster://")
    {
        return open_redis_family(url).await;
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return open_postgres_family(url).await;
    }
    Err(OpenStoreError::UnknownScheme(acts_store::redacted_url(url)))
}

#[cfg(feature = "postgres")]
async fn open_postgres_family(url: &str) -> Result<StoreFamily, OpenStoreError> {
    let base = acts_store_postgres::PostgresStore::connect(url).await?;
    Ok(StoreFamily {
        name: base.namespace().to_owned(),
        backend: Backend::Postgres(base),
    })
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres_family(url: &str) -> Result<StoreFamily, OpenStoreError> {
    Err(OpenStoreError::FeatureDisabled {
        url: acts_store::redacted_url(url),
        feature: "postgres",
    })
}

#[cfg(feature = "redis")]
async fn open_redis_family(url: &str) -> Result<StoreFamily, OpenStoreError> {
    let base = crate::open_redis_store(url).await?;
    Ok(StoreFamily {
        name: base.namespace().to_owned(),
        backend: Backend::Redis(base),
    })
}

#[cfg(not(feature = "redis"))]
async fn open_redis_family(url: &str) -> Result<StoreFamily, OpenStoreError> {
    Err(OpenStoreError::FeatureDisabled {
        url: acts_store::redacted_url(url),
        feature: "redis",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_members_are_shared_by_name_and_apart_by_suffix() {
        let family = open_store_family("memory:").await.expect("memory family");
        let a = family.member("p0").await.expect("member");
        a.put(b"k", b"v").await.expect("put");
        let again = family.clone().member("p0").await.expect("member");
        assert_eq!(
            again.get(b"k").await.expect("get").as_deref(),
            Some(&b"v"[..])
        );
        let other = family.member("p1").await.expect("member");
        assert_eq!(other.get(b"k").await.expect("get"), None);
        let err = open_store_family("redb:x.db").await.expect_err("refused");
        assert!(err.to_string().contains("every node reaches"), "{err}");
    }
}
