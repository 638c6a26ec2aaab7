//! The processes of a server a test kills as a lost machine would be
//! lost: a process's children (from `/proc`), whether it still runs, its
//! command line, and `kill -SIG PID`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The processes whose parent is `pid` (from `/proc`).
pub(crate) fn children_of(pid: u32) -> Vec<u32> {
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
pub(crate) fn is_alive(pid: u32) -> bool {
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

pub(crate) fn signal(sig: &str, pid: u32) -> Result<(), String> {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .map_err(|e| format!("kill {sig} {pid}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill {sig} {pid}: {status}"))
    }
}

/// Kills a PostgreSQL postmaster and every process of it with `SIGKILL`
/// (as a machine that is lost) and waits until they are gone.
pub(crate) fn kill_postmaster(pid: u32) -> Result<(), String> {
    // Stopped first, the postmaster forks no new process while its
    // children are listed and killed (one may end by itself meanwhile).
    signal("-STOP", pid)?;
    let mut all = children_of(pid);
    for p in &all {
        let _ = signal("-KILL", *p);
    }
    signal("-KILL", pid)?;
    all.push(pid);
    wait_gone(&all)
}

/// Waits until none of `pids` runs (a hang guard of a minute).
pub(crate) fn wait_gone(pids: &[u32]) -> Result<(), String> {
    let started = Instant::now();
    while pids.iter().any(|p| is_alive(*p)) {
        if started.elapsed() > Duration::from_secs(60) {
            return Err(format!("processes {pids:?} outlived SIGKILL"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Stops (`SIGSTOP`) the WAL senders of the postmaster `pid`: what it
/// commits from then on reaches no standby.
pub(crate) fn stop_wal_senders(pid: u32) -> Result<(), String> {
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

/// The pid of the postmaster running on data folder `data`, from its
/// `postmaster.pid` — only while that process is a PostgreSQL server on
/// `data` (its command line names the folder). A server killed with
/// `SIGKILL` leaves its `postmaster.pid` behind, and on a busy machine its
/// pid is soon another process's: that one is never signalled.
pub(crate) fn postmaster_of(data: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(data.join("postmaster.pid")).ok()?;
    let pid: u32 = text.lines().next()?.trim().parse().ok()?;
    let data = data.to_str()?;
    (is_alive(pid) && command_line(pid).contains(data)).then_some(pid)
}

/// Every process whose command line names `dir`, with its state (`T`:
/// stopped, `D`: waiting on the disk, ...): for a failure's message.
pub(crate) fn processes_naming(dir: &Path) -> String {
    let Some(dir) = dir.to_str() else {
        return String::new();
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return String::new();
    };
    let mut out = Vec::new();
    for pid in entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
    {
        let cmd = command_line(pid);
        if cmd.contains(dir) {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let (_, rest) = s.rsplit_once(')')?;
                    rest.split_whitespace().next().map(str::to_owned)
                })
                .unwrap_or_default();
            out.push(format!(
                "{pid} {state} {}",
                cmd.chars().take(160).collect::<String>()
            ));
        }
    }
    out.join("\n")
}
