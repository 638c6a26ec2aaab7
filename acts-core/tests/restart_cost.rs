//! A restart is ready after a bounded amount of reading, however many
//! processes are in flight: the stored processes are resumed after
//! `start` returns. Counted with the testkit's `CountingStore`, not timed.

mod common;
use common::*;

use std::sync::Arc;

use acts_core::engine::{ChannelOptions, Engine};
use acts_core::model::Vars;
use acts_store::{KvStore, MemoryStore};
use acts_testkit::{CountingStore, StoreCounts};

const WAITS: &str =
    "id: w\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.core.irq\n    params: { key: k }\n";

/// What `start` reads on a store holding `n` processes waiting in an
/// interrupt, and whether the last of them is then resumed.
async fn start_reads(n: usize) -> StoreCounts {
    let mem: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
    let engine = Engine::builder()
        .store(mem.clone())
        .start()
        .await
        .expect("engine starts");
    engine.executor().deploy_yaml(WAITS).await.expect("deploys");
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let mut last = String::new();
    for _ in 0..n {
        last = engine
            .executor()
            .start("w", Vars::new())
            .await
            .expect("starts")
            .pid;
        recv_where(&mut rx, irq_created).await;
    }
    engine.close().await;
    let counted = Arc::new(CountingStore::from_arc(Arc::new(mem)));
    let engine = Engine::builder()
        .store(counted.clone())
        .start()
        .await
        .expect("engine restarts");
    // On this (current-thread) runtime nothing spawned has run yet.
    let at_ready = counted.counts();
    // The background resume brings them back.
    tokio::time::timeout(GUARD, async {
        while !engine.cache().resident().contains(&last) {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the stored processes are resumed after start");
    engine.close().await;
    at_ready
}

#[tokio::test]
async fn a_restart_reads_the_same_whether_3_or_300_processes_are_in_flight() {
    let few = start_reads(3).await;
    let many = start_reads(300).await;
    assert_eq!(
        few, many,
        "reads before ready grew with the processes in flight"
    );
    assert!(
        many.values_read < 50,
        "a bounded read, not a recovery: {many:?}"
    );
}
