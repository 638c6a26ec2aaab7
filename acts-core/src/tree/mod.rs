//! The node tree: the static structure of a model and the acts a process
//! adds to it at run time.
//!
//! - [`ModelTree`] is built once per deployed model and shared by every
//!   process of that model (so a process costs no tree memory of its own
//!   until it creates dynamic acts).
//! - [`ProcessTree`] is one process's view: the shared tree plus its dynamic
//!   acts, with links that survive a store round-trip ([`NodeData`]).
//!
//! May use: `model`.

pub(crate) mod chunked;
mod model_tree;
mod node;
mod process_tree;

pub use model_tree::ModelTree;
pub(crate) use node::step_act;
pub use node::{ChildKind, Node, NodeContent, NodeData, NodeIx, long_id, short_id};
pub use process_tree::ProcessTree;
