//! Opening bad input gives clear errors, and the durability option does what
//! the crate docs say across a real process crash.

use std::process::Command;

use acts_store::{ErrorKind, KvStore, ScanRange, StoreOp};
use acts_store_redb::{Durability, RedbOptions, RedbStore};

fn open_err(path: &std::path::Path) -> acts_store::StoreError {
    RedbStore::open(path, RedbOptions::default()).expect_err("open must fail")
}

#[test]
fn a_directory_is_not_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let err = open_err(dir.path());
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(err.op(), StoreOp::Open);
    assert!(err.to_string().contains("is a directory"), "{err}");
}

#[test]
fn a_path_in_a_missing_directory_cannot_be_opened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no/such/dir/acts.db");
    let err = open_err(&path);
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(
        err.to_string().contains("no/such/dir/acts.db"),
        "names the path: {err}"
    );
}

#[test]
fn a_file_that_is_not_redb_is_rejected_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    let text = "these are my notes, not a database\n".repeat(200);
    std::fs::write(&path, &text).unwrap();
    let err = open_err(&path);
    assert!(!err.is_retryable(), "{err}");
    assert!(
        matches!(err.kind(), ErrorKind::InvalidInput | ErrorKind::Corruption),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        text,
        "the file is untouched"
    );
}

#[test]
fn a_database_open_elsewhere_is_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("acts.db");
    let _held = RedbStore::open(&path, RedbOptions::default()).unwrap();
    let err = open_err(&path);
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert!(err.to_string().contains("already open"), "{err}");
}

const CHILD_ENV: &str = "ACTS_REDB_CRASH_CHILD";

/// Run in a child process by the crash tests: writes keys, optionally syncs
/// half way, then dies without closing the store.
#[test]
fn crash_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return; // only does something when spawned by a crash test
    };
    let (path, mode) = spec.split_once('|').expect("path|mode");
    let durability = if mode == "fsync" {
        Durability::Immediate
    } else {
        Durability::None
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let store =
            RedbStore::open(path, RedbOptions::default().with_durability(durability)).unwrap();
        for i in 0..40u32 {
            store
                .put(format!("k{i:03}").as_bytes(), b"v")
                .await
                .unwrap();
            if i == 19 {
                store.sync().await.unwrap();
            }
        }
        // Die like a killed process: no destructor, no final sync.
        std::process::exit(0);
    });
}

/// Runs `crash_child` in a new process on `path` and returns the keys found
/// after reopening.
fn crash_and_reopen(path: &std::path::Path, mode: &str) -> Vec<String> {
    let status = Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            &test_named("crash_child"),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, format!("{}|{mode}", path.display()))
        .status()
        .expect("spawn the child process");
    assert!(status.success(), "the child process failed: {status}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let store =
            RedbStore::open(path, RedbOptions::default()).expect("the file reopens after a crash");
        store
            .scan(ScanRange::all())
            .await
            .expect("scan after reopen")
            .into_iter()
            .map(|p| String::from_utf8(p.key).expect("utf-8 keys"))
            .collect()
    })
}

fn first_keys(n: u32) -> Vec<String> {
    (0..n).map(|i| format!("k{i:03}")).collect()
}

#[test]
fn with_fsync_every_acknowledged_write_survives_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let keys = crash_and_reopen(&dir.path().join("fsync.db"), "fsync");
    assert_eq!(keys, first_keys(40));
}

#[test]
fn without_fsync_a_crash_keeps_a_consistent_prefix_up_to_the_last_sync() {
    let dir = tempfile::tempdir().unwrap();
    let keys = crash_and_reopen(&dir.path().join("nosync.db"), "nosync");
    let n = keys.len() as u32;
    eprintln!("nosync crash kept {n} of 40 keys");
    assert!(
        n >= 20,
        "everything up to the explicit sync survives, got {n} keys"
    );
    assert_eq!(
        keys,
        first_keys(n),
        "what survives is a prefix of the writes"
    );
}

const HOLD_ENV: &str = "ACTS_REDB_HOLD_CHILD";

/// The name the test harness knows test `f` of this file by (its module
/// path below the test crate: `open_and_durability::f`).
fn test_named(f: &str) -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{f}"),
        None => f.to_owned(),
    }
}

/// Run in a child process by the lock test: opens the database, says so on
/// stdout, and keeps it open until its stdin closes.
#[test]
fn hold_child() {
    let Ok(path) = std::env::var(HOLD_ENV) else {
        return; // only does something when spawned by the lock test
    };
    let _store =
        RedbStore::open(&path, RedbOptions::default()).expect("the child opens the database");
    println!("HOLDING");
    let mut line = String::new();
    while std::io::stdin()
        .read_line(&mut line)
        .map(|n| n > 0)
        .unwrap_or(false)
    {
        line.clear();
    }
}

#[test]
fn a_database_held_by_another_process_is_a_conflict() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("held.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &test_named("hold_child"),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HOLD_ENV, &path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (no sleep) until the child reports that it holds the database.
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("HOLDING") {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the child exited before holding the database"
        );
    }
    let err = open_err(&path);
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert!(err.is_retryable());
    drop(child.stdin.take()); // let the child finish
    assert!(child.wait().unwrap().success());
    // Once the other process is gone, the database opens.
    RedbStore::open(&path, RedbOptions::default()).unwrap();
}

#[test]
fn an_empty_file_is_an_error_and_is_not_made_into_a_new_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("acts.db");
    std::fs::write(&path, b"").unwrap();
    let err = open_err(&path);
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let text = err.to_string();
    assert!(text.contains("acts.db") && text.contains("empty"), "{text}");
    assert!(text.contains("backup"), "says what to do: {text}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "left untouched");
}

#[test]
fn damaged_pages_are_a_corruption_error_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("acts.db");
    let rt = || {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    };
    rt().block_on(async {
        let store = RedbStore::open(&path, RedbOptions::default()).unwrap();
        for i in 0..200u32 {
            store
                .put(format!("key-{i:05}").as_bytes(), &[7u8; 300])
                .await
                .unwrap();
        }
    });
    // Overwrite every page after the header with garbage.
    let mut bytes = std::fs::read(&path).unwrap();
    for b in bytes.iter_mut().skip(4096) {
        *b = 0xDE;
    }
    std::fs::write(&path, &bytes).unwrap();
    let outcome = std::panic::catch_unwind(|| {
        rt().block_on(async {
            let store = RedbStore::open(&path, RedbOptions::default())?;
            store.get(b"key-00001").await?;
            store.scan(ScanRange::all()).await?;
            store.put(b"new", b"x").await
        })
    });
    let result = outcome.expect("no panic escapes the store");
    let err = result.expect_err("a damaged file is an error");
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains("acts.db"), "names the file: {err}");
    assert!(err.to_string().contains("backup"), "says what to do: {err}");
}
