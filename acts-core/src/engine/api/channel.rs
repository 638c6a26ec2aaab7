//! Channels: how clients receive messages.
//!
//! A [`Channel`] subscribes with glob filters on a message's type, state,
//! key, package (`uses`) and model id. Its handlers run after the
//! transition that produced a message is durable, in the order the process
//! produced them, on the process's lane: a handler sees the process as it
//! is after that transition and must not block (spawn work instead, or use
//! [`Channel::subscribe`] to receive messages on a queue).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::RwLock;
use tokio::sync::mpsc;
use wildmatch::WildMatch;

use crate::scheduler::Message;

use crate::engine::api::error::EngineError;
use crate::engine::kernel::shared::Kernel;

type Handler = Arc<dyn Fn(&Message) + Send + Sync>;

/// Glob filters of a channel (`*` any run of characters, `?` one
/// character). A message passes when every filter matches; a message
/// without a key or package is matched as the empty string.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ChannelOptions {
    /// Message type: `workflow`, `step`, `branch`, `act`.
    pub r#type: String,
    /// Message state: `created`, `completed`, `error`, ...
    pub state: String,
    /// The act's `params.key`.
    pub key: String,
    /// The package id.
    pub uses: String,
    /// The model id.
    pub model: String,
}

impl Default for ChannelOptions {
    fn default() -> Self {
        Self {
            r#type: "*".into(),
            state: "*".into(),
            key: "*".into(),
            uses: "*".into(),
            model: "*".into(),
        }
    }
}

impl ChannelOptions {
    /// Only messages of `type`.
    pub fn with_type(mut self, pattern: impl Into<String>) -> Self {
        self.r#type = pattern.into();
        self
    }

    /// Only messages in `state`.
    pub fn with_state(mut self, pattern: impl Into<String>) -> Self {
        self.state = pattern.into();
        self
    }

    /// Only acts whose key matches.
    pub fn with_key(mut self, pattern: impl Into<String>) -> Self {
        self.key = pattern.into();
        self
    }

    /// Only acts of packages that match.
    pub fn with_uses(mut self, pattern: impl Into<String>) -> Self {
        self.uses = pattern.into();
        self
    }

    /// Only processes of models that match.
    pub fn with_model(mut self, pattern: impl Into<String>) -> Self {
        self.model = pattern.into();
        self
    }
}

struct Filters {
    r#type: WildMatch,
    state: WildMatch,
    key: WildMatch,
    uses: WildMatch,
    model: WildMatch,
}

impl Filters {
    fn new(o: &ChannelOptions) -> Self {
        Self {
            r#type: WildMatch::new(&o.r#type),
            state: WildMatch::new(&o.state),
            key: WildMatch::new(&o.key),
            uses: WildMatch::new(&o.uses),
            model: WildMatch::new(&o.model),
        }
    }

    fn matches(&self, m: &Message) -> bool {
        self.r#type.matches(&m.r#type)
            && self.state.matches(&m.state)
            && self.key.matches(m.key.as_deref().unwrap_or(""))
            && self.uses.matches(m.uses.as_deref().unwrap_or(""))
            && self.model.matches(&m.model_id)
    }
}

#[derive(Default)]
struct Handlers {
    message: Vec<Handler>,
    start: Vec<Handler>,
    complete: Vec<Handler>,
    error: Vec<Handler>,
}

pub(crate) struct ChannelInner {
    id: u64,
    filters: Filters,
    handlers: RwLock<Handlers>,
}

/// A durable channel's registration.
struct Durable {
    filters: Filters,
    /// The connected channel, if its client is here.
    live: Option<Arc<ChannelInner>>,
}

/// The engine's fan-out of messages to channels.
#[derive(Default)]
pub(crate) struct Emitter {
    channels: RwLock<Vec<Arc<ChannelInner>>>,
    durable: RwLock<HashMap<String, Durable>>,
    next_id: AtomicU64,
}

impl Emitter {
    /// Hands `messages` (of one committed transition, in order) to every
    /// channel whose filters they pass.
    pub fn deliver(&self, messages: &[Message]) {
        if messages.is_empty() {
            return;
        }
        let channels = self.channels.read().clone();
        for m in messages {
            for c in &channels {
                if !c.filters.matches(m) {
                    continue;
                }
                let h = c.handlers.read();
                for f in &h.message {
                    f(m);
                }
                if m.r#type == "workflow" {
                    let list = match m.state.as_str() {
                        "created" => &h.start,
                        "error" => &h.error,
                        _ => &h.complete,
                    };
                    for f in list {
                        f(m);
                    }
                }
            }
        }
    }

    fn remove(&self, id: u64) {
        self.channels.write().retain(|c| c.id != id);
        for d in self.durable.write().values_mut() {
            if d.live.as_ref().is_some_and(|l| l.id == id) {
                d.live = None;
            }
        }
    }

    /// Whether any durable channel is registered (if none, messages need
    /// no rows).
    pub fn has_durable(&self) -> bool {
        !self.durable.read().is_empty()
    }

    /// The durable channels that must receive `m`, and whether each is
    /// connected now.
    pub fn durable_targets(&self, m: &Message) -> Vec<(String, bool)> {
        self.durable
            .read()
            .iter()
            .filter(|(_, d)| d.filters.matches(m))
            .map(|(id, d)| (id.clone(), d.live.is_some()))
            .collect()
    }

    /// Registers (or re-registers) durable channel `id`; `live` when its
    /// client is connected.
    pub fn register_durable(
        &self,
        id: &str,
        options: &ChannelOptions,
        live: Option<Arc<ChannelInner>>,
    ) {
        let mut d = self.durable.write();
        let live = live.or_else(|| d.get(id).and_then(|x| x.live.clone()));
        d.insert(
            id.to_owned(),
            Durable {
                filters: Filters::new(options),
                live,
            },
        );
    }

    /// Forgets durable channel `id`.
    pub fn unregister_durable(&self, id: &str) {
        if let Some(d) = self.durable.write().remove(id)
            && let Some(live) = d.live
        {
            self.channels.write().retain(|c| c.id != live.id);
        }
    }

    /// Hands `m` again to the connected client of durable channel `id`;
    /// false when it is not connected.
    pub fn resend(&self, id: &str, m: &Message) -> bool {
        let live = self.durable.read().get(id).and_then(|d| d.live.clone());
        match live {
            Some(c) => {
                c.call(m);
                true
            }
            None => false,
        }
    }
}

impl ChannelInner {
    fn call(&self, m: &Message) {
        let h = self.handlers.read();
        for f in &h.message {
            f(m);
        }
    }
}

/// A subscription to the engine's messages (see the module docs). Dropping
/// the value does not unsubscribe; call [`close`](Self::close).
#[derive(Clone)]
pub struct Channel {
    inner: Arc<ChannelInner>,
    emitter: Arc<Emitter>,
    /// The stable id of a durable channel.
    durable_id: Option<String>,
    rt: Weak<Kernel>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("id", &self.inner.id)
            .finish_non_exhaustive()
    }
}

impl Channel {
    pub(crate) fn open(
        emitter: &Arc<Emitter>,
        options: &ChannelOptions,
        durable_id: Option<String>,
        rt: Weak<Kernel>,
    ) -> Self {
        let inner = Arc::new(ChannelInner {
            id: emitter.next_id.fetch_add(1, Ordering::Relaxed),
            filters: Filters::new(options),
            handlers: RwLock::default(),
        });
        emitter.channels.write().push(inner.clone());
        if let Some(id) = &durable_id {
            emitter.register_durable(id, options, Some(inner.clone()));
        }
        Self {
            inner,
            emitter: emitter.clone(),
            durable_id,
            rt,
        }
    }

    /// The stable id of a durable channel (`None` for a plain one).
    pub fn id(&self) -> Option<&str> {
        self.durable_id.as_deref()
    }

    fn durable(&self) -> Result<(&str, Arc<Kernel>), EngineError> {
        let id = self.durable_id.as_deref().ok_or_else(|| {
            EngineError::Channel(
                "only a durable channel (Engine::durable_channel) has deliveries to ack".into(),
            )
        })?;
        let rt = self.rt.upgrade().ok_or(EngineError::Closed)?;
        Ok((id, rt))
    }

    /// Acknowledges message `msg_id` on this durable channel: it is not
    /// re-sent any more. Unknown ids are an error.
    pub async fn ack(&self, msg_id: &str) -> Result<(), EngineError> {
        let (id, rt) = self.durable()?;
        rt.ack_delivery(id, msg_id).await
    }

    /// Hands every unacknowledged message of this durable channel to its
    /// handlers again, oldest first (call it after attaching handlers when
    /// reconnecting). Returns how many were sent.
    pub async fn resend_pending(&self) -> Result<usize, EngineError> {
        let (id, rt) = self.durable()?;
        rt.resend_channel(id).await
    }

    /// Calls `f` with every message that passes the filters.
    pub fn on_message(&self, f: impl Fn(&Message) + Send + Sync + 'static) -> &Self {
        self.inner.handlers.write().message.push(Arc::new(f));
        self
    }

    /// Calls `f` when a process starts (its workflow message `created`).
    pub fn on_start(&self, f: impl Fn(&Message) + Send + Sync + 'static) -> &Self {
        self.inner.handlers.write().start.push(Arc::new(f));
        self
    }

    /// Calls `f` when a process ends other than in error (completed,
    /// aborted, ...).
    pub fn on_complete(&self, f: impl Fn(&Message) + Send + Sync + 'static) -> &Self {
        self.inner.handlers.write().complete.push(Arc::new(f));
        self
    }

    /// Calls `f` when a process ends in error.
    pub fn on_error(&self, f: impl Fn(&Message) + Send + Sync + 'static) -> &Self {
        self.inner.handlers.write().error.push(Arc::new(f));
        self
    }

    /// Every message that passes the filters, on a queue (in the order
    /// clients are told).
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Message> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.on_message(move |m| {
            // A dropped receiver just stops listening.
            let _ = tx.send(m.clone());
        });
        rx
    }

    /// Stops the channel: no handler of it is called any more. A durable
    /// channel stays registered (its deliveries keep being recorded for
    /// its next connection); `Engine::remove_channel` forgets it.
    pub fn close(&self) {
        self.emitter.remove(self.inner.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(t: &str, state: &str, key: Option<&str>) -> Message {
        Message {
            r#type: t.into(),
            state: state.into(),
            key: key.map(str::to_owned),
            model_id: "m1".into(),
            ..Message::default()
        }
    }

    #[test]
    fn filters_are_globs_on_every_field() {
        let f = Filters::new(&ChannelOptions::default().with_type("act").with_key("app*"));
        assert!(f.matches(&msg("act", "created", Some("approve"))));
        assert!(!f.matches(&msg("act", "created", Some("review"))));
        assert!(!f.matches(&msg("step", "created", Some("approve"))));
        assert!(!f.matches(&msg("act", "created", None)), "no key is ''");
        let any = Filters::new(&ChannelOptions::default());
        assert!(any.matches(&msg("workflow", "completed", None)));
        let other_model = Filters::new(&ChannelOptions::default().with_model("m?x"));
        assert!(!other_model.matches(&msg("act", "created", None)));
    }

    #[test]
    fn handlers_get_messages_in_order_and_close_stops_them() {
        let emitter = Arc::new(Emitter::default());
        let ch = Channel::open(&emitter, &ChannelOptions::default(), None, Weak::new());
        let mut rx = ch.subscribe();
        let starts = Arc::new(AtomicU64::new(0));
        let s = starts.clone();
        ch.on_start(move |_| {
            s.fetch_add(1, Ordering::SeqCst);
        });
        emitter.deliver(&[
            msg("workflow", "created", None),
            msg("act", "created", Some("a")),
        ]);
        assert_eq!(
            rx.try_recv().map(|m| m.r#type).ok(),
            Some("workflow".into())
        );
        assert_eq!(rx.try_recv().map(|m| m.r#type).ok(), Some("act".into()));
        assert_eq!(starts.load(Ordering::SeqCst), 1);
        ch.close();
        emitter.deliver(&[msg("act", "created", None)]);
        assert!(rx.try_recv().is_err(), "a closed channel hears nothing");
    }
}
