//! `RedisStore` on the master three Redis Sentinels watch (a master and
//! its replica, private, on loopback ports): the whole conformance suite
//! passes through the sentinels, and a failover — the master killed, the
//! replica promoted by the sentinels — is followed by the store on its
//! own, losing no write it acknowledged with `wait_replicas`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use acts_store::{ErrorKind, KvStore, StoreResult};
use acts_store_redis::{RedisOptions, RedisStore};
use acts_testkit::StoreFactory;
use acts_testkit::conformance::run_all;
use acts_testkit::redis_sentinel::{MASTER, RedisSentinel};
use async_trait::async_trait;

/// Hang guard only: a failover that takes longer has hung.
const HANG_GUARD: Duration = Duration::from_secs(90);

struct SentinelFactory {
    sentinels: Vec<String>,
    next: AtomicU64,
}

#[async_trait]
impl StoreFactory for SentinelFactory {
    fn new_location(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        format!("sentinel-conformance-{n}")
    }

    async fn open(&self, location: &str) -> StoreResult<Arc<dyn KvStore>> {
        Ok(Arc::new(
            RedisStore::connect_sentinel(
                &self.sentinels,
                MASTER,
                location,
                RedisOptions::default(),
            )
            .await?,
        ))
    }
}

#[test]
fn the_conformance_suite_passes_through_sentinel() {
    let group = RedisSentinel::start().unwrap_or_else(|e| panic!("{e}"));
    let factory = SentinelFactory {
        sentinels: group.sentinel_urls(),
        next: AtomicU64::new(0),
    };
    // Not the durable cases: a location reopened is the same namespace on
    // a live server (persistence is the server's setting).
    let failed: Vec<String> = run_all(factory, false)
        .into_iter()
        .filter_map(|(name, r)| r.err().map(|e| format!("{name}: {e}")))
        .collect();
    assert!(failed.is_empty(), "failed through sentinel: {failed:#?}");
    // A master name the sentinels do not know: retryable (a failover
    // looks the same for a moment), and the message says both.
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let err = rt
        .block_on(RedisStore::connect_sentinel(
            &group.sentinel_urls(),
            "nosuch",
            "ns",
            RedisOptions::default(),
        ))
        .expect_err("no master is called nosuch");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("master 'nosuch'"), "{err}");
    assert!(err.to_string().contains("wrong master name"), "{err}");
}

fn options() -> RedisOptions {
    RedisOptions {
        op_timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_millis(500),
        wait_replicas: 1,
        wait_timeout: Duration::from_secs(1),
        ..RedisOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_follows_a_failover_and_keeps_what_it_acknowledged() {
    let mut group =
        tokio::task::block_in_place(RedisSentinel::start).unwrap_or_else(|e| panic!("{e}"));
    let store = RedisStore::connect_sentinel(&group.sentinel_urls(), MASTER, "failover", options())
        .await
        .expect("connects through the sentinels");
    for i in 0..100 {
        store
            .put(format!("k{i}").as_bytes(), b"v")
            .await
            .expect("acknowledged once the replica has it");
    }
    // A write the stopped replica cannot have is applied on the master but
    // not acknowledged.
    let replica = group.replica_port().expect("the replica");
    group.freeze(replica, true).expect("stop the replica");
    let err = store
        .put(b"unacked", b"v")
        .await
        .expect_err("no replica can acknowledge it");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.message().contains("wait_replicas"), "{err}");
    group.freeze(replica, false).expect("continue the replica");

    let old = group.kill_master().expect("kill the master");
    // The connection to the killed master fails retryably; the store then
    // asks the sentinels again.
    let err = store
        .put(b"during", b"v")
        .await
        .expect_err("the master is gone");
    assert!(err.is_retryable(), "{err} should be retryable");
    let new = tokio::task::block_in_place(|| {
        let new = group.wait_failover(old)?;
        // With wait_replicas=1 the new master needs a replica: the old
        // one, back and turned into one by the sentinels.
        group.restart(old)?;
        Ok::<_, String>(new)
    })
    .unwrap_or_else(|e| panic!("the failover: {e}"));
    assert_ne!(new, old);
    let started = Instant::now();
    loop {
        match store.put(b"after", b"v").await {
            Ok(()) => break,
            Err(e) => {
                assert!(e.is_retryable(), "{e} should be retryable");
                assert!(
                    started.elapsed() < HANG_GUARD,
                    "the store never wrote to the promoted master: {e}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    for i in 0..100 {
        assert_eq!(
            store
                .get(format!("k{i}").as_bytes())
                .await
                .expect("read")
                .as_deref(),
            Some(&b"v"[..]),
            "k{i} was acknowledged before the failover"
        );
    }
    assert_eq!(
        store.get(b"after").await.expect("read").as_deref(),
        Some(&b"v"[..])
    );
    assert_eq!(
        group.master_port().expect("the master"),
        new,
        "the store wrote to the promoted master"
    );
}
