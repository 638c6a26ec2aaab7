//! # acts-cli: the `acts` command-line tool
//!
//! Runs workflows from YAML files on a durable store in one command
//! (`acts run MODEL.yml --auto`), and inspects and drives the processes of
//! a store (`deploy`, `start`, `ps`, `show`, `act`, `resume`, `models`),
//! serves the HTTP API over a store (`serve`, from `acts-server`), and
//! backs a store up or moves it to another backend (`backup`, `restore`,
//! `export`, `import`).
//!
//! **Layering rule:** it holds no engine logic of its own. Of the
//! workspace it depends on the facade `acts` (the engine and the stores),
//! `acts-server` (`acts serve`, the OpenAPI document), `acts-cluster`
//! (`acts serve --cluster`), `acts-packages` (`acts.core.http`,
//! `acts.app.shell`) and `acts-store` (the pairs `acts export` and `acts
//! import` move, read through the store contract); of the rest on clap,
//! tokio, serde, base64 and sha2 (the export file), reqwest (the
//! client of `--server`), axum (the test servers of `acts test`) and
//! tracing-subscriber. Its files use no room rules (the crate is flat); the
//! layout test keeps them free of import cycles.
//!
//! Where to start reading: [`cli`] (the commands and flags), then
//! `commands.rs` (`dispatch`: one arm per command), `calls.rs` (the
//! commands that work on a store and through a server alike), `driver.rs`
//! (driving processes: answering interrupts, the report).
//!
//! Exit codes: 0 — the process completed; 1 — it ended in error, was
//! aborted, or an action failed; 2 — bad input (unreadable or invalid
//! model, bad flag, bad vars); 130 — stopped by Ctrl-C (`acts resume`
//! continues).

mod answers;
mod api;
mod backup;
mod bulk;
mod calls;
mod cli;
mod cli_bulk;
mod client;
mod cluster;
mod commands;
mod config;
mod doctests;
mod driver;
mod export;
mod failure;
mod local;
mod mockserve;
mod output;
mod owner;
mod query;
mod report;
mod serve;
mod session;
mod telemetry;
mod testcmd;
mod token;

use std::process::ExitCode;

use clap::Parser;

use crate::failure::Failure;

/// A fast general-purpose allocator: the engine allocates many small
/// rows and messages per transition.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Output piped into a reader that stops early (`acts ps | head`) ends the
/// program quietly, as other command-line tools do, instead of with a
/// panic report.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if text.contains("Broken pipe") {
            // 128 + SIGPIPE, what a shell reports for it.
            std::process::exit(141);
        }
        if info.location().is_some_and(|l| l.file().contains("/redb-")) {
            // redb panics on some damaged pages; the store catches it and
            // reports the damaged file as an error, which is printed.
            return;
        }
        default(info);
    }));
}

/// Logs to stderr: `RUST_LOG` when set (an env-filter directive), else
/// `--log-level`, else by `-v` count; scripts' `console.*` (target
/// `acts::script`) always shows. `--log-format json` writes one JSON object
/// per event, with the fields of the spans it happened in (a process's
/// `pid` and `model`, a task's `tid` and `nid`).
fn init_logging(
    verbose: u8,
    level: Option<&str>,
    format: cli::LogFormat,
    telemetry: Option<&acts_server::Telemetry>,
) {
    let default = match (level, verbose) {
        (Some(l), _) => l,
        (None, 0) => "warn,acts::script=info",
        (None, 1) => "info",
        (None, 2) => "debug",
        (None, _) => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(default))
        .unwrap_or_else(|_| {
            eprintln!("acts: --log-level '{default}' is not a filter (e.g. info, acts_core=debug); using warn");
            tracing_subscriber::EnvFilter::new("warn")
        });
    // The log filter is the log's own: the trace export (when on) sees
    // its spans whatever the log level.
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let log = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let log = if format == cli::LogFormat::Json {
        log.json()
            .with_current_span(true)
            .with_span_list(true)
            .with_filter(filter)
            .boxed()
    } else {
        // Colours only for a terminal (not in a file or a pipe).
        let colour = std::io::IsTerminal::is_terminal(&std::io::stderr());
        log.with_target(false)
            .without_time()
            .with_ansi(colour)
            .with_filter(filter)
            .boxed()
    };
    // A second initialisation (never in this binary) is not an error worth
    // stopping for.
    let _ = tracing_subscriber::registry()
        .with(log)
        .with(telemetry.map(|t| t.layer()))
        .try_init();
}

fn main() -> ExitCode {
    quiet_on_broken_pipe();
    let args = match cli::Cli::try_parse() {
        Ok(a) => a,
        Err(e) => {
            // Help and version are not errors.
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    // Traces are exported by `acts serve` only (a one-shot command's
    // process outlives it).
    let otlp = match &args.command {
        cli::Command::Serve { otlp_endpoint, .. } => {
            match acts_server::OtlpConfig::from_env(otlp_endpoint.as_deref(), |k| {
                std::env::var(k).ok()
            }) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("acts: --otlp-endpoint: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        _ => None,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("acts: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let telemetry = match otlp.map(|c| {
        let _in_runtime = runtime.enter();
        acts_server::Telemetry::start(&c)
    }) {
        None => None,
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => {
            eprintln!("acts: {e}");
            return ExitCode::from(1);
        }
    };
    init_logging(
        args.verbose,
        args.log_level.as_deref(),
        args.log_format,
        telemetry.as_ref(),
    );
    if let Some(t) = &telemetry {
        telemetry::use_telemetry(t.clone());
    }
    // Ctrl-C stops every command: the command is dropped wherever it is
    // (each transition is one atomic batch, so the store is at a
    // transition boundary, as after a crash), and work still running on
    // the runtime (a script up to its time limit, a read of the terminal)
    // is not waited for beyond a moment.
    // The command runs on a worker, so this thread hears Ctrl-C even while
    // the command is busy (a long transition runs synchronously).
    let outcome = runtime.block_on(async {
        // Listen before the command starts, so that a Ctrl-C at any point
        // after (even while the store is being opened) is heard: the
        // handler is installed on the first poll.
        let mut ctrl_c = std::pin::pin!(tokio::signal::ctrl_c());
        let early = std::future::poll_fn(|cx| {
            std::task::Poll::Ready(ctrl_c.as_mut().poll(cx).is_ready())
        })
        .await;
        let stopped = || match &args.command {
            cli::Command::Import { .. } => Failure::stopped_saying(
                "stopped; the store keeps the batches imported so far: the same `acts import` goes on where it stopped",
            ),
            cli::Command::Export { .. } => Failure::stopped_saying(
                "stopped; no export was written (run it again; a `.NAME.partial` beside it is what was left)",
            ),
            _ => Failure::stopped(),
        };
        if early {
            return Err(stopped());
        }
        // `serve` stops on Ctrl-C/SIGTERM itself, gracefully (it finishes
        // the requests in flight and closes the store).
        let graceful = matches!(args.command, cli::Command::Serve { .. });
        let on_stop = stopped();
        let command = tokio::spawn(commands::dispatch(args));
        if graceful {
            return command
                .await
                .unwrap_or_else(|e| Err(Failure::run(format!("the command failed: {e}"))));
        }
        tokio::select! {
            r = command => r.unwrap_or_else(|e| Err(Failure::run(format!("the command failed: {e}")))),
            _ = ctrl_c => Err(on_stop),
        }
    });
    if let Some(t) = &telemetry {
        // what is queued leaves before the process ends
        t.shutdown();
    }
    runtime.shutdown_timeout(std::time::Duration::from_millis(300));
    owner::release();
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("acts: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}
