//! [`ModelError`]: what is wrong with a model, and where.

use std::fmt;

use super::source::Location;

/// The kind of node an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// The workflow itself.
    Workflow,
    /// A step (including catch and timeout steps).
    Step,
    /// A branch.
    Branch,
    /// An act.
    Act,
    /// A trigger (`on:` item).
    Trigger,
}

impl fmt::Display for NodeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NodeKind::Workflow => "workflow",
            NodeKind::Step => "step",
            NodeKind::Branch => "branch",
            NodeKind::Act => "act",
            NodeKind::Trigger => "trigger",
        })
    }
}

/// A node named in an error: its kind and id (or a description when it has
/// no id, e.g. "the 2nd step").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef {
    /// The kind of node.
    pub kind: NodeKind,
    /// Its id, or a position description when it has none.
    pub id: String,
}

impl fmt::Display for NodeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} '{}'", self.kind, self.id)
    }
}

fn at(location: &Option<Location>) -> String {
    location.map(|l| format!(" ({l})")).unwrap_or_default()
}

fn of_node(node: &Option<NodeRef>) -> String {
    node.as_ref().map(|n| format!(", {n}")).unwrap_or_default()
}

/// A model that cannot be loaded or deployed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The text is not valid YAML/JSON or does not have the model's shape.
    #[error("cannot parse the model{}: {message}", at(.location))]
    Parse {
        /// What the parser said.
        message: String,
        /// Where, when known.
        location: Option<Location>,
    },
    /// The model parses but breaks a rule of the model.
    #[error("model '{model}'{}{}: {message}", of_node(.node), at(.location))]
    Invalid {
        /// The model's id (empty when missing).
        model: String,
        /// The node at fault, when there is one.
        node: Option<NodeRef>,
        /// Where in the YAML source, when the model came from YAML.
        location: Option<Location>,
        /// What is wrong and, where possible, how to fix it.
        message: String,
    },
}

impl ModelError {
    /// The location in the source, when known.
    pub fn location(&self) -> Option<Location> {
        match self {
            ModelError::Parse { location, .. } | ModelError::Invalid { location, .. } => *location,
        }
    }
}
