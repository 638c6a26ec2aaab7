//! acts-store-redb's integration tests, one binary: the KvStore
//! conformance suite with and without fsync, opening and durability.

mod common;

mod conformance_fsync;
mod conformance_nosync;
mod open_and_durability;
