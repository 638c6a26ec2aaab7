//! The commands: open the store and engine, then run, deploy, start,
//! list, show, act or resume.

use std::time::Instant;

use acts::{Action, ChannelOptions, Clock, Engine, Executor, ManualClock, SystemClock, TaskState};

use crate::answers::{AnswerFile, parse_vars};
use crate::cli::{AnswerMode, Cli, Command};
use crate::driver::{Driver, Mode};
use crate::failure::Failure;
use crate::output::{
    pick_errored, pick_step, pick_task, print_as, print_deliveries, print_deployed, print_json,
    print_models, print_process, print_processes, print_started, print_tasks, print_versions,
};
use crate::report::print_report;
use crate::session::{RunSpec, deploy_file, open_engine, run_model};

/// Runs the command; returns the exit code.
pub async fn dispatch(args: Cli) -> Result<u8, Failure> {
    if let Command::Token(t) = args.command {
        return crate::token::run(t);
    }
    if let Command::Cluster(crate::cli::ClusterCommand::Status { json }) = args.command {
        return crate::cluster::status(args.server.as_deref(), args.token.as_deref(), json).await;
    }
    if let Some(server) = &args.server {
        return crate::client::run(server, args.token.as_deref(), args.command, args.strict).await;
    }
    match args.command {
        Command::Run {
            model,
            deploy,
            vars,
            mode,
        } => {
            let answer_mode = mode_of(&mode)?;
            let vars = parse_vars(&vars)?;
            let clock = scripted(&mode);
            let engine = open_engine(&args.store, clock.clone()).await?;
            let started = Instant::now();
            let run = RunSpec {
                model: &model,
                deploy: &deploy,
                vars,
                json: mode.json,
                strict: args.strict,
            };
            let virtual_clock = clock.is_some();
            let report = run_model(&engine, &run, answer_mode, clock).await;
            engine.close().await;
            let report = report?;
            print_report(&report, mode.json, virtual_clock, started);
            if let (false, 2, Some(e)) = (mode.json, report.exit_code(), &report.error) {
                // Why a run was refused goes to stderr (the report on
                // stdout names only the state).
                eprintln!("acts: {e}");
            }
            Ok(report.exit_code())
        }
        Command::Test { paths, json } => crate::testcmd::run(&paths, json).await,
        Command::Serve {
            listen,
            config,
            node,
            lease_ttl,
            cluster: Some(cluster),
            partitions,
            advertise,
        } => {
            let join = crate::cluster::Join {
                url: &cluster,
                node: node.as_deref().unwrap_or_default(),
                partitions,
                advertise: advertise.as_deref(),
                lease_ttl: std::time::Duration::from_secs(lease_ttl.max(1)),
            };
            crate::cluster::serve(join, listen.as_deref(), config.as_deref()).await
        }
        Command::Serve {
            listen,
            config,
            node,
            lease_ttl,
            ..
        } => {
            let lease = node.map(|id| {
                let mut v = acts::LeaseConfig::new(&id);
                v.ttl = std::time::Duration::from_secs(lease_ttl.max(1));
                v
            });
            crate::serve::run(&args.store, listen.as_deref(), config.as_deref(), lease).await
        }
        other => {
            let engine = open_engine(&args.store, None).await?;
            let code = other_command(&engine, other, args.strict).await;
            engine.close().await;
            code
        }
    }
}

async fn other_command(engine: &Engine, command: Command, strict: bool) -> Result<u8, Failure> {
    match command {
        Command::Deploy { models } => {
            for m in &models {
                let info = deploy_file(&engine.executor(), m, strict).await?;
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
            let exec = engine.executor();
            let info = match rev {
                Some(r) => exec.start_version(&model_id, r, vars).await,
                None => exec.start(&model_id, vars).await,
            }
            .map_err(Failure::action)?;
            print_started(&info, quiet);
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
            let report = engine
                .executor()
                .migrate(&plan, dry_run)
                .await
                .map_err(Failure::action)?;
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
            let exec = engine.executor();
            let to = crate::query::rewind_target(&control, to.as_deref())?;
            crate::query::retry_task_flag(&control, task.as_deref())?;
            let task = match &task {
                Some(id) => {
                    let tasks = exec.tasks(&pid).await.map_err(Failure::action)?;
                    Some(pick_errored(&tasks, &pid, id)?)
                }
                None => None,
            };
            match control.as_str() {
                "pause" => exec.pause_process(&pid, &reason).await,
                "resume" => exec.unpause_process(&pid).await,
                "rewind" => exec.rewind_process(&pid, to, parse_vars(&vars)?).await,
                "retry" => {
                    exec.retry_process(&pid, task.as_deref(), parse_vars(&vars)?)
                        .await
                }
                _ => exec.terminate_process(&pid, &reason).await,
            }
            .map_err(Failure::action)?;
            println!("ok: {control} {pid}");
            Ok(0)
        }
        Command::Versions {
            model_id,
            remove,
            json,
        } => {
            let exec = engine.executor();
            if let Some(rev) = remove {
                if !exec
                    .remove_version(&model_id, rev)
                    .await
                    .map_err(Failure::action)?
                {
                    return Err(Failure::input(format!(
                        "model '{model_id}' has no version {rev} (`acts versions {model_id}` lists them)"
                    )));
                }
                println!("removed: {model_id} version {rev}");
                return Ok(0);
            }
            let versions = exec.versions(&model_id).await.map_err(Failure::action)?;
            print_as(&versions, json, |x| print_versions(x))
        }
        Command::Ps {
            stuck: Some(secs),
            json,
            ..
        } => {
            let list = engine
                .executor()
                .stuck_processes(Some(std::time::Duration::from_secs(secs)))
                .await
                .map_err(Failure::engine)?;
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
            let exec = engine.executor();
            if count {
                let n = exec.count_matching(&q).await.map_err(Failure::action)?;
                println!("{n}");
                return Ok(0);
            }
            let mut list = Vec::new();
            loop {
                let page = exec.find_processes(&q).await.map_err(Failure::action)?;
                list.extend(page.items);
                match page.next {
                    Some(c) => q.cursor = Some(c),
                    None => break,
                }
            }
            print_as(&list, json, |x| print_processes(x))
        }
        Command::Ps {
            state, model, json, ..
        } => ps(&engine.executor(), state, model, json).await,
        Command::Tasks {
            filter,
            count,
            json,
        } => {
            let exec = engine.executor();
            let q = crate::query::task_query(&filter)?;
            if count {
                println!("{}", exec.count_tasks(&q).await.map_err(Failure::action)?);
                return Ok(0);
            }
            let list = crate::query::all_pages(|cursor| {
                let (exec, q) = (&exec, q.clone().after(cursor));
                async move {
                    let page = exec.find_tasks(&q).await.map_err(Failure::action)?;
                    Ok((page.items, page.next))
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
            let exec = engine.executor();
            if let Some([channel, msg]) = redeliver.as_deref() {
                exec.redeliver(channel, msg)
                    .await
                    .map_err(Failure::action)?;
                println!("ok: redelivered {channel} {msg}");
                return Ok(0);
            }
            if let Some([channel, msg]) = discard.as_deref() {
                exec.discard(channel, msg).await.map_err(Failure::action)?;
                println!("ok: discarded {channel} {msg}");
                return Ok(0);
            }
            let q = crate::query::delivery_query(&filter)?;
            if count {
                let n = exec
                    .count_deliveries_matching(&q)
                    .await
                    .map_err(Failure::action)?;
                println!("{n}");
                return Ok(0);
            }
            let list = crate::query::all_pages(|cursor| {
                let (exec, q) = (&exec, q.clone().after(cursor));
                async move {
                    let page = exec.find_deliveries(&q).await.map_err(Failure::action)?;
                    Ok((page.items, page.next))
                }
            })
            .await?;
            print_as(&list, json, |x| print_deliveries(x))
        }
        Command::Show { pid, json } => show(&engine.executor(), &pid, json).await,
        Command::Act {
            action,
            pid,
            tid,
            vars,
        } => {
            let vars = parse_vars(&vars)?;
            let exec = engine.executor();
            if action == "push" {
                let tasks = exec.tasks(&pid).await.map_err(Failure::action)?;
                let tid = pick_step(&tasks, &pid, &tid)?;
                exec.push(&pid, &tid, vars).await.map_err(Failure::action)?;
                println!("ok: push {pid} {tid}");
                return Ok(0);
            }
            let a = action
                .parse::<Action>()
                .map_err(|e| Failure::input(format!("{e} (or push)")))?;
            let tid = task_of(&exec, &pid, &tid).await?;
            exec.act(&pid, &tid, a, vars)
                .await
                .map_err(Failure::action)?;
            println!("ok: {action} {pid} {tid}");
            Ok(0)
        }
        Command::Resume { mode } => resume(engine, mode).await,
        Command::Models { json } => {
            let models = engine.executor().models().await.map_err(Failure::engine)?;
            print_as(&models, json, |x| print_models(x))
        }
        // `dispatch` runs these itself (they need their own engine).
        Command::Run { .. }
        | Command::Test { .. }
        | Command::Serve { .. }
        | Command::Cluster(_)
        | Command::Token(_)
        | Command::Completions { .. } => {
            unreachable!("run and test are dispatched before an engine is opened")
        }
    }
}

/// The virtual clock of a scripted run (`--auto`, `--answers`): timers
/// fire when the run is otherwise idle instead of on wall time.
fn scripted(mode: &AnswerMode) -> Option<ManualClock> {
    (mode.auto || mode.answers.is_some()).then(|| ManualClock::new(SystemClock.now_millis()))
}

fn mode_of(mode: &AnswerMode) -> Result<Mode, Failure> {
    Ok(if mode.auto {
        Mode::Auto
    } else if let Some(f) = &mode.answers {
        Mode::Script(AnswerFile::read(f)?)
    } else {
        use tokio::io::AsyncBufReadExt;
        Mode::Ask(Box::new(
            tokio::io::BufReader::new(tokio::io::stdin()).lines(),
        ))
    })
}

async fn resume(engine: &Engine, mode: AnswerMode) -> Result<u8, Failure> {
    let answer_mode = mode_of(&mode)?;
    let exec = engine.executor();
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    engine
        .resume()
        .await
        .map_err(|e| Failure::run(format!("cannot resume: {e}")))?;
    let mut roots = Vec::new();
    for state in [
        TaskState::None,
        TaskState::Ready,
        TaskState::Running,
        TaskState::Pending,
        TaskState::Interrupt,
    ] {
        for p in exec
            .processes(Some(state), None)
            .await
            .map_err(Failure::engine)?
        {
            roots.push(p.pid);
        }
    }
    if roots.is_empty() {
        if !mode.json {
            println!("nothing to resume: every process in the store has ended");
        }
        return Ok(0);
    }
    let mut driver = Driver::new(engine, answer_mode, mode.json, None);
    for pid in &roots {
        driver.answer_waiting(pid).await?;
    }
    let reports = driver.drive(engine, &mut rx, roots).await?;
    Ok(reports.iter().map(|r| driver.print(r)).max().unwrap_or(0))
}

async fn ps(
    exec: &Executor,
    state: Option<String>,
    model: Option<String>,
    json: bool,
) -> Result<u8, Failure> {
    let state = state
        .as_deref()
        .map(crate::query::parse_state)
        .transpose()?;
    let list = exec
        .processes(state, model.as_deref())
        .await
        .map_err(Failure::engine)?;
    print_as(&list, json, |x| print_processes(x))
}

async fn show(exec: &Executor, pid: &str, json: bool) -> Result<u8, Failure> {
    let info = exec.process(pid).await.map_err(Failure::action)?;
    let tasks = exec.tasks(pid).await.map_err(Failure::action)?;
    if json {
        print_json(&serde_json::json!({"process": info, "tasks": tasks}))?;
        return Ok(0);
    }
    print_process(&info, &tasks);
    Ok(0)
}

/// The task `id` names in process `pid`: a task id, or the id of a node
/// with exactly one task still waiting (what the interrupt prompt shows
/// first). Several waiting tasks of the node are bad input listing them.
async fn task_of(exec: &Executor, pid: &str, id: &str) -> Result<String, Failure> {
    let tasks = exec.tasks(pid).await.map_err(Failure::action)?;
    pick_task(&tasks, pid, id)
}
