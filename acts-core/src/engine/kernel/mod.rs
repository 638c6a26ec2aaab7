//! The runtime core: the engine's shared state ([`Kernel`]), one
//! transition and its one batch, the resident cache, loading and
//! recovery, the model catalog, starting, and what a committed transition sets
//! off (continuations, subflow children, timers, packages, refill).
//!
//! May use: `types` and `persist`; the services only through the
//! [`ServiceHooks`](hooks::ServiceHooks) the builder passes in (never the
//! services' code or the api's).

pub(crate) mod actions;
pub(crate) mod cache;
pub(crate) mod catalog;
pub(crate) mod config;
pub(crate) mod emitter;
pub(crate) mod fair_queue;
pub(crate) mod follow_up;
pub(crate) mod gates;
pub(crate) mod handle;
pub(crate) mod hooks;
pub(crate) mod hosts;
pub(crate) mod instances;
pub(crate) mod key_slots;
pub(crate) mod loading;
pub(crate) mod migrate;
pub(crate) mod package_runs;
pub(crate) mod parts;
pub(crate) mod placement;
pub(crate) mod recovery;
pub(crate) mod refill;
pub(crate) mod remove;
pub(crate) mod reopen;
pub(crate) mod shared;
pub(crate) mod stalled;
pub(crate) mod start;
pub(crate) mod timers;
pub(crate) mod transition;
pub(crate) mod work;

pub use config::{EngineConfig, PidFilter, SpanExport};
pub use gates::courier::{GateCourier, GateReply, GateRoute};
