//! A private PostgreSQL server for tests: `initdb` into a temporary folder,
//! `pg_ctl` on a free loopback port with `fsync=on`, trust authentication
//! on loopback only, stopped (immediately) on drop. PostgreSQL refuses to
//! run as root: as root the server runs as the `postgres` user the Debian
//! package creates, and its folder is handed to that user.
//!
//! Set `ACTS_TEST_POSTGRES_URL` (e.g. `postgres://u@127.0.0.1:5432/db`) to
//! run the tests against an existing server instead;
//! [`PostgresServer::shared_or_start`] honours it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::redis_server::free_port;

/// The environment variable that points tests at an existing server.
pub const URL_ENV: &str = "ACTS_TEST_POSTGRES_URL";

/// How many free ports a start tries before it gives up.
const START_TRIES: usize = 5;

/// A running test server, or the URL of an external one.
#[derive(Debug)]
pub struct PostgresServer {
    url: String,
    /// The data folder of a private server (`None`: external).
    data: Option<PathBuf>,
    /// The server's options (`pg_ctl -o`), to start it again.
    options: String,
    bin: PathBuf,
    dir: Option<tempfile::TempDir>,
    running: bool,
}

/// The folder of the newest installed server binaries
/// (`/usr/lib/postgresql/N/bin`), or `pg_config --bindir`.
pub(crate) fn bin_dir() -> Result<PathBuf, String> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((n, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    let out = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .map_err(|e| format!("no PostgreSQL server is installed (run scripts/setup.sh): {e}"))?;
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// A temporary folder for a server (its data goes in `data/`, its sockets
/// in `sockets/`), handed to the server's user: for a server a test makes
/// itself (a base backup, a restore), then started with
/// [`PostgresServer::start_in`].
pub fn folder() -> Result<tempfile::TempDir, String> {
    let dir =
        tempfile::tempdir().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    let sockets = dir.path().join("sockets");
    std::fs::create_dir(&sockets).map_err(|e| format!("{}: {e}", sockets.display()))?;
    hand_to_server_user(dir.path())?;
    Ok(dir)
}

/// Hands `path` (and all in it) to the server's user when this process is
/// root.
pub fn hand_to_server_user(path: &Path) -> Result<(), String> {
    if is_root() {
        let mut c = Command::new("chown");
        c.args(["-R", "postgres:postgres"]).arg(path);
        run(c, "handing the folder to the postgres user")?;
    }
    Ok(())
}

/// Whether this process runs as root (PostgreSQL then runs as `postgres`).
pub(crate) fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `program ARGS`, as the `postgres` user when this process is root.
fn as_server_user(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// Runs `c`; its output, or an error with what it said when it failed.
pub fn run(mut c: Command, what: &str) -> Result<Output, String> {
    let out = c
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(out)
}

impl PostgresServer {
    /// Starts a private server.
    pub fn start() -> Result<Self, String> {
        Self::start_with("")
    }

    /// Starts a private server with more settings (`-c name=value ...`).
    pub fn start_with(settings: &str) -> Result<Self, String> {
        let bin = bin_dir()?;
        let dir = folder()?;
        let mut init = as_server_user(&bin.join("initdb"));
        init.args([
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
            "-D",
        ])
        .arg(dir.path().join("data"));
        run(init, "initdb")?;
        Self::start_in(dir, settings)
    }

    /// Starts the server whose data a test put in `dir/data` (a folder
    /// from [`folder`]) on a free port, with more settings.
    pub fn start_in(dir: tempfile::TempDir, settings: &str) -> Result<Self, String> {
        let bin = bin_dir()?;
        let data = dir.path().join("data");
        let sockets = dir.path().join("sockets");
        hand_to_server_user(&data)?;
        let mut server = Self {
            url: String::new(),
            data: Some(data),
            options: String::new(),
            bin,
            dir: Some(dir),
            running: false,
        };
        // A port found free may be taken by another process (another test
        // binary's server) before this server binds it: then the start is
        // tried again on another port.
        let mut last = String::new();
        for _ in 0..START_TRIES {
            let port = free_port()?;
            server.options = format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=200 {settings}",
                sockets.display()
            );
            server.url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
            match server.start_again() {
                Ok(()) => return Ok(server),
                Err(e) if server.log().contains("could not bind") => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(format!("{last} (tried {START_TRIES} ports)"))
    }

    /// The private server's log so far (empty for an external server).
    fn log(&self) -> String {
        self.dir
            .as_ref()
            .and_then(|d| std::fs::read_to_string(d.path().join("server.log")).ok())
            .unwrap_or_default()
    }

    /// Starts a private server that was stopped, on the same port and data.
    pub fn start_again(&mut self) -> Result<(), String> {
        let (Some(data), Some(dir)) = (&self.data, &self.dir) else {
            return Err("an external server is not started by the tests".into());
        };
        let mut start = as_server_user(&self.bin.join("pg_ctl"));
        start
            .args(["-w", "-t", "60", "-D"])
            .arg(data)
            .arg("-l")
            .arg(dir.path().join("server.log"))
            .args(["-o", &self.options, "start"]);
        if let Err(e) = run(start, "pg_ctl start") {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(8).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(format!("{e}\nthe server's log ends:\n{}", tail.join("\n")));
        }
        self.running = true;
        Ok(())
    }

    /// The server named by `ACTS_TEST_POSTGRES_URL` if set, else a private one.
    pub fn shared_or_start() -> Result<Self, String> {
        match std::env::var(URL_ENV) {
            Ok(url) if !url.is_empty() => Ok(Self {
                url,
                data: None,
                options: String::new(),
                bin: PathBuf::new(),
                dir: None,
                running: false,
            }),
            _ => Self::start(),
        }
    }

    /// The loopback port of a private server (0 for an external one).
    pub fn port(&self) -> u16 {
        self.url
            .rsplit_once(':')
            .and_then(|(_, rest)| rest.split('/').next()?.parse().ok())
            .unwrap_or(0)
    }

    /// The data folder of a private server.
    pub fn data(&self) -> Option<&Path> {
        self.data.as_deref()
    }

    /// A PostgreSQL program (`pg_dump`, `pg_basebackup`, ...) of the
    /// server's version, run as the server's user.
    pub fn tool(&self, name: &str) -> Command {
        as_server_user(&self.bin.join(name))
    }

    /// Runs `sql` with `psql` on the server; its unaligned output.
    pub fn psql(&self, sql: &str) -> Result<String, String> {
        let mut c = self.tool("psql");
        c.args(["-h", "127.0.0.1", "-p", &self.port().to_string()])
            .args(["-U", "postgres", "-d", "postgres", "-XAtc", sql]);
        let out = run(c, "psql")?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// The process id of a private server's postmaster, from its
    /// `postmaster.pid`.
    pub(crate) fn postmaster_pid(&self) -> Option<u32> {
        crate::process_tree::postmaster_of(self.data()?)
    }

    /// Marks a server killed from outside as stopped.
    pub(crate) fn forget_running(&mut self) {
        self.running = false;
    }

    /// The URL to connect to (no namespace).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL of namespace `ns`.
    pub fn url_of(&self, ns: &str) -> String {
        let sep = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{sep}namespace={ns}", self.url)
    }

    /// Stops a private server at once (as a crash would; `pg_ctl stop -m
    /// immediate`). An external server is left alone.
    pub fn stop(&mut self) {
        if let (Some(data), true) = (&self.data, self.running) {
            let mut stop = as_server_user(&self.bin.join("pg_ctl"));
            stop.args(["-w", "-D"])
                .arg(data)
                .args(["-m", "immediate", "stop"]);
            let _ = stop
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            self.running = false;
        }
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        self.stop();
    }
}
