//! `acts backup` and `acts restore`: an online copy of a file store (a
//! redb snapshot, a RocksDB checkpoint) — made by this command on a store
//! nobody serves, or by a running `acts serve` (`--server`) into its
//! `--backup-dir` — verified by opening the copy and counting what it
//! holds; and a copy put back in place of a stopped store.

use std::path::Path;
use std::time::Instant;

use acts::Census;
use serde_json::{Value, json};

use crate::failure::Failure;
use crate::session::open_engine;

/// The store URL of a copy at `path` of a store of `url`'s kind.
fn copy_url(url: &str, path: &Path) -> Result<String, Failure> {
    let scheme = file_scheme(url)?;
    Ok(format!("{scheme}:{}", path.display()))
}

/// `redb` or `rocksdb`: the file stores, which acts copies itself.
fn file_scheme(url: &str) -> Result<&'static str, Failure> {
    if url.starts_with("redb:") {
        Ok("redb")
    } else if url.starts_with("rocksdb:") {
        Ok("rocksdb")
    } else {
        let shown = acts::redacted_url(url);
        Err(Failure::input(format!(
            "cannot back up or restore '{shown}' with acts: {}",
            match shown.split(':').next().unwrap_or_default() {
                "redis" | "redis+sentinel" | "redis+cluster" => acts::backup_advice("redis"),
                "postgres" | "postgresql" => acts::backup_advice("postgres"),
                _ => "only the file stores (redb:PATH, rocksdb:PATH) are copied by acts",
            }
        )))
    }
}

/// Opens the copy at `url` (nothing resumed) and counts what it holds.
async fn verify(url: &str) -> Result<Census, Failure> {
    acts::census_of(url)
        .await
        .map_err(|e| Failure::run(format!("the copy is not usable: {e}")))
}

/// `acts backup --to PATH` on the store (nobody else may hold it).
pub(crate) async fn backup(url: &str, to: &Path, json_out: bool) -> Result<u8, Failure> {
    let copy = copy_url(url, to)?;
    let packages = acts_packages::PackagesConfig::default();
    let engine = open_engine(url, None, &packages).await.map_err(|mut f| {
        if f.message.contains("in use") {
            f.message.push_str(
                "; to back it up while it serves, start it with --backup-dir DIR and run `acts backup --server URL --to NAME`",
            );
        }
        f
    })?;
    let started = Instant::now();
    let made = engine.storage().store().backup(to).await;
    engine.close().await;
    crate::owner::release();
    let info = made.map_err(|e| Failure::run(format!("the backup failed: {e}")))?;
    let millis = started.elapsed().as_millis();
    let holds = verify(&copy).await?;
    if json_out {
        println!(
            "{}",
            json!({"path": to, "pairs": info.pairs, "bytes": info.bytes, "millis": millis, "holds": holds})
        );
    } else {
        println!(
            "backed up to {}: {} pairs, {} bytes in {millis} ms; it holds {}",
            to.display(),
            info.pairs,
            info.bytes,
            holds
        );
    }
    Ok(0)
}

/// `acts backup --to NAME --server URL`: the server copies its store into
/// its `--backup-dir`.
pub(crate) async fn backup_on_server(
    server: &str,
    token: Option<&str>,
    to: &Path,
    json_out: bool,
) -> Result<u8, Failure> {
    let name = to
        .to_str()
        .ok_or_else(|| Failure::input(format!("{}: not a UTF-8 name", to.display())))?;
    let reply: Value =
        crate::client::post_to(server, token, &["backups"], &json!({"name": name})).await?;
    if json_out {
        println!("{reply}");
    } else {
        println!(
            "the server backed up its store to {}: {} pairs, {} bytes in {} ms; it holds {} model(s), {} process(es)",
            reply["path"].as_str().unwrap_or_default(),
            reply["pairs"],
            reply["bytes"],
            reply["millis"],
            reply["holds"]["models"],
            reply["holds"]["processes"],
        );
    }
    Ok(0)
}

/// `acts restore --from PATH`: the copy verified, then put where the store
/// lives (which must not exist: nothing is written over).
pub(crate) async fn restore(url: &str, from: &Path, json_out: bool) -> Result<u8, Failure> {
    let scheme = file_scheme(url)?;
    let target = crate::owner::store_file(url).unwrap_or_default();
    if !from.exists() {
        return Err(Failure::input(format!(
            "{}: no such backup",
            from.display()
        )));
    }
    if target.exists() {
        return Err(Failure::input(format!(
            "{} exists: restore puts a backup where no store is (stop acts, move the store away, then restore)",
            target.display()
        )));
    }
    // Checked before it is put in place, on a copy (opening a store may
    // record its format).
    let staging = target.with_file_name(format!(
        ".{}.restoring",
        target
            .file_name()
            .map_or_else(|| "store".into(), |n| n.to_string_lossy().into_owned())
    ));
    let _ = remove(&staging);
    copy_all(from, &staging).map_err(|e| {
        let _ = remove(&staging);
        Failure::run(format!("cannot copy {}: {e}", from.display()))
    })?;
    let holds = match verify(&format!("{scheme}:{}", staging.display())).await {
        Ok(h) => h,
        Err(e) => {
            let _ = remove(&staging);
            return Err(e);
        }
    };
    std::fs::rename(&staging, &target).map_err(|e| {
        let _ = remove(&staging);
        Failure::run(format!("cannot put the copy at {}: {e}", target.display()))
    })?;
    if json_out {
        println!("{}", json!({"path": target, "from": from, "holds": holds}));
    } else {
        println!(
            "restored {} to {}: it holds {}",
            from.display(),
            target.display(),
            holds
        );
    }
    Ok(0)
}

/// Copies a file, or a folder's files (a RocksDB checkpoint), synced.
fn copy_all(from: &Path, to: &Path) -> std::io::Result<()> {
    if from.is_dir() {
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            copy_all(&entry.path(), &to.join(entry.file_name()))?;
        }
        std::fs::File::open(to)?.sync_all()
    } else {
        std::fs::copy(from, to)?;
        std::fs::File::open(to)?.sync_all()
    }
}

fn remove(path: &Path) -> std::io::Result<()> {
    if path.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}
