//! How a call reaches a partition: run by this node's engine of it, or
//! forwarded once to the node that owns it, tried again (within a bound)
//! while the partition moves.
//!
//! May use: the `node` and the `call` types.

use std::time::Duration;

use axum::Router;
use axum::http::header;
use tower::ServiceExt;
use tracing::debug;

use crate::call::{Answer, Call, FORWARDED, PARTITION, Target};
use crate::node::{ClusterNode, Owner};

impl ClusterNode {
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
    pub(crate) fn patience(&self) -> Duration {
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
        // (the caller's W3C trace context too: a process started through
        // another node continues the caller's trace; and a merged
        // listing's ask for its items' cursors)
        let trace = [
            header::HeaderName::from_static("traceparent"),
            header::HeaderName::from_static("tracestate"),
            header::HeaderName::from_static(acts_server::ITEM_CURSORS),
        ];
        for name in [header::AUTHORIZATION, header::CONTENT_TYPE, header::ACCEPT]
            .into_iter()
            .chain(trace)
        {
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
