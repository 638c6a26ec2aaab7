//! A private PostgreSQL primary and a streaming standby on loopback, for
//! failover tests: the standby is a base backup of the primary
//! (`pg_basebackup -R`), streaming its WAL, synchronous or not
//! (`synchronous_standby_names`). A test can stop the primary's WAL
//! senders (what it commits from then on reaches no standby), kill the
//! primary with `SIGKILL` (every process of it, as a lost machine) and
//! promote the standby. Clients find the primary through a multi-host URL
//! with `target_session_attrs=read-write`.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::postgres_server::{PostgresServer, folder, run};

/// How long the standby may take to stream from the primary (a hang
/// guard, not a timing assumption).
const STREAM_GUARD: Duration = Duration::from_secs(60);

/// A primary and its standby.
#[derive(Debug)]
pub struct PostgresPair {
    primary: PostgresServer,
    standby: PostgresServer,
    synchronous: bool,
}

impl PostgresPair {
    /// Starts a primary and a standby streaming from it; with
    /// `synchronous`, every commit on the primary waits for the standby
    /// to have it on disk (`synchronous_standby_names = '*'`,
    /// `synchronous_commit = on`).
    pub fn start(synchronous: bool) -> Result<Self, String> {
        let settings = if synchronous {
            "-c synchronous_standby_names='*' -c synchronous_commit=on"
        } else {
            "-c synchronous_commit=on"
        };
        let primary = PostgresServer::start_with(settings)?;
        let dir = folder()?;
        let mut backup = primary.tool("pg_basebackup");
        backup
            .args(["-h", "127.0.0.1", "-p", &primary.port().to_string()])
            .args(["-U", "postgres", "-R", "-X", "stream", "--no-sync", "-D"])
            .arg(dir.path().join("data"));
        run(backup, "pg_basebackup")?;
        let standby = PostgresServer::start_in(dir, "-c cluster_name=standby")?;
        let pair = Self {
            primary,
            standby,
            synchronous,
        };
        pair.wait_streaming()?;
        Ok(pair)
    }

    /// Waits until the primary streams to the standby (as a synchronous
    /// standby when the pair is synchronous).
    fn wait_streaming(&self) -> Result<(), String> {
        let want = if self.synchronous { "sync" } else { "async" };
        let started = Instant::now();
        loop {
            let state = self
                .primary
                .psql("SELECT state || ' ' || sync_state FROM pg_stat_replication")?;
            if state
                .lines()
                .any(|l| l.trim() == format!("streaming {want}"))
            {
                return Ok(());
            }
            if started.elapsed() > STREAM_GUARD {
                return Err(format!(
                    "the standby did not stream from the primary in {STREAM_GUARD:?} ({state:?})"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The URL that finds whichever of the two is the primary
    /// (`host=primary,standby`, `target_session_attrs=read-write`).
    pub fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
            self.primary.port(),
            self.standby.port()
        )
    }

    /// The URL of namespace `ns`.
    pub fn url_of(&self, ns: &str) -> String {
        format!("{}&namespace={ns}", self.url())
    }

    /// Stops (`SIGSTOP`) the primary's WAL senders: what it commits from
    /// now on reaches no standby. A synchronous primary then acknowledges
    /// no commit; an asynchronous one goes on acknowledging.
    pub fn stop_replication(&self) -> Result<(), String> {
        let pid = self
            .primary
            .postmaster_pid()
            .ok_or("the primary is not running")?;
        let senders: Vec<u32> = children_of(pid)
            .into_iter()
            .filter(|c| command_line(*c).contains("walsender"))
            .collect();
        if senders.is_empty() {
            return Err("the primary has no WAL sender".into());
        }
        for s in senders {
            signal("-STOP", s)?;
        }
        Ok(())
    }

    /// Kills every process of the primary with `SIGKILL` (as a machine
    /// that is lost) and waits until they are gone.
    pub fn kill_primary(&mut self) -> Result<(), String> {
        let pid = self
            .primary
            .postmaster_pid()
            .ok_or("the primary is not running")?;
        // Stopped first, the postmaster forks no new process while its
        // children are listed and killed (one may end by itself meanwhile).
        signal("-STOP", pid)?;
        let mut all = children_of(pid);
        for p in &all {
            let _ = signal("-KILL", *p);
        }
        signal("-KILL", pid)?;
        all.push(pid);
        self.primary.forget_running();
        let started = Instant::now();
        while all.iter().any(|p| is_alive(*p)) {
            if started.elapsed() > STREAM_GUARD {
                return Err("the primary's processes outlived SIGKILL".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Promotes the standby to primary and waits until it takes writes.
    pub fn promote_standby(&self) -> Result<(), String> {
        let data = self
            .standby
            .data()
            .ok_or("the standby has no data folder")?;
        let mut promote = self.standby.tool("pg_ctl");
        promote
            .args(["-w", "-t", "60", "-D"])
            .arg(data)
            .arg("promote");
        run(promote, "pg_ctl promote")?;
        Ok(())
    }
}

/// The processes whose parent is `pid` (from `/proc`).
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| parent_of(*p) == Some(pid))
        .collect()
}

/// The parent of `pid`: the field after the state in `/proc/PID/stat`
/// (after the command name's closing parenthesis).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `pid` runs (a zombie waiting for its parent does not).
fn is_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let (_, rest) = s.rsplit_once(')')?;
            rest.split_whitespace()
                .next()
                .map(|st| st != "Z" && st != "X")
        })
        .unwrap_or(false)
}

/// `pid`'s command line as `ps` shows it (PostgreSQL sets it to what the
/// process does: `postgres: walsender ...`).
fn command_line(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

fn signal(sig: &str, pid: u32) -> Result<(), String> {
    let mut c = Command::new("kill");
    c.args([sig, &pid.to_string()]);
    run(c, &format!("kill {sig} {pid}")).map(|_| ())
}
