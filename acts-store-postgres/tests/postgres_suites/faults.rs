//! What the conformance suite does not reach: a scan longer than one page
//! reads one snapshot in order both ways; a stopped server is an error
//! that says so (retryable), never "no record", and the same store works
//! again once the server is back; the settings that can lose
//! acknowledged work are named.

use crate::support;

use std::time::Duration;

use acts_store::{BatchOp, KvStore, ScanRange};
use acts_store_postgres::{PostgresOptions, PostgresStore};
use acts_testkit::postgres_server::PostgresServer;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

#[test]
fn a_scan_of_many_pages_is_ordered_both_ways_and_respects_its_limit() {
    let server = PostgresServer::shared_or_start().unwrap_or_else(|e| panic!("{e}"));
    runtime().block_on(async {
        let store =
            PostgresStore::connect(&server.url_of(&format!("pages_{}", std::process::id())))
                .await
                .expect("connect");
        let keys: Vec<Vec<u8>> = (0..2_500u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let ops = keys
            .iter()
            .map(|k| BatchOp::put(k.clone(), b"v".to_vec()))
            .collect();
        store.batch(ops).await.expect("batch");
        let all = store.scan(ScanRange::all()).await.expect("scan");
        assert_eq!(all.iter().map(|p| p.key.clone()).collect::<Vec<_>>(), keys);
        let back = store.scan(ScanRange::all().reversed()).await.expect("scan");
        let mut reversed = keys.clone();
        reversed.reverse();
        assert_eq!(
            back.iter().map(|p| p.key.clone()).collect::<Vec<_>>(),
            reversed
        );
        let some = store
            .scan(ScanRange::all().with_limit(1_500))
            .await
            .expect("scan");
        assert_eq!(some.len(), 1_500);
        assert_eq!(
            some.last().map(|p| p.key.clone()),
            Some(keys[1_499].clone())
        );
        let tail = store
            .scan(ScanRange::prefix(&[0, 0, 9]).reversed().with_limit(1_200))
            .await
            .expect("scan");
        assert_eq!(tail.len(), 196, "the keys 0x00000900 (2304) to 2499");
        assert_eq!(tail[0].key, vec![0, 0, 9, 195], "the largest first");
    });
}

#[test]
fn a_stopped_server_is_a_retryable_error_and_the_store_comes_back() {
    let mut server = PostgresServer::start().unwrap_or_else(|e| panic!("{e}"));
    runtime().block_on(async {
        let mut options = PostgresOptions::default();
        options.op_timeout = Duration::from_secs(5);
        options.connect_timeout = Duration::from_secs(2);
        let store = PostgresStore::connect_with(server.url(), "outage", options)
            .await
            .expect("connect");
        store.put(b"k", b"before").await.expect("put");
        assert!(store.persistence().is_synced(), "{}", store.persistence());
        server.stop();
        let got = store.get(b"k").await;
        let e = got.expect_err("a stopped server is no record? never");
        assert!(e.is_retryable(), "{e}");
        let e = store
            .put(b"k", b"during")
            .await
            .expect_err("no write lands");
        assert!(e.is_retryable(), "{e}");
        assert!(store.health().await.is_err(), "readiness tells the truth");
        server.start_again().unwrap_or_else(|e| panic!("{e}"));
        // The pool replaces the dead connections: the next calls succeed
        // (one may still meet a connection that died with the server).
        let mut tries = 0;
        let value = loop {
            tries += 1;
            match store.get(b"k").await {
                Ok(v) => break v,
                Err(e) if tries < 5 && e.is_retryable() => continue,
                Err(e) => panic!("after the restart: {e}"),
            }
        };
        assert_eq!(
            value.as_deref(),
            Some(&b"before"[..]),
            "the acknowledged write survived"
        );
        store
            .put(b"k", b"after")
            .await
            .expect("put after the restart");
        store.health().await.expect("healthy again");
    });
}

#[test]
fn settings_that_lose_acknowledged_work_are_named() {
    let server = PostgresServer::start().unwrap_or_else(|e| panic!("{e}"));
    runtime().block_on(async {
        let client = support::raw_client(server.url()).await;
        client
            .batch_execute("ALTER DATABASE postgres SET synchronous_commit = off")
            .await
            .expect("ALTER DATABASE");
        // Every new session of the database runs with it.
        let store = PostgresStore::connect(&server.url_of("weak"))
            .await
            .expect("connect");
        let p = store.persistence();
        assert!(
            !p.is_synced() && p.to_string().contains("synchronous_commit"),
            "{p}"
        );
    });
}
