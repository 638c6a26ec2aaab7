//! The reference's action table: every name `Send` answers, what each
//! takes, and the one dispatch from a name to acts' executor (in
//! `work.rs`, `catalog.rs`, `delivery.rs`). A name acts does not support
//! is refused by name with the reason; a name the reference does not
//! know is `NotFound`, as there.
//!
//! May use: the room's `call` and the files of the actions (`work`,
//! `catalog`, `delivery`).

use super::call::{Answer, Call, Refusal};

/// Whether `name` has the shape of an action name: `KIND:VERB` of
/// lowercase letters and `_`, at most 64 bytes. Anything else is no
/// action — checked before a name is put in a path, so an escaped name
/// is never routed as one thing and run as another.
pub fn is_action_name(name: &str) -> bool {
    name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b == b'_' || b == b':')
}

/// Every action name of the acts 0.25 table (39), in its order.
pub const ACTIONS: [&str; 39] = [
    "act:abort",
    "act:back",
    "act:cancel",
    "act:complete",
    "act:error",
    "act:push",
    "act:remove",
    "act:skip",
    "act:submit",
    "evt:get",
    "evt:ls",
    "evt:start",
    "model:deploy",
    "model:get",
    "model:ls",
    "model:rm",
    "msg:ack",
    "msg:clear",
    "msg:get",
    "msg:ls",
    "msg:redo",
    "msg:rm",
    "msg:sub",
    "msg:unsub",
    "pack:get",
    "pack:ls",
    "pack:publish",
    "pack:rm",
    "proc:get",
    "proc:ls",
    "proc:start",
    "proc:start_from_model",
    "snap:get",
    "snap:ls",
    "snap:remove",
    "snap:upsert",
    "task:get",
    "task:ls",
    "acl:whoami",
];

/// Our extensions beside the reference's names (documented in
/// `docs/COMPATIBILITY.md`).
pub const EXTENSIONS: [&str; 1] = ["act:set_vars"];

/// Applies action `name` for `call.who`.
pub(crate) async fn apply(name: &str, call: Call) -> Answer {
    match name.split_once(':') {
        Some(("act", _)) => super::work::act(name, call).await,
        Some(("proc" | "task", _)) => super::work::apply(name, call).await,
        Some(("model" | "pack" | "evt", _)) => super::catalog::apply(name, call).await,
        Some(("msg" | "snap", _)) => super::delivery::apply(name, call).await,
        _ if name == "acl:whoami" => Ok(serde_json::json!({
            "subject": call.who.id,
            "roles": call.who.roles,
            "unrestricted": call.who.is_admin(),
        })),
        _ => Err(Refusal::NotFound(name.to_owned())),
    }
}
