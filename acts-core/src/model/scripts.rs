//! [`script_sites`]: every piece of JavaScript in a model — `if`, `while`,
//! a branch's `run`, `acts.transform.code`, and each `${{ }}` in params,
//! vars, options of subflows and exposes — so a deploy can check that each
//! one parses before any process runs it.

use serde_json::Value;

use super::{NodeKind, NodeRef, Step, Variant, Workflow};

/// One piece of JavaScript in a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptSite {
    /// The node it belongs to.
    pub node: NodeRef,
    /// The key it is written under (`if`, `while`, `run`, `params`, ...).
    pub key: &'static str,
    /// The script as the user wrote it (for `${{ }}`: the inner text).
    pub text: String,
    /// Whether it is a function body (`acts.transform.code`) rather than
    /// an expression or statements.
    pub is_code: bool,
}

/// Every script of `workflow`, in model order.
pub fn script_sites(workflow: &Workflow) -> Vec<ScriptSite> {
    let mut out = Vec::new();
    let wf = NodeRef {
        kind: NodeKind::Workflow,
        id: workflow.id.clone(),
    };
    variants(&mut out, &wf, "vars", &workflow.vars);
    variants(&mut out, &wf, "exposes", &workflow.exposes);
    if let Some(c) = &workflow.concurrency {
        embedded(&mut out, &wf, "concurrency", &Value::String(c.key.clone()));
    }
    if let Some(p) = &workflow.priority {
        embedded(&mut out, &wf, "priority", p);
    }
    if let Some(f) = &workflow.fairness_key {
        embedded(&mut out, &wf, "fairness_key", &Value::String(f.clone()));
    }
    for s in &workflow.steps {
        step(&mut out, s);
    }
    out
}

fn step(out: &mut Vec<ScriptSite>, s: &Step) {
    let node = NodeRef {
        kind: NodeKind::Step,
        id: s.id.clone(),
    };
    plain(out, &node, "if", s.r#if.as_deref());
    plain(out, &node, "while", s.r#while.as_deref());
    if let Some(c) = &s.concurrency {
        embedded(out, &node, "concurrency", &Value::String(c.key.clone()));
    }
    if let Some(r) = &s.rate {
        embedded(out, &node, "rate", &Value::String(r.key.clone()));
    }
    variants(out, &node, "vars", &s.vars);
    variants(out, &node, "exposes", &s.exposes);
    if s.uses.as_deref() == Some("acts.transform.code") {
        if let Some(code) = s.params.as_str() {
            out.push(ScriptSite {
                node: node.clone(),
                key: "params",
                text: code.to_owned(),
                is_code: true,
            });
        }
    } else {
        embedded(out, &node, "params", &s.params);
    }
    for b in &s.branches {
        let bnode = NodeRef {
            kind: NodeKind::Branch,
            id: b.id.clone(),
        };
        plain(out, &bnode, "if", b.r#if.as_deref());
        plain(out, &bnode, "run", b.run.as_deref());
        variants(out, &bnode, "vars", &b.vars);
        for inner in &b.steps {
            step(out, inner);
        }
    }
    for c in s.catches.iter().chain(&s.timeouts) {
        step(out, c);
    }
}

fn plain(out: &mut Vec<ScriptSite>, node: &NodeRef, key: &'static str, text: Option<&str>) {
    if let Some(t) = text {
        out.push(ScriptSite {
            node: node.clone(),
            key,
            text: t.to_owned(),
            is_code: false,
        });
    }
}

fn variants(out: &mut Vec<ScriptSite>, node: &NodeRef, key: &'static str, list: &[Variant]) {
    for v in list {
        embedded(out, node, key, &v.value);
    }
}

/// Every `${{ ... }}` inside the strings of `value`.
fn embedded(out: &mut Vec<ScriptSite>, node: &NodeRef, key: &'static str, value: &Value) {
    match value {
        Value::String(s) => {
            let mut rest = s.as_str();
            while let Some(start) = rest.find("${{") {
                let Some(len) = super::expression::expression_len(&rest[start + 3..]) else {
                    break;
                };
                let end = start + 3 + len;
                out.push(ScriptSite {
                    node: node.clone(),
                    key,
                    text: rest[start + 3..end].trim().to_owned(),
                    is_code: false,
                });
                rest = &rest[end + 2..];
            }
        }
        Value::Array(items) => items.iter().for_each(|v| embedded(out, node, key, v)),
        Value::Object(map) => map.values().for_each(|v| embedded(out, node, key, v)),
        _ => {}
    }
}
