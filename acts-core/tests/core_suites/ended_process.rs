//! A process that ended takes no more actions, and ends what it left open.
//! Found by the simulator (grammar 3, seed 3002): a step timeout's `abort`
//! ended the process while the step's catch still asked its question; the
//! catch's interrupt stayed open, and answering it returned `Ok` and sent a
//! `completed` message for a process that had already aborted.

use crate::common;

use std::time::Duration;

use acts_core::engine::{ChannelOptions, EngineError};
use acts_core::model::Vars;
use acts_core::scheduler::{Action, ActionError, TaskState};
use acts_core::time::ManualClock;
use common::{engine_on, settle, store, vars, waiting};
use serde_json::json;

/// An interrupt whose error `E1` is caught by another interrupt, and an
/// hour's timeout on the step that aborts.
const GUARDED: &str = r#"
id: guarded
ver: "1"
steps:
  - id: approve
    uses: acts.core.irq
    params: { key: approve }
    catches:
      - id: recover
        if: "$ecode() == 'E1'"
        uses: acts.core.irq
        params: { key: recover }
    timeouts:
      - id: too_late
        if: "$cost_in('1h')"
        uses: acts.core.action
        params: { action: abort }
"#;

#[tokio::test]
async fn a_timeout_abort_ends_the_catch_it_left_open_and_nothing_more_is_answered() {
    let clock = ManualClock::new(1_000_000);
    let engine = engine_on(store().await, Some(&clock)).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(GUARDED).await.unwrap();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    exec.proc()
        .start("guarded", vars(json!({ "pid": "g" })))
        .await
        .unwrap();
    settle(&engine).await;
    let approve = waiting(&exec, "g").await.pop().unwrap();
    exec.act()
        .apply(
            "g",
            &approve,
            Action::Error,
            vars(json!({ "ecode": "E1", "message": "declined" })),
        )
        .await
        .unwrap();
    settle(&engine).await;
    let recover = waiting(&exec, "g").await.pop().expect("the catch asks");
    // The step's hour runs out while the catch waits.
    clock.advance(Duration::from_secs(61 * 60));
    settle(&engine).await;
    let info = exec.proc().get("g").await.unwrap();
    assert_eq!(info.state, TaskState::Aborted);
    let tasks = exec.task().list("g").await.unwrap();
    assert!(
        tasks.iter().all(|t| t.state.is_terminal()),
        "nothing is left open: {:?}",
        tasks
            .iter()
            .map(|t| (t.nid.clone(), t.state))
            .collect::<Vec<_>>()
    );
    let catch_act = tasks.iter().find(|t| t.tid == recover).unwrap();
    assert_eq!(catch_act.state, TaskState::Aborted);
    // Its clients heard that the question is void.
    let mut heard_void = false;
    while let Ok(m) = rx.try_recv() {
        if m.tid == recover && m.state == "aborted" {
            heard_void = true;
        }
    }
    assert!(heard_void, "the catch's act is announced aborted");
    // And an answer to it is refused, naming the ended process.
    let err = exec
        .act()
        .apply("g", &recover, Action::Complete, Vars::new())
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            EngineError::Action(ActionError::AlreadyCompleted { tid, state: TaskState::Aborted, .. })
                if tid == "$"
        ),
        "{err}"
    );
    assert_eq!(
        exec.proc().get("g").await.unwrap().state,
        TaskState::Aborted,
        "still as it ended"
    );
    engine.close().await;
}

#[tokio::test]
async fn no_action_reaches_an_act_of_a_process_that_ended() {
    let engine = engine_on(store().await, None).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(GUARDED).await.unwrap();
    exec.proc()
        .start("guarded", vars(json!({ "pid": "done" })))
        .await
        .unwrap();
    settle(&engine).await;
    let approve = waiting(&exec, "done").await.pop().unwrap();
    exec.act()
        .apply("done", &approve, Action::Complete, Vars::new())
        .await
        .unwrap();
    settle(&engine).await;
    assert_eq!(
        exec.proc().get("done").await.unwrap().state,
        TaskState::Completed
    );
    // Even the actions an ended act may take while its process runs
    // (submit, cancel, remove) are refused once the process has ended.
    for action in [Action::Submit, Action::Cancel, Action::Remove, Action::Skip] {
        let err = exec
            .act()
            .apply("done", &approve, action, Vars::new())
            .await
            .unwrap_err();
        assert!(
            matches!(
                &err,
                EngineError::Action(ActionError::AlreadyCompleted { .. })
            ),
            "{action:?}: {err}"
        );
    }
    engine.close().await;
}
