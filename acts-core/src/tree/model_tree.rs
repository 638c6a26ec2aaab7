//! [`ModelTree`]: the static node tree of a model, built once per deployed
//! model version and shared (behind an `Arc`) by every process of it.

use std::collections::HashMap;

use crate::model::{Branch, ModelError, NodeKind, NodeRef, Step, Workflow};

use super::node::{ChildKind, Node, NodeContent, NodeIx, long_id};

/// The static node tree of a model: the workflow, its steps, branches,
/// catch and timeout steps, with parent/children/prev/next/chain links.
///
/// Build rules (as the reference engine's):
/// - In every list of steps (workflow steps, a branch's steps, a step's
///   catches, a step's timeouts) only the **first** step is a child of the
///   owner (tagged `Normal`, `Catch` or `Timeout`); each later step is linked
///   after its predecessor: `prev`, `chain` (declaration order) and `next`
///   (unless the predecessor declares an explicit `next`).
/// - An explicit `next` must name a node built earlier (backward jumps); a
///   step with `next` has no branch nodes.
/// - Every branch of a step is a `Normal` child of the step.
/// - Steps and branches without an id get an id derived from their place
///   in the model (stable across builds; see `assign_ids`).
#[derive(Debug, Clone)]
pub struct ModelTree {
    pub(super) nodes: Vec<Node>,
    pub(super) by_id: HashMap<String, NodeIx>,
    /// The model version (the engine's revision) this tree is of; 0 when
    /// unknown (a tree built outside the engine's catalog, or of a process
    /// stored before versions existed).
    pub revision: u32,
}

impl ModelTree {
    /// Builds the tree of `workflow`. Fails on duplicate node ids and on a
    /// `next` that names no earlier node.
    pub fn build(workflow: &Workflow) -> Result<Self, ModelError> {
        Self::build_owned(workflow.clone())
    }

    /// [`build`](Self::build), taking the workflow: its steps move into
    /// the tree's nodes, so the tree holds the model once. Each step node
    /// keeps its own declarations; its branches, catches and timeout steps
    /// are nodes of their own (not copies inside it), and the root keeps
    /// the workflow's declarations without its steps.
    pub fn build_owned(mut workflow: Workflow) -> Result<Self, ModelError> {
        let root_id = if workflow.id.is_empty() {
            long_id()
        } else {
            workflow.id.clone()
        };
        assign_ids(&mut workflow.steps);
        let steps = std::mem::take(&mut workflow.steps);
        let mut tree = ModelTree {
            nodes: Vec::new(),
            by_id: HashMap::new(),
            revision: 0,
        };
        let model_id = workflow.id.clone();
        let root = tree.push(
            Node::new(root_id, NodeContent::Workflow(Box::new(workflow)), 0),
            &model_id,
        )?;
        tree.build_steps(root, steps, ChildKind::Normal, 1, &model_id)?;
        // Built once, read by every process of the model: no spare room.
        tree.nodes.shrink_to_fit();
        tree.by_id.shrink_to_fit();
        Ok(tree)
    }

    /// The workflow's declarations (the root's content; its steps are the
    /// tree's step nodes, not kept here).
    pub fn workflow(&self) -> &Workflow {
        match self.nodes.first().map(|n| &*n.content) {
            Some(NodeContent::Workflow(w)) => w,
            // `build_owned` pushes the workflow as the first node.
            _ => unreachable!("a model tree's first node is its workflow"),
        }
    }

    fn push(&mut self, node: Node, model: &str) -> Result<NodeIx, ModelError> {
        if self.by_id.contains_key(&node.id) {
            return Err(ModelError::Invalid {
                model: model.to_owned(),
                node: Some(NodeRef {
                    kind: node.content.kind(),
                    id: node.id.clone(),
                }),
                location: None,
                message: format!("duplicate node id '{}'", node.id),
            });
        }
        let ix = NodeIx::Static(self.nodes.len() as u32);
        self.by_id.insert(node.id.clone(), ix);
        self.nodes.push(node);
        Ok(ix)
    }

    fn build_steps(
        &mut self,
        owner: NodeIx,
        steps: Vec<Step>,
        tag: ChildKind,
        level: u32,
        model: &str,
    ) -> Result<(), ModelError> {
        let mut prev: Option<NodeIx> = None;
        for mut step in steps {
            let branches = std::mem::take(&mut step.branches);
            let catches = std::mem::take(&mut step.catches);
            let timeouts = std::mem::take(&mut step.timeouts);
            let (id, next) = (step.id.clone(), step.next.clone());
            // Literal params move into the act the step runs (the step
            // node keeps `null`): the model holds them once.
            let uses_act = match step.uses.clone() {
                Some(uses) if !crate::model::has_expression(&step.params) => {
                    let params = std::mem::take(&mut step.params);
                    let act = super::node::step_act(&step, &uses, params);
                    Some(std::sync::Arc::new(NodeContent::Act(act)))
                }
                _ => None,
            };
            let mut node = Node::new(id.clone(), NodeContent::Step(step), level);
            node.parent = Some(owner);
            node.uses_act = uses_act;
            let ix = self.push(node, model)?;
            match prev {
                None => self.nodes[owner.index()].children.push((tag, ix)),
                Some(p) => {
                    self.nodes[ix.index()].prev = Some(p);
                    let pred = &mut self.nodes[p.index()];
                    pred.chain = Some(ix);
                    let explicit_next =
                        matches!(&*pred.content, NodeContent::Step(s) if s.next.is_some());
                    if !explicit_next {
                        pred.next = Some(ix);
                    }
                }
            }
            if let Some(target) = next {
                let Some(&t) = self.by_id.get(&target) else {
                    return Err(ModelError::Invalid {
                        model: model.to_owned(),
                        node: Some(NodeRef {
                            kind: NodeKind::Step,
                            id,
                        }),
                        location: None,
                        message: format!(
                            "`next: {target}` points nowhere: it must name this step or a step declared before it"
                        ),
                    });
                };
                self.nodes[ix.index()].next = Some(t);
            } else {
                for branch in branches {
                    self.build_branch(ix, branch, level + 1, model)?;
                }
            }
            self.build_steps(ix, catches, ChildKind::Catch, level + 1, model)?;
            self.build_steps(ix, timeouts, ChildKind::Timeout, level + 1, model)?;
            prev = Some(ix);
        }
        Ok(())
    }

    fn build_branch(
        &mut self,
        step: NodeIx,
        mut branch: Branch,
        level: u32,
        model: &str,
    ) -> Result<(), ModelError> {
        let steps = std::mem::take(&mut branch.steps);
        let mut node = Node::new(branch.id.clone(), NodeContent::Branch(branch), level);
        node.parent = Some(step);
        let ix = self.push(node, model)?;
        self.nodes[step.index()]
            .children
            .push((ChildKind::Normal, ix));
        self.build_steps(ix, steps, ChildKind::Normal, level + 1, model)
    }

    /// The root (workflow) node.
    pub fn root(&self) -> NodeIx {
        NodeIx::Static(0)
    }

    /// How many static nodes the tree has.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the tree is empty (never: it always has a root).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The node at `ix`, if it is a static node of this tree.
    pub fn get(&self, ix: NodeIx) -> Option<&Node> {
        match ix {
            NodeIx::Static(i) => self.nodes.get(i as usize),
            NodeIx::Dynamic(_) => None,
        }
    }

    /// The static node with id `id`.
    pub fn find(&self, id: &str) -> Option<NodeIx> {
        self.by_id.get(id).copied()
    }

    /// The act step `step` runs with its literal params (its
    /// [`Node::uses_act`]) as a dynamic node with id `id` would be stored:
    /// what a process's task of it implies without a stored row. `None`
    /// when the step has no such act.
    pub fn shared_act_data(&self, step: NodeIx, id: &str) -> Option<super::NodeData> {
        let node = self.get(step)?;
        let content = node.uses_act.as_deref()?;
        Some(super::NodeData {
            id: id.to_owned(),
            content: content.clone(),
            level: node.level + 1,
            parent_id: Some(node.id.clone()),
            is_child: false,
            prev_id: None,
            next_id: None,
        })
    }

    /// A text picture of the tree, one line per node (for debugging and
    /// tests): `<kind> id:<id> next=<id|nil>`, children indented.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_node(self.root(), 0, &mut out);
        out
    }

    fn render_node(&self, ix: NodeIx, depth: usize, out: &mut String) {
        let Some(node) = self.get(ix) else { return };
        let next = node
            .next
            .and_then(|n| self.get(n))
            .map_or("nil".to_owned(), |n| n.id.clone());
        out.push_str(&format!(
            "{}{} id:{} next={}\n",
            "  ".repeat(depth),
            node.content.kind(),
            node.id,
            next
        ));
        for &(tag, child) in &node.children {
            if tag != ChildKind::Normal {
                out.push_str(&format!("{}[{tag:?}]\n", "  ".repeat(depth + 1)));
            }
            // Render the whole chain that starts at this child.
            let mut cur = Some(child);
            while let Some(c) = cur {
                self.render_node(c, depth + 1, out);
                cur = self.get(c).and_then(|n| n.chain);
            }
        }
    }
}

/// Gives every step and branch without an id one derived from its place in
/// the model (recursively): the same model always gets the same ids, so a
/// stored process finds its nodes again after a restart. A top-level step
/// at index `i` is `_s{i}`; inside a node `X`, branch `j` is `X._b{j}`,
/// step `k` of a branch `X._s{k}`, catch `k` `X._c{k}` and timeout step
/// `k` `X._t{k}`. A derived id that a user id already takes gets `~n`
/// appended (the smallest free `n`).
fn assign_ids(steps: &mut [Step]) {
    let mut taken = std::collections::HashSet::new();
    for step in steps.iter() {
        collect_ids(step, &mut taken);
    }
    for (i, step) in steps.iter_mut().enumerate() {
        assign_step_id(step, "", &format!("_s{i}"), &mut taken);
    }
}

fn collect_ids(step: &Step, taken: &mut std::collections::HashSet<String>) {
    if !step.id.is_empty() {
        taken.insert(step.id.clone());
    }
    for branch in &step.branches {
        if !branch.id.is_empty() {
            taken.insert(branch.id.clone());
        }
        for s in &branch.steps {
            collect_ids(s, taken);
        }
    }
    for s in step.catches.iter().chain(step.timeouts.iter()) {
        collect_ids(s, taken);
    }
}

/// `prefix` + `local` unless a user id takes it, then with `~n`.
fn derived_id(prefix: &str, local: &str, taken: &mut std::collections::HashSet<String>) -> String {
    let base = if prefix.is_empty() {
        local.to_owned()
    } else {
        format!("{prefix}.{local}")
    };
    let mut id = base.clone();
    let mut n = 1;
    while taken.contains(&id) {
        id = format!("{base}~{n}");
        n += 1;
    }
    taken.insert(id.clone());
    id
}

fn assign_step_id(
    step: &mut Step,
    prefix: &str,
    local: &str,
    taken: &mut std::collections::HashSet<String>,
) {
    if step.id.is_empty() {
        step.id = derived_id(prefix, local, taken);
    }
    let me = step.id.clone();
    for (j, branch) in step.branches.iter_mut().enumerate() {
        if branch.id.is_empty() {
            branch.id = derived_id(&me, &format!("_b{j}"), taken);
        }
        let b = branch.id.clone();
        for (k, s) in branch.steps.iter_mut().enumerate() {
            assign_step_id(s, &b, &format!("_s{k}"), taken);
        }
    }
    for (k, s) in step.catches.iter_mut().enumerate() {
        assign_step_id(s, &me, &format!("_c{k}"), taken);
    }
    for (k, s) in step.timeouts.iter_mut().enumerate() {
        assign_step_id(s, &me, &format!("_t{k}"), taken);
    }
}
