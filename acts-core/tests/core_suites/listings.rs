//! Listings beyond processes: tasks across processes ([`TaskQuery`]: by
//! the processes' filters and the tasks' state, kind, node, package and
//! key, paged with a cursor that may end inside a process, counted; the
//! inbox is one such query) and deliveries of durable channels
//! ([`DeliveryQuery`]: by channel, state, process, paged and counted from
//! an index — the reads counted on the testkit). Runs on every backend
//! (`ACTS_TEST_STORE`) but the counting test.

use crate::common;

use std::sync::Arc;

use acts_core::engine::{
    ChannelOptions, DeliveryQuery, DeliveryState, Engine, EngineError, ProcessQuery, TaskQuery,
};
use acts_core::model::Vars;
use acts_core::scheduler::{MessageType, TaskState};
use acts_store::{KvStore, MemoryStore};
use acts_testkit::CountingStore;
use common::{engine_on, irq_created, recv_where, store, vars, waiting};
use serde_json::json;

/// Two interrupts in a row: a review, then shipping.
const ORDERS: &str = r#"
id: orders
ver: "1"
steps:
  - id: review
    uses: acts.core.irq
    params: { key: review }
  - id: ship
    uses: acts.core.irq
    params: { key: ship }
"#;

/// Starts orders o0..o{n-1}, answers the review of those in `reviewed`,
/// and returns once every one waits (flushed).
async fn orders(engine: &Engine, n: usize, reviewed: &[&str]) {
    let exec = engine.executor();
    exec.model().deploy_yaml(ORDERS).await.expect("deploys");
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    for i in 0..n {
        exec.proc()
            .start("orders", vars(json!({ "pid": format!("o{i}") })))
            .await
            .expect("starts");
    }
    let last = format!("o{}", n - 1);
    recv_where(&mut rx, |m| m.pid == last && irq_created(m)).await;
    for pid in reviewed {
        let tid = waiting(&exec, pid).await.pop().expect("the review waits");
        exec.act()
            .complete(pid, &tid, Vars::new())
            .await
            .expect("reviewed");
        recv_where(&mut rx, |m| {
            m.pid == *pid && irq_created(m) && m.key.as_deref() == Some("ship")
        })
        .await;
    }
    engine.storage().flush().await.expect("flushed");
}

/// Every page of `q` with pages of `n`: `(pid, tid)` in order.
async fn all_task_pages(engine: &Engine, q: TaskQuery, n: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = engine
            .executor()
            .task()
            .find(&q.clone().limit(n).after(cursor))
            .await
            .expect("a page");
        assert!(page.items.len() <= n);
        out.extend(page.items.into_iter().map(|t| (t.pid, t.tid)));
        match page.next {
            Some(c) => cursor = Some(c),
            None => return out,
        }
    }
}

#[tokio::test]
async fn tasks_are_found_across_processes_and_paged_inside_one() {
    let kv = store().await;
    let engine = engine_on(kv, None).await;
    let exec = engine.executor();
    orders(&engine, 5, &["o1", "o3"]).await;

    // The open interrupts: three reviews, two shipments, by process.
    let inbox = all_task_pages(&engine, TaskQuery::inbox(), 100).await;
    let pids: Vec<&str> = inbox.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(pids, ["o0", "o1", "o2", "o3", "o4"]);
    let ship = {
        let mut v = TaskQuery::inbox();
        v.key = Some("ship".into());
        v
    };
    let shipping = exec.task().find(&ship).await.unwrap();
    assert_eq!(
        shipping
            .items
            .iter()
            .map(|t| (t.pid.as_str(), t.key.as_deref(), t.state))
            .collect::<Vec<_>>(),
        [
            ("o1", Some("ship"), TaskState::Interrupt),
            ("o3", Some("ship"), TaskState::Interrupt)
        ]
    );
    assert_eq!(exec.task().count(&ship).await.unwrap(), 2);
    assert_eq!(exec.task().count(&TaskQuery::inbox()).await.unwrap(), 5);
    // The inbox as pairs agrees.
    let boxed: Vec<(String, String)> = exec
        .task()
        .inbox(100)
        .await
        .unwrap()
        .into_iter()
        .map(|(p, t)| (p.pid, t.tid))
        .collect();
    assert_eq!(boxed, inbox);

    // Completed steps of one kind.
    let reviewed = {
        let mut v = TaskQuery::new();
        v.state = Some(TaskState::Completed);
        v.kind = Some(MessageType::Step);
        v.node = Some("review".into());
        v
    };
    let done: Vec<String> = exec
        .task()
        .find(&reviewed)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|t| t.pid)
        .collect();
    assert_eq!(done, ["o1", "o3"]);

    // Every task, in pages of 3 (ending inside processes), is each
    // process's tasks in order, once; newest process first reverses the
    // processes only.
    let mut want = Vec::new();
    for i in 0..5 {
        let pid = format!("o{i}");
        for t in exec.task().list(&pid).await.unwrap() {
            want.push((pid.clone(), t.tid));
        }
    }
    assert!(want.len() > 15, "several tasks per process");
    assert_eq!(all_task_pages(&engine, TaskQuery::new(), 3).await, want);
    assert_eq!(all_task_pages(&engine, TaskQuery::new(), 1).await, want);
    let newest = TaskQuery::new().in_processes({
        let mut v = ProcessQuery::new();
        v.descending = true;
        v
    });
    let got = all_task_pages(&engine, newest, 4).await;
    let first_pid: Vec<&str> = got.iter().map(|(p, _)| p.as_str()).take(1).collect();
    assert_eq!(first_pid, ["o4"]);
    assert_eq!(got.len(), want.len());

    // Other processes' filters narrow the walk; none match.
    let none = TaskQuery::new().in_processes(ProcessQuery::new().model("nope"));
    assert!(exec.task().find(&none).await.unwrap().items.is_empty());
    // A cursor that no query returned is refused.
    assert!(matches!(
        exec.task()
            .find(&TaskQuery::new().after(Some("zz".into())))
            .await,
        Err(EngineError::Query(_))
    ));
    // Hostile cursors (a multi-byte character splitting a hex pair) are
    // refused, never a panic — for processes, tasks and deliveries alike.
    for c in ["aéa", "éé", "0g"] {
        assert!(matches!(
            exec.task()
                .find(&TaskQuery::new().after(Some(c.into())))
                .await,
            Err(EngineError::Query(_))
        ));
        assert!(matches!(
            exec.proc()
                .find(&ProcessQuery::new().after(Some(c.into())))
                .await,
            Err(EngineError::Query(_))
        ));
        assert!(matches!(
            exec.msg()
                .find(&DeliveryQuery::new().after(Some(c.into())))
                .await,
            Err(EngineError::Query(_))
        ));
    }
    engine.close().await;
}

#[tokio::test]
async fn a_users_task_listing_holds_only_what_they_may_answer() {
    use acts_core::engine::Principal;
    let kv = store().await;
    let engine = engine_on(kv, None).await;
    let exec = engine.executor();
    exec.model()
        .deploy_yaml(
            r#"
id: addressed
ver: "1"
steps:
  - id: ask
    uses: acts.core.irq
    params: { key: ask, to: "${{ to }}" }
"#,
        )
        .await
        .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    for (pid, to) in [("a1", "ann"), ("b1", "bob"), ("a2", "role:finance")] {
        exec.proc()
            .start("addressed", vars(json!({ "pid": pid, "to": to })))
            .await
            .unwrap();
        recv_where(&mut rx, |m| m.pid == pid && irq_created(m)).await;
    }
    engine.storage().flush().await.unwrap();
    let ann = exec.as_principal(Principal::new("ann", ["finance"]));
    let mine: Vec<String> = ann
        .task()
        .find(&TaskQuery::inbox())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|t| t.pid)
        .collect();
    assert_eq!(mine, ["a1", "a2"]);
    assert_eq!(ann.task().count(&TaskQuery::inbox()).await.unwrap(), 2);
    assert_eq!(exec.task().count(&TaskQuery::inbox()).await.unwrap(), 3);
    engine.close().await;
}

/// Starts `n` one-interrupt processes with durable channel `c` open and
/// acks the announcements of the first `acked`; returns the engine.
async fn deliveries(kv: Arc<dyn KvStore>, n: usize, acked: usize) -> Engine {
    let engine = engine_on(kv, None).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(ORDERS).await.expect("deploys");
    let ch = engine
        .channels()
        .durable("c", ChannelOptions::default().with_type("act"))
        .await
        .expect("a durable channel");
    let mut rx = ch.subscribe();
    for i in 0..n {
        let pid = format!("o{i}");
        exec.proc()
            .start("orders", vars(json!({ "pid": pid })))
            .await
            .expect("starts");
        let m = recv_where(&mut rx, |m| m.pid == pid && irq_created(m)).await;
        if i < acked {
            ch.ack(&m.id).await.expect("acked");
        }
    }
    engine.storage().flush().await.expect("flushed");
    engine
}

#[tokio::test]
async fn deliveries_are_listed_by_channel_state_and_process_in_pages() {
    let engine = deliveries(store().await, 7, 3).await;
    let exec = engine.executor();
    let pending = DeliveryQuery::new().state(DeliveryState::Pending);
    let mut got = Vec::new();
    let mut cursor = None;
    loop {
        let page = exec
            .msg()
            .find(&pending.clone().limit(2).after(cursor))
            .await
            .unwrap();
        assert!(page.items.len() <= 2);
        got.extend(page.items.into_iter().map(|d| d.pid));
        match page.next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(got, ["o3", "o4", "o5", "o6"], "oldest first");
    let mut newest = pending.clone();
    newest.descending = true;
    let first = exec.msg().find(&newest.limit(1)).await.unwrap();
    assert_eq!(first.items[0].pid, "o6");
    assert_eq!(exec.msg().count_matching(&pending).await.unwrap(), 4);
    let acked = DeliveryQuery::new()
        .channel("c")
        .state(DeliveryState::Acked);
    assert_eq!(exec.msg().count_matching(&acked).await.unwrap(), 3);
    assert_eq!(
        exec.msg()
            .count_matching(&DeliveryQuery::new().channel("c"))
            .await
            .unwrap(),
        7
    );
    let of_o5 = {
        let mut v = DeliveryQuery::new();
        v.pid = Some("o5".into());
        v
    };
    let found = exec.msg().find(&of_o5).await.unwrap();
    assert_eq!(found.items.len(), 1);
    assert_eq!(found.items[0].state, DeliveryState::Pending);
    assert!(found.items[0].message.is_none(), "not asked for");
    // With their messages: the stored messages of the pending ones.
    let with = {
        let mut v = pending.clone();
        v.messages = true;
        v
    };
    let listed = exec.msg().find(&with).await.unwrap().items;
    assert_eq!(listed.len(), 4);
    for d in &listed {
        let m = d
            .message
            .as_ref()
            .expect("a pending delivery's message is kept");
        assert_eq!(
            (m.id.as_str(), m.pid.as_str()),
            (d.msg_id.as_str(), d.pid.as_str())
        );
        assert_eq!(m.key.as_deref(), Some("review"));
    }
    assert!(
        exec.msg()
            .find(&DeliveryQuery::new().channel("other"))
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // Operators only.
    let user = exec.as_principal(acts_core::engine::Principal::new(
        "ann",
        Vec::<String>::new(),
    ));
    assert!(matches!(
        user.msg().find(&pending).await,
        Err(EngineError::Denied { .. })
    ));
    engine.close().await;
}

#[tokio::test]
async fn a_delivery_listing_reads_only_the_matching_entries_and_rows() {
    let counting = Arc::new(CountingStore::new(MemoryStore::new()));
    let engine = deliveries(counting.clone(), 40, 38).await;
    let exec = engine.executor();
    let pending = DeliveryQuery::new().state(DeliveryState::Pending);
    let before = counting.counts();
    let page = exec.msg().find(&pending).await.unwrap();
    assert_eq!(page.items.len(), 2);
    assert_eq!(
        counting.counts().values_read - before.values_read,
        4,
        "two entries and two rows of 40 deliveries"
    );
    let before = counting.counts();
    assert_eq!(exec.msg().count_matching(&pending).await.unwrap(), 2);
    assert_eq!(counting.counts().values_read - before.values_read, 2);
    engine.close().await;
}
