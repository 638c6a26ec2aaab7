//! acts-core's integration tests, one binary (each file a module; the
//! helpers they share in `common/`): the engine end to end on every
//! backend (`ACTS_TEST_STORE`), the layout rules, the property and fault
//! tests. One binary links once and runs every test on the same threads;
//! `scripts/test.sh` picks the engine suites for the other backends by
//! module (`cargo test --test core_suites -- engine:: residency:: …`).

mod common;

mod access;
mod bulk_jobs;
mod cache_seed;
mod chain_outputs;
mod collection;
mod concurrency_keys;
mod crash_matrix;
mod delivery_trigger;
mod ended_process;
mod engine;
mod engine_faults;
mod engine_features;
mod engine_guarantees;
mod engine_guards;
mod fencing;
mod fuzz;
mod gate_homes;
mod gates;
mod layout;
mod linear_cost;
mod listings;
mod migration;
mod model_roundtrip;
mod model_validation;
mod operator_controls;
mod process;
mod process_property;
mod queries;
mod reference_behaviour;
mod residency;
mod restart_cost;
mod retry;
mod script;
mod script_isolation;
mod script_values;
mod tree;
mod versions;
mod writer;
