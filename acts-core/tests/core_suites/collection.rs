//! Typed collections: rows with versions and upgrades, indexes kept in the
//! same batch, queries with filters/order/paging, errors never "no row".

use std::sync::Arc;

use acts_core::durable::{Collection, CollectionError, Filter, IndexValue, Query, Row};
use acts_store::{ErrorKind, KvStore, MemoryStore};
use acts_testkit::{CrashStore, FailPlan, FailingStore, OpSet};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Proc {
    id: String,
    state: String,
    model: String,
    start_time: i64,
}

impl Row for Proc {
    const COLLECTION: &'static str = "procs";
    const VERSION: u32 = 2;
    const INDEXED: &'static [&'static str] = &["state", "start_time"];

    fn id(&self) -> String {
        self.id.clone()
    }

    fn index_values(&self) -> Vec<IndexValue> {
        vec![
            IndexValue::Str(self.state.clone()),
            IndexValue::Int(self.start_time),
        ]
    }

    /// Version 1 called the model `mid`.
    fn upgrade(version: u32, mut row: Value) -> Result<Value, String> {
        match version {
            1 => {
                let mid = row.get("mid").cloned().unwrap_or(Value::Null);
                row["model"] = mid;
                Ok(row)
            }
            2 => Ok(row),
            v => Err(format!("unknown version {v}")),
        }
    }
}

fn proc(id: &str, state: &str, t: i64) -> Proc {
    Proc {
        id: id.into(),
        state: state.into(),
        model: "m1".into(),
        start_time: t,
    }
}

fn ids(rows: &[Proc]) -> Vec<&str> {
    rows.iter().map(|p| p.id.as_str()).collect()
}

async fn filled(store: Arc<dyn KvStore>) -> Collection<Proc> {
    let c = Collection::<Proc>::new(store);
    for (i, state) in ["running", "completed", "running", "error", "running"]
        .iter()
        .enumerate()
    {
        c.upsert(&proc(&format!("p{i}"), state, 100 - i as i64 * 10))
            .await
            .expect("upsert into a fresh store");
    }
    c
}

#[tokio::test]
async fn rows_round_trip_and_indexes_follow_updates() {
    let c = filled(Arc::new(MemoryStore::new())).await;
    assert_eq!(
        c.get("p1").await.unwrap(),
        Some(proc("p1", "completed", 90))
    );
    assert_eq!(c.get("nope").await.unwrap(), None);
    let running = c
        .query_all(&Query::new().filter(Filter::eq("state", "running")))
        .await
        .unwrap();
    assert_eq!(ids(&running), vec!["p0", "p2", "p4"]);
    // Moving p0 to completed moves its index entry in the same batch.
    c.upsert(&proc("p0", "completed", 100)).await.unwrap();
    let running = c
        .query_all(&Query::new().filter(Filter::eq("state", "running")))
        .await
        .unwrap();
    assert_eq!(ids(&running), vec!["p2", "p4"]);
    c.delete("p2").await.unwrap();
    c.delete("p2").await.unwrap();
    let running = c
        .query_all(&Query::new().filter(Filter::eq("state", "running")))
        .await
        .unwrap();
    assert_eq!(ids(&running), vec!["p4"]);
}

#[tokio::test]
async fn an_upsert_is_one_atomic_batch() {
    let store = Arc::new(CrashStore::new());
    let c = Collection::<Proc>::new(store.clone());
    c.upsert(&proc("p0", "running", 1)).await.unwrap();
    c.upsert(&proc("p0", "completed", 1)).await.unwrap();
    let batches = store.committed_batches().await;
    assert_eq!(batches.len(), 2, "row and index entries commit together");
    // The second batch deletes the old state entry and writes the new one.
    assert_eq!(batches[1].len(), 4);
}

#[tokio::test]
async fn ordering_by_an_indexed_field_and_paging_never_truncate() {
    let c = filled(Arc::new(MemoryStore::new())).await;
    let q = Query::new().order_by("start_time", false);
    assert_eq!(
        ids(&c.query_all(&q).await.unwrap()),
        vec!["p4", "p3", "p2", "p1", "p0"]
    );
    let desc = Query::new()
        .order_by("start_time", true)
        .filter(Filter::Ne("state".into(), json!("error")));
    assert_eq!(
        ids(&c.query_all(&desc).await.unwrap()),
        vec!["p0", "p1", "p2", "p4"]
    );
    // Pages of two, continued with the cursor, give the same rows.
    let mut q = Query::new().order_by("start_time", true).limit(2);
    let mut pages = Vec::new();
    loop {
        let page = c.query(&q).await.unwrap();
        pages.push(
            ids(&page.rows)
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>(),
        );
        match page.next {
            Some(next) => q.after = Some(next),
            None => break,
        }
    }
    assert_eq!(pages.concat(), vec!["p0", "p1", "p2", "p3", "p4"]);
    assert!(pages.iter().all(|p| p.len() <= 2));
    let err = c
        .query(&Query::new().order_by("model", false))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cannot order by 'model'"), "{err}");
}

#[tokio::test]
async fn filters_combine() {
    let c = filled(Arc::new(MemoryStore::new())).await;
    let q = Query::new().filter(Filter::Or(vec![
        Filter::In("state".into(), vec![json!("error"), json!("completed")]),
        Filter::And(vec![
            Filter::Ge("start_time".into(), json!(80)),
            Filter::Lt("start_time".into(), json!(100)),
        ]),
    ]));
    assert_eq!(ids(&c.query_all(&q).await.unwrap()), vec!["p1", "p2", "p3"]);
    let q = Query::new()
        .filter(Filter::Gt("start_time".into(), json!(70)))
        .filter(Filter::Le("start_time".into(), json!(90)));
    assert_eq!(ids(&c.query_all(&q).await.unwrap()), vec!["p1", "p2"]);
}

#[tokio::test]
async fn large_collections_are_read_exhaustively() {
    let c = Collection::<Proc>::new(Arc::new(MemoryStore::new()));
    for i in 0..1_000 {
        c.upsert(&proc(
            &format!("p{i:04}"),
            if i % 3 == 0 { "running" } else { "completed" },
            i,
        ))
        .await
        .unwrap();
    }
    let running = c
        .query_all(&Query::new().filter(Filter::eq("state", "running")))
        .await
        .unwrap();
    assert_eq!(running.len(), 334);
    let all = c.query_all(&Query::new()).await.unwrap();
    assert_eq!(all.len(), 1_000);
    let ordered = c
        .query_all(
            &Query::new()
                .order_by("start_time", true)
                .filter(Filter::eq("state", "completed")),
        )
        .await
        .unwrap();
    assert_eq!(ordered.len(), 666);
    assert!(
        ordered
            .windows(2)
            .all(|w| w[0].start_time > w[1].start_time)
    );
}

#[tokio::test]
async fn older_rows_are_upgraded_on_read_and_unreadable_rows_are_errors() {
    let store = Arc::new(MemoryStore::new());
    let key = Collection::<Proc>::row_key("old");
    let v1 =
        json!({"v": 1, "d": {"id": "old", "state": "running", "mid": "legacy", "start_time": 5}});
    store.put(&key, v1.to_string().as_bytes()).await.unwrap();
    let c = Collection::<Proc>::new(store.clone());
    assert_eq!(
        c.get("old").await.unwrap().map(|p| p.model),
        Some("legacy".into())
    );
    store
        .put(&Collection::<Proc>::row_key("bad"), b"{not json")
        .await
        .unwrap();
    match c.get("bad").await {
        Err(CollectionError::Corrupt { id, .. }) => assert_eq!(id, "bad"),
        other => panic!("expected a corrupt-row error, got {other:?}"),
    }
    store
        .put(
            &Collection::<Proc>::row_key("future"),
            json!({"v": 9, "d": {}}).to_string().as_bytes(),
        )
        .await
        .unwrap();
    assert!(
        c.get("future")
            .await
            .unwrap_err()
            .to_string()
            .contains("unknown version 9")
    );
}

#[tokio::test]
async fn store_failures_are_errors_never_missing_rows() {
    let store = Arc::new(FailingStore::new(MemoryStore::new()));
    let c = filled(store.clone()).await;
    store.set_plan(FailPlan::always(OpSet::READS, ErrorKind::Unavailable));
    assert!(matches!(c.get("p0").await, Err(CollectionError::Store(_))));
    assert!(
        matches!(c.get("missing").await, Err(CollectionError::Store(_))),
        "a failing read is not 'no row'"
    );
    // An index query needs a multi-read: it fails rather than returning nothing.
    assert!(
        c.query_all(&Query::new().filter(Filter::eq("state", "running")))
            .await
            .is_err()
    );
    store.set_plan(FailPlan::always(OpSet::SCANS, ErrorKind::Timeout));
    assert!(c.query_all(&Query::new()).await.is_err());
    store.set_plan(FailPlan::always(OpSet::WRITES, ErrorKind::Unavailable));
    assert!(c.upsert(&proc("p9", "running", 1)).await.is_err());
    store.heal();
    assert_eq!(
        c.get("p9").await.unwrap(),
        None,
        "the failed upsert applied nothing"
    );
    assert_eq!(c.query_all(&Query::new()).await.unwrap().len(), 5);
}
