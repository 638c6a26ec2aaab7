//! The answers of the acts 0.25 protocol, in the reference's shapes
//! (`acts-channel`'s `ProcInfo`, `TaskInfo`, `ModelInfo`, `EventInfo`,
//! `PackageInfo`, `MessageInfo`, `PageData` and the streamed `Message`):
//! a client written for acts-server 0.25 decodes them into its own types,
//! so every field it requires is present, with the reference's name and
//! kind (its `data`, `inputs`, `params` and `schema` are JSON *text*).
//!
//! May use: the facade `acts` and serde_json.

use serde_json::{Value, json};

/// The reference's `PageData`: one page of a listing, with the count of
/// every match and the page's place among them.
pub fn page(rows: Vec<Value>, count: usize, offset: usize, limit: usize) -> Value {
    let limit = limit.max(1);
    json!({
        "count": count,
        "page_size": limit,
        "page_num": offset / limit + 1,
        "page_count": count.div_ceil(limit),
        "rows": rows,
    })
}

fn text(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_owned())
}

/// A process (`proc:ls`, `proc:get`); `name` is its model's name, `tasks`
/// its tasks (empty in listings, as the reference's).
pub(crate) fn process(p: &acts::ProcInfo, name: &str, tasks: Vec<Value>) -> Value {
    json!({
        "id": p.pid,
        "name": name,
        "mid": p.model_id,
        "state": p.state.as_str(),
        "start_time": p.start_time.unwrap_or(0),
        "end_time": p.end_time.unwrap_or(0),
        "timestamp": p.start_time.unwrap_or(0),
        "tasks": tasks,
        // ours, beside the reference's
        "model_rev": p.model_rev,
        "outputs": p.outputs,
        "err": p.err,
    })
}

/// A task (`task:ls`, `task:get`, a process's `tasks`).
pub(crate) fn task(t: &acts::TaskInfo) -> Value {
    json!({
        "id": t.tid,
        "prev": t.prev,
        "name": t.name,
        "pid": t.pid,
        "nid": t.nid,
        "type": t.kind.as_str(),
        "state": t.state.as_str(),
        "data": text(&t.data),
        "start_time": t.start_time.unwrap_or(0),
        "end_time": t.end_time.unwrap_or(0),
        "timestamp": t.start_time.unwrap_or(0),
        // ours, beside the reference's
        "uses": t.uses,
        "key": t.key,
        "err": t.err,
    })
}

/// A model (`model:ls`, `model:get`); `data` is its text in `fmt`
/// (`yml`/`text`: YAML, `json`: JSON), empty in listings.
pub(crate) fn model(m: &acts::ModelInfo, data: String) -> Value {
    json!({
        "id": m.id,
        "name": m.name,
        "desc": "",
        "ver": m.ver,
        "size": data.len(),
        "create_time": m.deployed_at,
        "update_time": m.deployed_at,
        "data": data,
        // ours, beside the reference's
        "revision": m.revision,
    })
}

/// A trigger (`evt:ls`, `evt:get`): the reference's events.
pub(crate) fn event(t: &acts::TriggerInfo) -> Value {
    json!({
        "id": t.id,
        "name": t.trigger,
        "mid": t.model_id,
        "ver": 0,
        "uses": t.kind,
        "params": text(&t.params),
        "create_time": 0,
        "timestamp": t.last_run.unwrap_or(0),
        // ours, beside the reference's
        "schedule": t.schedule,
        "next_run": t.next_run,
    })
}

/// A package (`pack:ls`, `pack:get`).
pub(crate) fn package(p: &acts::PackageInfo) -> Value {
    let d = &p.definition;
    json!({
        "id": d.id,
        "name": d.name,
        "desc": d.desc,
        "icon": "",
        "doc": "",
        "version": d.version,
        "schema": text(&d.schema),
        "options": Value::Null,
        "run_as": serde_json::to_value(d.run_as).unwrap_or(Value::Null),
        "resources": "[]",
        "catalog": serde_json::to_value(d.catalog).unwrap_or(Value::Null),
        "create_time": 0,
        "update_time": 0,
        "timestamp": 0,
        // ours, beside the reference's
        "builtin": p.builtin,
    })
}

/// A delivery of a durable channel (`msg:ls`, `msg:get`): the reference's
/// stored messages. Its `id` is the one `msg:ack`, `msg:redo` and
/// `msg:rm` take.
pub(crate) fn delivery(d: &acts::DeliveryInfo) -> Value {
    let m = d.message.as_ref();
    json!({
        "id": super::keys::ack_id(&d.channel, &d.msg_id),
        "tid": d.tid,
        "name": m.map(|m| m.name.as_str()).unwrap_or_default(),
        "state": m.map(|m| m.state.as_str()).unwrap_or_default(),
        "type": m.map(|m| m.r#type.as_str()).unwrap_or_default(),
        "pid": d.pid,
        "nid": m.map(|m| m.nid.as_str()).unwrap_or_default(),
        "inputs": m.map(|m| text(&m.inputs)).unwrap_or_else(|| "{}".to_owned()),
        "outputs": m.map(|m| text(&m.outputs)).unwrap_or_else(|| "{}".to_owned()),
        "create_time": d.created_at,
        "update_time": d.next_at.unwrap_or(d.created_at),
        "retry_times": d.tries,
        "status": serde_json::to_value(d.state).unwrap_or(Value::Null),
        "timestamp": d.created_at,
        "uses": m.and_then(|m| m.uses.clone()),
        // ours, beside the reference's
        "channel": d.channel,
    })
}

/// A streamed message (`OnMessage`) whose id is `id`: the reference's
/// `Message`, with `mid`, `tag` and `retry_times`, beside our `uses`,
/// `key` and `params`.
pub(crate) fn message(m: &acts::Message, id: &str) -> Value {
    json!({
        "id": id,
        "tid": m.tid,
        "nid": m.nid,
        "mid": m.model_id,
        "name": m.name,
        "state": m.state.as_str(),
        "type": m.r#type.as_str(),
        "pid": m.pid,
        "inputs": m.inputs,
        "outputs": m.outputs,
        "tag": m.key.clone().unwrap_or_default(),
        "start_time": m.start_time.unwrap_or(m.time),
        "end_time": m.end_time.unwrap_or(0),
        "retry_times": 0,
        // ours, beside the reference's
        "uses": m.uses,
        "key": m.key,
        "params": m.params,
        "err": m.err,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_counts_its_place_as_the_reference_does() {
        let p = page(vec![json!(1), json!(2)], 5, 2, 2);
        assert_eq!(p["count"], 5);
        assert_eq!(p["page_size"], 2);
        assert_eq!(p["page_num"], 2);
        assert_eq!(p["page_count"], 3);
        assert_eq!(p["rows"].as_array().map(Vec::len), Some(2));
        // a zero limit is a page of one, never a division by zero
        assert_eq!(page(vec![], 0, 0, 0)["page_num"], 1);
    }
}
