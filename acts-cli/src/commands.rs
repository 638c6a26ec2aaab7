//! The commands: open the store and engine, then run, deploy, start,
//! list, show, act or resume.

use std::time::{Duration, Instant};

use acts::{ChannelOptions, Clock, Engine, ManualClock, SystemClock, TaskState};

use crate::answers::{AnswerFile, parse_vars};
use crate::cli::{AnswerMode, CallCommand, Cli, ClusterCommand, Command};
use crate::driver::{Driver, Mode};
use crate::failure::Failure;
use crate::local::Local;
use crate::report::print_report;
use crate::session::{RunSpec, open_engine, run_model};

/// Runs the command; returns the exit code. One arm per command: a new
/// command that is not wired here does not compile.
pub async fn dispatch(args: Cli) -> Result<u8, Failure> {
    let server = args.server.as_deref();
    let token = args.token.as_deref();
    match args.command {
        Command::Call(call) => match server {
            Some(server) => crate::client::run(server, token, call, args.strict).await,
            None => {
                let packages = packages_of(&args.config)?;
                let engine = open_engine(&args.store, None, &packages).await?;
                let code = on_store(&engine, call, args.strict).await;
                engine.close().await;
                code
            }
        },
        Command::Token(t) => crate::token::run(t),
        Command::Backup { to, json } => match server {
            Some(server) => crate::backup::backup_on_server(server, token, &to, json).await,
            None => crate::backup::backup(&args.store, &to, json).await,
        },
        Command::Restore { from, json } => {
            on_the_store_only(server, "restore")?;
            crate::backup::restore(&args.store, &from, json).await
        }
        Command::Export { to, json } => {
            on_the_store_only(server, "export")?;
            crate::export::export(&args.store, &to, json).await
        }
        Command::Import { from, json } => {
            on_the_store_only(server, "import")?;
            crate::export::import(&args.store, &from, json).await
        }
        Command::Cluster(ClusterCommand::Status { json }) => {
            crate::cluster::status(server, token, json).await
        }
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "acts", &mut std::io::stdout());
            Ok(0)
        }
        Command::Openapi => {
            print!("{}", acts_server::openapi_json_text());
            Ok(0)
        }
        Command::Run {
            model,
            deploy,
            vars,
            mode,
        } => {
            on_the_store_only(server, "run")?;
            let packages = packages_of(&args.config)?;
            let answer_mode = mode_of(&mode)?;
            let vars = parse_vars(&vars)?;
            let clock = scripted(&mode);
            let engine = open_engine(&args.store, clock.clone(), &packages).await?;
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
        Command::Test { paths, json } => {
            on_the_store_only(server, "test")?;
            crate::testcmd::run(&paths, json, &packages_of(&args.config)?).await
        }
        Command::Resume { mode } => {
            on_the_store_only(server, "resume")?;
            let packages = packages_of(&args.config)?;
            let engine = open_engine(&args.store, None, &packages).await?;
            let code = resume(&engine, mode).await;
            engine.close().await;
            code
        }
        Command::Serve {
            listen,
            node,
            lease_ttl,
            cluster,
            partitions,
            advertise,
            grpc,
            backup_dir,
            ..
        } => {
            on_the_store_only(server, "serve")?;
            let config = crate::config::ConfigFile::read(args.config.as_deref())?;
            let at = crate::serve::Listen {
                http: listen.as_deref(),
                grpc: grpc.as_deref(),
            };
            match cluster {
                Some(cluster) => {
                    let join = crate::cluster::Join {
                        url: &cluster,
                        node: node.as_deref().unwrap_or_default(),
                        partitions,
                        advertise: advertise.as_deref(),
                        lease_ttl: std::time::Duration::from_secs(lease_ttl.max(1)),
                    };
                    crate::cluster::serve(join, at, &config).await
                }
                None => {
                    let lease = node.map(|id| {
                        let mut v = acts::LeaseConfig::new(&id);
                        v.ttl = std::time::Duration::from_secs(lease_ttl.max(1));
                        v
                    });
                    crate::serve::run(&args.store, at, &config, lease, backup_dir.as_deref()).await
                }
            }
        }
    }
}

/// The packages the config file (`--config`, `ACTS_CONFIG`) sets up.
fn packages_of(
    config: &Option<std::path::PathBuf>,
) -> Result<acts_packages::PackagesConfig, Failure> {
    Ok(crate::config::ConfigFile::read(config.as_deref())?.packages())
}

/// Refuses `--server` for a command that works on a store only.
fn on_the_store_only(server: Option<&str>, name: &str) -> Result<(), Failure> {
    match server {
        None => Ok(()),
        Some(_) => Err(Failure::input(format!(
            "`{name}` works on a store, not through a server; with --server use deploy, start, \
             ps, tasks, deliveries, show, act, control, migrate, bulk, models or versions (or \
             stop the server to use the store)"
        ))),
    }
}

/// A command of `calls.rs` on the engine in this process.
async fn on_store(engine: &Engine, call: CallCommand, strict: bool) -> Result<u8, Failure> {
    // An answer or a control may end a process, freeing a place or a
    // concurrency key's slot another process waits for.
    let may_free = matches!(call, CallCommand::Act { .. } | CallCommand::Control { .. });
    let code = crate::calls::call(&Local(engine.executor()), call, strict).await;
    if may_free && code.is_ok() {
        start_freed(engine).await;
    }
    code
}

/// How long a one-shot command waits for the processes it let start to
/// reach a wait before it closes the store (they continue at the next
/// `acts resume` or `acts serve` if they do not).
const FREED_START_WAIT: Duration = Duration::from_secs(10);

/// Starts the parked processes the command made room for (the next of a
/// concurrency key whose holder ended, or one waiting for a place), as a
/// server would at once, and lets them run to their first wait.
async fn start_freed(engine: &Engine) {
    if let Err(e) = engine.runtime().start_parked().await {
        eprintln!("acts: warning: cannot start the processes waiting for a place: {e}");
        return;
    }
    let deadline = tokio::time::Instant::now() + FREED_START_WAIT;
    while !engine.runtime().is_idle() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(2)).await;
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
        .runtime()
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
            .proc()
            .list(Some(state), None)
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
