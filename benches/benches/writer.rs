//! Group commit at work: durable transitions per second on redb with an
//! fsync on every commit, with 1, 64 and 512 concurrent "processes" each
//! committing its transitions one after another, through the
//! `GroupCommitWriter` and (for comparison) straight to the store.
//!
//! Run: `cargo bench -p acts-benches --bench writer`; numbers in
//! benches/README.md.

use std::sync::Arc;

use acts_core::durable::{GroupCommitWriter, WriteBatch, WriterConfig};
use acts_store::{BatchOp, KvStore};
use acts_store_redb::{Durability, RedbOptions, RedbStore};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// Transitions each simulated process commits per iteration.
const PER_PROCESS: usize = 4;

/// One transition: a task row, a vars row and a message row.
fn transition(p: usize, i: usize) -> Vec<BatchOp> {
    vec![
        BatchOp::put(format!("tasks/{p:05}/{i:03}"), vec![b't'; 200]),
        BatchOp::put(format!("vars/{p:05}/{i:03}"), vec![b'v'; 100]),
        BatchOp::put(format!("msgs/{p:05}/{i:03}"), vec![b'm'; 150]),
    ]
}

fn writer_benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let store: Arc<dyn KvStore> = Arc::new(
        RedbStore::open(
            dir.path().join("writer.redb"),
            RedbOptions::default().with_durability(Durability::Immediate),
        )
        .expect("open redb"),
    );
    let writer =
        rt.block_on(async { GroupCommitWriter::start(store.clone(), WriterConfig::default()) });

    let mut group = c.benchmark_group("durable_transitions_redb_fsync");
    group.sample_size(10);
    for processes in [1usize, 64, 512] {
        group.throughput(Throughput::Elements((processes * PER_PROCESS) as u64));
        group.bench_with_input(
            BenchmarkId::new("group_commit", processes),
            &processes,
            |b, &n| {
                b.to_async(&rt).iter(|| {
                    let writer = writer.clone();
                    async move {
                        let tasks: Vec<_> = (0..n)
                            .map(|p| {
                                let writer = writer.clone();
                                tokio::spawn(async move {
                                    for i in 0..PER_PROCESS {
                                        let batch = WriteBatch {
                                            owner: Some(format!("p{p}")),
                                            born: 0,
                                            ops: transition(p, i),
                                        };
                                        writer.write(batch).await.expect("commit");
                                    }
                                })
                            })
                            .collect();
                        for t in tasks {
                            t.await.expect("task");
                        }
                    }
                })
            },
        );
        if processes <= 64 {
            group.bench_with_input(
                BenchmarkId::new("one_commit_each", processes),
                &processes,
                |b, &n| {
                    b.to_async(&rt).iter(|| {
                        let store = store.clone();
                        async move {
                            let tasks: Vec<_> = (0..n)
                                .map(|p| {
                                    let store = store.clone();
                                    tokio::spawn(async move {
                                        for i in 0..PER_PROCESS {
                                            store.batch(transition(p, i)).await.expect("commit");
                                        }
                                    })
                                })
                                .collect();
                            for t in tasks {
                                t.await.expect("task");
                            }
                        }
                    })
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, writer_benches);
criterion_main!(benches);
