//! Connection faults against a real `redis-server`: stopped (killed) and
//! restarted mid-run. While it is down every call fails fast with a
//! retryable error; once it is back, calls succeed again, and with an
//! fsync-always AOF nothing acknowledged is lost.

use std::time::Duration;

use acts_store::{BatchOp, ErrorKind, KvStore, ScanRange};
use acts_store_redis::{RedisOptions, RedisStore};
use acts_testkit::redis_server::{Persistence, RedisServer};

/// Hang guard only: a call that outlives this has hung.
const HANG_GUARD: Duration = Duration::from_secs(30);

fn options() -> RedisOptions {
    RedisOptions {
        op_timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_millis(500),
        reconnect_retries: 1,
        ..RedisOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_stopped_and_restarted_mid_run() {
    let mut server =
        RedisServer::start_with(Persistence::AppendFsyncAlways).unwrap_or_else(|e| panic!("{e}"));
    let store = RedisStore::connect_with(server.url(), "faults", options())
        .await
        .unwrap();
    store
        .batch(vec![
            BatchOp::put("before/1", "a"),
            BatchOp::put("before/2", "b"),
        ])
        .await
        .unwrap();

    server.stop();

    // Every kind of call fails with a retryable error, and none hangs.
    let down = tokio::time::timeout(HANG_GUARD, async {
        vec![
            store.get(b"before/1").await.map(|_| ()),
            store.put(b"during", b"x").await,
            store.scan(ScanRange::all()).await.map(|_| ()),
            store.get_many(&[b"before/2".to_vec()]).await.map(|_| ()),
            store.batch(vec![BatchOp::delete("before/1")]).await,
        ]
    })
    .await
    .expect("calls against a stopped server must not hang");
    for (i, result) in down.iter().enumerate() {
        let err = result
            .as_ref()
            .expect_err("a call against a stopped server must fail");
        assert!(
            err.is_retryable(),
            "call {i}: {err} should be retryable (kind {:?})",
            err.kind()
        );
        assert!(
            matches!(err.kind(), ErrorKind::Unavailable | ErrorKind::Timeout),
            "{err}"
        );
    }

    server.restart().unwrap();

    // The connection manager reconnects; poll (bounded) until it has.
    let back = tokio::time::timeout(HANG_GUARD, async {
        loop {
            match store.get(b"before/1").await {
                Ok(value) => return value,
                Err(e) => {
                    assert!(e.is_retryable(), "while reconnecting: {e}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    })
    .await
    .expect("the store reconnects after the server returns");
    assert_eq!(
        back,
        Some(b"a".to_vec()),
        "acknowledged writes survive the restart"
    );

    // Nothing from the failed calls was applied; new writes work.
    store.put(b"after", b"z").await.unwrap();
    let keys: Vec<Vec<u8>> = store
        .scan(ScanRange::all())
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.key)
        .collect();
    assert_eq!(
        keys,
        vec![
            b"after".to_vec(),
            b"before/1".to_vec(),
            b"before/2".to_vec()
        ]
    );
}

#[tokio::test]
async fn connecting_to_a_server_that_is_down_is_unavailable() {
    let mut server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let url = server.url().to_owned();
    server.stop();
    let err = tokio::time::timeout(
        HANG_GUARD,
        RedisStore::connect_with(&url, "down", options()),
    )
    .await
    .expect("connect must not hang")
    .unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert!(err.to_string().contains(&url), "names the URL: {err}");
}

#[tokio::test]
async fn bad_urls_and_namespaces_are_invalid_input() {
    let err = RedisStore::connect("http://localhost", "ns")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let err = RedisStore::connect("redis://127.0.0.1:1", "a{b}")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("namespace"), "{err}");
}

#[tokio::test]
async fn namespaces_do_not_see_each_other() {
    let server = RedisServer::shared_or_start().unwrap_or_else(|e| panic!("{e}"));
    let ns = |n: &str| format!("iso-{}-{n}", std::process::id());
    let a = RedisStore::connect(server.url(), &ns("a")).await.unwrap();
    let b = RedisStore::connect(server.url(), &ns("b")).await.unwrap();
    a.put(b"k", b"from a").await.unwrap();
    assert_eq!(b.get(b"k").await.unwrap(), None);
    assert!(b.scan(ScanRange::all()).await.unwrap().is_empty());
    assert_eq!(a.scan(ScanRange::all()).await.unwrap().len(), 1);
}
