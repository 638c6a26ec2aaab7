//! A Redis master's crash under a cluster of real `acts serve --cluster`
//! processes on a store found through Redis Sentinel
//! (`redis+sentinel://S1,S2,S3/acts/NAME`; acts-testkit's
//! `RedisSentinel`: a master, its replica, three sentinels): processes
//! that each ask one question, answered through two nodes while the
//! replica is stopped, then the master killed with SIGKILL. The sentinels
//! promote the replica; the nodes ask them again and go on; the old master
//! comes back as the new one's replica.
//!
//! With `wait_replicas=1` no answer is acknowledged while the replica
//! cannot have it, and every acknowledged answer is in its process. With
//! the default (no `WAIT`) the same run loses acknowledged answers: the
//! test shows the window `wait_replicas` closes.
//!
//! `ACTS_FAILOVER_ANSWERS` sets how many answers each run makes (default
//! 60).
#![cfg(feature = "redis")]

use crate::support;

use std::time::Instant;

use acts_testkit::redis_sentinel::RedisSentinel;
use support::nodes::{
    AskingNodes, FailoverReport, answer_all, drive_window, env_count, lost_answers,
    two_nodes_asking,
};

/// Runs `asks` processes on two nodes over the master the sentinels name
/// (`options` appended to the store URL), kills the master while they are
/// being answered — after a window in which its replica was stopped — and
/// reports which acknowledged answers the processes lost.
async fn through_a_sentinel_failover(options: &str, asks: usize) -> FailoverReport {
    let wait = options.contains("wait_replicas");
    let mut group = tokio::task::block_in_place(RedisSentinel::start)
        .unwrap_or_else(|e| panic!("a master, its replica and three sentinels: {e}"));
    let store = format!("{}{options}", group.store_url("failover"));
    let http = reqwest::Client::new();
    // A quarter answered before the window, the rest during and after it.
    let AskingNodes {
        n1,
        n2,
        nodes,
        acked,
        started,
    } = two_nodes_asking(&http, &store, asks).await;
    // The window: the replica is stopped. Without WAIT answers are
    // acknowledged all the same (at least three, before the crash); with
    // WAIT none can be for the 5 s the window lasts.
    let replica = group.replica_port().expect("the replica");
    let master = group.master_port().expect("the master");
    group.freeze(replica, true).expect("stop the replica");
    if !wait {
        // 32 MiB first: more than the socket buffers to the stopped
        // replica hold, so the answers the master acknowledges next stay
        // in its own output buffer, and die with it.
        tokio::task::block_in_place(|| group.fill(master, "junk", 32 << 20))
            .expect("a large write to the master");
    }
    let stopped = Instant::now();
    let driving = tokio::spawn({
        let (http, nodes, acked) = (http.clone(), nodes.clone(), acked.clone());
        async move { answer_all(&http, &nodes, &acked, asks / 4..asks).await }
    });
    drive_window(
        &acked,
        stopped,
        wait,
        "acknowledged with WAIT while the only replica is stopped",
    )
    .await;
    tokio::task::block_in_place(|| {
        let old = group.kill_master()?;
        group.freeze(replica, false)?;
        // The sentinels promote the replica; the old master comes back
        // (empty) as its replica.
        group.wait_failover(old)?;
        group.restart(old)
    })
    .unwrap_or_else(|e| panic!("the failover: {e}"));
    driving
        .await
        .expect("the answering task")
        .expect("answering through the failover");
    let acked = acked.lock().expect("acked").clone();
    let lost = lost_answers(&http, &nodes, &acked).await;
    let seconds = started.elapsed().as_secs_f64();
    drop((n1, n2));
    FailoverReport {
        acknowledged: acked.len(),
        lost,
        seconds,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_loses_no_acknowledged_answer_with_wait_replicas() {
    let asks = env_count("ACTS_FAILOVER_ANSWERS", 60);
    let default = through_a_sentinel_failover("", asks).await;
    eprintln!(
        "sentinel failover, default settings (no WAIT): {} of {asks} answers acknowledged, {} lost ({:.1} s): {:?}",
        default.acknowledged,
        default.lost.len(),
        default.seconds,
        default.lost
    );
    let safe = through_a_sentinel_failover("?wait_replicas=1&wait_ms=1000", asks).await;
    eprintln!(
        "sentinel failover, wait_replicas=1: {} of {asks} answers acknowledged, {} lost ({:.1} s)",
        safe.acknowledged,
        safe.lost.len(),
        safe.seconds
    );
    assert!(
        !default.lost.is_empty(),
        "without WAIT, the answers only the killed master had are lost"
    );
    // An answer whose WAIT timed out is applied but not acknowledged (it
    // may reach the replica later): not every answer is acknowledged, but
    // every one made before the window is.
    assert!(
        safe.acknowledged >= asks / 4,
        "only {} answers acknowledged",
        safe.acknowledged
    );
    assert!(
        safe.lost.is_empty(),
        "lost with wait_replicas=1: {:?}",
        safe.lost
    );
}
