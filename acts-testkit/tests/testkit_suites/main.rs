//! acts-testkit's integration tests, one binary: the conformance suite on
//! the memory store, and the suite shown to fail on broken stores.

mod memory_conformance;
mod suite_can_fail;
