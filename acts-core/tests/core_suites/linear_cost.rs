//! The cost of a long workflow is linear in its length: no stored row of a
//! process grows with the number of steps before it (only the root scope,
//! which holds the process's data, grows with the data itself). Not timed:
//! row sizes pin the mechanism (`benches/README.md` has the timings).

use crate::common;
use common::*;

use acts_core::durable::Collection;
use acts_core::engine::testing::{NodeRow, ProcRow, TaskRow, VarsRow, node_row_id};
use acts_core::engine::{ChannelOptions, Engine};
use acts_core::model::Vars;
use acts_core::scheduler::MessageState;
use acts_testkit::models::{LinearStep, linear_model};

fn linear(n: usize, irq: bool) -> String {
    let step = if irq {
        LinearStep::Irq
    } else {
        LinearStep::Set
    };
    linear_model(&format!("lin{n}"), n, step)
}

/// `n` interrupt steps whose key is an expression: each run builds (and
/// stores) an act of its own.
fn evaluated_irqs(id: &str, n: usize) -> String {
    let mut y = format!("id: {id}\nver: '1'\nsteps:\n");
    for i in 0..n {
        y.push_str(&format!(
            "  - id: s{i}\n    uses: acts.core.irq\n    params: {{ key: '${{{{ \"k{i}\" }}}}' }}\n"
        ));
    }
    y
}

/// Runs a process of `linear(n, irq)` to its end (answering each
/// interrupt) and returns the size of its root scope row and of the
/// largest stored row of each other kind (as JSON).
async fn largest_rows(n: usize, irq: bool) -> (usize, Vec<(String, usize)>) {
    let kv = store().await;
    let engine = Engine::builder()
        .store(kv.clone())
        .start()
        .await
        .expect("engine starts");
    let exec = engine.executor();
    exec.model()
        .deploy_yaml(&linear(n, irq))
        .await
        .expect("deploys");
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = exec
        .proc()
        .start(&format!("lin{n}"), Vars::new())
        .await
        .expect("starts");
    loop {
        let m = recv(&mut rx).await;
        if m.r#type == "act" && m.state == MessageState::Created {
            exec.act()
                .complete(&p.pid, &m.tid, Vars::new())
                .await
                .expect("answers");
        }
        if m.r#type == "workflow" && m.state != MessageState::Created {
            assert_eq!(m.state, MessageState::Completed);
            break;
        }
    }
    engine.storage().flush().await.expect("flushed");
    let prefix = format!("{}/", p.pid);
    let mut largest = Vec::new();
    let mut proc = Collection::<ProcRow>::new(kv.clone())
        .get(&p.pid)
        .await
        .expect("reads")
        .expect("the proc row");
    // The model it runs is stored with it (that grows with the model).
    assert!(
        proc.nodes.is_empty(),
        "dynamic nodes have rows of their own"
    );
    proc.model.clear();
    largest.push(("proc".to_owned(), json_len(&proc)));
    let tasks = Collection::<TaskRow>::new(kv.clone())
        .get_by_id_prefix(&prefix)
        .await
        .expect("reads");
    largest.push((
        "tasks".into(),
        tasks.iter().map(json_len).max().unwrap_or(0),
    ));
    let nodes = Collection::<NodeRow>::new(kv.clone())
        .get_by_id_prefix(&prefix)
        .await
        .expect("reads");
    largest.push((
        "nodes".into(),
        nodes.iter().map(json_len).max().unwrap_or(0),
    ));
    let vars = Collection::<VarsRow>::new(kv.clone())
        .get_by_id_prefix(&prefix)
        .await
        .expect("reads");
    let (root, scopes): (Vec<_>, Vec<_>) = vars.iter().partition(|v| v.tid == "$");
    largest.push((
        "vars".into(),
        scopes.iter().map(|v| json_len(*v)).max().unwrap_or(0),
    ));
    engine.close().await;
    (root.first().map(|v| json_len(*v)).unwrap_or(0), largest)
}

fn json_len<T: serde::Serialize>(row: &T) -> usize {
    serde_json::to_vec(row).map(|v| v.len()).unwrap_or(0)
}

fn assert_flat(short: &[(String, usize)], long: &[(String, usize)]) {
    assert_eq!(
        short.iter().map(|(c, _)| c).collect::<Vec<_>>(),
        long.iter().map(|(c, _)| c).collect::<Vec<_>>()
    );
    for ((c, a), (_, b)) in short.iter().zip(long) {
        // A few bytes for longer ids and numbers; never a copy of more steps.
        assert!(
            *b <= *a + 32,
            "the largest '{c}' row grew from {a} to {b} bytes with 8x the steps"
        );
    }
}

#[tokio::test]
async fn no_row_of_a_set_chain_grows_with_the_steps_before_it() {
    let (root_short, short) = largest_rows(40, false).await;
    let (root_long, long) = largest_rows(320, false).await;
    assert_flat(&short, &long);
    // The process data itself does grow: it holds every step's key.
    assert!(root_long > root_short * 4, "{root_short} / {root_long}");
}

#[tokio::test]
async fn no_row_of_an_interrupt_chain_grows_with_the_steps_before_it() {
    let (root_short, short) = largest_rows(20, true).await;
    let (root_long, long) = largest_rows(160, true).await;
    assert_flat(&short, &long);
    assert!(root_long <= root_short + 32, "{root_short} / {root_long}");
}

/// An engine on `kv`.
async fn engine_on_store(kv: &std::sync::Arc<dyn acts_store::KvStore>) -> Engine {
    Engine::builder()
        .store(kv.clone())
        .start()
        .await
        .expect("engine starts")
}

/// Deploys `model` (id `lin3`, interrupt steps) on `kv`, starts it, answers
/// its first interrupt and waits for the second; closes the engine and
/// returns the process id and both interrupt messages.
async fn two_interrupts_in(
    kv: &std::sync::Arc<dyn acts_store::KvStore>,
    model: &str,
) -> (
    String,
    acts_core::scheduler::Message,
    acts_core::scheduler::Message,
) {
    let engine = engine_on_store(kv).await;
    let exec = engine.executor();
    exec.model().deploy_yaml(model).await.expect("deploys");
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = exec
        .proc()
        .start("lin3", Vars::new())
        .await
        .expect("starts");
    let first = recv_where(&mut rx, irq_created).await;
    exec.act()
        .complete(&p.pid, &first.tid, Vars::new())
        .await
        .expect("answers");
    let second = recv_where(&mut rx, irq_created).await;
    engine.close().await;
    (p.pid, first, second)
}

/// `times` times: a new engine on `kv` loads process `pid`, answers the
/// interrupt it waits in, and closes; then the process has completed.
async fn answer_across_restarts(
    kv: &std::sync::Arc<dyn acts_store::KvStore>,
    pid: &str,
    times: usize,
) {
    for _ in 0..times {
        let engine = engine_on_store(kv).await;
        let exec = engine.executor();
        let waiting = exec
            .task()
            .list(pid)
            .await
            .expect("loads")
            .into_iter()
            .find(|t| t.state == acts_core::scheduler::TaskState::Interrupt && t.kind == "act")
            .expect("an interrupt waits");
        exec.act()
            .complete(pid, &waiting.tid, Vars::new())
            .await
            .expect("answers");
        engine.close().await;
    }
    let engine = engine_on_store(kv).await;
    let info = engine.executor().proc().get(pid).await.expect("loads");
    assert_eq!(info.state, acts_core::scheduler::TaskState::Completed);
    engine.close().await;
}

#[tokio::test]
async fn a_store_that_kept_dynamic_nodes_in_the_proc_row_still_loads_and_grows() {
    let kv = store().await;
    let (pid, _, _) = two_interrupts_in(&kv, &evaluated_irqs("lin3", 3)).await;
    // Rewrite the store as an older acts left it: the dynamic nodes inside
    // the proc row, no node rows.
    let prefix = format!("{pid}/");
    let nodes = Collection::<NodeRow>::new(kv.clone());
    let rows = nodes.get_by_id_prefix(&prefix).await.expect("reads");
    assert_eq!(rows.len(), 2, "one node row per dispatched act");
    let procs = Collection::<ProcRow>::new(kv.clone());
    let mut row = procs.get(&pid).await.expect("reads").expect("row");
    row.nodes = rows.iter().map(|r| r.node.clone()).collect();
    procs.upsert(&row).await.expect("writes");
    for r in &rows {
        nodes
            .delete(&node_row_id(&r.pid, r.seq))
            .await
            .expect("deletes");
    }
    // It loads, takes new nodes (as rows after the old ones), reloads.
    answer_across_restarts(&kv, &pid, 2).await;
    let rows = nodes.get_by_id_prefix(&prefix).await.expect("reads");
    assert_eq!(
        rows.iter().map(|r| r.seq).collect::<Vec<_>>(),
        vec![2],
        "the new node follows the two the proc row holds"
    );
}

#[tokio::test]
async fn a_literal_uses_act_has_no_node_row_and_an_older_stores_rows_still_load() {
    let kv = store().await;
    let model = linear(3, true);
    let (pid, first, second) = two_interrupts_in(&kv, &model).await;
    let prefix = format!("{pid}/");
    let nodes = Collection::<NodeRow>::new(kv.clone());
    assert!(
        nodes
            .get_by_id_prefix(&prefix)
            .await
            .expect("reads")
            .is_empty(),
        "the act of a literal `uses` is implied by its task and step"
    );
    // Rewrite the store as the previous acts left it: a node row per act.
    let tree = acts_core::tree::ModelTree::build(
        &acts_core::model::Workflow::from_yaml(&model).expect("parses"),
    )
    .expect("builds");
    for (seq, (m, step)) in [(&first, "s0"), (&second, "s1")].into_iter().enumerate() {
        let node = tree
            .find(step)
            .and_then(|s| tree.shared_act_data(s, &m.nid))
            .expect("a literal uses");
        nodes
            .upsert(&NodeRow {
                pid: pid.clone(),
                seq: seq as u32,
                node,
            })
            .await
            .expect("writes");
    }
    // It loads (the stored rows, then an implied act), and runs to its end.
    answer_across_restarts(&kv, &pid, 2).await;
    let engine = engine_on_store(&kv).await;
    let tasks = engine.executor().task().list(&pid).await.expect("loads");
    assert_eq!(
        tasks.iter().filter(|t| t.kind == "act").count(),
        3,
        "{tasks:?}"
    );
    let rows = nodes.get_by_id_prefix(&prefix).await.expect("reads");
    assert_eq!(
        rows.iter().map(|r| r.seq).collect::<Vec<_>>(),
        vec![0, 1],
        "the older rows stay; the third act has none"
    );
    engine.close().await;
}
