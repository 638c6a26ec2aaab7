//! acts-store-postgres's integration tests, one binary (the helpers in
//! `support/`): the KvStore conformance suite on a private PostgreSQL,
//! faults, large writes, point reads, the pool.

mod support;

mod conformance;
mod faults;
mod large_writes;
mod point_reads;
mod pool;
