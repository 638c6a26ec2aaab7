//! Where a request may come from, and what its body may be: the checks
//! that keep a web page in a browser on the same machine from driving the
//! server (a browser is on loopback too).
//!
//! - **Host** (without tokens): the request must name a loopback host —
//!   `localhost`, an address in `127.0.0.0/8`, or `[::1]` — with the
//!   server's own port. A page on `evil.example` whose name an attacker
//!   points at 127.0.0.1 (DNS rebinding) sends `Host: evil.example:PORT`
//!   and is refused.
//! - **Origin** (without tokens: every request; with tokens: every call that
//!   changes something): an `Origin` header must be the server's own
//!   origin (`http://` + the request's `Host`), and `Sec-Fetch-Site` must
//!   not be `cross-site` or `same-site`. A page's `fetch` or form POST
//!   carries the page's origin and is refused; `curl`, the CLI and other
//!   programs send no `Origin` and pass.
//! - **Content type** (always): a request body is taken only as the type
//!   the call reads — `application/json`, and a model for
//!   `POST /api/v1/models` as `application/yaml`, `text/yaml` or
//!   `application/json`. A `text/plain` or form body (what a page can send
//!   without asking the server first) is 415.
//!
//! With tokens a caller proves who it is on every request and a page has
//! no token to send, so the `Host` check is left to the token; the server
//! may then sit behind a proxy under any name.

use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// What the guard checks for one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guard {
    /// Whether tokens are configured (then `Host` is not checked, and
    /// `Origin` only on calls that change something).
    tokens: bool,
    /// The port the server listens on (`None`: unknown, any port of a
    /// loopback host is taken — a router served by the caller's own
    /// listener).
    port: Option<u16>,
}

impl Guard {
    /// The checks for a server with (`tokens`) or without access tokens,
    /// listening on `port` if known.
    pub fn new(tokens: bool, port: Option<u16>) -> Self {
        Self { tokens, port }
    }

    /// Why a request with `method`, `path` and `headers` is refused, if it
    /// is.
    pub fn check(&self, method: &Method, path: &str, headers: &HeaderMap) -> Result<(), ApiError> {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        if !self.tokens
            && let Some(host) = host
        {
            self.check_host(host)?;
        }
        let changes = !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
        if !self.tokens || changes {
            check_origin(headers, host)?;
        }
        check_content_type(method, path, headers)
    }

    fn check_host(&self, host: &str) -> Result<(), ApiError> {
        let loopback = split_host(host).filter(|(name, port)| {
            is_loopback_name(name) && self.port.is_none_or(|p| *port == Some(p))
        });
        if loopback.is_some() {
            return Ok(());
        }
        let expected = self.port.map_or_else(
            || "localhost".to_owned(),
            |p| format!("127.0.0.1:{p} or localhost:{p}"),
        );
        Err(forbidden(
            "forbidden_host",
            format!(
                "this server has no access tokens, so it answers requests for its loopback \
                 address only ({expected}), not for Host '{}': a web page that points another \
                 name at this machine cannot reach it. To serve other names, configure access \
                 tokens (docs/SERVER.md, \"Local access\")",
                shown(host)
            ),
        ))
    }
}

/// The host name and port of a `Host` header (`None`: not a host).
fn split_host(host: &str) -> Option<(&str, Option<u16>)> {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (name, after) = rest.split_once(']')?;
        match after {
            "" => (name, None),
            p => (name, Some(p.strip_prefix(':')?)),
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, p)) => (name, Some(p)),
            None => (host, None),
        }
    };
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    Some((name, port))
}

/// `localhost`, an address in 127.0.0.0/8, or `::1`.
fn is_loopback_name(name: &str) -> bool {
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match name.parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => v4.is_loopback(),
        Ok(IpAddr::V6(v6)) => v6 == Ipv6Addr::LOCALHOST,
        Err(_) => false,
    }
}

/// An `Origin` must be the server's own (`http(s)://` + `Host`), and a
/// browser's `Sec-Fetch-Site` must not say another site sent it.
fn check_origin(headers: &HeaderMap, host: Option<&str>) -> Result<(), ApiError> {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && matches!(site, "cross-site" | "same-site")
    {
        return Err(forbidden(
            "forbidden_origin",
            format!(
                "the browser says a page of another site sent this request (Sec-Fetch-Site: \
                 {site}); this server takes calls from its own dashboard and from programs, \
                 not from other web pages"
            ),
        ));
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("");
    let own = host.is_some_and(|host| {
        ["http://", "https://"]
            .iter()
            .any(|scheme| origin.strip_prefix(scheme) == Some(host))
    });
    if own {
        return Ok(());
    }
    Err(forbidden(
        "forbidden_origin",
        format!(
            "a request from the web page at '{}' is refused: this server takes calls from its \
             own dashboard{} and from programs (which send no Origin), not from other web pages",
            shown(origin),
            host.map_or_else(String::new, |h| format!(" (http://{})", shown(h)))
        ),
    ))
}

/// The media types a call with a body takes.
fn accepted_types(method: &Method, path: &str) -> &'static [&'static str] {
    if *method == Method::POST && path.trim_end_matches('/') == "/api/v1/models" {
        &[
            "application/yaml",
            "application/x-yaml",
            "text/yaml",
            "application/json",
        ]
    } else {
        &["application/json"]
    }
}

/// A request with a body must say it is of a type the call takes.
fn check_content_type(method: &Method, path: &str, headers: &HeaderMap) -> Result<(), ApiError> {
    let has_body = headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|len| len.trim() != "0");
    if !has_body {
        return Ok(());
    }
    let accepted = accepted_types(method, path);
    let given = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        });
    if given.as_deref().is_some_and(|g| accepted.contains(&g)) {
        return Ok(());
    }
    Err(ApiError {
        status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
        code: "unsupported_media_type",
        message: format!(
            "this call takes a body of type {} (send 'Content-Type: {}'), not {}",
            accepted.join(", "),
            accepted[0],
            given.map_or_else(
                || "a body without a type".to_owned(),
                |g| format!("'{}'", shown(&g))
            )
        ),
    })
}

/// At most 100 characters of a header value, for a message.
fn shown(value: &str) -> String {
    value.chars().take(100).collect()
}

fn forbidden(code: &'static str, message: String) -> ApiError {
    ApiError {
        status: StatusCode::FORBIDDEN,
        code,
        message,
    }
}

/// Refuses what [`Guard::check`] refuses, before anything else runs.
pub(crate) async fn enforce(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    match guard.check(req.method(), req.uri().path(), req.headers()) {
        Ok(()) => next.run(req).await,
        Err(e) => {
            tracing::debug!(code = e.code, message = %e.message, "request refused by the guard");
            e.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().expect("a header value"));
        }
        h
    }

    fn code(r: Result<(), ApiError>) -> Option<&'static str> {
        r.err().map(|e| e.code)
    }

    #[test]
    fn without_tokens_only_loopback_hosts_with_the_port_are_answered() {
        let g = Guard::new(false, Some(7878));
        let get = |host: &str| {
            code(g.check(
                &Method::GET,
                "/api/v1/processes",
                &headers(&[("host", host)]),
            ))
        };
        for ok in [
            "127.0.0.1:7878",
            "localhost:7878",
            "LOCALHOST:7878",
            "[::1]:7878",
            "127.1.2.3:7878",
        ] {
            assert_eq!(get(ok), None, "{ok}");
        }
        for bad in [
            "evil.example:7878",
            "evil.example",
            "127.0.0.1:8080",
            "127.0.0.1",
            "localhost.evil.example:7878",
            "[::2]:7878",
            "10.0.0.1:7878",
            "[::1:7878",
            "127.0.0.1:x",
        ] {
            assert_eq!(get(bad), Some("forbidden_host"), "{bad}");
        }
        // No Host at all (an in-process call, HTTP/1.0): no browser sends that.
        assert_eq!(code(g.check(&Method::GET, "/", &HeaderMap::new())), None);
        // With tokens the name is the token's business.
        let t = Guard::new(true, Some(7878));
        assert_eq!(
            code(t.check(&Method::GET, "/", &headers(&[("host", "acts.example.com")]))),
            None
        );
    }

    #[test]
    fn a_foreign_origin_is_refused_and_the_own_origin_taken() {
        let g = Guard::new(false, Some(7878));
        let post = |pairs: &[(&'static str, &str)]| {
            code(g.check(&Method::POST, "/api/v1/processes/p/abort", &headers(pairs)))
        };
        assert_eq!(
            post(&[
                ("host", "127.0.0.1:7878"),
                ("origin", "http://127.0.0.1:7878")
            ]),
            None
        );
        assert_eq!(
            post(&[
                ("host", "127.0.0.1:7878"),
                ("origin", "http://localhost:7878")
            ]),
            Some("forbidden_origin")
        );
        assert_eq!(
            post(&[
                ("host", "127.0.0.1:7878"),
                ("origin", "https://evil.example")
            ]),
            Some("forbidden_origin")
        );
        assert_eq!(
            post(&[("host", "127.0.0.1:7878"), ("origin", "null")]),
            Some("forbidden_origin")
        );
        assert_eq!(
            post(&[("host", "127.0.0.1:7878"), ("sec-fetch-site", "cross-site")]),
            Some("forbidden_origin")
        );
        assert_eq!(
            post(&[
                ("host", "127.0.0.1:7878"),
                ("sec-fetch-site", "same-origin")
            ]),
            None
        );
        // A read from another page is refused too without tokens ...
        assert_eq!(
            code(g.check(
                &Method::GET,
                "/api/v1/processes",
                &headers(&[
                    ("host", "127.0.0.1:7878"),
                    ("origin", "https://evil.example")
                ])
            )),
            Some("forbidden_origin")
        );
        // ... but with tokens only a change is (a page has no token to read with).
        let t = Guard::new(true, None);
        let foreign = headers(&[
            ("host", "acts.example.com"),
            ("origin", "https://evil.example"),
        ]);
        assert_eq!(
            code(t.check(&Method::GET, "/api/v1/processes", &foreign)),
            None
        );
        assert_eq!(
            code(t.check(&Method::DELETE, "/api/v1/models/m", &foreign)),
            Some("forbidden_origin")
        );
    }

    #[test]
    fn bodies_must_be_of_the_type_the_call_takes() {
        let g = Guard::new(false, None);
        let with = |path: &str, ct: Option<&str>, len: &str| {
            let mut h = headers(&[("content-length", len)]);
            if let Some(ct) = ct {
                h.insert(header::CONTENT_TYPE, ct.parse().expect("a type"));
            }
            code(g.check(&Method::POST, path, &h))
        };
        let models = "/api/v1/models";
        let start = "/api/v1/processes";
        assert_eq!(
            with(models, Some("text/plain"), "10"),
            Some("unsupported_media_type")
        );
        assert_eq!(
            with(models, Some("application/x-www-form-urlencoded"), "10"),
            Some("unsupported_media_type")
        );
        assert_eq!(
            with(models, Some("multipart/form-data; boundary=x"), "10"),
            Some("unsupported_media_type")
        );
        assert_eq!(with(models, None, "10"), Some("unsupported_media_type"));
        for ok in [
            "application/yaml",
            "text/yaml",
            "application/json",
            "Application/JSON; charset=utf-8",
        ] {
            assert_eq!(with(models, Some(ok), "10"), None, "{ok}");
        }
        assert_eq!(
            with(start, Some("text/plain"), "10"),
            Some("unsupported_media_type")
        );
        assert_eq!(
            with(start, Some("application/yaml"), "10"),
            Some("unsupported_media_type")
        );
        assert_eq!(with(start, Some("application/json"), "10"), None);
        // No body: nothing to check.
        assert_eq!(with("/api/v1/processes/p/abort", None, "0"), None);
        let mut chunked = headers(&[
            ("transfer-encoding", "chunked"),
            ("content-type", "text/plain"),
        ]);
        assert_eq!(
            code(g.check(&Method::POST, start, &chunked)),
            Some("unsupported_media_type")
        );
        chunked.insert(
            header::CONTENT_TYPE,
            "application/json".parse().expect("a type"),
        );
        assert_eq!(code(g.check(&Method::POST, start, &chunked)), None);
    }
}
