//! [`Node`]: one node of a tree, its content and its links.

use serde::{Deserialize, Serialize};

use crate::model::{Act, Branch, NodeKind, Step, Workflow};

/// Where a node lives: in the shared static tree of the model, or among the
/// dynamic nodes one process created at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeIx {
    /// The n-th node of the model's [`ModelTree`](super::ModelTree).
    Static(u32),
    /// The n-th dynamic node of a [`ProcessTree`](super::ProcessTree).
    Dynamic(u32),
}

impl NodeIx {
    pub(super) fn index(self) -> usize {
        match self {
            NodeIx::Static(i) | NodeIx::Dynamic(i) => i as usize,
        }
    }
}

/// How a child hangs under its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChildKind {
    /// A normal child (first step of a list, a branch, a dynamic act).
    Normal,
    /// The first catch step of a step.
    Catch,
    /// The first timeout step of a step.
    Timeout,
}

/// What a node is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum NodeContent {
    /// The root (boxed: one per model, and the largest kind — every other
    /// node's content would otherwise be as large).
    Workflow(Box<Workflow>),
    /// A branch of a step.
    Branch(Branch),
    /// A step.
    Step(Step),
    /// An act (always created at run time).
    Act(Act),
}

impl NodeContent {
    /// The kind of node.
    pub fn kind(&self) -> NodeKind {
        match self {
            NodeContent::Workflow(_) => NodeKind::Workflow,
            NodeContent::Branch(_) => NodeKind::Branch,
            NodeContent::Step(_) => NodeKind::Step,
            NodeContent::Act(_) => NodeKind::Act,
        }
    }

    /// The display name.
    pub fn name(&self) -> &str {
        match self {
            NodeContent::Workflow(w) => &w.name,
            NodeContent::Branch(b) => &b.name,
            NodeContent::Step(s) => &s.name,
            NodeContent::Act(a) => &a.name,
        }
    }
}

/// One node and its links.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Node id, unique in the tree.
    pub id: String,
    /// What the node is.
    pub content: std::sync::Arc<NodeContent>,
    /// Depth: workflow 0, its steps 1, ...
    pub level: u32,
    /// The owner: for a step in a list, the list's owner.
    pub parent: Option<NodeIx>,
    /// Children in order, each tagged.
    pub children: Vec<(ChildKind, NodeIx)>,
    /// The node this one follows in its list or act chain.
    pub prev: Option<NodeIx>,
    /// Where the flow goes after this node succeeds.
    pub next: Option<NodeIx>,
    /// The declaration-order successor (where a skipped step falls through).
    pub chain: Option<NodeIx>,
    /// For a step whose `uses` has literal params: the act it runs, built
    /// once with the tree and shared by every run of the step (see
    /// [`ProcessTree::dispatch_shared`](super::ProcessTree::dispatch_shared)).
    /// The params live there only: such a step's own content has `null`
    /// params.
    pub uses_act: Option<std::sync::Arc<NodeContent>>,
}

impl Node {
    pub(super) fn new(id: String, content: NodeContent, level: u32) -> Self {
        Self::shared(id, std::sync::Arc::new(content), level)
    }

    /// A node whose content other nodes may share.
    pub(super) fn shared(id: String, content: std::sync::Arc<NodeContent>, level: u32) -> Self {
        Self {
            id,
            content,
            level,
            parent: None,
            children: Vec::new(),
            prev: None,
            next: None,
            chain: None,
            uses_act: None,
        }
    }
}

/// The act a step with `uses` runs, given the params it runs with.
pub(crate) fn step_act(step: &crate::model::Step, uses: &str, params: serde_json::Value) -> Act {
    let mut act = Act::new(uses, params);
    act.name = step.name.clone();
    act.options = step.options.clone();
    act
}

/// The persisted form of a dynamic node: content and links by id, enough to
/// rebuild it (and its place in the tree) when a process is loaded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeData {
    /// Node id.
    pub id: String,
    /// The act.
    pub content: NodeContent,
    /// Depth.
    pub level: u32,
    /// Id of the parent node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// Whether the node is a child of its parent (acts built by block,
    /// parallel and sequence) or only dispatched by it (a step's act).
    #[serde(default)]
    pub is_child: bool,
    /// Id of the previous node in an act chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev_id: Option<String>,
    /// Id of the next node in an act chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_id: Option<String>,
}

const ALPHABET: [char; 62] = [
    '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i',
    'j', 'k', 'l', 'm', 'n', 'o', 'p', 'q', 'r', 's', 't', 'u', 'v', 'w', 'x', 'y', 'z', 'A', 'B',
    'C', 'D', 'E', 'F', 'G', 'H', 'I', 'J', 'K', 'L', 'M', 'N', 'O', 'P', 'Q', 'R', 'S', 'T', 'U',
    'V', 'W', 'X', 'Y', 'Z',
];

/// An 8-character random id from `[0-9a-zA-Z]` (node and task ids).
pub fn short_id() -> String {
    // The thread-local CSPRNG (seeded once per thread), not a syscall per id.
    nanoid::format(nanoid::rngs::thread_local, &ALPHABET, 8)
}

/// A 21-character random id from `[0-9a-zA-Z]` (process ids).
pub fn long_id() -> String {
    nanoid::format(nanoid::rngs::thread_local, &ALPHABET, 21)
}
