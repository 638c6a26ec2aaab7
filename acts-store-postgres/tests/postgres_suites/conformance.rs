//! `PostgresStore` runs the whole conformance suite against a private
//! PostgreSQL server (or `ACTS_TEST_POSTGRES_URL`). A location is a
//! namespace (a table), so "reopening" is connecting again to it.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use acts_store::{KvStore, StoreResult};
use acts_store_postgres::PostgresStore;
use acts_testkit::StoreFactory;
use acts_testkit::postgres_server::PostgresServer;
use async_trait::async_trait;

struct PostgresFactory {
    server: PostgresServer,
    run: u64,
    next: AtomicU64,
}

impl PostgresFactory {
    fn new() -> Self {
        let server = PostgresServer::shared_or_start().unwrap_or_else(|e| panic!("{e}"));
        // Distinct namespaces per run, in case the server is shared.
        let run = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64 % 1_000_000_000);
        Self {
            server,
            run,
            next: AtomicU64::new(0),
        }
    }
}

#[async_trait]
impl StoreFactory for PostgresFactory {
    fn new_location(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        format!("conf_{}_{}_{n}", std::process::id(), self.run)
    }

    async fn open(&self, location: &str) -> StoreResult<Arc<dyn KvStore>> {
        Ok(Arc::new(
            PostgresStore::connect(&self.server.url_of(location)).await?,
        ))
    }

    async fn damage(&self, location: &str) -> bool {
        // The values become text: not the store's shape any more.
        let store = PostgresStore::connect(&self.server.url_of(location))
            .await
            .expect("connect");
        let client = support::raw_client(self.server.url()).await;
        client
            .batch_execute(&format!(
                "ALTER TABLE {} ALTER COLUMN v TYPE text USING encode(v, 'hex')",
                store.table()
            ))
            .await
            .expect("ALTER TABLE");
        true
    }
}

acts_testkit::conformance_tests!(durable: PostgresFactory::new());
