//! The connection every call of a store goes through — to one server (a
//! connection manager that reconnects), to the master a group of Redis
//! Sentinels names (`sentinel.rs`), or to a Redis Cluster — and the
//! count of its traffic ([`StoreIo`]): each request that waits for an
//! answer is a round trip, a pipeline's commands are counted one by one,
//! the bytes out are the requests as packed on the wire, the bytes in the
//! answers' payload as decoded.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use acts_store::StoreIo;
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::RoutingInfo;
use redis::{Arg, Cmd, RedisResult, Value};

use crate::sentinel::SentinelLink;

/// One server, the master Sentinel names, or a Redis Cluster.
#[derive(Clone)]
pub(crate) enum Link {
    Single(ConnectionManager),
    Sentinel(SentinelLink),
    Cluster(ClusterConnection),
}

/// A counted connection. Clones share the connection and the counts.
#[derive(Clone)]
pub(crate) struct Conn {
    pub(crate) link: Link,
    io: Arc<Counts>,
}

#[derive(Default)]
struct Counts {
    round_trips: AtomicU64,
    commands: AtomicU64,
    bytes_out: AtomicU64,
    bytes_in: AtomicU64,
}

impl Conn {
    pub(crate) fn new(link: Link) -> Self {
        Self {
            link,
            io: Arc::default(),
        }
    }

    /// The same connection with counts of its own (another namespace's
    /// store counts its own traffic).
    pub(crate) fn with_own_counts(&self) -> Self {
        Self {
            link: self.link.clone(),
            io: Arc::default(),
        }
    }

    /// The traffic so far.
    pub(crate) fn io(&self) -> StoreIo {
        let c = &self.io;
        let mut io = StoreIo::default();
        io.round_trips = c.round_trips.load(Ordering::Relaxed);
        io.commands = c.commands.load(Ordering::Relaxed);
        io.bytes_out = c.bytes_out.load(Ordering::Relaxed);
        io.bytes_in = c.bytes_in.load(Ordering::Relaxed);
        io
    }

    fn note(&self, commands: usize, bytes_out: u64) {
        let c = &self.io;
        c.round_trips.fetch_add(1, Ordering::Relaxed);
        c.commands.fetch_add(commands as u64, Ordering::Relaxed);
        c.bytes_out.fetch_add(bytes_out, Ordering::Relaxed);
    }

    fn note_in(io: &Counts, bytes_in: u64) {
        io.bytes_in.fetch_add(bytes_in, Ordering::Relaxed);
    }

    /// Sends `cmd` to the node(s) `route` names on a Redis Cluster
    /// connection `c` (counted as one round trip).
    pub(crate) async fn route_command(
        &self,
        c: &ClusterConnection,
        cmd: Cmd,
        route: RoutingInfo,
    ) -> RedisResult<Value> {
        self.note(1, packed_len(&cmd));
        let mut c = c.clone();
        let answer = c.route_command(cmd, route).await;
        if let Ok(v) = &answer {
            Self::note_in(&self.io, value_len(v));
        }
        answer
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> redis::RedisFuture<'a, Value> {
        self.note(1, packed_len(cmd));
        let io = self.io.clone();
        let sent = match &mut self.link {
            Link::Single(c) => c.req_packed_command(cmd),
            Link::Sentinel(c) => c.req_packed_command(cmd),
            Link::Cluster(c) => c.req_packed_command(cmd),
        };
        Box::pin(async move {
            let v = sent.await?;
            Self::note_in(&io, value_len(&v));
            Ok(v)
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<Value>> {
        let out: u64 = pipeline.cmd_iter().map(packed_len).sum();
        self.note(pipeline.cmd_iter().count(), out);
        let io = self.io.clone();
        let sent = match &mut self.link {
            Link::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Link::Sentinel(c) => c.req_packed_commands(pipeline, offset, count),
            Link::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        };
        Box::pin(async move {
            let vs = sent.await?;
            Self::note_in(&io, vs.iter().map(value_len).sum());
            Ok(vs)
        })
    }

    fn get_db(&self) -> i64 {
        match &self.link {
            Link::Single(c) => c.get_db(),
            Link::Sentinel(c) => c.get_db(),
            Link::Cluster(c) => c.get_db(),
        }
    }
}

/// The digits of `n` in decimal.
fn digits(n: usize) -> u64 {
    let mut d = 1;
    let mut n = n / 10;
    while n > 0 {
        d += 1;
        n /= 10;
    }
    d
}

/// The bytes of `cmd` as RESP puts it on the wire: `*N\r\n`, then
/// `$LEN\r\nDATA\r\n` for each argument.
fn packed_len(cmd: &Cmd) -> u64 {
    let args = cmd.args_iter();
    let n = args.len();
    let mut len = 1 + digits(n) + 2;
    for a in args {
        if let Arg::Simple(data) = a {
            len += 1 + digits(data.len()) + 2 + data.len() as u64 + 2;
        }
    }
    len
}

/// The payload of an answer: the bytes of its strings and numbers, and of
/// the arrays' and maps' elements.
fn value_len(v: &Value) -> u64 {
    match v {
        Value::BulkString(b) => b.len() as u64,
        Value::SimpleString(s) => s.len() as u64,
        Value::Array(vs) | Value::Set(vs) => vs.iter().map(value_len).sum(),
        Value::Map(kvs) => kvs.iter().map(|(k, v)| value_len(k) + value_len(v)).sum(),
        Value::Int(_) | Value::Double(_) => 8,
        Value::Okay | Value::Boolean(_) => 2,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::packed_len;

    #[test]
    fn a_commands_wire_size_is_its_resp_encoding() {
        let mut cmd = redis::cmd("SET");
        cmd.arg("key").arg("value");
        // *3\r\n $3\r\nSET\r\n $3\r\nkey\r\n $5\r\nvalue\r\n
        assert_eq!(packed_len(&cmd), 4 + 9 + 9 + 11);
        assert_eq!(packed_len(&cmd), cmd.get_packed_command().len() as u64);
        let mut big = redis::cmd("EVALSHA");
        big.arg("x".repeat(1234)).arg(0);
        assert_eq!(packed_len(&big), big.get_packed_command().len() as u64);
    }
}
