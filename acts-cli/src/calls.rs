//! The commands that work on a store and through a server alike —
//! `deploy`, `start`, `ps`, `tasks`, `deliveries`, `show`, `act`,
//! `control`, `migrate`, `models`, `versions` (and `bulk`, in `bulk.rs`) — each written once against
//! [`Acts`] (the engine in this process, or `acts serve` over HTTP). The
//! output is the same either way.

use acts::{Action, ProcessQuery};

use crate::answers::parse_vars;
use crate::api::{Acts, Control};
use crate::cli::CallCommand;
use crate::failure::Failure;
use crate::output::{
    pick_errored, pick_step, pick_task, print_as, print_deliveries, print_deployed, print_json,
    print_models, print_process, print_processes, print_started, print_tasks, print_versions,
};
use crate::session::{print_warnings, read_model_file};

/// Runs `command` through `acts`; returns the exit code.
pub(crate) async fn call(
    acts: &impl Acts,
    command: CallCommand,
    strict: bool,
) -> Result<u8, Failure> {
    match command {
        CallCommand::Deploy { models } => deploy(acts, &models, strict).await,
        CallCommand::Bulk { command } => crate::bulk::bulk(acts, command).await,
        CallCommand::Start {
            model_id,
            vars,
            quiet,
            rev,
        } => {
            async {
                let info = acts.start(&model_id, rev, parse_vars(&vars)?).await?;
                print_started(&info, quiet);
                Ok(0)
            }
            .await
        }
        CallCommand::Ps {
            stuck: Some(secs),
            json,
            ..
        } => {
            async {
                let list = acts.stuck(std::time::Duration::from_secs(secs)).await?;
                print_as(&list, json, |x| print_processes(x))
            }
            .await
        }
        CallCommand::Ps {
            state,
            model,
            wheres,
            waiting_for,
            key,
            ecode,
            count,
            json,
            ..
        } => {
            async {
                let mut q = crate::query::where_query(model.as_deref(), state.as_deref(), &wheres)?;
                q.waiting_for = waiting_for
                    .as_deref()
                    .map(crate::query::parse_waiting_for)
                    .transpose()?;
                q.concurrency_key = key;
                q.ecode = ecode;
                ps(acts, q, count, json).await
            }
            .await
        }
        CallCommand::Show { pid, json } => {
            async {
                let (info, tasks) = acts.process(&pid).await?;
                if json {
                    print_json(&serde_json::json!({"process": info, "tasks": tasks}))?;
                } else {
                    print_process(&info, &tasks);
                }
                Ok(0)
            }
            .await
        }
        CallCommand::Act {
            action,
            pid,
            tid,
            vars,
        } => act(acts, &action, &pid, &tid, &vars).await,
        CallCommand::Migrate {
            model_id,
            from,
            to,
            map,
            vars,
            dry_run,
            json,
        } => {
            async {
                let plan =
                    crate::query::migration_plan(&model_id, from, to, map.as_deref(), &vars)?;
                let report = acts.migrate(&plan, dry_run).await?;
                print_as(&report, json, crate::output::print_migration)
            }
            .await
        }
        CallCommand::Control {
            control,
            pid,
            reason,
            to,
            task,
            vars,
        } => {
            async {
                let to = crate::query::rewind_target(&control, to.as_deref())?;
                crate::query::retry_task_flag(&control, task.as_deref())?;
                let task = match &task {
                    Some(id) => Some(pick_errored(&acts.process(&pid).await?.1, &pid, id)?),
                    None => None,
                };
                let c = match control.as_str() {
                    "pause" => Control::Pause { reason },
                    "resume" => Control::Resume,
                    "rewind" => Control::Rewind {
                        to: to.to_owned(),
                        vars: parse_vars(&vars)?,
                    },
                    "retry" => Control::Retry {
                        task,
                        vars: parse_vars(&vars)?,
                    },
                    _ => Control::Terminate { reason },
                };
                acts.control(&pid, c).await?;
                println!("ok: {control} {pid}");
                Ok(0)
            }
            .await
        }
        CallCommand::Versions {
            model_id,
            remove,
            json,
        } => {
            async {
                if let Some(rev) = remove {
                    acts.remove_version(&model_id, rev).await?;
                    println!("removed: {model_id} version {rev}");
                    return Ok(0);
                }
                let versions = acts.versions(&model_id).await?;
                print_as(&versions, json, |x| print_versions(x))
            }
            .await
        }
        CallCommand::Tasks {
            filter,
            count,
            json,
        } => {
            async {
                let q = crate::query::task_query(&filter)?;
                if count {
                    println!("{}", acts.count_tasks(&q).await?);
                    return Ok(0);
                }
                let list = crate::query::all_pages(|cursor| {
                    let q = q.clone().after(cursor);
                    async move { acts.find_tasks(&q).await }
                })
                .await?;
                print_as(&list, json, |x| print_tasks(x))
            }
            .await
        }
        CallCommand::Deliveries {
            filter,
            redeliver,
            discard,
            count,
            json,
        } => {
            async {
                if let Some([channel, msg]) = redeliver.as_deref() {
                    acts.redeliver(channel, msg).await?;
                    println!("ok: redelivered {channel} {msg}");
                    return Ok(0);
                }
                if let Some([channel, msg]) = discard.as_deref() {
                    acts.discard(channel, msg).await?;
                    println!("ok: discarded {channel} {msg}");
                    return Ok(0);
                }
                let q = crate::query::delivery_query(&filter)?;
                if count {
                    println!("{}", acts.count_deliveries(&q).await?);
                    return Ok(0);
                }
                let list = crate::query::all_pages(|cursor| {
                    let q = q.clone().after(cursor);
                    async move { acts.find_deliveries(&q).await }
                })
                .await?;
                print_as(&list, json, |x| print_deliveries(x))
            }
            .await
        }
        CallCommand::Models { json } => {
            async {
                let models = acts.models().await?;
                print_as(&models, json, |x| print_models(x))
            }
            .await
        }
    }
}

/// Deploys each model file, its warnings to stderr naming the file; with
/// `strict`, a model with warnings is bad input and is not deployed.
async fn deploy(
    acts: &impl Acts,
    models: &[std::path::PathBuf],
    strict: bool,
) -> Result<u8, Failure> {
    for path in models {
        let text = read_model_file(path, strict)?;
        let info = acts.deploy(text).await.map_err(|f| Failure {
            code: f.code,
            message: format!("{}: {}", path.display(), f.message),
        })?;
        print_warnings(path, &info);
        print_deployed(&info);
    }
    Ok(0)
}

/// `ps`: the processes `q` finds (of a state or model; with `--where`, by
/// an indexed variable; waiting for something; of a concurrency key),
/// every page; with `count`, how many.
async fn ps(acts: &impl Acts, mut q: ProcessQuery, count: bool, json: bool) -> Result<u8, Failure> {
    if count {
        println!("{}", acts.count_processes(&q).await?);
        return Ok(0);
    }
    q.limit = Some(acts::MAX_PAGE);
    let list = crate::query::all_pages(|cursor| {
        let mut q = q.clone();
        q.cursor = cursor;
        async move { acts.find_processes(&q).await }
    })
    .await?;
    print_as(&list, json, |x| print_processes(x))
}

/// `act`: `action` on task `tid` of `pid` — a task id, or the node (or
/// key) of the one act waiting there; `push` adds an act under a step.
async fn act(
    acts: &impl Acts,
    action: &str,
    pid: &str,
    tid: &str,
    vars: &[String],
) -> Result<u8, Failure> {
    let vars = parse_vars(vars)?;
    if action != "push" {
        action
            .parse::<Action>()
            .map_err(|e| Failure::input(format!("{e} (or push)")))?;
    }
    let (_, tasks) = acts.process(pid).await?;
    let tid = if action == "push" {
        pick_step(&tasks, pid, tid)?
    } else {
        pick_task(&tasks, pid, tid)?
    };
    acts.act(pid, &tid, action, vars).await?;
    println!("ok: {action} {pid} {tid}");
    Ok(0)
}
