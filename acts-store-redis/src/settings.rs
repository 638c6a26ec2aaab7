//! What the Redis server keeps of what it acknowledged: its eviction
//! policy and its persistence, read with `CONFIG GET` when the store
//! opens, on every [`health`](acts_store::KvStore::health) check, and
//! again while the store is used (a `CONFIG SET` later, a failover to a
//! replica set up differently).
//!
//! - A server that **evicts keys** (`maxmemory-policy` other than
//!   `noeviction`) would silently drop processes the engine acknowledged:
//!   the store refuses to open on it, and refuses every write from the
//!   moment it sees the policy change — unless opened with
//!   `allow_eviction`.
//! - **Persistence** weaker than an append-only file synced on every write
//!   is reported ([`Persistence::Weak`]) with what a crash loses and which
//!   setting to change.
//! - A server that does not let us read its settings (managed services
//!   rename or forbid `CONFIG`) is reported as [`Persistence::Unknown`]:
//!   nothing is refused, and the operator is pointed at the docs.
//!
//! On a Redis Cluster every node is read (a replica becomes a master on a
//! failover): the weakest node decides.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use acts_store::{ErrorKind, Persistence, StoreError, StoreOp, StoreResult};
use parking_lot::RwLock;
use redis::Value;

use crate::conn::{Conn, Link};
use crate::error::{BACKEND, map_err};

/// The settings read from every node.
const SETTINGS: [&str; 4] = ["maxmemory-policy", "appendonly", "appendfsync", "save"];

/// Where an operator reads what each setting means.
const DOCS: &str = "docs/OPERATIONS.md, \"Redis settings\"";

/// What the last look at the server found.
#[derive(Debug, Clone)]
struct Observed {
    /// Why writes are refused (the server evicts keys).
    refusal: Option<String>,
    /// The first node seen set to evict keys, and its policy
    /// (`maxmemory-policy allkeys-lru at the server`), allowed or not.
    evicting: Option<String>,
    persistence: Persistence,
    /// Keys evicted so far, summed over the nodes (`INFO stats`), if the
    /// server says.
    evicted_keys: Option<u64>,
}

/// The server's settings as last seen, shared by every handle of one
/// connection (namespaces included).
#[derive(Debug)]
pub(crate) struct Watch {
    allow_eviction: bool,
    seen: RwLock<Observed>,
    /// Keys the server had evicted when the store opened (the baseline of
    /// [`Watch::lapse`]'s count).
    evicted_at_open: Option<u64>,
    /// What happened while the store was used that may have lost
    /// acknowledged work (the server set to evict keys, keys evicted):
    /// kept once seen, whatever the server is set to later.
    lapse: RwLock<Option<String>>,
}

impl Watch {
    /// Reads the settings over `conn` now; an evicting server is an error
    /// unless `allow_eviction`.
    pub(crate) async fn open(
        conn: &Conn,
        allow_eviction: bool,
        timeout: Duration,
    ) -> StoreResult<Arc<Self>> {
        let observed = observe(conn, allow_eviction, timeout, StoreOp::Open).await?;
        if let Some(why) = &observed.refusal {
            return Err(StoreError::new(
                BACKEND,
                StoreOp::Open,
                ErrorKind::InvalidInput,
                why.clone(),
            ));
        }
        match &observed.persistence {
            Persistence::Synced => {}
            other => tracing::warn!(store = "redis", "{other}"),
        }
        Ok(Arc::new(Self {
            allow_eviction,
            evicted_at_open: observed.evicted_keys,
            seen: RwLock::new(observed),
            lapse: RwLock::new(None),
        }))
    }

    /// Looks again in the background every `interval` while any handle of
    /// the store lives.
    pub(crate) fn follow(self: &Arc<Self>, conn: Conn, interval: Duration, timeout: Duration) {
        let weak: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let Some(watch) = weak.upgrade() else {
                    return;
                };
                // A server that cannot be reached now keeps what was seen:
                // its calls fail on their own.
                let _ = watch.refresh(&conn, timeout).await;
            }
        });
    }

    /// Reads the settings again; `Err` when the server cannot be asked.
    pub(crate) async fn refresh(&self, conn: &Conn, timeout: Duration) -> StoreResult<()> {
        let observed = observe(conn, self.allow_eviction, timeout, StoreOp::Health).await?;
        let mut seen = self.seen.write();
        if observed.refusal != seen.refusal {
            match &observed.refusal {
                Some(why) => tracing::error!(store = "redis", "writes refused from now on: {why}"),
                None => tracing::warn!(
                    store = "redis",
                    "the server no longer evicts keys: writes are taken again"
                ),
            }
        }
        if observed.persistence != seen.persistence && !observed.persistence.is_synced() {
            tracing::warn!(store = "redis", "{}", observed.persistence);
        }
        self.note_lapse(&observed);
        *seen = observed;
        Ok(())
    }

    /// Keeps what `observed` shows may have lost acknowledged work: keys
    /// evicted since the store opened, or the server set to evict them.
    fn note_lapse(&self, observed: &Observed) {
        let evicted = match (self.evicted_at_open, observed.evicted_keys) {
            (Some(before), Some(now)) => now.saturating_sub(before),
            _ => 0,
        };
        let what = match (&observed.evicting, evicted) {
            (_, n) if n > 0 => format!(
                "Redis evicted {n} keys while acts used it{}; some of what acts acknowledged \
                 may be gone ({DOCS})",
                observed
                    .evicting
                    .as_ref()
                    .map_or_else(String::new, |e| format!(" ({e})"))
            ),
            (Some(e), _) => format!(
                "Redis was set to evict keys while acts used it ({e}); what acts acknowledged \
                 before may have been evicted ({DOCS})"
            ),
            (None, _) => return,
        };
        let mut lapse = self.lapse.write();
        if lapse.is_none() {
            tracing::error!(store = "redis", "{what}");
            *lapse = Some(what);
        } else if evicted > 0 {
            *lapse = Some(what); // the count as it stands now
        }
    }

    /// `Err` while the server is seen to evict keys.
    pub(crate) fn check_writable(&self, op: StoreOp) -> StoreResult<()> {
        match &self.seen.read().refusal {
            None => Ok(()),
            Some(why) => Err(StoreError::new(
                BACKEND,
                op,
                ErrorKind::Unavailable,
                why.clone(),
            )),
        }
    }

    /// What an acknowledged write survives, as last seen — or, once the
    /// server was seen to evict keys (or set to), that acknowledged work
    /// may be gone, for as long as the store is open.
    pub(crate) fn persistence(&self) -> Persistence {
        match &*self.lapse.read() {
            Some(lapse) => Persistence::Weak(lapse.clone()),
            None => self.seen.read().persistence.clone(),
        }
    }
}

/// Reads and judges the settings of every node behind `conn`.
async fn observe(
    conn: &Conn,
    allow_eviction: bool,
    timeout: Duration,
    op: StoreOp,
) -> StoreResult<Observed> {
    let nodes = match tokio::time::timeout(timeout, read(conn)).await {
        Err(_) => {
            return Err(StoreError::new(
                BACKEND,
                op,
                ErrorKind::Timeout,
                format!("CONFIG GET got no answer within {timeout:?}"),
            ));
        }
        Ok(Ok(nodes)) => nodes,
        Ok(Err(e)) if refused(&e) => {
            return Ok(Observed {
                refusal: None,
                evicting: None,
                evicted_keys: None,
                persistence: Persistence::Unknown(format!(
                    "the Redis server does not let acts read its settings (CONFIG GET: {e}), \
                     so acts cannot check that it keeps what it acknowledges and does not \
                     evict keys; make sure it runs with maxmemory-policy noeviction, \
                     appendonly yes and appendfsync always ({DOCS})"
                )),
            });
        }
        Ok(Err(e)) => return Err(map_err(op, e)),
    };
    let mut observed = judge(&nodes, allow_eviction);
    // A server that answers CONFIG GET but not INFO keeps no count.
    observed.evicted_keys = tokio::time::timeout(timeout, evicted_keys(conn))
        .await
        .ok()
        .flatten();
    Ok(observed)
}

/// Keys evicted so far (`evicted_keys` of `INFO stats`), summed over every
/// node; `None` when the server does not say.
async fn evicted_keys(conn: &Conn) -> Option<u64> {
    let mut cmd = redis::cmd("INFO");
    cmd.arg("stats");
    let texts: Vec<String> = match &conn.link {
        Link::Single(_) | Link::Sentinel(_) => {
            let mut c = conn.clone();
            vec![cmd.query_async(&mut c).await.ok()?]
        }
        Link::Cluster(c) => {
            use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
            let route = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllNodes, None));
            match conn.route_command(c, cmd, route).await.ok()? {
                Value::Map(per_node) => per_node
                    .into_iter()
                    .filter_map(|(_, v)| redis::from_redis_value(v).ok())
                    .collect(),
                other => vec![redis::from_redis_value(other).ok()?],
            }
        }
    };
    texts
        .iter()
        .map(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("evicted_keys:"))
                .and_then(|n| n.trim().parse::<u64>().ok())
        })
        .sum()
}

/// Whether `e` says the command is not allowed here (renamed, disabled,
/// no permission), rather than that the server is down.
fn refused(e: &redis::RedisError) -> bool {
    let text = e.to_string();
    [
        "unknown command",
        "NOPERM",
        "not allowed",
        "disabled",
        "ERR unknown",
    ]
    .iter()
    .any(|m| text.contains(m))
}

/// `CONFIG GET` of [`SETTINGS`] on every node: `(node, settings)` each.
async fn read(conn: &Conn) -> redis::RedisResult<Vec<(String, HashMap<String, String>)>> {
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET");
    for s in SETTINGS {
        cmd.arg(s);
    }
    match &conn.link {
        Link::Single(_) | Link::Sentinel(_) => {
            let mut c = conn.clone();
            let value: Value = cmd.query_async(&mut c).await?;
            let node = match &conn.link {
                Link::Sentinel(s) => format!("the master '{}' the sentinels name", s.master()),
                _ => "the server".to_owned(),
            };
            Ok(vec![(node, pairs(value)?)])
        }
        Link::Cluster(c) => {
            use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
            let route = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllNodes, None));
            let value = conn.route_command(c, cmd, route).await?;
            let Value::Map(per_node) = value else {
                return Ok(vec![("the cluster".to_owned(), pairs(value)?)]);
            };
            let mut out = Vec::with_capacity(per_node.len());
            for (node, v) in per_node {
                let node: String =
                    redis::from_redis_value(node).map_err(redis::RedisError::from)?;
                out.push((format!("node {node}"), pairs(v)?));
            }
            out.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(out)
        }
    }
}

/// A `CONFIG GET` answer (a map in RESP3, pairs in RESP2) as a map.
fn pairs(value: Value) -> redis::RedisResult<HashMap<String, String>> {
    Ok(redis::from_redis_value(value)?)
}

/// What `nodes`' settings mean for acknowledged work: the first evicting
/// node refuses (unless allowed), the weakest persistence is reported.
fn judge(nodes: &[(String, HashMap<String, String>)], allow_eviction: bool) -> Observed {
    let mut refusal = None;
    let mut evicting = None;
    let mut persistence = Persistence::Synced;
    for (node, settings) in nodes {
        let get = |k: &str| settings.get(k).map_or("", String::as_str);
        let policy = get("maxmemory-policy");
        if policy != "noeviction" && refusal.is_none() {
            let why = format!(
                "Redis at {node} evicts keys when it is full (maxmemory-policy {policy}): it \
                 would silently drop processes acts acknowledged. Set `maxmemory-policy \
                 noeviction` (CONFIG SET and redis.conf){} ({DOCS})",
                if allow_eviction {
                    ""
                } else {
                    ", or open the store with ?allow_eviction=true to accept losing work"
                }
            );
            evicting = Some(format!("maxmemory-policy {policy} at {node}"));
            if allow_eviction {
                // Taken, and said: an acknowledged write may be evicted.
                persistence = Persistence::Weak(format!("{why}; allowed by allow_eviction"));
            } else {
                refusal = Some(why);
            }
        }
        if persistence.is_synced()
            && let Some(weak) = weakness(node, get("appendonly"), get("appendfsync"), get("save"))
        {
            persistence = Persistence::Weak(weak);
        }
    }
    Observed {
        refusal,
        evicting,
        persistence,
        evicted_keys: None,
    }
}

/// What a crash of `node` loses with these settings (`None`: nothing).
fn weakness(node: &str, appendonly: &str, appendfsync: &str, save: &str) -> Option<String> {
    let fix = "set `appendonly yes` and `appendfsync always`";
    let why = match (appendonly, appendfsync) {
        ("yes", "always") => return None,
        ("yes", "everysec") => format!(
            "Redis at {node} syncs its append-only file once a second (appendfsync everysec): \
             a crash of its machine can lose about the last second of acknowledged work; set \
             `appendfsync always`"
        ),
        ("yes", other) => format!(
            "Redis at {node} leaves syncing its append-only file to the OS (appendfsync \
             {other}): a crash of its machine can lose the last seconds of acknowledged work; \
             set `appendfsync always`"
        ),
        _ if save.trim().is_empty() => format!(
            "Redis at {node} keeps nothing on disk (appendonly no, no save points): a restart \
             of Redis loses every process; {fix}"
        ),
        _ => format!(
            "Redis at {node} keeps only snapshots (appendonly no, save {save}): a crash or \
             restart of Redis loses what was acknowledged since the last one; {fix}"
        ),
    };
    Some(format!("{why} ({DOCS})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(policy: &str, aof: &str, fsync: &str, save: &str) -> (String, HashMap<String, String>) {
        let settings = [
            ("maxmemory-policy", policy),
            ("appendonly", aof),
            ("appendfsync", fsync),
            ("save", save),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        ("the server".to_owned(), settings)
    }

    #[test]
    fn an_evicting_server_is_refused_unless_allowed_and_names_the_setting() {
        let o = judge(&[node("allkeys-lru", "yes", "always", "")], false);
        let why = o.refusal.expect("refused");
        assert!(
            why.contains("maxmemory-policy allkeys-lru") && why.contains("noeviction"),
            "{why}"
        );
        let o = judge(&[node("allkeys-lru", "yes", "always", "")], true);
        assert!(o.refusal.is_none());
        let o = judge(&[node("noeviction", "yes", "always", "")], false);
        assert!(o.refusal.is_none());
        assert_eq!(o.persistence, Persistence::Synced);
    }

    fn watch(evicted_at_open: Option<u64>) -> Watch {
        Watch {
            allow_eviction: false,
            seen: RwLock::new(judge(&[node("noeviction", "yes", "always", "")], false)),
            evicted_at_open,
            lapse: RwLock::new(None),
        }
    }

    fn observed(policy: &str, evicted_keys: Option<u64>) -> Observed {
        Observed {
            evicted_keys,
            ..judge(&[node(policy, "yes", "always", "")], false)
        }
    }

    #[test]
    fn a_server_seen_evicting_is_remembered_after_it_stops() {
        let w = watch(Some(5));
        w.note_lapse(&observed("noeviction", Some(5)));
        assert_eq!(w.persistence(), Persistence::Synced);
        // Set to evict (no key evicted yet): said, and kept once set back.
        w.note_lapse(&observed("allkeys-lru", Some(5)));
        w.note_lapse(&observed("noeviction", Some(5)));
        let Persistence::Weak(why) = w.persistence() else {
            panic!("a lapse is weak: {:?}", w.persistence());
        };
        assert!(
            why.contains("set to evict keys") && why.contains("allkeys-lru"),
            "{why}"
        );
        // Keys evicted since the open: counted from the baseline.
        w.note_lapse(&observed("noeviction", Some(22_190)));
        let Persistence::Weak(why) = w.persistence() else {
            panic!("weak");
        };
        assert!(why.contains("evicted 22185 keys"), "{why}");
        // An allowed evicting server is weak from the start.
        let o = judge(&[node("allkeys-lru", "yes", "always", "")], true);
        assert!(matches!(o.persistence, Persistence::Weak(w) if w.contains("allow_eviction")));
    }

    #[test]
    fn weaker_persistence_says_what_a_crash_loses() {
        let weak = |n| match judge(&[n], false).persistence {
            Persistence::Weak(w) => w,
            other => panic!("not weak: {other:?}"),
        };
        assert!(weak(node("noeviction", "no", "everysec", "")).contains("keeps nothing on disk"));
        assert!(weak(node("noeviction", "no", "everysec", "3600 1")).contains("snapshots"));
        assert!(weak(node("noeviction", "yes", "everysec", "")).contains("about the last second"));
        assert!(weak(node("noeviction", "yes", "no", "")).contains("appendfsync no"));
        // The weakest of a cluster's nodes decides; an evicting replica refuses.
        let mut replica = node("volatile-lru", "no", "always", "");
        replica.0 = "node 127.0.0.1:7001".into();
        let o = judge(&[node("noeviction", "yes", "always", ""), replica], false);
        assert!(o.refusal.expect("refused").contains("127.0.0.1:7001"));
        assert!(matches!(o.persistence, Persistence::Weak(w) if w.contains("127.0.0.1:7001")));
    }
}
