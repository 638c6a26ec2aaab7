//! A span per HTTP and gRPC request, continuing the caller's W3C
//! `traceparent`; the caller's context for the routes that start a process
//! or answer a task.

use std::task::{Context as TaskContext, Poll};

use acts::TraceContext;
use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::trace::TraceContextExt;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::export::OTEL_TARGET;

/// The trace context a request runs in: its own span's when traces are
/// exported (so a process started by it is that span's child), else the
/// caller's `traceparent`. In the request's extensions when there is one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallerTrace(pub TraceContext);

impl CallerTrace {
    /// Stores the request's context with what it starts (the start's
    /// vars) or answers (the answer's vars), so the process's trace
    /// continues the caller's, and the act links to its answer.
    pub(crate) fn carry(caller: Option<&Self>, vars: &mut acts::Vars) {
        if let Some(c) = caller {
            vars.insert(
                acts::TRACEPARENT_KEY.to_owned(),
                serde_json::Value::String(c.0.to_traceparent()),
            );
        }
    }
}

fn header_context(headers: &http::HeaderMap) -> Option<TraceContext> {
    headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(TraceContext::parse)
}

/// Starts `span` as the caller's child (when it carries a context) and
/// says which context the request runs in.
fn enter(span: &tracing::Span, caller: Option<TraceContext>) -> Option<TraceContext> {
    if let Some(c) = caller {
        let remote = super::task_spans::span_context(&c, true);
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }
    let cx = span.context();
    let own = cx.span().span_context().clone();
    if own.is_valid() {
        return Some(TraceContext {
            trace_id: own.trace_id().to_bytes(),
            span_id: own.span_id().to_bytes(),
            sampled: own.is_sampled(),
        });
    }
    caller
}

/// The axum middleware: a server span per request, named by its route.
pub(crate) async fn trace_http_request(mut req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let method = req.method().as_str().to_owned();
    let span = tracing::info_span!(
        target: OTEL_TARGET,
        "HTTP request",
        otel.name = %format!("{method} {route}"),
        otel.kind = "server",
        http.request.method = %method,
        http.route = %route,
        http.response.status_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    if let Some(c) = enter(&span, header_context(req.headers())) {
        req.extensions_mut().insert(CallerTrace(c));
    }
    let resp = next.run(req).instrument(span.clone()).await;
    let status = resp.status();
    span.record("http.response.status_code", status.as_u16());
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    resp
}

/// The tower layer of the gRPC server: a server span per call, named by
/// its method.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct GrpcTraceLayer;

impl<S> tower::Layer<S> for GrpcTraceLayer {
    type Service = GrpcTrace<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcTrace { inner }
    }
}

/// See [`GrpcTraceLayer`].
#[derive(Debug, Clone)]
pub(crate) struct GrpcTrace<S> {
    inner: S,
}

impl<S, B> tower::Service<http::Request<B>> for GrpcTrace<S>
where
    S: tower::Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = tracing::instrument::Instrumented<S::Future>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let method = req.uri().path().trim_start_matches('/').to_owned();
        let span = tracing::info_span!(
            target: OTEL_TARGET,
            "gRPC request",
            otel.name = %method,
            otel.kind = "server",
            rpc.system = "grpc",
            rpc.method = %method,
        );
        if let Some(c) = enter(&span, header_context(req.headers())) {
            req.extensions_mut().insert(CallerTrace(c));
        }
        self.inner.call(req).instrument(span)
    }
}
