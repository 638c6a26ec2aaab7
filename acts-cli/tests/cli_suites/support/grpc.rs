//! What the tests of the acts 0.25 gRPC protocol share: the reference's
//! action table and the walk over it, a serve config with one admin
//! token, one action's data, and a subscription's messages.

use acts_channel::model::Message;
use acts_channel::{ActsChannel, ActsOptions, Vars};
use serde_json::Value;
use tokio::sync::mpsc;

/// A serve config in `dir` with one admin token (principal `app`):
/// its path.
pub fn token_config(dir: &std::path::Path, token: &str) -> String {
    let path = dir.join("serve.yaml");
    let hash = acts_server::hash_token(token);
    std::fs::write(
        &path,
        format!("tokens:\n  - principal: app\n    roles: [admin]\n    sha256: {hash}\n"),
    )
    .expect("the config is written");
    path.display().to_string()
}

/// Sends action `name` with `options`; its data (panics naming the action
/// on a refusal or no data).
pub async fn send<T: serde::de::DeserializeOwned + serde::Serialize>(
    chan: &mut ActsChannel,
    name: &str,
    options: Value,
) -> T {
    chan.send::<T>(name, Vars::from(options))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .data
        .unwrap_or_else(|| panic!("{name} answered no data"))
}

/// Subscribes as `client_id` (acking each message itself when `ack`):
/// the messages, in order (panics when the subscription fails).
pub async fn subscribe(
    chan: &mut ActsChannel,
    client_id: &str,
    ack: bool,
) -> mpsc::UnboundedReceiver<Message> {
    let (tx, rx) = mpsc::unbounded_channel();
    let options = ActsOptions {
        ack: Some(ack),
        ..Default::default()
    };
    chan.subscribe(
        client_id,
        move |m: &Message| {
            let _ = tx.send(m.clone());
        },
        |e| panic!("the subscription failed: {e:?}"),
        &options,
    )
    .await
    .expect("the subscription opens");
    rx
}

/// Every name of the reference's action table (acts 0.25, `actions.rs`),
/// written out here rather than taken from ours, so a name we drop fails.
pub const REFERENCE_ACTIONS: [&str; 39] = [
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

/// The name of a status's code (the client's tonic is not ours).
pub fn code(status: &impl std::fmt::Debug) -> String {
    let shown = format!("{status:?}");
    shown
        .split("code: ")
        .nth(1)
        .and_then(|rest| rest.split([',', ' ']).next())
        .unwrap_or_default()
        .to_owned()
}

/// Sends every name of the reference's table with no options: each is
/// answered, or refused naming what is missing, or (not supported) naming
/// the action — never an unknown name.
pub async fn walk_the_table(chan: &mut ActsChannel) {
    for name in REFERENCE_ACTIONS {
        match chan.send::<Value>(name, Vars::new()).await {
            Ok(_) => {}
            Err(e) => {
                let (code, message) = (code(&e), e.message().to_owned());
                let named = match code.as_str() {
                    "InvalidArgument" => message.contains("is required"),
                    "Unimplemented" => message.contains(name) && message.contains("not supported"),
                    _ => false,
                };
                assert!(named, "{name}: {code}: {message}");
            }
        }
    }
}
