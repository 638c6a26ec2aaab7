//! `acts serve --grpc` driven by the reference's own client, the real
//! `acts-channel` 0.25.0 from crates.io: who am I with a token and
//! `Unauthenticated` without one, deploy, start, a subscription that
//! answers every interrupt, the listings in the reference's shapes, the
//! actions on acts, snapshots, events, a durable subscription that
//! survives a server restart (every unacked message re-sent, acked ones
//! not), and the whole action table answered or refused by name.

use crate::support;

use std::path::Path;
use std::process::Child;
use std::time::Duration;

use acts_channel::model::{self, Message, ModelInfo, PageData, ProcInfo, TaskInfo};
use acts_channel::{ActsChannel, ActsOptions, Vars};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use support::grpc::{code, send, subscribe, token_config, walk_the_table};
use support::{serve_grpc, stop};

const TOKEN: &str = "grpc-test-token-of-the-app";

/// One irq step, then one msg step (the benches' approval model).
const APPROVAL: &str = "id: approval\nname: Approval\nver: '1'\non:\n  - id: by_hand\n    kind: manual\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: approve }\n  - id: tell\n    uses: acts.core.msg\n    params: { key: approved }\n";

/// Two asks in a row, for back and cancel.
const TWO_ASKS: &str = "id: two\nver: '1'\nsteps:\n  - id: first\n    uses: acts.core.irq\n    params: { key: a }\n  - id: second\n    uses: acts.core.irq\n    params: { key: b }\n";

const WAIT: Duration = Duration::from_secs(60);

fn config(dir: &Path) -> String {
    token_config(dir, TOKEN)
}

struct Server {
    child: Child,
    url: String,
}

fn start(store: &str, config: &str) -> Server {
    let (child, _http, grpc, _log) = serve_grpc(&["--store", store, "--config", config]);
    Server {
        child,
        url: format!("http://{grpc}"),
    }
}

async fn connect(url: &str) -> ActsChannel {
    ActsChannel::connect_with_token(url, Some(TOKEN.to_owned()))
        .await
        .expect("the client connects")
}

/// Subscribes as `client_id` (auto-ack as given); messages arrive on the
/// receiver.
/// The next message that `pick` accepts (hang guard: a minute).
async fn next_where(
    rx: &mut mpsc::UnboundedReceiver<Message>,
    mut pick: impl FnMut(&Message) -> bool,
) -> Message {
    loop {
        let m = tokio::time::timeout(WAIT, rx.recv())
            .await
            .expect("a message within a minute")
            .expect("the subscription is open");
        if pick(&m) {
            return m;
        }
    }
}

fn is(m: &Message, kind: &str, state: &str, key: &str) -> bool {
    m.r#type == kind && m.state == state && (key.is_empty() || m.is_params_key(key) || m.tag == key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_client_deploys_starts_answers_and_lists() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let store = format!("redb:{}", dir.path().join("s.db").display());
    let server = start(&store, &config(dir.path()));
    let mut chan = connect(&server.url).await;

    // who am I, with the token; nothing without one
    let me: Value = send(&mut chan, "acl:whoami", json!({})).await;
    assert_eq!(me["subject"], "app", "{me}");
    let mut anonymous = ActsChannel::connect(&server.url).await.expect("connects");
    let err = anonymous
        .send::<Value>("proc:ls", Vars::new())
        .await
        .expect_err("no token, no listing");
    assert_eq!(code(&err), "Unauthenticated", "{err}");

    let deployed = chan.deploy(APPROVAL, None).await.expect("deploys");
    assert_eq!(deployed.data, Some(true));
    let mut rx = subscribe(&mut chan, "approvals", true).await;

    let mut pids = Vec::new();
    for i in 0..5 {
        let vars = Vars::new().with("n", i);
        let pid = chan
            .start("approval", vars)
            .await
            .expect("starts")
            .data
            .expect("a pid");
        pids.push(pid);
    }
    // answer every interrupt; every process completes
    let mut completed = std::collections::BTreeSet::new();
    let mut answered = std::collections::BTreeSet::new();
    while completed.len() < pids.len() {
        let m = next_where(&mut rx, |m| {
            is(m, "act", "created", "approve") || is(m, "workflow", "completed", "")
        })
        .await;
        if m.r#type == "workflow" {
            completed.insert(m.pid.clone());
        } else {
            assert_eq!(m.mid, "approval");
            assert!(
                answered.insert(m.tid.clone() + &m.pid),
                "each interrupt once"
            );
            chan.complete::<Value>(&m.pid, &m.tid, Vars::new().with("ok", true))
                .await
                .expect("completes");
        }
    }
    assert_eq!(completed, pids.iter().cloned().collect());

    // the listings, decoded into the reference's own types
    let procs: PageData<ProcInfo> = send(&mut chan, "proc:ls", json!({})).await;
    assert_eq!(procs.count, 5);
    assert!(
        procs
            .rows
            .iter()
            .all(|p| p.state == "completed" && p.name == "Approval")
    );
    let page: PageData<ProcInfo> = send(
        &mut chan,
        "proc:ls",
        json!({"query": {"offset": 2, "limit": 2, "filter": null, "order_by": []}}),
    )
    .await;
    assert_eq!((page.rows.len(), page.page_num, page.page_count), (2, 2, 3));
    let one: ProcInfo = send(&mut chan, "proc:get", json!({"pid": pids[0]})).await;
    assert_eq!(one.mid, "approval");
    assert!(
        one.tasks
            .iter()
            .any(|t| t.name.is_empty() || t.r#type == "act"),
        "{:?}",
        one.tasks
    );
    let tasks: PageData<TaskInfo> = send(
        &mut chan,
        "task:ls",
        json!({"query": {"offset": 0, "limit": 100, "order_by": [],
            "filter": {"type": "and", "exprs": [{"key": "pid", "value": pids[0], "op": "eq"}]}}}),
    )
    .await;
    assert!(
        tasks.rows.iter().all(|t| t.pid == pids[0]) && tasks.count >= 3,
        "{tasks:?}"
    );
    let act = tasks
        .rows
        .iter()
        .find(|t| t.r#type == "act")
        .expect("the act");
    let task: TaskInfo = send(
        &mut chan,
        "task:get",
        json!({"pid": pids[0], "tid": act.id}),
    )
    .await;
    assert_eq!(task.state, "completed");
    let models: PageData<ModelInfo> = send(&mut chan, "model:ls", json!({})).await;
    assert_eq!(
        models
            .rows
            .iter()
            .map(|m| m.id.as_str())
            .collect::<Vec<_>>(),
        ["approval"]
    );
    let m: ModelInfo = send(
        &mut chan,
        "model:get",
        json!({"id": "approval", "fmt": "text"}),
    )
    .await;
    assert!(m.data.contains("acts.core.irq"), "{}", m.data);

    // events: the model's trigger, started through the protocol
    let events: PageData<model::EventInfo> = send(&mut chan, "evt:ls", json!({})).await;
    assert_eq!(events.rows[0].id, "approval:by_hand");
    let started: Value = send(&mut chan, "evt:start", json!({"id": "approval:by_hand"})).await;
    let pid = started["pid"].as_str().expect("a pid").to_owned();
    next_where(&mut rx, |m| {
        m.pid == pid && is(m, "act", "created", "approve")
    })
    .await;

    // a filter acts cannot answer is refused by name, never ignored
    let err = chan
        .send::<Value>(
            "proc:ls",
            Vars::from(json!({"query": {"offset": 0, "limit": 10, "order_by": [],
                "filter": {"type": "and", "exprs": [{"key": "owner", "value": "x", "op": "eq"}]}}})),
        )
        .await
        .expect_err("an unknown filter key");
    assert!(err.message().contains("'owner'"), "{err}");
    assert_eq!(stop(server.child), Some(0), "a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_name_of_the_reference_table_is_answered_or_refused_by_name() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let store = format!("redb:{}", dir.path().join("s.db").display());
    let server = start(&store, &config(dir.path()));
    let mut chan = connect(&server.url).await;
    walk_the_table(&mut chan).await;
    let err = chan
        .send::<Value>("act:set_varz", Vars::new())
        .await
        .expect_err("an unknown name");
    assert_eq!(code(&err), "NotFound");
    assert!(err.message().contains("act:set_varz"), "{err}");
    // the same answer on every transport: a payload that is not an object
    let err = chan
        .send::<Value>("proc:ls", Vars::from(json!({"query": "all"})))
        .await
        .expect_err("a query that is not one");
    assert_eq!(code(&err), "InvalidArgument", "{err}");
    assert_eq!(stop(server.child), Some(0));
}

/// The state of task `tid` of process `pid`.
async fn task_state(chan: &mut ActsChannel, pid: &str, tid: &str) -> String {
    let t: TaskInfo = send(chan, "task:get", json!({"pid": pid, "tid": tid})).await;
    t.state
}

async fn proc_state(chan: &mut ActsChannel, pid: &str) -> String {
    let p: ProcInfo = send(chan, "proc:get", json!({"pid": pid})).await;
    p.state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_actions_on_an_act_and_the_snapshots() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let store = format!("redb:{}", dir.path().join("s.db").display());
    let server = start(&store, &config(dir.path()));
    let mut chan = connect(&server.url).await;
    chan.deploy(TWO_ASKS, None).await.expect("deploys");
    let mut rx = subscribe(&mut chan, "actions", true).await;
    let asked = |key: &'static str, pid: String| {
        move |m: &Message| m.pid == pid && is(m, "act", "created", key)
    };
    let start = |chan: &mut ActsChannel| {
        let mut chan = chan.clone();
        async move {
            chan.start("two", Vars::new())
                .await
                .expect("starts")
                .data
                .expect("a pid")
        }
    };

    // submit, then back from the second ask to the first: asked again
    let pid = start(&mut chan).await;
    let a = next_where(&mut rx, asked("a", pid.clone())).await;
    chan.submit::<Value>(&pid, &a.tid, Vars::new())
        .await
        .expect("submits");
    assert_eq!(task_state(&mut chan, &pid, &a.tid).await, "submitted");
    let b = next_where(&mut rx, asked("b", pid.clone())).await;
    chan.back::<Value>(&pid, &b.tid, Vars::new().with("to", "first"))
        .await
        .expect("goes back");
    let again = next_where(&mut rx, asked("a", pid.clone())).await;
    assert_ne!(again.tid, a.tid, "the first step asks anew");
    assert_eq!(task_state(&mut chan, &pid, &b.tid).await, "backed");

    // cancel the answered first ask from the second: the first asks again
    chan.complete::<Value>(&pid, &again.tid, Vars::new())
        .await
        .expect("completes");
    next_where(&mut rx, asked("b", pid.clone())).await;
    chan.cancel::<Value>(&pid, &again.tid, Vars::new())
        .await
        .expect("cancels");
    next_where(&mut rx, asked("a", pid.clone())).await;

    // skip, remove, push, error and abort, each on a fresh process
    let pid = start(&mut chan).await;
    let a = next_where(&mut rx, asked("a", pid.clone())).await;
    chan.skip::<Value>(&pid, &a.tid, Vars::new())
        .await
        .expect("skips");
    assert_eq!(task_state(&mut chan, &pid, &a.tid).await, "skipped");
    let b = next_where(&mut rx, asked("b", pid.clone())).await;
    // push: a new act under the ask's step (its task id is in the inputs)
    let step = b.inputs.get::<Value>("step").expect("the act's step");
    let step_tid = step["task_id"].as_str().expect("the step's task id");
    let _: Value = send(
        &mut chan,
        "act:push",
        json!({"pid": pid, "tid": step_tid,
        "uses": "acts.core.irq", "params": {"key": "pushed"}}),
    )
    .await;
    next_where(&mut rx, asked("pushed", pid.clone())).await;
    let _: Value = send(&mut chan, "act:remove", json!({"pid": pid, "tid": b.tid})).await;
    assert_eq!(task_state(&mut chan, &pid, &b.tid).await, "removed");

    let pid = start(&mut chan).await;
    let a = next_where(&mut rx, asked("a", pid.clone())).await;
    let _: Value = send(
        &mut chan,
        "act:error",
        json!({"pid": pid, "tid": a.tid, "ecode": "E1", "message": "no"}),
    )
    .await;
    assert_eq!(proc_state(&mut chan, &pid).await, "error");

    let pid = start(&mut chan).await;
    let a = next_where(&mut rx, asked("a", pid.clone())).await;
    let _: Value = send(&mut chan, "act:abort", json!({"pid": pid, "tid": a.tid})).await;
    assert_eq!(proc_state(&mut chan, &pid).await, "aborted");

    // snapshots (acts' sealed data): upsert, get, list, remove
    let ok: bool = send(
        &mut chan,
        "snap:upsert",
        json!({"name": "profile", "scope": "u1", "rev": 3, "data": {"tier": "gold"}}),
    )
    .await;
    assert!(ok);
    let got: Value = send(
        &mut chan,
        "snap:get",
        json!({"name": "profile", "scope": "u1"}),
    )
    .await;
    assert_eq!(
        (got["rev"].clone(), got["data"]["tier"].clone()),
        (json!(3), json!("gold"))
    );
    let all: Vec<Value> = send(&mut chan, "snap:ls", json!({"name": "profile"})).await;
    assert_eq!(all.len(), 1);
    let _: bool = send(
        &mut chan,
        "snap:remove",
        json!({"name": "profile", "scope": "u1"}),
    )
    .await;
    let gone: Value = send(
        &mut chan,
        "snap:get",
        json!({"name": "profile", "scope": "u1"}),
    )
    .await;
    assert_eq!(gone, Value::Null);
    assert_eq!(stop(server.child), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_subscription_survives_a_restart_and_honours_acks() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let store = format!("redb:{}", dir.path().join("s.db").display());
    let cfg = config(dir.path());
    let server = start(&store, &cfg);
    let mut chan = connect(&server.url).await;
    chan.deploy(APPROVAL, None).await.expect("deploys");
    // no auto-ack: what is not acked is owed
    let mut rx = subscribe(&mut chan, "durable", false).await;
    let p1 = chan
        .start("approval", Vars::new())
        .await
        .expect("starts")
        .data
        .expect("a pid");
    let m1 = next_where(&mut rx, |m| {
        m.pid == p1 && is(m, "act", "created", "approve")
    })
    .await;
    assert_eq!(stop(server.child), Some(0));

    // Back: the unacked interrupt is sent again, with the same id; ack it.
    let server = start(&store, &cfg);
    let mut chan = connect(&server.url).await;
    let mut rx = subscribe(&mut chan, "durable", false).await;
    let again = next_where(&mut rx, |m| {
        m.pid == p1 && is(m, "act", "created", "approve")
    })
    .await;
    assert_eq!(again.id, m1.id, "the same message, re-sent");
    chan.ack(&again.id).await.expect("acks");
    // the ack is applied behind its answer, and before the server stops
    assert_eq!(stop(server.child), Some(0));
    let server = start(&store, &cfg);
    let mut chan = connect(&server.url).await;
    let owed: PageData<model::MessageInfo> = send(
        &mut chan,
        "msg:ls",
        json!({"query": {"offset": 0, "limit": 100, "order_by": [],
            "filter": {"type": "and", "exprs": [{"key": "status", "value": "pending", "op": "eq"}]}}}),
    )
    .await;
    assert!(
        owed.rows.iter().all(|m| m.id != m1.id),
        "acked: no longer pending"
    );
    assert_eq!(stop(server.child), Some(0));

    // Away: a process starts while no subscriber listens; back, its
    // interrupt arrives and the acked one does not come again.
    let server = start(&store, &cfg);
    let mut starter = connect(&server.url).await;
    let p2 = starter
        .start("approval", Vars::new())
        .await
        .expect("starts")
        .data
        .expect("a pid");
    let mut chan = connect(&server.url).await;
    let mut rx = subscribe(&mut chan, "durable", false).await;
    let mut before = Vec::new();
    let m2 = next_where(&mut rx, |m| {
        before.push(m.id.clone());
        m.pid == p2 && is(m, "act", "created", "approve")
    })
    .await;
    assert!(
        !before.contains(&m1.id),
        "an acked message is not sent again: {before:?}"
    );
    // answered through the protocol, the process completes
    chan.complete::<Value>(&m2.pid, &m2.tid, Vars::new())
        .await
        .expect("completes");
    next_where(&mut rx, |m| {
        m.pid == p2 && is(m, "workflow", "completed", "")
    })
    .await;
    assert_eq!(stop(server.child), Some(0));
}

/// `acts serve ARGS` that must not start: its exit code and what it said.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("acts"))
        .arg("serve")
        .args(args)
        .output()
        .expect("acts serve runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_grpc_listener_without_tokens_stays_on_loopback_and_a_bad_address_is_named() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let store = format!("redb:{}", dir.path().join("s.db").display());
    let (code, err) = refused(&[
        "--store",
        &store,
        "--listen",
        "127.0.0.1:0",
        "--grpc",
        "0.0.0.0:0",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--grpc 0.0.0.0:0") && err.contains("loopback"),
        "{err}"
    );
    let (code, err) = refused(&[
        "--store",
        &store,
        "--listen",
        "127.0.0.1:0",
        "--grpc",
        "localhost",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--grpc 'localhost' is not an address"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_sees_only_its_own_processes_and_may_not_hold_a_durable_subscription() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let store = format!("redb:{}", dir.path().join("s.db").display());
    let path = dir.path().join("serve.yaml");
    let (admin, ann) = (
        acts_server::hash_token(TOKEN),
        acts_server::hash_token("ann-secret"),
    );
    std::fs::write(
        &path,
        format!(
            "tokens:\n  - principal: app\n    roles: [admin]\n    sha256: {admin}\n  \
             - principal: ann\n    roles: [finance]\n    sha256: {ann}\n"
        ),
    )
    .expect("the config is written");
    let server = start(&store, &path.display().to_string());
    let mut app = connect(&server.url).await;
    app.deploy(APPROVAL, None).await.expect("deploys");
    let mut user = ActsChannel::connect_with_token(&server.url, Some("ann-secret".to_owned()))
        .await
        .expect("connects");
    let me: Value = send(&mut user, "acl:whoami", json!({})).await;
    assert_eq!(
        (me["subject"].clone(), me["unrestricted"].clone()),
        (json!("ann"), json!(false))
    );

    // a durable subscription is an operator's; a user's is refused
    let err = user
        .subscribe("mine", |_m: &Message| {}, |_e| {}, &ActsOptions::default())
        .await
        .expect_err("a user's durable subscription");
    assert_eq!(code(&err), "PermissionDenied", "{err}");
    // deploying is an admin's
    let err = user
        .deploy(APPROVAL, Some("ann_model"))
        .await
        .expect_err("a user's deploy");
    assert_eq!(code(&err), "PermissionDenied", "{err}");

    // a live stream (no client id) shows the user its own processes only
    let mut rx = subscribe(&mut user, "", true).await;
    let theirs = app
        .start("approval", Vars::new())
        .await
        .expect("starts")
        .data
        .expect("a pid");
    let own = user
        .start("approval", Vars::new())
        .await
        .expect("starts")
        .data
        .expect("a pid");
    let first = next_where(&mut rx, |m| is(m, "act", "created", "approve")).await;
    assert_eq!(
        first.pid, own,
        "only the user's own process reaches its stream"
    );
    assert_ne!(first.pid, theirs);
    let procs: PageData<ProcInfo> = send(&mut user, "proc:ls", json!({})).await;
    assert_eq!(
        procs.rows.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
        [own.as_str()]
    );
    let err = user
        .send::<Value>("proc:get", Vars::new().with("pid", theirs.clone()))
        .await
        .expect_err("another's process");
    assert!(
        matches!(code(&err).as_str(), "PermissionDenied" | "NotFound"),
        "{err}"
    );
    assert_eq!(stop(server.child), Some(0));
}
