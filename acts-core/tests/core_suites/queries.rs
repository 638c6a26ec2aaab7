//! Finding processes by the variables a model indexes (`index:`): exact
//! and range matches, pages with a cursor in both orders, counts, an index
//! kept in step as variables change and processes go — and a query that
//! reads only the matching entries and rows (counted on the testkit's
//! counting store). Runs on every backend (`ACTS_TEST_STORE`) but the
//! counting test.

use crate::common;

use std::sync::Arc;

use acts_core::engine::{ChannelOptions, Engine, EngineError, ProcessQuery};
use acts_core::model::Vars;
use acts_core::scheduler::TaskState;
use acts_store::MemoryStore;
use acts_testkit::CountingStore;
use common::{ends, engine_on, irq_created, recv_where, store, vars, waiting};
use serde_json::{Value, json};

/// Orders: the customer and amount are indexed; an interrupt lets a
/// clerk change the customer.
const ORDERS: &str = r#"
id: orders
ver: "1"
index: [customer, amount]
steps:
  - id: review
    uses: acts.core.irq
    params: { key: review }
"#;

/// Starts order `pid` for `customer` of `amount`.
async fn order(engine: &Engine, pid: &str, customer: &str, amount: i64) {
    engine
        .executor()
        .proc()
        .start(
            "orders",
            vars(json!({ "pid": pid, "customer": customer, "amount": amount })),
        )
        .await
        .expect("starts");
}

async fn pids(engine: &Engine, q: &ProcessQuery) -> Vec<String> {
    let page = engine
        .executor()
        .proc()
        .find(q)
        .await
        .expect("the query runs");
    assert!(page.next.is_none(), "one page");
    page.items.into_iter().map(|p| p.pid).collect()
}

/// Every page of `q` with pages of `n`, in order.
async fn all_pages(engine: &Engine, q: ProcessQuery, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = engine
            .executor()
            .proc()
            .find(&q.clone().limit(n).after(cursor))
            .await
            .expect("a page");
        assert!(page.items.len() <= n);
        out.extend(page.items.into_iter().map(|p| p.pid));
        match page.next {
            Some(c) => cursor = Some(c),
            None => return out,
        }
    }
}

#[tokio::test]
async fn processes_are_found_by_their_indexed_variables() {
    let kv = store().await;
    let engine = engine_on(kv.clone(), None).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(ORDERS).await.unwrap();
    for (pid, customer, amount) in [
        ("o1", "acme", 100),
        ("o2", "globex", 250),
        ("o3", "acme", 40),
        ("o4", "initech", 175),
        ("o5", "acme", 900),
    ] {
        order(&engine, pid, customer, amount).await;
    }
    let acme = || {
        ProcessQuery::new()
            .model("orders")
            .var_eq("customer", json!("acme"))
    };
    let mut found = pids(&engine, &acme()).await;
    found.sort();
    assert_eq!(found, ["o1", "o3", "o5"]);
    // A range, in value order both ways.
    let mid_range =
        ProcessQuery::new()
            .model("orders")
            .var_range("amount", Some(json!(100)), Some(json!(250)));
    assert_eq!(pids(&engine, &mid_range).await, ["o1", "o4", "o2"]);
    let mut desc = mid_range.clone();
    desc.descending = true;
    assert_eq!(pids(&engine, &desc).await, ["o2", "o4", "o1"]);
    let open_above =
        ProcessQuery::new()
            .model("orders")
            .var_range("amount", Some(json!(176)), None);
    assert_eq!(pids(&engine, &open_above).await, ["o2", "o5"]);
    // Pages of two, with a cursor, hold every match once.
    let everyone =
        ProcessQuery::new()
            .model("orders")
            .var_range("amount", None, Some(json!(10_000)));
    assert_eq!(
        all_pages(&engine, everyone.clone(), 2).await,
        ["o3", "o1", "o4", "o2", "o5"]
    );
    assert_eq!(exec.proc().count_matching(&acme()).await.unwrap(), 3);
    assert_eq!(exec.proc().count_matching(&everyone).await.unwrap(), 5);
    // Other filters combine with the variable.
    let mut acme_done = acme();
    acme_done.state = Some(TaskState::Completed);
    assert!(pids(&engine, &acme_done).await.is_empty());

    // A clerk moves o1 to globex: the index follows in the same batch.
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let review = exec
        .task()
        .list("o1")
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.state == TaskState::Interrupt)
        .expect("o1 waits");
    exec.act()
        .set_process_vars("o1", &review.tid, vars(json!({ "customer": "globex" })))
        .await
        .unwrap();
    let globex = ProcessQuery::new()
        .model("orders")
        .var_eq("customer", json!("globex"));
    let mut found = pids(&engine, &globex).await;
    found.sort();
    assert_eq!(found, ["o1", "o2"]);
    assert_eq!(exec.proc().count_matching(&acme()).await.unwrap(), 2);
    // Finished processes stay findable; removed ones are gone.
    exec.act()
        .complete("o3", &waiting(&exec, "o3").await[0], Vars::new())
        .await
        .unwrap();
    recv_where(&mut rx, ends("o3")).await;
    assert_eq!(pids(&engine, &acme_done).await, ["o3"]);
    assert!(exec.proc().remove("o5").await.unwrap());
    assert_eq!(exec.proc().count_matching(&acme()).await.unwrap(), 1);
    // ... and it all survives a restart.
    engine.close().await;
    let engine = engine_on(kv, None).await;
    assert_eq!(pids(&engine, &acme()).await, ["o3"]);
    engine.close().await;
}

#[tokio::test]
async fn a_query_that_cannot_use_an_index_says_why() {
    let engine = engine_on(store().await, None).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(ORDERS).await.unwrap();
    let q = |q: ProcessQuery| {
        let exec = exec.clone();
        async move { exec.proc().find(&q).await.unwrap_err() }
    };
    let not_declared = q(ProcessQuery::new()
        .model("orders")
        .var_eq("region", json!("eu")))
    .await;
    assert!(
        matches!(&not_declared, EngineError::Conflict(m) if m.contains("does not index 'region'") && m.contains("[customer, amount]")),
        "{not_declared}"
    );
    let no_model = q(ProcessQuery::new().var_eq("customer", json!("acme"))).await;
    assert!(
        no_model.to_string().contains("needs the model"),
        "{no_model}"
    );
    let fraction = q(ProcessQuery::new()
        .model("orders")
        .var_eq("amount", json!(1.5)))
    .await;
    assert!(
        fraction.to_string().contains("cannot be looked up"),
        "{fraction}"
    );
    let mixed = q(ProcessQuery::new().model("orders").var_range(
        "amount",
        Some(json!(1)),
        Some(json!("z")),
    ))
    .await;
    assert!(mixed.to_string().contains("different kinds"), "{mixed}");
    let cursor = q(ProcessQuery::new().after(Some("zz".into()))).await;
    assert!(cursor.to_string().contains("cursor"), "{cursor}");
    // A model that indexes too much, or the same name twice, is refused.
    for bad in [
        "id: m\nver: '1'\nindex: [a, a]\nsteps: []\n",
        "id: m\nver: '1'\nindex: ['a b']\nsteps: []\n",
        "id: m\nver: '1'\nindex: [a, b, c, d, e, f, g, h, i]\nsteps: []\n",
    ] {
        assert!(exec.model().deploy_yaml(bad).await.is_err(), "{bad}");
    }
    // A variable holding something that cannot be indexed has no entry.
    exec.proc()
        .start(
            "orders",
            vars(json!({ "pid": "odd", "customer": { "name": "acme" }, "amount": 3 })),
        )
        .await
        .unwrap();
    let page = exec
        .proc()
        .find(
            &ProcessQuery::new()
                .model("orders")
                .var_eq("amount", json!(3)),
        )
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1);
    assert!(
        exec.proc()
            .find(
                &ProcessQuery::new()
                    .model("orders")
                    .var_range("customer", Some(json!("")), None)
            )
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn a_variable_query_reads_only_the_matching_entries_and_rows() {
    let counting = Arc::new(CountingStore::new(MemoryStore::new()));
    let engine = engine_on(counting.clone(), None).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(ORDERS).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    for i in 0..300 {
        let customer = if i % 60 == 0 { "acme" } else { "other" };
        order(&engine, &format!("o{i}"), customer, i).await;
    }
    recv_where(&mut rx, |m| m.pid == "o299" && irq_created(m)).await;
    engine.storage().flush().await.unwrap();
    let acme = ProcessQuery::new()
        .model("orders")
        .var_eq("customer", json!("acme"));
    let before = counting.counts();
    let page = exec.proc().find(&acme).await.unwrap();
    let read = counting.counts().values_read - before.values_read;
    assert_eq!(page.items.len(), 5);
    // Five index entries and five rows, out of 300 processes.
    assert_eq!(read, 10, "only the matches were read");
    let before = counting.counts();
    assert_eq!(exec.proc().count_matching(&acme).await.unwrap(), 5);
    let read = counting.counts().values_read - before.values_read;
    // The declared-check reads one page of one (an entry and its row),
    // then the count reads the five entries: no row beyond that.
    assert!(read <= 7, "{read} values read to count 5 entries");
    let amounts: Vec<Value> = exec
        .proc()
        .find(&ProcessQuery::new().model("orders").var_range(
            "amount",
            Some(json!(10)),
            Some(json!(12)),
        ))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| json!(p.pid))
        .collect();
    assert_eq!(amounts, [json!("o10"), json!("o11"), json!("o12")]);
    engine.close().await;
}

/// Answers the review of order `pid` (it completes).
async fn approve(engine: &Engine, pid: &str) {
    let exec = engine.executor();
    let tid = waiting(&exec, pid).await.pop().expect("a waiting review");
    exec.act()
        .complete(pid, &tid, Vars::new())
        .await
        .expect("completes");
}

#[tokio::test]
async fn state_and_model_listings_read_only_the_matching_entries_and_rows() {
    let counting = Arc::new(CountingStore::new(MemoryStore::new()));
    let engine = engine_on(counting.clone(), None).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(ORDERS).await.unwrap();
    exec.model()
        .deploy_yaml(&ORDERS.replace("id: orders", "id: returns"))
        .await
        .unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    for i in 0..200 {
        order(&engine, &format!("o{i}"), "c", i).await;
    }
    exec.proc()
        .start("returns", vars(json!({"pid": "r0"})))
        .await
        .unwrap();
    recv_where(&mut rx, |m| m.pid == "r0" && irq_created(m)).await;
    for pid in ["o7", "o3", "o150"] {
        approve(&engine, pid).await;
        recv_where(&mut rx, ends(pid)).await;
    }
    engine.storage().flush().await.unwrap();

    // Three completed of 201: three entries and three rows, in
    // admission order (both ways).
    let done = ProcessQuery::new().state(TaskState::Completed);
    let before = counting.counts();
    assert_eq!(pids(&engine, &done).await, ["o3", "o7", "o150"]);
    let read = counting.counts().values_read - before.values_read;
    assert_eq!(read, 6, "only the completed processes were read");
    let mut newest_first = done.clone();
    newest_first.descending = true;
    assert_eq!(pids(&engine, &newest_first).await, ["o150", "o7", "o3"]);
    let listed: Vec<String> = exec
        .proc()
        .list(Some(TaskState::Completed), None)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.pid)
        .collect();
    assert_eq!(listed, ["o3", "o7", "o150"]);

    // One process of the other model: one entry, one row.
    let before = counting.counts();
    assert_eq!(
        pids(&engine, &ProcessQuery::new().model("returns")).await,
        ["r0"]
    );
    assert_eq!(counting.counts().values_read - before.values_read, 2);

    // Counts of a state, a model or everything read index keys only.
    let before = counting.counts();
    assert_eq!(exec.proc().count_matching(&done).await.unwrap(), 3);
    assert_eq!(
        exec.proc()
            .count_matching(&ProcessQuery::new().model("returns"))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        exec.proc()
            .count_matching(&ProcessQuery::new())
            .await
            .unwrap(),
        201
    );
    assert_eq!(
        counting.counts().values_read - before.values_read,
        3 + 1 + 201,
        "keys only"
    );
    // Pages of 50 of the running ones cover them once, in order.
    let running = all_pages(&engine, ProcessQuery::new().state(TaskState::Running), 50).await;
    assert_eq!(running.len(), 198);
    assert_eq!(running.first().map(String::as_str), Some("o0"));
    assert_eq!(running.last().map(String::as_str), Some("r0"));
    engine.close().await;
}

/// A store holding `n` waiting orders `o0`.. (the engine closed).
async fn store_of_orders(n: usize) -> std::sync::Arc<dyn acts_store::KvStore> {
    let kv = store().await;
    let engine = engine_on(kv.clone(), None).await;
    engine
        .executor()
        .model()
        .deploy_yaml(ORDERS)
        .await
        .expect("the model deploys");
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    for i in 0..n {
        order(&engine, &format!("o{i}"), "c", i as i64).await;
    }
    let last = format!("o{}", n - 1);
    recv_where(&mut rx, |m| m.pid == last && irq_created(m)).await;
    engine
        .storage()
        .flush()
        .await
        .expect("the store takes the writes");
    engine.close().await;
    kv
}

/// An entry of a process row's own `state` or `mid` index, as stores
/// before index generation 3 kept them (the layout of an index entry of a
/// string value).
fn retired_entry(field: &str, value: &str, pid: &str) -> acts_store::BatchOp {
    let key = acts_store::keys::KeyBuilder::new()
        .str("i")
        .str("procs")
        .str(field)
        .raw(&[0x03])
        .str(value)
        .str(pid)
        .finish();
    acts_store::BatchOp::put(key, pid.as_bytes().to_vec())
}

/// Whether `kv` holds no entry of the retired `state` and `mid` indexes.
async fn no_retired_entries(kv: &std::sync::Arc<dyn acts_store::KvStore>) -> bool {
    use acts_core::durable::Collection;
    use acts_core::engine::testing::ProcRow;
    for field in ["state", "mid"] {
        let entries = kv
            .scan(Collection::<ProcRow>::index_range(field))
            .await
            .expect("scan");
        if !entries.is_empty() {
            return false;
        }
    }
    true
}

#[tokio::test]
async fn a_store_at_index_generation_two_only_loses_its_retired_entries() {
    use acts_core::durable::Collection;
    use acts_core::engine::testing::{MetaRow, PROC_INDEX, ProcRow};
    use acts_store::BatchOp;
    let kv = store_of_orders(2).await;
    // As generation 2 left it: the fact at 2, the `state` and `mid`
    // entries of each process beside the listing ones.
    let fact = MetaRow {
        id: PROC_INDEX.to_owned(),
        value: json!(2),
    };
    let mut ops = vec![Collection::<MetaRow>::put_row_op(&fact)];
    for pid in ["o0", "o1"] {
        ops.push(retired_entry("state", "running", pid));
        ops.push(retired_entry("mid", "orders", pid));
    }
    // A listing entry gone missing (no generation-2 store lacks one): the
    // start does not rewrite the rows' entries, so it stays missing.
    let o1 = kv
        .scan(Collection::<ProcRow>::index_range("state_time"))
        .await
        .expect("scan")
        .into_iter()
        .find(|p| p.value == b"o1")
        .expect("o1 is listed");
    ops.push(BatchOp::delete(o1.key));
    kv.batch(ops).await.expect("the generation-2 store");
    let engine = engine_on(kv.clone(), None).await;
    assert!(
        no_retired_entries(&kv).await,
        "the retired entries are deleted"
    );
    assert_eq!(
        pids(&engine, &ProcessQuery::new().state(TaskState::Running)).await,
        ["o0"],
        "no row was read back to rewrite its entries"
    );
    let fact = Collection::<MetaRow>::new(kv.clone())
        .get(PROC_INDEX)
        .await
        .expect("reads")
        .expect("the fact");
    assert_eq!(fact.value, json!(3), "the store is at generation 3");
    engine.close().await;
}

#[tokio::test]
async fn a_store_written_before_the_listing_indexes_gets_them_on_start() {
    use acts_core::durable::Collection;
    use acts_core::engine::testing::{MetaRow, PROC_INDEX, ProcRow};
    use acts_store::BatchOp;
    let kv = store_of_orders(3).await;
    // As an older engine left it: no composite entries, no fact.
    let mut ops = vec![BatchOp::delete(Collection::<MetaRow>::row_key(PROC_INDEX))];
    for field in ["state_time", "model_time"] {
        let keys = kv
            .scan(Collection::<ProcRow>::index_range(field))
            .await
            .expect("scan");
        assert_eq!(keys.len(), 3, "{field}: one entry per process");
        ops.extend(keys.into_iter().map(|p| BatchOp::delete(p.key)));
    }
    // ... and the entries of its own `state` and `mid` indexes (one stale:
    // a process that has since ended), which a newer engine no longer keeps.
    for pid in ["o0", "o1", "o2"] {
        ops.push(retired_entry("state", "running", pid));
        ops.push(retired_entry("mid", "orders", pid));
    }
    ops.push(retired_entry("state", "running", "gone"));
    kv.batch(ops).await.expect("the older store");
    let engine = engine_on(kv.clone(), None).await;
    let exec = engine.executor();
    assert!(
        no_retired_entries(&kv).await,
        "the retired indexes' entries are deleted on start"
    );
    assert_eq!(
        pids(&engine, &ProcessQuery::new().state(TaskState::Running)).await,
        ["o0", "o1", "o2"]
    );
    assert_eq!(
        pids(&engine, &ProcessQuery::new().model("orders")).await,
        ["o0", "o1", "o2"]
    );
    assert!(
        Collection::<MetaRow>::new(kv.clone())
            .get(PROC_INDEX)
            .await
            .expect("reads")
            .is_some(),
        "the fact is written once filled"
    );
    assert_eq!(exec.proc().list(None, None).await.unwrap().len(), 3);
    engine.close().await;
}
