//! Store-layer benchmarks: single put, single get, a 100-op batch and a
//! 100-key scan on every backend, at each durability setting.
//!
//! Run: `cargo bench -p acts-benches --bench store` (needs `redis-server` on
//! PATH for the Redis rows; see benches/README.md for recorded numbers).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use acts_store::{BatchOp, KvStore, MemoryStore, ScanRange};
use acts_store_redb::{Durability, RedbOptions, RedbStore};
use acts_store_redis::RedisStore;
use acts_store_rocksdb::{RocksOptions, RocksStore};
use acts_testkit::redis_server::RedisServer;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// Keys preloaded for the read benches.
const PRELOADED: u64 = 10_000;

fn key(i: u64) -> Vec<u8> {
    format!("bench/{:010}", i % PRELOADED).into_bytes()
}

fn value() -> Vec<u8> {
    // About the size of a task row.
    vec![b'x'; 256]
}

struct Backend {
    name: &'static str,
    store: Arc<dyn KvStore>,
    /// Keeps temporary files and servers alive for the bench's duration.
    _guard: Box<dyn std::any::Any>,
}

fn backends(rt: &tokio::runtime::Runtime) -> Vec<Backend> {
    let dir = tempfile::tempdir().expect("temp dir");
    let redb = |name: &'static str, durability| Backend {
        name,
        store: Arc::new(
            RedbStore::open(
                dir.path().join(name),
                RedbOptions::default().with_durability(durability),
            )
            .expect("open redb"),
        ),
        _guard: Box::new(()),
    };
    let rocks = |name: &'static str, sync| Backend {
        name,
        store: Arc::new(
            RocksStore::open(
                dir.path().join(name),
                RocksOptions::default().with_sync(sync),
            )
            .expect("open rocksdb"),
        ),
        _guard: Box::new(()),
    };
    let mut all = vec![
        Backend {
            name: "memory",
            store: Arc::new(MemoryStore::new()),
            _guard: Box::new(()),
        },
        redb("redb-fsync", Durability::Immediate),
        redb("redb-nosync", Durability::None),
        rocks("rocksdb-syncwal", true),
        rocks("rocksdb-nosync", false),
    ];
    match RedisServer::shared_or_start() {
        Ok(server) => {
            let store = rt
                .block_on(RedisStore::connect(server.url(), "bench"))
                .expect("connect redis");
            all.push(Backend {
                name: "redis-loopback",
                store: Arc::new(store),
                _guard: Box::new(server),
            });
        }
        Err(e) => eprintln!("skipping the Redis rows: {e}"),
    }
    all[0]._guard = Box::new(dir);
    all
}

fn store_benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let backends = backends(&rt);
    for b in &backends {
        rt.block_on(async {
            for chunk in (0..PRELOADED).collect::<Vec<_>>().chunks(1000) {
                let ops = chunk
                    .iter()
                    .map(|&i| BatchOp::put(key(i), value()))
                    .collect();
                b.store.batch(ops).await.expect("preload");
            }
        });
    }

    let mut group = c.benchmark_group("put");
    group.throughput(Throughput::Elements(1));
    for b in &backends {
        let n = AtomicU64::new(0);
        group.bench_function(BenchmarkId::from_parameter(b.name), |bench| {
            bench.to_async(&rt).iter(|| async {
                let i = n.fetch_add(1, Ordering::Relaxed);
                b.store.put(&key(i), &value()).await.expect("put");
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("get");
    group.throughput(Throughput::Elements(1));
    for b in &backends {
        let n = AtomicU64::new(0);
        group.bench_function(BenchmarkId::from_parameter(b.name), |bench| {
            bench.to_async(&rt).iter(|| async {
                let i = n.fetch_add(7919, Ordering::Relaxed);
                assert!(b.store.get(&key(i)).await.expect("get").is_some());
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("batch_100");
    group.throughput(Throughput::Elements(100));
    for b in &backends {
        let n = AtomicU64::new(0);
        group.bench_function(BenchmarkId::from_parameter(b.name), |bench| {
            bench.to_async(&rt).iter(|| async {
                let start = n.fetch_add(100, Ordering::Relaxed);
                let ops = (start..start + 100)
                    .map(|i| BatchOp::put(key(i), value()))
                    .collect();
                b.store.batch(ops).await.expect("batch");
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("scan_100");
    group.throughput(Throughput::Elements(100));
    for b in &backends {
        let n = AtomicU64::new(0);
        group.bench_function(BenchmarkId::from_parameter(b.name), |bench| {
            bench.to_async(&rt).iter(|| async {
                let i = n.fetch_add(101, Ordering::Relaxed) % (PRELOADED - 100);
                let range = ScanRange::new(
                    std::ops::Bound::Included(key(i)),
                    std::ops::Bound::Unbounded,
                )
                .with_limit(100);
                assert_eq!(b.store.scan(range).await.expect("scan").len(), 100);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, store_benches);
criterion_main!(benches);
