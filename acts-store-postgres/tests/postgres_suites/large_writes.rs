//! A large write (hundreds of keys) takes the update-then-insert path; when
//! another transaction inserts one of its keys meanwhile it falls back to
//! the upsert and still succeeds, last writer winning — decided by locks,
//! not by timing: the other transaction's insert is held open until the
//! store's write waits on it.

use crate::support;

use acts_store::{BatchOp, Condition, KvStore};
use acts_store_postgres::PostgresStore;
use acts_testkit::postgres_server::PostgresServer;
use support::{raw_client, wait_for_count};

fn key(i: u32) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_write_meeting_a_concurrent_insert_of_its_key_still_lands() {
    let server = tokio::task::block_in_place(PostgresServer::shared_or_start)
        .unwrap_or_else(|e| panic!("{e}"));
    let ns = format!("large_{}", std::process::id());
    let store = PostgresStore::connect(&server.url_of(&ns))
        .await
        .expect("connect");
    // Half the keys exist already (updated), half are new (inserted).
    let old: Vec<BatchOp> = (0..150)
        .map(|i| BatchOp::put(key(i), b"old".to_vec()))
        .collect();
    store.batch(old).await.expect("the first half");

    let mut raw = raw_client(server.url()).await;
    let other = raw.transaction().await.expect("BEGIN");
    other
        .execute(
            &format!("INSERT INTO {} (k, v) VALUES ($1, $2)", store.table()),
            &[&key(200), &b"other".to_vec()],
        )
        .await
        .expect("an insert of one of the new keys, not committed");
    let xid: String = other
        .query_one("SELECT pg_current_xact_id()::text", &[])
        .await
        .expect("its transaction id")
        .get(0);

    let writer = tokio::spawn({
        let store = store.clone();
        async move {
            let ops = (0..300)
                .map(|i| BatchOp::put(key(i), b"store".to_vec()))
                .collect();
            store.batch(ops).await
        }
    });
    // The store's write waits on the other transaction's row lock.
    let watch = raw_client(server.url()).await;
    wait_for_count(
        &watch,
        "SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' \
         AND transactionid::text = $1 AND NOT granted",
        &[&xid],
        1,
        "the store's write waiting on the other transaction",
    )
    .await;
    other.commit().await.expect("COMMIT");
    writer
        .await
        .expect("the writer")
        .expect("the large write lands despite the concurrent insert");
    for i in 0..300 {
        assert_eq!(
            store.get(&key(i)).await.expect("get").as_deref(),
            Some(&b"store"[..]),
            "key {i}: the store's write came last"
        );
    }

    // Under a conditional batch's table lock the same large write
    // meets no other writer.
    let ops = (0..400)
        .map(|i| BatchOp::put(key(i), b"cond".to_vec()))
        .collect();
    let applied = store
        .batch_if(vec![Condition::equals(key(0), b"store".to_vec())], ops)
        .await
        .expect("batch_if");
    assert!(applied);
    let all = store
        .scan(acts_store::ScanRange::all())
        .await
        .expect("scan");
    assert_eq!(all.len(), 400);
    assert!(all.iter().all(|p| p.value == b"cond"));
}
