//! `GET /api/v1/messages` on a cluster: one live stream carrying the
//! messages of every partition. The node follows each partition's
//! current owner — its own engine's stream, or the owner's stream of that
//! partition over HTTP — and attaches again wherever the partition goes
//! when a stream ends (the owner handed it over, died, or was fenced);
//! each (re)attachment is announced as an SSE comment (`: partition 3
//! attached`), which clients skip.
//! Like the single-node stream it is live, not durable: what is emitted
//! while a partition moves is not replayed (durable channels are).

use std::time::Duration;

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tower::ServiceExt;

use crate::call::{Call, FORWARDED, PARTITION, Target, error};
use crate::node::ClusterNode;

/// A queued chunk and the room it holds until the client takes it.
type Chunk = (Bytes, OwnedSemaphorePermit);

/// The sending side of one client's merged stream, bounded in chunks and
/// in bytes as one stream of the node's `streams:` limits
/// (`queue_messages`, `queue_bytes`): past them the partitions' followers
/// wait (and each partition's own stream, bounded as on `acts serve`,
/// cuts them off with `lagged` if the client stays behind).
#[derive(Clone)]
struct Out {
    tx: mpsc::Sender<Chunk>,
    room: Arc<Semaphore>,
    bytes: usize,
}

impl Out {
    /// A client's queue of at most `messages` chunks and `bytes` bytes.
    fn new(messages: usize, bytes: usize) -> (Self, mpsc::Receiver<Chunk>) {
        let (tx, rx) = mpsc::channel(messages.max(1));
        let bytes = bytes.clamp(1, Semaphore::MAX_PERMITS);
        let room = Arc::new(Semaphore::new(bytes));
        (Self { tx, room, bytes }, rx)
    }

    /// Queues `chunk` once there is room for its bytes; `Err` when the
    /// client is gone.
    async fn send(&self, chunk: Bytes) -> Result<(), ()> {
        let need = u32::try_from(chunk.len().clamp(1, self.bytes)).unwrap_or(u32::MAX);
        let permit = self
            .room
            .clone()
            .acquire_many_owned(need)
            .await
            .map_err(drop)?;
        self.tx.send((chunk, permit)).await.map_err(drop)
    }

    fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// Most bytes of one event from a partition (a longer one is cut off:
/// the sub-stream is dropped and attached again).
const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// How often an idle stream sends a keep-alive comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

fn sse_response(body: Body) -> Response {
    let mut r = Response::new(body);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// The merged stream of every partition, answered once every partition's
/// stream is attached (a durable channel is then registered on each, so
/// nothing emitted after the answer is missed), or after the node's
/// patience for a moving partition (its stream attaches when it can).
pub(crate) async fn merged(node: &ClusterNode, call: Call) -> Response {
    let limits = node.inner.server.stream_limits();
    let (tx, rx) = Out::new(limits.queue_messages, limits.queue_bytes);
    let partitions = node.partitions();
    let (ready_tx, mut ready) = mpsc::channel(partitions as usize);
    for p in 0..partitions {
        let (node, call, tx) = (node.clone(), call.clone(), tx.clone());
        let ready = ready_tx.clone();
        tokio::spawn(async move { follow(node, p, call, tx, ready).await });
    }
    drop(ready_tx);
    let waited = tokio::time::timeout(node.patience(), async {
        for _ in 0..partitions {
            match ready.recv().await {
                Some(Ok(())) => {}
                Some(Err(refused)) => return Some(refused),
                None => return None,
            }
        }
        None
    })
    .await;
    if let Ok(Some((status, body))) = waited {
        // (the followers end once the client's side is dropped)
        let mut r = Response::new(Body::from(body));
        *r.status_mut() = status;
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return r;
    }
    // Keep-alives, until the client is gone.
    let keep = tx.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(KEEP_ALIVE).await;
            if keep.send(Bytes::from_static(b":\n\n")).await.is_err() {
                return;
            }
        }
    });
    drop(tx);
    // A chunk's room is given back once the body has taken it.
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        let (chunk, _room) = rx.recv().await?;
        Some((Ok::<Bytes, std::convert::Infallible>(chunk), rx))
    });
    sse_response(Body::from_stream(stream))
}

/// The stream of partition `p` this node holds (a call another node
/// pinned to it), or `503 moving`.
pub(crate) async fn local(node: &ClusterNode, p: u32, call: &Call) -> Response {
    match (node.target(p), node.holding(p)) {
        (Target::Local(router), Some(holding)) => {
            let resp = match router.oneshot(call.request()).await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            if !resp.status().is_success() {
                return resp;
            }
            let body = while_held(node.clone(), p, holding, resp.into_body());
            sse_response(Body::from_stream(body))
        }
        _ => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "moving",
            format!(
                "node '{}' does not own partition {p} (it is moving)",
                node.id()
            ),
        ),
    }
}

/// Forwards partition `p`'s events to `tx` for as long as the client
/// listens, attaching to whichever node owns `p`.
/// Says once on `ready` when the first stream is attached, or that the
/// partition refused it (a client error: the filters, the caller's
/// rights, its stream budget), and then ends; once attached, a refused
/// re-attachment is tried again (a budget frees up, a node comes back).
async fn follow(node: ClusterNode, p: u32, call: Call, tx: Out, ready: Ready) {
    let mut ready = Some(ready);
    while !tx.is_closed() {
        match (node.target(p), node.holding(p)) {
            (Target::Local(router), Some(holding)) => {
                let Ok(resp) = router.oneshot(call.request()).await;
                if resp.status().is_client_error() && ready.is_some() {
                    let status = resp.status();
                    let body = axum::body::to_bytes(resp.into_body(), 64 * 1024).await;
                    say(&mut ready, Err((status, body.unwrap_or_default())));
                    return;
                }
                if resp.status().is_success() && attached(p, &tx).await {
                    say(&mut ready, Ok(()));
                    let mut body = Box::pin(while_held(node.clone(), p, holding, resp.into_body()));
                    let mut events = Events::of(p);
                    loop {
                        tokio::select! {
                            chunk = futures_util::StreamExt::next(&mut body) => match chunk {
                                Some(Ok(chunk)) if events.push(&chunk, &tx).await => {}
                                _ => break,
                            },
                            // A quiet partition: notice a client that left.
                            () = tokio::time::sleep(HELD_CHECK) => {
                                if tx.is_closed() {
                                    return;
                                }
                            }
                        }
                    }
                }
            }
            (Target::Remote(owner), _) => {
                let path = call.uri.path_and_query().map_or("/", |pq| pq.as_str());
                let mut req = node
                    .inner
                    .http
                    .get(format!("{}{path}", owner.addr.trim_end_matches('/')))
                    .header(FORWARDED, node.id())
                    .header(PARTITION, p.to_string())
                    .timeout(Duration::from_secs(24 * 3600));
                if let Some(v) = call.headers.get(header::AUTHORIZATION) {
                    req = req.header(header::AUTHORIZATION, v.clone());
                }
                let resp = match req.send().await {
                    Ok(r) if r.status().is_client_error() && ready.is_some() => {
                        let status = StatusCode::from_u16(r.status().as_u16())
                            .unwrap_or(StatusCode::BAD_REQUEST);
                        let body = r.bytes().await.unwrap_or_default();
                        say(&mut ready, Err((status, body)));
                        return;
                    }
                    other => other,
                };
                if let Ok(mut resp) = resp
                    && resp.status().is_success()
                    && attached(p, &tx).await
                {
                    say(&mut ready, Ok(()));
                    let mut events = Events::of(p);
                    loop {
                        tokio::select! {
                            chunk = resp.chunk() => match chunk {
                                Ok(Some(chunk)) if events.push(&chunk, &tx).await => {}
                                _ => break,
                            },
                            // A frozen owner's stream does not end: leave
                            // it once the partition has another owner.
                            () = tokio::time::sleep(HELD_CHECK) => {
                                if !matches!(node.target(p), Target::Remote(o) if o == owner) {
                                    break;
                                }
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Where a partition's follower says it attached, or why it was refused.
type Ready = mpsc::Sender<Result<(), (StatusCode, Bytes)>>;

/// Says on `ready`, once, that the partition's stream is attached
/// (`Ok`) or that the partition refused it; later calls say nothing.
fn say(ready: &mut Option<Ready>, outcome: Result<(), (StatusCode, Bytes)>) {
    if let Some(r) = ready.take() {
        let _ = r.try_send(outcome);
    }
}

/// How often a stream of a held partition checks that it still is.
const HELD_CHECK: Duration = Duration::from_millis(250);

/// `body` (a partition engine's stream) until this node no longer has
/// holding `holding` of partition `p` (handed over, fenced off, taken
/// again): a closed engine's stream would otherwise stay open, silent.
fn while_held(
    node: ClusterNode,
    p: u32,
    holding: u64,
    body: Body,
) -> impl futures_util::Stream<Item = Result<Bytes, axum::Error>> {
    let body = body.into_data_stream();
    futures_util::stream::unfold((node, Box::pin(body)), move |(node, mut body)| async move {
        loop {
            if node.holding(p) != Some(holding) {
                return None;
            }
            tokio::select! {
                next = futures_util::StreamExt::next(&mut body) => {
                    return next.map(|chunk| (chunk, (node, body)));
                }
                () = tokio::time::sleep(HELD_CHECK) => {}
            }
        }
    })
}

/// Tells the client (an SSE comment, which clients skip) that partition
/// `p`'s messages flow from now on; `false` when the client is gone.
async fn attached(p: u32, tx: &Out) -> bool {
    tx.send(Bytes::from(format!(": partition {p} attached\n\n")))
        .await
        .is_ok()
}

/// Splits a partition's SSE bytes into whole events and passes on the
/// message events (not its keep-alives), each with the partition it came
/// from as its `partition:` field (one SSE clients ignore; the gRPC
/// protocol's front routes an ack by it).
struct Events {
    pending: Vec<u8>,
    field: Vec<u8>,
}

impl Events {
    fn of(p: u32) -> Self {
        Self {
            pending: Vec::new(),
            field: format!("partition: {p}\n").into_bytes(),
        }
    }
}

impl Events {
    /// Takes `chunk`; `false` when the client is gone or an event is too
    /// large (drop the sub-stream).
    async fn push(&mut self, chunk: &[u8], tx: &Out) -> bool {
        self.pending.extend_from_slice(chunk);
        while let Some(end) = find(&self.pending, b"\n\n") {
            let mut event: Vec<u8> = self.pending.drain(..end + 1).collect();
            self.pending.drain(..1);
            if event.starts_with(b":") {
                continue;
            }
            event.extend_from_slice(&self.field);
            event.push(b'\n');
            if tx.send(Bytes::from(event)).await.is_err() {
                return false;
            }
        }
        self.pending.len() <= MAX_EVENT_BYTES
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn events_are_passed_whole_and_keep_alives_dropped() {
        let (tx, mut rx) = Out::new(8, 1 << 20);
        let mut e = Events::of(3);
        assert!(e.push(b"event: message\ndata: {\"a\"", &tx).await);
        assert!(e.push(b":1}\n\n:\n\ndata: 2\n", &tx).await);
        assert_eq!(
            rx.recv().await.map(|(c, _)| c).as_deref(),
            Some(&b"event: message\ndata: {\"a\":1}\npartition: 3\n\n"[..])
        );
        assert!(
            rx.try_recv().is_err(),
            "the keep-alive is dropped, the half event kept"
        );
        assert!(e.push(b"\n", &tx).await);
        assert_eq!(
            rx.recv().await.map(|(c, _)| c).as_deref(),
            Some(&b"data: 2\npartition: 3\n\n"[..])
        );
    }

    #[tokio::test]
    async fn queued_bytes_are_bounded_and_given_back_when_taken() {
        const BYTES: usize = 1 << 20;
        let (out, mut rx) = Out::new(1024, BYTES);
        let room = out.room.clone();
        let half = Bytes::from(vec![b'x'; BYTES / 2]);
        out.send(half.clone()).await.expect("room");
        out.send(half.clone()).await.expect("room");
        assert_eq!(room.available_permits(), 0, "the budget is used up");
        // A third waits for room (not queued) ...
        let third = tokio::spawn({
            let out = out.clone();
            let half = half.clone();
            async move { out.send(half).await }
        });
        tokio::task::yield_now().await;
        assert!(!third.is_finished(), "it waits for room");
        // ... until the client takes one.
        drop(rx.recv().await.expect("a chunk"));
        third
            .await
            .expect("joined")
            .expect("sent once there was room");
        assert_eq!(rx.len(), 2);
    }
}
