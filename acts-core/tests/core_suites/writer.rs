//! The group-commit writer: ordering, merging, flush, skipped writes of
//! removed processes, failed commits, back-pressure. Interleavings are
//! decided with the testkit's gated store, never with sleeps.

use std::sync::Arc;
use std::time::Duration;

use acts_core::durable::{GroupCommitWriter, WriteBatch, WriteError, WriteOutcome, WriterConfig};
use acts_store::{BatchOp, ErrorKind, KvStore};
use acts_testkit::{CrashStore, FailPlan, FailingStore, GateKind, GatedStore, OpSet};

/// Hang guard only.
const GUARD: Duration = Duration::from_secs(60);

fn batch(owner: &str, ops: Vec<BatchOp>) -> WriteBatch {
    WriteBatch {
        owner: Some(owner.to_owned()),
        born: 0,
        ops,
    }
}

fn put(k: &str, v: &str) -> BatchOp {
    BatchOp::put(k, v)
}

type Pending = tokio::task::JoinHandle<Result<WriteOutcome, WriteError>>;

/// Queues `b` from a new task and returns its handle.
fn spawn_write(writer: &GroupCommitWriter, b: WriteBatch) -> Pending {
    let w = writer.clone();
    tokio::spawn(async move { w.write(b).await })
}

/// Arms the write gate and starts a write that parks inside the store's
/// commit: the writer is then "busy with a commit" until the gate opens.
async fn hold_a_commit(
    store: &GatedStore<CrashStore>,
    writer: &GroupCommitWriter,
    b: WriteBatch,
) -> Pending {
    store.arm(GateKind::Write);
    let held = spawn_write(writer, b);
    tokio::time::timeout(GUARD, store.wait_parked(GateKind::Write, 1))
        .await
        .expect("the first commit reaches the store");
    held
}

/// Waits (hang-guarded) for every write and checks each was committed.
async fn assert_all_committed(writes: Vec<Pending>) {
    for w in writes {
        let outcome = tokio::time::timeout(GUARD, w)
            .await
            .expect("the write settles")
            .expect("the task did not panic")
            .expect("the write succeeded");
        assert_eq!(outcome, WriteOutcome::Committed);
    }
}

/// A gated store over a recording store.
fn gated() -> (Arc<GatedStore<CrashStore>>, Arc<CrashStore>) {
    let log = Arc::new(CrashStore::new());
    (Arc::new(GatedStore::from_arc(log.clone())), log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_commit_in_order_and_later_writes_win() {
    let (store, log) = gated();
    let writer = GroupCommitWriter::start(store.clone(), WriterConfig::default());
    for i in 0..5 {
        let out = writer
            .write(batch("p", vec![put("k", &i.to_string())]))
            .await
            .unwrap();
        assert_eq!(out, WriteOutcome::Committed);
    }
    assert_eq!(log.get(b"k").await.unwrap(), Some(b"4".to_vec()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_queued_during_a_commit_share_the_next_one() {
    let (store, log) = gated();
    let writer = GroupCommitWriter::start(store.clone(), WriterConfig::default());
    let first = hold_a_commit(&store, &writer, batch("p0", vec![put("a", "0")])).await;
    // While the first commit is held, 20 more transitions queue up.
    let mut rest = Vec::new();
    for i in 1..=20 {
        rest.push(spawn_write(
            &writer,
            batch(&format!("p{i}"), vec![put(&format!("k{i:02}"), "v")]),
        ));
    }
    wait_queued(&writer, 20).await;
    store.disarm(GateKind::Write);
    assert_eq!(first.await.unwrap().unwrap(), WriteOutcome::Committed);
    assert_all_committed(rest).await;
    let batches = log.committed_batches().await;
    assert_eq!(
        batches.len(),
        2,
        "one commit for the first write, one for the 20 queued behind it"
    );
    assert_eq!(batches[1].len(), 20);
}

/// Waits (hang-guarded) until `n` requests wait in the writer's queue.
async fn wait_queued(writer: &GroupCommitWriter, n: usize) {
    tokio::time::timeout(GUARD, async {
        while writer.queued() < n {
            // Not a spin: the waited-for work gets the cores.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the writers enqueue");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_waits_for_everything_queued_before_it() {
    let (store, log) = gated();
    let writer = GroupCommitWriter::start(store.clone(), WriterConfig::default());
    let write = hold_a_commit(&store, &writer, batch("p", vec![put("a", "1")])).await;
    let w = writer.clone();
    let flush = tokio::spawn(async move { w.flush().await });
    tokio::task::yield_now().await;
    assert!(!flush.is_finished(), "flush must wait for the held commit");
    store.disarm(GateKind::Write);
    tokio::time::timeout(GUARD, flush)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        log.get(b"a").await.unwrap(),
        Some(b"1".to_vec()),
        "durable when flush resolves"
    );
    write.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_of_a_removed_process_are_skipped_not_failed() {
    let (store, log) = gated();
    let writer = GroupCommitWriter::start(store.clone(), WriterConfig::default());
    let held = hold_a_commit(&store, &writer, batch("other", vec![put("o", "1")])).await;
    let queued = spawn_write(&writer, batch("gone", vec![put("gone/task", "x")]));
    wait_queued(&writer, 1).await;
    writer.mark_removed("gone");
    store.disarm(GateKind::Write);
    held.await.unwrap().unwrap();
    assert_eq!(queued.await.unwrap().unwrap(), WriteOutcome::Skipped);
    assert_eq!(
        writer
            .write(batch("gone", vec![put("gone/late", "x")]))
            .await
            .unwrap(),
        WriteOutcome::Skipped
    );
    assert_eq!(
        log.get(b"gone/task").await.unwrap(),
        None,
        "no resurrection"
    );
    assert_eq!(log.get(b"gone/late").await.unwrap(), None);
    // An instance born after the removal (the pid used again) writes.
    let reborn = WriteBatch {
        born: writer.epoch(),
        ..batch("gone", vec![put("gone/again", "x")])
    };
    assert_eq!(writer.write(reborn).await.unwrap(), WriteOutcome::Committed);
    assert_eq!(log.get(b"gone/again").await.unwrap(), Some(b"x".to_vec()));
    // ... while an old one still cannot.
    assert_eq!(
        writer
            .write(batch("gone", vec![put("gone/stale", "x")]))
            .await
            .unwrap(),
        WriteOutcome::Skipped
    );
    writer.forget_removed("gone");
    assert_eq!(
        writer
            .write(batch("gone", vec![put("gone/new", "x")]))
            .await
            .unwrap(),
        WriteOutcome::Committed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_commit_fails_its_transitions_and_later_commits_succeed() {
    let store = Arc::new(FailingStore::new(acts_store::MemoryStore::new()));
    let writer = GroupCommitWriter::start(store.clone(), WriterConfig::default());
    store.set_plan(FailPlan::always(OpSet::WRITES, ErrorKind::Unavailable));
    match writer.write(batch("p", vec![put("a", "1")])).await {
        Err(WriteError::Commit { batches, source }) => {
            assert_eq!(batches, 1);
            assert_eq!(source.kind(), ErrorKind::Unavailable);
        }
        other => panic!("expected a commit error, got {other:?}"),
    }
    assert_eq!(store.inner().get(b"a").await.unwrap(), None);
    store.heal();
    assert_eq!(
        writer.write(batch("p", vec![put("b", "2")])).await.unwrap(),
        WriteOutcome::Committed
    );
    assert_eq!(store.inner().get(b"b").await.unwrap(), Some(b"2".to_vec()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_respect_the_op_limit_and_never_split_a_batch() {
    let (store, log) = gated();
    let config = {
        let mut v = WriterConfig::default();
        v.max_batch_ops = 6;
        v
    };
    let writer = GroupCommitWriter::start(store.clone(), config);
    let first = hold_a_commit(&store, &writer, batch("p", vec![put("first", "x")])).await;
    // Enqueue one at a time so the queue order is known.
    let mut all = Vec::new();
    for i in 0..6 {
        let ops: Vec<BatchOp> = if i < 5 {
            (0..3).map(|j| put(&format!("k{i}{j}"), "v")).collect()
        } else {
            (0..10).map(|j| put(&format!("big{j:02}"), "v")).collect()
        };
        all.push(spawn_write(&writer, batch("p", ops)));
        wait_queued(&writer, i + 1).await;
    }
    store.disarm(GateKind::Write);
    first.await.unwrap().unwrap();
    assert_all_committed(all).await;
    let sizes: Vec<usize> = log.committed_batches().await.iter().map(Vec::len).collect();
    // 1 held op; then 3+3 (6 fits), 3+3, 3 alone (the 10-op batch does not
    // fit after it), then the 10-op batch alone, never split.
    assert_eq!(sizes, vec![1, 6, 6, 3, 10]);
    assert_eq!(log.snapshot().len(), 1 + 15 + 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_makes_writers_wait_not_fail() {
    let (store, log) = gated();
    let config = {
        let mut v = WriterConfig::default();
        v.queue_capacity = 2;
        v
    };
    let writer = GroupCommitWriter::start(store.clone(), config);
    store.arm(GateKind::Write);
    let mut all = Vec::new();
    for i in 0..50 {
        all.push(spawn_write(
            &writer,
            batch("p", vec![put(&format!("k{i:02}"), "v")]),
        ));
    }
    tokio::time::timeout(GUARD, store.wait_parked(GateKind::Write, 1))
        .await
        .unwrap();
    store.disarm(GateKind::Write);
    assert_all_committed(all).await;
    assert_eq!(log.snapshot().len(), 50);
}

#[tokio::test]
async fn the_writer_counts_its_commits_batches_and_failures() {
    let failing = Arc::new(FailingStore::new(acts_store::MemoryStore::new()));
    let writer = GroupCommitWriter::start(failing.clone(), WriterConfig::default());
    for i in 0..3 {
        writer
            .write(batch("p", vec![put(&format!("k{i}"), "v")]))
            .await
            .expect("committed");
    }
    let s = writer.stats();
    assert_eq!(s.batches, 3, "{s:?}");
    assert!(s.commits >= 1 && s.commits <= 3, "{s:?}");
    assert_eq!(s.failures, 0);
    failing.set_plan(FailPlan::always(OpSet::WRITES, ErrorKind::Unavailable));
    assert!(
        writer
            .write(batch("p", vec![put("k9", "v")]))
            .await
            .is_err()
    );
    let s = writer.stats();
    assert_eq!((s.batches, s.failures), (3, 1), "{s:?}");
    // Every commit is in one latency bucket (failed ones too); every
    // committed group in one size bucket, and the sizes add up to the
    // batches (here one batch per group: the writes were sequential).
    assert_eq!(
        s.commit_micros_buckets.iter().sum::<u64>(),
        s.commits + s.failures,
        "{s:?}"
    );
    assert_eq!(s.group_size_buckets.iter().sum::<u64>(), s.commits, "{s:?}");
    assert_eq!(s.group_size_buckets[0], 3, "groups of one batch: {s:?}");
}
