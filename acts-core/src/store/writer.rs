//! [`GroupCommitWriter`]: one ordered queue of write batches per engine;
//! batches that arrive while a commit is in flight are merged into the next
//! backend transaction, so one fsync serves many transitions.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use acts_store::{BatchOp, KvStore, StoreError};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};

/// Settings of a [`GroupCommitWriter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterConfig {
    /// Most ops merged into one backend transaction (a single batch larger
    /// than this is committed alone, never split).
    pub max_batch_ops: usize,
    /// How long the writer waits for more batches before committing a group
    /// that is not full. Zero: commit as soon as the previous commit is done
    /// (batches still merge while a commit is in flight).
    pub max_commit_delay: Duration,
    /// Batches that may wait in the queue; beyond it `write` waits for room
    /// (back-pressure), it never fails.
    pub queue_capacity: usize,
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            max_batch_ops: 4096,
            max_commit_delay: Duration::ZERO,
            queue_capacity: 8192,
        }
    }
}

/// One transition's writes, applied atomically with the others of its group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteBatch {
    /// The process the writes belong to; a batch of a removed process is
    /// skipped. `None` for writes that belong to no process.
    pub owner: Option<String>,
    /// The writes, in order.
    pub ops: Vec<BatchOp>,
}

/// What happened to a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Committed: durable to the store's durability setting.
    Committed,
    /// Not applied because its process was removed (no resurrection).
    Skipped,
}

/// Why a batch was not committed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WriteError {
    /// The backend transaction carrying the batch failed; nothing of it was
    /// applied. Every batch of that transaction gets the same error.
    #[error("commit of {batches} batch(es) failed: {source}")]
    Commit {
        /// How many batches the failed transaction carried.
        batches: usize,
        /// The store's error.
        source: Arc<StoreError>,
    },
    /// The writer was shut down.
    #[error("the store writer is closed")]
    Closed,
}

enum Request {
    Write {
        batch: WriteBatch,
        done: oneshot::Sender<Result<WriteOutcome, WriteError>>,
    },
    Flush {
        done: oneshot::Sender<()>,
    },
    Close {
        done: oneshot::Sender<()>,
    },
}

/// The engine's single ordered writer (see the module docs).
///
/// Ordering: batches commit in the order `write` was called; a group is one
/// atomic backend batch whose ops keep that order, so a later write to a key
/// wins. [`flush`](Self::flush) resolves once everything queued before it has
/// been committed (or has failed). Nothing is acknowledged before its group
/// is durable.
#[derive(Clone)]
pub struct GroupCommitWriter {
    tx: mpsc::Sender<Request>,
    removed: Arc<Mutex<HashSet<String>>>,
}

impl std::fmt::Debug for GroupCommitWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommitWriter").finish_non_exhaustive()
    }
}

impl GroupCommitWriter {
    /// Starts the writer's task on the current tokio runtime.
    pub fn start(store: Arc<dyn KvStore>, config: WriterConfig) -> Self {
        let (tx, rx) = mpsc::channel(config.queue_capacity.max(1));
        let removed: Arc<Mutex<HashSet<String>>> = Arc::default();
        tokio::spawn(run(store, config, rx, removed.clone()));
        Self { tx, removed }
    }

    /// Queues `batch` and waits until it is committed (or skipped, or
    /// failed). Waits for room when the queue is full.
    pub async fn write(&self, batch: WriteBatch) -> Result<WriteOutcome, WriteError> {
        let (done, rx) = oneshot::channel();
        self.tx
            .send(Request::Write { batch, done })
            .await
            .map_err(|_| WriteError::Closed)?;
        rx.await.unwrap_or(Err(WriteError::Closed))
    }

    /// Resolves once every batch queued before this call is settled.
    pub async fn flush(&self) -> Result<(), WriteError> {
        let (done, rx) = oneshot::channel();
        self.tx
            .send(Request::Flush { done })
            .await
            .map_err(|_| WriteError::Closed)?;
        rx.await.map_err(|_| WriteError::Closed)
    }

    /// Commits everything queued before it, then stops the writer and
    /// releases its handle on the store (so a file store can be reopened).
    /// Later writes fail with [`WriteError::Closed`].
    pub async fn close(&self) {
        let (done, rx) = oneshot::channel();
        if self.tx.send(Request::Close { done }).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// How many requests wait in the queue (not yet taken by the writer).
    pub fn queued(&self) -> usize {
        self.tx.max_capacity() - self.tx.capacity()
    }

    /// Marks process `pid` removed: its batches still queued, and any
    /// written later, are skipped.
    pub fn mark_removed(&self, pid: &str) {
        self.removed.lock().insert(pid.to_owned());
    }

    /// Forgets a removal (the pid may be used again).
    pub fn forget_removed(&self, pid: &str) {
        self.removed.lock().remove(pid);
    }
}

type Waiter = oneshot::Sender<Result<WriteOutcome, WriteError>>;

async fn run(
    store: Arc<dyn KvStore>,
    config: WriterConfig,
    mut rx: mpsc::Receiver<Request>,
    removed: Arc<Mutex<HashSet<String>>>,
) {
    // A request taken from the queue that did not fit the previous group.
    let mut carried: Option<Request> = None;
    loop {
        let first = match carried.take() {
            Some(r) => r,
            None => match rx.recv().await {
                Some(r) => r,
                None => return, // every handle dropped
            },
        };
        let mut ops: Vec<BatchOp> = Vec::new();
        let mut waiters: Vec<Waiter> = Vec::new();
        let mut flushes: Vec<oneshot::Sender<()>> = Vec::new();
        let mut closing: Option<oneshot::Sender<()>> = None;
        let mut next = Some(first);
        let deadline = tokio::time::Instant::now() + config.max_commit_delay;
        loop {
            if let Some(request) = next.take() {
                match request {
                    Request::Flush { done } => flushes.push(done),
                    Request::Close { done } => {
                        closing = Some(done);
                        break;
                    }
                    Request::Write { batch, done } => {
                        let skip = batch
                            .owner
                            .as_ref()
                            .is_some_and(|pid| removed.lock().contains(pid));
                        if skip {
                            let _ = done.send(Ok(WriteOutcome::Skipped));
                        } else if !ops.is_empty()
                            && ops.len() + batch.ops.len() > config.max_batch_ops
                        {
                            carried = Some(Request::Write { batch, done });
                            break;
                        } else {
                            ops.extend(batch.ops);
                            waiters.push(done);
                        }
                    }
                }
            }
            if ops.len() >= config.max_batch_ops {
                break;
            }
            // Take whatever is already queued; then, if a delay is set and
            // the group is not full, wait a little for more.
            match rx.try_recv() {
                Ok(r) => next = Some(r),
                Err(_) if config.max_commit_delay.is_zero() => break,
                Err(_) => match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(r)) => next = Some(r),
                    _ => break,
                },
            }
        }
        if !waiters.is_empty() {
            let batches = waiters.len();
            let result = store.batch(ops).await;
            match result {
                Ok(()) => {
                    for w in waiters {
                        let _ = w.send(Ok(WriteOutcome::Committed));
                    }
                }
                Err(e) => {
                    tracing::error!(batches, error = %e, "group commit failed; its transitions fail");
                    let source = Arc::new(e);
                    for w in waiters {
                        let _ = w.send(Err(WriteError::Commit {
                            batches,
                            source: source.clone(),
                        }));
                    }
                }
            }
        }
        for f in flushes {
            let _ = f.send(());
        }
        if let Some(done) = closing {
            // Fail what is still queued, release the store, then answer.
            rx.close();
            while let Ok(r) = rx.try_recv() {
                match r {
                    Request::Write { done, .. } => {
                        let _ = done.send(Err(WriteError::Closed));
                    }
                    Request::Flush { done } | Request::Close { done } => {
                        let _ = done.send(());
                    }
                }
            }
            drop(store);
            let _ = done.send(());
            return;
        }
    }
}
