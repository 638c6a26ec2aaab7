//! A private Redis master with one replica, watched by three Redis
//! Sentinels (quorum 2), on loopback ports — Redis with automatic failover
//! as teams run it. The sentinels call the master down after 1 s without
//! an answer (`down-after-milliseconds 1000`) and promote the replica.
//!
//! A test finds the master's URL through the sentinels
//! ([`RedisSentinel::store_url`]: `redis+sentinel://S1,S2,S3/acts/NS`),
//! stops the replica for a while ([`RedisSentinel::freeze`]), kills the
//! master with `SIGKILL` ([`RedisSentinel::kill_master`]), waits until the
//! sentinels name another ([`RedisSentinel::wait_failover`]) and starts the
//! old master again, which the sentinels turn into a replica of the new
//! one ([`RedisSentinel::restart`]). Servers keep nothing on disk (no RDB,
//! no AOF): what only a killed master had is gone, as on a lost machine.

use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::redis_cluster::redis_cli;
use crate::redis_server::free_port;

/// The name the sentinels know the master by.
pub const MASTER: &str = "acts";

/// How long a server, a sentinel or a failover may take (a hang guard,
/// not a timing assumption).
const GUARD: Duration = Duration::from_secs(120);

#[derive(Debug)]
struct Proc {
    port: u16,
    child: Option<Child>,
}

/// Two servers (a master, a replica) and three sentinels; all killed on
/// drop.
#[derive(Debug)]
pub struct RedisSentinel {
    servers: Vec<Proc>,
    sentinels: Vec<Proc>,
    dir: tempfile::TempDir,
}

impl RedisSentinel {
    /// Starts the master, its replica and three sentinels, and waits until
    /// the replica follows the master and every sentinel knows the replica
    /// and the two other sentinels.
    pub fn start() -> Result<Self, String> {
        let dir =
            tempfile::tempdir().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        let mut group = Self {
            servers: Vec::new(),
            sentinels: Vec::new(),
            dir,
        };
        let master = free_port()?;
        let replica = free_port()?;
        group.servers.push(Proc {
            port: master,
            child: Some(group.spawn_server(master, None)?),
        });
        group.servers.push(Proc {
            port: replica,
            child: Some(group.spawn_server(replica, Some(master))?),
        });
        for p in [master, replica] {
            wait_accepting(p)?;
        }
        group.wait_replica_linked(replica)?;
        for _ in 0..3 {
            let port = free_port()?;
            let child = group.spawn_sentinel(port, master)?;
            group.sentinels.push(Proc {
                port,
                child: Some(child),
            });
        }
        for s in &group.sentinels {
            wait_accepting(s.port)?;
        }
        group.wait_sentinels_agree()?;
        Ok(group)
    }

    fn spawn_server(&self, port: u16, replica_of: Option<u16>) -> Result<Child, String> {
        let dir = self.dir.path().join(port.to_string());
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut c = Command::new("redis-server");
        c.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--protected-mode", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(&dir)
            .args(["--save", "", "--appendonly", "no", "--loglevel", "warning"])
            .args(["--repl-diskless-sync-delay", "0"]);
        if let Some(master) = replica_of {
            c.args(["--replicaof", "127.0.0.1", &master.to_string()]);
        }
        spawn(c)
    }

    fn spawn_sentinel(&self, port: u16, master: u16) -> Result<Child, String> {
        let dir = self.dir.path().join(format!("sentinel-{port}"));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // A sentinel rewrites its configuration file: one each.
        let config = dir.join("sentinel.conf");
        let text = format!(
            "port {port}\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\n\
             dir {dir}\nloglevel warning\n\
             sentinel monitor {MASTER} 127.0.0.1 {master} 2\n\
             sentinel down-after-milliseconds {MASTER} 1000\n\
             sentinel failover-timeout {MASTER} 10000\n\
             sentinel parallel-syncs {MASTER} 1\n",
            dir = dir.display()
        );
        std::fs::write(&config, text).map_err(|e| format!("{}: {e}", config.display()))?;
        let mut c = Command::new("redis-server");
        c.arg(&config).arg("--sentinel");
        spawn(c)
    }

    /// Waits until the replica on `port` says its link to its master is up.
    fn wait_replica_linked(&self, port: u16) -> Result<(), String> {
        wait_until(
            &format!("the replica on port {port} to follow its master"),
            || {
                let info = redis_cli(&["-p", &port.to_string(), "info", "replication"])
                    .unwrap_or_default();
                info.contains("role:slave") && info.contains("master_link_status:up")
            },
        )
    }

    /// Waits until every sentinel sees one replica and two other sentinels.
    fn wait_sentinels_agree(&self) -> Result<(), String> {
        for s in &self.sentinels {
            let port = s.port.to_string();
            wait_until(
                &format!("the sentinel on port {port} to know the group"),
                || {
                    let info =
                        redis_cli(&["-p", &port, "sentinel", "master", MASTER]).unwrap_or_default();
                    let field = |name: &str| {
                        let lines: Vec<&str> = info.lines().collect();
                        lines
                            .iter()
                            .position(|l| l.trim() == name)
                            .and_then(|i| lines.get(i + 1))
                            .map(|v| v.trim().to_owned())
                    };
                    field("num-slaves").as_deref() == Some("1")
                        && field("num-other-sentinels").as_deref() == Some("2")
                },
            )?;
        }
        Ok(())
    }

    /// The store URL of namespace `namespace` on the master the sentinels
    /// name: `redis+sentinel://S1,S2,S3/acts/NAMESPACE`.
    pub fn store_url(&self, namespace: &str) -> String {
        format!(
            "redis+sentinel://{}/{MASTER}/{namespace}",
            self.sentinel_addrs().join(",")
        )
    }

    /// Every sentinel as `127.0.0.1:PORT`.
    pub fn sentinel_addrs(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect()
    }

    /// Every sentinel as `redis://127.0.0.1:PORT/`.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinel_addrs()
            .iter()
            .map(|a| format!("redis://{a}/"))
            .collect()
    }

    /// The port of the master a running sentinel names now.
    pub fn master_port(&self) -> Result<u16, String> {
        let mut last = String::new();
        for s in self.sentinels.iter().filter(|s| s.child.is_some()) {
            let port = s.port.to_string();
            match redis_cli(&["-p", &port, "sentinel", "get-master-addr-by-name", MASTER]) {
                Ok(text) => {
                    if let Some(p) = text.lines().nth(1).and_then(|p| p.trim().parse().ok()) {
                        return Ok(p);
                    }
                    last = text;
                }
                Err(e) => last = e,
            }
        }
        Err(format!("no sentinel names the master: {last}"))
    }

    /// The server that is not the master now (the replica).
    pub fn replica_port(&self) -> Result<u16, String> {
        let master = self.master_port()?;
        self.servers
            .iter()
            .map(|s| s.port)
            .find(|p| *p != master)
            .ok_or_else(|| "no replica".to_owned())
    }

    /// Stops (`SIGSTOP`) or continues (`SIGCONT`) the server on `port`.
    pub fn freeze(&self, port: u16, frozen: bool) -> Result<(), String> {
        let pid = self
            .servers
            .iter()
            .find(|s| s.port == port)
            .and_then(|s| s.child.as_ref())
            .map(Child::id)
            .ok_or_else(|| format!("no running server on port {port}"))?;
        crate::process_tree::signal(if frozen { "-STOP" } else { "-CONT" }, pid)
    }

    /// Writes `bytes` bytes to `key` on the server on `port`: a large
    /// write fills the replication stream to a stopped replica, so what
    /// the master acknowledges after it stays in its own output buffer.
    pub fn fill(&self, port: u16, key: &str, bytes: usize) -> Result<(), String> {
        crate::redis_cluster::fill_on(port, key, bytes)
    }

    /// Kills the master with `SIGKILL`; its port.
    pub fn kill_master(&mut self) -> Result<u16, String> {
        let port = self.master_port()?;
        let server = self
            .servers
            .iter_mut()
            .find(|s| s.port == port)
            .ok_or_else(|| format!("the master on port {port} is not one of ours"))?;
        if let Some(mut child) = server.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        Ok(port)
    }

    /// Waits until the sentinels name a master other than the one on
    /// `old` (the promoted replica) and it takes writes (its `ROLE` is
    /// master).
    pub fn wait_failover(&self, old: u16) -> Result<u16, String> {
        wait_until("the sentinels to promote the replica", || {
            self.master_port().is_ok_and(|p| {
                p != old
                    && redis_cli(&["-p", &p.to_string(), "role"])
                        .is_ok_and(|r| r.lines().next() == Some("master"))
            })
        })
        .map_err(|e| format!("{e}; {}", self.sentinel_view()))?;
        self.master_port()
    }

    /// What the first running sentinel says of the master and its
    /// replicas (for a failure's message).
    fn sentinel_view(&self) -> String {
        let Some(s) = self.sentinels.iter().find(|s| s.child.is_some()) else {
            return "no sentinel runs".to_owned();
        };
        let port = s.port.to_string();
        let master = redis_cli(&["-p", &port, "sentinel", "master", MASTER]).unwrap_or_default();
        let replicas =
            redis_cli(&["-p", &port, "sentinel", "replicas", MASTER]).unwrap_or_default();
        format!(
            "the sentinel on port {port} says of the master: {} | of the replicas: {}",
            master.lines().collect::<Vec<_>>().join(" "),
            replicas.lines().collect::<Vec<_>>().join(" ")
        )
    }

    /// Starts the server on `port` again (empty); the sentinels make it a
    /// replica of the master now, and this waits until it follows.
    pub fn restart(&mut self, port: u16) -> Result<(), String> {
        let child = self.spawn_server(port, None)?;
        let server = self
            .servers
            .iter_mut()
            .find(|s| s.port == port)
            .ok_or_else(|| format!("no server on port {port}"))?;
        server.child = Some(child);
        wait_accepting(port)?;
        self.wait_replica_linked(port)
            .map_err(|e| format!("{e}; {}", self.sentinel_view()))
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        for p in self.servers.iter_mut().chain(self.sentinels.iter_mut()) {
            if let Some(mut child) = p.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn spawn(mut c: Command) -> Result<Child, String> {
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                "redis-server is not installed (run scripts/setup.sh)".to_owned()
            } else {
                format!("cannot start redis-server: {e}")
            }
        })
}

fn wait_accepting(port: u16) -> Result<(), String> {
    wait_until(&format!("a server to listen on port {port}"), || {
        std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok()
    })
}

/// Polls `done` until it holds (a hang guard of [`GUARD`]).
fn wait_until(what: &str, done: impl Fn() -> bool) -> Result<(), String> {
    let started = Instant::now();
    while !done() {
        if started.elapsed() > GUARD {
            return Err(format!("waited {GUARD:?} for {what}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}
