//! The canned HTTP answers of a test file's `serve:`: for the test of a model
//! that uses `acts.core.http`, `acts test` starts a server on 127.0.0.1 that
//! answers each route as written, gives the model its address as the start
//! var `serve_url`, lets the package reach it (that one address), and stops
//! it after the test.
//!
//! ```yaml
//! serve:
//!   - { method: GET, path: /rates, body: { eur: 1.1 } }
//!   - { method: POST, path: /orders, status: 201, body: { id: 7 } }
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;

/// One canned answer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Route {
    /// The method (default GET).
    #[serde(default = "get")]
    method: String,
    /// The path (the query is not compared).
    path: String,
    /// The status (default 200).
    #[serde(default = "ok")]
    status: u16,
    /// The body: a string is sent as text, anything else as JSON, nothing
    /// as an empty body.
    #[serde(default)]
    body: Value,
    /// More headers.
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

fn get() -> String {
    "GET".to_owned()
}

fn ok() -> u16 {
    200
}

/// A running canned server; stopped when dropped.
pub(crate) struct MockServer {
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a server answering `routes`.
pub(crate) async fn start(routes: Vec<Route>) -> Result<MockServer, String> {
    for r in &routes {
        StatusCode::from_u16(r.status)
            .map_err(|_| format!("serve: status {} is not an HTTP status", r.status))?;
        if !r.path.starts_with('/') {
            return Err(format!("serve: path '{}' must start with /", r.path));
        }
        for (k, v) in &r.headers {
            HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("serve: '{k}' is not a header name"))?;
            HeaderValue::from_str(v)
                .map_err(|_| format!("serve: the value of '{k}' is not a header value"))?;
        }
    }
    let routes = Arc::new(routes);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("serve: cannot listen on 127.0.0.1: {e}"))?;
    let addr = listener.local_addr().map_err(|e| format!("serve: {e}"))?;
    let app = axum::Router::new().fallback(move |req: Request| {
        let routes = routes.clone();
        async move { answer(&routes, &req) }
    });
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(MockServer {
        url: format!("http://{addr}"),
        task,
    })
}

fn answer(routes: &[Route], req: &Request) -> Response {
    let found = routes.iter().find(|r| {
        r.method.eq_ignore_ascii_case(req.method().as_str()) && r.path == req.uri().path()
    });
    let Some(r) = found else {
        return text(
            StatusCode::NOT_FOUND,
            format!(
                "no route {} {} in the test's serve:",
                req.method(),
                req.uri().path()
            ),
        );
    };
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut res = match &r.body {
        Value::Null => text(status, String::new()),
        Value::String(s) => text(status, s.clone()),
        other => {
            let mut res = Response::new(Body::from(other.to_string()));
            *res.status_mut() = status;
            res.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            res
        }
    };
    for (k, v) in &r.headers {
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            res.headers_mut().insert(k, v);
        }
    }
    res
}

fn text(status: StatusCode, body: String) -> Response {
    let mut res = Response::new(Body::from(body));
    *res.status_mut() = status;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    res
}
