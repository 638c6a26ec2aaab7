//! The master a group of Redis Sentinels names: asked of the sentinels
//! when the store connects, and again after any call fails in a way that
//! says the master may have moved (the connection dropped or refused, a
//! timeout, `READONLY` from a master turned replica, `MASTERDOWN`). The
//! failed call fails (retryably: the engine retries, nothing is
//! acknowledged); the next one goes to the master the sentinels name then
//! — after a failover, the promoted replica. The client checks that the
//! server it is sent to calls itself a master (`ROLE`).
//!
//! One multiplexed connection is shared by every call (as the single
//! server's connection manager is), so `WAIT` after a write covers it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{
    AsyncConnectionConfig, Cmd, IntoConnectionInfo, RedisError, RedisFuture, RedisResult, Value,
};

/// The current master's connection, found through the sentinels.
#[derive(Clone)]
pub(crate) struct SentinelLink {
    inner: Arc<Inner>,
}

struct Inner {
    /// Asks the sentinels; one lookup at a time.
    sentinels: tokio::sync::Mutex<SentinelClient>,
    /// The master's connection and its generation (a failed call forgets
    /// the connection it used, not a newer one).
    current: Mutex<Option<(u64, MultiplexedConnection)>>,
    /// The generation the next connection gets.
    generations: AtomicU64,
    config: AsyncConnectionConfig,
    /// The master's name, for messages.
    master: String,
}

impl SentinelLink {
    /// Connects to the master `master` that the sentinels at `sentinels`
    /// (`redis://HOST:PORT` each) name.
    pub(crate) async fn connect(
        sentinels: &[String],
        master: &str,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> RedisResult<Self> {
        // The master is reached with the sentinels' credentials (the
        // first sentinel URL's user and password), as most setups share
        // them.
        let first = sentinels
            .first()
            .map(String::as_str)
            .unwrap_or_default()
            .into_connection_info()?;
        let node = SentinelNodeConnectionInfo::default()
            .set_redis_connection_info(first.redis_settings().clone());
        let client = SentinelClient::build(
            sentinels.iter().map(String::as_str).collect(),
            master.to_owned(),
            Some(node),
            SentinelServerType::Master,
        )?;
        let link = Self {
            inner: Arc::new(Inner {
                sentinels: tokio::sync::Mutex::new(client),
                current: Mutex::new(None),
                generations: AtomicU64::new(0),
                config: AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(connect_timeout))
                    .set_response_timeout(Some(response_timeout)),
                master: master.to_owned(),
            }),
        };
        link.connection().await?;
        Ok(link)
    }

    /// The master's name.
    pub(crate) fn master(&self) -> &str {
        &self.inner.master
    }

    /// The current master's connection, looked up when there is none.
    async fn connection(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        if let Some(c) = self.inner.current.lock().clone() {
            return Ok(c);
        }
        let mut sentinels = self.inner.sentinels.lock().await;
        // Another call may have found the master while this one waited.
        if let Some(c) = self.inner.current.lock().clone() {
            return Ok(c);
        }
        let conn = sentinels
            .get_async_connection_with_config(&self.inner.config)
            .await?;
        let generation = self.inner.generations.fetch_add(1, Ordering::Relaxed);
        *self.inner.current.lock() = Some((generation, conn.clone()));
        tracing::info!(
            store = "redis",
            master = %self.inner.master,
            "connected to the master the sentinels name"
        );
        Ok((generation, conn))
    }

    /// After a call on connection `generation` failed with `e`: forgets
    /// that connection when `e` says the master may have moved.
    fn after_error(&self, generation: u64, e: &RedisError) {
        if !master_may_have_moved(e) {
            return;
        }
        let mut current = self.inner.current.lock();
        if current.as_ref().is_some_and(|(g, _)| *g == generation) {
            *current = None;
            drop(current);
            tracing::warn!(
                store = "redis",
                master = %self.inner.master,
                "the master may have moved ({e}): asking the sentinels again"
            );
        }
    }
}

/// Whether `e` says the server may no longer be the master.
fn master_may_have_moved(e: &RedisError) -> bool {
    if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout() {
        return true;
    }
    matches!(e.code(), Some("READONLY" | "MASTERDOWN" | "LOADING"))
}

impl ConnectionLike for SentinelLink {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (generation, mut conn) = self.connection().await?;
            let answer = conn.req_packed_command(cmd).await;
            if let Err(e) = &answer {
                self.after_error(generation, e);
            }
            answer
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (generation, mut conn) = self.connection().await?;
            let answer = conn.req_packed_commands(pipeline, offset, count).await;
            if let Err(e) = &answer {
                self.after_error(generation, e);
            }
            answer
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}
