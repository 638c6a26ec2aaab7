//! A real OTLP trace receiver on a free loopback port (built on the
//! `opentelemetry-proto` types), over gRPC or over HTTP with protobuf
//! bodies: what a trace test asserts against, and the collector a
//! benchmark exports to.

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
        self.take(req.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// The largest OTLP/HTTP request the receiver reads.
const MAX_HTTP_BODY: usize = 64 << 20;

impl OtlpReceiver {
    fn take(&self, req: ExportTraceServiceRequest) {
        let mut n = 0;
        {
            let mut spans = self.spans.lock().unwrap_or_else(|e| e.into_inner());
            for rs in req.resource_spans {
                for ss in rs.scope_spans {
                    n += ss.spans.len();
                    if self.keep {
                        spans.extend(ss.spans);
                    }
                }
            }
        }
        self.received.send_modify(|c| *c += n);
    }

    /// Starts a receiver of OTLP/HTTP with protobuf bodies (`POST
    /// /v1/traces`) that keeps every span; its endpoint (the collector's
    /// base URL, `http://127.0.0.1:PORT`).
    pub async fn start_http() -> std::io::Result<(Self, String)> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let r = Self {
            spans: Arc::default(),
            keep: true,
            received: Arc::new(tokio::sync::watch::Sender::new(0)),
        };
        let me = r.clone();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let me = me.clone();
                tokio::spawn(async move {
                    let _ = me.serve_http(conn).await;
                });
            }
        });
        Ok((r, format!("http://{addr}")))
    }

    /// Answers the requests of one connection (HTTP/1.1, kept alive).
    async fn serve_http(&self, conn: tokio::net::TcpStream) -> std::io::Result<()> {
        use prost::Message as _;
        use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
        let mut conn = BufReader::new(conn);
        loop {
            let mut length = 0usize;
            let mut line = String::new();
            let mut first = true;
            loop {
                line.clear();
                if conn.read_line(&mut line).await? == 0 {
                    return Ok(());
                }
                if first && !line.starts_with("POST /v1/traces ") {
                    conn.get_mut()
                        .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                        .await?;
                    return Ok(());
                }
                first = false;
                let l = line.to_ascii_lowercase();
                if let Some(v) = l.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if line == "\r\n" {
                    break;
                }
            }
            if length > MAX_HTTP_BODY {
                return Ok(());
            }
            let mut body = vec![0; length];
            conn.read_exact(&mut body).await?;
            let status = match ExportTraceServiceRequest::decode(body.as_slice()) {
                Ok(req) => {
                    self.take(req);
                    "200 OK"
                }
                Err(_) => "400 Bad Request",
            };
            let head = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n"
            );
            conn.get_mut().write_all(head.as_bytes()).await?;
        }
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
