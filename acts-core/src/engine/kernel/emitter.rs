//! [`Emitter`]: the engine's fan-out of committed messages to the channels
//! subscribed here, and the registrations of durable channels.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use crate::engine::types::filter::{ChannelOptions, Filters};
use crate::scheduler::{Message, MessageInterest, MessageState, MessageType};

/// A message handler of a channel.
pub(crate) type Handler = Arc<dyn Fn(&Message) + Send + Sync>;

/// The handlers a channel runs for its messages.
#[derive(Default)]
pub(crate) struct Handlers {
    pub(crate) message: Vec<Handler>,
    pub(crate) start: Vec<Handler>,
    pub(crate) complete: Vec<Handler>,
    pub(crate) error: Vec<Handler>,
}

/// One subscribed channel: its filters and handlers.
pub(crate) struct ChannelInner {
    pub(crate) id: u64,
    pub(crate) filters: Filters,
    pub(crate) handlers: RwLock<Handlers>,
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
    pub(crate) next_id: AtomicU64,
    /// The [`MessageInterest`] of the channels and durable channels, kept
    /// as they come and go (none: no message is built).
    interest: AtomicU64,
}

impl Emitter {
    /// Which messages any channel may take.
    pub fn interest(&self) -> MessageInterest {
        MessageInterest::from_bits(self.interest.load(Ordering::Acquire))
    }

    /// Derives [`interest`](Self::interest) again (after a channel came or
    /// went; called with no lock held).
    fn refresh_interest(&self) {
        let interest = if self.has_durable() {
            // Deliveries settle by the messages of ending tasks.
            MessageInterest::ALL
        } else {
            self.channels
                .read()
                .iter()
                .fold(MessageInterest::NONE, |i, c| i.union(c.filters.interest()))
        };
        self.interest.store(interest.bits(), Ordering::Release);
    }

    /// Adds a subscribed channel.
    pub(crate) fn add(&self, channel: Arc<ChannelInner>) {
        self.channels.write().push(channel);
        self.refresh_interest();
    }

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
                if m.r#type == MessageType::Workflow && m.state != MessageState::Stuck {
                    let list = match m.state {
                        MessageState::Created => &h.start,
                        MessageState::Error => &h.error,
                        _ => &h.complete,
                    };
                    for f in list {
                        f(m);
                    }
                }
            }
        }
    }

    pub(crate) fn remove(&self, id: u64) {
        self.channels.write().retain(|c| c.id != id);
        for d in self.durable.write().values_mut() {
            if d.live.as_ref().is_some_and(|l| l.id == id) {
                d.live = None;
            }
        }
        self.refresh_interest();
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
        {
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
        self.refresh_interest();
    }

    /// Forgets durable channel `id`.
    pub fn unregister_durable(&self, id: &str) {
        let removed = self.durable.write().remove(id);
        if let Some(live) = removed.and_then(|d| d.live) {
            self.channels.write().retain(|c| c.id != live.id);
        }
        self.refresh_interest();
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
    pub(crate) fn call(&self, m: &Message) {
        let h = self.handlers.read();
        for f in &h.message {
            f(m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel(id: u64, options: &ChannelOptions) -> Arc<ChannelInner> {
        Arc::new(ChannelInner {
            id,
            filters: Filters::new(options),
            handlers: RwLock::default(),
        })
    }

    #[test]
    fn the_interest_follows_the_channels_and_is_everything_with_a_durable_one() {
        let e = Emitter::default();
        assert_eq!(
            e.interest(),
            MessageInterest::NONE,
            "no channel: no message"
        );
        let ends = ChannelOptions::default()
            .with_type("workflow")
            .with_state("*e*");
        e.add(channel(1, &ends));
        let i = e.interest();
        assert!(i.wants(MessageType::Workflow, MessageState::Completed));
        assert!(i.wants(MessageType::Workflow, MessageState::Error));
        assert!(!i.wants(MessageType::Workflow, MessageState::Stuck));
        assert!(!i.wants(MessageType::Act, MessageState::Completed));
        e.add(channel(2, &ChannelOptions::default().with_type("act")));
        assert!(e.interest().wants(MessageType::Act, MessageState::Created));
        e.register_durable("d", &ends, None);
        assert_eq!(e.interest(), MessageInterest::ALL);
        e.unregister_durable("d");
        assert!(!e.interest().wants(MessageType::Step, MessageState::Created));
        e.remove(2);
        assert!(!e.interest().wants(MessageType::Act, MessageState::Created));
        e.remove(1);
        assert_eq!(e.interest(), MessageInterest::NONE);
        // Default options take every message.
        e.add(channel(3, &ChannelOptions::default()));
        assert_eq!(
            e.interest().bits().count_ones() as usize,
            MessageType::ALL.len() * MessageState::ALL.len()
        );
    }
}
