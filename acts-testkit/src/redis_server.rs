//! A private `redis-server` for tests: a free loopback port, a temporary
//! directory, no persistence unless asked, stopped on drop.
//!
//! Set `ACTS_TEST_REDIS_URL` (e.g. `redis://127.0.0.1:6379`) to run the tests
//! against an existing server instead; [`RedisServer::shared_or_start`]
//! honours it. Tests that stop and restart the server always start their own.

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable that points tests at an existing server.
pub const URL_ENV: &str = "ACTS_TEST_REDIS_URL";

/// How long a starting server may take to accept connections before the
/// start fails (a hang guard, not a timing assumption).
const START_GUARD: Duration = Duration::from_secs(20);

/// How many free ports a start tries before it gives up.
const START_TRIES: usize = 5;

/// Why a server did not start.
enum SpawnError {
    /// It exited at start: its port was taken meanwhile (try another).
    PortTaken(String),
    Other(String),
}

impl From<SpawnError> for String {
    fn from(e: SpawnError) -> Self {
        match e {
            SpawnError::PortTaken(e) | SpawnError::Other(e) => e,
        }
    }
}

/// What the private server persists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Persistence {
    /// Nothing: no RDB snapshots, no AOF. A restart starts empty.
    #[default]
    None,
    /// An append-only file fsynced on every write (`appendfsync always`):
    /// a restart (even after `SIGKILL`) keeps every acknowledged write.
    AppendFsyncAlways,
}

/// A running test server, or the address of an external one.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    url: String,
    persistence: Persistence,
    /// `None` for an external server from `ACTS_TEST_REDIS_URL`.
    child: Option<Child>,
    dir: Option<tempfile::TempDir>,
}

impl RedisServer {
    /// Starts a private server with no persistence.
    pub fn start() -> Result<Self, String> {
        Self::start_with(Persistence::None)
    }

    /// Starts a private server with the given persistence.
    pub fn start_with(persistence: Persistence) -> Result<Self, String> {
        let dir =
            tempfile::tempdir().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        Self::start_in(dir, persistence)
    }

    /// Starts a private server on a copy of the RDB snapshot at `rdb` (a
    /// store's fixture, loaded at start), with no persistence after that.
    pub fn start_from_snapshot(rdb: &std::path::Path) -> Result<Self, String> {
        let dir =
            tempfile::tempdir().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        std::fs::copy(rdb, dir.path().join("dump.rdb"))
            .map_err(|e| format!("{}: {e}", rdb.display()))?;
        Self::start_in(dir, Persistence::None)
    }

    fn start_in(dir: tempfile::TempDir, persistence: Persistence) -> Result<Self, String> {
        let mut server = Self {
            port: 0,
            url: String::new(),
            persistence,
            child: None,
            dir: Some(dir),
        };
        // A port found free may be taken by another process (another test
        // binary's server) before this server binds it: then the server
        // exits at start and the start is tried again on another port.
        let mut last = String::new();
        for _ in 0..START_TRIES {
            server.port = free_port()?;
            server.url = format!("redis://127.0.0.1:{}", server.port);
            match server.spawn() {
                Ok(()) => return Ok(server),
                Err(SpawnError::PortTaken(e)) => last = e,
                Err(SpawnError::Other(e)) => return Err(e),
            }
        }
        Err(format!("{last} (tried {START_TRIES} ports)"))
    }

    /// Writes the server's data as an RDB snapshot to `to` (`SAVE`, then
    /// the file copied): what [`start_from_snapshot`](Self::start_from_snapshot)
    /// loads.
    pub fn save_snapshot(&self, to: &std::path::Path) -> Result<(), String> {
        let Some(dir) = &self.dir else {
            return Err("an external server (ACTS_TEST_REDIS_URL) has no snapshot here".into());
        };
        let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port);
        if !answers(addr, b"SAVE\r\n", b"+OK\r\n") {
            return Err(format!("redis-server on port {} did not SAVE", self.port));
        }
        std::fs::copy(dir.path().join("dump.rdb"), to)
            .map(|_| ())
            .map_err(|e| format!("{}: {e}", to.display()))
    }

    /// Saves the data in the background (`BGSAVE`, as an operator backs up
    /// a Redis that serves), waits until the save has ended (a minute at
    /// most: a hang guard) and copies the snapshot to `to`.
    pub fn bgsave_snapshot(&self, to: &std::path::Path) -> Result<(), String> {
        let Some(dir) = &self.dir else {
            return Err("an external server (ACTS_TEST_REDIS_URL) has no snapshot here".into());
        };
        let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port);
        let saves = |info: &str| -> Option<u64> {
            info.lines()
                .find_map(|l| l.trim().strip_prefix("rdb_saves:"))
                .and_then(|n| n.parse().ok())
        };
        let before = saves(&reply(addr, "INFO persistence").unwrap_or_default())
            .ok_or("INFO persistence has no rdb_saves (Redis 7 or later is needed)")?;
        let started = reply(addr, "BGSAVE").unwrap_or_default();
        if !started.starts_with("+Background saving started") {
            return Err(format!("BGSAVE answered {started:?}"));
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let info = reply(addr, "INFO persistence").unwrap_or_default();
            if !info.contains("rdb_bgsave_in_progress:1")
                && saves(&info).is_some_and(|n| n > before)
            {
                if !info.contains("rdb_last_bgsave_status:ok") {
                    return Err(format!("the background save failed: {info}"));
                }
                break;
            }
            if Instant::now() > deadline {
                return Err("the background save did not end in a minute".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::fs::copy(dir.path().join("dump.rdb"), to)
            .map(|_| ())
            .map_err(|e| format!("{}: {e}", to.display()))
    }

    /// The server named by `ACTS_TEST_REDIS_URL` if set, else a private one.
    pub fn shared_or_start() -> Result<Self, String> {
        match std::env::var(URL_ENV) {
            Ok(url) if !url.is_empty() => Ok(Self {
                port: 0,
                url,
                persistence: Persistence::None,
                child: None,
                dir: None,
            }),
            _ => Self::start(),
        }
    }

    /// The URL to connect to (`redis://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether this is a private server this handle can stop and restart.
    pub fn is_private(&self) -> bool {
        self.dir.is_some()
    }

    /// Kills the server (`SIGKILL`, like a crash) and waits for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and directory (so a
    /// persistent server finds its data).
    pub fn restart(&mut self) -> Result<(), String> {
        if !self.is_private() {
            return Err("an external server (ACTS_TEST_REDIS_URL) cannot be restarted".into());
        }
        self.stop();
        Ok(self.spawn()?)
    }

    fn spawn(&mut self) -> Result<(), SpawnError> {
        let Some(dir) = &self.dir else {
            return Err(SpawnError::Other(
                "no directory for a private server".into(),
            ));
        };
        let dir: PathBuf = dir.path().to_owned();
        let mut cmd = Command::new("redis-server");
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args([
                "--bind",
                "127.0.0.1",
                "--protected-mode",
                "no",
                "--daemonize",
                "no",
            ])
            .arg("--dir")
            .arg(&dir)
            .args(["--save", "", "--loglevel", "warning"]);
        match self.persistence {
            Persistence::None => cmd.args(["--appendonly", "no"]),
            Persistence::AppendFsyncAlways => {
                cmd.args(["--appendonly", "yes", "--appendfsync", "always"])
            }
        };
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    "redis-server is not installed: the Redis tests need it. Install it with \
                     `apt-get install redis-server` (Debian/Ubuntu) or `brew install redis`, \
                     or set ACTS_TEST_REDIS_URL to an existing server"
                        .to_owned()
                } else {
                    format!("cannot start redis-server: {e}")
                }
            })
            .map_err(SpawnError::Other)?;
        self.child = Some(child);
        self.wait_until_accepting()
    }

    /// Waits until the server answers `PING` on its port. A connection
    /// alone proves nothing: another process that took the port meanwhile
    /// accepts it too (and this server then exits at start).
    fn wait_until_accepting(&mut self) -> Result<(), SpawnError> {
        let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port);
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(SpawnError::PortTaken(format!(
                    "redis-server exited at start ({status}); is port {} taken?",
                    self.port
                )));
            }
            if answers_ping(addr) {
                return Ok(());
            }
            if started.elapsed() > START_GUARD {
                self.stop();
                return Err(SpawnError::Other(format!(
                    "redis-server did not answer on port {} in {START_GUARD:?}",
                    self.port
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Whether a Redis server listens at `addr` and answers `PING`.
fn answers_ping(addr: SocketAddrV4) -> bool {
    answers(addr, b"PING\r\n", b"+PONG\r\n")
}

/// The server's reply to an inline `command`: a simple string or an
/// integer as its line (`+OK`, `:1733…`), a bulk string as its text.
fn reply(addr: SocketAddrV4, command: &str) -> Option<String> {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut stream = TcpStream::connect(addr).ok()?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    stream.write_all(format!("{command}\r\n").as_bytes()).ok()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let line = line.trim_end().to_owned();
    match line.strip_prefix('$') {
        Some(len) => {
            let len: usize = len.parse().ok()?;
            let mut body = vec![0u8; len];
            reader.read_exact(&mut body).ok()?;
            Some(String::from_utf8_lossy(&body).into_owned())
        }
        None => Some(line),
    }
}

/// Whether the server at `addr` answers `command` with exactly `reply`.
fn answers(addr: SocketAddrV4, command: &[u8], reply: &[u8]) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut got = vec![0u8; reply.len()];
    stream.write_all(command).is_ok() && stream.read_exact(&mut got).is_ok() && got == reply
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A loopback port nobody listens on right now, below the kernel's
/// ephemeral range (where the test run's own client connections take
/// their ports, so a port picked there may be gone before the server
/// binds it), with room for `above` more ports above it free too (a
/// cluster node's bus port is +10,000).
pub(crate) fn free_port_with(above: Option<u16>) -> Result<u16, String> {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| {
            t.split_whitespace()
                .next()
                .and_then(|p| p.parse::<u32>().ok())
        })
        .unwrap_or(32_768);
    let top = low.saturating_sub(u32::from(above.unwrap_or(0)) + 100);
    let base = 10_000u32;
    if top <= base + 100 {
        return Err(format!(
            "no room for ports below the ephemeral range ({low})"
        ));
    }
    // Parallel test processes start at different places.
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let seed = std::process::id()
        .wrapping_mul(7919)
        .wrapping_add(NEXT.fetch_add(97, std::sync::atomic::Ordering::Relaxed));
    let span = top - base;
    for i in 0..span {
        let port = u16::try_from(base + (seed + i) % span).unwrap_or(u16::MAX);
        let free = |p: u16| TcpListener::bind((Ipv4Addr::LOCALHOST, p)).is_ok();
        if free(port) && above.is_none_or(|a| free(port + a)) {
            return Ok(port);
        }
    }
    Err("cannot find a free port below the ephemeral range".into())
}

/// A free loopback port below the ephemeral range (see [`free_port_with`]).
pub(crate) fn free_port() -> Result<u16, String> {
    free_port_with(None)
}
