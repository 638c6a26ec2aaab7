//! OpenTelemetry: a trace per process and a span per request, exported
//! over OTLP (`acts serve --otlp-endpoint`, or the standard
//! `OTEL_EXPORTER_OTLP_*` variables).
//!
//! - `export.rs`: the exporter (gRPC or HTTP/protobuf), the batch
//!   processor and the tracer provider ([`Telemetry`]), and the
//!   `tracing` layer that turns request and group-commit spans into
//!   OpenTelemetry spans.
//! - `task_spans.rs`: the engine's task spans ([`acts::TaskSpan`], one
//!   per ended workflow, step, branch and act) as OpenTelemetry spans,
//!   with the ids the engine derived (so a parent's id survives a
//!   restart).
//! - `requests.rs`: the span of each HTTP and gRPC request, continuing the
//!   caller's W3C `traceparent`, and the caller's context handed to the
//!   routes that start a process or answer a task ([`CallerTrace`]).
//! - `http_client.rs`: the OTLP/HTTP exporter's client (reqwest).
//!
//! May use: the facade `acts`, opentelemetry, opentelemetry_sdk,
//! opentelemetry-otlp, opentelemetry-http, tracing-opentelemetry,
//! tracing-subscriber, reqwest, axum, tower, http, bytes.

mod export;
mod http_client;
mod requests;
mod task_spans;

pub use export::{OTEL_TARGET, OtlpConfig, OtlpProtocol, Telemetry, TelemetryError};
pub(crate) use requests::{CallerTrace, GrpcTraceLayer, trace_http_request};
