//! `RocksStore` (WAL synced on every write) runs the whole conformance
//! suite, reopen and damage cases included.

use std::sync::Arc;

use acts_store::{KvStore, StoreResult};
use acts_store_rocksdb::{RocksOptions, RocksStore};
use acts_testkit::{StoreFactory, TempLocations};
use async_trait::async_trait;

/// Opens databases in a temporary directory; a location is a directory.
struct RocksFactory {
    locations: TempLocations,
}

#[async_trait]
impl StoreFactory for RocksFactory {
    fn new_location(&self) -> String {
        self.locations.next("db")
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

acts_testkit::conformance_tests!(durable: RocksFactory {
    locations: TempLocations::new()
});
