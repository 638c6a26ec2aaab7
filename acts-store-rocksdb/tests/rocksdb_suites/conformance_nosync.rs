//! `RocksStore` without WAL sync runs the whole conformance suite too: a
//! clean close keeps everything, so reopen sees all committed data.

use std::sync::Arc;

use acts_store::{KvStore, StoreResult};
use acts_store_rocksdb::{RocksOptions, RocksStore};
use acts_testkit::{StoreFactory, TempLocations};
use async_trait::async_trait;

struct NoSyncFactory {
    locations: TempLocations,
}

#[async_trait]
impl StoreFactory for NoSyncFactory {
    fn new_location(&self) -> String {
        self.locations.next("db")
    }

    async fn open(&self, location: &str) -> StoreResult<Arc<dyn KvStore>> {
        let options = RocksOptions {
            block_cache_bytes: 1 << 20,
            sync: false,
            ..RocksOptions::default()
        };
        Ok(Arc::new(RocksStore::open(location, options)?))
    }

    async fn damage(&self, location: &str) -> bool {
        std::fs::write(format!("{location}/CURRENT"), b"garbage").expect("overwrite CURRENT");
        true
    }
}

acts_testkit::conformance_tests!(durable: NoSyncFactory {
    locations: TempLocations::new()
});
