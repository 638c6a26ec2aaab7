//! Which bulk jobs run in this engine now, and how one is told to stop:
//! at most one runner per job ([`BulkRuns::claim`]); a cancel signals the
//! runner and waits for it to let go ([`BulkRuns::stop`]). What a job did
//! is in its rows; this is only who works on it.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::watch;

use crate::engine::persist::bulk_rows::BulkCounts;

type Runs = Arc<Mutex<HashMap<String, Run>>>;

/// One job held here: how to stop it, and its counts so far (ahead of
/// its row, which is written once per page).
struct Run {
    stop: Arc<watch::Sender<bool>>,
    counts: Option<BulkCounts>,
}

/// The bulk jobs being worked on in this engine.
#[derive(Default)]
pub(crate) struct BulkRuns {
    runs: Runs,
}

impl BulkRuns {
    /// Claims job `id` for the caller (a runner, or a cancel that finds no
    /// runner); `None` while someone else holds it.
    pub(crate) fn claim(&self, id: &str) -> Option<BulkClaim> {
        let mut runs = self.runs.lock();
        if runs.contains_key(id) {
            return None;
        }
        let (tx, stop) = watch::channel(false);
        let tx = Arc::new(tx);
        let run = Run {
            stop: tx.clone(),
            counts: None,
        };
        runs.insert(id.to_owned(), run);
        Some(BulkClaim {
            runs: self.runs.clone(),
            id: id.to_owned(),
            tx,
            stop,
        })
    }

    /// Tells the holder of job `id` to stop; `Some` (ended when the holder
    /// lets go) if one holds it.
    pub(crate) fn stop(&self, id: &str) -> Option<watch::Receiver<bool>> {
        let tx = self.runs.lock().get(id).map(|r| r.stop.clone())?;
        let rx = tx.subscribe();
        tx.send_replace(true);
        Some(rx)
    }

    /// Whether job `id` is held here now.
    pub(crate) fn is_held(&self, id: &str) -> bool {
        self.runs.lock().contains_key(id)
    }

    /// The counts of job `id` so far, if a runner here published them.
    pub(crate) fn counts(&self, id: &str) -> Option<BulkCounts> {
        self.runs.lock().get(id).and_then(|r| r.counts)
    }
}

/// A hold on one job; let go when dropped.
pub(crate) struct BulkClaim {
    runs: Runs,
    id: String,
    tx: Arc<watch::Sender<bool>>,
    stop: watch::Receiver<bool>,
}

impl BulkClaim {
    /// Whether the holder was told to stop.
    pub(crate) fn stopped(&self) -> bool {
        *self.stop.borrow()
    }

    /// Publishes the job's counts so far.
    pub(crate) fn publish(&self, counts: BulkCounts) {
        if let Some(run) = self.runs.lock().get_mut(&self.id) {
            run.counts = Some(counts);
        }
    }

    /// Waits until the holder is told to stop.
    pub(crate) async fn until_stopped(&self) {
        let mut stop = self.stop.clone();
        // The sender lives as long as this claim: an error cannot happen.
        let _ = stop.wait_for(|s| *s).await;
    }
}

impl Drop for BulkClaim {
    fn drop(&mut self) {
        let mut runs = self.runs.lock();
        if runs
            .get(&self.id)
            .is_some_and(|r| Arc::ptr_eq(&r.stop, &self.tx))
        {
            runs.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_holder_per_job_and_a_stop_reaches_it() {
        let runs = BulkRuns::default();
        let claim = runs.claim("j").unwrap();
        assert!(runs.claim("j").is_none());
        assert!(runs.is_held("j"));
        assert!(!claim.stopped());
        assert_eq!(runs.counts("j"), None);
        let counts = BulkCounts {
            done: 2,
            ..Default::default()
        };
        claim.publish(counts);
        assert_eq!(runs.counts("j"), Some(counts));
        let mut ended = runs.stop("j").unwrap();
        assert!(claim.stopped());
        claim.until_stopped().await;
        drop(claim);
        // The receiver sees the stop, then the holder gone.
        assert!(ended.changed().await.is_ok());
        assert!(ended.changed().await.is_err());
        assert!(!runs.is_held("j"));
        assert_eq!(runs.counts("j"), None);
        assert!(runs.stop("j").is_none());
        assert!(runs.claim("j").is_some());
    }
}
