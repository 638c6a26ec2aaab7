//! The actions on processes and their tasks: `act:*`, `proc:*`,
//! `task:*`.
//!
//! May use: the facade `acts`, the room's `call`, `shapes` and `listing`.

use std::collections::HashMap;

use acts::{Action, ProcessQuery, TaskQuery, TaskState, Workflow};
use serde_json::Value;

use super::call::{Answer, Call, Refusal};
use super::listing::{RefQuery, Window, walk};
use super::shapes;

/// `act:<action>` on the act `tid` of process `pid`; the rest of the
/// options are the action's (the vars of `complete`, `to` of `back`,
/// `ecode` and `message` of `error`, the act of `push`).
pub(crate) async fn act(name: &str, mut call: Call) -> Answer {
    let action = match name {
        "act:complete" => Action::Complete,
        "act:submit" => Action::Submit,
        "act:skip" => Action::Skip,
        "act:abort" => Action::Abort,
        "act:error" => Action::Error,
        "act:back" => Action::Back,
        "act:cancel" => Action::Cancel,
        "act:remove" => Action::Remove,
        "act:set_vars" => Action::SetProcessVars,
        "act:push" => {
            let (pid, tid) = (call.need("pid")?, call.need("tid")?);
            call.exec.act().push(&pid, &tid, call.options).await?;
            return Ok(Value::Null);
        }
        _ => return Err(Refusal::NotFound(name.to_owned())),
    };
    let (pid, tid) = (call.need("pid")?, call.need("tid")?);
    if action == Action::Back && !call.options.contains_key("to") {
        return Err(Refusal::Invalid("to is required".to_owned()));
    }
    call.exec
        .act()
        .apply(&pid, &tid, action, call.options)
        .await?;
    Ok(Value::Null)
}

/// `proc:*` and `task:*`.
pub(crate) async fn apply(name: &str, mut call: Call) -> Answer {
    match name {
        "proc:start" => {
            let id = call.need("id")?;
            let p = call.exec.proc().start(&id, call.options).await?;
            Ok(Value::String(p.pid))
        }
        "proc:start_from_model" => {
            let fmt = call.need("fmt")?;
            let text = call.need("model")?;
            let workflow = match fmt.as_str() {
                "yaml" | "yml" => Workflow::from_yaml(&text),
                "json" => Workflow::from_json(&text),
                other => {
                    return Err(Refusal::Invalid(format!(
                        "fmt '{other}' is invalid, it must be one of 'yaml' and 'json'"
                    )));
                }
            }
            .map_err(|e| Refusal::Invalid(e.to_string()))?;
            // acts starts only deployed versions: the model is deployed
            // (a new version only if its text changed), then started.
            let info = call.exec.model().deploy(&workflow).await?;
            let p = call.exec.proc().start(&info.id, call.options).await?;
            Ok(Value::String(p.pid))
        }
        "proc:get" => {
            let pid = call.need("pid")?;
            let p = call.exec.proc().get(&pid).await?;
            let mut tasks = call.exec.task().list(&pid).await?;
            tasks.sort_by_key(|t| t.start_time.unwrap_or(i64::MAX));
            // the model's name (a removed model: its id)
            let name = match call.exec.model().info(&p.model_id).await {
                Ok(m) => m.name,
                Err(_) => p.model_id.clone(),
            };
            let tasks = tasks.iter().map(shapes::task).collect();
            Ok(shapes::process(&p, &name, tasks))
        }
        "proc:ls" => list_processes(call).await,
        "task:get" => {
            let (pid, tid) = (call.need("pid")?, call.need("tid")?);
            Ok(shapes::task(&call.exec.task().get(&pid, &tid).await?))
        }
        "task:ls" => list_tasks(call).await,
        _ => Err(Refusal::NotFound(name.to_owned())),
    }
}

/// Model id → name, for the processes' `name`.
async fn model_names(call: &Call) -> Result<HashMap<String, String>, Refusal> {
    Ok(call
        .exec
        .model()
        .list()
        .await?
        .into_iter()
        .map(|m| (m.id, m.name))
        .collect())
}

fn state_of(w: &Window) -> Result<Option<TaskState>, Refusal> {
    w.eq("state")
        .map(|s| {
            s.parse::<TaskState>()
                .map_err(|_| Refusal::Invalid(format!("query filter: '{s}' is not a task state")))
        })
        .transpose()
}

async fn list_processes(call: Call) -> Answer {
    let w = RefQuery::of(&call.options)
        .and_then(|q| q.window(&["state", "mid", "model"]))
        .map_err(Refusal::Invalid)?;
    let mut q = ProcessQuery::new();
    if let Some(m) = w.eq("mid").or_else(|| w.eq("model")) {
        q = q.model(&m);
    }
    if let Some(s) = state_of(&w)? {
        q = q.state(s);
    }
    q.descending = w.descending;
    let rows = walk(&w, |cursor, n| {
        let mut q = q.clone().limit(n);
        q.cursor = cursor;
        let exec = call.exec.clone();
        async move { exec.proc().find(&q).await }
    })
    .await?;
    let count = call.exec.proc().count_matching(&q).await?;
    let names = model_names(&call).await?;
    let rows = rows
        .iter()
        .map(|p| {
            let name = names.get(&p.model_id).unwrap_or(&p.model_id);
            shapes::process(p, name, Vec::new())
        })
        .collect();
    Ok(shapes::page(rows, count, w.offset, w.limit))
}

async fn list_tasks(call: Call) -> Answer {
    let w = RefQuery::of(&call.options)
        .and_then(|q| q.window(&["pid", "state", "type", "nid", "uses", "key"]))
        .map_err(Refusal::Invalid)?;
    let state = state_of(&w)?;
    let kind = w
        .eq("type")
        .map(|k| {
            k.parse::<acts::MessageType>()
                .map_err(|_| Refusal::Invalid(format!("query filter: '{k}' is not a task type")))
        })
        .transpose()?;
    if let Some(pid) = w.eq("pid") {
        // One process's tasks: read them all and filter here.
        let mut tasks = call.exec.task().list(&pid).await?;
        tasks.retain(|t| {
            state.is_none_or(|s| t.state == s)
                && kind.is_none_or(|k| t.kind == k)
                && w.eq("nid").is_none_or(|n| t.nid == n)
                && w.eq("uses")
                    .is_none_or(|u| t.uses.as_deref() == Some(u.as_str()))
                && w.eq("key")
                    .is_none_or(|k| t.key.as_deref() == Some(k.as_str()))
        });
        tasks.sort_by_key(|t| t.start_time.unwrap_or(i64::MAX));
        if w.descending {
            tasks.reverse();
        }
        let count = tasks.len();
        let rows = w.slice(tasks).iter().map(shapes::task).collect();
        return Ok(shapes::page(rows, count, w.offset, w.limit));
    }
    let mut q = TaskQuery::new();
    q.state = state;
    q.kind = kind;
    q.node = w.eq("nid");
    q.uses = w.eq("uses");
    q.key = w.eq("key");
    q.process.descending = w.descending;
    let rows = walk(&w, |cursor, n| {
        let q = q.clone().limit(n).after(cursor);
        let exec = call.exec.clone();
        async move { exec.task().find(&q).await }
    })
    .await?;
    let count = call.exec.task().count(&q).await?;
    let rows = rows.iter().map(shapes::task).collect();
    Ok(shapes::page(rows, count, w.offset, w.limit))
}
