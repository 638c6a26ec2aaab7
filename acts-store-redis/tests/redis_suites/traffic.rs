//! The store counts its traffic (`KvStore::io`) on a real private
//! `redis-server`: a read and a batch are one round trip each, the bytes
//! out hold what was sent, the bytes in what came back, and an idle store
//! checks the server's settings (its only idle traffic) on its interval.

use std::time::Duration;

use acts_store::{BatchOp, KvStore, StoreIo};
use acts_store_redis::{RedisOptions, RedisStore};
use acts_testkit::redis_server::RedisServer;

fn io(store: &RedisStore) -> StoreIo {
    store.io().expect("a Redis store counts its traffic")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_and_batches_are_one_round_trip_each_and_their_bytes_are_counted() {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    // No settings checks in the span of the test (a long interval).
    let options = RedisOptions {
        settings_interval: Duration::from_secs(3600),
        ..RedisOptions::default()
    };
    let store = RedisStore::connect_with(server.url(), "traffic", options)
        .await
        .expect("connects");
    let value = vec![7u8; 10_000];
    // The first batch also loads the store's script into the server
    // (EVALSHA, NOSCRIPT, SCRIPT LOAD, EVALSHA: three round trips);
    // every later one is one EVALSHA.
    let before = io(&store);
    store
        .batch(vec![BatchOp::put(b"warm".to_vec(), b"up".to_vec())])
        .await
        .expect("the first batch");
    let first = io(&store).since(&before);
    assert!(first.round_trips <= 3, "{first:?}");

    let before = io(&store);
    store
        .batch(vec![
            BatchOp::put(b"a".to_vec(), value.clone()),
            BatchOp::put(b"b".to_vec(), b"small".to_vec()),
        ])
        .await
        .expect("batch");
    let batch = io(&store).since(&before);
    assert_eq!(batch.round_trips, 1, "{batch:?}");
    assert_eq!(batch.commands, 1, "{batch:?}");
    assert!(batch.bytes_out > 10_000, "the value went out: {batch:?}");

    let before = io(&store);
    let got = store.get(b"a").await.expect("get");
    assert_eq!(got.as_deref(), Some(&value[..]));
    let read = io(&store).since(&before);
    assert_eq!(read.round_trips, 1, "{read:?}");
    assert!(read.bytes_in >= 10_000, "the value came back: {read:?}");
    assert!(
        read.bytes_out < 1_000,
        "a read sends its key only: {read:?}"
    );
}
