//! Validation of a model before deploy: every error names the model, the
//! node and, for YAML, the line and column.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;

use serde_json::Value;

use super::error::{ModelError, NodeKind, NodeRef};
use super::gates::{MAX_CONCURRENCY_KEY, MAX_CONCURRENCY_LIMIT};
use super::nodes::{Act, Step};
use super::source::SourceMap;
use super::timeout::{TimeoutLimit, cost_in_literals};
use super::workflow::Workflow;

/// Package ids whose params hold a list of acts under `acts`.
const ACT_LIST_PACKAGES: &[&str] = &[
    "acts.core.block",
    "acts.core.parallel",
    "acts.core.sequence",
];

/// What validation needs to know about packages.
pub trait PackageLookup {
    /// Whether `uses: id` names a package.
    fn is_known(&self, id: &str) -> bool;

    /// Checks literal params (ones without `${{ }}`) against the package's
    /// schema; the error says what is wrong.
    fn check_params(&self, _id: &str, _params: &Value) -> Result<(), String> {
        Ok(())
    }
}

/// A closure that says which package ids exist (params are not checked).
impl<F: Fn(&str) -> bool> PackageLookup for F {
    fn is_known(&self, id: &str) -> bool {
        self(id)
    }
}

/// Whether `value` holds a `${{ }}` expression anywhere.
pub fn has_expression(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains("${{"),
        Value::Array(items) => items.iter().any(has_expression),
        Value::Object(map) => map.values().any(has_expression),
        _ => false,
    }
}

/// Checks a model against every rule that can be checked before it runs:
/// id and version present, triggers well formed (cron expressions parse),
/// node ids unique, `next` targets declared earlier, no `while` with `next`,
/// at most one `else` branch per step,
/// every `uses` a known package with literal params that match its schema,
/// acts in block, parallel and sequence params well formed, and `$cost_in`
/// durations valid.
pub fn validate(
    workflow: &Workflow,
    source: &SourceMap,
    packages: &dyn PackageLookup,
) -> Result<(), ModelError> {
    let mut v = Validator {
        workflow,
        source,
        packages,
        seen: HashMap::new(),
    };
    v.run()
}

/// Most variables a model may index.
pub const MAX_INDEXED_VARS: usize = 8;

/// A cycle of `needs` among sibling branches (`a needs b needs a`), if any.
fn needs_cycle(branches: &[crate::model::Branch]) -> Option<Vec<String>> {
    fn visit(
        id: &str,
        branches: &[crate::model::Branch],
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|p| p == id) {
            let mut cycle = path[start..].to_vec();
            cycle.push(id.to_owned());
            return Some(cycle);
        }
        let branch = branches.iter().find(|b| b.id == id)?;
        path.push(id.to_owned());
        for need in &branch.needs {
            if let Some(c) = visit(need, branches, path) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    branches
        .iter()
        .filter(|b| !b.id.is_empty())
        .find_map(|b| visit(&b.id, branches, &mut Vec::new()))
}

struct Validator<'a> {
    workflow: &'a Workflow,
    source: &'a SourceMap,
    packages: &'a dyn PackageLookup,
    /// Node ids seen so far, in traversal order, with how often.
    seen: HashMap<String, usize>,
}

impl Validator<'_> {
    fn err(
        &self,
        node: Option<NodeRef>,
        key_value: Option<(&str, &str, usize)>,
        message: String,
    ) -> ModelError {
        let location = key_value.and_then(|(k, v, n)| self.source.find_nth(k, v, n));
        ModelError::Invalid {
            model: self.workflow.id.clone(),
            node,
            location,
            message,
        }
    }

    fn run(&mut self) -> Result<(), ModelError> {
        let w = self.workflow;
        if w.id.trim().is_empty() {
            return Err(self.err(
                None,
                None,
                "missing id in model: add `id: <model id>` at the top".into(),
            ));
        }
        if w.ver.trim().is_empty() {
            return Err(self.err(
                None,
                Some(("id", &w.id, 0)),
                "missing ver in model: add `ver: <version>` (e.g. `ver: 1.0.0`)".into(),
            ));
        }
        self.triggers()?;
        self.index()?;
        self.concurrency()?;
        self.queue_order()?;
        // The model id is the root node's id: no step or branch may reuse it.
        self.claim_id(NodeKind::Workflow, &w.id)?;
        self.steps(&w.steps, "steps of the workflow")?;
        Ok(())
    }

    /// `index:` names distinct variables, at most [`MAX_INDEXED_VARS`].
    fn index(&self) -> Result<(), ModelError> {
        let names = &self.workflow.index;
        if names.len() > MAX_INDEXED_VARS {
            return Err(self.err(
                None,
                Some(("id", &self.workflow.id, 0)),
                format!(
                    "`index` names {} variables; at most {MAX_INDEXED_VARS} can be indexed",
                    names.len()
                ),
            ));
        }
        let mut seen = HashSet::new();
        for name in names {
            let fine = !name.is_empty()
                && name.len() <= 64
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !fine {
                return Err(self.err(
                    None,
                    Some(("index", name, 0)),
                    format!("`index` entry '{name}' is not a variable name (letters, digits and _, at most 64)"),
                ));
            }
            if !seen.insert(name) {
                return Err(self.err(
                    None,
                    Some(("index", name, 0)),
                    format!("`index` names '{name}' twice"),
                ));
            }
        }
        Ok(())
    }

    /// `concurrency:` has a key and a limit in range.
    fn concurrency(&self) -> Result<(), ModelError> {
        let Some(c) = &self.workflow.concurrency else {
            return Ok(());
        };
        let at = Some(("id", self.workflow.id.as_str(), 0));
        if c.key.trim().is_empty() {
            return Err(self.err(
                None,
                at,
                "`concurrency` has an empty `key`: give the text processes are grouped by, e.g. `key: ${{ customer }}`".into(),
            ));
        }
        if c.key.len() > MAX_CONCURRENCY_KEY {
            return Err(self.err(
                None,
                at,
                format!(
                    "`concurrency.key` is {} bytes; at most {MAX_CONCURRENCY_KEY}",
                    c.key.len()
                ),
            ));
        }
        if c.limit == 0 || c.limit > MAX_CONCURRENCY_LIMIT {
            return Err(self.err(
                None,
                at,
                format!(
                    "`concurrency.limit` is {}; give 1 to {MAX_CONCURRENCY_LIMIT} (how many processes of one key may run at once)",
                    c.limit
                ),
            ));
        }
        Ok(())
    }

    /// `priority:` is 1 to 5 (or an expression), `fairness_key:` not
    /// longer than a concurrency key.
    fn queue_order(&self) -> Result<(), ModelError> {
        let w = self.workflow;
        let at = Some(("id", w.id.as_str(), 0));
        match &w.priority {
            None => {}
            Some(Value::Number(n)) if n.as_u64().is_some_and(|p| (1..=5).contains(&p)) => {}
            Some(v @ Value::String(_)) if has_expression(v) => {}
            Some(other) => {
                return Err(self.err(
                    None,
                    at,
                    format!("`priority` is {other}; give 1 to 5 (5 first), or a `${{{{ }}}}` expression that gives one"),
                ));
            }
        }
        if let Some(f) = &w.fairness_key
            && f.len() > MAX_CONCURRENCY_KEY
        {
            return Err(self.err(
                None,
                at,
                format!(
                    "`fairness_key` is {} bytes; at most {MAX_CONCURRENCY_KEY}",
                    f.len()
                ),
            ));
        }
        Ok(())
    }

    fn triggers(&self) -> Result<(), ModelError> {
        let mut ids = HashSet::new();
        for (i, t) in self.workflow.on.iter().enumerate() {
            let node = NodeRef {
                kind: NodeKind::Trigger,
                id: if t.id.is_empty() {
                    format!("#{}", i + 1)
                } else {
                    t.id.clone()
                },
            };
            if t.id.trim().is_empty() {
                return Err(self.err(
                    Some(node),
                    Some(("kind", &t.kind, 0)),
                    "trigger id is empty".into(),
                ));
            }
            let at = Some(("id", t.id.as_str(), 0));
            if !ids.insert(t.id.as_str()) {
                return Err(self.err(
                    Some(node),
                    Some(("id", &t.id, 1)),
                    format!("duplicate trigger id '{}'", t.id),
                ));
            }
            if t.kind.trim().is_empty() {
                return Err(self.err(
                    Some(node),
                    at,
                    "trigger kind is empty (manual, hook, schedule, chat or a package id)".into(),
                ));
            }
            if t.kind == "schedule" {
                let Some(expr) = t.schedule.as_deref() else {
                    return Err(self.err(
                        Some(node),
                        at,
                        "missing schedule for kind 'schedule'".into(),
                    ));
                };
                if let Err(e) = cron::Schedule::from_str(expr) {
                    return Err(self.err(
                        Some(node),
                        Some(("schedule", expr, 0)),
                        format!("invalid schedule '{expr}': {e} (6 fields: sec min hour day-of-month month day-of-week)"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Registers a node id; a second occurrence is an error.
    fn claim_id(&mut self, kind: NodeKind, id: &str) -> Result<(), ModelError> {
        if id.is_empty() {
            return Ok(());
        }
        let count = self.seen.entry(id.to_owned()).or_insert(0);
        *count += 1;
        if *count > 1 {
            let n = *count - 1;
            return Err(self.err(
                Some(NodeRef {
                    kind,
                    id: id.to_owned(),
                }),
                Some(("id", id, n)),
                format!("duplicate node id '{id}': node ids must be unique in the whole model"),
            ));
        }
        Ok(())
    }

    fn steps(&mut self, steps: &[Step], owner: &str) -> Result<(), ModelError> {
        for (i, step) in steps.iter().enumerate() {
            let node = NodeRef {
                kind: NodeKind::Step,
                id: if step.id.is_empty() {
                    format!("#{} of the {owner}", i + 1)
                } else {
                    step.id.clone()
                },
            };
            self.claim_id(NodeKind::Step, &step.id)?;
            let at = Some(("id", step.id.as_str(), 0));
            if let Some(problem) =
                super::gate_problem(step.concurrency.as_ref(), step.rate.as_ref())
            {
                return Err(self.err(Some(node), at, problem));
            }
            if let Some(next) = &step.next {
                if step.r#while.is_some() {
                    return Err(self.err(
                        Some(node),
                        at,
                        "a step cannot have both `while` and `next`".into(),
                    ));
                }
                // The target must be this step (a loop, as in the reference)
                // or one declared earlier (backward jumps only).
                if !self.seen.contains_key(next) && next != &step.id {
                    return Err(self.err(
                        Some(node),
                        Some(("next", next, 0)),
                        format!("`next: {next}` points nowhere: it must name this step or a step declared before it"),
                    ));
                }
            }
            if let Some(uses) = &step.uses {
                self.uses(&node, uses, &step.params)?;
                self.act_lists(&node, uses, &step.params)?;
            }
            for script in [&step.r#if, &step.r#while].into_iter().flatten() {
                self.durations(&node, script)?;
            }
            if step.next.is_none() {
                // Two `else` branches would each wait for the other to be
                // skipped, forever.
                let elses: Vec<&str> = step
                    .branches
                    .iter()
                    .filter(|b| b.r#else)
                    .map(|b| b.id.as_str())
                    .collect();
                if elses.len() > 1 {
                    return Err(self.err(
                        Some(node.clone()),
                        at,
                        format!(
                            "only one branch of a step may be `else: true` (found {}: {})",
                            elses.len(),
                            elses
                                .iter()
                                .map(|id| if id.is_empty() {
                                    "<no id>".to_owned()
                                } else {
                                    format!("'{id}'")
                                })
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                }
                if let Some(cycle) = needs_cycle(&step.branches) {
                    return Err(self.err(
                        Some(NodeRef {
                            kind: NodeKind::Branch,
                            id: cycle[0].clone(),
                        }),
                        Some(("id", cycle[0].as_str(), 0)),
                        format!(
                            "branches wait for each other forever: {}",
                            cycle.join(" needs ")
                        ),
                    ));
                }
                for branch in &step.branches {
                    let bnode = NodeRef {
                        kind: NodeKind::Branch,
                        id: branch.id.clone(),
                    };
                    self.claim_id(NodeKind::Branch, &branch.id)?;
                    if let Some(script) = &branch.r#if {
                        self.durations(&bnode, script)?;
                    }
                    for need in &branch.needs {
                        if !step
                            .branches
                            .iter()
                            .any(|b| &b.id == need && !b.id.is_empty())
                        {
                            return Err(self.err(
                                Some(bnode),
                                Some(("needs", need, 0)),
                                format!(
                                    "`needs: {need}` names no sibling branch of step '{}'",
                                    step.id
                                ),
                            ));
                        }
                    }
                    self.steps(&branch.steps, &format!("branch '{}'", branch.id))?;
                }
            }
            self.steps(&step.catches, &format!("catches of step '{}'", node.id))?;
            self.steps(&step.timeouts, &format!("timeouts of step '{}'", node.id))?;
        }
        Ok(())
    }

    fn uses(&self, node: &NodeRef, uses: &str, params: &Value) -> Result<(), ModelError> {
        if uses.trim().is_empty() {
            return Err(self.err(
                Some(node.clone()),
                Some(("id", &node.id, 0)),
                "`uses` is empty: name a package".into(),
            ));
        }
        if !self.packages.is_known(uses) {
            return Err(self.err(
                Some(node.clone()),
                Some(("uses", uses, 0)),
                format!("unknown package '{uses}'"),
            ));
        }
        if !has_expression(params)
            && let Err(message) = self.packages.check_params(uses, params)
        {
            return Err(self.err(Some(node.clone()), Some(("uses", uses, 0)), message));
        }
        Ok(())
    }

    /// Acts nested in block/parallel/sequence params are checked like steps'
    /// `uses`. Params that are expressions are checked at run time.
    fn act_lists(&self, node: &NodeRef, uses: &str, params: &Value) -> Result<(), ModelError> {
        if !ACT_LIST_PACKAGES.contains(&uses) {
            return Ok(());
        }
        let Some(acts) = params.get("acts") else {
            return Err(self.err(
                Some(node.clone()),
                Some(("uses", uses, 0)),
                format!("package '{uses}' needs `params.acts`: a list of acts"),
            ));
        };
        let Value::Array(items) = acts else {
            return Ok(()); // an expression, evaluated at run time
        };
        for item in items {
            let act: Act = serde_json::from_value(item.clone()).map_err(|e| {
                self.err(
                    Some(node.clone()),
                    Some(("uses", uses, 0)),
                    format!("an item of `params.acts` is not an act: {e}"),
                )
            })?;
            let act_node = NodeRef {
                kind: NodeKind::Act,
                id: if act.id.is_empty() {
                    format!("in {}", node)
                } else {
                    act.id.clone()
                },
            };
            if let Some(problem) = super::gate_problem(act.concurrency.as_ref(), act.rate.as_ref())
            {
                return Err(self.err(Some(act_node), Some(("uses", uses, 0)), problem));
            }
            let params = act.params.as_value();
            self.uses(&act_node, &act.uses, &params)?;
            self.act_lists(&act_node, &act.uses, &params)?;
        }
        Ok(())
    }

    fn durations(&self, node: &NodeRef, script: &str) -> Result<(), ModelError> {
        for literal in cost_in_literals(script) {
            if let Err(e) = literal.parse::<TimeoutLimit>() {
                return Err(self.err(
                    Some(node.clone()),
                    Some(("if", script, 0)),
                    format!("malformed duration in `$cost_in`: {e}"),
                ));
            }
        }
        Ok(())
    }
}
