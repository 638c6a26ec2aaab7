//! The rows of durable channels: the channels' registrations, the
//! deliveries owed to them and the messages they carry — read by the
//! delivery service, written in transitions' batches (the ops below).

use std::sync::Arc;

use acts_store::{BatchOp, KvStore};

use crate::durable::{Collection, CollectionError, Filter, Query};

use crate::engine::persist::rows::{ChannelRow, DeliveryRow, MessageRow, delivery_row_id};
use crate::engine::types::info::DeliveryState;

/// The channel, delivery and message rows of one store.
pub(crate) struct DeliveryRows<'s> {
    store: &'s Arc<dyn KvStore>,
}

impl<'s> DeliveryRows<'s> {
    pub(crate) fn new(store: &'s Arc<dyn KvStore>) -> Self {
        Self { store }
    }

    fn deliveries(&self) -> Collection<DeliveryRow> {
        Collection::new(self.store.clone())
    }

    /// The registration of durable channel `id`.
    pub(crate) async fn channel(&self, id: &str) -> Result<Option<ChannelRow>, CollectionError> {
        Collection::<ChannelRow>::new(self.store.clone())
            .get(id)
            .await
    }

    /// Every registered durable channel.
    pub(crate) async fn channels(&self) -> Result<Vec<ChannelRow>, CollectionError> {
        Collection::<ChannelRow>::new(self.store.clone())
            .query_all(&Query::new())
            .await
    }

    /// The delivery of message `msg_id` to `channel`.
    pub(crate) async fn get(
        &self,
        channel: &str,
        msg_id: &str,
    ) -> Result<Option<DeliveryRow>, CollectionError> {
        self.deliveries()
            .get(&delivery_row_id(channel, msg_id))
            .await
    }

    /// Every delivery of process `pid`.
    pub(crate) async fn of_process(&self, pid: &str) -> Result<Vec<DeliveryRow>, CollectionError> {
        self.deliveries()
            .query_all(&Query::new().filter(Filter::eq("pid", pid)))
            .await
    }

    /// The deliveries to `channel` (every channel: `None`) in `state`
    /// (every state: `None`), oldest first.
    pub(crate) async fn matching(
        &self,
        channel: Option<&str>,
        state: Option<DeliveryState>,
    ) -> Result<Vec<DeliveryRow>, CollectionError> {
        let mut q = Query::new();
        if let Some(c) = channel {
            q = q.filter(Filter::eq("channel", c));
        }
        if let Some(s) = state {
            q = q.filter(Filter::eq("state", s.as_str()));
        }
        let mut rows = self.deliveries().query_all(&q).await?;
        rows.sort_by(|a, b| {
            (a.created_at, a.seq, &a.msg_id).cmp(&(b.created_at, b.seq, &b.msg_id))
        });
        Ok(rows)
    }

    /// The stored message `msg_id`.
    pub(crate) async fn message(
        &self,
        msg_id: &str,
    ) -> Result<Option<MessageRow>, CollectionError> {
        Collection::<MessageRow>::new(self.store.clone())
            .get(msg_id)
            .await
    }

    /// Every stored message of process `pid`.
    pub(crate) async fn messages_of(&self, pid: &str) -> Result<Vec<MessageRow>, CollectionError> {
        Collection::<MessageRow>::new(self.store.clone())
            .query_all(&Query::new().filter(Filter::eq("pid", pid)))
            .await
    }

    /// The op that stores channel `row`'s registration.
    pub(crate) fn put_channel_op(row: &ChannelRow) -> BatchOp {
        Collection::<ChannelRow>::put_row_op(row)
    }

    /// The op that deletes channel `id`'s registration.
    pub(crate) fn delete_channel_op(id: &str) -> BatchOp {
        BatchOp::delete(Collection::<ChannelRow>::row_key(id))
    }

    /// The ops that store a new delivery `row`.
    pub(crate) fn insert_ops(row: &DeliveryRow) -> Vec<BatchOp> {
        Collection::upsert_ops(None, row)
    }

    /// The ops that change delivery `old` into `new` (its index entries
    /// follow).
    pub(crate) fn update_ops(old: &DeliveryRow, new: &DeliveryRow) -> Vec<BatchOp> {
        Collection::upsert_ops(Some(old), new)
    }

    /// The op that rewrites delivery `row` whose indexed fields did not
    /// change.
    pub(crate) fn rewrite_op(row: &DeliveryRow) -> BatchOp {
        Collection::put_row_op(row)
    }

    /// The ops that delete delivery `row` with its index entries.
    pub(crate) fn delete_ops(row: &DeliveryRow) -> Vec<BatchOp> {
        Collection::delete_ops(row)
    }

    /// The ops that store a new message `row`.
    pub(crate) fn insert_message_ops(row: &MessageRow) -> Vec<BatchOp> {
        Collection::upsert_ops(None, row)
    }

    /// The ops that delete message `row`.
    pub(crate) fn delete_message_ops(row: &MessageRow) -> Vec<BatchOp> {
        Collection::delete_ops(row)
    }
}
