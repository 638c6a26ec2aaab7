//! The queries of the listings, built from their flags the same way for
//! the local engine and a server: `acts ps --where VAR=VALUE` (a
//! `ProcessQuery`), `acts tasks` (a `TaskQuery`), `acts deliveries` (a
//! `DeliveryQuery`); and reading every page of one.

use std::future::Future;

use acts::{
    DeliveryQuery, DeliveryState, MessageType, ProcessQuery, TaskQuery, TaskState, VarFilter,
};

use crate::cli::{DeliveryFilter, TaskFilter};
use serde_json::Value;

use crate::failure::Failure;

/// A state name as `acts ps --state` takes it.
pub(crate) fn parse_state(s: &str) -> Result<TaskState, Failure> {
    TaskState::ALL
        .into_iter()
        .find(|x| x.as_str() == s)
        .ok_or_else(|| {
            let all: Vec<&str> = TaskState::ALL.iter().map(|s| s.as_str()).collect();
            Failure::input(format!("unknown state '{s}' (one of: {})", all.join(", ")))
        })
}

/// A value as given on the command line: JSON if it parses, else text.
fn value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// The query of `acts ps --model M [--state S] --where ...`: each
/// `--where` is `VAR=VALUE`, `VAR>=VALUE` or `VAR<=VALUE`, all on one
/// variable.
/// `--waiting-for`'s value.
pub(crate) fn parse_waiting_for(what: &str) -> Result<acts::WaitingFor, Failure> {
    match what {
        "concurrency" => Ok(acts::WaitingFor::Concurrency),
        "admission" => Ok(acts::WaitingFor::Admission),
        "gate" => Ok(acts::WaitingFor::Gate),
        other => Err(Failure::input(format!(
            "--waiting-for '{other}': give concurrency (a free slot of the concurrency key), admission (a place under the engine's cap) or gate (a task at a step's or act's key or rate)"
        ))),
    }
}

pub(crate) fn where_query(
    model: Option<&str>,
    state: Option<&str>,
    wheres: &[String],
) -> Result<ProcessQuery, Failure> {
    let mut q = ProcessQuery::new();
    q.model = model.map(str::to_owned);
    q.state = state.map(parse_state).transpose()?;
    let mut filter: Option<VarFilter> = None;
    for w in wheres {
        let (name, op, text) = ["<=", ">=", "="]
            .iter()
            .find_map(|op| w.split_once(op).map(|(n, v)| (n.trim(), *op, v.trim())))
            .ok_or_else(|| {
                Failure::input(format!(
                    "--where '{w}': write VAR=VALUE, VAR>=VALUE or VAR<=VALUE"
                ))
            })?;
        if name.is_empty() {
            return Err(Failure::input(format!(
                "--where '{w}': the variable name is missing"
            )));
        }
        let f = filter.get_or_insert_with(|| VarFilter::new(name));
        if f.name != name {
            return Err(Failure::input(format!(
                "--where on '{}' and '{name}': a query looks up one variable (filter the rest with --state, or in the output)",
                f.name
            )));
        }
        match op {
            "=" => f.eq = Some(value(text)),
            ">=" => f.min = Some(value(text)),
            _ => f.max = Some(value(text)),
        }
    }
    q.var = filter;
    if q.var.is_some() && q.model.is_none() {
        return Err(Failure::input(
            "--where needs --model (variables are indexed per model)",
        ));
    }
    Ok(q)
}

/// The plan of `acts migrate`: the map file (YAML or JSON: `old: new`
/// node ids) and the vars.
pub(crate) fn migration_plan(
    model: &str,
    from: u32,
    to: u32,
    map: Option<&std::path::Path>,
    vars: &[String],
) -> Result<acts::MigrationPlan, Failure> {
    let map = match map {
        None => Default::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Failure::input(format!("--map {}: cannot read it: {e}", path.display()))
            })?;
            serde_norway::from_str(&text).map_err(|e| {
                Failure::input(format!(
                    "--map {}: not a map of node ids (`old_step: new_step` per line): {e}",
                    path.display()
                ))
            })?
        }
    };
    Ok({
        let mut v = acts::MigrationPlan::default();
        v.model = model.to_owned();
        v.from = from;
        v.to = to;
        v.map = map;
        v.vars = crate::answers::parse_vars(vars)?;
        v
    })
}

/// The step of `acts control rewind` (required there, refused elsewhere).
pub(crate) fn rewind_target<'a>(control: &str, to: Option<&'a str>) -> Result<&'a str, Failure> {
    match (control, to) {
        ("rewind", Some(t)) => Ok(t),
        ("rewind", None) => Err(Failure::input(
            "rewind needs --to STEP (the step to run again)",
        )),
        (_, Some(_)) => Err(Failure::input(format!("--to is for rewind, not {control}"))),
        (_, None) => Ok(""),
    }
}

/// Fails when `--task` is given to a control other than retry.
pub(crate) fn retry_task_flag(control: &str, task: Option<&str>) -> Result<(), Failure> {
    match (control, task) {
        ("retry", _) | (_, None) => Ok(()),
        (_, Some(_)) => Err(Failure::input(format!(
            "--task is for retry, not {control}"
        ))),
    }
}

/// The query of `acts tasks`.
pub(crate) fn task_query(f: &TaskFilter) -> Result<TaskQuery, Failure> {
    let process = where_query(f.model.as_deref(), f.process_state.as_deref(), &f.wheres)?;
    let mut q = if f.inbox {
        let mut q = TaskQuery::inbox();
        if process.state.is_some() {
            q.process.state = process.state;
        }
        q.process.model = process.model;
        q.process.var = process.var;
        q
    } else {
        TaskQuery::new().in_processes(process)
    };
    if let Some(s) = &f.state {
        q.state = Some(parse_state(s)?);
    }
    if let Some(k) = &f.kind {
        q.kind = Some(match k.as_str() {
            "workflow" => MessageType::Workflow,
            "step" => MessageType::Step,
            "branch" => MessageType::Branch,
            "act" => MessageType::Act,
            other => {
                return Err(Failure::input(format!(
                    "unknown kind '{other}' (one of: workflow, step, branch, act)"
                )));
            }
        });
    }
    q.node = f.node.clone();
    q.key = f.key.clone();
    q.uses = f.uses.clone();
    Ok(q)
}

/// The query of `acts deliveries`.
pub(crate) fn delivery_query(f: &DeliveryFilter) -> Result<DeliveryQuery, Failure> {
    let state = f
        .state
        .as_deref()
        .map(|s| match s {
            "pending" => Ok(DeliveryState::Pending),
            "acked" => Ok(DeliveryState::Acked),
            "failed" => Ok(DeliveryState::Failed),
            "closed" => Ok(DeliveryState::Closed),
            other => Err(Failure::input(format!(
                "unknown delivery state '{other}' (one of: pending, acked, failed, closed)"
            ))),
        })
        .transpose()?;
    Ok({
        let mut v = DeliveryQuery::new();
        v.channel = f.channel.clone();
        v.state = state;
        v.pid = f.pid.clone();
        v.messages = f.messages;
        v
    })
}

/// Every item of a paged listing, in order: `fetch(cursor)` answers one
/// page and the cursor of the next (`None`: the last).
pub(crate) async fn all_pages<T, Fut>(
    mut fetch: impl FnMut(Option<String>) -> Fut,
) -> Result<Vec<T>, Failure>
where
    Fut: Future<Output = Result<(Vec<T>, Option<String>), Failure>>,
{
    let mut all = Vec::new();
    let mut cursor = None;
    loop {
        let (items, next) = fetch(cursor).await?;
        all.extend(items);
        match next {
            Some(n) => cursor = Some(n),
            None => return Ok(all),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wheres_become_one_variable_filter() {
        let q = where_query(
            Some("orders"),
            Some("running"),
            &["amount>=100".into(), "amount<=250".into()],
        )
        .expect("a query");
        let f = q.var.expect("a variable filter");
        assert_eq!(
            (f.name.as_str(), f.min, f.max),
            ("amount", Some(Value::from(100)), Some(Value::from(250)))
        );
        assert_eq!(q.state, Some(TaskState::Running));
        let q = where_query(Some("orders"), None, &["customer=acme".into()]).expect("a query");
        assert_eq!(q.var.and_then(|f| f.eq), Some(Value::from("acme")));
        for bad in [
            vec!["customer".to_owned()],
            vec!["=x".to_owned()],
            vec!["a=1".to_owned(), "b=2".to_owned()],
        ] {
            assert!(where_query(Some("orders"), None, &bad).is_err(), "{bad:?}");
        }
        assert!(where_query(None, None, &["a=1".into()]).is_err());
    }
}
