//! Scenario tests of the process core: final states, outputs and the exact
//! sequence of messages a client sees (spec §9).

use std::sync::Arc;

use acts_core::model::{Vars, Workflow};
use acts_core::package::PackageRegistry;
use acts_core::scheduler::{
    Action, ActionError, MessageInterest, MessageState, MessageType, Process, Services, TaskError,
    TaskState,
};
use acts_core::script::ScriptEngine;
use acts_core::tree::ModelTree;
use serde_json::{Value, json};

struct Fixture {
    scripts: ScriptEngine,
    packages: PackageRegistry,
}

impl Fixture {
    fn new() -> Self {
        Self {
            scripts: ScriptEngine::default(),
            packages: PackageRegistry::with_builtins(),
        }
    }

    fn svc(&self) -> Services<'_> {
        self.svc_for(MessageInterest::ALL)
    }

    /// Services whose listeners want `interest`.
    fn svc_for(&self, interest: MessageInterest) -> Services<'_> {
        Services {
            scripts: &self.scripts,
            packages: &self.packages,
            seals: None,
            models: None,
            limits: Default::default(),
            interest,
        }
    }

    /// Starts `yaml` with `vars` and runs until it settles.
    fn start(&self, yaml: &str, vars: Value) -> Process {
        let w = Workflow::from_yaml(yaml).expect("the scenario model parses");
        let tree = Arc::new(ModelTree::build(&w).expect("the scenario model builds"));
        let mut p = Process::new("p1", tree, vars.as_object().cloned().unwrap_or_default());
        p.run(self.svc());
        p
    }
}

fn shorts(p: &mut Process) -> Vec<String> {
    p.take_messages().iter().map(|m| m.short()).collect()
}

/// The irq act waiting with `key`.
fn irq(p: &Process, key: &str) -> String {
    waiting(p)
        .into_iter()
        .find(|(_, node)| node.contains(key))
        .map(|(tid, _)| tid)
        .expect("an interrupted act with that key")
}

/// Every act waiting for a client: its task id and its node (as text, to
/// match keys against).
fn waiting(p: &Process) -> Vec<(String, String)> {
    p.tasks
        .all()
        .filter(|(_, t)| t.state == TaskState::Interrupt)
        .map(|(_, t)| {
            let node = p
                .tree
                .node(t.node)
                .map(|n| format!("{:?}", n.content))
                .unwrap_or_default();
            (t.id.clone(), node)
        })
        .collect()
}

fn vars(v: Value) -> Vars {
    v.as_object().cloned().unwrap_or_default()
}

const QUICK_START: &str = "
id: my_model
ver: 0.1.0
name: my model
steps:
  - name: step 1
    uses: acts.transform.set
    params: { a: 10 }
  - name: step 2
    uses: acts.transform.code
    params: |
      return { data: a + 10 };
";

#[test]
fn quick_start_data_flow() {
    let f = Fixture::new();
    let mut p = f.start(QUICK_START, json!({"a": 0, "pid": "w1"}));
    assert_eq!(p.state(), TaskState::Completed);
    assert_eq!(p.outputs(), vars(json!({"a": 10, "data": 20, "pid": "w1"})));
    assert_eq!(
        shorts(&mut p),
        vec![
            "workflow/created",
            "step/created",
            "act/completed",
            "step/completed",
            "step/created",
            "act/completed",
            "step/completed",
            "workflow/completed"
        ]
    );
}

const APPROVAL: &str = "
id: approval
ver: 1.0.0
steps:
  - id: approve
    uses: acts.core.irq
    params: { key: approve1 }
";

#[test]
fn approval_irq_waits_for_the_client() {
    let f = Fixture::new();
    let mut p = f.start(APPROVAL, json!({}));
    assert_eq!(p.state(), TaskState::Running);
    let msgs = p.take_messages();
    let seq: Vec<String> = msgs.iter().map(|m| m.short()).collect();
    assert_eq!(seq, vec!["workflow/created", "step/created", "act/created"]);
    let act = msgs.last().unwrap();
    assert_eq!(
        (act.key.as_deref(), act.uses.as_deref()),
        (Some("approve1"), Some("acts.core.irq"))
    );

    let tid = irq(&p, "approve1");
    p.act(&tid, Action::Complete, vars(json!({"ok": true})), f.svc())
        .unwrap();
    assert_eq!(
        shorts(&mut p),
        vec!["act/completed", "step/completed", "workflow/completed"]
    );
    assert_eq!(p.state(), TaskState::Completed);
    assert_eq!(p.outputs().get("ok"), Some(&json!(true)));
    // A second action on the finished act is refused and changes nothing.
    let err = p
        .act(&tid, Action::Complete, Vars::new(), f.svc())
        .unwrap_err();
    assert!(matches!(err, ActionError::AlreadyCompleted { .. }), "{err}");
    assert!(p.take_messages().is_empty());
}

const BRANCHES: &str = "
id: branches
ver: 1.0.0
steps:
  - id: s1
    branches:
      - id: b1
        if: v > 100
        steps: [ { id: s2, uses: acts.core.msg } ]
      - id: b2
        else: true
        steps: [ { id: s3, uses: acts.core.irq, params: { key: s3 } } ]
  - id: s4
";

#[test]
fn else_branch_runs_when_the_other_is_skipped() {
    let f = Fixture::new();
    let mut p = f.start(BRANCHES, json!({"v": 50}));
    assert_eq!(
        shorts(&mut p),
        vec![
            "workflow/created",
            "step/created",
            "step/created",
            "act/created"
        ]
    );
    let tid = irq(&p, "s3");
    p.act(&tid, Action::Complete, Vars::new(), f.svc()).unwrap();
    assert_eq!(
        shorts(&mut p),
        vec![
            "act/completed",
            "step/completed",
            "step/completed",
            "step/created",
            "step/completed",
            "workflow/completed"
        ]
    );
    assert_eq!(p.state(), TaskState::Completed);
}

#[test]
fn if_branch_runs_and_the_else_branch_is_skipped() {
    let f = Fixture::new();
    let mut p = f.start(BRANCHES, json!({"v": 500}));
    assert_eq!(p.state(), TaskState::Completed);
    let seq = shorts(&mut p);
    // s2 is a msg act: clients see only its `completed`.
    assert_eq!(
        seq,
        vec![
            "workflow/created",
            "step/created",
            "step/created",
            "act/completed",
            "step/completed",
            "step/completed",
            "step/created",
            "step/completed",
            "workflow/completed"
        ]
    );
}

#[test]
fn a_false_step_guard_skips_to_the_next_declared_step() {
    let f = Fixture::new();
    let yaml = "id: m\nver: '1'\nsteps:\n  - id: a\n    if: go\n    uses: acts.transform.set\n    params: { x: 1 }\n  - id: b\n    uses: acts.transform.set\n    params: { y: 2 }\n";
    let mut p = f.start(yaml, json!({"go": false}));
    assert_eq!(p.state(), TaskState::Completed);
    assert_eq!(
        shorts(&mut p),
        vec![
            "workflow/created",
            "step/skipped",
            "step/created",
            "act/completed",
            "step/completed",
            "workflow/completed"
        ]
    );
    let out = p.outputs();
    assert_eq!((out.get("x"), out.get("y")), (None, Some(&json!(2))));
}

#[test]
fn a_failing_script_fails_the_act_step_and_process() {
    let f = Fixture::new();
    let yaml = "id: m\nver: '1'\nsteps:\n  - id: a\n    uses: acts.transform.code\n    params: \"throw new Error('boom')\"\n";
    let mut p = f.start(yaml, json!({}));
    assert_eq!(p.state(), TaskState::Error);
    assert_eq!(
        shorts(&mut p),
        vec![
            "workflow/created",
            "step/created",
            "act/error",
            "step/error",
            "workflow/error"
        ]
    );
    let root = p.tasks.get(p.root()).unwrap();
    assert!(
        root.err
            .as_ref()
            .is_some_and(|e| e.message.contains("boom")),
        "{:?}",
        root.err
    );
}

#[test]
fn the_error_action_needs_an_ecode_and_fails_the_flow() {
    let f = Fixture::new();
    let mut p = f.start(APPROVAL, json!({}));
    p.take_messages();
    let tid = irq(&p, "approve1");
    let err = p
        .act(
            &tid,
            Action::Error,
            vars(json!({"message": "no code"})),
            f.svc(),
        )
        .unwrap_err();
    assert!(matches!(
        err,
        ActionError::MissingOption {
            option: "ecode",
            ..
        }
    ));
    assert_eq!(
        p.state(),
        TaskState::Running,
        "a refused action changes nothing"
    );
    p.act(
        &tid,
        Action::Error,
        vars(json!({"ecode": "E42", "message": "rejected"})),
        f.svc(),
    )
    .unwrap();
    assert_eq!(
        shorts(&mut p),
        vec!["act/error", "step/error", "workflow/error"]
    );
    assert_eq!(
        p.tasks.get(p.root()).unwrap().err.as_deref(),
        Some(&TaskError::new("E42", "rejected"))
    );
}

#[test]
fn abort_ends_the_process() {
    let f = Fixture::new();
    let mut p = f.start(APPROVAL, json!({}));
    p.take_messages();
    let tid = irq(&p, "approve1");
    p.act(&tid, Action::Abort, Vars::new(), f.svc()).unwrap();
    assert_eq!(p.state(), TaskState::Aborted);
    assert_eq!(
        shorts(&mut p),
        vec!["act/aborted", "step/aborted", "workflow/aborted"]
    );
}

#[test]
fn skip_and_submit_let_the_flow_continue() {
    let f = Fixture::new();
    let yaml = "id: m\nver: '1'\nsteps:\n  - id: a\n    uses: acts.core.irq\n    params: { key: a }\n  - id: b\n    uses: acts.core.irq\n    params: { key: b }\n";
    let mut p = f.start(yaml, json!({}));
    let a = irq(&p, "\"a\"");
    p.act(&a, Action::Skip, Vars::new(), f.svc()).unwrap();
    let b = irq(&p, "\"b\"");
    p.act(&b, Action::Submit, vars(json!({"note": "ok"})), f.svc())
        .unwrap();
    assert_eq!(p.state(), TaskState::Completed);
    assert_eq!(p.outputs().get("note"), Some(&json!("ok")));
}

#[test]
fn actions_on_unknown_or_non_act_tasks_are_refused() {
    let f = Fixture::new();
    let mut p = f.start(APPROVAL, json!({}));
    assert!(matches!(
        p.act("nope", Action::Complete, Vars::new(), f.svc()),
        Err(ActionError::UnknownTask { .. })
    ));
    assert!(matches!(
        p.act("$", Action::Complete, Vars::new(), f.svc()),
        Err(ActionError::NotAnAct { .. })
    ));
    assert_eq!(p.state(), TaskState::Running);
}

#[test]
fn while_loops_until_the_guard_fails() {
    let f = Fixture::new();
    let yaml = "id: m\nver: '1'\nvars:\n  - name: n\n    value: 0\nsteps:\n  - id: loop\n    while: n < 3\n    uses: acts.transform.code\n    params: \"return { n: n + 1 }\"\n";
    let mut p = f.start(yaml, json!({}));
    assert_eq!(p.state(), TaskState::Completed);
    assert_eq!(p.outputs().get("n"), Some(&json!(3)));
    let seq = shorts(&mut p);
    assert_eq!(
        seq.iter().filter(|s| *s == "step/skipped").count(),
        1,
        "{seq:?}"
    );
}

const CATCHES: &str = "
id: catches
ver: 1.0.0
steps:
  - id: work
    uses: acts.core.irq
    params: { key: work }
    catches:
      - id: on_e1
        if: $ecode() == 'E1'
        uses: acts.transform.set
        params: { handled: e1 }
      - id: on_any
        if: $ecode() != ''
        uses: acts.transform.set
        params: { logged: true }
  - id: after
    uses: acts.transform.set
    params: { after: true }
";

#[test]
fn a_matching_catch_handles_the_error_and_the_flow_goes_on() {
    let f = Fixture::new();
    let mut p = f.start(CATCHES, json!({}));
    p.take_messages();
    let tid = irq(&p, "work");
    p.act(
        &tid,
        Action::Error,
        vars(json!({"ecode": "E1", "message": "bad input"})),
        f.svc(),
    )
    .unwrap();
    assert_eq!(p.state(), TaskState::Completed, "{:?}", shorts(&mut p));
    let out = p.outputs();
    // Every matching catch runs, in order; then the flow continues.
    assert_eq!(out.get("handled"), Some(&json!("e1")));
    assert_eq!(out.get("logged"), Some(&json!(true)));
    assert_eq!(out.get("after"), Some(&json!(true)));
}

#[test]
fn when_no_catch_matches_the_original_error_stands() {
    let f = Fixture::new();
    let yaml = "id: m\nver: '1'\nsteps:\n  - id: work\n    uses: acts.core.irq\n    params: { key: work }\n    catches:\n      - id: only_e1\n        if: $ecode() == 'E1'\n        uses: acts.core.msg\n";
    let mut p = f.start(yaml, json!({}));
    p.take_messages();
    let tid = irq(&p, "work");
    p.act(
        &tid,
        Action::Error,
        vars(json!({"ecode": "E2", "message": "other"})),
        f.svc(),
    )
    .unwrap();
    assert_eq!(p.state(), TaskState::Error);
    assert_eq!(
        p.tasks.get(p.root()).unwrap().err.as_deref(),
        Some(&TaskError::new("E2", "other"))
    );
    assert_eq!(
        shorts(&mut p),
        vec!["act/error", "step/skipped", "step/error", "workflow/error"]
    );
}

/// Answers every waiting irq with `complete`, one round; returns the keys.
fn answer_round(p: &mut Process, f: &Fixture) -> Vec<String> {
    let waiting = waiting(p);
    for (tid, _) in &waiting {
        p.act(tid, Action::Complete, Vars::new(), f.svc())
            .expect("a waiting irq accepts complete");
    }
    waiting.into_iter().map(|(_, k)| k).collect()
}

#[test]
fn block_sequence_runs_acts_one_after_another() {
    let f = Fixture::new();
    let yaml = "id: m\nver: '1'\nsteps:\n  - id: s\n    uses: acts.core.block\n    params:\n      mode: sequence\n      acts:\n        - { uses: acts.core.irq, params: { key: first } }\n        - { uses: acts.core.irq, params: { key: second } }\n";
    let mut p = f.start(yaml, json!({}));
    let round1 = answer_round(&mut p, &f);
    assert_eq!(round1.len(), 1);
    assert!(round1[0].contains("first"));
    let round2 = answer_round(&mut p, &f);
    assert_eq!(round2.len(), 1);
    assert!(round2[0].contains("second"));
    assert_eq!(p.state(), TaskState::Completed);
}

#[test]
fn parallel_runs_one_block_per_element_at_once() {
    let f = Fixture::new();
    let yaml = "id: m\nver: '1'\nsteps:\n  - id: s\n    uses: acts.core.parallel\n    params:\n      in: '${{ users }}'\n      acts:\n        - { uses: acts.core.irq, params: { key: sign } }\n";
    let mut p = f.start(yaml, json!({"users": ["ann", "bob", "cy"]}));
    assert_eq!(answer_round(&mut p, &f).len(), 3, "all three at once");
    assert_eq!(p.state(), TaskState::Completed);
    // The blocks carry $index/$value for clients.
    let values: Vec<Value> = p
        .tasks
        .all()
        .filter_map(|(_, t)| match &*p.tree.node(t.node)?.content {
            acts_core::tree::NodeContent::Act(a) if a.uses == "acts.core.block" => {
                a.options.get("$value").cloned()
            }
            _ => None,
        })
        .collect();
    assert_eq!(values, vec![json!("ann"), json!("bob"), json!("cy")]);
}

#[test]
fn sequence_runs_one_block_per_element_in_turn() {
    let f = Fixture::new();
    let yaml = "id: m\nver: '1'\nsteps:\n  - id: s\n    uses: acts.core.sequence\n    params:\n      in: [a, b]\n      acts:\n        - { uses: acts.core.irq, params: { key: sign } }\n";
    let mut p = f.start(yaml, json!({}));
    assert_eq!(answer_round(&mut p, &f).len(), 1);
    assert_eq!(p.state(), TaskState::Running);
    assert_eq!(answer_round(&mut p, &f).len(), 1);
    assert_eq!(p.state(), TaskState::Completed);
}

#[test]
fn the_action_package_applies_an_action_from_the_flow() {
    let f = Fixture::new();
    let yaml = "id: m\nver: '1'\nsteps:\n  - id: s\n    uses: acts.core.action\n    params: { action: abort }\n  - id: never\n    uses: acts.transform.set\n    params: { reached: true }\n";
    let p = f.start(yaml, json!({}));
    assert_eq!(p.state(), TaskState::Aborted);
    assert_eq!(p.outputs().get("reached"), None);
    let yaml = "id: m\nver: '1'\nsteps:\n  - id: s\n    uses: acts.core.action\n    params: { action: error, options: { ecode: E7, message: from the flow } }\n    catches:\n      - if: $ecode() == 'E7'\n        uses: acts.transform.set\n        params: { caught: true }\n";
    let mut p = f.start(yaml, json!({}));
    assert_eq!(p.state(), TaskState::Completed);
    assert_eq!(p.outputs().get("caught"), Some(&json!(true)));
    let seq = shorts(&mut p);
    assert_eq!(
        seq.iter().filter(|s| *s == "act/error").count(),
        1,
        "{seq:?}"
    );
}

#[test]
fn push_adds_an_act_to_a_running_step() {
    let f = Fixture::new();
    let mut p = f.start(APPROVAL, json!({}));
    let step = p
        .tasks
        .all()
        .find(|(_, t)| p.tree.node(t.node).is_some_and(|n| n.id == "approve"))
        .map(|(_, t)| t.id.clone())
        .unwrap();
    let err = p
        .push(&step, vars(json!({"params": {}})), f.svc())
        .unwrap_err();
    assert!(
        matches!(err, ActionError::MissingOption { option: "uses", .. }),
        "{err}"
    );
    p.push(
        &step,
        vars(json!({"uses": "acts.core.irq", "params": {"key": "extra"}})),
        f.svc(),
    )
    .unwrap();
    assert_eq!(
        answer_round(&mut p, &f).len(),
        2,
        "the original irq and the pushed one"
    );
    assert_eq!(p.state(), TaskState::Completed);
    assert!(waiting(&p).is_empty());
    assert!(matches!(
        p.push("$", vars(json!({"uses": "acts.core.irq"})), f.svc()),
        Err(ActionError::NotAStep { .. })
    ));
}

/// A step's literal `uses` runs the act the model tree built (shared, not
/// copied per run); params with an expression run an act of their own,
/// with the params evaluated.
#[test]
fn a_literal_uses_runs_the_models_act_and_an_expression_its_own() {
    let f = Fixture::new();
    let p = f.start(
        "id: m\nsteps:\n  - id: a\n    uses: acts.transform.set\n    params: { v: 1 }\n  - id: b\n    uses: acts.transform.set\n    params: { w: '${{ v + 1 }}' }\n",
        json!({}),
    );
    assert_eq!(p.state(), TaskState::Completed);
    assert_eq!(p.tree.dynamic_len(), 2);
    let model = p.tree.model().clone();
    let shared = model
        .get(model.find("a").unwrap())
        .unwrap()
        .uses_act
        .clone()
        .expect("a literal uses");
    let first = p.tree.node(acts_core::tree::NodeIx::Dynamic(0)).unwrap();
    assert!(Arc::ptr_eq(&first.content, &shared));
    let second = p.tree.node(acts_core::tree::NodeIx::Dynamic(1)).unwrap();
    match &*second.content {
        acts_core::tree::NodeContent::Act(act) => assert_eq!(act.params, json!({ "w": 2 })),
        other => panic!("an act, got {other:?}"),
    }
}

/// A transition's own checks (timeouts, waits, packages) and the rows it
/// writes cover the tasks that have not ended and the tasks it changed —
/// not every task the process ever had: after each of 60 answered
/// interrupts, the open tasks and the changed tasks stay a handful.
#[test]
fn an_answer_touches_a_handful_of_tasks_however_many_ran_before() {
    let f = Fixture::new();
    let mut y = String::from("id: m\nsteps:\n");
    for i in 0..60 {
        y.push_str(&format!(
            "  - id: s{i}\n    uses: acts.core.irq\n    params: {{ key: k{i} }}\n"
        ));
    }
    let mut p = f.start(&y, json!({}));
    for i in 0..60 {
        p.tasks.take_dirty();
        let tid = irq(&p, &format!("k{i}"));
        p.act(&tid, Action::Complete, Vars::new(), f.svc()).unwrap();
        let open: Vec<_> = p.tasks.open().map(|(ix, _)| ix).collect();
        let all_open: Vec<_> = p
            .tasks
            .all()
            .filter(|(_, t)| !t.state.is_terminal())
            .map(|(ix, _)| ix)
            .collect();
        assert_eq!(open, all_open, "the open set is every task not ended");
        assert!(open.len() <= 3, "root, step, act: {}", open.len());
        let stored = p.tasks.all().map(|(_, t)| t.clone()).collect();
        let back = acts_core::scheduler::TaskTable::restore(stored).unwrap();
        let reopened: Vec<_> = back.open().map(|(ix, _)| ix).collect();
        assert_eq!(reopened, open, "a reloaded table knows its open tasks");
        assert!(!back.is_dirty());
        let changed = p.tasks.take_dirty();
        assert!(
            (1..=5).contains(&changed.len()),
            "answer {i} changed {} tasks",
            changed.len()
        );
        assert!(!p.tasks.is_dirty());
    }
    assert_eq!(p.state(), TaskState::Completed);
    assert_eq!(p.tasks.len(), 121);
    assert_eq!(p.tasks.open().count(), 0);
}

/// A step exposing an expression over data a later step changes (and a
/// skipped one exposing one: only its end message would evaluate it).
const EXPOSED_THEN_CHANGED: &str = "
id: m
steps:
  - id: s0
    if: 'false'
    exposes:
      - { name: never, value: '${{ 7 }}' }
  - id: s1
    uses: acts.transform.set
    params: { a: 1 }
    exposes:
      - { name: seen, value: '${{ a * 10 }}' }
  - id: s2
    uses: acts.transform.set
    params: { a: 2 }
  - id: s3
    uses: acts.transform.code
    params: 'return { b: a + 1 }'
    exposes:
      - { name: last, value: '${{ b * 2 }}' }
";

/// Only the messages someone listens for are built, and building them has
/// no effect on the run: the same outputs and task data as with every
/// message (an expression in `exposes` is still evaluated as its task
/// ends, not later over changed data).
#[test]
fn messages_nobody_listens_for_are_not_built_and_the_run_is_the_same() {
    let f = Fixture::new();
    let run = |interest: MessageInterest| {
        let w = Workflow::from_yaml(EXPOSED_THEN_CHANGED).expect("parses");
        let tree = Arc::new(ModelTree::build(&w).expect("builds"));
        let mut p = Process::new("p1", tree, Vars::new());
        p.run(f.svc_for(interest));
        let data: Vec<(String, Vars)> = p
            .tasks
            .all()
            .map(|(_, t)| (t.id.clone(), t.data.to_vars()))
            .collect();
        let messages = p.take_messages();
        (p.state(), p.outputs(), data, messages)
    };
    let (state, outputs, data, all) = run(MessageInterest::ALL);
    assert_eq!(state, TaskState::Completed);
    assert_eq!(outputs.get("last"), Some(&json!(6)), "{outputs:?}");
    let narrow = MessageInterest::NONE
        .with(MessageType::Workflow, MessageState::Completed)
        .with(MessageType::Act, MessageState::Created);
    let (state2, outputs2, data2, some) = run(narrow);
    assert_eq!((state2, &outputs2), (state, &outputs));
    // Task ids are drawn at random: compare the data in creation order.
    let values = |d: &[(String, Vars)]| d.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>();
    assert_eq!(values(&data2), values(&data));
    for kept in [
        json!({ "seen": 10 }),
        json!({ "last": 6 }),
        json!({ "never": 7 }),
    ] {
        assert!(
            data2.iter().any(|(_, v)| v.values().any(|x| x == &kept)),
            "{kept} was evaluated as its step ended: {data2:?}"
        );
    }
    let (_, _, data3, none) = run(MessageInterest::NONE);
    assert!(none.is_empty());
    assert_eq!(values(&data3), values(&data));
    let shorts =
        |m: &[acts_core::scheduler::Message]| m.iter().map(|m| m.short()).collect::<Vec<_>>();
    let wanted: Vec<_> = all
        .iter()
        .filter(|m| narrow.wants(m.r#type, m.state))
        .cloned()
        .collect();
    assert_eq!(shorts(&some), shorts(&wanted));
    assert_eq!(shorts(&some), ["workflow/completed"]);
}
