//! The actions on messages and sealed data: `msg:*` (the deliveries of
//! durable subscriptions: list, ack, redo, discard; subscribe and
//! unsubscribe) and `snap:*` (the reference's snapshots, acts' sealed
//! data).
//!
//! May use: the facade `acts`, the room's `call`, `keys`, `shapes` and
//! `listing`.

use acts::{DeliveryInfo, DeliveryQuery, DeliveryState};
use serde_json::{Value, json};

use super::call::{Answer, Call, Refusal};
use super::keys::{channel_key, split_ack_id};
use super::listing::{MAX_WINDOW, RefQuery, Window, walk};
use super::shapes;

pub(crate) async fn apply(name: &str, mut call: Call) -> Answer {
    match name {
        "msg:sub" => {
            let client = call.take("client_id")?.unwrap_or_default();
            Ok(Value::String(channel_key(&call.who.id, &client)))
        }
        "msg:unsub" => {
            let client = call.need("client_id")?;
            call.need_operator("a durable subscription")?;
            call.engine
                .channels()
                .remove(&channel_key(&call.who.id, &client))
                .await?;
            Ok(Value::Null)
        }
        "msg:ack" => {
            let id = call.need("id")?;
            // A live stream's message has nothing to acknowledge.
            let Some((channel, msg_id)) = split_ack_id(&id) else {
                return Ok(Value::Null);
            };
            if !owns(&call, channel) {
                call.need_operator("acknowledging another principal's message")?;
            }
            match &call.acks {
                Some(acks) => acks.ack(channel, msg_id).await,
                None => call.engine.channels().ack(channel, msg_id).await?,
            }
            Ok(Value::Null)
        }
        "msg:get" => {
            let id = call.need("id")?;
            let d = find(&call, &id).await?;
            Ok(shapes::delivery(&d))
        }
        "msg:ls" => list(call).await,
        "msg:redo" => match call.take("id")? {
            Some(id) => {
                let (channel, msg_id) = need_ack_id(&id)?;
                call.exec.msg().redeliver(channel, msg_id).await?;
                Ok(Value::Null)
            }
            None => {
                for d in failed(&call, None).await? {
                    call.exec.msg().redeliver(&d.channel, &d.msg_id).await?;
                }
                Ok(Value::Null)
            }
        },
        "msg:rm" => {
            let id = call.need("id")?;
            let (channel, msg_id) = need_ack_id(&id)?;
            call.exec.msg().discard(channel, msg_id).await?;
            Ok(Value::Bool(true))
        }
        "msg:clear" => {
            if let Some(id) = call.take("id")? {
                let (channel, msg_id) = need_ack_id(&id)?;
                call.exec.msg().discard(channel, msg_id).await?;
            } else {
                let pid = call.take("pid")?;
                for d in failed(&call, pid).await? {
                    call.exec.msg().discard(&d.channel, &d.msg_id).await?;
                }
            }
            Ok(Value::Null)
        }
        "snap:upsert" => {
            call.need_operator("writing sealed data")?;
            let target = call.need("name")?;
            let scope = call.take("scope")?.unwrap_or_default();
            let rev = call
                .options
                .get("rev")
                .and_then(Value::as_u64)
                .ok_or_else(|| Refusal::Invalid("rev is required".to_owned()))?;
            let Some(Value::Object(data)) = call.options.remove("data") else {
                return Err(Refusal::Invalid("data is required (an object)".to_owned()));
            };
            call.engine
                .runtime()
                .sealed_data()
                .upsert(&target, &scope, rev, data)?;
            Ok(Value::Bool(true))
        }
        "snap:remove" => {
            call.need_operator("removing sealed data")?;
            let target = call.need("name")?;
            let scope = call.take("scope")?.unwrap_or_default();
            call.engine
                .runtime()
                .sealed_data()
                .remove(&target, &scope)?;
            Ok(Value::Bool(true))
        }
        "snap:get" => {
            call.need_operator("reading sealed data")?;
            let target = call.need("name")?;
            let scope = call.take("scope")?.unwrap_or_default();
            Ok(
                match call.engine.runtime().sealed_data().read(&target, &scope) {
                    Some(e) => entry(&scope, e),
                    None => Value::Null,
                },
            )
        }
        "snap:ls" => {
            call.need_operator("reading sealed data")?;
            let target = call.need("name")?;
            let rows = call.engine.runtime().sealed_data().list(&target);
            Ok(Value::Array(
                rows.into_iter().map(|(s, e)| entry(&s, e)).collect(),
            ))
        }
        _ => Err(Refusal::NotFound(name.to_owned())),
    }
}

fn entry(scope: &str, e: acts::SealedEntry) -> Value {
    json!({"scope": scope, "rev": e.rev, "timestamp": e.timestamp, "data": e.data})
}

/// Whether durable channel `channel` is one of the caller's subscriptions.
fn owns(call: &Call, channel: &str) -> bool {
    channel.starts_with(&channel_key(&call.who.id, ""))
}

fn need_ack_id(id: &str) -> Result<(&str, &str), Refusal> {
    split_ack_id(id).ok_or_else(|| {
        Refusal::Invalid(format!(
            "id '{id}' is not a message id of a durable subscription"
        ))
    })
}

/// Delivery `id` (`<msg id>:<channel>`).
async fn find(call: &Call, id: &str) -> Result<DeliveryInfo, Refusal> {
    let (channel, msg_id) = need_ack_id(id)?;
    let mut q = DeliveryQuery::new().channel(channel).limit(acts::MAX_PAGE);
    q.messages = true;
    let mut seen = 0;
    loop {
        let page = call.exec.msg().find(&q).await?;
        seen += page.items.len();
        if let Some(d) = page.items.into_iter().find(|d| d.msg_id == msg_id) {
            return Ok(d);
        }
        match page.next {
            Some(next) if seen < MAX_WINDOW => q = q.after(Some(next)),
            _ => break,
        }
    }
    Err(crate::ApiError::not_found(format!("no message '{id}'")).into())
}

/// The dead letters (of process `pid`), at most [`MAX_WINDOW`].
async fn failed(call: &Call, pid: Option<String>) -> Result<Vec<DeliveryInfo>, Refusal> {
    let w = Window::first(MAX_WINDOW);
    let mut q = DeliveryQuery::new().state(DeliveryState::Failed);
    q.pid = pid;
    Ok(walk(&w, |cursor, n| {
        let q = q.clone().limit(n).after(cursor);
        let exec = call.exec.clone();
        async move { exec.msg().find(&q).await }
    })
    .await?)
}

async fn list(call: Call) -> Answer {
    let w = RefQuery::of(&call.options)
        .and_then(|q| q.window(&["pid", "status", "channel"]))
        .map_err(Refusal::Invalid)?;
    let mut q = DeliveryQuery::new();
    q.messages = true;
    q.pid = w.eq("pid");
    q.channel = w.eq("channel");
    q.descending = w.descending;
    if let Some(s) = w.eq("status") {
        q.state = Some(
            serde_json::from_value(Value::String(s.clone()))
                .map_err(|_| Refusal::Invalid(format!("query filter: '{s}' is not a status")))?,
        );
    }
    let rows = walk(&w, |cursor, n| {
        let q = q.clone().limit(n).after(cursor);
        let exec = call.exec.clone();
        async move { exec.msg().find(&q).await }
    })
    .await?;
    let count = call.exec.msg().count_matching(&q).await?;
    let rows = rows.iter().map(shapes::delivery).collect();
    Ok(shapes::page(rows, count, w.offset, w.limit))
}
