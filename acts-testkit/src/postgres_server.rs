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

/// A temporary folder for a server, handed to the server's user, with its
/// socket folder made (returned).
pub(crate) fn server_folders(dir: &tempfile::TempDir) -> Result<PathBuf, String> {
    let sockets = dir.path().join("sockets");
    std::fs::create_dir(&sockets).map_err(|e| format!("{}: {e}", sockets.display()))?;
    if is_root() {
        run(
            {
                let mut c = Command::new("chown");
                c.args(["-R", "postgres:postgres"]).arg(dir.path());
                c
            },
            "handing the folder to the postgres user",
        )?;
    }
    Ok(sockets)
}

/// Whether this process runs as root (PostgreSQL then runs as `postgres`).
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `program ARGS`, as the `postgres` user when this process is root.
pub(crate) fn as_server_user(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

pub(crate) fn run(mut c: Command, what: &str) -> Result<Output, String> {
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
    pub(crate) fn start_with(settings: &str) -> Result<Self, String> {
        let bin = bin_dir()?;
        let dir =
            tempfile::tempdir().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        let data = dir.path().join("data");
        let sockets = server_folders(&dir)?;
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
        .arg(&data);
        run(init, "initdb")?;
        Self::start_on(bin, dir, data, &sockets, settings)
    }

    /// Starts the server of `data` (in `dir`) on a free port.
    pub(crate) fn start_on(
        bin: PathBuf,
        dir: tempfile::TempDir,
        data: PathBuf,
        sockets: &Path,
        settings: &str,
    ) -> Result<Self, String> {
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
        run(start, "pg_ctl start")?;
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
    pub(crate) fn data(&self) -> Option<&Path> {
        self.data.as_deref()
    }

    /// The binaries' folder.
    pub(crate) fn bin(&self) -> &Path {
        &self.bin
    }

    /// The process id of a private server's postmaster, from its
    /// `postmaster.pid`.
    pub(crate) fn postmaster_pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.data()?.join("postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
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
