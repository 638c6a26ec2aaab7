//! The built-in packages' definitions, with the reference engine's params.

use serde_json::json;

use super::definition::{Catalog, PackageDefinition, RunAs};

/// The names `acts.core.action` accepts: every name of
/// [`Action`](crate::model::Action) with its aliases (`complete` for
/// `next`, `set_vars` for `set_process_vars`) — the same vocabulary as the
/// executor's actions and the CLI's answers.
pub use crate::model::ACTION_NAMES;

fn core(
    id: &str,
    name: &str,
    desc: &str,
    run_as: RunAs,
    schema: serde_json::Value,
) -> PackageDefinition {
    PackageDefinition {
        id: id.into(),
        name: name.into(),
        desc: desc.into(),
        version: "0.1.0".into(),
        schema,
        run_as,
        catalog: Catalog::Core,
    }
}

/// Every built-in package.
pub fn builtin_packages() -> Vec<PackageDefinition> {
    let acts_list = json!({"type": "array", "items": {"type": "object"}});
    let fan_out = json!({
        "type": "object",
        "properties": { "in": {"type": "array", "items": {"type": "string"}}, "acts": acts_list },
        "required": ["in", "acts"]
    });
    let mut set = core(
        "acts.transform.set",
        "Set",
        "Writes its params into the act's data.",
        RunAs::Func,
        json!({"type": "object"}),
    );
    set.catalog = Catalog::Transform;
    let mut code = core(
        "acts.transform.code",
        "Code",
        "Runs JavaScript; an object it returns is written into the act's data.",
        RunAs::Func,
        json!({"type": "string"}),
    );
    code.catalog = Catalog::Transform;
    vec![
        core(
            "acts.core.irq",
            "Request",
            "Interrupts the flow until a client acts on it.",
            RunAs::Irq,
            json!({"type": ["object", "null"]}),
        ),
        core(
            "acts.core.msg",
            "Message",
            "Sends a message to clients; never waits.",
            RunAs::Msg,
            json!({}),
        ),
        core(
            "acts.core.block",
            "Block",
            "Runs a list of acts in sequence or in parallel.",
            RunAs::Func,
            json!({
                "type": "object",
                "properties": { "mode": {"enum": ["sequence", "parallel"]}, "acts": acts_list },
                "required": ["acts"]
            }),
        ),
        core(
            "acts.core.parallel",
            "Parallel",
            "Runs its acts once per element of `in`, all at once.",
            RunAs::Func,
            fan_out.clone(),
        ),
        core(
            "acts.core.sequence",
            "Sequence",
            "Runs its acts once per element of `in`, one after another.",
            RunAs::Func,
            fan_out,
        ),
        core(
            "acts.core.action",
            "Action",
            "Applies a client action to its own act.",
            RunAs::Func,
            json!({
                "type": "object",
                "properties": { "action": {"enum": ACTION_NAMES}, "options": {"type": ["object", "null"]} },
                "required": ["action"]
            }),
        ),
        core(
            "acts.core.subflow",
            "Subflow",
            "Starts another model and waits for it.",
            RunAs::Func,
            json!({
                "type": "object",
                "properties": {
                    "to": {"type": "string"},
                    "options": {"type": "object", "additionalProperties": {"type": ["string", "number", "array", "boolean", "null"]}}
                },
                "required": ["to"]
            }),
        ),
        set,
        code,
    ]
}
