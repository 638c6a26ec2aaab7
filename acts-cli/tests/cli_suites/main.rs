//! acts-cli's integration tests, one binary (each file a module, the
//! helpers they share in `support/`; fixtures in `tests/fixtures/`): the
//! shipped `acts` binary as users run it — commands, `acts serve`, clusters
//! on private Redis Clusters (feature `redis`), PostgreSQL failover and
//! backups, store formats. A suite is picked by module: `cargo test -p
//! acts-cli --features redis --test cli_suites -- cluster_nodes::`.

mod support;

mod backups;
mod bulk;
mod cli;
mod cluster_grpc;
mod cluster_keys;
mod cluster_nodes;
mod concurrency;
mod full_disk;
mod grpc_channel;
mod local_access;
mod logs;
mod moving;
mod operations_doc;
mod otel;
mod postgres_backup;
mod postgres_failover;
mod redis_sentinel_failover;
mod redis_settings;
mod scripting;
mod secrets;
mod serve;
mod store_formats;
mod stream_budget;
