//! The crash matrix: for each reference workflow, one crash-free run is
//! recorded batch by batch (`CrashStore`); then, for every k, the store is
//! cut after its k-th committed batch — what a crash right after that
//! commit leaves — and a new engine on it resumes and is driven to the end
//! by the same deterministic client. Each run must reach the same terminal
//! state and outputs as the crash-free one, and no client action that
//! returned `Ok` may be lost or applied twice: an answer acknowledged
//! before the cut is in the recovered task history before the run goes on,
//! and at the end each answer is in its task's history as often as it was
//! before the cut plus as often as this run's calls returned `Ok` (as
//! acts-sim's exactly-once check). A client on a durable channel never acks: after each cut it
//! reconnects and must hear every message of the crash-free run that ends
//! a task at least once — those of committed transitions re-sent with their
//! original ids (a `created` message whose task already ended is closed,
//! not re-sent).
//! Every crash point is tried; the count is printed.

use std::sync::Arc;
use std::time::Duration;

use acts_core::engine::{ChannelOptions, Engine, EngineError, ProcInfo, TaskInfo};
use acts_core::model::Vars;
use acts_core::scheduler::{Action, Message, TaskState};
use acts_core::time::ManualClock;
use acts_store::KvStore;
use acts_testkit::CrashStore;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

const PID: &str = "p1";

struct Case {
    name: &'static str,
    /// Models to deploy; the first is started.
    models: &'static [&'static str],
}

const CHILD: &str = "id: child\nver: '1'\nsteps:\n  - id: c1\n    uses: acts.transform.code\n    params: 'return { doubled: n * 2 }'\nexposes:\n  - name: doubled\n";

const CASES: &[Case] = &[
    Case {
        name: "sequence",
        models: &[
            "id: main\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.core.irq\n    params: { key: a }\n  - id: s2\n    uses: acts.core.irq\n    params: { key: b }\n  - id: s3\n    uses: acts.transform.code\n    params: 'return { total: a_n + b_n }'\n",
        ],
    },
    Case {
        name: "branches",
        models: &[
            "id: main\nver: '1'\nvars:\n  - { name: v, value: 5 }\nsteps:\n  - id: s1\n    branches:\n      - id: big\n        if: v > 3\n        steps:\n          - { id: b1, uses: acts.core.irq, params: { key: big } }\n      - id: small\n        else: true\n        steps:\n          - { id: b2, uses: acts.transform.set, params: { small: true } }\n  - id: s2\n    uses: acts.transform.set\n    params: { done: true }\n",
        ],
    },
    Case {
        name: "parallel",
        models: &[
            "id: main\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.core.parallel\n    params:\n      in: ['x', 'y', 'z']\n      acts:\n        - { uses: acts.core.irq, params: { key: each } }\n  - id: s2\n    uses: acts.transform.set\n    params: { fanned: true }\n",
        ],
    },
    Case {
        name: "subflow",
        models: &[
            "id: main\nver: '1'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: n }\n  - id: call\n    uses: acts.core.subflow\n    params:\n      to: child\n      options: { n: 21 }\n  - id: after\n    uses: acts.transform.code\n    params: 'return { got: doubled }'\n",
            CHILD,
        ],
    },
    Case {
        name: "catches",
        models: &[
            "id: main\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.core.irq\n    params: { key: fail }\n    catches:\n      - id: c1\n        if: $ecode() == 'E1'\n        uses: acts.core.irq\n        params: { key: recover }\n  - id: s2\n    uses: acts.transform.set\n    params: { after: true }\n",
        ],
    },
    Case {
        name: "timeouts",
        models: &[
            "id: main\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.core.irq\n    params: { key: slow }\n    timeouts:\n      - id: t1\n        if: $cost_in('1h')\n        uses: acts.core.action\n        params: { action: abort }\n  - id: s2\n    uses: acts.transform.set\n    params: { after: true }\n",
        ],
    },
    Case {
        name: "irq_actions",
        models: &[
            "id: main\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.core.irq\n    params: { key: first }\n  - id: review\n    uses: acts.core.irq\n    params: { key: review }\n  - id: s3\n    uses: acts.core.irq\n    params: { key: submit }\n  - id: s4\n    uses: acts.core.irq\n    params: { key: skip }\n  - id: s5\n    uses: acts.core.irq\n    params: { key: abort }\n",
        ],
    },
    Case {
        name: "set_code",
        models: &[
            "id: main\nver: '1'\nsteps:\n  - id: step1\n    uses: acts.transform.set\n    params: { a: 10 }\n  - id: step2\n    uses: acts.transform.code\n    params: 'return { b: a + 10 }'\n  - id: step3\n    uses: acts.transform.set\n    params: { c: 30 }\n",
        ],
    },
    Case {
        // Nodes without ids: their generated ids must be the same after a
        // restart, or the stored process cannot be loaded.
        name: "idless",
        models: &[
            "id: main\nver: '1'\nsteps:\n  - uses: acts.core.irq\n    params: { key: a }\n  - branches:\n      - if: a_n > 0\n        steps:\n          - uses: acts.core.irq\n            params: { key: b }\n      - else: true\n        steps:\n          - uses: acts.transform.set\n            params: { b_n: 0 }\n  - uses: acts.transform.code\n    params: 'return { total: a_n + b_n }'\n",
        ],
    },
];

/// The client's answer to a waiting act, decided from the process state
/// only (so it is the same before and after any crash).
fn answer(key: &str, tasks: &[TaskInfo]) -> Option<(Action, Vars)> {
    let vars = |v: Value| v.as_object().cloned().unwrap_or_default();
    let instances = |nid: &str| tasks.iter().filter(|t| t.nid == nid).count();
    Some(match key {
        "a" => (Action::Complete, vars(json!({"a_n": 1}))),
        "b" => (Action::Complete, vars(json!({"b_n": 2}))),
        "fail" => (
            Action::Error,
            vars(json!({"ecode": "E1", "message": "boom"})),
        ),
        "review" if instances("review") == 1 => (Action::Back, vars(json!({"to": "s1"}))),
        "submit" => (Action::Submit, vars(json!({"submitted": true}))),
        "skip" => (Action::Skip, Vars::new()),
        "abort" => (Action::Abort, Vars::new()),
        "slow" => return None, // left to time out
        other => (Action::Complete, vars(json!({ other: true }))),
    })
}

async fn recv(rx: &mut UnboundedReceiver<Message>) {
    // A hang guard, not a timing assumption: something must happen.
    tokio::time::timeout(Duration::from_secs(60), rx.recv())
        .await
        .expect("the process makes progress")
        .expect("channel open");
}

/// A client answer that returned `Ok`: its task, its action's wire name,
/// and how many batches the store had committed when it returned (it is
/// in one of them: an upper bound on where).
struct Ack {
    tid: String,
    action: &'static str,
    by_batch: usize,
}

/// Drives process `PID` to its end on `engine`: deploys and starts it if
/// the store does not have it yet, answers every waiting act, and moves
/// the clock on when only a timeout can make progress. Returns the ended
/// process and the answers that returned `Ok` (`recorded`: the store whose
/// committed batches date them).
async fn drive(
    engine: &Engine,
    clock: &ManualClock,
    case: &Case,
    recorded: Option<&CrashStore>,
) -> (ProcInfo, Vec<Ack>) {
    let mut acks = Vec::new();
    let exec = engine.executor();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    engine.runtime().resume().await.expect("resume");
    for m in case.models.iter().rev() {
        exec.model().deploy_yaml(m).await.expect("deploy");
    }
    match exec.proc().get(PID).await {
        Ok(_) => {}
        Err(EngineError::ProcessNotFound(_)) => {
            let mut v = Vars::new();
            v.insert("pid".into(), json!(PID));
            match exec.proc().start("main", v).await {
                Ok(_) | Err(EngineError::Duplicated(_)) => {}
                Err(e) => panic!("start: {e}"),
            }
        }
        Err(e) => panic!("process: {e}"),
    }
    loop {
        let info = exec.proc().get(PID).await.expect("process readable");
        if info.state.is_terminal() {
            return (info, acks);
        }
        let tasks = exec.task().list(PID).await.expect("tasks");
        let waiting: Vec<&TaskInfo> = tasks
            .iter()
            .filter(|t| t.kind == "act" && t.state == TaskState::Interrupt)
            .collect();
        let mut acted = false;
        let mut slow = false;
        for t in waiting {
            let key = t.key.clone().unwrap_or_default();
            match answer(&key, &tasks) {
                Some((action, vars)) => {
                    match exec.act().apply(PID, &t.tid, action, vars).await {
                        Ok(()) => {
                            let by_batch = match recorded {
                                Some(store) => store.committed().await,
                                None => 0,
                            };
                            acks.push(Ack {
                                tid: t.tid.clone(),
                                action: action.as_str(),
                                by_batch,
                            });
                            acted = true;
                        }
                        // Settled meanwhile (e.g. by a sibling's answer).
                        Err(EngineError::Action(_)) => acted = true,
                        Err(e) => panic!("act: {e}"),
                    }
                    break; // re-read the state after every answer
                }
                None => slow = true,
            }
        }
        if !acted {
            if slow {
                clock.advance(Duration::from_secs(2 * 3600));
            }
            recv(&mut rx).await;
        }
    }
}

/// A client on a durable channel: everything it hears, as
/// `(type, node id, state)` and by message id.
async fn client(engine: &Engine) -> (acts_core::engine::Channel, UnboundedReceiver<Message>) {
    let ch = engine
        .channels()
        .durable("client", ChannelOptions::default())
        .await
        .expect("the client's channel registers");
    let rx = ch.subscribe();
    (ch, rx)
}

/// How often each (task, action) is in process `PID`'s task histories
/// (none: the store does not have the process).
async fn histories(engine: &Engine) -> std::collections::BTreeMap<(String, String), usize> {
    let mut out = std::collections::BTreeMap::new();
    match engine.executor().task().list(PID).await {
        Ok(tasks) => {
            for t in tasks {
                for e in t.history {
                    *out.entry((t.tid.clone(), e.action)).or_default() += 1;
                }
            }
        }
        Err(EngineError::ProcessNotFound(_)) => {}
        Err(e) => panic!("tasks: {e}"),
    }
    out
}

fn heard(rx: &mut UnboundedReceiver<Message>) -> Vec<Message> {
    let mut out = Vec::new();
    while let Ok(m) = rx.try_recv() {
        out.push(m);
    }
    out
}

/// The messages as a client that de-duplicates by id sees them, each as
/// `(type, node, state)`, sorted.
fn shape(messages: &[Message]) -> Vec<Shape> {
    let mut seen = std::collections::HashSet::new();
    let mut v: Vec<Shape> = messages
        .iter()
        .filter(|m| seen.insert(m.id.clone()))
        .map(|m| {
            // Dynamic acts get fresh node ids in every run: name them by
            // key or package.
            let node = if m.r#type == "act" {
                m.key.clone().or(m.uses.clone()).unwrap_or_default()
            } else {
                m.nid.clone()
            };
            (m.r#type.to_string(), node, m.state.to_string())
        })
        .collect();
    v.sort();
    v
}

/// A message as the client sees it: `(type, node, state)`.
type Shape = (String, String, String);

fn split_created(all: Vec<Shape>) -> (Vec<Shape>, Vec<Shape>) {
    all.into_iter()
        .partition(|(_, _, state)| state != "created")
}

async fn run_case(case: &Case) -> usize {
    // The crash-free run, recorded.
    let recorded = Arc::new(CrashStore::new());
    let clock = ManualClock::new(1_000_000);
    let engine = Engine::builder()
        .store(recorded.clone() as Arc<dyn KvStore>)
        .clock(Arc::new(clock.clone()))
        .resume_on_start(false)
        .start()
        .await
        .expect("test setup");
    let (_ch, mut rx) = client(&engine).await;
    let (expected, acked) = drive(&engine, &clock, case, Some(&recorded)).await;
    let all = heard(&mut rx);
    let ids: std::collections::HashSet<String> = all.iter().map(|m| m.id.clone()).collect();
    engine.close().await;
    let batches = recorded.committed().await;
    assert!(
        batches >= 2,
        "{}: the run is too short to cut ({batches})",
        case.name
    );

    // Every crash point.
    for k in 0..=batches {
        let store = Arc::new(recorded.recover_prefix(k).await);
        let clock = ManualClock::new(1_000_000);
        let engine = Engine::builder()
            .store(store as Arc<dyn KvStore>)
            .clock(Arc::new(clock.clone()))
            .resume_on_start(false)
            .start()
            .await
            .expect("test setup");
        // The client reconnects: what the cut store still owes it comes
        // again, with the ids it had; then the run goes on.
        let (ch, mut rx) = client(&engine).await;
        ch.resend_pending().await.expect("re-send");
        let resent = heard(&mut rx);
        for m in &resent {
            assert!(
                ids.contains(&m.id),
                "{}: cut {k}: a re-sent message has a new id",
                case.name
            );
        }
        // Every answer acknowledged before the cut was kept.
        let before = histories(&engine).await;
        for ack in acked.iter().filter(|a| a.by_batch <= k) {
            assert!(
                before.contains_key(&(ack.tid.clone(), ack.action.to_owned())),
                "{}: cut {k}: '{}' on {} returned Ok by batch {} but is not in the recovered history",
                case.name,
                ack.action,
                ack.tid,
                ack.by_batch
            );
        }
        let (got, acks) = drive(&engine, &clock, case, None).await;
        // Nothing applied twice, nothing lost: each answer is in the
        // history as often as before the cut plus this run's `Ok`s.
        let end = histories(&engine).await;
        let mut want = before.clone();
        for ack in &acks {
            *want
                .entry((ack.tid.clone(), ack.action.to_owned()))
                .or_default() += 1;
        }
        for (key, n) in &want {
            assert_eq!(
                end.get(key),
                Some(n),
                "{}: cut {k}: '{}' on {} is in the history {:?} time(s), answered {n} time(s)",
                case.name,
                key.1,
                key.0,
                end.get(key)
            );
        }
        assert_eq!(
            (got.state, &got.outputs),
            (expected.state, &expected.outputs),
            "{}: crash after batch {k} of {batches}",
            case.name
        );
        // Every message of the crash-free run that ends a task reached the
        // client at least once (before the cut: re-sent; after it: sent by
        // the new run). A `created` message whose task ended before the
        // cut is closed, not re-sent — the end message supersedes it — so
        // those are heard at most as often as in the crash-free run.
        let mut after = resent;
        after.extend(heard(&mut rx));
        let (got_ends, got_created) = split_created(shape(&after));
        let (want_ends, want_created) = split_created(shape(&all));
        assert_eq!(
            got_ends, want_ends,
            "{}: cut {k}: the client did not hear every end",
            case.name
        );
        let mut left = want_created.clone();
        for c in &got_created {
            let i = left
                .iter()
                .position(|w| w == c)
                .unwrap_or_else(|| panic!("{}: cut {k}: an unexpected message {c:?}", case.name));
            left.remove(i);
        }
        engine.close().await;
    }
    batches + 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_of_every_reference_workflow_recovers_to_the_same_end() {
    let mut points = 0;
    for case in CASES {
        let n = run_case(case).await;
        println!("crash matrix: {}: {n} crash points", case.name);
        points += n;
    }
    println!(
        "crash matrix: {} workflows, {points} crash points tried",
        CASES.len()
    );
    assert!(CASES.len() >= 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_free_outcomes_are_the_documented_ones() {
    // Pins what the matrix compares against, so a bug that breaks every
    // run the same way still fails.
    let outcome = |name: &str| CASES.iter().find(|c| c.name == name).unwrap();
    let run = |case: &'static Case| async move {
        let clock = ManualClock::new(1_000_000);
        let engine = Engine::builder()
            .clock(Arc::new(clock.clone()))
            .resume_on_start(false)
            .start()
            .await
            .unwrap();
        drive(&engine, &clock, case, None).await.0
    };
    let seq = run(outcome("sequence")).await;
    assert_eq!(seq.state, TaskState::Completed);
    assert_eq!(seq.outputs.get("total"), Some(&json!(3)));
    let sub = run(outcome("subflow")).await;
    assert_eq!(sub.outputs.get("got"), Some(&json!(42)));
    let catches = run(outcome("catches")).await;
    assert_eq!(catches.state, TaskState::Completed);
    assert_eq!(catches.outputs.get("after"), Some(&json!(true)));
    let timeouts = run(outcome("timeouts")).await;
    assert_eq!(timeouts.state, TaskState::Aborted, "the timeout aborted it");
    let actions = run(outcome("irq_actions")).await;
    assert_eq!(actions.state, TaskState::Aborted);
    let set_code = run(outcome("set_code")).await;
    assert_eq!(set_code.outputs.get("b"), Some(&json!(20)));
    let idless = run(outcome("idless")).await;
    assert_eq!(idless.state, TaskState::Completed);
    assert_eq!(idless.outputs.get("total"), Some(&json!(3)));
}
