//! [`AppState`]: what every handler shares.
//!
//! May use: the facade `acts`, `metrics` and the stream budget (`stream`).

use std::sync::Arc;

use acts::Engine;

use crate::metrics::Metrics;
use crate::stream::Streams;

/// What every handler shares (cloned per request: every field is a handle).
#[derive(Clone)]
pub(crate) struct AppState {
    pub engine: Engine,
    pub metrics: Metrics,
    /// Whether access tokens are configured (the dashboard offers to sign
    /// out only then).
    pub tokens: bool,
    /// The bounds and the accounts of live streams.
    pub streams: Arc<Streams>,
    /// Where `POST /api/v1/backups` writes its copies (`None`: off).
    pub backup_dir: Option<std::path::PathBuf>,
}
