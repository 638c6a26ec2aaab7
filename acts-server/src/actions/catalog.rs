//! The actions on what is deployed: `model:*`, `pack:*` (the packages
//! the engine runs) and `evt:*` (triggers, the reference's events).
//!
//! May use: the facade `acts`, the room's `call`, `shapes` and `listing`.

use acts::Workflow;
use serde_json::Value;

use super::call::{Answer, Call, Refusal};
use super::listing::RefQuery;
use super::shapes;

/// Why `pack:publish` and `pack:rm` are refused.
const PACKAGES_IN_CODE: &str = "acts runs the packages registered in code (built-ins and \
    `EngineBuilder::package`); a package record published by a client would have nothing to \
    run it. `pack:ls` and `pack:get` list what the engine runs";

pub(crate) async fn apply(name: &str, mut call: Call) -> Answer {
    match name {
        "model:deploy" => {
            let text = call.need("model")?;
            let mut workflow =
                Workflow::from_yaml(&text).map_err(|e| Refusal::Invalid(e.to_string()))?;
            if let Some(mid) = call.take("mid")? {
                workflow.id = mid;
            }
            call.exec.model().deploy(&workflow).await?;
            Ok(Value::Bool(true))
        }
        "model:get" => {
            let id = call.need("id")?;
            let fmt = call.take("fmt")?.unwrap_or_else(|| "text".to_owned());
            let (info, workflow) = call.exec.model().get(&id).await?;
            let data = match fmt.as_str() {
                "json" => workflow.to_json(),
                "text" | "yml" | "yaml" | "tree" => workflow
                    .to_yaml()
                    .map_err(|e| Refusal::Invalid(e.to_string()))?,
                other => {
                    return Err(Refusal::Invalid(format!(
                        "fmt '{other}' is invalid, it must be one of 'text', 'yml' and 'json'"
                    )));
                }
            };
            Ok(shapes::model(&info, data))
        }
        "model:ls" => {
            let w = RefQuery::of(&call.options)
                .and_then(|q| q.window(&["id", "name"]))
                .map_err(Refusal::Invalid)?;
            let mut models = call.exec.model().list().await?;
            models.retain(|m| {
                w.eq("id").is_none_or(|id| m.id == id) && w.eq("name").is_none_or(|n| m.name == n)
            });
            if w.descending {
                models.reverse();
            }
            let count = models.len();
            let rows = w
                .slice(models)
                .iter()
                .map(|m| shapes::model(m, String::new()))
                .collect();
            Ok(shapes::page(rows, count, w.offset, w.limit))
        }
        "model:rm" => {
            let id = call.need("id")?;
            Ok(Value::Bool(call.exec.model().remove(&id).await?))
        }
        "pack:ls" => {
            let w = RefQuery::of(&call.options)
                .and_then(|q| q.window(&["id", "catalog", "run_as"]))
                .map_err(Refusal::Invalid)?;
            let mut packs: Vec<Value> = call
                .exec
                .pack()
                .list()
                .await?
                .iter()
                .map(shapes::package)
                .collect();
            packs.retain(|p| {
                ["id", "catalog", "run_as"]
                    .iter()
                    .all(|k| w.eq(k).is_none_or(|v| p[*k].as_str() == Some(v.as_str())))
            });
            let count = packs.len();
            Ok(shapes::page(w.slice(packs), count, w.offset, w.limit))
        }
        "pack:get" => {
            let id = call.need("id")?;
            let packs = call.exec.pack().list().await?;
            let p = packs
                .iter()
                .find(|p| p.definition.id == id)
                .ok_or_else(|| crate::ApiError::not_found(format!("no package '{id}'")))?;
            Ok(shapes::package(p))
        }
        "pack:publish" | "pack:rm" => Err(Refusal::Unsupported {
            name: name.to_owned(),
            why: PACKAGES_IN_CODE,
        }),
        "evt:ls" => {
            let w = RefQuery::of(&call.options)
                .and_then(|q| q.window(&["mid", "uses", "id"]))
                .map_err(Refusal::Invalid)?;
            let mut triggers = call.exec.evt().list().await?;
            triggers.retain(|t| {
                w.eq("mid").is_none_or(|m| t.model_id == m)
                    && w.eq("uses").is_none_or(|u| t.kind == u)
                    && w.eq("id").is_none_or(|i| t.id == i)
            });
            let count = triggers.len();
            let rows = w.slice(triggers).iter().map(shapes::event).collect();
            Ok(shapes::page(rows, count, w.offset, w.limit))
        }
        "evt:get" => {
            let id = call.need("id")?;
            let triggers = call.exec.evt().list().await?;
            let t = triggers
                .iter()
                .find(|t| t.id == id)
                .ok_or_else(|| crate::ApiError::not_found(format!("no event (trigger) '{id}'")))?;
            Ok(shapes::event(t))
        }
        "evt:start" => {
            let id = call.need("id")?;
            let params = call.options.remove("params").unwrap_or(Value::Null);
            let p = call.exec.evt().start(&id, params).await?;
            Ok(serde_json::json!({ "pid": p.pid }))
        }
        _ => Err(Refusal::NotFound(name.to_owned())),
    }
}
