//! JavaScript for workflows: `if`/`while`/`run` conditions, `${{ }}`
//! substitution and `acts.transform.code`, on QuickJS (`rquickjs`).
//!
//! - [`ScriptEngine`] evaluates with a pool of runtimes, each with a
//!   locked-down realm in which one evaluation can never see or change
//!   what another sees (statement lists get a fresh context), and time and
//!   memory limits ([`ScriptLimits`]).
//! - A script sees a [`ScriptScope`] (the task's data, ancestors, inputs,
//!   env) and its writes come back as [`ScriptEffect`]s, which the scheduler
//!   applies in the same transition. Helpers: `$get`, `$set`, `$inputs`,
//!   `$data`, `$ecode`, `$cost`, `$cost_in`, `$set_process_var`, `$env`,
//!   `console.*`, `os`, `Array.prototype.intersection/union/difference`,
//!   and a global for each step the script names ([`StepView`]).
//! - [`substitute`] implements the reference's `${{ }}` rules for vars and
//!   params.
//! - `outcome.rs` turns a run into its result (a promise settled first; a
//!   number that is not finite is an error, as in the reference) or a
//!   [`ScriptError`]; `crossing.rs` says how values cross exactly between
//!   the process's data and a script (integers beyond 2^53 as `BigInt`s,
//!   `undefined` keys kept as `null`).
//!
//! Not yet: the reference's user-var globals (`secrets`).
//!
//! May use: `model`.

mod crossing;
mod engine;
mod error;
mod helpers;
mod kind;
mod outcome;
mod realm;
mod scope;
pub mod substitute;

pub use engine::{ScriptEngine, ScriptLimits, ScriptOutput, ScriptStats};
pub use error::ScriptError;
pub use helpers::HELPER_NAMES;
pub use kind::ScriptKind;
pub use scope::{ScriptEffect, ScriptScope, StepView, is_private, named_ids};
