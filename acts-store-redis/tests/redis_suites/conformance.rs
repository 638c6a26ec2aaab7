//! `RedisStore` runs the whole conformance suite against a private
//! `redis-server` (or `ACTS_TEST_REDIS_URL`). A location is a namespace, so
//! "reopening" is connecting again to the same namespace.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use acts_store::{KvStore, StoreResult};
use acts_store_redis::RedisStore;
use acts_testkit::StoreFactory;
use acts_testkit::redis_server::RedisServer;
use async_trait::async_trait;

struct RedisFactory {
    server: RedisServer,
    run: u64,
    next: AtomicU64,
}

impl RedisFactory {
    fn new() -> Self {
        let server = RedisServer::shared_or_start().unwrap_or_else(|e| panic!("{e}"));
        // Distinct namespaces per run, in case the server is shared.
        let run = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Self {
            server,
            run,
            next: AtomicU64::new(0),
        }
    }
}

#[async_trait]
impl StoreFactory for RedisFactory {
    fn new_location(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        format!("conformance-{}-{}-{n}", std::process::id(), self.run)
    }

    async fn open(&self, location: &str) -> StoreResult<Arc<dyn KvStore>> {
        Ok(Arc::new(
            RedisStore::connect(self.server.url(), location).await?,
        ))
    }

    async fn damage(&self, location: &str) -> bool {
        // Replace the namespace's key index with a plain string.
        let store = RedisStore::connect(self.server.url(), location)
            .await
            .expect("connect");
        let client = redis::Client::open(self.server.url()).expect("url");
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        let _: () = redis::cmd("SET")
            .arg(store.index_key())
            .arg("not a sorted set")
            .query_async(&mut conn)
            .await
            .expect("SET");
        true
    }
}

acts_testkit::conformance_tests!(durable: RedisFactory::new());
