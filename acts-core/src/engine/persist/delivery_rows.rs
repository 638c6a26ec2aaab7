//! The rows of durable channels: the channels' registrations, the
//! deliveries owed to them and the messages they carry — read by the
//! delivery service, written in transitions' batches (the ops below).

use std::sync::Arc;

use acts_store::{BatchOp, KvStore};

use serde::{Deserialize, Serialize};

use crate::durable::{Collection, CollectionError, Filter, IndexValue, Query, impl_row};

use crate::engine::types::info::DeliveryState;

/// A message a process emitted, kept while durable channels have not
/// settled its deliveries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageRow {
    /// The message id.
    pub id: String,
    /// Its process.
    pub pid: String,
    /// The message.
    pub message: crate::scheduler::Message,
}

impl_row!(MessageRow, "messages", version = 1, |r| r.id.clone(), {
    "pid" => IndexValue::Str(r.pid.clone()),
});

/// One message owed to one durable channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryRow {
    /// The channel id.
    pub channel: String,
    /// The message id.
    pub msg_id: String,
    /// The message's process.
    pub pid: String,
    /// The message's task.
    #[serde(default)]
    pub tid: String,
    /// Where it stands.
    pub state: DeliveryState,
    /// How many times it was sent.
    pub tries: u32,
    /// When it is re-sent next (ms on the engine clock).
    pub next_at: i64,
    /// When it was created (ms).
    pub created_at: i64,
    /// Creation order within the same millisecond (messages of one
    /// transition keep their order).
    #[serde(default)]
    pub seq: u64,
    /// Whether the delivery is settled (closed) when its task ends: the
    /// task's `created` message (an interrupt's question) goes stale once
    /// it is answered; an end message (a step's `error`, a process's end
    /// before a retry) stays owed until acknowledged. Rows written before
    /// this field was added read as closable, as they were treated.
    #[serde(default = "closable_by_default")]
    pub closes_with_task: bool,
}

fn closable_by_default() -> bool {
    true
}

/// The row id of the delivery of message `msg_id` to channel `channel`.
pub fn delivery_row_id(channel: &str, msg_id: &str) -> String {
    format!("{channel}/{msg_id}")
}

impl_row!(DeliveryRow, "deliveries", version = 1, |r| delivery_row_id(&r.channel, &r.msg_id), {
    "channel" => IndexValue::Str(r.channel.clone()),
    "pid" => IndexValue::Str(r.pid.clone()),
    "state" => IndexValue::Str(r.state.as_str().to_owned()),
    // Listings of one state or one channel, oldest first.
    "state_time" => IndexValue::Pair(r.state.as_str().to_owned(), r.created_at, i64::try_from(r.seq).unwrap_or(i64::MAX)),
    "channel_time" => IndexValue::Pair(r.channel.clone(), r.created_at, i64::try_from(r.seq).unwrap_or(i64::MAX)),
});

/// The [`MetaRow`] that says every delivery row's index entries include
/// those of [`DELIVERY_INDEX_GENERATION`] (see [`PROC_INDEX`]).
pub const DELIVERY_INDEX: &str = "delivery_index";

/// The generation of [`DeliveryRow`]'s index set.
pub const DELIVERY_INDEX_GENERATION: u64 = 2;

/// A durable channel's registration: its filters keep recording
/// deliveries while its client is away (e.g. across an engine restart).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelRow {
    /// The channel id.
    pub id: String,
    /// Its filters.
    pub options: crate::engine::types::filter::ChannelOptions,
}

impl_row!(ChannelRow, "channels", version = 1, |r| r.id.clone(), {});

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
