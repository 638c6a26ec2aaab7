//! acts-store-rocksdb's integration tests, one binary: the KvStore
//! conformance suite with and without a synced WAL, errors at open.

mod conformance;
mod conformance_nosync;
mod open_errors;
