//! The writer's queue and its leader: how queued batches become groups
//! (merged up to `max_batch_ops`, a removed process's batches skipped, a
//! flush closing its group), how a group's commit is started — inline when
//! the store answers at once, in a task of its own when it waits — and how
//! its outcome answers every batch in it (and breaks the fence when the
//! store refused the commit on it).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use acts_store::{BatchOp, Condition, KvStore, StoreError};
use parking_lot::Mutex;
use tokio::sync::{Semaphore, oneshot};

use super::batch::{WriteBatch, WriteError, WriteOutcome, WriterConfig};
use crate::durable::writer_stats::WriterStatsCell;

pub(super) enum Request {
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
pub(super) struct Queue {
    pub(super) requests: VecDeque<Request>,
    /// Someone is committing (inline or in a task): the others only queue.
    pub(super) leading: bool,
    /// The store, until the writer is closed.
    pub(super) store: Option<Arc<dyn KvStore>>,
}

pub(super) struct Shared {
    pub(super) config: WriterConfig,
    pub(super) queue: Mutex<Queue>,
    /// Free queue slots (back-pressure: a full queue makes writers wait).
    pub(super) room: Arc<Semaphore>,
    /// The epoch of each removed pid's last removal.
    pub(super) removed: Mutex<HashMap<String, u64>>,
    /// Raised by every removal (see [`WriteBatch::born`]).
    pub(super) epoch: std::sync::atomic::AtomicU64,
    /// A caller is committing inline right now (its commits take
    /// microseconds: a follower waits for them on its thread instead of
    /// going back to the end of the runtime's queue).
    pub(super) inline: std::sync::atomic::AtomicBool,
    /// What the writer has committed so far.
    pub(super) stats: WriterStatsCell,
    /// Why the last commit failed, until one succeeds again.
    pub(super) failing: Mutex<Option<String>>,
    /// The condition every commit carries (see
    /// [`GroupCommitWriter::set_fence`]), and why it stopped holding once
    /// the store refused a commit on it.
    pub(super) fence: Mutex<Fence>,
}

#[derive(Default)]
pub(super) struct Fence {
    pub(super) condition: Option<Condition>,
    pub(super) broken: Option<String>,
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

impl Shared {
    /// The state of a writer over `store`.
    pub(super) fn new(store: Arc<dyn KvStore>, config: WriterConfig) -> Self {
        Self {
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
        }
    }

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
pub(super) fn lead_inline(shared: Arc<Shared>) {
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
pub(super) async fn lead(shared: Arc<Shared>) {
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
