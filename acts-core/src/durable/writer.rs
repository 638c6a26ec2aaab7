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

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use acts_store::{BatchOp, Condition, KvStore, StoreError};
use parking_lot::Mutex;
use tokio::sync::{Semaphore, oneshot};

use crate::durable::writer_stats::{WriterStats, WriterStatsCell};

/// Settings of a [`GroupCommitWriter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
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
    /// The writer epoch ([`GroupCommitWriter::epoch`]) at which the
    /// owner's in-memory instance was created. A batch of an instance born
    /// before its pid's last removal is skipped; one born after it (the pid
    /// used again) is applied.
    pub born: u64,
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
    /// The store refused the batch because this writer's fence no longer
    /// holds: another node has taken the store (a higher epoch). Nothing
    /// of it was applied, and nothing this writer sends will be.
    #[error("fenced: {0}")]
    Fenced(String),
}

enum Request {
    Write {
        batch: WriteBatch,
        done: oneshot::Sender<Result<WriteOutcome, WriteError>>,
        /// The queue slot, given back when the batch leaves the queue.
        _permit: tokio::sync::OwnedSemaphorePermit,
    },
    Flush {
        done: oneshot::Sender<()>,
    },
}

type Waiter = oneshot::Sender<Result<WriteOutcome, WriteError>>;
/// A group's commit: `Ok(false)` when the store refused it on the fence.
type Commit = Pin<Box<dyn Future<Output = Result<bool, StoreError>> + Send>>;

/// The queue and who leads it.
struct Queue {
    requests: VecDeque<Request>,
    /// Someone is committing (inline or in a task): the others only queue.
    leading: bool,
    /// The store, until the writer is closed.
    store: Option<Arc<dyn KvStore>>,
}

struct Shared {
    config: WriterConfig,
    queue: Mutex<Queue>,
    /// Free queue slots (back-pressure: a full queue makes writers wait).
    room: Arc<Semaphore>,
    /// The epoch of each removed pid's last removal.
    removed: Mutex<HashMap<String, u64>>,
    /// Raised by every removal (see [`WriteBatch::born`]).
    epoch: std::sync::atomic::AtomicU64,
    /// A caller is committing inline right now (its commits take
    /// microseconds: a follower waits for them on its thread instead of
    /// going back to the end of the runtime's queue).
    inline: std::sync::atomic::AtomicBool,
    /// What the writer has committed so far.
    stats: WriterStatsCell,
    /// Why the last commit failed, until one succeeds again.
    failing: Mutex<Option<String>>,
    /// The condition every commit carries (see
    /// [`GroupCommitWriter::set_fence`]), and why it stopped holding once
    /// the store refused a commit on it.
    fence: Mutex<Fence>,
}

#[derive(Default)]
struct Fence {
    condition: Option<Condition>,
    broken: Option<String>,
}

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

/// A group taken from the queue: its ops, who waits for it, and the
/// flushes queued behind it.
#[derive(Default)]
struct Group {
    ops: Vec<BatchOp>,
    waiters: Vec<Waiter>,
    flushes: Vec<oneshot::Sender<()>>,
    /// When its commit started.
    started: Option<std::time::Instant>,
}

/// How many groups a caller commits inline before handing the lead to a
/// task (so one caller does not serve a long stream of others).
const INLINE_GROUPS: usize = 64;

impl GroupCommitWriter {
    /// A writer over `store` (commits that wait are finished on the current
    /// tokio runtime).
    pub fn start(store: Arc<dyn KvStore>, config: WriterConfig) -> Self {
        Self {
            shared: Arc::new(Shared {
                room: Arc::new(Semaphore::new(config.queue_capacity.max(1))),
                config,
                queue: Mutex::new(Queue {
                    requests: VecDeque::new(),
                    leading: false,
                    store: Some(store),
                }),
                removed: Mutex::new(HashMap::new()),
                epoch: std::sync::atomic::AtomicU64::new(1),
                inline: std::sync::atomic::AtomicBool::new(false),
                stats: WriterStatsCell::default(),
                failing: Mutex::new(None),
                fence: Mutex::new(Fence::default()),
            }),
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

impl Shared {
    /// Takes the next group from the queue; `None` (and the lead given up)
    /// when there is nothing left.
    fn take_group(&self) -> Option<(Group, Arc<dyn KvStore>)> {
        let mut q = self.queue.lock();
        let Some(store) = q.store.clone() else {
            q.leading = false;
            return None;
        };
        let mut g = Group::default();
        while let Some(r) = q.requests.pop_front() {
            match r {
                Request::Flush { done } => {
                    g.flushes.push(done);
                    // Everything before it is in this group: it resolves
                    // with it.
                    break;
                }
                Request::Write {
                    batch,
                    done,
                    _permit,
                } => {
                    let skip = batch.owner.as_ref().is_some_and(|pid| {
                        self.removed
                            .lock()
                            .get(pid)
                            .is_some_and(|&removed_at| batch.born < removed_at)
                    });
                    if skip {
                        let _ = done.send(Ok(WriteOutcome::Skipped));
                        continue;
                    }
                    if !g.ops.is_empty()
                        && g.ops.len() + batch.ops.len() > self.config.max_batch_ops
                    {
                        q.requests.push_front(Request::Write {
                            batch,
                            done,
                            _permit,
                        });
                        break;
                    }
                    g.ops.extend(batch.ops);
                    g.waiters.push(done);
                    if g.ops.len() >= self.config.max_batch_ops {
                        break;
                    }
                }
            }
        }
        if g.waiters.is_empty() && g.flushes.is_empty() {
            q.leading = false;
            return None;
        }
        Some((g, store))
    }
}

/// Answers a group with its commit's result (and counts it).
fn settle(g: Group, result: Result<bool, StoreError>, shared: &Shared) {
    if !g.waiters.is_empty() {
        let micros = g.started.map_or(0, |t| t.elapsed().as_micros() as u64);
        shared
            .stats
            .record(micros, matches!(result, Ok(true)), g.waiters.len() as u64);
    }
    // Only a commit that wrote something says the store takes writes.
    match &result {
        Ok(true) if !g.waiters.is_empty() => *shared.failing.lock() = None,
        Err(e) => *shared.failing.lock() = Some(e.to_string()),
        _ => {}
    }
    match result {
        Ok(true) => {
            for w in g.waiters {
                let _ = w.send(Ok(WriteOutcome::Committed));
            }
        }
        Ok(false) => {
            let why = {
                let mut f = shared.fence.lock();
                let why = format!(
                    "the store no longer holds this node's fence ({}): another node took it over",
                    f.condition
                        .as_ref()
                        .and_then(|c| c.value.as_deref())
                        .map_or_else(String::new, |v| format!(
                            "epoch {}",
                            String::from_utf8_lossy(v)
                        ))
                );
                f.broken.get_or_insert(why).clone()
            };
            tracing::error!(batches = g.waiters.len(), reason = %why, "commit refused by the fence; this node steps down");
            for w in g.waiters {
                let _ = w.send(Err(WriteError::Fenced(why.clone())));
            }
        }
        Err(e) => {
            let batches = g.waiters.len();
            tracing::error!(batches, error = %e, "group commit failed; its transitions fail");
            let source = Arc::new(e);
            for w in g.waiters {
                let _ = w.send(Err(WriteError::Commit {
                    batches,
                    source: source.clone(),
                }));
            }
        }
    }
    for f in g.flushes {
        let _ = f.send(());
    }
}

/// Starts a group's commit and polls it once.
fn start_commit(
    g: &mut Group,
    store: &Arc<dyn KvStore>,
    shared: &Shared,
) -> (Commit, Poll<Result<bool, StoreError>>) {
    g.started = Some(std::time::Instant::now());
    let ops = std::mem::take(&mut g.ops);
    let store = store.clone();
    let fence = shared.fence.lock().condition.clone();
    // A span per group commit, for a trace exporter (target `acts::otel`,
    // the one the server exports); free when nobody subscribes to it.
    let span = tracing::info_span!(
        target: "acts::otel",
        "group commit",
        acts.commit.batches = g.waiters.len(),
        acts.commit.ops = ops.len(),
    );
    let mut commit: Commit = Box::pin(tracing::Instrument::instrument(
        async move {
            match fence {
                _ if ops.is_empty() => Ok(true),
                Some(c) => store.batch_if(vec![c], ops).await,
                None => store.batch(ops).await.map(|()| true),
            }
        },
        span,
    ));
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let first = commit.as_mut().poll(&mut cx);
    (commit, first)
}

/// Leads on the caller's own stack: groups whose commit completes at once
/// are finished here; the first one that has to wait moves, with the lead,
/// into a task.
fn lead_inline(shared: Arc<Shared>) {
    struct Inline(Arc<Shared>);
    impl Drop for Inline {
        fn drop(&mut self) {
            self.0
                .inline
                .store(false, std::sync::atomic::Ordering::Release);
        }
    }
    shared
        .inline
        .store(true, std::sync::atomic::Ordering::Release);
    let _inline = Inline(shared.clone());
    for _ in 0..INLINE_GROUPS {
        let Some((mut g, store)) = shared.take_group() else {
            return;
        };
        match start_commit(&mut g, &store, &shared) {
            (commit, Poll::Ready(result)) => {
                // Let go of the store before answering: a flush (and so a
                // close) that resolves must find no commit holding it.
                drop(commit);
                drop(store);
                settle(g, result, &shared);
            }
            (commit, Poll::Pending) => {
                drop(store);
                tokio::spawn(async move {
                    settle(g, commit.await, &shared);
                    lead(shared).await;
                });
                return;
            }
        }
    }
    tokio::spawn(lead(shared));
}

/// Leads from a task until the queue is empty.
async fn lead(shared: Arc<Shared>) {
    loop {
        if !shared.config.max_commit_delay.is_zero() {
            let full = {
                let q = shared.queue.lock();
                let ops: usize = q
                    .requests
                    .iter()
                    .map(|r| match r {
                        Request::Write { batch, .. } => batch.ops.len(),
                        Request::Flush { .. } => 0,
                    })
                    .sum();
                ops >= shared.config.max_batch_ops
            };
            if !full {
                tokio::time::sleep(shared.config.max_commit_delay).await;
            }
        }
        let Some((mut g, store)) = shared.take_group() else {
            return;
        };
        let (commit, first) = start_commit(&mut g, &store, &shared);
        drop(store);
        let result = match first {
            Poll::Ready(r) => {
                drop(commit);
                r
            }
            Poll::Pending => commit.await,
        };
        settle(g, result, &shared);
    }
}
