//! The acts 0.25 action table, transport-neutral: what each action of the
//! reference takes and answers, used alike by the gRPC protocol (`grpc`),
//! the REST routes (`routes`) and a cluster's front (through the crate's
//! exports). The table (`table.rs`; what an action takes in `call.rs`; the
//! actions by concern in `work.rs`, `catalog.rs`, `delivery.rs`; listings
//! in `listing.rs`; answers in the reference's shapes, `shapes.rs`),
//! subscription keys and ack ids (`keys.rs`), acks applied behind an
//! answer (`acks.rs`).
//!
//! May use: the facade `acts`, and of the server `error` and `telemetry`
//! (a caller's trace); never a transport (the gRPC or REST modules).

mod acks;
mod call;
mod catalog;
mod delivery;
mod keys;
mod listing;
mod shapes;
mod table;
mod work;

use acts::Engine;

pub(crate) use acks::Acks;
pub(crate) use call::{Call, Refusal};
pub(crate) use keys::{ack_id, ack_id_from, channel_key};
pub use keys::{ack_id_on, ack_partition};
pub(crate) use shapes::message as message_shape;
pub use shapes::page;
pub(crate) use table::apply as apply_call;
pub use table::{ACTIONS, EXTENSIONS, is_action_name};

/// Runs action `name` of the reference's table for `who` with `options`
/// (the REST routes of the reference's web plugin and `/api/v1/actions`
/// use it too), continuing `caller`'s trace in what it starts or
/// answers; a refusal as the HTTP API's error.
pub(crate) async fn apply(
    engine: &Engine,
    who: &acts::Principal,
    name: &str,
    mut options: acts::Vars,
    caller: Option<&crate::telemetry::CallerTrace>,
) -> Result<serde_json::Value, crate::error::ApiError> {
    carry_trace(name, caller, &mut options);
    let call = call::Call {
        exec: engine.executor().as_principal(who.clone()),
        engine: engine.clone(),
        who: who.clone(),
        options,
        acks: None,
    };
    table::apply(name, call)
        .await
        .map_err(call::Refusal::into_api)
}

/// Stores `caller`'s trace in the options of an action that starts or
/// answers (so the process's trace continues the caller's).
pub(crate) fn carry_trace(
    name: &str,
    caller: Option<&crate::telemetry::CallerTrace>,
    options: &mut acts::Vars,
) {
    if matches!(
        name,
        "proc:start" | "proc:start_from_model" | "act:complete" | "act:submit"
    ) {
        crate::telemetry::CallerTrace::carry(caller, options);
    }
}

/// The message shape of the reference's streams, with `id` as its id.
pub(crate) fn message_json(m: &acts::Message, id: &str) -> String {
    shapes::message(m, id).to_string()
}
