//! What the store says and refuses about the server's settings, on a real
//! private `redis-server`: an evicting server is refused at open (unless
//! allowed) with the setting named; switched to an evicting policy while
//! running, the next write is refused and `health` says why, and switched
//! back, writes are taken again; persistence weaker than an fsynced AOF
//! is reported with what a crash loses; an fsynced AOF is `Synced`.

use std::time::Duration;

use acts_store::{BatchOp, ErrorKind, KvStore, Persistence};
use acts_store_redis::{RedisOptions, RedisStore};
use acts_testkit::redis_server::{Persistence as ServerPersistence, RedisServer};

async fn config_set(url: &str, key: &str, value: &str) {
    let client = redis::Client::open(url).expect("a Redis URL");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connects");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(key)
        .arg(value)
        .query_async(&mut conn)
        .await
        .expect("CONFIG SET");
}

fn options() -> RedisOptions {
    RedisOptions {
        // The background re-check must not be what the test sees: it
        // relies on `health` and on the write's own check.
        settings_interval: Duration::from_secs(3600),
        ..RedisOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicting_server_is_refused_at_open_unless_allowed() {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    config_set(server.url(), "maxmemory-policy", "allkeys-lru").await;
    let err = RedisStore::connect_with(server.url(), "evict", options())
        .await
        .expect_err("an evicting server is refused");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let text = err.to_string();
    assert!(
        text.contains("maxmemory-policy allkeys-lru")
            && text.contains("noeviction")
            && text.contains("allow_eviction"),
        "{text}"
    );
    let allowed = RedisStore::connect_with(
        server.url(),
        "evict",
        RedisOptions {
            allow_eviction: true,
            ..options()
        },
    )
    .await
    .expect("allowed when the operator insists");
    allowed
        .batch(vec![BatchOp::put("k", "v")])
        .await
        .expect("writes are taken");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_switched_while_running_refuses_the_next_write() {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let store = RedisStore::connect_with(server.url(), "switch", options())
        .await
        .expect("a noeviction server opens");
    store
        .batch(vec![BatchOp::put("before", "1")])
        .await
        .expect("taken");
    config_set(server.url(), "maxmemory-policy", "allkeys-lru").await;
    let why = store.health().await.expect_err("not healthy");
    assert!(why.to_string().contains("allkeys-lru"), "{why}");
    let refused = store
        .batch(vec![BatchOp::put("after", "1")])
        .await
        .expect_err("the next write is refused");
    assert_eq!(refused.kind(), ErrorKind::Unavailable);
    assert!(
        refused.to_string().contains("maxmemory-policy"),
        "{refused}"
    );
    assert_eq!(store.get(b"after").await.expect("reads still work"), None);
    config_set(server.url(), "maxmemory-policy", "noeviction").await;
    store.health().await.expect("healthy again");
    store
        .batch(vec![BatchOp::put("after", "1")])
        .await
        .expect("taken again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistence_is_reported_as_the_server_is_set_up() {
    let bare = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let store = RedisStore::connect_with(bare.url(), "p", options())
        .await
        .expect("opens");
    match store.persistence() {
        Persistence::Weak(why) => {
            assert!(why.contains("keeps nothing on disk"), "{why}");
            assert!(why.contains("appendfsync always"), "{why}");
        }
        other => panic!("not weak: {other:?}"),
    }
    config_set(bare.url(), "appendonly", "yes").await;
    config_set(bare.url(), "appendfsync", "everysec").await;
    store.health().await.expect("healthy");
    assert!(
        matches!(store.persistence(), Persistence::Weak(w) if w.contains("everysec")),
        "{:?}",
        store.persistence()
    );
    let synced = RedisServer::start_with(ServerPersistence::AppendFsyncAlways)
        .unwrap_or_else(|e| panic!("{e}"));
    let store = RedisStore::connect_with(synced.url(), "p", options())
        .await
        .expect("opens");
    assert_eq!(store.persistence(), Persistence::Synced);
}
