//! The redb [`StoreFactory`] shared by the conformance test files.
#![allow(dead_code)] // each test file uses a part of it

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use acts_store::{KvStore, StoreResult};
use acts_store_redb::{Durability, RedbOptions, RedbStore};
use acts_testkit::StoreFactory;
use async_trait::async_trait;

/// Opens redb files in a temporary directory that lives as long as the
/// factory; a location is a file path.
pub struct RedbFactory {
    dir: tempfile::TempDir,
    durability: Durability,
    next: AtomicU64,
}

impl RedbFactory {
    pub fn new(durability: Durability) -> Self {
        Self {
            dir: tempfile::tempdir().expect("a temporary directory for the test databases"),
            durability,
            next: AtomicU64::new(0),
        }
    }
}

#[async_trait]
impl StoreFactory for RedbFactory {
    fn new_location(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        self.dir
            .path()
            .join(format!("store-{n}.redb"))
            .display()
            .to_string()
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
