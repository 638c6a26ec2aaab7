//! `acts.core.http`: one HTTP request per act.
//!
//! - `config.rs`: [`HttpConfig`], the `http:` section, bounds checked.
//! - `egress.rs`: where a request may go (scheme, allow-list, address
//!   rules on the URL, on each resolved address, on redirects).
//! - `params.rs`: the act's params, their schema, the body and the
//!   answer's decoding.
//! - here: the package — the request with its `Idempotency-Key`, retries,
//!   the capped body, the outputs and the failures' ecodes.
//!
//! Durable semantics: the engine calls the package after the act's start is
//! committed and calls it again when a crash came between the request and
//! the commit of its result; the `Idempotency-Key` (`acts-{pid}-{tid}`) is
//! the same both times, so a server that honours the header applies the
//! request once. A retried or rewound step is a new task, hence a new key.
//!
//! May use: `error` (`ConfigError`) and `text`, the crate's shared files; not
//! the shell package (it is not its business).

mod config;
mod egress;
mod params;

pub use config::HttpConfig;

use std::sync::Arc;
use std::time::Duration;

use acts::{ActPackage, PackageContext, PackageDefinition, PackageFailure, RunAs, Vars};
use async_trait::async_trait;
use futures_util::StreamExt;
use reqwest::{Client, Method, Response, StatusCode, Url};
use tracing::debug;

use crate::ConfigError;
use config::{MAX_BACKOFF_MS, MAX_TIMEOUT_MS};
use egress::{Egress, Refusal, SafeResolver};
use params::HttpParams;

/// The package id.
const ID: &str = "acts.core.http";

/// How much of an error answer's body its failure message quotes.
const QUOTED_BYTES: usize = 512;

/// The `acts.core.http` package (see the module docs).
#[derive(Debug, Clone)]
pub struct HttpPackage {
    client: Client,
    egress: Arc<Egress>,
    config: HttpConfig,
}

impl HttpPackage {
    /// The package with `config`, whose bounds are checked here.
    pub fn new(config: &HttpConfig) -> Result<Self, ConfigError> {
        config.check()?;
        let egress = Arc::new(Egress::new(config));
        let client = Client::builder()
            // never through an ambient proxy: the address rules would then
            // judge the proxy, not the target
            .no_proxy()
            .dns_resolver(Arc::new(SafeResolver {
                egress: egress.clone(),
            }))
            .redirect(egress::redirects(egress.clone(), config.max_redirects))
            .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
            .timeout(Duration::from_millis(config.timeout_ms))
            .user_agent(concat!("acts/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| {
                ConfigError::new(
                    "http",
                    "client",
                    format!("cannot build the HTTP client: {e}"),
                )
            })?;
        Ok(Self {
            client,
            egress,
            config: config.clone(),
        })
    }
}

fn fail(ecode: &str, message: impl Into<String>) -> PackageFailure {
    PackageFailure::new(ecode, message)
}

#[async_trait]
impl ActPackage for HttpPackage {
    fn definition(&self) -> PackageDefinition {
        let mut d = PackageDefinition::new(ID, RunAs::Func, params::schema());
        d.name = "Http".into();
        d.desc = "makes one HTTP request; the answer's body is the act's `data`".into();
        d.catalog = acts::Catalog::Core;
        d
    }

    async fn run(&self, ctx: PackageContext) -> Result<Vars, PackageFailure> {
        let p: HttpParams = serde_json::from_value(ctx.params.clone())
            .map_err(|e| fail("http.params", format!("{ID}: invalid params: {e}")))?;
        let key = format!("acts-{}-{}", ctx.pid, ctx.tid);
        let answer = self.send(&p, &key).await?;
        let mut out = Vars::new();
        if let Some(data) = answer {
            out.insert("data".into(), data);
        }
        Ok(out)
    }
}

/// Whether a retry of `method` cannot apply it twice (RFC 9110, 9.2.2).
fn idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::PUT | Method::DELETE
    )
}

/// The answers worth retrying.
fn retryable(status: StatusCode) -> bool {
    matches!(status.as_u16(), 429 | 502 | 503 | 504)
}

/// The egress refusal somewhere in `err`'s chain.
fn refusal_in<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refusal> {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(r) = e.downcast_ref::<Refusal>() {
            return Some(r);
        }
        cur = e.source();
    }
    None
}

/// `err` and its sources on one line.
fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut s = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        let next = e.to_string();
        if !s.contains(&next) {
            s.push_str(": ");
            s.push_str(&next);
        }
        cur = e.source();
    }
    s
}

/// The URL without its query (which may carry secrets), for messages.
fn shown(url: &Url) -> String {
    let mut u = url.clone();
    u.set_query(None);
    let _ = u.set_password(None);
    u.to_string()
}

impl HttpPackage {
    /// The request (retried where that is safe), the answer's decoded body.
    async fn send(
        &self,
        p: &HttpParams,
        key: &str,
    ) -> Result<Option<serde_json::Value>, PackageFailure> {
        let method = p.method().map_err(|e| fail("http.params", e))?;
        let url =
            Url::parse(&p.url).map_err(|e| fail("http.params", format!("url '{}': {e}", p.url)))?;
        self.egress
            .check_url(&url)
            .map_err(|e| fail("http.refused", format!("{}: {e}", shown(&url))))?;
        let timeout = match p.timeout_ms {
            Some(ms) if ms == 0 || ms > self.config.timeout_ms || ms > MAX_TIMEOUT_MS => {
                return Err(fail(
                    "http.params",
                    format!(
                        "timeout-ms {ms} is above http.timeout-ms ({}): an act may only tighten it",
                        self.config.timeout_ms
                    ),
                ));
            }
            Some(ms) => Duration::from_millis(ms),
            None => Duration::from_millis(self.config.timeout_ms),
        };
        let headers = p.headers(key).map_err(|e| fail("http.params", e))?;
        let query = p.query();
        let mut attempt = 0u32;
        loop {
            let req = self
                .client
                .request(method.clone(), url.clone())
                .headers(headers.clone())
                .query(&query)
                .timeout(timeout);
            let req = p.with_body(req).map_err(|e| fail("http.params", e))?;
            let retry_after;
            match req.send().await {
                Ok(res) => {
                    let status = res.status();
                    if retryable(status) && idempotent(&method) && attempt < self.config.retries {
                        retry_after = retry_after_ms(&res);
                        debug!(url = %shown(&url), %status, attempt, "retrying");
                    } else {
                        return self.answer(res, &url).await;
                    }
                }
                Err(e) => {
                    if let Some(r) = refusal_in(&e) {
                        return Err(fail("http.refused", format!("{}: {r}", shown(&url))));
                    }
                    let again = e.is_connect() || (e.is_timeout() && idempotent(&method));
                    if !(again && attempt < self.config.retries) {
                        return Err(send_failure(&e, &url, attempt));
                    }
                    debug!(url = %shown(&url), error = %chain(&e), attempt, "retrying");
                    retry_after = None;
                }
            }
            let backoff = self
                .config
                .retry_backoff_ms
                .saturating_mul(1 << attempt.min(16))
                .min(MAX_BACKOFF_MS);
            let wait = retry_after.map_or(backoff, |r| r.min(MAX_BACKOFF_MS));
            tokio::time::sleep(Duration::from_millis(wait)).await;
            attempt += 1;
        }
    }

    /// The answer: its peer checked, its body read up to the cap and
    /// decoded; a status other than 2xx fails the act with the status as
    /// its ecode.
    async fn answer(
        &self,
        res: Response,
        url: &Url,
    ) -> Result<Option<serde_json::Value>, PackageFailure> {
        if let Some(peer) = res.remote_addr()
            && let Err(e) = self.egress.check_ip(peer.ip())
        {
            return Err(fail("http.refused", format!("{}: {e}", shown(url))));
        }
        let status = res.status();
        let content_type = res
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = self.read_capped(res, url).await?;
        if !status.is_success() {
            let quoted = crate::text::head(&String::from_utf8_lossy(&body), QUOTED_BYTES);
            return Err(fail(
                status.as_str(),
                format!("{} answered {status}: {quoted}", shown(url)),
            ));
        }
        params::decode(content_type.as_deref(), &body)
            .map_err(|e| fail("http.body", format!("{}: {e}", shown(url))))
    }

    /// The body, failing `http.too_large` past `max-response-bytes` (told
    /// by `Content-Length` or counted as it streams).
    async fn read_capped(&self, res: Response, url: &Url) -> Result<Vec<u8>, PackageFailure> {
        let cap = self.config.max_response_bytes;
        let too_large = || {
            fail(
                "http.too_large",
                format!(
                    "{}: the answer is larger than http.max-response-bytes ({cap} bytes)",
                    shown(url)
                ),
            )
        };
        if res.content_length().is_some_and(|n| n > cap) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        let mut stream = res.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| send_failure(&e, url, 0))?;
            if (body.len() + chunk.len()) as u64 > cap {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// A `Retry-After` in seconds, as ms.
fn retry_after_ms(res: &Response) -> Option<u64> {
    let secs: u64 = res
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(secs.saturating_mul(1000))
}

/// A request that failed without an answer.
fn send_failure(e: &reqwest::Error, url: &Url, retries: u32) -> PackageFailure {
    let after = if retries > 0 {
        format!(" (after {retries} retries)")
    } else {
        String::new()
    };
    let ecode = if e.is_timeout() {
        "http.timeout"
    } else if e.is_redirect() {
        "http.redirects"
    } else if e.is_connect() {
        "http.connect"
    } else {
        "http.error"
    };
    fail(ecode, format!("{}: {}{after}", shown(url), chain(e)))
}
