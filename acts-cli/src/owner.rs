//! Who holds a store file: an `acts` command that opens a file store
//! (`redb:PATH`, `rocksdb:PATH`) writes `PATH.owner` (its process id, its
//! command line and when it started) and removes it when it ends, so a
//! second command that finds the store in use can say by whom and what to
//! do, instead of only "already open".

use std::path::PathBuf;

use serde_json::{Value, json};

/// The owner file of a store URL, for file stores.
fn owner_file(url: &str) -> Option<PathBuf> {
    let mut file = store_file(url)?.into_os_string();
    file.push(".owner");
    Some(PathBuf::from(file))
}

/// The file (redb) or folder (RocksDB) of a file store's URL, without its
/// options; `None` for a store that is not a file.
pub(crate) fn store_file(url: &str) -> Option<PathBuf> {
    let rest = url
        .strip_prefix("redb:")
        .or_else(|| url.strip_prefix("rocksdb:"))?;
    Some(PathBuf::from(rest.split_once('?').map_or(rest, |(p, _)| p)))
}

/// The record of the store this process holds (removed by [`release`]).
static HELD: std::sync::Mutex<Option<OwnerGuard>> = std::sync::Mutex::new(None);

/// Records this process as the holder of the store at `url` until
/// [`release`].
pub(crate) fn hold(url: &str) {
    if let Some(guard) = claim(url)
        && let Ok(mut held) = HELD.lock()
    {
        *held = Some(guard);
    }
}

/// Adds to the record of the store at `url` the address where this process
/// serves its API (`acts serve`), so a command that finds the store in use
/// can point there.
pub(crate) fn note_api(url: &str, api: &str) {
    let Some(file) = owner_file(url) else {
        return;
    };
    let record = std::fs::read_to_string(&file)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok());
    if let Some(mut record) = record
        && record["pid"].as_u64() == Some(u64::from(std::process::id()))
    {
        record["api"] = Value::String(api.to_owned());
        let _ = std::fs::write(&file, record.to_string());
    }
}

/// Removes the record written by [`hold`] (at the end of the command).
pub(crate) fn release() {
    if let Ok(mut held) = HELD.lock() {
        held.take();
    }
}

/// Records this process as the holder of the store at `url`; the returned
/// guard removes the record when dropped.
fn claim(url: &str) -> Option<OwnerGuard> {
    let file = owner_file(url)?;
    let record = json!({
        "pid": std::process::id(),
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "started": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    });
    std::fs::write(&file, record.to_string()).ok()?;
    Some(OwnerGuard(file))
}

/// Removes the owner record when the command ends.
pub(crate) struct OwnerGuard(PathBuf);

impl Drop for OwnerGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// What to tell a user whose command found the store at `url` in use.
pub(crate) fn describe_holder(url: &str) -> String {
    let how = "wait for it to end, answer its prompt there, or stop it (Ctrl-C in its terminal, \
               or `kill -INT PID`); what it leaves is continued by `acts resume`";
    let record = owner_file(url)
        .and_then(|f| std::fs::read_to_string(f).ok())
        .and_then(|t| serde_json::from_str::<Value>(&t).ok());
    let Some(record) = record else {
        return format!("another program holds it; {how}");
    };
    let pid = record["pid"].as_u64().unwrap_or(0);
    let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
    if !alive {
        return format!("another program holds it; {how}");
    }
    if let Some(api) = record["api"].as_str() {
        return format!(
            "`acts serve` (process {pid}) serves it at {api}: use it there — \
             `acts --server {api} ps` (with ACTS_TOKEN=... if it has access tokens), its \
             dashboard at {api}/, or its API (`curl {api}/api/v1/processes`) — or stop it \
             (Ctrl-C in its terminal, or `kill -TERM {pid}`) to use the file directly"
        );
    }
    let command = record["command"].as_str().unwrap_or("acts");
    let age = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .saturating_sub(record["started"].as_u64().unwrap_or(0));
    format!(
        "it is held by `{command}` (process {pid}, running for {age} s); {}",
        how.replace("PID", &pid.to_string())
    )
}
