//! [`ProcessTree`]: one process's view of its model's tree: the shared
//! static [`ModelTree`] plus the acts this process created at run time.

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::Act;

use super::chunked::Chunked;
use super::model_tree::ModelTree;
use super::node::{ChildKind, Node, NodeData, NodeIx, short_id};

/// The static tree of the model (shared) plus this process's dynamic acts.
///
/// Dynamic acts come from a step's `uses` and the `push` action
/// ([`dispatch_act`](Self::dispatch_act): registered under the owner but not
/// a child of it) and from block/parallel/sequence packages
/// ([`build_acts`](Self::build_acts): children of the owner, in parallel or
/// chained). Their links are kept by id in [`NodeData`] so a process loaded
/// from the store rebuilds exactly the same tree ([`restore`](Self::restore)).
#[derive(Debug, Clone)]
pub struct ProcessTree {
    model: Arc<ModelTree>,
    dynamic: Chunked<Node>,
    /// Whether each dynamic node is a child of its parent.
    is_child: Chunked<bool>,
    /// Whether each dynamic node runs the act of its step's literal `uses`
    /// (the model's [`Node::uses_act`]): such a node is implied by its
    /// task and its step, so it has no stored row (see
    /// [`restore_shared`](Self::restore_shared)).
    shared: Chunked<bool>,
    by_id: HashMap<String, NodeIx>,
    /// Children added under static nodes.
    extra_children: HashMap<NodeIx, Vec<(ChildKind, NodeIx)>>,
}

impl ProcessTree {
    /// A process tree with no dynamic nodes yet.
    pub fn new(model: Arc<ModelTree>) -> Self {
        Self {
            model,
            dynamic: Chunked::new(),
            is_child: Chunked::new(),
            shared: Chunked::new(),
            by_id: HashMap::new(),
            extra_children: HashMap::new(),
        }
    }

    /// The shared static tree.
    pub fn model(&self) -> &Arc<ModelTree> {
        &self.model
    }

    /// The root (workflow) node.
    pub fn root(&self) -> NodeIx {
        self.model.root()
    }

    /// The node at `ix`.
    pub fn node(&self, ix: NodeIx) -> Option<&Node> {
        match ix {
            NodeIx::Static(_) => self.model.get(ix),
            NodeIx::Dynamic(i) => self.dynamic.get(i as usize),
        }
    }

    /// The node with id `id`, static or dynamic.
    pub fn find(&self, id: &str) -> Option<NodeIx> {
        self.model.find(id).or_else(|| self.by_id.get(id).copied())
    }

    /// The node's children: its own, then those added at run time.
    pub fn children(&self, ix: NodeIx) -> Vec<(ChildKind, NodeIx)> {
        let mut all = self
            .node(ix)
            .map(|n| n.children.clone())
            .unwrap_or_default();
        if let Some(extra) = self.extra_children.get(&ix) {
            all.extend_from_slice(extra);
        }
        all
    }

    /// How many dynamic nodes this process created.
    pub fn dynamic_len(&self) -> usize {
        self.dynamic.len()
    }

    fn unique_id(&self, wanted: &str) -> String {
        if wanted.is_empty() {
            loop {
                let id = short_id();
                if self.find(&id).is_none() {
                    return id;
                }
            }
        }
        if self.find(wanted).is_none() {
            return wanted.to_owned();
        }
        loop {
            let id = format!("{wanted}-{}", short_id());
            if self.find(&id).is_none() {
                return id;
            }
        }
    }

    fn register(&mut self, owner: NodeIx, mut act: Act, is_child: bool) -> NodeIx {
        let id = self.unique_id(&act.id);
        act.id = id.clone();
        let level = self.node(owner).map_or(0, |o| o.level + 1);
        let mut node = Node::new(id, crate::tree::NodeContent::Act(act), level);
        node.parent = Some(owner);
        self.push_dynamic(node, is_child, false)
    }

    fn push_dynamic(&mut self, node: Node, is_child: bool, shared: bool) -> NodeIx {
        let id = node.id.clone();
        let ix = NodeIx::Dynamic(self.dynamic.len() as u32);
        self.dynamic.push(node);
        self.is_child.push(is_child);
        self.shared.push(shared);
        self.by_id.insert(id, ix);
        ix
    }

    fn add_child(&mut self, owner: NodeIx, child: NodeIx) {
        match owner {
            NodeIx::Dynamic(i) => self.dynamic[i as usize]
                .children
                .push((ChildKind::Normal, child)),
            NodeIx::Static(_) => self
                .extra_children
                .entry(owner)
                .or_default()
                .push((ChildKind::Normal, child)),
        }
    }

    /// Registers `act` under `owner` without making it a child (a step's
    /// `uses`, a pushed act). An empty id gets a short id; an id already in
    /// the tree gets a `-<short id>` suffix.
    pub fn dispatch_act(&mut self, owner: NodeIx, act: Act) -> NodeIx {
        self.register(owner, act, false)
    }

    /// Registers the act step `owner` runs with its literal params (the
    /// model tree's [`Node::uses_act`]) under a fresh short id, sharing
    /// its content with every other run of the step; `None` when the node
    /// has no such act (its params have expressions: use
    /// [`dispatch_act`](Self::dispatch_act) with them evaluated).
    ///
    /// Such a node is not in [`dynamic_data`](Self::dynamic_data): its
    /// task and its step imply it, and
    /// [`restore_shared`](Self::restore_shared) rebuilds it.
    pub fn dispatch_shared(&mut self, owner: NodeIx) -> Option<NodeIx> {
        let id = self.unique_id("");
        self.restore_shared(owner, id)
    }

    /// Registers the shared act of step `owner` (as
    /// [`dispatch_shared`](Self::dispatch_shared) did) under the id `id` it
    /// had: how a loaded process gets back the node of a task whose node
    /// is not stored. `None` when `owner` has no literal `uses` act or `id`
    /// is taken.
    pub fn restore_shared(&mut self, owner: NodeIx, id: String) -> Option<NodeIx> {
        if self.find(&id).is_some() {
            return None;
        }
        let owner_node = self.node(owner)?;
        let content = owner_node.uses_act.clone()?;
        let level = owner_node.level + 1;
        let mut node = Node::shared(id, content, level);
        node.parent = Some(owner);
        Some(self.push_dynamic(node, false, true))
    }

    /// Adds `acts` as children of `owner`: all at once, or (`sequence`) the
    /// first as a child and each later one chained after the previous.
    pub fn build_acts(&mut self, owner: NodeIx, acts: Vec<Act>, sequence: bool) -> Vec<NodeIx> {
        let mut out = Vec::with_capacity(acts.len());
        for act in acts {
            let prev = out.last().copied();
            let chained = sequence && prev.is_some();
            let ix = self.register(owner, act, !chained);
            match prev {
                Some(p) if sequence => {
                    self.dynamic[ix.index()].prev = Some(p);
                    self.dynamic[p.index()].next = Some(ix);
                    self.dynamic[p.index()].chain = Some(ix);
                }
                _ => self.add_child(owner, ix),
            }
            out.push(ix);
        }
        out
    }

    fn id_of(&self, ix: Option<NodeIx>) -> Option<String> {
        ix.and_then(|i| self.node(i)).map(|n| n.id.clone())
    }

    /// The persisted form of every dynamic node that is stored, in
    /// creation order (not the shared acts of literal `uses`: see
    /// [`dispatch_shared`](Self::dispatch_shared)).
    pub fn dynamic_data(&self) -> Vec<NodeData> {
        self.dynamic_data_from(0)
    }

    /// The stored form of the dynamic nodes from the `start`-th on (shared
    /// acts left out).
    pub fn dynamic_data_from(&self, start: usize) -> Vec<NodeData> {
        self.dynamic
            .iter()
            .zip(&self.is_child)
            .zip(&self.shared)
            .skip(start)
            .filter(|(_, shared)| !**shared)
            .map(|((n, &is_child), _)| NodeData {
                id: n.id.clone(),
                content: (*n.content).clone(),
                level: n.level,
                parent_id: self.id_of(n.parent),
                is_child,
                prev_id: self.id_of(n.prev),
                next_id: self.id_of(n.next),
            })
            .collect()
    }

    /// Rebuilds a process tree from its model and the dynamic nodes it had
    /// (from [`dynamic_data`](Self::dynamic_data)); fails if the data names a
    /// node that does not exist.
    pub fn restore(model: Arc<ModelTree>, data: &[NodeData]) -> Result<Self, String> {
        Self::restore_with(model, &[], data)
    }

    /// [`restore`](Self::restore), with the shared acts of literal `uses`
    /// the process's tasks imply (`implied`: no stored row, each under its
    /// step, registered first since stored nodes may hang under them).
    pub fn restore_with(
        model: Arc<ModelTree>,
        implied: &[NodeData],
        data: &[NodeData],
    ) -> Result<Self, String> {
        let mut tree = Self::new(model);
        for d in implied {
            let step = d.parent_id.as_deref().and_then(|p| tree.find(p));
            if step
                .and_then(|s| tree.restore_shared(s, d.id.clone()))
                .is_none()
            {
                return Err(format!(
                    "dynamic node '{}' is not the act of a step's `uses`",
                    d.id
                ));
            }
        }
        let first_stored = tree.dynamic.len();
        for d in data {
            if tree.find(&d.id).is_some() {
                return Err(format!("dynamic node '{}' is stored twice", d.id));
            }
            let parent = match &d.parent_id {
                Some(p) => Some(tree.find(p).ok_or_else(|| {
                    format!("dynamic node '{}' names a missing parent '{p}'", d.id)
                })?),
                None => None,
            };
            // The act of a step's literal `uses` shares the model's copy.
            let shared = parent
                .and_then(|p| tree.node(p))
                .and_then(|p| p.uses_act.clone())
                .filter(|act| **act == d.content);
            let mut node = match shared {
                Some(content) => Node::shared(d.id.clone(), content, d.level),
                None => Node::new(d.id.clone(), d.content.clone(), d.level),
            };
            node.parent = parent;
            let ix = NodeIx::Dynamic(tree.dynamic.len() as u32);
            tree.dynamic.push(node);
            tree.is_child.push(d.is_child);
            // Stored, so not implied: a later transition need not write it.
            tree.shared.push(false);
            tree.by_id.insert(d.id.clone(), ix);
            if d.is_child
                && let Some(p) = parent
            {
                tree.add_child(p, ix);
            }
        }
        // Chain links may point forward, so they are set once every node exists.
        for (i, d) in data.iter().enumerate() {
            let link = |id: &Option<String>| -> Result<Option<NodeIx>, String> {
                id.as_ref()
                    .map(|id| {
                        tree.find(id).ok_or_else(|| {
                            format!("dynamic node '{}' links to a missing node '{id}'", d.id)
                        })
                    })
                    .transpose()
            };
            let (prev, next) = (link(&d.prev_id)?, link(&d.next_id)?);
            let node = &mut tree.dynamic[first_stored + i];
            node.prev = prev;
            node.next = next;
            node.chain = next;
        }
        Ok(tree)
    }
}
