//! The pool hands out the connection it got back last: one caller's
//! writes, one after the other, stay on one server backend (warm: its
//! prepared statements, its caches of the table) however many
//! connections the pool holds — measured in benches/README.md, a burst
//! of process starts is a quarter faster than when every statement takes
//! the connection idle the longest.
//!
//! Several connections are opened for certain, without timing: writes
//! are held on a lock of the table from another client until that many
//! wait on it.

use crate::support;

use acts_store::{BatchOp, KvStore};
use acts_store_postgres::PostgresStore;
use acts_testkit::postgres_server::PostgresServer;
use support::{raw_client, wait_for_count};

const HELD: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_one_after_the_other_stay_on_the_connection_used_last() {
    let server = tokio::task::block_in_place(PostgresServer::shared_or_start)
        .unwrap_or_else(|e| panic!("{e}"));
    let ns = format!("pool_{}", std::process::id());
    let app = format!("acts_pool_test_{}", std::process::id());
    let store = PostgresStore::connect(&format!("{}&application_name={app}", server.url_of(&ns)))
        .await
        .expect("connect");

    let mut raw = raw_client(server.url()).await;
    let lock = raw.transaction().await.expect("BEGIN");
    lock.batch_execute(&format!(
        "LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE",
        store.table()
    ))
    .await
    .expect("a lock every writer of the table waits on");
    let held: Vec<_> = (0..HELD)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .batch(vec![BatchOp::put(format!("held{i}"), b"v".to_vec())])
                    .await
            })
        })
        .collect();
    // Each waiting write holds a connection of its own.
    let watch = raw_client(server.url()).await;
    wait_for_count(
        &watch,
        "SELECT count(*) FROM pg_stat_activity \
         WHERE application_name = $1 AND wait_event_type = 'Lock'",
        &[&app],
        HELD as i64,
        "writes waiting on the lock",
    )
    .await;
    lock.commit().await.expect("COMMIT");
    for h in held {
        h.await.expect("a held write").expect("it lands");
    }

    // Now the pool holds (at least) that many idle connections.
    let since: std::time::SystemTime = watch
        .query_one("SELECT clock_timestamp()", &[])
        .await
        .expect("the server's clock")
        .get(0);
    for i in 0..3 * HELD {
        store
            .batch(vec![BatchOp::put(format!("next{i}"), b"v".to_vec())])
            .await
            .expect("a write");
    }
    let backends: Vec<i32> = watch
        .query(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query_start > $2",
            &[&app, &since],
        )
        .await
        .expect("pg_stat_activity")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        backends.len(),
        1,
        "{} writes one after the other ran on backends {backends:?}",
        3 * HELD
    );
    assert_eq!(
        store
            .scan_prefix(b"next", None, false)
            .await
            .expect("scan")
            .len(),
        3 * HELD
    );
}
