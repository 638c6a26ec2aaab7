//! The commands as a client of a running `acts serve` (`--server URL` or
//! `ACTS_SERVER`): `deploy`, `start`, `ps`, `tasks`, `deliveries`, `show`, `act`, `control`, `models` and
//! `versions` go
//! through its HTTP API instead of opening the store, so they work while
//! the server holds it. Output is the same as on a store.

use acts::{DeliveryInfo, ModelInfo, ModelVersionInfo, ProcInfo, TaskInfo};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::answers::parse_vars;
use crate::cli::Command;
use crate::failure::Failure;
use crate::output::{
    pick_errored, pick_step, pick_task, print_as, print_deliveries, print_deployed, print_json,
    print_models, print_process, print_processes, print_started, print_tasks, print_versions,
};
use crate::session::{print_warnings, read_model_file};

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
    command: Command,
    strict: bool,
) -> Result<u8, Failure> {
    let c = Client::new(server, token)?;
    match command {
        Command::Deploy { models } => {
            for path in &models {
                let text = read_model_file(path, strict)?;
                let info: ModelInfo = c
                    .post_as(&["models"], text, "application/yaml")
                    .await
                    .map_err(|r| named(r, &path.display().to_string()))?;
                print_warnings(path, &info);
                print_deployed(&info);
            }
            Ok(0)
        }
        Command::Start {
            model_id,
            vars,
            quiet,
            rev,
        } => {
            let vars = parse_vars(&vars)?;
            let mut body = json!({"model": model_id, "vars": vars});
            if let Some(r) = rev {
                body["rev"] = json!(r);
            }
            let info: ProcInfo = c.post(&["processes"], body.to_string()).await?;
            print_started(&info, quiet);
            Ok(0)
        }
        Command::Ps {
            stuck: Some(secs),
            json,
            ..
        } => {
            let secs = secs.to_string();
            let list: Vec<ProcInfo> = c.get(&["stuck"], &[("after_secs", &secs)]).await?;
            print_as(&list, json, |x| print_processes(x))
        }
        Command::Ps {
            state,
            model,
            wheres,
            count,
            json,
            ..
        } if count || !wheres.is_empty() => {
            let mut q = crate::query::where_query(model.as_deref(), state.as_deref(), &wheres)?;
            if count {
                let page: Value = c
                    .post_query(&["processes", "query"], &[("count", "true")], &q)
                    .await?;
                println!("{}", page["total"]);
                return Ok(0);
            }
            let mut list: Vec<ProcInfo> = Vec::new();
            loop {
                let page: Value = c.post_query(&["processes", "query"], &[], &q).await?;
                list.extend(decode::<Vec<ProcInfo>>(page["processes"].clone())?);
                match page["next"].as_str() {
                    Some(n) => q.cursor = Some(n.to_owned()),
                    None => break,
                }
            }
            print_as(&list, json, |x| print_processes(x))
        }
        Command::Ps {
            state, model, json, ..
        } => {
            let mut list: Vec<ProcInfo> = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let mut q: Vec<(&str, &str)> = vec![("limit", "1000")];
                if let Some(s) = &state {
                    q.push(("state", s));
                }
                if let Some(m) = &model {
                    q.push(("model", m));
                }
                if let Some(c) = &cursor {
                    q.push(("cursor", c));
                }
                let page: Value = c.get(&["processes"], &q).await?;
                let rows: Vec<ProcInfo> = decode(page["processes"].clone())?;
                list.extend(rows);
                match page["next"].as_str() {
                    Some(n) => cursor = Some(n.to_owned()),
                    None => break,
                }
            }
            print_as(&list, json, |x| print_processes(x))
        }
        Command::Show { pid, json } => {
            let v: Value = c.get(&["processes", &pid], &[]).await?;
            if json {
                print_json(&v)?;
                return Ok(0);
            }
            let (info, tasks) = process_of(v)?;
            print_process(&info, &tasks);
            Ok(0)
        }
        Command::Act {
            action,
            pid,
            tid,
            vars,
        } => {
            let vars = parse_vars(&vars)?;
            let v: Value = c.get(&["processes", &pid], &[]).await?;
            let (_, tasks) = process_of(v)?;
            let tid = if action == "push" {
                pick_step(&tasks, &pid, &tid)?
            } else {
                pick_task(&tasks, &pid, &tid)?
            };
            c.post::<Value>(
                &["processes", &pid, "tasks", &tid, &action],
                Value::Object(vars).to_string(),
            )
            .await?;
            println!("ok: {action} {pid} {tid}");
            Ok(0)
        }
        Command::Migrate {
            model_id,
            from,
            to,
            map,
            vars,
            dry_run,
            json,
        } => {
            let plan = crate::query::migration_plan(&model_id, from, to, map.as_deref(), &vars)?;
            let mut body = serde_json::to_value(&plan)
                .map_err(|e| Failure::input(format!("the plan cannot be sent: {e}")))?;
            body["dry_run"] = json!(dry_run);
            let report: acts::MigrationReport = c
                .post(&["models", &model_id, "migrate"], body.to_string())
                .await?;
            print_as(&report, json, crate::output::print_migration)
        }
        Command::Control {
            control,
            pid,
            reason,
            to,
            task,
            vars,
        } => {
            let to = crate::query::rewind_target(&control, to.as_deref())?;
            crate::query::retry_task_flag(&control, task.as_deref())?;
            let task = match &task {
                Some(id) => {
                    let (_, tasks) = process_of(c.get(&["processes", &pid], &[]).await?)?;
                    Some(pick_errored(&tasks, &pid, id)?)
                }
                None => None,
            };
            let body = match control.as_str() {
                "resume" => String::new(),
                "rewind" => json!({ "to": to, "vars": parse_vars(&vars)? }).to_string(),
                "retry" => json!({ "task": task, "vars": parse_vars(&vars)? }).to_string(),
                _ => json!({ "reason": reason }).to_string(),
            };
            let _: Value = c.post(&["processes", &pid, &control], body).await?;
            println!("ok: {control} {pid}");
            Ok(0)
        }
        Command::Versions {
            model_id,
            remove,
            json,
        } => {
            if let Some(rev) = remove {
                let rev = rev.to_string();
                c.delete(&["models", &model_id, "versions", &rev]).await?;
                println!("removed: {model_id} version {rev}");
                return Ok(0);
            }
            let versions: Vec<ModelVersionInfo> =
                c.get(&["models", &model_id, "versions"], &[]).await?;
            print_as(&versions, json, |x| print_versions(x))
        }
        Command::Tasks {
            filter,
            count,
            json,
        } => {
            let q = crate::query::task_query(&filter)?;
            if count {
                let page: Value = c
                    .post_query(&["tasks", "query"], &[("count", "true")], &q)
                    .await?;
                println!("{}", page["total"]);
                return Ok(0);
            }
            let list: Vec<TaskInfo> = crate::query::all_pages(|cursor| {
                let (c, q) = (&c, q.clone().after(cursor));
                async move {
                    let page: Value = c.post_query(&["tasks", "query"], &[], &q).await?;
                    Ok((decode(page["tasks"].clone())?, next_of(&page)))
                }
            })
            .await?;
            print_as(&list, json, |x| print_tasks(x))
        }
        Command::Deliveries {
            filter,
            redeliver,
            discard,
            count,
            json,
        } => {
            if let Some([channel, msg]) = redeliver.as_deref() {
                let _: Value = c
                    .post(&["deliveries", channel, msg, "redeliver"], String::new())
                    .await?;
                println!("ok: redelivered {channel} {msg}");
                return Ok(0);
            }
            if let Some([channel, msg]) = discard.as_deref() {
                c.delete(&["deliveries", channel, msg]).await?;
                println!("ok: discarded {channel} {msg}");
                return Ok(0);
            }
            let q = crate::query::delivery_query(&filter)?;
            if count {
                let page: Value = c
                    .post_query(&["deliveries", "query"], &[("count", "true")], &q)
                    .await?;
                println!("{}", page["total"]);
                return Ok(0);
            }
            let list: Vec<DeliveryInfo> = crate::query::all_pages(|cursor| {
                let (c, q) = (&c, q.clone().after(cursor));
                async move {
                    let page: Value = c.post_query(&["deliveries", "query"], &[], &q).await?;
                    Ok((decode(page["deliveries"].clone())?, next_of(&page)))
                }
            })
            .await?;
            print_as(&list, json, |x| print_deliveries(x))
        }
        Command::Models { json } => {
            let models: Vec<ModelInfo> = c.get(&["models"], &[]).await?;
            print_as(&models, json, |x| print_models(x))
        }
        other => Err(Failure::input(format!(
            "`{}` works on a store, not through a server; with --server use deploy, start, ps, tasks, deliveries, show, act, control, migrate, models or versions (or stop the server to use the store)",
            name_of(&other)
        ))),
    }
}

/// A refusal about the model file `name`.
fn named(r: Refused, name: &str) -> Failure {
    match r {
        Refused::Input(m) => Failure::input(format!("{name}: {m}")),
        Refused::Run(m) => Failure::run(m),
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

fn process_of(v: Value) -> Result<(ProcInfo, Vec<TaskInfo>), Refused> {
    Ok((decode(v["process"].clone())?, decode(v["tasks"].clone())?))
}

fn name_of(c: &Command) -> &'static str {
    match c {
        Command::Run { .. } => "run",
        Command::Resume { .. } => "resume",
        Command::Serve { .. } => "serve",
        Command::Test { .. } => "test",
        _ => "this command",
    }
}
