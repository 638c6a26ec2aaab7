//! acts-cluster's integration tests, one binary (each file a module, the
//! helpers they share in `support/`): ownership of partitions, the catalog's
//! order, gates across nodes, bulk jobs and listings over a cluster, the
//! stream budget. `ACTS_TEST_CLUSTER_STORE=postgres` puts the nodes on
//! PostgreSQL (`scripts/test.sh` picks the suites by module).

mod support;

mod catalog_order;
mod cluster_bulk_jobs;
mod cluster_listings;
mod ownership;
mod step_gates;
mod stream_budget;
