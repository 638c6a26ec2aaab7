//! [`ActPackage`]: application packages.
//!
//! An application registers a package with
//! [`EngineBuilder::package`](crate::engine::EngineBuilder::package). Acts that
//! use it are checked against its params schema at deploy; when one runs,
//! the act stays `running` while the engine calls [`ActPackage::run`] off
//! the process's lane, then completes the act with the returned vars (or
//! fails it with the returned error, which the step's `catches` can
//! handle). After a crash, a package that was running is called again
//! (at least once): make `run` idempotent. When the act ends some other
//! way while `run` runs (a client answers, skips or aborts it, or its
//! process ends), the run's future is dropped: stop the work on drop.

use async_trait::async_trait;
use serde_json::Value;

use crate::model::Vars;
use crate::package::PackageDefinition;

/// What a package run sees.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PackageContext {
    /// Process id.
    pub pid: String,
    /// Act task id.
    pub tid: String,
    /// The act's params, with `${{ }}` substituted.
    pub params: Value,
    /// The act's data when it started.
    pub inputs: Vars,
}

/// A failed package run: the act fails with this code and message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{ecode}: {message}")]
#[non_exhaustive]
pub struct PackageFailure {
    /// Error code (what `catches` match with `on`).
    pub ecode: String,
    /// What went wrong.
    pub message: String,
}

impl PackageFailure {
    /// A failure with `ecode` and `message`.
    pub fn new(ecode: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            ecode: ecode.into(),
            message: message.into(),
        }
    }
}

/// An application package (see the module docs).
#[async_trait]
pub trait ActPackage: Send + Sync + 'static {
    /// Its definition: id, params schema (checked at deploy) and catalog.
    /// `run_as` is ignored: application packages always run as functions.
    fn definition(&self) -> PackageDefinition;

    /// Runs one act: the returned vars are folded into the act as it
    /// completes.
    async fn run(&self, ctx: PackageContext) -> Result<Vars, PackageFailure>;
}

/// A shared package is a package (an application can hand the same one to
/// several engines, e.g. one per cluster partition).
#[async_trait]
impl<T: ActPackage + ?Sized> ActPackage for std::sync::Arc<T> {
    fn definition(&self) -> PackageDefinition {
        (**self).definition()
    }

    async fn run(&self, ctx: PackageContext) -> Result<Vars, PackageFailure> {
        (**self).run(ctx).await
    }
}
