//! The node tree: build rules of the reference engine, dynamic acts, and
//! links that survive a store round-trip.

use std::sync::Arc;

use acts_core::model::{Act, NodeKind, Workflow};
use acts_core::tree::{ChildKind, ModelTree, NodeContent, NodeData, NodeIx, ProcessTree};
use serde_json::json;

fn tree(yaml: &str) -> ModelTree {
    let workflow = Workflow::from_yaml(yaml).expect("the test model parses");
    ModelTree::build(&workflow).expect("the test model builds")
}

fn id(t: &ModelTree, ix: Option<NodeIx>) -> Option<String> {
    ix.and_then(|i| t.get(i)).map(|n| n.id.clone())
}

#[test]
fn only_the_first_step_of_a_list_is_a_child_the_rest_are_chained() {
    let t = tree("id: m\nsteps:\n  - id: a\n  - id: b\n  - id: c\n");
    let root = t.get(t.root()).unwrap();
    assert_eq!(root.children.len(), 1);
    let a = t.find("a").unwrap();
    assert_eq!(root.children[0], (ChildKind::Normal, a));
    let an = t.get(a).unwrap();
    assert_eq!(id(&t, an.next), Some("b".into()));
    assert_eq!(id(&t, an.chain), Some("b".into()));
    let b = t.get(t.find("b").unwrap()).unwrap();
    assert_eq!(id(&t, b.prev), Some("a".into()));
    assert_eq!(id(&t, b.next), Some("c".into()));
    assert_eq!(id(&t, b.parent), Some("m".into()));
    assert_eq!(b.level, 1);
}

#[test]
fn explicit_next_jumps_back_and_suppresses_branches() {
    let t = tree(
        "id: m\nsteps:\n  - id: a\n  - id: b\n    next: a\n    branches:\n      - id: x\n        if: 'true'\n  - id: c\n",
    );
    let b = t.get(t.find("b").unwrap()).unwrap();
    assert_eq!(id(&t, b.next), Some("a".into()), "next goes back to a");
    assert_eq!(
        id(&t, b.chain),
        Some("c".into()),
        "chain still follows declaration order"
    );
    assert!(
        b.children.is_empty(),
        "branches are not built when next is set"
    );
    assert!(t.find("x").is_none());
}

#[test]
fn branches_catches_and_timeouts_hang_under_their_step() {
    let t = tree(
        "
id: m
steps:
  - id: s
    branches:
      - id: b1
        if: v > 1
        steps: [ { id: s1 }, { id: s2 } ]
      - id: b2
        else: true
    catches: [ { id: c1 }, { id: c2 } ]
    timeouts: [ { id: t1 } ]
",
    );
    let s = t.get(t.find("s").unwrap()).unwrap();
    let tags: Vec<(ChildKind, String)> = s
        .children
        .iter()
        .map(|(k, ix)| (*k, t.get(*ix).unwrap().id.clone()))
        .collect();
    assert_eq!(
        tags,
        vec![
            (ChildKind::Normal, "b1".into()),
            (ChildKind::Normal, "b2".into()),
            (ChildKind::Catch, "c1".into()),
            (ChildKind::Timeout, "t1".into()),
        ]
    );
    let s1 = t.get(t.find("s1").unwrap()).unwrap();
    assert_eq!((s1.level, id(&t, s1.parent)), (3, Some("b1".into())));
    assert_eq!(
        id(&t, t.get(t.find("c1").unwrap()).unwrap().next),
        Some("c2".into())
    );
    assert_eq!(t.render().lines().next(), Some("workflow id:m next=nil"));
}

#[test]
fn ids_are_generated_for_nodes_without_one_and_duplicates_fail() {
    let yaml = "id: m\nsteps:\n  - name: first\n  - id: _s1\n  - name: third\n    branches:\n      - steps:\n          - name: inner\n";
    let t = tree(yaml);
    assert_eq!(t.len(), 6);
    let ids = |t: &ModelTree| {
        let mut v: Vec<String> = (0..t.len())
            .filter_map(|i| {
                t.get(acts_core::tree::NodeIx::Static(i as u32))
                    .map(|n| n.id.clone())
            })
            .collect();
        v.sort();
        v
    };
    // Derived from the place in the model (a user's id keeps its own; a
    // clash gets a suffix) and the same on every build: a stored process
    // finds its nodes again after a restart.
    assert_eq!(
        ids(&t),
        vec!["_s0", "_s1", "_s2", "_s2._b0", "_s2._b0._s0", "m"]
    );
    assert_eq!(ids(&tree(yaml)), ids(&t), "stable across builds");
    let clash = tree("id: m\nsteps:\n  - name: first\n  - id: _s0\n");
    assert_eq!(ids(&clash), vec!["_s0", "_s0~1", "m"]);
    let err =
        ModelTree::build(&Workflow::from_yaml("id: m\nsteps:\n  - id: a\n  - id: a\n").unwrap())
            .unwrap_err();
    assert!(err.to_string().contains("duplicate node id 'a'"), "{err}");
}

#[test]
fn dispatched_acts_are_registered_but_not_children_and_ids_stay_unique() {
    let model = Arc::new(tree("id: m\nsteps:\n  - id: step1\n"));
    let mut p = ProcessTree::new(model.clone());
    let step1 = p.find("step1").unwrap();
    let a = p.dispatch_act(step1, Act::irq(json!({"key": "k"})).with_id("step1"));
    let node = p.node(a).unwrap();
    assert!(
        node.id.starts_with("step1-"),
        "a colliding id gets a suffix: {}",
        node.id
    );
    assert_eq!(node.level, 2);
    assert_eq!(node.content.kind(), NodeKind::Act);
    assert!(
        p.children(step1).is_empty(),
        "a dispatched act is not a child"
    );
    // The shared model tree is untouched by the process.
    assert_eq!(model.len(), 2);
    assert!(model.find(&node.id).is_none());
}

/// Port of the seed test `cache_restore_dynamic_acts` at the tree level:
/// a dynamic act chain persisted as node data and restored keeps its
/// parent/prev/next links, so the flow continues along it.
#[test]
fn dynamic_act_chain_survives_a_round_trip() {
    let model = Arc::new(tree("id: m1\nsteps:\n  - id: step1\n"));
    let mut p = ProcessTree::new(model.clone());
    let step1 = p.find("step1").unwrap();
    let block = p.dispatch_act(step1, Act::new("acts.core.block", json!({})));
    let acts: Vec<Act> = ["act1", "act2", "act3"]
        .iter()
        .map(|k| Act::irq(json!({ "key": k })))
        .collect();
    let chain = p.build_acts(block, acts, true);
    let parallel = p.build_acts(
        block,
        vec![
            Act::irq(json!({"key": "p1"})),
            Act::irq(json!({"key": "p2"})),
        ],
        false,
    );

    // Persist (through JSON, as a row would) and restore.
    let stored = serde_json::to_string(&p.dynamic_data()).unwrap();
    let data: Vec<NodeData> = serde_json::from_str(&stored).unwrap();
    let r = ProcessTree::restore(model, &data).unwrap();

    let ids = |t: &ProcessTree, ixs: &[NodeIx]| -> Vec<String> {
        ixs.iter().map(|i| t.node(*i).unwrap().id.clone()).collect()
    };
    let chain_ids = ids(&p, &chain);
    let r_chain: Vec<NodeIx> = chain_ids.iter().map(|i| r.find(i).unwrap()).collect();
    // Walking `next` from the first act visits the whole chain in order.
    let mut walked = Vec::new();
    let mut cur = Some(r_chain[0]);
    while let Some(c) = cur {
        walked.push(r.node(c).unwrap().id.clone());
        cur = r.node(c).unwrap().next;
    }
    assert_eq!(walked, chain_ids);
    assert_eq!(r.node(r_chain[2]).unwrap().prev, Some(r_chain[1]));
    // Children of the block: the first of the chain and both parallel acts.
    let r_block = r.find(&p.node(block).unwrap().id).unwrap();
    let children: Vec<String> = r
        .children(r_block)
        .iter()
        .map(|(_, c)| r.node(*c).unwrap().id.clone())
        .collect();
    let mut want = vec![chain_ids[0].clone()];
    want.extend(ids(&p, &parallel));
    assert_eq!(children, want);
    assert_eq!(r.node(r_block).unwrap().parent, r.find("step1"));
    assert!(r.children(r.find("step1").unwrap()).is_empty());
    assert_eq!(r.dynamic_data(), p.dynamic_data(), "restore is exact");
    assert!(matches!(
        *r.node(r_chain[0]).unwrap().content,
        NodeContent::Act(_)
    ));
}

#[test]
fn restore_rejects_data_that_names_missing_nodes() {
    let model = Arc::new(tree("id: m1\nsteps:\n  - id: step1\n"));
    let data = vec![NodeData {
        id: "x".into(),
        content: NodeContent::Act(Act::irq(json!({}))),
        level: 2,
        parent_id: Some("gone".into()),
        is_child: false,
        prev_id: None,
        next_id: None,
    }];
    let err = ProcessTree::restore(model, &data).unwrap_err();
    assert!(err.contains("missing parent 'gone'"), "{err}");
}

/// The tree holds the model once: the root keeps the workflow's own
/// declarations but not its steps, a step node keeps its own declarations
/// but not copies of its branches, catches and timeout steps (they are
/// nodes), and a step's literal `uses` params live in the act it runs only.
#[test]
fn the_tree_holds_each_part_of_the_model_once() {
    let t = tree(
        "
id: m
name: M
steps:
  - id: s
    uses: acts.transform.set
    params: { v: 1 }
    branches:
      - id: b1
        else: true
        steps: [ { id: s1 } ]
    catches: [ { id: c1 } ]
    timeouts: [ { id: t1 } ]
  - id: e
    uses: acts.transform.set
    params: { v: '${{ 1 + 1 }}' }
",
    );
    let w = t.workflow();
    assert_eq!((w.name.as_str(), w.steps.len()), ("M", 0));
    let s = t.get(t.find("s").unwrap()).unwrap();
    let NodeContent::Step(step) = &*s.content else {
        panic!("a step")
    };
    assert!(step.branches.is_empty() && step.catches.is_empty() && step.timeouts.is_empty());
    assert_eq!(step.params, serde_json::Value::Null);
    let Some(NodeContent::Act(act)) = s.uses_act.as_deref() else {
        panic!("a literal uses has its act built with the tree")
    };
    assert_eq!(
        (act.uses.as_str(), act.params.to_value()),
        ("acts.transform.set", json!({ "v": 1 }))
    );
    let b = t.get(t.find("b1").unwrap()).unwrap();
    assert!(matches!(&*b.content, NodeContent::Branch(b) if b.steps.is_empty()));
    // Params with an expression are evaluated per run: no shared act.
    let e = t.get(t.find("e").unwrap()).unwrap();
    assert!(e.uses_act.is_none());
    assert!(matches!(&*e.content, NodeContent::Step(s) if s.params["v"] == "${{ 1 + 1 }}"));
}

/// Every run of a step with literal params shares the model's act (no
/// copy per run) and stores no node (its task and step imply it); a
/// process rebuilt from what its tasks imply shares it again, and so does
/// one rebuilt from node rows an older store wrote for it.
#[test]
fn runs_of_a_literal_uses_share_the_models_act() {
    let model = Arc::new(tree(
        "
id: m
steps:
  - id: s
    uses: acts.core.irq
    params: { key: k }
",
    ));
    let s = model.find("s").unwrap();
    let mut p = ProcessTree::new(model.clone());
    let a = p.dispatch_shared(s).expect("a literal uses");
    let b = p.dispatch_shared(s).expect("a literal uses");
    let shared = model.get(s).unwrap().uses_act.clone().unwrap();
    for ix in [a, b] {
        assert!(Arc::ptr_eq(&p.node(ix).unwrap().content, &shared));
    }
    assert_ne!(p.node(a).unwrap().id, p.node(b).unwrap().id);
    assert!(p.dynamic_data().is_empty(), "nothing to store");
    let implied: Vec<NodeData> = [a, b]
        .iter()
        .map(|&ix| model.shared_act_data(s, &p.node(ix).unwrap().id).unwrap())
        .collect();
    let back = ProcessTree::restore_with(model.clone(), &implied, &[]).expect("restores");
    let older = ProcessTree::restore(model.clone(), &implied).expect("restores");
    for t in [&back, &older] {
        let restored = t.find(&p.node(a).unwrap().id).unwrap();
        assert!(Arc::ptr_eq(&t.node(restored).unwrap().content, &shared));
        assert_eq!(t.node(restored).unwrap().parent, Some(s));
    }
    assert!(back.dynamic_data().is_empty());
    // Rows already stored stay stored: a transition never writes them again.
    assert_eq!(older.dynamic_data(), implied);
    // What is not a step's act is refused, not guessed.
    let mut stray = implied[0].clone();
    stray.parent_id = Some("m".into());
    assert!(ProcessTree::restore_with(model.clone(), &[stray], &[]).is_err());
}
