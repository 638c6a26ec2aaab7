//! Live message streams (`GET /api/v1/messages`, a durable channel's
//! stream): one queue per client, bounded in messages and in bytes, all
//! queues together within one memory budget, and a bounded number of open
//! streams per principal and in all.
//!
//! A client that reads too slowly is cut off rather than let the server's
//! memory grow with it: its queue is emptied at once (the memory is given
//! back even if the client never reads again), and its stream ends with a
//! `lagged` event (a durable channel re-sends what was not acknowledged
//! when the client reconnects). A client whose socket takes no byte at all
//! for [`StreamLimits::stall`] is disconnected by the listener
//! (`listener.rs`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use acts::ChannelOptions;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use parking_lot::Mutex;
use serde::Deserialize;
use tokio::sync::Notify;

use crate::error::ApiError;

/// Most messages queued for one stream's client (see [`StreamLimits`]).
pub const STREAM_QUEUE: usize = 1024;

/// The bounds of live streams (`acts serve`'s config, `streams:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StreamLimits {
    /// Most messages queued for one client (default 1024).
    pub queue_messages: usize,
    /// Most bytes (of the messages' JSON) queued for one client (default
    /// 4 MiB).
    pub queue_bytes: usize,
    /// Most bytes queued for all clients together (default 64 MiB); a
    /// client with anything queued is cut off rather than go past it.
    pub total_bytes: usize,
    /// Most open streams of one principal (default 256).
    pub per_principal: usize,
    /// Most open streams in all (default 1024).
    pub max_streams: usize,
    /// A client whose socket takes no byte for this long is disconnected
    /// (default 30 s).
    #[serde(with = "seconds")]
    pub stall: Duration,
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self {
            queue_messages: STREAM_QUEUE,
            queue_bytes: 4 << 20,
            total_bytes: 64 << 20,
            per_principal: 256,
            max_streams: 1024,
            stall: Duration::from_secs(30),
        }
    }
}

/// A duration as whole seconds in a config.
mod seconds {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_secs)
    }
}

/// What every stream of one server shares: the limits, the bytes queued,
/// and who holds how many streams.
#[derive(Debug)]
pub(crate) struct Streams {
    limits: StreamLimits,
    queued_bytes: AtomicUsize,
    open: Mutex<Open>,
}

/// The streams open now: in all, and by principal.
#[derive(Debug, Default)]
struct Open {
    total: usize,
    by_principal: HashMap<String, usize>,
}

impl Streams {
    pub(crate) fn new(limits: StreamLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            queued_bytes: AtomicUsize::new(0),
            open: Mutex::new(Open::default()),
        })
    }

    /// The limits every stream is held to.
    pub(crate) fn limits(&self) -> StreamLimits {
        self.limits
    }

    /// Bytes queued for all clients now (a metric).
    pub(crate) fn queued_bytes(&self) -> usize {
        self.queued_bytes.load(Ordering::Relaxed)
    }

    /// Streams open now (a metric).
    pub(crate) fn open_streams(&self) -> usize {
        self.open.lock().total
    }

    /// A place for one more stream of `principal`, or a 429 saying which
    /// bound it would pass.
    fn admit(self: &Arc<Self>, principal: &str) -> Result<Place, ApiError> {
        let mut open = self.open.lock();
        let total = open.total;
        let mine = open.by_principal.get(principal).copied().unwrap_or(0);
        let refused = if total >= self.limits.max_streams {
            Some(format!(
                "the server has {total} streams open, its limit (streams.max_streams)"
            ))
        } else if mine >= self.limits.per_principal {
            Some(format!(
                "'{principal}' has {mine} streams open, the limit of one principal \
                 (streams.per_principal); close one first"
            ))
        } else {
            None
        };
        if let Some(message) = refused {
            return Err(ApiError {
                status: StatusCode::TOO_MANY_REQUESTS,
                code: "too_many_streams",
                message,
            });
        }
        open.total += 1;
        *open.by_principal.entry(principal.to_owned()).or_default() += 1;
        Ok(Place {
            streams: self.clone(),
            principal: principal.to_owned(),
        })
    }
}

/// One admitted stream's place; given back on drop.
#[derive(Debug)]
struct Place {
    streams: Arc<Streams>,
    principal: String,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut guard = self.streams.open.lock();
        let open = &mut *guard;
        if let Some(n) = open.by_principal.get_mut(&self.principal) {
            open.total -= 1;
            *n -= 1;
            if *n == 0 {
                open.by_principal.remove(&self.principal);
            }
        }
    }
}

/// One message as it waits for its client: serialized once, when queued.
pub(crate) struct Queued {
    pid: String,
    kind: String,
    /// The message's id.
    pub(crate) id: String,
    /// The message's node name.
    pub(crate) name: String,
    /// The message, serialized by the stream's format.
    pub(crate) json: String,
}

/// How a stream serializes a message: acts' own JSON, or another
/// protocol's shape of it.
pub(crate) type Format = Arc<dyn Fn(&acts::Message) -> String + Send + Sync>;

/// acts' own JSON of a message.
fn own_json(m: &acts::Message) -> String {
    serde_json::to_string(m).unwrap_or_else(|_| "null".to_owned())
}

/// A client's queue (see the module docs).
#[derive(Default)]
struct Queue {
    items: VecDeque<Queued>,
    bytes: usize,
    /// Cut off: nothing more is queued; the stream ends once drained.
    lagged: Option<String>,
}

struct Shared {
    queue: Mutex<Queue>,
    ready: Notify,
    streams: Arc<Streams>,
    format: Format,
}

impl Shared {
    /// Queues `m`, or cuts the client off when a bound would be passed.
    fn push(&self, m: &acts::Message) {
        if self.queue.lock().lagged.is_some() {
            return;
        }
        let json = (self.format)(m);
        let size = json.len();
        let limits = &self.streams.limits;
        let mut q = self.queue.lock();
        if q.lagged.is_some() {
            return;
        }
        let total = self.streams.queued_bytes.load(Ordering::Relaxed);
        let why = if q.items.len() >= limits.queue_messages {
            Some(format!("{} messages were waiting", q.items.len()))
        } else if q.bytes + size > limits.queue_bytes && !q.items.is_empty() {
            Some(format!("{} bytes were waiting", q.bytes))
        } else if total + size > limits.total_bytes && !q.items.is_empty() {
            Some(format!(
                "the server's streams hold {total} bytes, their budget"
            ))
        } else {
            None
        };
        if let Some(why) = why {
            // Give the memory back now: the client may never read again.
            self.streams
                .queued_bytes
                .fetch_sub(q.bytes, Ordering::Relaxed);
            q.items.clear();
            q.bytes = 0;
            q.lagged = Some(why);
        } else {
            q.bytes += size;
            self.streams.queued_bytes.fetch_add(size, Ordering::Relaxed);
            q.items.push_back(Queued {
                pid: m.pid.clone(),
                kind: m.r#type.to_string(),
                id: m.id.clone(),
                name: m.name.clone(),
                json,
            });
        }
        drop(q);
        self.ready.notify_one();
    }

    /// The next queued message; `Err(why)` once cut off and drained.
    async fn pop(&self) -> Result<Queued, String> {
        loop {
            let notified = self.ready.notified();
            {
                let mut q = self.queue.lock();
                if let Some(item) = q.items.pop_front() {
                    q.bytes -= item.json.len();
                    self.streams
                        .queued_bytes
                        .fetch_sub(item.json.len(), Ordering::Relaxed);
                    return Ok(item);
                }
                if let Some(why) = &q.lagged {
                    return Err(why.clone());
                }
            }
            notified.await;
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let q = self.queue.get_mut();
        self.streams
            .queued_bytes
            .fetch_sub(q.bytes, Ordering::Relaxed);
    }
}

/// The filters of a message stream: globs, as channel options.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct StreamFilter {
    /// Message types (`workflow`, `step`, `branch`, `act`), a glob.
    #[param(example = "act")]
    r#type: Option<String>,
    /// Message states (`created`, `completed`, `error`, ...), a glob.
    state: Option<String>,
    /// Act keys, a glob.
    key: Option<String>,
    /// Packages (`acts.core.irq`), a glob.
    uses: Option<String>,
    /// Model ids, a glob.
    model: Option<String>,
    /// Globs over the node's `options` as messages carry them, a JSON
    /// object of strings (`{"tag":"finance*"}`).
    #[param(example = r#"{"tag":"finance*"}"#)]
    options: Option<String>,
}

impl StreamFilter {
    /// The channel options these filters stand for (absent: any); `options`
    /// that is not a JSON object of strings is a `400`.
    pub(crate) fn options(self) -> Result<ChannelOptions, crate::ApiError> {
        let mut options = ChannelOptions::default();
        if let Some(text) = &self.options {
            let globs: std::collections::BTreeMap<String, String> = serde_json::from_str(text)
                .map_err(|e| {
                    crate::ApiError::bad_request(format!(
                        "options must be a JSON object of glob strings (e.g. {{\"tag\":\"finance*\"}}): {e}"
                    ))
                })?;
            for (k, v) in globs {
                options = options.with_option(k, v);
            }
        }
        if let Some(v) = self.r#type {
            options = options.with_type(v);
        }
        if let Some(v) = self.state {
            options = options.with_state(v);
        }
        if let Some(v) = self.key {
            options = options.with_key(v);
        }
        if let Some(v) = self.uses {
            options = options.with_uses(v);
        }
        if let Some(v) = self.model {
            options = options.with_model(v);
        }
        Ok(options)
    }
}

/// A stream's channel: its handlers are removed when the stream is
/// dropped, so a client that goes leaves nothing behind (a durable
/// channel's registration and deliveries stay).
pub(crate) struct Subscription {
    channel: acts::Channel,
    shared: Arc<Shared>,
    /// For a caller who is not an operator: the executor that says which
    /// processes it may see, and the pids it may (once seen, a process
    /// stays visible: its audience only grows).
    visible_to: Option<(acts::Executor, HashSet<String>)>,
    _place: Place,
}

impl Subscription {
    /// Listens on `channel` for caller `who` (only the messages of the
    /// processes `exec`, acting for it, may see, unless an operator),
    /// within `streams`' bounds: a 429 when the caller or the server has
    /// too many streams open.
    pub(crate) fn open(
        streams: &Arc<Streams>,
        channel: acts::Channel,
        exec: &acts::Executor,
        who: &acts::Principal,
    ) -> Result<Self, ApiError> {
        Self::open_as(streams, channel, exec, who, Arc::new(own_json))
    }

    /// [`Subscription::open`] with messages serialized by `format`.
    pub(crate) fn open_as(
        streams: &Arc<Streams>,
        channel: acts::Channel,
        exec: &acts::Executor,
        who: &acts::Principal,
        format: Format,
    ) -> Result<Self, ApiError> {
        let place = streams.admit(&who.id)?;
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            ready: Notify::new(),
            streams: streams.clone(),
            format,
        });
        let weak = Arc::downgrade(&shared);
        channel.on_message(move |m| {
            if let Some(shared) = weak.upgrade() {
                shared.push(m);
            }
        });
        let visible_to = (!who.is_operator()).then(|| (exec.clone(), HashSet::new()));
        Ok(Self {
            channel,
            shared,
            visible_to,
            _place: place,
        })
    }

    /// The next message the caller may see; `Err(why)` when the client
    /// was cut off.
    pub(crate) async fn next(&mut self) -> Result<Queued, String> {
        loop {
            let m = self.shared.pop().await?;
            let Some((x, seen)) = &mut self.visible_to else {
                return Ok(m);
            };
            if seen.contains(&m.pid) || x.proc().may_see(&m.pid).await.unwrap_or(false) {
                seen.insert(m.pid.clone());
                return Ok(m);
            }
        }
    }

    /// The next message as the caller may see it, as JSON (`None`: the
    /// client was cut off). For calls that wait on a stream themselves.
    pub(crate) async fn next_message(&mut self) -> Option<serde_json::Value> {
        let m = self.next().await.ok()?;
        serde_json::from_str(&m.json).ok()
    }

    /// Its messages as a Server-Sent Events response — each message's type
    /// as the event name, its id as the event id, the message as JSON
    /// data — kept alive while idle; a client cut off for reading too
    /// slowly gets a last `lagged` event.
    pub(crate) fn into_sse(self) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
        self.into_sse_as(true)
    }

    /// [`Subscription::into_sse`]; without `named`, the events have no
    /// name (a browser's `EventSource.onmessage` receives them, as the
    /// acts 0.25 web plugin's stream).
    pub(crate) fn into_sse_as(
        self,
        named: bool,
    ) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
        let stream = futures_util::stream::unfold(Some(self), move |sub| async move {
            let mut sub = sub?;
            match sub.next().await {
                Ok(m) => {
                    // the fields in the order they are written: the name first
                    let event = match named {
                        true => Event::default().event(m.kind),
                        false => Event::default(),
                    };
                    let event = event.id(m.id).data(m.json);
                    Some((Ok(event), Some(sub)))
                }
                Err(why) => {
                    let note = Event::default().event("lagged").data(format!(
                        "the client read too slowly ({why}); reconnect (a durable channel re-sends what was not acknowledged)"
                    ));
                    Some((Ok(note), None))
                }
            }
        });
        Sse::new(stream).keep_alive(KeepAlive::default())
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.channel.close();
    }
}
