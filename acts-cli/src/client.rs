//! [`Acts`] over the HTTP API of a running `acts serve` (`--server URL`
//! or `ACTS_SERVER`): the commands of `calls.rs` go through the server
//! instead of opening the store, so they work while the server holds it.
//! Output is the same as on a store.

use std::time::Duration;

use acts::{
    BulkItem, BulkJob, BulkOutcome, BulkPreview, BulkRequest, DeliveryInfo, DeliveryQuery,
    MigrationPlan, MigrationReport, ModelInfo, ModelVersionInfo, ProcInfo, ProcessQuery, TaskInfo,
    TaskQuery, Vars,
};
use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::api::{Acts, Control, Paged};
use crate::cli::CallCommand;
use crate::failure::Failure;

/// A client of the server at one base URL.
struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

/// How a server's answer failed.
enum Refused {
    /// The request was bad (4xx): the command's input.
    Input(String),
    /// The server or the network failed.
    Run(String),
}

impl From<Refused> for Failure {
    fn from(r: Refused) -> Self {
        match r {
            Refused::Input(m) => Failure::input(m),
            Refused::Run(m) => Failure::run(m),
        }
    }
}

/// `GET /api/v1/SEGMENTS` on the server at `base`, read as `T` (for
/// commands outside this file, e.g. `acts cluster status`).
pub(crate) async fn get_from<T: DeserializeOwned>(
    base: &str,
    token: Option<&str>,
    segments: &[&str],
) -> Result<T, Failure> {
    let client = Client::new(base, token)?;
    Ok(client.get(segments, &[]).await?)
}

/// `POST /api/v1/SEGMENTS` with the JSON `body` on the server at `base`,
/// the answer read as `T` (for commands outside this file, e.g. `acts
/// backup --server`).
pub(crate) async fn post_to<T: DeserializeOwned>(
    base: &str,
    token: Option<&str>,
    segments: &[&str],
    body: &Value,
) -> Result<T, Failure> {
    let client = Client::new(base, token)?;
    Ok(client.post(segments, body.to_string()).await?)
}

impl Client {
    fn new(base: &str, token: Option<&str>) -> Result<Self, Failure> {
        let base = base.trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Failure::input(format!(
                "--server '{base}' is not an http:// URL (e.g. http://127.0.0.1:7878)"
            )));
        }
        Ok(Self {
            http: reqwest::Client::new(),
            base,
            token: token.map(str::to_owned),
        })
    }

    /// Sends a request; the answer's JSON (`Null` when it has no body).
    async fn send(&self, req: reqwest::RequestBuilder) -> Result<Value, Refused> {
        let req = match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        };
        let res = req.send().await.map_err(|e| {
            Refused::Run(format!(
                "cannot reach the server at {}: {e} (is `acts serve` running there?)",
                self.base
            ))
        })?;
        let status = res.status();
        let text = res
            .text()
            .await
            .map_err(|e| Refused::Run(format!("the server's answer was cut: {e}")))?;
        let body: Value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if status.is_success() {
            return Ok(body);
        }
        let mut message = body["error"]["message"]
            .as_str()
            .map_or_else(|| format!("{status}: {body}"), str::to_owned);
        if status == reqwest::StatusCode::UNAUTHORIZED {
            message.push_str(if self.token.is_some() {
                " (the token of ACTS_TOKEN / --token was refused; `acts token new` makes one for the server's config)"
            } else {
                " (give the CLI your token with ACTS_TOKEN=... or --token)"
            });
        }
        Err(if status.is_client_error() {
            Refused::Input(message)
        } else {
            Refused::Run(message)
        })
    }

    /// The URL of API path `segments` (each percent-encoded) with `query`.
    fn url(&self, segments: &[&str], query: &[(&str, &str)]) -> Result<reqwest::Url, Refused> {
        let mut url = reqwest::Url::parse(&self.base)
            .map_err(|e| Refused::Input(format!("--server '{}': {e}", self.base)))?;
        url.path_segments_mut()
            .map_err(|()| Refused::Input(format!("--server '{}' cannot have a path", self.base)))?
            .pop_if_empty()
            .extend(["api", "v1"])
            .extend(segments);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        Ok(url)
    }

    async fn get<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        query: &[(&str, &str)],
    ) -> Result<T, Refused> {
        let url = self.url(segments, query)?;
        decode(self.send(self.http.get(url)).await?)
    }

    /// Posts `body` as JSON with `query`; the answer read as `T`.
    async fn post_query<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        query: &[(&str, &str)],
        body: &impl serde::Serialize,
    ) -> Result<T, Refused> {
        let url = self.url(segments, query)?;
        let text = serde_json::to_string(body)
            .map_err(|e| Refused::Input(format!("the query cannot be sent: {e}")))?;
        decode(
            self.send(
                self.http
                    .post(url)
                    .header("content-type", "application/json")
                    .body(text),
            )
            .await?,
        )
    }

    /// Deletes the resource at `segments`.
    async fn delete(&self, segments: &[&str]) -> Result<(), Refused> {
        let url = self.url(segments, &[])?;
        self.send(self.http.delete(url)).await.map(drop)
    }

    /// Posts `body` (JSON); the answer read as `T` (`Value` for any).
    async fn post<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        body: String,
    ) -> Result<T, Refused> {
        self.post_as(segments, body, "application/json").await
    }

    /// Posts `body` of `content_type`; the answer read as `T`.
    async fn post_as<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        body: String,
        content_type: &str,
    ) -> Result<T, Refused> {
        let url = self.url(segments, &[])?;
        decode(
            self.send(
                self.http
                    .post(url)
                    .header("content-type", content_type)
                    .body(body),
            )
            .await?,
        )
    }
}

/// Runs `command` against the server at `server`; returns the exit code.
pub(crate) async fn run(
    server: &str,
    token: Option<&str>,
    command: CallCommand,
    strict: bool,
) -> Result<u8, Failure> {
    crate::calls::call(&Client::new(server, token)?, command, strict).await
}

/// A page of a query answer: the items under `field` and the next cursor.
fn paged<T: DeserializeOwned>(page: &Value, field: &str) -> Result<Paged<T>, Refused> {
    Ok((decode(page[field].clone())?, next_of(page)))
}

/// The `total` of a query answer asked with `?count=true`.
fn total(page: &Value) -> Result<usize, Refused> {
    decode(page["total"].clone())
}

#[async_trait]
impl Acts for Client {
    async fn deploy(&self, text: String) -> Result<ModelInfo, Failure> {
        Ok(self.post_as(&["models"], text, "application/yaml").await?)
    }

    async fn models(&self) -> Result<Vec<ModelInfo>, Failure> {
        Ok(self.get(&["models"], &[]).await?)
    }

    async fn versions(&self, model: &str) -> Result<Vec<ModelVersionInfo>, Failure> {
        Ok(self.get(&["models", model, "versions"], &[]).await?)
    }

    async fn remove_version(&self, model: &str, rev: u32) -> Result<(), Failure> {
        Ok(self
            .delete(&["models", model, "versions", &rev.to_string()])
            .await?)
    }

    async fn migrate(
        &self,
        plan: &MigrationPlan,
        dry_run: bool,
    ) -> Result<MigrationReport, Failure> {
        let mut body = serde_json::to_value(plan)
            .map_err(|e| Failure::input(format!("the plan cannot be sent: {e}")))?;
        body["dry_run"] = json!(dry_run);
        // (the model is the path's)
        if let Some(body) = body.as_object_mut() {
            body.remove("model");
        }
        Ok(self
            .post(&["models", &plan.model, "migrate"], body.to_string())
            .await?)
    }

    async fn start(&self, model: &str, rev: Option<u32>, vars: Vars) -> Result<ProcInfo, Failure> {
        let mut body = json!({"model": model, "vars": vars});
        if let Some(r) = rev {
            body["rev"] = json!(r);
        }
        Ok(self.post(&["processes"], body.to_string()).await?)
    }

    async fn process(&self, pid: &str) -> Result<(ProcInfo, Vec<TaskInfo>), Failure> {
        let v: Value = self.get(&["processes", pid], &[]).await?;
        Ok((decode(v["process"].clone())?, decode(v["tasks"].clone())?))
    }

    async fn stuck(&self, after: Duration) -> Result<Vec<ProcInfo>, Failure> {
        let secs = after.as_secs().to_string();
        Ok(self.get(&["stuck"], &[("after_secs", &secs)]).await?)
    }

    async fn find_processes(&self, q: &ProcessQuery) -> Result<Paged<ProcInfo>, Failure> {
        let page: Value = self.post_query(&["processes", "query"], &[], q).await?;
        Ok(paged(&page, "processes")?)
    }

    async fn count_processes(&self, q: &ProcessQuery) -> Result<usize, Failure> {
        let page: Value = self
            .post_query(&["processes", "query"], &[("count", "true")], q)
            .await?;
        Ok(total(&page)?)
    }

    async fn find_tasks(&self, q: &TaskQuery) -> Result<Paged<TaskInfo>, Failure> {
        let page: Value = self.post_query(&["tasks", "query"], &[], q).await?;
        Ok(paged(&page, "tasks")?)
    }

    async fn count_tasks(&self, q: &TaskQuery) -> Result<usize, Failure> {
        let page: Value = self
            .post_query(&["tasks", "query"], &[("count", "true")], q)
            .await?;
        Ok(total(&page)?)
    }

    async fn find_deliveries(&self, q: &DeliveryQuery) -> Result<Paged<DeliveryInfo>, Failure> {
        let page: Value = self.post_query(&["deliveries", "query"], &[], q).await?;
        Ok(paged(&page, "deliveries")?)
    }

    async fn count_deliveries(&self, q: &DeliveryQuery) -> Result<usize, Failure> {
        let page: Value = self
            .post_query(&["deliveries", "query"], &[("count", "true")], q)
            .await?;
        Ok(total(&page)?)
    }

    async fn act(&self, pid: &str, tid: &str, action: &str, vars: Vars) -> Result<(), Failure> {
        let _: Value = self
            .post(
                &["processes", pid, "tasks", tid, action],
                Value::Object(vars).to_string(),
            )
            .await?;
        Ok(())
    }

    async fn control(&self, pid: &str, control: Control) -> Result<(), Failure> {
        let (name, body) = match control {
            Control::Pause { reason } => ("pause", json!({ "reason": reason }).to_string()),
            Control::Resume => ("resume", String::new()),
            Control::Terminate { reason } => ("terminate", json!({ "reason": reason }).to_string()),
            Control::Rewind { to, vars } => {
                ("rewind", json!({ "to": to, "vars": vars }).to_string())
            }
            Control::Retry { task, vars } => {
                ("retry", json!({ "task": task, "vars": vars }).to_string())
            }
        };
        let _: Value = self.post(&["processes", pid, name], body).await?;
        Ok(())
    }

    async fn redeliver(&self, channel: &str, msg: &str) -> Result<(), Failure> {
        let _: Value = self
            .post(&["deliveries", channel, msg, "redeliver"], String::new())
            .await?;
        Ok(())
    }

    async fn discard(&self, channel: &str, msg: &str) -> Result<(), Failure> {
        Ok(self.delete(&["deliveries", channel, msg]).await?)
    }

    async fn bulk_preview(&self, r: &BulkRequest) -> Result<BulkPreview, Failure> {
        Ok(self.post_query(&["bulk", "dry-run"], &[], r).await?)
    }

    async fn bulk_start(&self, r: BulkRequest) -> Result<BulkJob, Failure> {
        Ok(self.post_query(&["bulk"], &[], &r).await?)
    }

    async fn bulk_job(&self, id: &str) -> Result<BulkJob, Failure> {
        Ok(self.get(&["bulk", id], &[]).await?)
    }

    async fn bulk_jobs(&self, cursor: Option<&str>) -> Result<Paged<BulkJob>, Failure> {
        let mut query = vec![("limit", "1000")];
        if let Some(c) = cursor {
            query.push(("cursor", c));
        }
        let page: Value = self.get(&["bulk"], &query).await?;
        Ok(paged(&page, "jobs")?)
    }

    async fn bulk_items(
        &self,
        id: &str,
        outcome: Option<BulkOutcome>,
        cursor: Option<&str>,
    ) -> Result<Paged<BulkItem>, Failure> {
        let mut query = vec![("limit", "1000")];
        if let Some(o) = outcome {
            query.push(("outcome", o.as_str()));
        }
        if let Some(c) = cursor {
            query.push(("cursor", c));
        }
        let page: Value = self.get(&["bulk", id, "items"], &query).await?;
        Ok(paged(&page, "items")?)
    }

    async fn remove_bulk(&self, id: &str) -> Result<(), Failure> {
        Ok(self.delete(&["bulk", id]).await?)
    }

    async fn cancel_bulk(&self, id: &str) -> Result<BulkJob, Failure> {
        Ok(self.post(&["bulk", id, "cancel"], String::new()).await?)
    }

    async fn resume_bulk(&self, _id: &str) -> Result<(), Failure> {
        Ok(()) // the server works on its jobs
    }
}

/// The server's answer read as `T`.
fn decode<T: DeserializeOwned>(v: Value) -> Result<T, Refused> {
    serde_json::from_value(v)
        .map_err(|e| Refused::Run(format!("the server's answer is not understood: {e}")))
}

/// The cursor of a page's next page (`None`: the last).
fn next_of(page: &Value) -> Option<String> {
    page["next"].as_str().map(str::to_owned)
}
