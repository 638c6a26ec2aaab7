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
        let port = free_port()?;
        let mut server = Self {
            port,
            url: format!("redis://127.0.0.1:{port}"),
            persistence,
            child: None,
            dir: Some(dir),
        };
        server.spawn()?;
        Ok(server)
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
        self.spawn()
    }

    fn spawn(&mut self) -> Result<(), String> {
        let Some(dir) = &self.dir else {
            return Err("no directory for a private server".into());
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
            })?;
        self.child = Some(child);
        self.wait_until_accepting()
    }

    fn wait_until_accepting(&mut self) -> Result<(), String> {
        let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port);
        let started = Instant::now();
        loop {
            if TcpStream::connect(addr).is_ok() {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(format!(
                    "redis-server exited at start ({status}); is port {} taken?",
                    self.port
                ));
            }
            if started.elapsed() > START_GUARD {
                self.stop();
                return Err(format!(
                    "redis-server did not accept connections on port {} in {START_GUARD:?}",
                    self.port
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
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
