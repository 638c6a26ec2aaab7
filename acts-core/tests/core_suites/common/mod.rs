//! Helpers shared by the engine's integration tests.
#![allow(dead_code)] // each test file uses its own subset

use std::sync::Arc;
use std::time::Duration;

use acts_core::model::Vars;
use acts_core::scheduler::Message;
use acts_store::{KvStore, MemoryStore};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

/// How long a test waits for something that must happen (a hang guard,
/// never what decides an outcome).
pub const GUARD: Duration = Duration::from_secs(60);

/// A JSON object as vars.
pub fn vars(v: Value) -> Vars {
    v.as_object().cloned().unwrap_or_default()
}

/// The next item on a channel (within the hang guard).
pub async fn recv<T>(rx: &mut UnboundedReceiver<T>) -> T {
    tokio::time::timeout(GUARD, rx.recv())
        .await
        .expect("something arrives (hang guard)")
        .expect("the channel is open")
}

/// The next message that passes `pred` (earlier ones are dropped).
pub async fn recv_where(
    rx: &mut UnboundedReceiver<Message>,
    pred: impl Fn(&Message) -> bool,
) -> Message {
    loop {
        let m = recv(rx).await;
        if pred(&m) {
            return m;
        }
    }
}

/// An irq act announced.
pub fn irq_created(m: &Message) -> bool {
    m.r#type == "act" && m.state == "created" && m.uses.as_deref() == Some("acts.core.irq")
}

/// The message that ends process `pid`.
pub fn ends(pid: &str) -> impl Fn(&Message) -> bool + '_ {
    move |m| m.pid == pid && m.r#type == "workflow" && m.state != "created"
}

/// A fresh store for one test: in memory, or — with
/// `ACTS_TEST_STORE=redb` or `=rocksdb` — a file store (syncing every
/// commit) in a new temporary folder, or with `=redis` a fresh namespace on
/// the server `ACTS_TEST_REDIS_URL` names, or with `=redis-cluster` a fresh
/// namespace on the Redis Cluster `ACTS_TEST_REDIS_CLUSTER` (HOST:PORT,...)
/// names, or with `=postgres` a fresh namespace (table) on the server
/// `ACTS_TEST_POSTGRES_URL` names (`scripts/test.sh` runs the engine
/// suites on each).
pub async fn store() -> Arc<dyn KvStore> {
    let dir = || {
        tempfile::Builder::new()
            .prefix("acts-test-store-")
            .tempdir()
            .expect("a temporary folder")
            .keep()
    };
    match std::env::var("ACTS_TEST_STORE").as_deref() {
        Ok("redb") => Arc::new(
            acts_store_redb::RedbStore::open(dir().join("acts.db"), Default::default())
                .expect("redb opens"),
        ),
        Ok("rocksdb") => Arc::new(
            acts_store_rocksdb::RocksStore::open(dir().join("rocks"), Default::default())
                .expect("rocksdb opens"),
        ),
        Ok("redis") => {
            let url = std::env::var("ACTS_TEST_REDIS_URL")
                .expect("ACTS_TEST_STORE=redis needs ACTS_TEST_REDIS_URL");
            let namespace = format!("t{}", acts_core::tree::long_id());
            Arc::new(
                acts_store_redis::RedisStore::connect(&url, &namespace)
                    .await
                    .expect("redis connects"),
            )
        }
        Ok("redis-cluster") => {
            let nodes: Vec<String> = std::env::var("ACTS_TEST_REDIS_CLUSTER")
                .expect("ACTS_TEST_STORE=redis-cluster needs ACTS_TEST_REDIS_CLUSTER=HOST:PORT,...")
                .split(',')
                .map(|a| format!("redis://{a}/"))
                .collect();
            let namespace = format!("t{}", acts_core::tree::long_id());
            Arc::new(
                acts_store_redis::RedisStore::connect_cluster(
                    &nodes,
                    &namespace,
                    Default::default(),
                )
                .await
                .expect("the redis cluster connects"),
            )
        }
        Ok("postgres") => {
            let url = std::env::var("ACTS_TEST_POSTGRES_URL")
                .expect("ACTS_TEST_STORE=postgres needs ACTS_TEST_POSTGRES_URL");
            let namespace = format!("t{}", acts_core::tree::long_id());
            Arc::new(
                acts_store_postgres::PostgresStore::connect_with(
                    &url,
                    &namespace,
                    Default::default(),
                )
                .await
                .expect("postgres connects"),
            )
        }
        Ok("memory") | Err(_) => Arc::new(MemoryStore::new()),
        Ok(other) => panic!(
            "ACTS_TEST_STORE={other}: use memory, redb, rocksdb, redis, redis-cluster or postgres"
        ),
    }
}

/// Waits (hang guard only) until `engine` has nothing in progress.
pub async fn settle(engine: &acts_core::engine::Engine) {
    tokio::time::timeout(GUARD, async {
        while !engine.runtime().is_idle() {
            // Not a spin: the waited-for work gets the cores.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the engine settles (hang guard)");
}

/// An engine on `kv`, on the engine clock `clock` when one is given.
pub async fn engine_on(
    kv: Arc<dyn KvStore>,
    clock: Option<&acts_core::time::ManualClock>,
) -> acts_core::engine::Engine {
    let builder = acts_core::engine::Engine::builder().store(kv);
    let builder = match clock {
        Some(c) => builder.clock(Arc::new(c.clone())),
        None => builder,
    };
    builder.start().await.expect("engine starts")
}

/// An engine on the test store with `yaml` deployed, process of `model`
/// started and run to its end: the engine and the process's end message.
pub async fn run_to_end(yaml: &str, model: &str) -> (acts_core::engine::Engine, Message) {
    run_with_vars(yaml, model, Vars::new()).await
}

/// [`run_to_end`] with `start` as the process's start variables.
pub async fn run_with_vars(
    yaml: &str,
    model: &str,
    start: Vars,
) -> (acts_core::engine::Engine, Message) {
    let engine = engine_on(store().await, None).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(yaml).await.expect("deploys");
    let mut rx = engine
        .channel(acts_core::engine::ChannelOptions::default().with_type("workflow"))
        .subscribe();
    let p = exec.proc().start(model, start).await.expect("starts");
    let end = recv_where(&mut rx, ends(&p.pid)).await;
    (engine, end)
}

/// The tasks of process `pid` waiting in an interrupt (their ids).
pub async fn waiting(exec: &acts_core::engine::Executor, pid: &str) -> Vec<String> {
    exec.task()
        .list(pid)
        .await
        .expect("tasks")
        .into_iter()
        .filter(|t| t.state == acts_core::scheduler::TaskState::Interrupt)
        .map(|t| t.tid)
        .collect()
}

/// Runs `drive` on a crash-recording store, then again on the store as a
/// crash after each of its committed batches left it: every run must end
/// with processes a, b and c completed, each with one answered act
/// (`drive` returns `(pid, state, answered)` per process).
pub async fn after_every_crash_cut<F, Fut>(drive: F)
where
    F: Fn(Arc<dyn KvStore>) -> Fut,
    Fut: std::future::Future<Output = Vec<(String, acts_core::scheduler::TaskState, usize)>>,
{
    let recorded = Arc::new(acts_testkit::CrashStore::new());
    let done = drive(recorded.clone()).await;
    let expected: Vec<(String, acts_core::scheduler::TaskState, usize)> = ["a", "b", "c"]
        .iter()
        .map(|p| (p.to_string(), acts_core::scheduler::TaskState::Completed, 1))
        .collect();
    assert_eq!(done, expected);
    let batches = recorded.committed().await;
    assert!(batches > 6, "{batches} batches recorded");
    for k in 0..=batches {
        let cut = Arc::new(recorded.recover_prefix(k).await);
        let done = drive(cut).await;
        assert_eq!(done, expected, "crash after batch {k} of {batches}");
    }
}
