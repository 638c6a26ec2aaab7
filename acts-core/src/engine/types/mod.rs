//! The engine's vocabulary, shared by every room: the error
//! ([`EngineError`](error::EngineError)), the `Info` views the executor
//! returns, principals and roles (`access`), whole numbers (`numbers`), the interface of application
//! packages (`package`) and channel filters (`filter`).
//!
//! May use: nothing of the engine (it is the bottom room); the model, the
//! scheduler, the tree, packages and `durable`'s error types.

pub(crate) mod access;
pub(crate) mod bulk;
pub(crate) mod error;
pub(crate) mod filter;
pub(crate) mod info;
pub(crate) mod numbers;
pub(crate) mod package;
pub(crate) mod page;
