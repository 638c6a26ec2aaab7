//! The conformance suite must catch broken stores: each flaw below is one a
//! real backend could have, and the suite must report it in the cases that
//! exist to catch it (and must pass the same store without the flaw).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use acts_store::{BatchOp, Condition, KvPair, KvStore, MemoryStore, ScanRange, StoreResult};
use acts_testkit::StoreFactory;
use acts_testkit::conformance::run_all;
use async_trait::async_trait;
use parking_lot::Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    None,
    /// Drops the last op of every batch of more than one op.
    DropsLastOpOfBatch,
    /// Applies a batch one op at a time, letting readers in between.
    TearsBatches,
    /// Ignores `reverse` on scans.
    IgnoresReverse,
    /// Reopening a location gives an empty store (nothing was persisted).
    ForgetsOnReopen,
    /// A damaged location opens as an empty store (errors become "empty").
    DamageLooksEmpty,
    /// A conditional batch applies whether or not its conditions hold.
    IgnoresConditions,
    /// A conditional batch checks, lets other writers in, then writes.
    RacyConditions,
}

#[derive(Debug)]
struct Flawed {
    inner: MemoryStore,
    flaw: Flaw,
    /// How many conditional batches have checked their conditions
    /// (`RacyConditions`).
    checked: AtomicUsize,
}

/// Most yields a racy conditional batch waits for another writer to check
/// too (a single writer waits this long, then writes).
const PARTNER_YIELDS: usize = 1_000;

#[async_trait]
impl KvStore for Flawed {
    fn backend(&self) -> &'static str {
        "flawed"
    }

    async fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        self.inner.get(key).await
    }

    async fn get_many(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        self.inner.get_many(keys).await
    }

    async fn batch(&self, mut ops: Vec<BatchOp>) -> StoreResult<()> {
        match self.flaw {
            Flaw::DropsLastOpOfBatch if ops.len() > 1 => {
                ops.pop();
                self.inner.batch(ops).await
            }
            Flaw::TearsBatches if ops.len() > 1 => {
                acts_store::validate_batch("flawed", acts_store::StoreOp::Batch, &ops)?;
                for op in ops {
                    self.inner.batch(vec![op]).await?;
                    tokio::task::yield_now().await;
                }
                Ok(())
            }
            _ => self.inner.batch(ops).await,
        }
    }

    async fn batch_if(&self, conditions: Vec<Condition>, ops: Vec<BatchOp>) -> StoreResult<bool> {
        match self.flaw {
            Flaw::IgnoresConditions => {
                self.inner.batch(ops).await?;
                Ok(true)
            }
            Flaw::RacyConditions => {
                for c in &conditions {
                    if !c.holds(self.inner.get(&c.key).await?.as_deref()) {
                        return Ok(false);
                    }
                }
                // Let another writer check before this one writes: the race
                // happens whenever writers are concurrent, not only when the
                // scheduler happens to interleave them (a loaded machine runs
                // them one after another).
                let me = self.checked.fetch_add(1, Ordering::SeqCst);
                for _ in 0..PARTNER_YIELDS {
                    if self.checked.load(Ordering::SeqCst) > me + 1 {
                        break;
                    }
                    tokio::task::yield_now().await;
                }
                self.inner.batch(ops).await?;
                Ok(true)
            }
            _ => self.inner.batch_if(conditions, ops).await,
        }
    }

    async fn scan(&self, mut range: ScanRange) -> StoreResult<Vec<KvPair>> {
        if self.flaw == Flaw::IgnoresReverse {
            range.reverse = false;
        }
        self.inner.scan(range).await
    }
}

struct FlawedFactory {
    flaw: Flaw,
    stores: Mutex<HashMap<String, Arc<Flawed>>>,
    damaged: Mutex<Vec<String>>,
}

impl FlawedFactory {
    fn new(flaw: Flaw) -> Self {
        Self {
            flaw,
            stores: Mutex::default(),
            damaged: Mutex::default(),
        }
    }

    fn new_store(&self) -> Arc<Flawed> {
        Arc::new(Flawed {
            inner: MemoryStore::new(),
            flaw: self.flaw,
            checked: AtomicUsize::new(0),
        })
    }
}

#[async_trait]
impl StoreFactory for FlawedFactory {
    fn new_location(&self) -> String {
        format!("loc-{}", self.stores.lock().len())
    }

    async fn open(&self, location: &str) -> StoreResult<Arc<dyn KvStore>> {
        let reopen_forgets = self.flaw == Flaw::ForgetsOnReopen;
        let damaged = self.damaged.lock().iter().any(|d| d == location);
        let mut stores = self.stores.lock();
        if damaged {
            if self.flaw == Flaw::DamageLooksEmpty {
                return Ok(self.new_store());
            }
            return Err(acts_store::StoreError::new(
                "flawed",
                acts_store::StoreOp::Open,
                acts_store::ErrorKind::Corruption,
                "damaged",
            ));
        }
        if reopen_forgets || !stores.contains_key(location) {
            stores.insert(location.to_owned(), self.new_store());
        }
        Ok(stores[location].clone())
    }

    async fn damage(&self, location: &str) -> bool {
        self.damaged.lock().push(location.to_owned());
        true
    }
}

/// The names of the cases that failed.
fn failing_cases(flaw: Flaw) -> Vec<&'static str> {
    run_all(FlawedFactory::new(flaw), true)
        .into_iter()
        .filter(|(_, result)| result.is_err())
        .map(|(name, _)| name)
        .collect()
}

#[test]
fn the_unflawed_store_passes_every_case() {
    assert_eq!(failing_cases(Flaw::None), Vec::<&str>::new());
}

#[test]
fn dropping_the_last_op_of_a_batch_is_caught() {
    let failed = failing_cases(Flaw::DropsLastOpOfBatch);
    for case in ["batch_applies_in_order", "model_based_random_ops"] {
        assert!(
            failed.contains(&case),
            "{case} missed the flaw; failed: {failed:?}"
        );
    }
}

#[test]
fn torn_batches_are_caught() {
    let failed = failing_cases(Flaw::TearsBatches);
    assert!(
        failed.contains(&"batches_are_atomic_to_concurrent_readers"),
        "failed: {failed:?}"
    );
}

#[test]
fn ignoring_reverse_is_caught() {
    let failed = failing_cases(Flaw::IgnoresReverse);
    for case in [
        "scan_bounds_limits_and_direction",
        "scan_prefix_boundaries",
        "model_based_random_ops",
    ] {
        assert!(
            failed.contains(&case),
            "{case} missed the flaw; failed: {failed:?}"
        );
    }
}

#[test]
fn forgetting_data_on_reopen_is_caught() {
    let failed = failing_cases(Flaw::ForgetsOnReopen);
    assert!(
        failed.contains(&"reopen_keeps_exactly_the_committed_data"),
        "failed: {failed:?}"
    );
}

#[test]
fn damage_that_looks_empty_is_caught() {
    assert_eq!(
        failing_cases(Flaw::DamageLooksEmpty),
        vec!["damaged_store_is_an_error_not_empty"]
    );
}

#[test]
fn ignoring_conditions_is_caught() {
    let failed = failing_cases(Flaw::IgnoresConditions);
    assert!(
        failed.contains(&"conditional_batch_applies_only_when_its_conditions_hold"),
        "failed: {failed:?}"
    );
}

#[test]
fn a_check_apart_from_its_write_is_caught() {
    assert_eq!(
        failing_cases(Flaw::RacyConditions),
        vec!["conditional_batches_fence_concurrent_writers"]
    );
}
