//! Channels: how clients receive messages.
//!
//! A [`Channel`] subscribes with glob filters on a message's type, state,
//! key, package (`uses`) and model id. Its handlers run after the
//! transition that produced a message is durable, in the order the process
//! produced them, on the process's lane: a handler sees the process as it
//! is after that transition and must not block (spawn work instead, or use
//! [`Channel::subscribe`] to receive messages on a queue).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use parking_lot::RwLock;
use tokio::sync::mpsc;

use crate::scheduler::Message;

use crate::engine::kernel::emitter::{ChannelInner, Emitter};
use crate::engine::kernel::shared::Kernel;
use crate::engine::services::{On, Services};
use crate::engine::types::error::EngineError;
use crate::engine::types::filter::{ChannelOptions, Filters};

/// A subscription to the engine's messages (see the module docs). Dropping
/// the value does not unsubscribe; call [`close`](Self::close).
#[derive(Clone)]
pub struct Channel {
    inner: Arc<ChannelInner>,
    emitter: Arc<Emitter>,
    /// The stable id of a durable channel.
    durable_id: Option<String>,
    rt: Weak<Kernel>,
    services: Weak<Services>,
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
        services: Weak<Services>,
    ) -> Self {
        let inner = Arc::new(ChannelInner {
            id: emitter.next_id.fetch_add(1, Ordering::Relaxed),
            filters: Filters::new(options),
            handlers: RwLock::default(),
        });
        emitter.add(inner.clone());
        if let Some(id) = &durable_id {
            emitter.register_durable(id, options, Some(inner.clone()));
        }
        Self {
            inner,
            emitter: emitter.clone(),
            durable_id,
            rt,
            services,
        }
    }

    /// The stable id of a durable channel (`None` for a plain one).
    pub fn id(&self) -> Option<&str> {
        self.durable_id.as_deref()
    }

    fn durable(&self) -> Result<(&str, Arc<Kernel>, Arc<Services>), EngineError> {
        let id = self.durable_id.as_deref().ok_or_else(|| {
            EngineError::Channel(
                "only a durable channel (ChannelOps::durable) has deliveries to ack".into(),
            )
        })?;
        let rt = self.rt.upgrade().ok_or(EngineError::Closed)?;
        let services = self.services.upgrade().ok_or(EngineError::Closed)?;
        Ok((id, rt, services))
    }

    /// Acknowledges message `msg_id` on this durable channel: it is not
    /// re-sent any more. Acking a delivery that is already settled (acked,
    /// or closed because its task has ended) changes nothing. Unknown ids
    /// are an error.
    pub async fn ack(&self, msg_id: &str) -> Result<(), EngineError> {
        let (id, rt, services) = self.durable()?;
        On::new(&rt, &services).ack_delivery(id, msg_id).await
    }

    /// Hands every unacknowledged message of this durable channel to its
    /// handlers again, oldest first (call it after attaching handlers when
    /// reconnecting). Returns how many were sent.
    pub async fn resend_pending(&self) -> Result<usize, EngineError> {
        let (id, rt, services) = self.durable()?;
        On::new(&rt, &services).resend_channel(id).await
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
    /// its next connection); `ChannelOps::remove` forgets it.
    pub fn close(&self) {
        self.emitter.remove(self.inner.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::types::filter::tests::msg;
    use crate::scheduler::MessageType;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn handlers_get_messages_in_order_and_close_stops_them() {
        let emitter = Arc::new(Emitter::default());
        let ch = Channel::open(
            &emitter,
            &ChannelOptions::default(),
            None,
            Weak::new(),
            Weak::new(),
        );
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
            Some(MessageType::Workflow)
        );
        assert_eq!(rx.try_recv().map(|m| m.r#type).ok(), Some(MessageType::Act));
        assert_eq!(starts.load(Ordering::SeqCst), 1);
        ch.close();
        emitter.deliver(&[msg("act", "created", None)]);
        assert!(rx.try_recv().is_err(), "a closed channel hears nothing");
    }
}
