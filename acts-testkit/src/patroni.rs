//! A PostgreSQL pair managed by Patroni with etcd, on loopback, as teams
//! run PostgreSQL with automatic failover: one etcd member (the DCS), two
//! Patroni nodes (`n1`, `n2`), each running its own PostgreSQL, in
//! Patroni's `synchronous_mode` — the primary names its standby in
//! `synchronous_standby_names`, so every commit it acknowledges is on the
//! standby's disk, and Patroni promotes only that synchronous standby.
//!
//! A test kills the leader's node (Patroni and every PostgreSQL process of
//! it, `SIGKILL`, as a lost machine) and lets Patroni do the rest: when
//! the leader key's TTL (10 s) runs out, the standby's Patroni takes the
//! lock and promotes its server. Clients find the primary through a
//! multi-host URL with `target_session_attrs=read-write`.
//!
//! Needs the Debian packages `patroni` and `etcd-server` (installed by
//! `scripts/setup.sh`). As root, Patroni and PostgreSQL run as the
//! `postgres` user, as with [`PostgresServer`](crate::postgres_server::PostgresServer).

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::postgres_server::{bin_dir, folder, is_root, run};
use crate::process_tree::{kill_postmaster, postmaster_of, processes_naming, stop_wal_senders};
use crate::redis_server::free_port;

/// How long the pair may take to elect a leader and stream to its
/// synchronous standby (a hang guard, not a timing assumption).
const START_GUARD: Duration = Duration::from_secs(120);

/// How many times a start is tried (a port found free may be taken by
/// another process before etcd, Patroni or PostgreSQL binds it).
const START_TRIES: usize = 3;

/// The names of the two nodes.
const NODES: [&str; 2] = ["n1", "n2"];

/// One member as `patronictl list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// `n1` or `n2`.
    pub name: String,
    /// `Leader`, `Sync Standby`, `Replica`, ...
    pub role: String,
    /// `running`, `streaming`, `starting`, ...
    pub state: String,
    /// The timeline its server is on (a promotion starts a new one).
    pub timeline: Option<u64>,
}

/// One Patroni node: its configuration, its server's data and port, and
/// its Patroni process while it runs.
#[derive(Debug)]
struct Node {
    name: &'static str,
    config: PathBuf,
    data: PathBuf,
    pg_port: u16,
    patroni: Option<Child>,
}

/// etcd and two Patroni nodes; everything is killed on drop.
#[derive(Debug)]
pub struct PatroniPair {
    dir: tempfile::TempDir,
    etcd: Option<Child>,
    nodes: Vec<Node>,
}

impl PatroniPair {
    /// Starts etcd, then `n1` (which bootstraps the cluster and leads),
    /// then `n2` (a base backup of `n1`), and waits until `n1` leads with
    /// `n2` as its synchronous standby.
    pub fn start() -> Result<Self, String> {
        let mut last = String::new();
        for _ in 0..START_TRIES {
            match Self::try_start() {
                Ok(pair) => return Ok(pair),
                Err(e) => last = e,
            }
        }
        Err(format!("{last} (tried {START_TRIES} times)"))
    }

    fn try_start() -> Result<Self, String> {
        let dir = folder()?;
        let client = free_port()?;
        let peer = free_port()?;
        let etcd_dir = dir.path().join("etcd");
        let etcd = Command::new("etcd")
            .args(["--name", "e1", "--data-dir"])
            .arg(&etcd_dir)
            .args([
                "--listen-client-urls",
                &format!("http://127.0.0.1:{client}"),
            ])
            .args([
                "--advertise-client-urls",
                &format!("http://127.0.0.1:{client}"),
            ])
            .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
            .args([
                "--initial-advertise-peer-urls",
                &format!("http://127.0.0.1:{peer}"),
            ])
            .args(["--initial-cluster", &format!("e1=http://127.0.0.1:{peer}")])
            .args(["--initial-cluster-state", "new", "--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(log_file(dir.path(), "etcd")?)
            .stderr(log_file(dir.path(), "etcd")?)
            .spawn()
            .map_err(|e| format!("starting etcd (run scripts/setup.sh): {e}"))?;
        let mut pair = Self {
            dir,
            etcd: Some(etcd),
            nodes: Vec::new(),
        };
        let bin = bin_dir()?;
        for name in NODES {
            let node = pair.configure(name, client, &bin)?;
            pair.nodes.push(node);
        }
        pair.launch(0)?;
        pair.wait_for(|ms| ms.iter().any(|m| m.name == "n1" && m.is_leader()))?;
        pair.launch(1)?;
        pair.wait_for(|ms| {
            ms.iter().any(|m| m.name == "n1" && m.is_leader())
                && ms.iter().any(|m| m.name == "n2" && m.is_sync_standby())
        })?;
        Ok(pair)
    }

    /// Writes node `name`'s Patroni configuration (its data folder, a
    /// free PostgreSQL and REST API port each).
    fn configure(&self, name: &'static str, etcd_port: u16, bin: &Path) -> Result<Node, String> {
        let pg_port = free_port()?;
        let api_port = free_port()?;
        let root = self.dir.path();
        let data = root.join(format!("{name}-data"));
        let sockets = root.join("sockets");
        let config = root.join(format!("{name}.yml"));
        let text = format!(
            r#"scope: acts
namespace: /acts-test/
name: {name}
restapi:
  listen: 127.0.0.1:{api_port}
  connect_address: 127.0.0.1:{api_port}
etcd3:
  hosts: 127.0.0.1:{etcd_port}
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 3
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    postgresql:
      use_pg_rewind: false
      parameters:
        fsync: 'on'
        synchronous_commit: 'on'
        max_connections: 200
  initdb:
    - encoding: UTF8
    - auth: trust
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:{pg_port}
  connect_address: 127.0.0.1:{pg_port}
  data_dir: {data}
  bin_dir: {bin}
  pgpass: {pgpass}
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
  parameters:
    unix_socket_directories: {sockets}
"#,
            data = data.display(),
            bin = bin.display(),
            pgpass = root.join(format!("{name}.pgpass")).display(),
            sockets = sockets.display(),
        );
        std::fs::write(&config, text).map_err(|e| format!("{}: {e}", config.display()))?;
        crate::postgres_server::hand_to_server_user(root)?;
        Ok(Node {
            name,
            config,
            data,
            pg_port,
            patroni: None,
        })
    }

    /// Starts node `i`'s Patroni (as the `postgres` user when root).
    fn launch(&mut self, i: usize) -> Result<(), String> {
        let root = self.dir.path().to_owned();
        let node = &mut self.nodes[i];
        let mut c = Command::new("patroni");
        // Its own folder as the working directory: the test's may be one
        // the `postgres` user cannot enter (a clone under /root), and
        // Patroni starts PostgreSQL through a process that changes into it.
        c.arg(&node.config)
            .current_dir(&root)
            .env("HOME", &root)
            .stdin(Stdio::null())
            .stdout(log_file(&root, node.name)?)
            .stderr(log_file(&root, node.name)?);
        if is_root() {
            let (uid, gid) = server_user()?;
            c.uid(uid).gid(gid);
        }
        let child = c
            .spawn()
            .map_err(|e| format!("starting patroni (run scripts/setup.sh): {e}"))?;
        node.patroni = Some(child);
        Ok(())
    }

    /// Waits until the members satisfy `done` (a hang guard of
    /// [`START_GUARD`]); the error names what was seen and the logs' ends.
    fn wait_for(&self, done: impl Fn(&[Member]) -> bool) -> Result<Vec<Member>, String> {
        let started = Instant::now();
        let mut seen = Vec::new();
        while started.elapsed() < START_GUARD {
            if let Ok(members) = self.members() {
                if done(&members) {
                    return Ok(members);
                }
                seen = members;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Err(format!(
            "the Patroni pair did not get there in {START_GUARD:?}: members {seen:?}\n{}",
            self.log_tails()
        ))
    }

    /// The last lines of every log (etcd, n1, n2).
    fn log_tails(&self) -> String {
        ["etcd", "n1", "n2"]
            .iter()
            .map(|n| {
                let log = std::fs::read_to_string(self.dir.path().join(format!("{n}.log")))
                    .unwrap_or_default();
                let lines: Vec<&str> = log.lines().collect();
                let tail = lines[lines.len().saturating_sub(40)..].join("\n");
                format!("{n}.log ends:\n{tail}")
            })
            .collect::<Vec<_>>()
            .join("\n")
            + &format!(
                "\nits processes (pid, state, command):\n{}",
                processes_naming(self.dir.path())
            )
    }

    /// The members as `patronictl list` shows them now.
    pub fn members(&self) -> Result<Vec<Member>, String> {
        let mut c = Command::new("timeout");
        c.arg("20")
            .arg("patronictl")
            .arg("-c")
            .arg(&self.nodes[0].config)
            .args(["list", "-f", "json"]);
        let out = run(c, "patronictl list")?;
        parse_members(&String::from_utf8_lossy(&out.stdout))
    }

    /// The URL that finds whichever server is the primary (both servers,
    /// `target_session_attrs=read-write`).
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.pg_port))
            .collect();
        format!(
            "postgres://postgres@{}/postgres?target_session_attrs=read-write",
            hosts.join(",")
        )
    }

    /// The URL of namespace `ns`.
    pub fn url_of(&self, ns: &str) -> String {
        format!("{}&namespace={ns}", self.url())
    }

    /// The node that leads now.
    fn leader(&self) -> Result<&Node, String> {
        let members = self.members()?;
        let name = members
            .iter()
            .find(|m| m.is_leader())
            .map(|m| m.name.clone())
            .ok_or_else(|| format!("no member leads: {members:?}"))?;
        self.nodes
            .iter()
            .find(|n| n.name == name)
            .ok_or_else(|| format!("an unknown member leads: {name}"))
    }

    /// Stops (`SIGSTOP`) the leader's WAL senders: what it commits from
    /// now on reaches no standby, so (synchronous) it acknowledges no
    /// commit.
    pub fn stop_replication(&self) -> Result<(), String> {
        let leader = self.leader()?;
        let pid = postmaster_of(&leader.data).ok_or("the leader's server is not running")?;
        stop_wal_senders(pid)
    }

    /// Kills the leader's node with `SIGKILL` — its Patroni first (so it
    /// restarts nothing), then every process of its PostgreSQL — and
    /// returns its name and timeline. Patroni promotes the standby on its
    /// own.
    pub fn kill_leader(&mut self) -> Result<(String, u64), String> {
        let members = self.members()?;
        let leader = members
            .iter()
            .find(|m| m.is_leader())
            .ok_or_else(|| format!("no member leads: {members:?}"))?;
        let (name, timeline) = (leader.name.clone(), leader.timeline.unwrap_or(0));
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.name == name)
            .ok_or("the leader vanished")?;
        kill_node(node)?;
        Ok((name, timeline))
    }

    /// Waits until a member other than `gone` leads on a newer timeline
    /// (Patroni promoted it); its name.
    pub fn wait_promoted(&self, gone: &str, timeline_before: u64) -> Result<String, String> {
        let members = self.wait_for(|ms| {
            ms.iter().any(|m| {
                m.name != gone && m.is_leader() && m.timeline.is_some_and(|t| t > timeline_before)
            })
        })?;
        Ok(members
            .into_iter()
            .find(|m| m.is_leader())
            .map(|m| m.name)
            .unwrap_or_default())
    }
}

impl Member {
    fn is_leader(&self) -> bool {
        self.role == "Leader" && self.state == "running"
    }

    fn is_sync_standby(&self) -> bool {
        self.role == "Sync Standby" && (self.state == "running" || self.state == "streaming")
    }
}

impl Drop for PatroniPair {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = kill_node(node);
        }
        if let Some(mut etcd) = self.etcd.take() {
            let _ = etcd.kill();
            let _ = etcd.wait();
        }
    }
}

/// Kills a node's Patroni, then its server (Patroni detaches PostgreSQL:
/// the postmaster's pid comes from its `postmaster.pid`).
fn kill_node(node: &mut Node) -> Result<(), String> {
    if let Some(mut patroni) = node.patroni.take() {
        let _ = patroni.kill();
        let _ = patroni.wait();
    }
    match postmaster_of(&node.data) {
        Some(pid) => kill_postmaster(pid),
        None => Ok(()),
    }
}

/// The `postgres` user's uid and gid.
fn server_user() -> Result<(u32, u32), String> {
    let id = |flag: &str| -> Result<u32, String> {
        let mut c = Command::new("id");
        c.args([flag, "postgres"]);
        let out = run(c, "id postgres")?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|e| format!("id {flag} postgres: {e}"))
    };
    Ok((id("-u")?, id("-g")?))
}

/// `dir/NAME.log`, opened for appending.
fn log_file(dir: &Path, name: &str) -> Result<File, String> {
    let path = dir.join(format!("{name}.log"));
    File::options()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The members in `patronictl list -f json`'s output.
fn parse_members(json: &str) -> Result<Vec<Member>, String> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("patronictl's list: {e}: {json}"))?;
    let list = value
        .as_array()
        .ok_or_else(|| format!("patronictl's list is not a list: {json}"))?;
    Ok(list
        .iter()
        .map(|m| {
            let text = |k: &str| m.get(k).and_then(|v| v.as_str()).unwrap_or("").to_owned();
            Member {
                name: text("Member"),
                role: text("Role"),
                state: text("State"),
                timeline: m.get("TL").and_then(serde_json::Value::as_u64),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patronictl_members_are_read_from_its_json() {
        let json = r#"[{"Cluster": "acts", "Member": "n1", "Host": "127.0.0.1:1", "Role": "Leader", "State": "running", "TL": 2},
                       {"Cluster": "acts", "Member": "n2", "Host": "127.0.0.1:2", "Role": "Sync Standby", "State": "streaming", "TL": 2, "Lag in MB": 0}]"#;
        let ms = parse_members(json).unwrap();
        assert_eq!(ms.len(), 2);
        assert!(ms[0].is_leader() && !ms[0].is_sync_standby());
        assert!(ms[1].is_sync_standby() && !ms[1].is_leader());
        assert_eq!(ms[1].timeline, Some(2));
        assert!(parse_members("not json").is_err());
    }
}
