//! The HTTP client of the OTLP/HTTP exporter: the workspace's reqwest
//! (no second HTTP stack), each request run on the runtime the exporter
//! was built in.

/// The OTLP/HTTP exporter's client: the workspace's reqwest, each request
/// run on the runtime the exporter was built in (the batch processor
/// exports from its own thread).
#[derive(Debug)]
pub(super) struct OtlpHttpClient {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl OtlpHttpClient {
    /// Fails outside a tokio runtime.
    pub(super) fn new() -> Result<Self, String> {
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|e| format!("no tokio runtime: {e}"))?;
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self { client, runtime })
    }
}

/// The most of a collector's answer read (it says only whether it took the
/// batch).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for OtlpHttpClient {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let client = self.client.clone();
        let call = async move {
            let request = reqwest::Request::try_from(request)?;
            let mut resp = client.execute(request).await?;
            let status = resp.status();
            let mut body = Vec::new();
            while let Some(chunk) = resp.chunk().await? {
                if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                    break;
                }
                body.extend_from_slice(&chunk);
            }
            Ok::<_, reqwest::Error>((status, body))
        };
        let (status, body) = self.runtime.spawn(call).await??;
        let mut answer = http::Response::new(bytes::Bytes::from(body));
        *answer.status_mut() = status;
        Ok(answer)
    }
}
