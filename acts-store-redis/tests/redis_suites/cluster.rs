//! `RedisStore` on a Redis Cluster (3 masters, 3 replicas, private, on
//! loopback ports): the whole conformance suite passes, with each
//! namespace (a location) in its own slot — spread over the masters.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use acts_store::{KvStore, StoreResult};
use acts_store_redis::{RedisOptions, RedisStore};
use acts_testkit::StoreFactory;
use acts_testkit::conformance::run_all;
use acts_testkit::redis_cluster::RedisCluster;
use async_trait::async_trait;

struct ClusterFactory {
    nodes: Vec<String>,
    next: AtomicU64,
}

#[async_trait]
impl StoreFactory for ClusterFactory {
    fn new_location(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        format!("cluster-conformance-{n}")
    }

    async fn open(&self, location: &str) -> StoreResult<Arc<dyn KvStore>> {
        Ok(Arc::new(
            RedisStore::connect_cluster(&self.nodes, location, RedisOptions::default()).await?,
        ))
    }
}

#[test]
fn the_conformance_suite_passes_on_a_redis_cluster() {
    let cluster = RedisCluster::start().unwrap_or_else(|e| panic!("{e}"));
    let factory = ClusterFactory {
        nodes: cluster.node_urls(),
        next: AtomicU64::new(0),
    };
    // Not the durable cases: a location reopened is the same namespace on
    // live servers (persistence is the servers' setting), and damage is
    // the single-server suite's.
    let failed: Vec<String> = run_all(factory, false)
        .into_iter()
        .filter_map(|(name, r)| r.err().map(|e| format!("{name}: {e}")))
        .collect();
    assert!(failed.is_empty(), "failed on the cluster: {failed:#?}");
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    rt.block_on(writes_wait_for_replicas_when_asked(&cluster.node_urls()));
    drop(cluster);
}

/// `wait_replicas`: a write waits until that many replicas have it; one
/// that fewer replicas acknowledged is refused as unavailable; members
/// opened with `with_namespace` share the connection and the setting.
async fn writes_wait_for_replicas_when_asked(nodes: &[String]) {
    use acts_store::{BatchOp, Condition, ErrorKind};
    let one = RedisOptions {
        wait_replicas: 1,
        ..RedisOptions::default()
    };
    let store = RedisStore::connect_cluster(nodes, "wait-one", one)
        .await
        .expect("connects");
    store
        .put(b"k", b"v")
        .await
        .expect("one replica acknowledges");
    let other = store.with_namespace("wait-one-other").expect("a namespace");
    other
        .put(b"k", b"w")
        .await
        .expect("one replica acknowledges");
    assert_eq!(
        store.get(b"k").await.expect("get").as_deref(),
        Some(&b"v"[..])
    );
    assert_eq!(
        other.get(b"k").await.expect("get").as_deref(),
        Some(&b"w"[..])
    );
    // A condition that fails writes nothing and waits for nothing.
    let applied = store
        .batch_if(
            vec![Condition::equals(b"k".to_vec(), b"nope".to_vec())],
            vec![BatchOp::put(b"k".to_vec(), b"x".to_vec())],
        )
        .await
        .expect("answers");
    assert!(!applied);
    let two = RedisOptions {
        wait_replicas: 2,
        wait_timeout: std::time::Duration::from_millis(200),
        ..RedisOptions::default()
    };
    let store = RedisStore::connect_cluster(nodes, "wait-two", two)
        .await
        .expect("connects");
    let err = store.put(b"k", b"v").await.expect_err("only one replica");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("1 of 2 replica"), "{err}");
}

#[test]
fn a_bad_cluster_url_is_refused_with_what_to_write() {
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let err = rt
        .block_on(RedisStore::connect_cluster(
            &["not a url".to_owned()],
            "ns",
            RedisOptions::default(),
        ))
        .expect_err("refused");
    assert!(err.to_string().contains("redis://HOST:PORT"), "{err}");
    let err = rt
        .block_on(RedisStore::connect_cluster(
            &["redis://127.0.0.1:1/".to_owned()],
            "bad{ns}",
            RedisOptions::default(),
        ))
        .expect_err("refused");
    assert!(err.to_string().contains("must not contain"), "{err}");
}
