//! The `KvStore` conformance suite: one set of cases every backend runs from
//! its own tests, so all backends behave identically under the contract.
//!
//! A backend describes how to get stores with a [`StoreFactory`], then calls
//! [`conformance_tests!`](crate::conformance_tests) in a test file, which
//! writes one `#[test]` per case:
//!
//! ```text
//! acts_testkit::conformance_tests!(durable: MyFactory::new());
//! ```
//!
//! Each case returns a [`CaseResult`] instead of panicking so the suite itself
//! can be tested: `tests/suite_can_fail.rs` runs it against deliberately
//! broken stores and checks that it notices.
//!
//! May use: nothing else of the testkit (the suite stands on the store
//! contract alone).

/// Fails the case with a formatted message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(CaseFailure(format!($($msg)+)));
        }
    };
}

/// Fails the case unless `left == right`, showing both and the context.
macro_rules! ensure_eq {
    ($left:expr, $right:expr, $($ctx:tt)+) => {{
        let (left, right) = (&$left, &$right);
        if left != right {
            let mut msg = format!(
                "{}: expected {:?}, got {:?}",
                format!($($ctx)+),
                right,
                left
            );
            if msg.len() > 4000 {
                let cut = (0..=4000).rev().find(|i| msg.is_char_boundary(*i)).unwrap_or(0);
                msg.truncate(cut);
                msg.push_str("…");
            }
            return Err(CaseFailure(msg));
        }
    }};
}

mod case;
mod cases;
mod fencing;
mod heavy;
mod model;

pub use case::{Case, CaseFailure, CaseResult, Env, StoreFactory};

use std::collections::HashMap;
use std::sync::Arc;

use acts_store::{KvStore, MemoryStore, StoreResult};
use async_trait::async_trait;
use parking_lot::Mutex;

/// Every case of the suite.
pub fn cases() -> Vec<Case> {
    let mut all = cases::ALL.to_vec();
    all.extend_from_slice(fencing::ALL);
    all.push(Case {
        name: "model_based_random_ops",
        durable_only: false,
        run: model::model_based_random_ops,
    });
    all
}

/// Runs the named case against `factory`; panics with the failure (this is
/// what the generated `#[test]`s call).
pub fn run_case(factory: impl StoreFactory, name: &str) {
    let case = cases()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("conformance: no case named {name}"));
    let env = Env::new(Arc::new(factory));
    if let Err(failure) = (case.run)(&env) {
        panic!("conformance case {name} failed: {failure}");
    }
}

/// Runs every case (the durable ones only if `durable`) and returns each
/// case's outcome; used to test the suite itself.
pub fn run_all(factory: impl StoreFactory, durable: bool) -> Vec<(&'static str, CaseResult)> {
    let env = Env::new(Arc::new(factory));
    cases()
        .into_iter()
        .filter(|c| durable || !c.durable_only)
        .map(|c| (c.name, (c.run)(&env)))
        .collect()
}

/// Numbered locations in a temporary directory that lives as long as the
/// value: what file- and directory-based backends' factories need.
#[derive(Debug)]
pub struct TempLocations {
    dir: tempfile::TempDir,
    next: std::sync::atomic::AtomicU64,
}

impl TempLocations {
    /// A new, empty temporary directory.
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap_or_else(|e| {
                panic!("conformance: cannot create a temporary directory: {e}")
            }),
            next: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// A new path in the directory, `<stem>-<n>`.
    pub fn next(&self, stem: &str) -> String {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.dir
            .path()
            .join(format!("{stem}-{n}"))
            .display()
            .to_string()
    }
}

impl Default for TempLocations {
    fn default() -> Self {
        Self::new()
    }
}

/// A [`StoreFactory`] for [`MemoryStore`]: a location is a name in a map, so
/// "reopening" returns the same store. Not durable.
#[derive(Debug, Default)]
pub struct MemoryFactory {
    stores: Mutex<HashMap<String, Arc<MemoryStore>>>,
    next: std::sync::atomic::AtomicU64,
}

impl MemoryFactory {
    /// A factory with no stores yet.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl StoreFactory for MemoryFactory {
    fn new_location(&self) -> String {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        format!("memory-{n}")
    }

    async fn open(&self, location: &str) -> StoreResult<Arc<dyn KvStore>> {
        let store = self
            .stores
            .lock()
            .entry(location.to_owned())
            .or_default()
            .clone();
        Ok(store)
    }
}

/// Writes one `#[test]` per conformance case, in a module named
/// `conformance`, for the factory expression given (evaluated once per test).
///
/// - `conformance_tests!(MemoryFactory::new())`: the cases for any store.
/// - `conformance_tests!(durable: RedbFactory::new())`: also the cases that
///   reopen a location and damage stored data.
#[macro_export]
macro_rules! conformance_tests {
    (durable: $factory:expr) => {
        $crate::conformance_tests!(@common $factory;
            reopen_keeps_exactly_the_committed_data,
            damaged_store_is_an_error_not_empty
        );
    };
    ($factory:expr) => {
        $crate::conformance_tests!(@common $factory;);
    };
    (@common $factory:expr; $($extra:ident),*) => {
        $crate::conformance_tests!(@cases $factory;
            point_reads_and_writes,
            get_many_reads_in_order,
            batch_applies_in_order,
            scan_bounds_limits_and_direction,
            scan_prefix_boundaries,
            large_values_round_trip,
            oversized_input_is_rejected_and_changes_nothing,
            batches_are_atomic_to_concurrent_readers,
            concurrent_writers_all_land,
            conditional_batch_applies_only_when_its_conditions_hold,
            conditional_batches_fence_concurrent_writers,
            model_based_random_ops
            $(, $extra)*
        );
    };
    (@cases $factory:expr; $($name:ident),* $(,)?) => {
        mod conformance {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                fn $name() {
                    $crate::conformance::run_case($factory, stringify!($name));
                }
            )*
        }
    };
}
