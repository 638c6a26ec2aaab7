//! The upgrade path, as a test: stores written by earlier builds — one per
//! store format, on every backend, checked into
//! `tests/fixtures/store-format-N/` — open and run in this build with the
//! shipped `acts` binary, and a store of a newer format is refused at open
//! with both formats named, nothing written.
//!
//! Each fixture holds the same story (`write_story`): model `approval`
//! deployed twice; `old` started on version 1 and `waiting` on version 2,
//! both waiting for an answer; `done` answered and completed. The check
//! (`check_story`) lists them, finds them by their indexed variable,
//! answers the two questions and starts a new process.
//!
//! A build that raises the store format adds the next folder:
//! `ACTS_BLESS_STORE_FIXTURES=1 cargo test --workspace --features
//! acts-cli/redis --test cli_suites -- store_formats::` writes the fixtures of this build's
//! format (and checks them as every run does); the older folders stay.
//! With `ACTS_BLESS_BIN=PATH ACTS_BLESS_FORMAT=N` the story is written by
//! another `acts` binary (an earlier release's) into `store-format-N`:
//! `store-format-1` was written so by the release before formats were
//! recorded (commit f75e085).

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use acts_testkit::postgres_server::{PostgresServer, folder, hand_to_server_user, run};
use acts_testkit::redis_server::RedisServer;
use assert_cmd::Command;
use serde_json::Value;

/// The format this build writes (`acts_core`'s `STORE_FORMAT`).
const CURRENT: u64 = acts::STORE_FORMAT;

const MODEL_V1: &str = r#"
id: approval
ver: "1"
index: [amount]
inputs:
  amount: 0
steps:
  - id: question
    uses: acts.core.irq
    params: { key: ask }
  - id: done
    uses: acts.transform.set
    params: { done: true }
exposes:
  - name: answer
  - name: done
"#;

/// Version 2: one more step.
const MODEL_V2: &str = r#"
id: approval
ver: "2"
index: [amount]
inputs:
  amount: 0
steps:
  - id: question
    uses: acts.core.irq
    params: { key: ask }
  - id: note
    uses: acts.transform.set
    params: { noted: true }
  - id: done
    uses: acts.transform.set
    params: { done: true }
exposes:
  - name: answer
  - name: done
  - name: noted
"#;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The folders of the formats with fixtures, oldest first.
fn formats() -> Vec<(u64, PathBuf)> {
    let mut found: Vec<(u64, PathBuf)> = std::fs::read_dir(fixtures())
        .expect("tests/fixtures is readable")
        .filter_map(|e| {
            let path = e.ok()?.path();
            let n = path.file_name()?.to_str()?.strip_prefix("store-format-")?;
            Some((n.parse().ok()?, path))
        })
        .collect();
    found.sort();
    found
}

fn blessing() -> bool {
    std::env::var_os("ACTS_BLESS_STORE_FIXTURES").is_some()
}

/// The format a bless writes: this build's, or `ACTS_BLESS_FORMAT`'s with
/// `ACTS_BLESS_BIN`.
fn blessed_format() -> u64 {
    std::env::var("ACTS_BLESS_FORMAT")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CURRENT)
}

/// The folder a bless writes.
fn blessed_folder() -> PathBuf {
    let into = fixtures().join(format!("store-format-{}", blessed_format()));
    std::fs::create_dir_all(&into).expect("created");
    into
}

/// The binary that writes a blessed story (`ACTS_BLESS_BIN`, else this
/// build's `acts`).
fn writer() -> std::process::Command {
    match std::env::var_os("ACTS_BLESS_BIN") {
        Some(bin) => std::process::Command::new(bin),
        None => std::process::Command::new(assert_cmd::cargo::cargo_bin("acts")),
    }
}

/// `acts --store STORE ARGS`, which must succeed; its stdout.
pub(crate) fn acts(store: &str, args: &[&str]) -> String {
    let out = acts_output(store, args);
    assert!(
        out.status.success(),
        "acts {args:?} on {store}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn acts_output(store: &str, args: &[&str]) -> Output {
    Command::cargo_bin("acts")
        .expect("the acts binary is built")
        .arg("--store")
        .arg(store)
        .args(args)
        .timeout(Duration::from_secs(120))
        .output()
        .expect("acts runs")
}

pub(crate) fn json(store: &str, args: &[&str]) -> Value {
    let text = acts(store, args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("acts {args:?}: {e}: {text}"))
}

/// `acts --store STORE ARGS` by the [`writer`], which must succeed.
fn write(store: &str, args: &[&str]) {
    let out = writer()
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .expect("acts runs");
    assert!(
        out.status.success(),
        "acts {args:?} on {store}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes the story into `store` (an empty store).
pub(crate) fn write_story(store: &str) {
    let acts = write;
    let dir = tempfile::tempdir().expect("a temporary folder");
    let model = dir.path().join("approval.yml");
    std::fs::write(&model, MODEL_V1).expect("written");
    acts(store, &["deploy", model.to_str().expect("a UTF-8 path")]);
    acts(
        store,
        &[
            "start",
            "approval",
            "--var",
            "pid=\"old\"",
            "--var",
            "amount=50",
        ],
    );
    std::fs::write(&model, MODEL_V2).expect("written");
    acts(store, &["deploy", model.to_str().expect("a UTF-8 path")]);
    for (pid, amount) in [("waiting", 500), ("done", 700)] {
        acts(
            store,
            &[
                "start",
                "approval",
                "--var",
                &format!("pid=\"{pid}\""),
                "--var",
                &format!("amount={amount}"),
            ],
        );
    }
    acts(
        store,
        &["act", "complete", "done", "question", "--var", "answer=1"],
    );
}

/// The state of process `pid` and its outputs.
fn process(store: &str, pid: &str) -> (String, Value) {
    let shown = json(store, &["show", pid, "--json"]);
    let state = shown["process"]["state"]
        .as_str()
        .unwrap_or_else(|| panic!("show --json: {shown}"))
        .to_owned();
    (state, shown["process"]["outputs"].clone())
}

/// Checks the story in `store` (a copy of a fixture, or just written) and
/// runs it on: the questions answered, a new process started.
pub(crate) fn check_story(store: &str, what: &str) {
    let listed = json(store, &["ps", "--json"]);
    let mut pids: Vec<(String, String)> = listed
        .as_array()
        .unwrap_or_else(|| panic!("{what}: ps --json is a list: {listed}"))
        .iter()
        .map(|p| {
            (
                p["pid"].as_str().unwrap_or_default().to_owned(),
                p["state"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    pids.sort();
    assert_eq!(
        pids,
        [
            ("done".to_owned(), "completed".to_owned()),
            ("old".to_owned(), "running".to_owned()),
            ("waiting".to_owned(), "running".to_owned()),
        ],
        "{what}: {listed}"
    );
    let versions = json(store, &["versions", "approval", "--json"]);
    let revs: Vec<u64> = versions
        .as_array()
        .unwrap_or_else(|| panic!("{what}: versions --json is a list: {versions}"))
        .iter()
        .filter_map(|v| v["revision"].as_u64())
        .collect();
    assert_eq!(revs.len(), 2, "{what}: {versions}");
    // The index on `amount` was kept.
    let big = acts(
        store,
        &[
            "ps",
            "--model",
            "approval",
            "--where",
            "amount>=100",
            "--count",
        ],
    );
    assert_eq!(big.trim(), "2", "{what}: amount >= 100");
    let (state, outputs) = process(store, "done");
    assert_eq!(state, "completed", "{what}");
    assert_eq!(outputs["answer"], 1, "{what}: {outputs}");
    assert_eq!(outputs["noted"], true, "{what}: {outputs}");
    // The two questions answered: each ends on its own version.
    acts(
        store,
        &["act", "complete", "old", "question", "--var", "answer=2"],
    );
    acts(
        store,
        &[
            "act", "complete", "waiting", "question", "--var", "answer=3",
        ],
    );
    let (state, outputs) = process(store, "old");
    assert_eq!(state, "completed", "{what}");
    assert_eq!(outputs["answer"], 2, "{what}: {outputs}");
    assert_eq!(outputs["done"], true, "{what}: {outputs}");
    assert!(
        outputs.get("noted").is_none_or(Value::is_null),
        "{what}: version 1 has no note: {outputs}"
    );
    let (state, outputs) = process(store, "waiting");
    assert_eq!(state, "completed", "{what}");
    assert_eq!(outputs["answer"], 3, "{what}: {outputs}");
    assert_eq!(outputs["noted"], true, "{what}: {outputs}");
    // New work runs on the latest version.
    acts(
        store,
        &[
            "start",
            "approval",
            "--var",
            "pid=\"new\"",
            "--var",
            "amount=9",
        ],
    );
    let (state, _) = process(store, "new");
    assert_eq!(state, "running", "{what}");
    let count = acts(store, &["ps", "--state", "completed", "--count"]);
    assert_eq!(count.trim(), "3", "{what}");
    // Opened by this build, the store records this build's format.
    assert_eq!(recorded_format(store), Some(CURRENT), "{what}");
}

/// The format the store at `url` records.
fn recorded_format(url: &str) -> Option<u64> {
    all_pairs(url).into_iter().find_map(|(_, value)| {
        let row: Value = serde_json::from_slice(&value).ok()?;
        (row["d"]["id"] == "store_format").then(|| row["d"]["value"]["format"].as_u64())?
    })
}

/// Copies folder `from` into `to` (a RocksDB directory).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("created");
    for entry in std::fs::read_dir(from).expect("readable") {
        let entry = entry.expect("readable");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copied");
    }
}

/// Writes (when blessing) and checks the file stores' fixtures: `file` in
/// each format folder is a redb file or a RocksDB directory.
fn file_store(scheme: &str, file: &str, copy: fn(&Path, &Path)) {
    if blessing() {
        let into = blessed_folder();
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join(file);
        write_story(&format!("{scheme}:{}", path.display()));
        let target = into.join(file);
        let _ = std::fs::remove_dir_all(&target);
        let _ = std::fs::remove_file(&target);
        copy(&path, &target);
        // RocksDB's logs and lock are the writer's, not the store's.
        if let Ok(entries) = std::fs::read_dir(&target) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with("LOG") || name == "LOCK" {
                    std::fs::remove_file(e.path()).expect("removed");
                }
            }
        }
    }
    let formats = formats();
    assert!(
        formats.iter().any(|(n, _)| *n == CURRENT),
        "no fixture of this build's format {CURRENT}: write them with ACTS_BLESS_STORE_FIXTURES=1"
    );
    for (n, folder) in formats {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join(file);
        copy(&folder.join(file), &path);
        check_story(
            &format!("{scheme}:{}", path.display()),
            &format!("{scheme} format {n}"),
        );
    }
}

#[test]
fn redb_stores_of_every_format_open_and_run() {
    file_store("redb", "acts.redb", |from, to| {
        std::fs::copy(from, to).expect("copied");
    });
}

#[test]
fn rocksdb_stores_of_every_format_open_and_run() {
    file_store("rocksdb", "rocksdb", copy_dir);
}

#[test]
fn redis_stores_of_every_format_open_and_run() {
    if blessing() {
        let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
        write_story(&format!("{}/acts", server.url()));
        let into = blessed_folder();
        server
            .save_snapshot(&into.join("redis.rdb"))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    for (n, folder) in formats() {
        let server = RedisServer::start_from_snapshot(&folder.join("redis.rdb"))
            .unwrap_or_else(|e| panic!("{e}"));
        check_story(
            &format!("{}/acts", server.url()),
            &format!("redis format {n}"),
        );
    }
}

#[test]
fn postgres_stores_of_every_format_open_and_run() {
    if blessing() {
        let server = PostgresServer::start().unwrap_or_else(|e| panic!("{e}"));
        write_story(&server.url_of("acts"));
        let mut dump = server.tool("pg_dump");
        dump.args(["-h", "127.0.0.1", "-p", &server.port().to_string()])
            .args(["-U", "postgres", "-d", "postgres"])
            .args(["--format=plain", "--no-owner", "--no-privileges"]);
        let out = run(dump, "pg_dump").unwrap_or_else(|e| panic!("{e}"));
        let into = blessed_folder();
        std::fs::write(into.join("postgres.sql"), &out.stdout).expect("written");
    }
    for (n, folder) in formats() {
        let server = PostgresServer::start().unwrap_or_else(|e| panic!("{e}"));
        // The dump, where the server's user can read it.
        let dir = folder_for_server();
        let sql = dir.path().join("postgres.sql");
        std::fs::copy(folder.join("postgres.sql"), &sql).expect("copied");
        hand_to_server_user(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let mut psql = server.tool("psql");
        psql.args(["-h", "127.0.0.1", "-p", &server.port().to_string()])
            .args(["-U", "postgres", "-d", "postgres", "-X", "-q"])
            .args(["-v", "ON_ERROR_STOP=1", "-f"])
            .arg(&sql);
        run(psql, "psql -f postgres.sql").unwrap_or_else(|e| panic!("{e}"));
        check_story(&server.url_of("acts"), &format!("postgres format {n}"));
    }
}

fn folder_for_server() -> tempfile::TempDir {
    folder().unwrap_or_else(|e| panic!("{e}"))
}

/// A store whose format fact says a format newer than this build's: every
/// command refuses it at open, naming both formats, and writes nothing.
#[test]
fn a_store_of_a_newer_format_is_refused_at_open_and_left_as_it_was() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("acts.redb");
    let (_, current) = formats()
        .into_iter()
        .find(|(n, _)| *n == CURRENT)
        .expect("a fixture of this build's format");
    std::fs::copy(current.join("acts.redb"), &path).expect("copied");
    let url = format!("redb:{}", path.display());
    let newer = CURRENT + 1;
    let before = rewrite_format(&url, newer);
    for args in [
        &["ps"][..],
        &["show", "old"],
        &["start", "approval"],
        &["act", "complete", "old", "question"],
    ] {
        let out = acts_output(&url, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "acts {args:?} ran on a newer store");
        assert!(
            err.contains(&format!("the store holds format {newer}"))
                && err.contains(&format!("reads formats up to {CURRENT}"))
                && err.contains("Upgrading acts"),
            "acts {args:?}: {err}"
        );
    }
    assert_eq!(all_pairs(&url), before, "nothing was written");
    // The same through `acts serve`: it does not start.
    let out = acts_output(&url, &["serve", "--listen", "127.0.0.1:0"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!("the store holds format {newer}")),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(all_pairs(&url), before, "nothing was written");
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Every key and value of the store at `url`.
pub(crate) fn all_pairs(url: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    runtime().block_on(async {
        let store = acts::open_store(url).await.expect("the store opens");
        store
            .scan(acts_store::ScanRange::all())
            .await
            .expect("scanned")
            .into_iter()
            .map(|p| (p.key, p.value))
            .collect()
    })
}

/// Rewrites the store's format fact to `format` (the row found by its
/// content, whatever its key); the store's pairs after.
fn rewrite_format(url: &str, format: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    runtime().block_on(async {
        let store = acts::open_store(url).await.expect("the store opens");
        let pairs = store
            .scan(acts_store::ScanRange::all())
            .await
            .expect("scanned");
        let fact = pairs
            .iter()
            .find_map(|p| {
                let row: Value = serde_json::from_slice(&p.value).ok()?;
                (row["d"]["id"] == "store_format").then_some((p.key.clone(), row))
            })
            .expect("the store records its format");
        let (key, mut row) = fact;
        row["d"]["value"]["format"] = Value::from(format);
        row["d"]["value"]["written_by"] = Value::from("9.9.9");
        store
            .put(&key, &serde_json::to_vec(&row).expect("JSON"))
            .await
            .expect("written");
    });
    all_pairs(url)
}
