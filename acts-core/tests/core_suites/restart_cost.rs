//! A restart is ready after a bounded amount of reading, however many
//! processes are in flight, and its background resume reads no process
//! row of a process that only waits for a client: it counts them from the
//! state index and loads none. Counted with the testkit's `CountingStore`,
//! not timed.

use crate::common;
use common::*;

use std::sync::Arc;

use acts_core::engine::{ChannelOptions, Engine};
use acts_core::model::Vars;
use acts_store::{KvStore, MemoryStore};
use acts_testkit::{CountingStore, StoreCounts};

const WAITS: &str =
    "id: w\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.core.irq\n    params: { key: k }\n";

/// What `start` reads on a store holding `n` processes waiting in an
/// interrupt, and what the background resume then reads.
async fn start_reads(n: usize) -> (StoreCounts, StoreCounts) {
    let mem: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
    let engine = Engine::builder()
        .store(mem.clone())
        .start()
        .await
        .expect("engine starts");
    engine
        .executor()
        .model()
        .deploy_yaml(WAITS)
        .await
        .expect("deploys");
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let mut last = String::new();
    for _ in 0..n {
        last = engine
            .executor()
            .proc()
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
    // The background resume counts them and loads none.
    tokio::time::timeout(GUARD, async {
        while !engine.runtime().is_idle() || engine.runtime().cache().count() < n {
            // Not a spin: the waited-for work gets the cores.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the background resume ends (hang guard)");
    let resumed = counted.counts();
    assert_eq!(engine.runtime().cache().count(), n, "every one is admitted");
    assert_eq!(
        engine.runtime().cache().resident_count(),
        0,
        "none is loaded"
    );
    // The last one is loaded when it is answered.
    let exec = engine.executor();
    let tid = exec
        .task()
        .list(&last)
        .await
        .expect("tasks")
        .into_iter()
        .find(|t| t.state == acts_core::scheduler::TaskState::Interrupt)
        .expect("it waits")
        .tid;
    exec.act()
        .complete(&last, &tid, Vars::new())
        .await
        .expect("answered");
    assert_eq!(engine.runtime().cache().count(), n - 1);
    engine.close().await;
    (at_ready, resumed)
}

#[tokio::test]
async fn a_restart_reads_the_same_whether_3_or_300_processes_are_in_flight() {
    let (few, few_resumed) = start_reads(3).await;
    let (many, many_resumed) = start_reads(300).await;
    assert_eq!(
        few, many,
        "reads before ready grew with the processes in flight"
    );
    assert!(
        many.values_read < 50,
        "a bounded read, not a recovery: {many:?}"
    );
    // The background resume: the same point reads and scans (the state
    // index is read in chunks of thousands) — only the index entries it
    // returns grow, one per process; no process row is read.
    assert_eq!(
        few_resumed.reads, many_resumed.reads,
        "{few_resumed:?} / {many_resumed:?}"
    );
    assert_eq!(
        few_resumed.scans, many_resumed.scans,
        "{few_resumed:?} / {many_resumed:?}"
    );
    assert_eq!(
        many_resumed.values_read - few_resumed.values_read,
        297,
        "one index entry per process, nothing else: {few_resumed:?} / {many_resumed:?}"
    );
}
