//! Benchmarks for acts: criterion benches under `benches/` (start with
//! `benches/store.rs`); numbers and commands are recorded in `README.md`.
//!
//! The library holds what the harness binaries (`e2e`, `api_load`) share;
//! the benches themselves are separate targets.

/// The `p` quantile (0.0–1.0) of `sorted` latencies (0 when empty).
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}
