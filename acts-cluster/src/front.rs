//! The HTTP front of a cluster node: every API call of `acts serve`,
//! accepted by any node and routed to the partition it concerns — run by
//! this node's engine of that partition, or forwarded once to the node
//! that owns it (waiting, within a bound, while a partition moves).

use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tower::ServiceExt;
use tracing::debug;

use crate::node::{ClusterNode, Owner};

/// Set on a request one node forwards to another (the value: the
/// forwarding node): the receiver runs it or refuses, never forwards it
/// again.
pub(crate) const FORWARDED: &str = "x-acts-forwarded";
/// Set on a forwarded request that is meant for one partition (listings
/// and calls that name no process).
pub(crate) const PARTITION: &str = "x-acts-partition";

/// What a request is about, by its method and path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// One process: its partition runs it.
    Pid(String),
    /// Start a process: the pid (given or drawn here) picks the partition.
    Start,
    /// Anything every partition answers alike (models, the dashboard, who
    /// am I, a hook).
    Any,
    /// A model change: made on one partition, then appended to the
    /// catalog every partition follows.
    Catalog,
    /// A listing with a cursor: every partition's page, merged.
    Paged {
        /// The field holding the items.
        items: &'static str,
        /// Whether the cursor is in the body (else the query string).
        cursor_in_body: bool,
    },
    /// A listing without a cursor: every partition's array, joined.
    Joined,
    /// A live stream (the message stream, a durable channel's): every
    /// partition's, merged.
    Stream,
    /// A call about one delivery, whose partition the call does not name:
    /// asked of every partition, answered by the one that has it.
    OneOf,
    /// A call every partition must make (removing a durable channel).
    Every,
    /// A migration: every partition migrates its own processes; the
    /// reports are joined.
    Migrate,
}

/// Routes `method path`.
pub(crate) fn classify(method: &Method, path: &str) -> Route {
    let Some(rest) = path.strip_prefix("/api/v1/") else {
        return Route::Any;
    };
    let parts: Vec<&str> = rest.split('/').collect();
    let get = method == Method::GET;
    match parts.as_slice() {
        ["processes"] if get => Route::Paged {
            items: "processes",
            cursor_in_body: false,
        },
        ["processes"] => Route::Start,
        ["processes", "query"] => Route::Paged {
            items: "processes",
            cursor_in_body: true,
        },
        ["processes", pid, ..] => Route::Pid((*pid).to_owned()),
        ["tasks", "query"] => Route::Paged {
            items: "tasks",
            cursor_in_body: true,
        },
        ["deliveries", "query"] => Route::Paged {
            items: "deliveries",
            cursor_in_body: true,
        },
        ["inbox"] | ["stuck"] | ["deliveries"] => Route::Joined,
        ["models", _, "migrate"] => Route::Migrate,
        ["models", ..] if method == Method::POST || method == Method::DELETE => Route::Catalog,
        ["messages"] | ["channels", _, "stream"] => Route::Stream,
        ["channels", _, "ack", _] | ["deliveries", _, _] | ["deliveries", _, _, "redeliver"] => {
            Route::OneOf
        }
        ["channels", _] => Route::Every,
        _ => Route::Any,
    }
}

/// An error answer in the API's shape.
pub(crate) fn error(
    status: StatusCode,
    code: &'static str,
    message: impl Into<String>,
) -> Response {
    acts_server::ApiError {
        status,
        code,
        message: message.into(),
    }
    .into_response()
}

/// A buffered request: what a retry or a forward needs again.
#[derive(Clone)]
pub(crate) struct Call {
    pub(crate) method: Method,
    pub(crate) uri: Uri,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Call {
    pub(crate) fn request(&self) -> Request {
        let mut req = Request::new(Body::from(self.body.clone()));
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.headers.clone();
        req
    }

    fn forwarded(&self) -> bool {
        self.headers.contains_key(FORWARDED)
    }
}

/// A buffered answer.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) content_type: Option<HeaderValue>,
    pub(crate) body: Bytes,
}

impl Answer {
    /// A 503 with `code` and `message`, in the API's error shape
    /// (`acts_server::ApiError`'s body).
    fn unavailable(code: &'static str, message: String) -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            content_type: Some(HeaderValue::from_static("application/json")),
            body: Bytes::from(json!({"error": {"code": code, "message": message}}).to_string()),
        }
    }

    /// The API error code of a failed answer.
    fn code(&self) -> Option<String> {
        let v: Value = serde_json::from_slice(&self.body).ok()?;
        v["error"]["code"].as_str().map(str::to_owned)
    }

    /// Whether the partition was not (or no longer) served where the call
    /// went: worth trying again once ownership settles.
    fn moved(&self) -> bool {
        self.status == StatusCode::SERVICE_UNAVAILABLE
            && matches!(
                self.code().as_deref(),
                Some("not_owner" | "closing" | "moving")
            )
    }

    pub(crate) fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    pub(crate) fn into_response(self) -> Response {
        let mut r = Response::new(Body::from(self.body));
        *r.status_mut() = self.status;
        if let Some(ct) = self.content_type {
            r.headers_mut().insert(header::CONTENT_TYPE, ct);
        }
        r
    }
}

/// Where a partition's calls go now.
pub(crate) enum Target {
    Local(Router),
    Remote(Owner),
    Nobody,
}

impl ClusterNode {
    /// The API of this node: every route of `acts serve` (see
    /// `acts-server`), routed over the cluster, plus `/api/v1/cluster/status`
    /// (nodes, partitions, owners, epochs, lag) and `/healthz`.
    ///
    /// Behind the same [`acts_server::Guard`] as `acts serve`: without
    /// tokens only loopback hosts on `port` (when known) are answered, and
    /// no request from another web page is.
    pub fn router(&self, port: Option<u16>) -> Router {
        let routes = Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/metrics", get(metrics))
            .route("/api/v1/cluster/status", get(crate::status::status))
            .route("/api/v1/cluster/sync", post(crate::status::sync))
            .fallback(dispatch)
            .with_state(self.clone())
            .layer(DefaultBodyLimit::max(acts_server::MAX_BODY_BYTES));
        let guard = acts_server::Guard::new(self.inner.server.auth().is_enabled(), port);
        acts_server::guarded(routes, guard)
    }

    pub(crate) fn target(&self, p: u32) -> Target {
        let state = self.inner.state.read();
        if let Some(h) = state.held.get(&p) {
            return Target::Local(h.router.clone());
        }
        match state.owners.get(p as usize).cloned().flatten() {
            Some(o) if o.node != self.inner.config.node => Target::Remote(o),
            _ => Target::Nobody,
        }
    }

    /// How long a call waits for a partition that is moving: two lease
    /// TTLs and a bit (a dead owner's lease expires, a tick notices).
    fn patience(&self) -> Duration {
        self.inner.config.lease_ttl * 2 + Duration::from_secs(1)
    }

    /// Runs `call` on partition `p`: here if this node holds it, else on
    /// its owner (once: a forwarded call is never forwarded again, and is
    /// answered at once). While the partition has no live owner, or its
    /// owner hands it over, the call is tried again for up to
    /// [`patience`](Self::patience).
    pub(crate) async fn on_partition(&self, p: u32, call: &Call) -> Answer {
        let deadline = tokio::time::Instant::now() + self.patience();
        loop {
            let answer = match self.target(p) {
                Target::Local(router) => Some(run_local(router, call).await),
                Target::Remote(_) | Target::Nobody if call.forwarded() => {
                    Some(Answer::unavailable(
                        "moving",
                        format!(
                            "node '{}' does not own partition {p} (it is moving)",
                            self.id()
                        ),
                    ))
                }
                Target::Remote(owner) => self.forward(&owner, Some(p), call).await,
                Target::Nobody => None,
            };
            match answer {
                // A forwarded call is answered at once: the node that
                // forwarded it waits and tries again where the partition
                // went (so a node that just lost a partition refuses
                // instead of waiting to get it back).
                Some(a)
                    if !a.moved()
                        || call.forwarded()
                        || tokio::time::Instant::now() >= deadline =>
                {
                    return a;
                }
                None if tokio::time::Instant::now() >= deadline => {
                    return Answer::unavailable(
                        "unavailable",
                        format!(
                            "partition {p} has no live owner (a node may have stopped; its \
                             partitions move within the lease TTL of {:?}); try again",
                            self.inner.config.lease_ttl
                        ),
                    );
                }
                _ => {
                    debug!(partition = p, "partition moving; trying again");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    /// Sends `call` to `owner`, pinned to partition `p` if given (else
    /// the owner routes it as its own call). `None`: the owner could not
    /// be reached (try again once the map changes).
    pub(crate) async fn forward(
        &self,
        owner: &Owner,
        p: Option<u32>,
        call: &Call,
    ) -> Option<Answer> {
        let path = call.uri.path_and_query().map_or("/", |pq| pq.as_str());
        let url = format!("{}{path}", owner.addr.trim_end_matches('/'));
        let mut req = self
            .inner
            .http
            .request(call.method.clone(), url)
            .header(FORWARDED, self.id())
            .body(call.body.clone());
        if let Some(p) = p {
            req = req.header(PARTITION, p.to_string());
        }
        for name in [header::AUTHORIZATION, header::CONTENT_TYPE, header::ACCEPT] {
            if let Some(v) = call.headers.get(&name) {
                req = req.header(name, v.clone());
            }
        }
        match req.send().await {
            Ok(resp) => {
                let status = resp.status();
                let content_type = resp.headers().get(header::CONTENT_TYPE).cloned();
                let body = resp.bytes().await.ok()?;
                Some(Answer {
                    status,
                    content_type,
                    body,
                })
            }
            Err(e) => {
                debug!(partition = ?p, owner = %owner.node, error = %e, "forwarding failed");
                None
            }
        }
    }

    /// A partition to run a call every partition answers alike: one this
    /// node holds, else partition 0 (on its owner).
    pub(crate) fn any_partition(&self) -> u32 {
        self.inner
            .state
            .read()
            .held
            .keys()
            .next()
            .copied()
            .unwrap_or(0)
    }
}

async fn run_local(router: Router, call: &Call) -> Answer {
    let resp = match router.oneshot(call.request()).await {
        Ok(r) => r,
        Err(never) => match never {},
    };
    let status = resp.status();
    let content_type = resp.headers().get(header::CONTENT_TYPE).cloned();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap_or_default();
    Answer {
        status,
        content_type,
        body,
    }
}

/// `/metrics`: every held partition's, summed (a call another node pinned
/// to one partition gets that partition's).
async fn metrics(State(node): State<ClusterNode>, req: Request) -> Response {
    let (parts, _) = req.into_parts();
    let call = Call {
        method: parts.method,
        uri: parts.uri,
        headers: parts.headers,
        body: Bytes::new(),
    };
    crate::metrics::metrics(&node, call).await
}

/// Every call but the node's own endpoints.
async fn dispatch(State(node): State<ClusterNode>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, acts_server::MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(_) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!(
                    "the request body is larger than {} bytes",
                    acts_server::MAX_BODY_BYTES
                ),
            );
        }
    };
    let call = Call {
        method: parts.method,
        uri: parts.uri,
        headers: parts.headers,
        body,
    };
    let route = classify(&call.method, call.uri.path());
    // A call another node sent for one partition runs there (a header
    // naming no partition of this cluster is refused at once).
    if let Some(pinned) = call.headers.get(PARTITION) {
        let Some(p) = pinned
            .to_str()
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|p| *p < node.partitions())
        else {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!(
                    "{PARTITION} must name a partition of this cluster (0 to {})",
                    node.partitions() - 1
                ),
            );
        };
        if route == Route::Stream {
            return crate::stream::local(&node, p, &call).await;
        }
        return node.on_partition(p, &call).await.into_response();
    }
    match route {
        Route::Stream => crate::stream::merged(&node, call),
        Route::Pid(pid) => {
            let p = node.partition_of(&pid);
            node.on_partition(p, &call).await.into_response()
        }
        Route::Start => start(&node, call).await,
        Route::Any => {
            let p = node.any_partition();
            node.on_partition(p, &call).await.into_response()
        }
        Route::Catalog => crate::fanout::catalog_change(&node, call).await,
        Route::Paged {
            items,
            cursor_in_body,
        } => crate::fanout::paged(&node, call, items, cursor_in_body).await,
        Route::Joined => crate::fanout::joined(&node, call).await,
        Route::OneOf => crate::fanout::one_of(&node, call, false).await,
        Route::Every => crate::fanout::one_of(&node, call, true).await,
        Route::Migrate => crate::fanout::migrate(&node, call).await,
    }
}

/// A start: the pid the caller named, or one drawn here, decides the
/// partition (the engine there keeps it).
async fn start(node: &ClusterNode, mut call: Call) -> Response {
    let Ok(mut body) = serde_json::from_slice::<Value>(&call.body) else {
        // Not JSON: any partition answers with the engine's own error.
        let p = node.any_partition();
        return node.on_partition(p, &call).await.into_response();
    };
    let pid = match body.get("vars").and_then(|v| v.get("pid")) {
        Some(Value::String(pid)) => pid.clone(),
        Some(_) => {
            let p = node.any_partition();
            return node.on_partition(p, &call).await.into_response();
        }
        None => {
            let pid = acts::acts_core::tree::long_id();
            if !body.get("vars").is_some_and(Value::is_object) {
                body["vars"] = json!({});
            }
            body["vars"]["pid"] = Value::String(pid.clone());
            call.body = Bytes::from(body.to_string());
            pid
        }
    };
    let p = node.partition_of(&pid);
    node.on_partition(p, &call).await.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_routed_by_what_they_name() {
        let g = Method::GET;
        let p = Method::POST;
        let d = Method::DELETE;
        assert_eq!(classify(&p, "/api/v1/processes"), Route::Start);
        assert_eq!(
            classify(&p, "/api/v1/processes/abc/tasks/t1/complete"),
            Route::Pid("abc".into())
        );
        assert_eq!(
            classify(&g, "/api/v1/processes/abc"),
            Route::Pid("abc".into())
        );
        assert!(matches!(
            classify(&g, "/api/v1/processes"),
            Route::Paged {
                items: "processes",
                cursor_in_body: false
            }
        ));
        assert!(matches!(
            classify(&p, "/api/v1/processes/query"),
            Route::Paged {
                cursor_in_body: true,
                ..
            }
        ));
        assert_eq!(classify(&p, "/api/v1/models"), Route::Catalog);
        assert_eq!(classify(&d, "/api/v1/models/m1/versions/2"), Route::Catalog);
        assert_eq!(classify(&g, "/api/v1/models/m1"), Route::Any);
        assert_eq!(classify(&g, "/api/v1/inbox"), Route::Joined);
        assert_eq!(classify(&g, "/api/v1/messages"), Route::Stream);
        assert_eq!(classify(&g, "/api/v1/channels/c1/stream"), Route::Stream);
        assert_eq!(classify(&p, "/api/v1/channels/c1/ack/m1"), Route::OneOf);
        assert_eq!(
            classify(&p, "/api/v1/deliveries/c1/m1/redeliver"),
            Route::OneOf
        );
        assert_eq!(classify(&d, "/api/v1/deliveries/c1/m1"), Route::OneOf);
        assert_eq!(classify(&d, "/api/v1/channels/c1"), Route::Every);
        assert_eq!(
            classify(&p, "/api/v1/deliveries/query"),
            Route::Paged {
                items: "deliveries",
                cursor_in_body: true
            }
        );
        assert_eq!(classify(&p, "/api/v1/models/m1/migrate"), Route::Migrate);
        assert_eq!(classify(&g, "/"), Route::Any);
        assert_eq!(classify(&p, "/api/v1/hooks/h1"), Route::Any);
    }
}
