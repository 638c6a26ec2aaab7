//! How a server is set up ([`ServerOptions`]: who may call it, the bounds
//! of its live streams) and the largest request body it takes.
//!
//! May use: `auth` and `stream`.

use crate::auth::Auth;
use crate::stream::{StreamLimits, Streams};

/// The largest request body accepted (a model text, a start's vars, an
/// action's options): 2 MiB. The engine's own limits (model size, vars
/// size) apply below it, each with its own error.
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// How a server is set up: who may call it, and the bounds of its live
/// streams. Clones share one stream budget: every router built from the
/// same options (a cluster node's partitions) counts its streams, and the
/// bytes they queue, against the same limits.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub(crate) auth: Auth,
    pub(crate) streams: std::sync::Arc<Streams>,
    pub(crate) backup_dir: Option<std::path::PathBuf>,
}

impl ServerOptions {
    /// Requests act for the principals of `auth` (none: every request is
    /// the local admin); live streams are bounded by `limits`.
    pub fn new(auth: Auth, limits: StreamLimits) -> Self {
        Self {
            auth,
            streams: Streams::new(limits),
            backup_dir: None,
        }
    }

    /// Lets admins back up the store through the API (`POST
    /// /api/v1/backups`) into `dir` (a folder on the server's machine;
    /// each copy a new name in it).
    pub fn with_backup_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.backup_dir = Some(dir.into());
        self
    }

    /// Who may call the server.
    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    /// The bounds of live streams.
    pub fn stream_limits(&self) -> StreamLimits {
        self.streams.limits()
    }
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self::new(Auth::default(), StreamLimits::default())
    }
}

impl From<Auth> for ServerOptions {
    fn from(auth: Auth) -> Self {
        Self::new(auth, StreamLimits::default())
    }
}
