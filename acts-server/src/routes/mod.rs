//! The API's routes, one router per resource (each file's `router()`),
//! merged by [`crate::router`]: the service itself (health, readiness,
//! metrics, who am I), models, processes, tasks, the live message stream,
//! durable channels, deliveries, triggers and hooks.
//!
//! Handlers are thin: they take the [`crate::extract`] extractors and call
//! the executor; nothing here parses a body or keeps state.
//!
//! May use: the state, the extractors, the error type, the stream budget
//! and the facade `acts`; no route file uses another.

pub(crate) mod channels;
pub(crate) mod compat;
pub(crate) mod deliveries;
pub(crate) mod messages;
pub(crate) mod models;
pub(crate) mod processes;
pub(crate) mod service;
pub(crate) mod tasks;
pub(crate) mod triggers;
