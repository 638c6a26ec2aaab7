//! Access control in the executor: what an admin, an operator and a user
//! may do, that a denial changes nothing, that a user sees only the
//! processes they started or were addressed by, and that every action is
//! recorded with who applied it — across a restart too.

use crate::common;
use common::*;

use std::sync::Arc;

use acts_core::engine::{Engine, EngineError, Executor, Principal};
use acts_core::scheduler::{Action, TaskState};
use acts_store::{KvStore, MemoryStore};
use serde_json::json;

/// Finance approves, then Bob signs.
const EXPENSE: &str = r#"
id: expense
ver: "1"
steps:
  - id: finance_ok
    uses: acts.core.irq
    params: { key: finance, to: [role:finance] }
  - id: bob_signs
    uses: acts.core.irq
    params: { key: sign, to: user:bob }
  - id: unaddressed
    uses: acts.core.irq
    params: { key: open }
"#;

fn ann() -> Principal {
    Principal::new("ann", ["finance"])
}
fn bob() -> Principal {
    Principal::new("bob", Vec::<String>::new())
}
fn carl() -> Principal {
    Principal::new("carl", ["hr"])
}
fn olga() -> Principal {
    Principal::new("olga", ["operator"])
}
fn root() -> Principal {
    Principal::new("root", ["admin"])
}

async fn engine_on(kv: Arc<dyn KvStore>) -> Engine {
    Engine::builder()
        .store(kv)
        .start()
        .await
        .expect("engine starts")
}

fn denied(r: Result<impl std::fmt::Debug, EngineError>) -> String {
    match r {
        Err(EngineError::Denied { reason, .. }) => reason,
        other => panic!("expected a denial, got {other:?}"),
    }
}

/// The id of the interrupt with key `key` (waiting for an answer).
async fn irq(x: &Executor, pid: &str, key: &str) -> String {
    x.task()
        .list(pid)
        .await
        .expect("the tasks are readable")
        .into_iter()
        .find(|t| t.key.as_deref() == Some(key) && t.state == TaskState::Interrupt)
        .unwrap_or_else(|| panic!("no interrupt '{key}' waits"))
        .tid
}

#[tokio::test]
async fn only_an_admin_deploys_and_removes_models() {
    let engine = engine_on(Arc::new(MemoryStore::new())).await;
    let app = engine.executor();
    for who in [ann(), olga()] {
        let x = app.as_principal(who);
        assert!(denied(x.model().deploy_yaml(EXPENSE).await).contains("admin role"));
    }
    assert!(
        app.model().list().await.unwrap().is_empty(),
        "nothing deployed"
    );
    app.as_principal(root())
        .model()
        .deploy_yaml(EXPENSE)
        .await
        .unwrap();
    // Every principal may read the models (to start them).
    assert_eq!(
        app.as_principal(bob()).model().list().await.unwrap().len(),
        1
    );
    denied(app.as_principal(olga()).model().remove("expense").await);
    assert_eq!(app.model().list().await.unwrap().len(), 1, "still deployed");
    assert!(
        app.as_principal(root())
            .model()
            .remove("expense")
            .await
            .unwrap()
    );
    engine.close().await;
}

#[tokio::test]
async fn users_answer_what_addresses_them_and_see_only_their_processes() {
    let kv: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
    let engine = engine_on(kv.clone()).await;
    let app = engine.executor();
    app.model().deploy_yaml(EXPENSE).await.unwrap();
    let (a, b, c, o) = (
        app.as_principal(ann()),
        app.as_principal(bob()),
        app.as_principal(carl()),
        app.as_principal(olga()),
    );
    // Ann starts one; Carl starts another.
    let p1 = a.proc().start("expense", vars(json!({}))).await.unwrap();
    assert_eq!(p1.started_by.as_deref(), Some("ann"));
    let p2 = c.proc().start("expense", vars(json!({}))).await.unwrap();
    settle(&engine).await;

    // Ann (role finance) sees both: hers, and Carl's (addressed to finance).
    let pids = |v: Vec<acts_core::engine::ProcInfo>| {
        let mut v: Vec<String> = v.into_iter().map(|p| p.pid).collect();
        v.sort();
        v
    };
    let mut both = vec![p1.pid.clone(), p2.pid.clone()];
    both.sort();
    assert_eq!(pids(a.proc().list(None, None).await.unwrap()), both);
    // Bob is not addressed yet: he sees nothing; Carl sees his own.
    assert!(b.proc().list(None, None).await.unwrap().is_empty());
    assert_eq!(
        pids(c.proc().list(None, None).await.unwrap()),
        vec![p2.pid.clone()]
    );
    assert_eq!(o.proc().list(None, None).await.unwrap().len(), 2);
    denied(b.proc().get(&p1.pid).await);
    denied(b.task().list(&p1.pid).await);
    assert!(!b.proc().may_see(&p1.pid).await.unwrap());

    let finance = irq(&app, &p1.pid, "finance").await;
    // Carl (hr) may not answer finance's interrupt, even on his own
    // process's sibling: nothing changes.
    let reason = denied(
        c.act()
            .complete(
                &p2.pid,
                &irq(&app, &p2.pid, "finance").await,
                vars(json!({})),
            )
            .await,
    );
    assert!(reason.contains("role:finance"), "{reason}");
    // Bob may not touch p1 at all yet.
    denied(b.act().complete(&p1.pid, &finance, vars(json!({}))).await);
    // A user may not abort, remove or write process vars, even when addressed.
    for action in [Action::Abort, Action::Remove, Action::SetProcessVars] {
        let reason = denied(
            a.act()
                .apply(&p1.pid, &finance, action, vars(json!({})))
                .await,
        );
        assert!(reason.contains("operator"), "{reason}");
    }
    assert_eq!(
        app.task().get(&p1.pid, &finance).await.unwrap().state,
        TaskState::Interrupt,
        "denials changed nothing"
    );
    // Ann answers.
    a.act()
        .complete(&p1.pid, &finance, vars(json!({"ok": true})))
        .await
        .unwrap();
    settle(&engine).await;
    let answered = app.task().get(&p1.pid, &finance).await.unwrap();
    assert_eq!(answered.state, TaskState::Completed);
    assert_eq!(answered.history.len(), 1);
    assert_eq!(answered.history[0].action, "next");
    assert_eq!(answered.history[0].by.as_deref(), Some("ann"));

    // Now p1 addresses Bob: he sees it and signs.
    assert_eq!(
        pids(b.proc().list(None, None).await.unwrap()),
        vec![p1.pid.clone()]
    );
    let sign = irq(&app, &p1.pid, "sign").await;
    denied(a.act().complete(&p1.pid, &sign, vars(json!({}))).await);
    b.act()
        .complete(&p1.pid, &sign, vars(json!({})))
        .await
        .unwrap();
    settle(&engine).await;

    // An interrupt addressed to nobody: only an operator answers it.
    let open = irq(&app, &p1.pid, "open").await;
    assert!(
        denied(a.act().complete(&p1.pid, &open, vars(json!({}))).await)
            .contains("addresses nobody")
    );
    o.act()
        .complete(&p1.pid, &open, vars(json!({})))
        .await
        .unwrap();
    settle(&engine).await;
    assert_eq!(
        app.proc().get(&p1.pid).await.unwrap().state,
        TaskState::Completed
    );

    // Operators act on any process; users may not abort or remove one.
    denied(c.proc().abort(&p2.pid).await);
    denied(c.proc().remove(&p2.pid).await);
    o.proc().abort(&p2.pid).await.unwrap();
    settle(&engine).await;
    assert_eq!(
        app.proc().get(&p2.pid).await.unwrap().state,
        TaskState::Aborted
    );
    let root_task = app.task().list(&p2.pid).await.unwrap().remove(0);
    assert_eq!(
        root_task
            .history
            .last()
            .map(|e| (e.action.as_str(), e.by.as_deref())),
        Some(("abort", Some("olga")))
    );
    engine.close().await;

    // After a restart: who started it, whom it addressed and the history
    // are all still there.
    let engine = engine_on(kv).await;
    let app = engine.executor();
    let b = app.as_principal(bob());
    assert_eq!(
        pids(b.proc().list(None, None).await.unwrap()),
        vec![p1.pid.clone()]
    );
    assert_eq!(
        app.proc().get(&p1.pid).await.unwrap().started_by.as_deref(),
        Some("ann")
    );
    let sign_task = app.task().get(&p1.pid, &sign).await.unwrap();
    assert_eq!(sign_task.history[0].by.as_deref(), Some("bob"));
    let open_task = app.task().get(&p1.pid, &open).await.unwrap();
    assert_eq!(open_task.history[0].by.as_deref(), Some("olga"));
    engine.close().await;
}

#[tokio::test]
async fn deliveries_and_pushes_need_an_operator() {
    let engine = engine_on(Arc::new(MemoryStore::new())).await;
    let app = engine.executor();
    app.model().deploy_yaml(EXPENSE).await.unwrap();
    let a = app.as_principal(ann());
    let p = a.proc().start("expense", vars(json!({}))).await.unwrap();
    settle(&engine).await;
    denied(a.msg().list(None, None).await);
    denied(
        a.msg()
            .count(acts_core::engine::DeliveryState::Failed)
            .await,
    );
    denied(a.msg().redeliver("c", "m").await);
    denied(a.msg().discard("c", "m").await);
    let step = app
        .task()
        .list(&p.pid)
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.nid == "finance_ok" && !t.state.is_terminal())
        .expect("the first step runs")
        .tid;
    let act = vars(json!({"uses": "acts.core.irq", "params": {"key": "extra"}}));
    denied(a.act().push(&p.pid, &step, act.clone()).await);
    let o = app.as_principal(olga());
    assert!(o.msg().list(None, None).await.unwrap().is_empty());
    o.act().push(&p.pid, &step, act).await.unwrap();
    let pushed = app.task().list(&p.pid).await.unwrap();
    assert!(pushed.iter().any(|t| t.key.as_deref() == Some("extra")));
    let step_task = app.task().get(&p.pid, &step).await.unwrap();
    assert_eq!(step_task.history[0].action, "push");
    assert_eq!(step_task.history[0].by.as_deref(), Some("olga"));
    // The application's own actions are recorded without a principal.
    let finance = irq(&app, &p.pid, "finance").await;
    app.act()
        .complete(&p.pid, &finance, vars(json!({})))
        .await
        .unwrap();
    let t = app.task().get(&p.pid, &finance).await.unwrap();
    assert_eq!(t.history[0].by, None);
    engine.close().await;
}
