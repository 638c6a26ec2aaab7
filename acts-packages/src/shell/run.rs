//! One script run to a bounded end: its own process group, no stdin, a
//! scrubbed environment, a scratch folder; both streams drained at once and
//! capped; at the deadline, at the cap, or once the shell exits, the whole
//! group is killed, and the shell is always reaped.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};

/// How long a killed shell is given to be reaped.
const REAP_GRACE: Duration = Duration::from_secs(10);

/// What a run ended with.
#[derive(Debug)]
pub(crate) enum Ended {
    /// The shell exited (its group is gone too).
    Exited {
        status: ExitStatus,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
    },
    /// The deadline came first.
    TimedOut { stderr: Vec<u8> },
    /// A stream passed the cap (`"stdout"` or `"stderr"`).
    Flooded { stream: &'static str },
}

/// What a run needs.
pub(crate) struct Spec<'a> {
    /// The program (`sh`, `bash`, `nu`, `pwsh`).
    pub(crate) program: &'a str,
    /// The script file's name in the scratch folder (its extension matters
    /// to some shells).
    pub(crate) file_name: &'a str,
    pub(crate) script: &'a str,
    pub(crate) env: &'a [(String, String)],
    pub(crate) timeout: Duration,
    pub(crate) cap: usize,
}

/// A scratch folder: `script` beside `work/` (the script's working
/// folder), removed when dropped.
pub(crate) struct Scratch {
    dir: Option<tempfile::TempDir>,
}

impl Scratch {
    /// A fresh one under `root` (default: the system's temporary folder).
    pub(crate) async fn new(root: Option<PathBuf>) -> std::io::Result<Self> {
        let dir = tokio::task::spawn_blocking(move || {
            let mut b = tempfile::Builder::new();
            b.prefix("acts-shell-");
            let dir = match &root {
                Some(r) => b.tempdir_in(r)?,
                None => b.tempdir()?,
            };
            std::fs::create_dir(dir.path().join("work"))?;
            Ok::<_, std::io::Error>(dir)
        })
        .await
        .map_err(std::io::Error::other)??;
        Ok(Self { dir: Some(dir) })
    }

    fn path(&self) -> &Path {
        self.dir
            .as_ref()
            .map_or(Path::new("/nonexistent"), |d| d.path())
    }

    /// The working folder.
    pub(crate) fn work(&self) -> PathBuf {
        self.path().join("work")
    }

    /// Removes the folder off the async workers.
    pub(crate) async fn remove(mut self) {
        if let Some(d) = self.dir.take() {
            let _ = tokio::task::spawn_blocking(move || d.close()).await;
        }
    }
}

/// Runs `spec` in `scratch`.
pub(crate) async fn run(spec: &Spec<'_>, scratch: &Scratch) -> std::io::Result<Ended> {
    let file = scratch.path().join(spec.file_name);
    tokio::fs::write(&file, spec.script).await?;
    let work = scratch.work();
    let mut cmd = Command::new(spec.program);
    cmd.arg(&file)
        .current_dir(&work)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("HOME", &work)
        .env("TMPDIR", &work)
        .env("PWD", &work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // its own group, so every process it starts can be killed with it
        .process_group(0)
        // a dropped run (the runtime going away) still kills the shell
        .kill_on_drop(true);
    let mut child = cmd.spawn()?;
    let mut group = GroupKill(child.id().map(|id| Pid::from_raw(id as i32)));
    let ended = capture(&mut child, spec, || group.kill()).await;
    if !matches!(ended, Ok(Ended::Exited { .. })) {
        group.kill();
        let _ = child.start_kill();
        let _ = tokio::time::timeout(REAP_GRACE, child.wait()).await;
    }
    group.disarm();
    ended
}

/// The script's process group, killed when the run is dropped before it
/// ended (the engine's runtime going away mid-run): `kill_on_drop` alone
/// would kill the shell and leave what it started running.
struct GroupKill(Option<Pid>);

impl GroupKill {
    fn kill(&self) {
        if let Some(g) = self.0 {
            // ESRCH: the group is already gone
            let _ = killpg(g, Signal::SIGKILL);
        }
    }

    /// The run ended and the shell was reaped: nothing to kill on drop
    /// (its id may be reused from now on).
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Drains both streams and waits for the shell, whichever order they come
/// in, until all three are done, the deadline, or a stream over the cap.
async fn capture(
    child: &mut Child,
    spec: &Spec<'_>,
    kill_group: impl Fn(),
) -> std::io::Result<Ended> {
    let mut out = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("no stdout pipe"))?;
    let mut err = child
        .stderr
        .take()
        .ok_or_else(|| std::io::Error::other("no stderr pipe"))?;
    let (mut out_buf, mut err_buf) = (Vec::new(), Vec::new());
    let (mut out_open, mut err_open) = (true, true);
    let mut status = None;
    let deadline = tokio::time::sleep(spec.timeout);
    tokio::pin!(deadline);
    while out_open || err_open || status.is_none() {
        tokio::select! {
            n = read_some(&mut out, &mut out_buf), if out_open => {
                out_open = n? > 0;
                if out_buf.len() > spec.cap {
                    return Ok(Ended::Flooded { stream: "stdout" });
                }
            }
            n = read_some(&mut err, &mut err_buf), if err_open => {
                err_open = n? > 0;
                if err_buf.len() > spec.cap {
                    return Ok(Ended::Flooded { stream: "stderr" });
                }
            }
            s = child.wait(), if status.is_none() => {
                status = Some(s?);
                // what it left running in the background goes with it (and
                // lets the pipes it held close)
                kill_group();
            }
            _ = &mut deadline => {
                return Ok(Ended::TimedOut { stderr: err_buf });
            }
        }
    }
    let status = status.ok_or_else(|| std::io::Error::other("the shell's status is unknown"))?;
    Ok(Ended::Exited {
        status,
        stdout: out_buf,
        stderr: err_buf,
    })
}

/// Reads one chunk into `buf`; 0 at the end of the stream.
async fn read_some(r: &mut (impl AsyncRead + Unpin), buf: &mut Vec<u8>) -> std::io::Result<usize> {
    let mut chunk = [0u8; 8192];
    let n = r.read(&mut chunk).await?;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n)
}
