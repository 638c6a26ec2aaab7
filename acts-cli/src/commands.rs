//! The commands: open the store and engine, then run, deploy, start,
//! list, show, act or resume.

use std::path::Path;

use acts::{
    Action, ChannelOptions, Engine, EngineError, Executor, OpenStoreError, TaskInfo, TaskState,
};
use serde_json::Value;

use crate::Failure;
use crate::answers::{AnswerFile, parse_vars};
use crate::cli::{AnswerMode, Cli, Command};
use crate::driver::{Driver, Mode};

/// Runs the command; returns the exit code.
pub async fn dispatch(args: Cli) -> Result<u8, Failure> {
    let engine = open_engine(&args.store).await?;
    let code = match args.command {
        Command::Run {
            model,
            deploy,
            vars,
            mode,
        } => run(&engine, &model, &deploy, &vars, mode).await,
        Command::Deploy { models } => {
            for m in &models {
                let info = deploy_file(&engine.executor(), m).await?;
                println!("deployed {} (revision {})", info.id, info.revision);
            }
            Ok(0)
        }
        Command::Start { model_id, vars } => {
            let vars = parse_vars(&vars)?;
            let info = engine
                .executor()
                .start(&model_id, vars)
                .await
                .map_err(action_failure)?;
            println!("{} {}", info.pid, info.state.as_str());
            Ok(0)
        }
        Command::Ps { state, model } => ps(&engine.executor(), state, model).await,
        Command::Show { pid } => show(&engine.executor(), &pid).await,
        Command::Act {
            action,
            pid,
            tid,
            vars,
        } => {
            let name = if action == "set_vars" {
                "set_process_vars"
            } else {
                action.as_str()
            };
            let a = Action::from_name(name).ok_or_else(|| {
                Failure::input(format!(
                    "unknown action '{action}' (use complete, submit, back, cancel, abort, skip, error, remove or set_vars)"
                ))
            })?;
            let vars = parse_vars(&vars)?;
            engine
                .executor()
                .act(&pid, &tid, a, vars)
                .await
                .map_err(action_failure)?;
            println!("ok: {action} {pid} {tid}");
            Ok(0)
        }
        Command::Resume { mode } => resume(&engine, mode).await,
        Command::Models => {
            for m in engine
                .executor()
                .models()
                .await
                .map_err(|e| Failure::run(e.to_string()))?
            {
                println!(
                    "{:<24} {:<10} rev {:<3} {}",
                    m.id, m.ver, m.revision, m.name
                );
            }
            Ok(0)
        }
    };
    engine.close().await;
    code
}

async fn open_engine(url: &str) -> Result<Engine, Failure> {
    let store = acts::open_store(url).await.map_err(|e| match e {
        OpenStoreError::Store(_) => Failure::run(format!("cannot open store '{url}': {e}")),
        other => Failure::input(other.to_string()),
    })?;
    Engine::builder()
        .store(store)
        .resume_on_start(false)
        .start()
        .await
        .map_err(|e| Failure::run(format!("cannot start the engine: {e}")))
}

/// An executor error as a failure: the caller's mistakes are bad input.
fn action_failure(e: EngineError) -> Failure {
    match e {
        EngineError::Action(_)
        | EngineError::ProcessNotFound(_)
        | EngineError::TaskNotFound { .. }
        | EngineError::ModelNotFound(_)
        | EngineError::Inputs { .. }
        | EngineError::BadPid { .. }
        | EngineError::Duplicated(_) => Failure::input(e.to_string()),
        other => Failure::run(other.to_string()),
    }
}

async fn deploy_file(exec: &Executor, path: &Path) -> Result<acts::ModelInfo, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::input(format!("cannot read model '{}': {e}", path.display())))?;
    exec.deploy_yaml(&text).await.map_err(|e| match e {
        EngineError::Model(_) => Failure::input(format!("{}: {e}", path.display())),
        other => Failure::run(format!("{}: {other}", path.display())),
    })
}

fn mode_of(mode: &AnswerMode) -> Result<Mode, Failure> {
    Ok(if mode.auto {
        Mode::Auto
    } else if let Some(f) = &mode.answers {
        Mode::File(AnswerFile::read(f)?)
    } else {
        use tokio::io::AsyncBufReadExt;
        Mode::Ask(Box::new(
            tokio::io::BufReader::new(tokio::io::stdin()).lines(),
        ))
    })
}

async fn run(
    engine: &Engine,
    model: &Path,
    extra: &[std::path::PathBuf],
    vars: &[String],
    mode: AnswerMode,
) -> Result<u8, Failure> {
    let answer_mode = mode_of(&mode)?;
    let vars = parse_vars(vars)?;
    let exec = engine.executor();
    for d in extra {
        deploy_file(&exec, d).await?;
    }
    let info = deploy_file(&exec, model).await?;
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let started = exec.start(&info.id, vars).await.map_err(action_failure)?;
    let mut driver = Driver::new(exec, answer_mode, mode.json);
    let reports = driver.drive(engine, &mut rx, vec![started.pid]).await?;
    Ok(reports.iter().map(|r| driver.print(r)).max().unwrap_or(0))
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
            .map_err(|e| Failure::run(e.to_string()))?
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
    let mut driver = Driver::new(exec, answer_mode, mode.json);
    for pid in &roots {
        driver.answer_waiting(pid).await?;
    }
    let reports = driver.drive(engine, &mut rx, roots).await?;
    Ok(reports.iter().map(|r| driver.print(r)).max().unwrap_or(0))
}

async fn ps(exec: &Executor, state: Option<String>, model: Option<String>) -> Result<u8, Failure> {
    let state = match state {
        Some(s) => Some(
            TaskState::ALL
                .into_iter()
                .find(|x| x.as_str() == s)
                .ok_or_else(|| {
                    let all: Vec<&str> = TaskState::ALL.iter().map(|s| s.as_str()).collect();
                    Failure::input(format!("unknown state '{s}' (one of: {})", all.join(", ")))
                })?,
        ),
        None => None,
    };
    let list = exec
        .processes(state, model.as_deref())
        .await
        .map_err(|e| Failure::run(e.to_string()))?;
    println!("{:<24} {:<16} {:<12} {:>10}", "PID", "MODEL", "STATE", "MS");
    for p in list {
        let ms = if p.end_time > 0 {
            (p.end_time - p.start_time).to_string()
        } else {
            "-".into()
        };
        println!(
            "{:<24} {:<16} {:<12} {:>10}",
            p.pid,
            p.model_id,
            p.state.as_str(),
            ms
        );
    }
    Ok(0)
}

async fn show(exec: &Executor, pid: &str) -> Result<u8, Failure> {
    let info = exec.process(pid).await.map_err(action_failure)?;
    let tasks = exec.tasks(pid).await.map_err(action_failure)?;
    println!(
        "process {} of model {}: {}",
        info.pid,
        info.model_id,
        info.state.as_str()
    );
    if let Some((ecode, message)) = &info.err {
        println!("error: {ecode} {message}");
    }
    fn print(tasks: &[TaskInfo], parent: Option<&str>, depth: usize) {
        for t in tasks.iter().filter(|t| t.parent.as_deref() == parent) {
            let time = match (t.start_time, t.end_time) {
                (0, _) => String::new(),
                (s, 0) => format!(" started {s}"),
                (s, e) => format!(" {} ms", e - s),
            };
            let data: serde_json::Map<String, Value> = t
                .data
                .iter()
                .filter(|(k, _)| !k.starts_with("__"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let key = t
                .key
                .as_deref()
                .map(|k| format!(" [{k}]"))
                .unwrap_or_default();
            println!(
                "{}{} {}{key} {} ({}){time} {}",
                "  ".repeat(depth),
                t.kind,
                t.nid,
                t.state.as_str(),
                t.tid,
                Value::Object(data)
            );
            print(tasks, Some(&t.tid), depth + 1);
        }
    }
    print(&tasks, None, 0);
    Ok(0)
}
