//! The commands: open the store and engine, then run, deploy, start,
//! list, show, act or resume.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use acts::{
    Action, ChannelOptions, Clock, Engine, EngineError, Executor, ManualClock, OpenStoreError,
    StoreErrorKind as ErrorKind, SystemClock, TaskInfo, TaskState,
};
use serde_json::Value;

use crate::Failure;
use crate::answers::{AnswerFile, parse_vars};
use crate::cli::{AnswerMode, Cli, Command};
use crate::driver::{Driver, Mode, Report, print_report};

/// Runs the command; returns the exit code.
pub async fn dispatch(args: Cli) -> Result<u8, Failure> {
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
            };
            let report = run_model(&engine, &run, answer_mode, clock).await;
            engine.close().await;
            let report = report?;
            print_report(&report, mode.json, started.elapsed().as_millis());
            if !mode.json && report.exit_code() == 2 {
                // Refused runs also say why on stderr.
                eprintln!(
                    "acts: {}",
                    report.error.clone().unwrap_or_else(|| report.state.clone())
                );
            }
            Ok(report.exit_code())
        }
        Command::Test { paths, json } => crate::testcmd::run(&paths, json).await,
        other => {
            let engine = open_engine(&args.store, None).await?;
            let code = other_command(&engine, other).await;
            engine.close().await;
            code
        }
    }
}

async fn other_command(engine: &Engine, command: Command) -> Result<u8, Failure> {
    match command {
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
        Command::Resume { mode } => resume(engine, mode).await,
        Command::Models => {
            for m in engine.executor().models().await.map_err(Failure::engine)? {
                println!(
                    "{:<24} {:<10} rev {:<3} {}",
                    m.id, m.ver, m.revision, m.name
                );
            }
            Ok(0)
        }
        // `dispatch` runs these itself (they need their own engine).
        Command::Run { .. } | Command::Test { .. } => {
            unreachable!("run and test are dispatched before an engine is opened")
        }
    }
}

/// The virtual clock of a scripted run (`--auto`, `--answers`): timers
/// fire when the run is otherwise idle instead of on wall time.
fn scripted(mode: &AnswerMode) -> Option<ManualClock> {
    (mode.auto || mode.answers.is_some()).then(|| ManualClock::new(SystemClock.now_millis()))
}

pub(crate) async fn open_engine(url: &str, clock: Option<ManualClock>) -> Result<Engine, Failure> {
    let store = acts::open_store(url).await.map_err(|e| match e {
        OpenStoreError::Store(ref s)
            if matches!(s.kind(), ErrorKind::Corruption | ErrorKind::InvalidInput) =>
        {
            Failure::input(format!("cannot open store '{url}': {e}"))
        }
        OpenStoreError::Store(ref s) if s.kind() == ErrorKind::Conflict => Failure::run(format!(
            "cannot open store '{url}': it is in use: {}",
            crate::owner::describe_holder(url)
        )),
        OpenStoreError::Store(_) => Failure::run(format!("cannot open store '{url}': {e}")),
        other => Failure::input(other.to_string()),
    })?;
    crate::owner::hold(url);
    let mut builder = Engine::builder().store(store).resume_on_start(false);
    if let Some(c) = clock {
        builder = builder.clock(Arc::new(c));
    }
    builder.start().await.map_err(|e| {
        let damaged = e.is_damaged_store();
        let f = format!("cannot start the engine: {e}");
        if damaged {
            Failure::input(f)
        } else {
            Failure::run(f)
        }
    })
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
        | EngineError::TooLarge { .. }
        | EngineError::Duplicated(_) => Failure::input(e.to_string()),
        other => Failure::engine(other),
    }
}

/// Deploys a model file; a model that does not parse or validate is bad
/// input naming the file.
pub(crate) async fn deploy_file(exec: &Executor, path: &Path) -> Result<acts::ModelInfo, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::input(format!("cannot read model '{}': {e}", path.display())))?;
    exec.deploy_yaml(&text).await.map_err(|e| match e {
        EngineError::Model(_) | EngineError::TooLarge { .. } => {
            Failure::input(format!("{}: {e}", path.display()))
        }
        other => Failure::run(format!("{}: {other}", path.display())),
    })
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

/// What one run deploys and starts.
pub(crate) struct RunSpec<'a> {
    /// The model to start.
    pub model: &'a Path,
    /// Models to deploy first.
    pub deploy: &'a [PathBuf],
    /// Start vars.
    pub vars: acts::Vars,
    /// Whether progress is silenced.
    pub json: bool,
}

/// Deploys, starts and drives one model. A model that does not deploy is
/// reported `invalid`, a refused start `rejected` (both exit 2); errors of
/// the tool itself are `Err`.
pub(crate) async fn run_model(
    engine: &Engine,
    run: &RunSpec<'_>,
    mode: Mode,
    clock: Option<ManualClock>,
) -> Result<Report, Failure> {
    let exec = engine.executor();
    let model_name = run.model.display().to_string();
    for d in run.deploy {
        if let Err(f) = deploy_file(&exec, d).await {
            return refused_or(f, "invalid", &model_name);
        }
    }
    let info = match deploy_file(&exec, run.model).await {
        Ok(i) => i,
        Err(f) => return refused_or(f, "invalid", &model_name),
    };
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let started = match exec.start(&info.id, run.vars.clone()).await {
        Ok(p) => p,
        Err(e) => return refused_or(action_failure(e), "rejected", &info.id),
    };
    let mut driver = Driver::new(engine, mode, run.json, clock);
    let mut reports = driver.drive(engine, &mut rx, vec![started.pid]).await?;
    reports
        .pop()
        .ok_or_else(|| Failure::run("the run produced no report"))
}

/// Bad input becomes a refused report; other failures stay errors.
fn refused_or(f: Failure, state: &str, model: &str) -> Result<Report, Failure> {
    if f.code == 2 {
        Ok(Report::refused(state, model, f.message))
    } else {
        Err(f)
    }
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
        .map_err(Failure::engine)?;
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

/// An engine time (ms since the epoch) as UTC date and time.
fn when(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
        .unwrap_or_else(|| ms.to_string())
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
                (s, 0) => format!(" since {}", when(s)),
                (s, e) => format!(" {} – {} ({} ms)", when(s), when(e), e - s),
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
