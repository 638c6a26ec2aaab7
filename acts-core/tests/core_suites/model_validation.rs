//! Every validation error names the model, the node and, for YAML, the line
//! and column; valid models pass.

use acts_core::model::{ModelError, NodeKind, Workflow, validate};
use acts_core::package::PackageRegistry;

const KNOWN: &[&str] = &[
    "acts.core.irq",
    "acts.core.msg",
    "acts.core.block",
    "acts.core.action",
    "acts.core.parallel",
    "acts.core.sequence",
    "acts.core.subflow",
    "acts.transform.set",
    "acts.transform.code",
];

fn check(yaml: &str) -> Result<(), ModelError> {
    let loaded = Workflow::load_yaml(yaml)?;
    validate(
        &loaded.workflow,
        &loaded.source,
        &PackageRegistry::with_builtins(),
    )
}

/// The error's node id, its line, and its text.
fn invalid(yaml: &str) -> (Option<(NodeKind, String)>, Option<usize>, String) {
    let err = check(yaml).expect_err("the model must be rejected");
    let text = err.to_string();
    match err {
        ModelError::Invalid { node, location, .. } => {
            (node.map(|n| (n.kind, n.id)), location.map(|l| l.line), text)
        }
        other => panic!("expected a validation error, got {other}"),
    }
}

#[test]
fn a_valid_model_passes() {
    let yaml = "
id: approval
ver: 1.0.0
on:
  - id: nightly
    kind: schedule
    schedule: '0 0 2 * * *'
steps:
  - id: submit
    uses: acts.core.irq
    params: { key: submit }
  - id: review
    branches:
      - id: ok
        if: approved
        steps:
          - id: notify
            uses: acts.core.msg
      - id: otherwise
        else: true
        steps:
          - id: fan_out
            uses: acts.core.parallel
            params:
              in: '${{ users }}'
              acts:
                - uses: acts.core.irq
                  params: { key: sign }
    timeouts:
      - id: late
        if: $cost_in('2h')
        uses: acts.core.msg
  - id: again
    next: submit
";
    check(yaml).unwrap();
}

#[test]
fn missing_id_and_ver() {
    let (_, _, text) = invalid("ver: 1.0.0\nsteps: []\n");
    assert!(text.contains("missing id in model"), "{text}");
    let (_, line, text) = invalid("id: m1\nsteps: []\n");
    assert_eq!(
        text,
        "model 'm1' (line 1, column 5): missing ver in model: add `ver: <version>` (e.g. `ver: 1.0.0`)"
    );
    assert_eq!(line, Some(1));
}

#[test]
fn duplicate_node_ids_point_at_the_second_one() {
    let yaml = "id: m1\nver: '1'\nsteps:\n  - id: a\n  - id: b\n    catches:\n      - id: a\n";
    let (node, line, text) = invalid(yaml);
    assert_eq!(node, Some((NodeKind::Step, "a".into())));
    assert_eq!(line, Some(7), "{text}");
    assert!(
        text.starts_with("model 'm1', step 'a' (line 7, column 13): duplicate node id 'a'"),
        "{text}"
    );
}

#[test]
fn unknown_package_names_the_step_and_line() {
    let yaml = "id: m1\nver: '1'\nsteps:\n  - id: approve\n    uses: acts.core.irqq\n";
    let (node, line, text) = invalid(yaml);
    assert_eq!(node, Some((NodeKind::Step, "approve".into())));
    assert_eq!(line, Some(5));
    assert_eq!(
        text,
        "model 'm1', step 'approve' (line 5, column 11): unknown package 'acts.core.irqq'"
    );
}

#[test]
fn unknown_package_inside_parallel_acts() {
    let yaml = "id: m1\nver: '1'\nsteps:\n  - id: p\n    uses: acts.core.parallel\n    params:\n      in: [a]\n      acts:\n        - id: x\n          uses: nope.pkg\n";
    let (node, line, text) = invalid(yaml);
    assert_eq!(node, Some((NodeKind::Act, "x".into())), "{text}");
    assert_eq!(line, Some(10));
}

#[test]
fn next_that_points_nowhere() {
    let yaml = "id: m1\nver: '1'\nsteps:\n  - id: a\n    next: z\n  - id: z\n";
    let (node, line, text) = invalid(yaml);
    assert_eq!(node, Some((NodeKind::Step, "a".into())));
    assert_eq!(line, Some(5));
    assert!(text.contains("`next: z` points nowhere"), "{text}");
    // Its own id is a loop, not nowhere (as in the reference).
    let looped = "id: m1\nver: '1'\nsteps:\n  - id: a\n    if: 'false'\n    next: a\n";
    assert!(check(looped).is_ok(), "{:?}", check(looped));
}

#[test]
fn while_with_next_is_rejected() {
    let yaml = "id: m1\nver: '1'\nsteps:\n  - id: a\n  - id: b\n    while: x < 3\n    next: a\n";
    let (_, _, text) = invalid(yaml);
    assert!(text.contains("both `while` and `next`"), "{text}");
}

#[test]
fn malformed_timeout_spec() {
    let yaml = "id: m1\nver: '1'\nsteps:\n  - id: a\n    uses: acts.core.irq\n    timeouts:\n      - id: t\n        if: $cost_in('2x')\n";
    let (node, line, text) = invalid(yaml);
    assert_eq!(node, Some((NodeKind::Step, "t".into())));
    assert_eq!(line, Some(8));
    assert!(text.contains("'2x' is not a duration"), "{text}");
}

#[test]
fn trigger_rules() {
    let (_, _, text) = invalid("id: m1\nver: '1'\non:\n  - id: t\n    kind: schedule\n");
    assert!(text.contains("missing schedule"), "{text}");
    let (_, line, text) =
        invalid("id: m1\nver: '1'\non:\n  - id: t\n    kind: schedule\n    schedule: every day\n");
    assert!(text.contains("invalid schedule 'every day'"), "{text}");
    assert_eq!(line, Some(6));
    let (_, line, text) =
        invalid("id: m1\nver: '1'\non:\n  - id: t\n    kind: manual\n  - id: t\n    kind: hook\n");
    assert!(text.contains("duplicate trigger id 't'"), "{text}");
    assert_eq!(line, Some(6));
    let (_, _, text) = invalid("id: m1\nver: '1'\non:\n  - id: t\n");
    assert!(text.contains("trigger kind is empty"), "{text}");
}

#[test]
fn needs_must_name_a_sibling_branch() {
    let yaml = "id: m1\nver: '1'\nsteps:\n  - id: s\n    branches:\n      - id: b1\n        if: 'true'\n      - id: b2\n        needs: [b9]\n";
    let (node, line, text) = invalid(yaml);
    assert_eq!(node, Some((NodeKind::Branch, "b2".into())));
    assert_eq!(line, Some(9));
    assert!(text.contains("`needs: b9` names no sibling"), "{text}");
}

#[test]
fn builder_models_validate_without_positions() {
    let w = Workflow::new()
        .with_id("m1")
        .with_step(|s| {
            s.with_id("a")
                .with_uses("acts.core.irq", serde_json::json!({"key": "a"}))
        })
        .with_step(|s| s.with_id("a"));
    let err = validate(&w, &Default::default(), &|id: &str| KNOWN.contains(&id)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "model 'm1', step 'a': duplicate node id 'a': node ids must be unique in the whole model"
    );
}

#[test]
fn the_builtin_registry_knows_exactly_the_builtin_packages() {
    assert_eq!(PackageRegistry::with_builtins().ids(), {
        let mut k = KNOWN.to_vec();
        k.sort_unstable();
        k
    });
}

#[test]
fn literal_params_are_checked_against_the_package_schema() {
    let yaml = "id: m1\nver: '1'\nsteps:\n  - id: fan\n    uses: acts.core.parallel\n    params:\n      in: [1, 2]\n      acts: []\n";
    let (node, line, text) = invalid(yaml);
    assert_eq!(node, Some((NodeKind::Step, "fan".into())));
    assert_eq!(line, Some(5));
    assert!(
        text.contains("package 'acts.core.parallel': invalid params: at /in/0"),
        "{text}"
    );
    // Params with expressions are checked when the act runs, not at deploy.
    let yaml = "id: m1\nver: '1'\nsteps:\n  - id: fan\n    uses: acts.core.parallel\n    params:\n      in: '${{ users }}'\n      acts: []\n";
    check(yaml).unwrap();
    let (_, _, text) = invalid(
        "id: m1\nver: '1'\nsteps:\n  - id: c\n    uses: acts.transform.code\n    params: { not: code }\n",
    );
    assert!(text.contains("acts.transform.code"), "{text}");
}

#[test]
fn two_else_branches_would_deadlock_and_are_rejected() {
    let yaml = "id: m1\nver: '1'\nsteps:\n  - id: s\n    branches:\n      - id: e1\n        else: true\n      - id: e2\n        else: true\n";
    let (node, line, text) = invalid(yaml);
    assert_eq!(node, Some((NodeKind::Step, "s".into())));
    assert_eq!(line, Some(4));
    assert!(
        text.ends_with("only one branch of a step may be `else: true` (found 2: 'e1', 'e2')"),
        "{text}"
    );
}

#[test]
fn branches_that_need_each_other_are_rejected() {
    let yaml = "id: m1\nver: '1'\nsteps:\n  - id: s\n    branches:\n      - id: a\n        needs: [b]\n      - id: b\n        needs: [a]\n";
    let (node, line, text) = invalid(yaml);
    assert_eq!(node, Some((NodeKind::Branch, "a".into())));
    assert_eq!(line, Some(6));
    assert!(
        text.ends_with("branches wait for each other forever: a needs b needs a"),
        "{text}"
    );
}

#[test]
fn a_node_may_not_reuse_the_model_id() {
    let yaml = "id: m1\nver: '1'\nsteps:\n  - id: m1\n";
    let (node, line, text) = invalid(yaml);
    assert_eq!(node, Some((NodeKind::Step, "m1".into())));
    assert_eq!(line, Some(4), "{text}");
    assert!(text.contains("duplicate node id 'm1'"), "{text}");
}
