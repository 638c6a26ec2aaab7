//! The HTTP front of a cluster node: every API call of `acts serve`,
//! accepted by any node and routed to the partition it concerns — run by
//! this node's engine of that partition, or forwarded once to the node
//! that owns it (waiting, within a bound, while a partition moves).

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::call::{Call, error, pinned_partition};
use crate::node::ClusterNode;
use crate::placement::{key_partition, pid_in};

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
    /// A bulk job: a part on every partition, under one id (`bulk.rs`).
    Bulk,
    /// An action of the acts 0.25 table: routed by its name and options
    /// (`actions.rs`).
    Action(String),
    /// A REST route of the acts 0.25 web plugin: routed as the action it
    /// stands for (`actions.rs`).
    Rest,
}

/// Routes `method path`.
pub(crate) fn classify(method: &Method, path: &str) -> Route {
    let Some(rest) = path.strip_prefix("/api/v1/") else {
        // the acts 0.25 web plugin's routes
        return match path {
            "/api/msg/sse" => Route::Stream,
            _ if method == Method::POST && path.starts_with("/api/") => Route::Rest,
            _ => Route::Any,
        };
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
        ["bulk", ..] => Route::Bulk,
        ["actions", name] => Route::Action((*name).to_owned()),
        _ => Route::Any,
    }
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
            .route("/api/v1/cluster/gates", post(crate::gates::serve))
            .fallback(dispatch)
            .with_state(self.clone())
            .layer(DefaultBodyLimit::max(acts_server::MAX_BODY_BYTES));
        let guard = acts_server::Guard::new(self.inner.server.auth().is_enabled(), port);
        acts_server::guarded(routes, guard)
    }
}

impl ClusterNode {
    /// The API routed over the cluster, without the guard: for a server
    /// in this process that checks its own callers (the gRPC server,
    /// which passes on only the caller's token).
    pub(crate) fn front(&self) -> Router {
        Router::new()
            .fallback(dispatch)
            .with_state(self.clone())
            .layer(DefaultBodyLimit::max(acts_server::MAX_BODY_BYTES))
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
    if let Some(pinned) = pinned_partition(&call.headers, node.partitions()) {
        let p = match pinned {
            Ok(p) => p,
            Err(refused) => return refused,
        };
        if route == Route::Stream {
            return crate::stream::local(&node, p, &call).await;
        }
        return node.on_partition(p, &call).await.into_response();
    }
    match route {
        Route::Stream => crate::stream::merged(&node, call).await,
        Route::Pid(pid) => {
            let p = node.partition_of(&pid);
            node.on_partition(p, &call).await.into_response()
        }
        Route::Start => start(&node, call).await,
        Route::Any => {
            let p = node.any_partition();
            node.on_partition(p, &call).await.into_response()
        }
        Route::Catalog => crate::model_changes::catalog_change(&node, call).await,
        Route::Paged {
            items,
            cursor_in_body,
        } => crate::fanout::paged(&node, call, items, cursor_in_body).await,
        Route::Joined => crate::fanout::joined(&node, call).await,
        Route::OneOf => crate::fanout::one_of(&node, call, false).await,
        Route::Every => crate::fanout::one_of(&node, call, true).await,
        Route::Migrate => crate::fanout::migrate(&node, call).await,
        Route::Bulk => crate::bulk::route(&node, call).await,
        Route::Action(name) => crate::actions::route(&node, call, &name).await,
        Route::Rest => crate::actions::rest(&node, call).await,
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
            // A start with a concurrency key goes to the partition that
            // keeps the key (a pid drawn there), so one engine counts it.
            let pid = match crate::actions::concurrency_key(node, &body).await {
                Some(key) => {
                    let partitions = node.partitions();
                    pid_in(key_partition(&key, partitions), partitions)
                }
                None => acts::long_id(),
            };
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
        assert_eq!(classify(&p, "/api/v1/bulk"), Route::Bulk);
        assert_eq!(classify(&g, "/api/v1/bulk/b1/items"), Route::Bulk);
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
        assert_eq!(
            classify(&p, "/api/v1/actions/act:complete"),
            Route::Action("act:complete".into())
        );
        assert_eq!(classify(&p, "/api/model/deploy"), Route::Rest);
        assert_eq!(classify(&g, "/api/msg/sse"), Route::Stream);
        assert_eq!(classify(&g, "/health"), Route::Any);
    }
}
