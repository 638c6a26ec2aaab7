//! A private Redis Cluster on loopback ports for tests: `masters` masters,
//! each with `replicas` replicas (3 + 3 by default), made with
//! `redis-server --cluster-enabled yes` and `redis-cli --cluster create`,
//! ready when every node says `cluster_state:ok`. Dropping it stops every
//! node and removes their folders.

use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::redis_server::free_port_with;

/// How long starting the cluster may take before it is an error.
const START_GUARD: Duration = Duration::from_secs(60);

/// One node of the cluster.
#[derive(Debug)]
struct Node {
    port: u16,
    child: Option<Child>,
}

/// A running private cluster (see the module docs).
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<Node>,
    dir: tempfile::TempDir,
}

/// A free port whose cluster bus port (+10,000) is free too, both below
/// the ephemeral range.
fn free_cluster_port() -> Result<u16, String> {
    free_port_with(Some(10_000))
}

pub(crate) fn redis_cli(args: &[&str]) -> Result<String, String> {
    let out = Command::new("redis-cli")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                "redis-cli is not installed: the Redis Cluster tests need it (apt-get install redis-tools, or redis-server which brings it)".to_owned()
            } else {
                format!("cannot run redis-cli: {e}")
            }
        })?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!(
            "redis-cli {} failed: {text}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

impl RedisCluster {
    /// Starts 3 masters with one replica each.
    pub fn start() -> Result<Self, String> {
        Self::start_with(3, 1)
    }

    /// Starts `masters` masters (at least 3) with `replicas` replicas each.
    pub fn start_with(masters: usize, replicas: usize) -> Result<Self, String> {
        let dir =
            tempfile::tempdir().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        let mut cluster = Self {
            nodes: Vec::new(),
            dir,
        };
        for _ in 0..masters * (1 + replicas) {
            let port = free_cluster_port()?;
            let child = cluster.spawn(port)?;
            cluster.nodes.push(Node {
                port,
                child: Some(child),
            });
        }
        let started = Instant::now();
        for n in &cluster.nodes {
            while std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, n.port)).is_err() {
                if started.elapsed() > START_GUARD {
                    return Err(format!("redis-server on port {} did not start", n.port));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let addrs: Vec<String> = cluster.nodes().to_vec();
        let replicas = replicas.to_string();
        let mut args: Vec<&str> = vec!["--cluster", "create"];
        args.extend(addrs.iter().map(String::as_str));
        args.extend(["--cluster-replicas", &replicas, "--cluster-yes"]);
        redis_cli(&args)?;
        // Ready when every node sees every slot served and every replica
        // follows its master.
        cluster.wait_ok()?;
        Ok(cluster)
    }

    fn spawn(&self, port: u16) -> Result<Child, String> {
        let node_dir = self.dir.path().join(port.to_string());
        std::fs::create_dir_all(&node_dir)
            .map_err(|e| format!("cannot create {}: {e}", node_dir.display()))?;
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--protected-mode", "no", "--daemonize", "no"])
            .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"])
            .args(["--cluster-config-file", "nodes.conf"])
            .arg("--dir")
            .arg(&node_dir)
            .args(["--save", "", "--appendonly", "no", "--loglevel", "warning"])
            // A replica (a new one, or a crashed master back as one) syncs
            // at once instead of after the default 5 s.
            .args(["--repl-diskless-sync-delay", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    "redis-server is not installed: the Redis Cluster tests need it (apt-get install redis-server)".to_owned()
                } else {
                    format!("cannot start redis-server: {e}")
                }
            })
    }

    /// Every node as `127.0.0.1:PORT`.
    pub fn nodes(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect()
    }

    /// The node URLs (`redis://127.0.0.1:PORT/`) a cluster client takes.
    pub fn node_urls(&self) -> Vec<String> {
        self.nodes()
            .iter()
            .map(|a| format!("redis://{a}/"))
            .collect()
    }

    /// The store URL of namespace `namespace` on this cluster.
    pub fn store_url(&self, namespace: &str) -> String {
        format!("redis+cluster://{}/{namespace}", self.nodes().join(","))
    }

    /// The port of a node that runs (whom to ask about the cluster).
    fn live_port(&self) -> Result<String, String> {
        self.nodes
            .iter()
            .find(|n| n.child.is_some())
            .map(|n| n.port.to_string())
            .ok_or_else(|| "no node of the cluster runs".to_owned())
    }

    /// The ports of the masters that serve slots now (as a running node
    /// sees the cluster).
    pub fn masters(&self) -> Result<Vec<u16>, String> {
        let text = redis_cli(&["-p", &self.live_port()?, "cluster", "nodes"])?;
        let mut ports: Vec<u16> = text
            .lines()
            .filter(|l| {
                let flags = l.split(' ').nth(2).unwrap_or("");
                flags.contains("master") && !flags.contains("fail") && l.split(' ').count() > 8
            })
            .filter_map(|l| {
                let addr = l.split(' ').nth(1)?;
                addr.split(['@', ':']).nth(1)?.parse().ok()
            })
            .collect();
        ports.sort_unstable();
        Ok(ports)
    }

    /// The port of the master that serves `key`'s slot now (a key with a
    /// hash tag, `{tag}`, is served where the tag is).
    pub fn master_of(&self, key: &str) -> Result<u16, String> {
        let port = self.live_port()?;
        let slot: u16 = redis_cli(&["-p", &port, "cluster", "keyslot", key])?
            .trim()
            .parse()
            .map_err(|e| format!("CLUSTER KEYSLOT {key}: {e}"))?;
        let text = redis_cli(&["-p", &port, "cluster", "nodes"])?;
        for line in text.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            let flags = fields.get(2).copied().unwrap_or("");
            if !flags.contains("master") || flags.contains("fail") {
                continue;
            }
            let serves = fields.iter().skip(8).any(|range| {
                let mut ends = range.splitn(2, '-').map(|n| n.parse::<u16>());
                match (ends.next(), ends.next()) {
                    (Some(Ok(lo)), Some(Ok(hi))) => (lo..=hi).contains(&slot),
                    (Some(Ok(one)), None) => one == slot,
                    _ => false,
                }
            });
            if serves {
                return fields
                    .get(1)
                    .and_then(|a| a.split(['@', ':']).nth(1))
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| format!("CLUSTER NODES: no port in '{line}'"));
            }
        }
        Err(format!("no master serves slot {slot} of '{key}'"))
    }

    /// The ports of the replicas of the master on `master`.
    pub fn replicas_of(&self, master: u16) -> Result<Vec<u16>, String> {
        let text = redis_cli(&["-p", &self.live_port()?, "cluster", "nodes"])?;
        let port_of = |line: &str| -> Option<u16> {
            line.split(' ')
                .nth(1)?
                .split(['@', ':'])
                .nth(1)?
                .parse()
                .ok()
        };
        let id = text
            .lines()
            .find(|l| port_of(l) == Some(master))
            .and_then(|l| l.split(' ').next())
            .ok_or_else(|| format!("no node on port {master}"))?;
        Ok(text
            .lines()
            .filter(|l| l.split(' ').nth(3) == Some(id))
            .filter_map(port_of)
            .collect())
    }

    /// Writes `bytes` bytes to `key` on the node on `port` (a key with a
    /// hash tag the node serves): a large write fills the replication
    /// stream to its stopped replicas, so what the node acknowledges after
    /// it stays in its own output buffer.
    pub fn fill(&self, port: u16, key: &str, bytes: usize) -> Result<(), String> {
        fill_on(port, key, bytes)
    }

    /// Stops (SIGSTOP) or continues (SIGCONT) the node on `port`: a
    /// stopped replica takes nothing from its master, which goes on
    /// acknowledging writes only it has.
    pub fn freeze(&self, port: u16, frozen: bool) -> Result<(), String> {
        let pid = self
            .nodes
            .iter()
            .find(|n| n.port == port)
            .and_then(|n| n.child.as_ref())
            .map(Child::id)
            .ok_or_else(|| format!("no running node on port {port}"))?;
        crate::process_tree::signal(if frozen { "-STOP" } else { "-CONT" }, pid)
    }

    /// Kills the node on `port` (SIGKILL: a crash — what it had not
    /// replicated is gone); its replica takes over after the node timeout
    /// (2 s).
    pub fn kill(&mut self, port: u16) -> Result<(), String> {
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port == port)
            .ok_or_else(|| format!("no node on port {port}"))?;
        if let Some(mut child) = node.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        Ok(())
    }

    /// Waits until the replica of the crashed master on `port` has taken
    /// its place: as many masters serve slots as before, none of them on
    /// `port`. (Restarting a crashed master before that brings it back as
    /// the master of its slots with whatever it kept — without
    /// persistence, nothing — which is a shard lost, not a failover.)
    pub fn wait_failover(&self, port: u16, masters: usize) -> Result<(), String> {
        let started = Instant::now();
        loop {
            let now = self.masters().unwrap_or_default();
            if now.len() == masters && !now.contains(&port) {
                return self.wait_ok();
            }
            if started.elapsed() > START_GUARD {
                return Err(format!(
                    "no replica took the place of the master on port {port} in {START_GUARD:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts the node on `port` again (it rejoins as a replica of the
    /// master that took its place) and waits until every running node
    /// says the cluster is ok.
    pub fn restart(&mut self, port: u16) -> Result<(), String> {
        let child = self.spawn(port)?;
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port == port)
            .ok_or_else(|| format!("no node on port {port}"))?;
        node.child = Some(child);
        self.wait_ok()
    }

    /// Waits until every running node says `cluster_state:ok` and every
    /// replica's link to its master is up.
    pub fn wait_ok(&self) -> Result<(), String> {
        let started = Instant::now();
        for n in self.nodes.iter().filter(|n| n.child.is_some()) {
            let port = n.port.to_string();
            loop {
                let info = redis_cli(&["-p", &port, "cluster", "info"]).unwrap_or_default();
                let repl = redis_cli(&["-p", &port, "info", "replication"]).unwrap_or_default();
                let linked = !repl.contains("role:slave") || repl.contains("master_link_status:up");
                if info.contains("cluster_state:ok") && linked {
                    break;
                }
                if started.elapsed() > START_GUARD {
                    return Err(format!(
                        "the cluster did not become ok in {START_GUARD:?}: {info}"
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            if let Some(mut child) = n.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// `SET key` to `bytes` bytes on the server on `port` (see
/// [`RedisCluster::fill`]).
pub(crate) fn fill_on(port: u16, key: &str, bytes: usize) -> Result<(), String> {
    use std::io::Write as _;
    let mut child = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "-x", "SET", key])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("redis-cli: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("redis-cli has no stdin")?;
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..bytes.div_ceil(chunk.len()) {
        stdin
            .write_all(&chunk)
            .map_err(|e| format!("writing to redis-cli: {e}"))?;
    }
    drop(stdin);
    let out = child
        .wait_with_output()
        .map_err(|e| format!("redis-cli: {e}"))?;
    let answer = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && answer.trim() == "OK" {
        Ok(())
    } else {
        Err(format!(
            "SET {key} on port {port}: {answer}{}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
