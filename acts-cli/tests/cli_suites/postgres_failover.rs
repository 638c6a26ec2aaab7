//! A PostgreSQL primary's crash under a cluster of real `acts serve
//! --cluster` processes: a primary and a streaming standby on loopback
//! (acts-testkit's `PostgresPair`), two nodes on them through a multi-host
//! URL (`target_session_attrs=read-write`), processes that each ask one
//! question, answered through the nodes while the primary's WAL senders
//! are stopped, then the primary killed with SIGKILL and the standby
//! promoted. The nodes find the new primary and go on.
//!
//! With a synchronous standby no answer is acknowledged while the standby
//! cannot have it, and every acknowledged answer is in its process — seen
//! through the nodes that lived through the failover and through a node
//! started afresh on the promoted server (the store's truth). With an
//! asynchronous standby the same run loses acknowledged answers: the test
//! shows the window the synchronous setting closes.
//!
//! The same run on a pair managed by Patroni with etcd (acts-testkit's
//! `PatroniPair`, `synchronous_mode`): the test only kills the leader's
//! node; Patroni promotes the synchronous standby on its own, and the
//! nodes find it.
//!
//! `ACTS_FAILOVER_ANSWERS` sets how many answers each run makes (default
//! 60).
#![cfg(feature = "postgres")]

use crate::support;

use std::time::Instant;

use acts_testkit::patroni::PatroniPair;
use acts_testkit::postgres_pair::PostgresPair;
use support::nodes::{
    AskingNodes, FailoverReport, NodeProc, answer_all, drive_window, env_count, lost_answers,
    settled, two_nodes_asking,
};

fn answers() -> usize {
    env_count("ACTS_FAILOVER_ANSWERS", 60)
}

/// A primary and its standby a test can cut off and fail over.
trait Failover {
    fn url_of(&self, ns: &str) -> String;
    /// Stops the primary's WAL senders.
    fn stop_replication(&self) -> Result<(), String>;
    /// Kills the primary; a standby is promoted (by the test or by the
    /// pair's own manager).
    fn fail_over(&mut self) -> Result<(), String>;
}

impl Failover for PostgresPair {
    fn url_of(&self, ns: &str) -> String {
        PostgresPair::url_of(self, ns)
    }
    fn stop_replication(&self) -> Result<(), String> {
        PostgresPair::stop_replication(self)
    }
    fn fail_over(&mut self) -> Result<(), String> {
        self.kill_primary()?;
        self.promote_standby()
    }
}

/// The Patroni pair, and the leader it lost (its name and timeline).
struct Patroni {
    pair: PatroniPair,
    killed: Option<(String, u64)>,
}

impl Failover for Patroni {
    fn url_of(&self, ns: &str) -> String {
        self.pair.url_of(ns)
    }
    fn stop_replication(&self) -> Result<(), String> {
        self.pair.stop_replication()
    }
    /// Only kills the leader's node: promoting is Patroni's work.
    fn fail_over(&mut self) -> Result<(), String> {
        self.killed = Some(self.pair.kill_leader()?);
        Ok(())
    }
}

/// Runs `asks` processes on two nodes over `pair`, kills the primary while
/// they are being answered — after a window in which its WAL senders were
/// stopped — gets the standby promoted, and reports which acknowledged
/// answers the processes lost.
async fn through_a_primary_crash(
    pair: &mut impl Failover,
    synchronous: bool,
    asks: usize,
) -> FailoverReport {
    let store = pair.url_of("failover");
    let http = reqwest::Client::new();
    // A quarter answered before the window, the rest during and after it.
    let AskingNodes {
        n1,
        n2,
        nodes,
        acked,
        started,
    } = two_nodes_asking(&http, &store, asks).await;
    // The window: nothing the primary commits reaches the standby. A
    // synchronous primary acknowledges none of it (each commit waits for
    // the standby) for the 5 s the window lasts; an asynchronous one goes
    // on (at least three answers, before the crash).
    tokio::task::block_in_place(|| pair.stop_replication())
        .unwrap_or_else(|e| panic!("stopping the WAL senders: {e}"));
    let stopped = Instant::now();
    let driving = tokio::spawn({
        let (http, nodes, acked) = (http.clone(), nodes.clone(), acked.clone());
        async move { answer_all(&http, &nodes, &acked, asks / 4..asks).await }
    });
    drive_window(
        &acked,
        stopped,
        synchronous,
        "acknowledged by a synchronous primary whose standby cannot have it",
    )
    .await;
    tokio::task::block_in_place(|| pair.fail_over())
        .unwrap_or_else(|e| panic!("failing the primary over: {e}"));
    driving
        .await
        .expect("the answering task")
        .expect("answering through the failover");
    let acked = acked.lock().expect("acked").clone();
    // Through the nodes that lived through the failover…
    let mut lost = lost_answers(&http, &nodes, &acked).await;
    drop((n1, n2));
    // …and through a node that knows only what the promoted server has.
    let fresh = NodeProc::spawn(&store, "n3");
    settled(&http, &fresh.url, &["n3"]).await;
    for l in lost_answers(&http, std::slice::from_ref(&fresh.url), &acked).await {
        if !lost.contains(&l) {
            lost.push(l);
        }
    }
    FailoverReport {
        acknowledged: acked.len(),
        lost,
        seconds: started.elapsed().as_secs_f64(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_crash_loses_no_acknowledged_answer_with_a_synchronous_standby() {
    let asks = answers();
    let mut pair = tokio::task::block_in_place(|| PostgresPair::start(false))
        .unwrap_or_else(|e| panic!("a private primary and standby: {e}"));
    let asynchronous = through_a_primary_crash(&mut pair, false, asks).await;
    drop(pair);
    eprintln!(
        "primary crash, asynchronous standby: {} of {asks} answers acknowledged, {} lost ({:.1} s): {:?}",
        asynchronous.acknowledged,
        asynchronous.lost.len(),
        asynchronous.seconds,
        asynchronous.lost
    );
    let mut pair = tokio::task::block_in_place(|| PostgresPair::start(true))
        .unwrap_or_else(|e| panic!("a private primary and standby: {e}"));
    let synchronous = through_a_primary_crash(&mut pair, true, asks).await;
    drop(pair);
    eprintln!(
        "primary crash, synchronous standby: {} of {asks} answers acknowledged, {} lost ({:.1} s)",
        synchronous.acknowledged,
        synchronous.lost.len(),
        synchronous.seconds
    );
    assert!(
        !asynchronous.lost.is_empty(),
        "with an asynchronous standby, the answers only the killed primary had are lost"
    );
    assert_eq!(
        synchronous.acknowledged, asks,
        "every question was answered"
    );
    assert!(
        synchronous.lost.is_empty(),
        "lost with a synchronous standby: {:?}",
        synchronous.lost
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patroni_promotes_the_synchronous_standby_and_no_acknowledged_answer_is_lost() {
    let asks = answers();
    let pair = tokio::task::block_in_place(PatroniPair::start)
        .unwrap_or_else(|e| panic!("a Patroni pair with etcd: {e}"));
    let mut patroni = Patroni { pair, killed: None };
    let report = through_a_primary_crash(&mut patroni, true, asks).await;
    eprintln!(
        "Patroni failover: {} of {asks} answers acknowledged, {} lost ({:.1} s)",
        report.acknowledged,
        report.lost.len(),
        report.seconds
    );
    // Patroni, not the test, promoted the other node, on a new timeline.
    let (gone, timeline) = patroni.killed.clone().expect("the leader was killed");
    let leader = tokio::task::block_in_place(|| patroni.pair.wait_promoted(&gone, timeline))
        .unwrap_or_else(|e| panic!("Patroni promoted no standby: {e}"));
    assert_ne!(leader, gone, "the killed node cannot lead");
    assert_eq!(report.acknowledged, asks, "every question was answered");
    assert!(
        report.lost.is_empty(),
        "lost through Patroni's failover: {:?}",
        report.lost
    );
}
