//! Benchmarks for acts: criterion benches under `benches/` (start with
//! `benches/store.rs`); numbers and commands are recorded in `README.md`.
//!
//! This library target is empty on purpose: the benches are separate targets.
