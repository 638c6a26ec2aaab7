//! Acknowledgements applied behind the answer: a subscriber's client
//! acks every message before it handles the next (`acts-channel`'s
//! auto-ack), so an ack that waited for its own commit would put one
//! commit round trip between any two messages. `msg:ack` is answered once
//! the ack is handed over; acks in flight commit together (the writer
//! groups them), at most [`IN_FLIGHT`] at a time (past that an ack waits
//! for a place), and all of them before the server stops. An ack lost to a
//! crash only means the message is sent again — delivery is at least once
//! and clients tell a re-sent message by its id.
//!
//! May use: the facade `acts`, tokio.

use std::sync::Arc;

use acts::Engine;
use tokio::sync::Semaphore;

/// Most acks in flight.
pub(crate) const IN_FLIGHT: u32 = 4096;

/// The acks of one server.
pub(crate) struct Acks {
    engine: Engine,
    places: Arc<Semaphore>,
}

impl Acks {
    pub(crate) fn new(engine: Engine) -> Self {
        Self {
            engine,
            places: Arc::new(Semaphore::new(IN_FLIGHT as usize)),
        }
    }

    /// Applies the ack of `msg_id` on durable `channel` behind the answer.
    pub(crate) async fn ack(&self, channel: &str, msg_id: &str) {
        let Ok(place) = self.places.clone().acquire_owned().await else {
            return;
        };
        let (engine, channel, msg_id) =
            (self.engine.clone(), channel.to_owned(), msg_id.to_owned());
        tokio::spawn(async move {
            if let Err(e) = engine.channels().ack(&channel, &msg_id).await {
                tracing::debug!(%channel, %msg_id, error = %e, "an ack was not applied");
            }
            drop(place);
        });
    }

    /// Waits until every ack handed over is applied (at a stop).
    pub(crate) async fn drain(&self) {
        let _ = self.places.acquire_many(IN_FLIGHT).await;
    }
}
