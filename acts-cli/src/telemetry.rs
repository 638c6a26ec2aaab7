//! The trace export of this `acts serve` (`--otlp-endpoint`): set once by
//! `main` before the engine opens, read where engines are built and where
//! the start-up notes are written.

use std::sync::OnceLock;

static TELEMETRY: OnceLock<acts_server::Telemetry> = OnceLock::new();

/// Exports traces with `t`.
pub(crate) fn use_telemetry(t: acts_server::Telemetry) {
    let _ = TELEMETRY.set(t);
}

/// Where the engine's task spans go: the serve's trace export, if on.
pub(crate) fn span_export() -> Option<acts::SpanExport> {
    TELEMETRY.get().map(acts_server::Telemetry::span_export)
}

/// Where traces go, for the start-up notes (`None`: traces are off).
pub(crate) fn note() -> Option<String> {
    TELEMETRY.get().map(acts_server::Telemetry::note)
}
