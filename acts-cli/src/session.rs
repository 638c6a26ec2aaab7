//! Opening a store and an engine for one command, deploying model files,
//! and running one model to its end (shared by `acts run` and `acts test`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use acts::{
    ChannelOptions, Engine, EngineError, Executor, ManualClock, OpenStoreError,
    StoreErrorKind as ErrorKind,
};

use acts_packages::PackagesConfig;

use crate::driver::{Driver, Mode};
use crate::failure::Failure;
use crate::report::Report;

pub(crate) async fn open_engine(
    url: &str,
    clock: Option<ManualClock>,
    packages: &PackagesConfig,
) -> Result<Engine, Failure> {
    open_engine_with(url, clock, false, None, packages).await
}

/// [`open_engine`], resuming the store's processes in the background when
/// `resume` (a long-running service does; the one-shot commands drive what
/// they need themselves), owning the store by `lease` if given; with the
/// packages that reach outside (`acts.core.http`, `acts.app.shell`)
/// configured by `packages`.
/// Opens the store at `url` (nothing more: no engine), with the errors a
/// user can act on (a store in use names who holds it).
pub(crate) async fn open_store(url: &str) -> Result<Arc<dyn acts::KvStore>, Failure> {
    let shown = acts::redacted_url(url);
    acts::open_store(url).await.map_err(|e| match e {
        OpenStoreError::Store(ref s)
            if matches!(s.kind(), ErrorKind::Corruption | ErrorKind::InvalidInput) =>
        {
            Failure::input(format!("cannot open store '{shown}': {e}"))
        }
        OpenStoreError::Store(ref s) if s.kind() == ErrorKind::Conflict => Failure::run(format!(
            "cannot open store '{shown}': it is in use: {}",
            crate::owner::describe_holder(url)
        )),
        OpenStoreError::Store(_) => Failure::run(format!("cannot open store '{shown}': {e}")),
        other => Failure::input(other.to_string()),
    })
}

pub(crate) async fn open_engine_with(
    url: &str,
    clock: Option<ManualClock>,
    resume: bool,
    lease: Option<acts::LeaseConfig>,
    packages: &PackagesConfig,
) -> Result<Engine, Failure> {
    let store = open_store(url).await?;
    crate::owner::hold(url);
    let mut builder = Engine::builder()
        .store(store)
        .resume_on_start(resume)
        .config({
            let mut v = acts::EngineConfig::default();
            v.lease = lease;
            v.spans = crate::telemetry::span_export();
            v
        });
    if let Some(c) = clock {
        builder = builder.clock(Arc::new(c));
    }
    let builder = acts_packages::install(builder, packages)
        .map_err(|e| Failure::input(format!("the config: {e}")))?;
    builder.start().await.map_err(|e| {
        if let acts::EngineError::LeaseHeld { .. } = e {
            return Failure::run(format!(
                "cannot start the engine: {e} (while it serves, use its API: --server URL)"
            ));
        }
        let damaged = e.is_damaged_store();
        let f = format!("cannot start the engine: {e}");
        if damaged {
            Failure::input(f)
        } else {
            Failure::run(f)
        }
    })
}

/// Deploys a model file; a model that does not parse or validate is bad
/// input naming the file. Its warnings go to stderr, each naming the file;
/// with `strict`, a model with warnings is bad input and is not deployed.
pub(crate) async fn deploy_file(
    exec: &Executor,
    path: &Path,
    strict: bool,
) -> Result<acts::ModelInfo, Failure> {
    let text = read_model_file(path, strict)?;
    let info = exec.model().deploy_yaml(&text).await.map_err(|e| match e {
        EngineError::Model(_) | EngineError::TooLarge { .. } => {
            Failure::input(format!("{}: {e}", path.display()))
        }
        other => Failure::run(format!("{}: {other}", path.display())),
    })?;
    print_warnings(path, &info);
    Ok(info)
}

/// The text of model file `path`; with `strict`, a model with warnings is
/// bad input (checked here, before anything is deployed).
pub(crate) fn read_model_file(path: &Path, strict: bool) -> Result<String, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::input(format!("cannot read model '{}': {e}", path.display())))?;
    if strict && let Ok(loaded) = acts::Workflow::load_yaml(&text) {
        let warnings = acts::lint(&loaded.workflow, &loaded.unknown_keys);
        if !warnings.is_empty() {
            return Err(Failure::input(format!(
                "{}: not deployed (--strict): {}",
                path.display(),
                warnings.join("; ")
            )));
        }
    }
    Ok(text)
}

/// The warnings a deployed model came with, each naming its file.
pub(crate) fn print_warnings(path: &Path, info: &acts::ModelInfo) {
    for w in &info.warnings {
        eprintln!("acts: warning: {}: {w}", path.display());
    }
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
    /// Whether a model with warnings is refused.
    pub strict: bool,
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
        if let Err(f) = deploy_file(&exec, d, run.strict).await {
            return refused_or(f, "invalid", &model_name);
        }
    }
    let info = match deploy_file(&exec, run.model, run.strict).await {
        Ok(i) => i,
        Err(f) => return refused_or(f, "invalid", &model_name),
    };
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let started = match exec.proc().start(&info.id, run.vars.clone()).await {
        Ok(p) => p,
        Err(e) => return refused_or(Failure::action(e), "rejected", &info.id),
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
