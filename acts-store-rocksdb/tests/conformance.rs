//! `RocksStore` (WAL synced on every write) runs the whole conformance
//! suite, reopen and damage cases included.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use acts_store::{KvStore, StoreResult};
use acts_store_rocksdb::{RocksOptions, RocksStore};
use acts_testkit::StoreFactory;
use async_trait::async_trait;

/// Opens databases in a temporary directory; a location is a directory.
struct RocksFactory {
    dir: tempfile::TempDir,
    next: AtomicU64,
}

impl RocksFactory {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("a temporary directory for the test databases"),
            next: AtomicU64::new(0),
        }
    }
}

#[async_trait]
impl StoreFactory for RocksFactory {
    fn new_location(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        self.dir
            .path()
            .join(format!("db-{n}"))
            .display()
            .to_string()
    }

    async fn open(&self, location: &str) -> StoreResult<Arc<dyn KvStore>> {
        // A small cache: the suite opens many databases.
        let options = RocksOptions {
            block_cache_bytes: 1 << 20,
            ..RocksOptions::default()
        };
        Ok(Arc::new(RocksStore::open(location, options)?))
    }

    async fn damage(&self, location: &str) -> bool {
        // CURRENT names the live MANIFEST; garbage there makes the database
        // unreadable.
        std::fs::write(format!("{location}/CURRENT"), b"garbage").expect("overwrite CURRENT");
        true
    }
}

acts_testkit::conformance_tests!(durable: RocksFactory::new());
