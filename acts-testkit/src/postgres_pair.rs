//! A private PostgreSQL primary and a streaming standby on loopback, for
//! failover tests: the standby is a base backup of the primary
//! (`pg_basebackup -R`), streaming its WAL, synchronous or not
//! (`synchronous_standby_names`). A test can stop the primary's WAL
//! senders (what it commits from then on reaches no standby), kill the
//! primary with `SIGKILL` (every process of it, as a lost machine) and
//! promote the standby. Clients find the primary through a multi-host URL
//! with `target_session_attrs=read-write`.

use std::time::{Duration, Instant};

use crate::postgres_server::{PostgresServer, folder, run};
use crate::process_tree::{kill_postmaster, stop_wal_senders};

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
        stop_wal_senders(pid)
    }

    /// Kills every process of the primary with `SIGKILL` (as a machine
    /// that is lost) and waits until they are gone.
    pub fn kill_primary(&mut self) -> Result<(), String> {
        let pid = self
            .primary
            .postmaster_pid()
            .ok_or("the primary is not running")?;
        kill_postmaster(pid)?;
        self.primary.forget_running();
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
