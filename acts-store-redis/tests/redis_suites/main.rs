//! acts-store-redis's integration tests, one binary: the KvStore
//! conformance suite on a private Redis and Redis Cluster, faults, the
//! settings read at open, the traffic of a commit.

mod cluster;
mod conformance;
mod faults;
mod sentinel;
mod settings;
mod traffic;
