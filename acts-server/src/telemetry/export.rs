//! The OTLP exporter and the tracer provider (see the module docs).

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, SpanData, SpanProcessor,
};
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// The `tracing` target of the spans exported as OpenTelemetry spans (the
/// requests', the group commits'); other spans stay in the logs only.
pub const OTEL_TARGET: &str = "acts::otel";

/// How long one export may take before it is given up.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The spans queued for export at most (unless `OTEL_BSP_MAX_QUEUE_SIZE`
/// says): beyond it spans are dropped (the SDK says so in the log), the
/// engine never waits for the collector.
const DEFAULT_QUEUE_SPANS: usize = 16_384;

/// How long a stop waits for the last spans to leave.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(3);

/// The OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// OTLP/gRPC (a collector's port 4317).
    Grpc,
    /// OTLP/HTTP with protobuf bodies (a collector's port 4318).
    HttpProtobuf,
}

impl OtlpProtocol {
    /// Reads `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`/`OTEL_EXPORTER_OTLP_PROTOCOL`
    /// values (`grpc`, `http/protobuf`).
    pub fn parse(s: &str) -> Result<Self, TelemetryError> {
        match s.trim() {
            "grpc" => Ok(Self::Grpc),
            "http/protobuf" => Ok(Self::HttpProtobuf),
            other => Err(TelemetryError::Protocol(other.to_owned())),
        }
    }
}

/// Why traces cannot be exported.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The endpoint is not an http:// URL.
    #[error(
        "the OTLP endpoint '{0}' is not an http:// URL (e.g. http://127.0.0.1:4317; a \
         collector on the same host or network: acts speaks plain OTLP, no TLS)"
    )]
    Endpoint(String),
    /// An unknown protocol.
    #[error(
        "the OTLP protocol '{0}' is not supported: use 'grpc' or 'http/protobuf' \
         (OTEL_EXPORTER_OTLP_PROTOCOL)"
    )]
    Protocol(String),
    /// The exporter could not be built.
    #[error("cannot build the OTLP exporter: {0}")]
    Build(String),
}

/// Where and how traces go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpConfig {
    /// The traces endpoint, as the exporter calls it (for HTTP the full
    /// URL, `/v1/traces` included).
    pub endpoint: String,
    /// The transport.
    pub protocol: OtlpProtocol,
}

impl OtlpConfig {
    /// The configuration from `--otlp-endpoint` (else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`) and the standard variables read
    /// through `env` (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, the
    /// `..._PROTOCOL` pair, `OTEL_SDK_DISABLED`); `None` when traces are
    /// off. Without a protocol, port 4318 means HTTP/protobuf and any
    /// other gRPC (the collectors' conventional ports).
    pub fn from_env(
        flag: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, TelemetryError> {
        let set = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let signal = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        let generic = flag
            .map(str::to_owned)
            .or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT"));
        let Some(base) = signal.clone().or(generic) else {
            return Ok(None);
        };
        let base = base.trim().to_owned();
        let url = reqwest::Url::parse(&base).map_err(|_| TelemetryError::Endpoint(base.clone()))?;
        if url.scheme() != "http" || url.host_str().is_none() {
            return Err(TelemetryError::Endpoint(base));
        }
        let protocol = match set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"))
        {
            Some(p) => OtlpProtocol::parse(&p)?,
            None if url.port() == Some(4318) => OtlpProtocol::HttpProtobuf,
            None => OtlpProtocol::Grpc,
        };
        // The generic endpoint names the collector; HTTP adds the signal's
        // path (a signal-specific endpoint is used as given).
        let endpoint = match (protocol, signal.is_some()) {
            (OtlpProtocol::HttpProtobuf, false) => {
                format!("{}/v1/traces", base.trim_end_matches('/'))
            }
            _ => base,
        };
        Ok(Some(Self { endpoint, protocol }))
    }
}

/// The tracer provider and the processor every span goes through.
#[derive(Debug, Clone)]
pub struct Telemetry {
    provider: SdkTracerProvider,
    processor: Arc<BatchSpanProcessor>,
    config: OtlpConfig,
}

impl Telemetry {
    /// Builds the exporter and starts the batch processor (spans leave in
    /// batches: every `OTEL_BSP_SCHEDULE_DELAY` ms, default 5 s, or when a
    /// batch is full; `OTEL_BSP_MAX_QUEUE_SIZE` spans wait at most, beyond
    /// that they are dropped, never blocking the engine). Call within a
    /// tokio runtime.
    pub fn start(config: &OtlpConfig) -> Result<Self, TelemetryError> {
        let build =
            |e: opentelemetry_otlp::ExporterBuildError| TelemetryError::Build(e.to_string());
        let exporter = match config.protocol {
            OtlpProtocol::Grpc => opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(config.endpoint.clone())
                .with_timeout(EXPORT_TIMEOUT)
                .build()
                .map_err(build)?,
            OtlpProtocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(
                    super::http_client::OtlpHttpClient::new().map_err(TelemetryError::Build)?,
                )
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(config.endpoint.clone())
                .with_timeout(EXPORT_TIMEOUT)
                .build()
                .map_err(build)?,
        };
        let mut batch = BatchConfigBuilder::default();
        // A burst of processes ends thousands of tasks at once: a deeper
        // queue than the SDK's 2,048 unless the standard variable says
        // (each span's texts are clipped, so the queue is bounded in
        // bytes too: at most about 3 KiB a span).
        if std::env::var_os("OTEL_BSP_MAX_QUEUE_SIZE").is_none() {
            batch = batch.with_max_queue_size(DEFAULT_QUEUE_SPANS);
        }
        let mut processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(batch.build())
            .build();
        let resource = resource();
        processor.set_resource(&resource);
        let processor = Arc::new(processor);
        let provider = SdkTracerProvider::builder()
            .with_resource(resource)
            .with_span_processor(Shared(processor.clone()))
            .build();
        Ok(Self {
            provider,
            processor,
            config: config.clone(),
        })
    }

    /// Where traces go, for the start-up notes.
    pub fn note(&self) -> String {
        let protocol = match self.config.protocol {
            OtlpProtocol::Grpc => "OTLP/gRPC",
            OtlpProtocol::HttpProtobuf => "OTLP/HTTP",
        };
        format!(
            "traces go to {} over {protocol} (a trace per process, a span per request \
             and per group commit)",
            self.config.endpoint
        )
    }

    /// The `tracing` layer exporting the spans of target [`OTEL_TARGET`].
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let tracer = self.provider.tracer("acts");
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(tracing_subscriber::filter::filter_fn(|m| {
                m.target() == OTEL_TARGET
            }))
    }

    /// Where the engine sends its task spans.
    pub fn span_export(&self) -> acts::SpanExport {
        acts::SpanExport::new(Arc::new(super::task_spans::TaskSpans::new(
            self.processor.clone(),
        )))
    }

    /// Sends what is queued and stops the exporter (at the end of a serve),
    /// waiting at most a few seconds for a collector that does not answer.
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown_with_timeout(SHUTDOWN_WAIT) {
            tracing::warn!(error = %e, "the trace exporter did not stop cleanly");
        }
    }
}

/// `service.name` `acts` unless `OTEL_SERVICE_NAME` names it, the version,
/// and `OTEL_RESOURCE_ATTRIBUTES`.
fn resource() -> Resource {
    let mut b = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        b = b.with_service_name("acts");
    }
    b.with_attribute(opentelemetry::KeyValue::new(
        "service.version",
        env!("CARGO_PKG_VERSION"),
    ))
    .build()
}

/// The processor, shared by the provider (request spans) and the engine's
/// task spans.
#[derive(Debug)]
struct Shared(Arc<BatchSpanProcessor>);

impl SpanProcessor for Shared {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.0.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        self.0.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(
        flag: Option<&str>,
        vars: &[(&str, &str)],
    ) -> Result<Option<OtlpConfig>, TelemetryError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        OtlpConfig::from_env(flag, |k| {
            vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn the_endpoint_and_protocol_follow_the_flag_and_the_standard_variables() {
        assert_eq!(cfg(None, &[]).ok(), Some(None));
        let c = cfg(Some("http://127.0.0.1:4317"), &[]).ok().flatten();
        assert_eq!(
            c,
            Some(OtlpConfig {
                endpoint: "http://127.0.0.1:4317".into(),
                protocol: OtlpProtocol::Grpc
            })
        );
        let c = cfg(None, &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/")])
            .ok()
            .flatten();
        assert_eq!(
            c.map(|c| (c.endpoint, c.protocol)),
            Some(("http://c:4318/v1/traces".into(), OtlpProtocol::HttpProtobuf))
        );
        let c = cfg(
            Some("http://c:9000"),
            &[
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:4318/custom"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ],
        )
        .ok()
        .flatten();
        assert_eq!(c.map(|c| c.endpoint), Some("http://t:4318/custom".into()));
        assert!(matches!(
            cfg(Some("https://c:4317"), &[]),
            Err(TelemetryError::Endpoint(_))
        ));
        assert!(matches!(
            cfg(Some("c:4317"), &[]),
            Err(TelemetryError::Endpoint(_))
        ));
        assert!(matches!(
            cfg(
                Some("http://c:4317"),
                &[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")]
            ),
            Err(TelemetryError::Protocol(_))
        ));
        assert_eq!(
            cfg(Some("http://c:4317"), &[("OTEL_SDK_DISABLED", "true")]).ok(),
            Some(None)
        );
    }
}
