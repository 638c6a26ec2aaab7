//! A real OTLP/gRPC trace receiver on a free loopback port (built on the
//! `opentelemetry-proto` types): what a trace test asserts against, and
//! the collector a benchmark exports to.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
pub use opentelemetry_proto::tonic::trace::v1::Span;

/// Every span received (or only their count, for a benchmark), and a
/// counter that changes with each export.
#[derive(Clone)]
pub struct OtlpReceiver {
    spans: Arc<Mutex<Vec<Span>>>,
    keep: bool,
    received: Arc<tokio::sync::watch::Sender<usize>>,
}

#[tonic::async_trait]
impl TraceService for OtlpReceiver {
    async fn export(
        &self,
        req: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut n = 0;
        {
            let mut spans = self.spans.lock().unwrap_or_else(|e| e.into_inner());
            for rs in req.into_inner().resource_spans {
                for ss in rs.scope_spans {
                    n += ss.spans.len();
                    if self.keep {
                        spans.extend(ss.spans);
                    }
                }
            }
        }
        self.received.send_modify(|c| *c += n);
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

impl OtlpReceiver {
    /// Starts a receiver that keeps every span; its endpoint
    /// (`http://127.0.0.1:PORT`). Call within a tokio runtime.
    pub async fn start() -> std::io::Result<(Self, String)> {
        Self::start_with(true).await
    }

    /// Starts a receiver that only counts spans (a benchmark's collector).
    pub async fn start_counting() -> std::io::Result<(Self, String)> {
        Self::start_with(false).await
    }

    async fn start_with(keep: bool) -> std::io::Result<(Self, String)> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let r = Self {
            spans: Arc::default(),
            keep,
            received: Arc::new(tokio::sync::watch::Sender::new(0)),
        };
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(r.clone()))
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
        Ok((r, format!("http://{addr}")))
    }

    /// How many spans arrived.
    pub fn count(&self) -> usize {
        *self.received.borrow()
    }

    /// The spans kept so far.
    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits until `done` holds for the spans received; `None` after
    /// `limit` (a hang guard: pass a minute or more).
    pub async fn until(
        &self,
        limit: Duration,
        done: impl Fn(&[Span]) -> bool,
    ) -> Option<Vec<Span>> {
        let mut rx = self.received.subscribe();
        let wait = async {
            loop {
                {
                    let spans = self.spans.lock().unwrap_or_else(|e| e.into_inner());
                    if done(&spans) {
                        return spans.clone();
                    }
                }
                if rx.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(limit, wait).await.ok()
    }
}
