//! The redb [`StoreFactory`] shared by the conformance test files.
#![allow(dead_code)] // each test file uses a part of it

use std::sync::Arc;

use acts_store::{KvStore, StoreResult};
use acts_store_redb::{Durability, RedbOptions, RedbStore};
use acts_testkit::{StoreFactory, TempLocations};
use async_trait::async_trait;

/// Opens redb files in a temporary directory that lives as long as the
/// factory; a location is a file path.
pub struct RedbFactory {
    locations: TempLocations,
    durability: Durability,
}

impl RedbFactory {
    pub fn new(durability: Durability) -> Self {
        Self {
            locations: TempLocations::new(),
            durability,
        }
    }
}

#[async_trait]
impl StoreFactory for RedbFactory {
    fn new_location(&self) -> String {
        self.locations.next("store.redb")
    }

    async fn open(&self, location: &str) -> StoreResult<Arc<dyn KvStore>> {
        let options = RedbOptions::default().with_durability(self.durability);
        Ok(Arc::new(RedbStore::open(location, options)?))
    }

    async fn damage(&self, location: &str) -> bool {
        // Garbage over the header: redb can no longer recognise the file.
        let mut bytes = std::fs::read(location).expect("the database file exists");
        for (i, b) in bytes.iter_mut().take(4096).enumerate() {
            *b = (i * 7 + 13) as u8;
        }
        std::fs::write(location, bytes).expect("overwrite the database file");
        true
    }
}
