//! Every client action's guards through the engine: an action on an
//! unknown process, an unknown task, a task of the wrong kind or in the
//! wrong state, or with invalid options gets a clear error — and changes
//! nothing (the task tree and the store are as before).

use crate::common;
use common::*;

use std::time::Duration;

use acts_core::engine::{ChannelOptions, Engine, EngineError, TaskInfo};
use acts_core::model::Vars;
use acts_core::scheduler::{Action, ActionError};
use serde_json::{Value, json};

const TWO: &str = "id: two\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.core.irq\n    params: { key: a }\n  - id: s2\n    uses: acts.core.irq\n    params: { key: b }\n";

struct Fixture {
    engine: Engine,
    pid: String,
    /// The waiting act of s1 and its step.
    act: String,
    step: String,
}

async fn fixture() -> Fixture {
    let engine = Engine::builder()
        .store(store().await)
        .start()
        .await
        .expect("engine");
    engine
        .executor()
        .model()
        .deploy_yaml(TWO)
        .await
        .expect("deploy");
    let mut rx = engine
        .channel(ChannelOptions::default().with_type("act"))
        .subscribe();
    let p = engine
        .executor()
        .proc()
        .start("two", Vars::new())
        .await
        .expect("start");
    let m = tokio::time::timeout(Duration::from_secs(60), rx.recv())
        .await
        .expect("hang guard")
        .expect("irq");
    let step = engine
        .executor()
        .task()
        .get(&p.pid, &m.tid)
        .await
        .expect("act")
        .parent
        .expect("its step");
    Fixture {
        engine,
        pid: p.pid,
        act: m.tid,
        step,
    }
}

async fn snapshot(f: &Fixture) -> Vec<TaskInfo> {
    f.engine
        .executor()
        .task()
        .list(&f.pid)
        .await
        .expect("tasks")
}

/// Asserts that `action` is refused with an error matching `expected`
/// and that nothing changed.
async fn refused(
    f: &Fixture,
    tid: &str,
    action: Action,
    options: Value,
    expected: fn(&EngineError) -> bool,
) {
    let before = snapshot(f).await;
    let err = f
        .engine
        .executor()
        .act()
        .apply(&f.pid, tid, action, vars(options))
        .await
        .expect_err("refused");
    assert!(expected(&err), "{action:?}: {err}");
    assert!(!err.to_string().is_empty());
    assert_eq!(snapshot(f).await, before, "{action:?} changed nothing");
}

#[tokio::test]
async fn unknown_process_and_task() {
    let f = fixture().await;
    let exec = f.engine.executor();
    assert!(matches!(
        exec.act().complete("nope", &f.act, Vars::new()).await,
        Err(EngineError::ProcessNotFound(_))
    ));
    for action in [
        Action::Complete,
        Action::Submit,
        Action::Skip,
        Action::Abort,
        Action::Remove,
        Action::Cancel,
    ] {
        refused(&f, "no-task", action, json!({}), |e| {
            matches!(e, EngineError::Action(ActionError::UnknownTask { .. }))
        })
        .await;
    }
    assert!(matches!(
        exec.act()
            .push(&f.pid, "no-task", vars(json!({"uses": "acts.core.msg"})))
            .await,
        Err(EngineError::Action(ActionError::UnknownTask { .. }))
    ));
}

#[tokio::test]
async fn wrong_kind_of_task() {
    let f = fixture().await;
    // Actions need an act; push needs a step.
    refused(&f, &f.step, Action::Complete, json!({}), |e| {
        matches!(e, EngineError::Action(ActionError::NotAnAct { .. }))
    })
    .await;
    let before = snapshot(&f).await;
    let err = f
        .engine
        .executor()
        .act()
        .push(&f.pid, &f.act, vars(json!({"uses": "acts.core.msg"})))
        .await
        .expect_err("refused");
    assert!(
        matches!(err, EngineError::Action(ActionError::NotAStep { .. })),
        "{err}"
    );
    assert_eq!(snapshot(&f).await, before);
}

#[tokio::test]
async fn invalid_options() {
    let f = fixture().await;
    refused(
        &f,
        &f.act,
        Action::Error,
        json!({"message": "no code"}),
        |e| {
            matches!(
                e,
                EngineError::Action(ActionError::MissingOption {
                    option: "ecode",
                    ..
                })
            )
        },
    )
    .await;
    refused(&f, &f.act, Action::Back, json!({}), |e| {
        matches!(
            e,
            EngineError::Action(ActionError::MissingOption { option: "to", .. })
        )
    })
    .await;
    refused(&f, &f.act, Action::Back, json!({"to": "nowhere"}), |e| {
        matches!(e, EngineError::Action(ActionError::NotAllowed { .. }))
    })
    .await;
    let before = snapshot(&f).await;
    let err = f
        .engine
        .executor()
        .act()
        .push(&f.pid, &f.step, vars(json!({"params": {}})))
        .await
        .expect_err("refused");
    assert!(
        matches!(
            err,
            EngineError::Action(ActionError::MissingOption { option: "uses", .. })
        ),
        "{err}"
    );
    let err = f
        .engine
        .executor()
        .act()
        .push(
            &f.pid,
            &f.step,
            vars(json!({"uses": "acts.core.msg", "params": 7, "id": []})),
        )
        .await
        .expect_err("refused");
    assert!(
        matches!(err, EngineError::Action(ActionError::BadOptions { .. })),
        "{err}"
    );
    assert_eq!(snapshot(&f).await, before);
}

#[tokio::test]
async fn wrong_state() {
    let f = fixture().await;
    // Cancel needs a finished act whose step succeeded.
    refused(&f, &f.act, Action::Cancel, json!({}), |e| {
        matches!(e, EngineError::Action(ActionError::NotAllowed { .. }))
    })
    .await;
    f.engine
        .executor()
        .act()
        .complete(&f.pid, &f.act, Vars::new())
        .await
        .expect("completes");
    for action in [
        Action::Complete,
        Action::Skip,
        Action::Abort,
        Action::Error,
        Action::Back,
        Action::SetProcessVars,
    ] {
        refused(&f, &f.act, action, json!({"ecode": "E", "to": "s1"}), |e| {
            matches!(e, EngineError::Action(ActionError::AlreadyCompleted { .. }))
        })
        .await;
    }
    // A finished process refuses an abort.
    f.engine
        .executor()
        .proc()
        .abort(&f.pid)
        .await
        .expect("aborts");
    assert!(matches!(
        f.engine.executor().proc().abort(&f.pid).await,
        Err(EngineError::Action(ActionError::AlreadyCompleted { .. }))
    ));
}

#[tokio::test]
async fn an_act_with_exposes_is_completed_with_exactly_its_outputs() {
    let engine = Engine::builder()
        .store(store().await)
        .start()
        .await
        .expect("engine");
    let exec = engine.executor();
    exec.model().deploy_yaml(
        "id: ex\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.core.block\n    params:\n      acts:\n        - uses: acts.core.irq\n          params: { key: form }\n          exposes:\n            - { name: amount }\n",
    )
    .await
    .expect("deploy");
    let mut rx = engine
        .channel(ChannelOptions::default().with_type("act"))
        .subscribe();
    let p = exec.proc().start("ex", Vars::new()).await.expect("start");
    let m = recv_where(&mut rx, |m| m.state == "created").await;
    let before = exec.task().list(&p.pid).await.expect("tasks");
    let err = exec
        .act()
        .complete(&p.pid, &m.tid, vars(json!({"other": 1})))
        .await
        .expect_err("amount is missing");
    assert!(err.to_string().contains("'amount'"), "{err}");
    assert_eq!(
        exec.task().list(&p.pid).await.expect("tasks"),
        before,
        "nothing changed"
    );
    exec.act()
        .complete(&p.pid, &m.tid, vars(json!({"amount": 5, "other": 1})))
        .await
        .expect("completes");
    let out = exec.proc().get(&p.pid).await.expect("process").outputs;
    assert_eq!(out.get("amount"), Some(&json!(5)));
    assert_eq!(out.get("other"), None, "only the exposed outputs are kept");
}
