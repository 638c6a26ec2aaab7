//! Finding deliveries of durable channels: [`DeliveryQuery`] — by channel,
//! state (`failed`: the dead letters), process — answered from an index,
//! a page at a time with a cursor, and counted.
//!
//! Which index a query walks: the state's entries of the state-and-time
//! index when it filters on a state, else the channel's entries of the
//! channel-and-time index (oldest first either way), else the process
//! index when it names a process, else the channel-and-time index whole
//! (channel by channel, oldest first). Other filters are checked on the
//! rows the walk reads.

use serde::{Deserialize, Serialize};

use crate::durable::{Filter, Query};
use crate::engine::api::executor::Executor;
use crate::engine::api::find::{MAX_PAGE, count_pages, decode_cursor, encode_cursor};
use crate::engine::persist::delivery_rows::DeliveryRow;
use crate::engine::persist::reads::Walk;
use crate::engine::types::error::EngineError;
use crate::engine::types::info::DeliveryInfo;
use crate::engine::types::info::DeliveryState;
use crate::engine::types::page::Page;

/// What deliveries to find (every field optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryQuery {
    /// Of this durable channel.
    pub channel: Option<String>,
    /// In this state (`failed`: the dead letters).
    pub state: Option<DeliveryState>,
    /// Of the messages of this process.
    pub pid: Option<String>,
    /// Newest first.
    pub descending: bool,
    /// Also read each delivery's message ([`DeliveryInfo::message`]): a
    /// listing of the stored messages by channel, state or process.
    pub messages: bool,
    /// Deliveries per page (default 100, at most [`MAX_PAGE`]).
    pub limit: Option<usize>,
    /// Where the previous page ended ([`Page::next`](crate::engine::Page::next)).
    pub cursor: Option<String>,
    /// Each item's own cursor too ([`Page::cursors`](crate::engine::Page::cursors);
    /// asked by a cluster node, not part of the query's JSON).
    #[serde(skip)]
    pub item_cursors: bool,
}

impl DeliveryQuery {
    /// Every delivery.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only deliveries of channel `channel`.
    pub fn channel(mut self, channel: &str) -> Self {
        self.channel = Some(channel.to_owned());
        self
    }

    /// Only deliveries in `state`.
    pub fn state(mut self, state: DeliveryState) -> Self {
        self.state = Some(state);
        self
    }

    /// Pages of `n`.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// The page after the one that returned `cursor`.
    pub fn after(mut self, cursor: Option<String>) -> Self {
        self.cursor = cursor;
        self
    }
}

impl Executor {
    /// `msg().find` ([`DeliveryOps::find`](super::DeliveryOps::find)).
    pub(crate) async fn find_deliveries(
        &self,
        q: &DeliveryQuery,
    ) -> Result<Page<DeliveryInfo>, EngineError> {
        self.need_operator("reading deliveries")?;
        let limit = q.limit.unwrap_or(100).clamp(1, MAX_PAGE);
        let mut query = Query::new().limit(limit);
        query.after = q.cursor.as_deref().map(decode_cursor).transpose()?;
        if let Some(c) = &q.channel {
            query = query.filter(Filter::eq("channel", c.as_str()));
        }
        if let Some(s) = q.state {
            query = query.filter(Filter::eq("state", s.as_str()));
        }
        if let Some(p) = &q.pid {
            query = query.filter(Filter::eq("pid", p.as_str()));
        }
        let walk = match (&q.state, &q.channel, &q.pid) {
            (Some(s), _, _) => Some(Walk::DeliveriesInState(*s)),
            (None, Some(c), _) => Some(Walk::DeliveriesOfChannel(c)),
            // The process index pins the walk to its deliveries.
            (None, None, Some(_)) => None,
            (None, None, None) => Some(Walk::Deliveries),
        };
        let reads = self.rt.reads();
        let page = reads
            .page::<DeliveryRow>(walk, q.descending, &query)
            .await?;
        let mut deliveries: Vec<DeliveryInfo> = page.rows.iter().map(DeliveryInfo::from).collect();
        if q.messages {
            // One multi-read for the page's messages.
            let ids: Vec<&str> = page.rows.iter().map(|d| d.msg_id.as_str()).collect();
            for (d, m) in deliveries.iter_mut().zip(reads.messages(&ids).await?) {
                d.message = m;
            }
        }
        let out = Page::new(deliveries, page.next.as_deref().map(encode_cursor));
        Ok(if q.item_cursors {
            out.with_cursors(page.keys.iter().map(|k| encode_cursor(k)).collect())
        } else {
            out
        })
    }

    /// `msg().count_matching` ([`DeliveryOps::count_matching`](super::DeliveryOps::count_matching)).
    pub(crate) async fn count_deliveries_matching(
        &self,
        q: &DeliveryQuery,
    ) -> Result<usize, EngineError> {
        self.need_operator("reading deliveries")?;
        let walk = match (&q.state, &q.channel, &q.pid) {
            (Some(s), None, None) => Some(Walk::DeliveriesInState(*s)),
            (None, Some(c), None) => Some(Walk::DeliveriesOfChannel(c)),
            (None, None, None) => Some(Walk::Deliveries),
            _ => None,
        };
        if let Some(walk) = walk {
            return Ok(self.rt.reads().count(walk).await?);
        }
        count_pages(|cursor| {
            let q = DeliveryQuery {
                cursor,
                limit: Some(MAX_PAGE),
                ..q.clone()
            };
            async move {
                let page = self.find_deliveries(&q).await?;
                Ok((page.items.len(), page.next))
            }
        })
        .await
    }
}
