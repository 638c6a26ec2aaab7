//! Opening a locked or corrupt database, or an impossible path, gives a
//! clear error.

use acts_store::{ErrorKind, KvStore, StoreOp};
use acts_store_rocksdb::{RocksOptions, RocksStore};

#[test]
fn a_database_open_elsewhere_is_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let _held = RocksStore::open(dir.path(), RocksOptions::default()).unwrap();
    let err = RocksStore::open(dir.path(), RocksOptions::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert_eq!(err.op(), StoreOp::Open);
    assert!(err.to_string().contains("already open"), "{err}");
}

#[test]
fn a_corrupt_database_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = RocksStore::open(dir.path(), RocksOptions::default()).unwrap();
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(store.put(b"k", b"v"))
            .unwrap();
    }
    // Truncate every MANIFEST: the database no longer knows its files.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("MANIFEST")
        {
            std::fs::write(&path, b"\x01\x02garbage").unwrap();
        }
    }
    let err = RocksStore::open(dir.path(), RocksOptions::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(!err.is_retryable());
}

#[test]
fn a_file_where_the_directory_should_be_is_invalid_input() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let err = RocksStore::open(&file, RocksOptions::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(
        err.to_string().contains("plain-file"),
        "names the path: {err}"
    );
}
