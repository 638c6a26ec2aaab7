//! [`GroupCommitWriter`]: one ordered queue of write batches per engine;
//! batches that arrive while a commit is in flight are merged into the next
//! backend transaction, so one fsync serves many transitions.
//!
//! There is no writer task to wake. The caller that finds the writer idle
//! becomes the *leader*: it takes the queued batches as one group and
//! starts the backend commit itself. A commit that completes at once (an
//! in-memory store) is finished inline — no hand-off between tasks, which
//! is most of a transition's latency on a busy runtime. A commit that has
//! to wait (a file store's fsync) is moved into a task of its own, which
//! finishes it, answers its group, and leads on while batches are queued.
//! Either way the commit never depends on the caller's future staying
//! alive: dropping a `write` future only stops its caller from hearing the
//! outcome.
//!
//! May use: `writer_stats`.

mod batch;
mod group;

use std::sync::Arc;
use std::time::Duration;

use acts_store::{Condition, KvStore};
use tokio::sync::oneshot;

pub use batch::{WriteBatch, WriteError, WriteOutcome, WriterConfig};

use crate::durable::writer_stats::WriterStats;
use group::{Request, Shared, lead, lead_inline};

/// How long a follower waits on its thread for an inline leader before it
/// yields to the runtime.
const FOLLOW_SPIN: Duration = Duration::from_micros(200);

/// The engine's single ordered writer (see the module docs).
///
/// Ordering: batches commit in the order `write` was called; a group is one
/// atomic backend batch whose ops keep that order, so a later write to a key
/// wins. [`flush`](Self::flush) resolves once everything queued before it has
/// been committed (or has failed). Nothing is acknowledged before its group
/// is durable.
#[derive(Clone)]
pub struct GroupCommitWriter {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for GroupCommitWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommitWriter").finish_non_exhaustive()
    }
}

impl GroupCommitWriter {
    /// A writer over `store` (commits that wait are finished on the current
    /// tokio runtime).
    pub fn start(store: Arc<dyn KvStore>, config: WriterConfig) -> Self {
        Self {
            shared: Arc::new(Shared::new(store, config)),
        }
    }

    /// Makes every later commit conditional on `condition` (a key holding
    /// the epoch this node owns the store at): a commit the store refuses
    /// on it fails with [`WriteError::Fenced`], and so does every write
    /// after it. `None`: unconditional commits.
    pub fn set_fence(&self, condition: Option<Condition>) {
        let mut f = self.shared.fence.lock();
        f.condition = condition;
        f.broken = None;
    }

    /// Why the fence stopped holding, once the store refused a commit on
    /// it (`None` while it holds or there is none).
    pub fn fenced(&self) -> Option<String> {
        self.shared.fence.lock().broken.clone()
    }

    /// Why the last commit failed, while no commit has succeeded since.
    pub fn failing(&self) -> Option<String> {
        self.shared.failing.lock().clone()
    }

    /// Queues `batch` and waits until it is committed (or skipped, or
    /// failed). Waits for room when the queue is full.
    pub async fn write(&self, batch: WriteBatch) -> Result<WriteOutcome, WriteError> {
        if let Some(why) = self.fenced() {
            return Err(WriteError::Fenced(why));
        }
        let permit = self
            .shared
            .room
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| WriteError::Closed)?;
        let (done, mut rx) = oneshot::channel();
        self.enqueue(Request::Write {
            batch,
            done,
            _permit: permit,
        })?;
        // Led inline by another caller: its commit is a matter of
        // microseconds, so wait here rather than yield (a woken task would
        // queue behind every runnable one).
        let spin_until = std::time::Instant::now() + FOLLOW_SPIN;
        while self
            .shared
            .inline
            .load(std::sync::atomic::Ordering::Acquire)
            && std::time::Instant::now() < spin_until
        {
            match rx.try_recv() {
                Ok(r) => return r,
                Err(oneshot::error::TryRecvError::Closed) => return Err(WriteError::Closed),
                Err(oneshot::error::TryRecvError::Empty) => std::hint::spin_loop(),
            }
        }
        rx.await.unwrap_or(Err(WriteError::Closed))
    }

    /// Resolves once every batch queued before this call is settled.
    pub async fn flush(&self) -> Result<(), WriteError> {
        let (done, rx) = oneshot::channel();
        self.enqueue(Request::Flush { done })?;
        rx.await.map_err(|_| WriteError::Closed)
    }

    /// Commits everything queued before it, then releases the writer's
    /// handle on the store (so a file store can be reopened). Later writes
    /// fail with [`WriteError::Closed`].
    pub async fn close(&self) {
        let _ = self.flush().await;
        self.shared.room.close();
        let leftovers = {
            let mut q = self.shared.queue.lock();
            q.store = None;
            std::mem::take(&mut q.requests)
        };
        for r in leftovers {
            match r {
                Request::Write { done, .. } => {
                    let _ = done.send(Err(WriteError::Closed));
                }
                Request::Flush { done } => {
                    let _ = done.send(());
                }
            }
        }
    }

    /// What this writer has committed so far.
    pub fn stats(&self) -> WriterStats {
        self.shared.stats.snapshot()
    }

    /// How many requests wait in the queue (not yet taken into a group).
    pub fn queued(&self) -> usize {
        self.shared.queue.lock().requests.len()
    }

    /// The current epoch: an instance created now stamps its batches with
    /// it ([`WriteBatch::born`]).
    pub fn epoch(&self) -> u64 {
        self.shared.epoch.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Marks process `pid` removed: the batches of instances born before
    /// now, queued or written later, are skipped; instances born from now
    /// on (the pid used again) write as usual.
    pub fn mark_removed(&self, pid: &str) {
        let mut removed = self.shared.removed.lock();
        let epoch = self
            .shared
            .epoch
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel)
            + 1;
        removed.insert(pid.to_owned(), epoch);
    }

    /// Forgets a removal: every batch of `pid` is applied again.
    pub fn forget_removed(&self, pid: &str) {
        self.shared.removed.lock().remove(pid);
    }

    /// Queues `r`; leads the queue if nobody does.
    fn enqueue(&self, r: Request) -> Result<(), WriteError> {
        {
            let mut q = self.shared.queue.lock();
            if q.store.is_none() {
                return Err(WriteError::Closed);
            }
            q.requests.push_back(r);
            if q.leading {
                return Ok(());
            }
            q.leading = true;
        }
        if self.shared.config.max_commit_delay.is_zero() {
            lead_inline(self.shared.clone());
        } else {
            // Waiting for more batches takes time: lead from a task.
            tokio::spawn(lead(self.shared.clone()));
        }
        Ok(())
    }
}
