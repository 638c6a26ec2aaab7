//! Online backups, for real: `acts serve` on a redb (and a RocksDB) store
//! with a backup folder, 8 clients each running approval cycles (start a
//! process, answer its question) while an admin backs the store up
//! through the API; the copy restored with `acts restore` holds every
//! process whose start was acknowledged before the backup was asked for,
//! every answer acknowledged before then, and runs on: its open
//! questions answered, every process ends. Also `acts backup` on a store
//! nobody serves, and the refusals (a path for a name, a name taken, no
//! backup folder, a caller who is not an admin, a store acts does not
//! copy, a restore over a store).

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use assert_cmd::Command;
use serde_json::{Value, json};
use std::sync::Mutex;
use support::asks::{self, get};
use support::nodes::ASK;
use support::{http, request, serve_with, stop};

const CLIENTS: usize = 8;

/// What the clients had acknowledged: each process's answer once its
/// answer was acknowledged (`None` while only its start was).
type Acked = Arc<Mutex<BTreeMap<String, Option<u64>>>>;

/// Runs approval cycles from `CLIENTS` threads until `stop` is set.
fn run_clients(
    addr: &str,
    acked: &Acked,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..CLIENTS)
        .map(|c| {
            let (addr, acked, stop) = (addr.to_owned(), acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Acquire) {
                    let pid = format!("c{c}x{n}");
                    let (status, body) = http(
                        &addr,
                        "POST",
                        "/api/v1/processes",
                        &json!({"model": "ask", "vars": {"pid": pid}}).to_string(),
                    );
                    assert_eq!(status, 201, "{pid}: {body}");
                    acked.lock().expect("the record").insert(pid.clone(), None);
                    asks::answer(&addr, &pid, &json!(n));
                    acked.lock().expect("the record").insert(pid, Some(n));
                    n += 1;
                }
            })
        })
        .collect()
}

/// Waits until the clients have acknowledged `count` answers (none of them
/// may have failed meanwhile).
fn wait_answers(acked: &Acked, count: usize, clients: &[std::thread::JoinHandle<()>]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while acked
        .lock()
        .expect("the record")
        .values()
        .filter(|a| a.is_some())
        .count()
        < count
    {
        assert!(
            !clients.iter().any(std::thread::JoinHandle::is_finished),
            "a client failed"
        );
        assert!(std::time::Instant::now() < deadline, "the clients stalled");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The restored server at `addr` holds every process of `before` — ended
/// with its answer when the answer was acknowledged; a process whose
/// answer was not is ended now (answered, unless its answer made it in).
fn holds_what_was_acknowledged(addr: &str, before: &BTreeMap<String, Option<u64>>) {
    for (pid, answer) in before {
        let body = get(addr, &format!("/api/v1/processes/{pid}"));
        match answer {
            Some(n) => {
                assert_eq!(body["process"]["state"], "completed", "{pid}: {body}");
                assert_eq!(
                    body["process"]["outputs"]["answer"],
                    json!(n),
                    "{pid}: {body}"
                );
            }
            None => asks::wait_completed_or_answer(addr, pid),
        }
    }
}

fn acts(store: &str, args: &[&str]) -> std::process::Output {
    Command::cargo_bin("acts")
        .expect("the acts binary is built")
        .arg("--store")
        .arg(store)
        .args(args)
        .timeout(Duration::from_secs(120))
        .output()
        .expect("acts runs")
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Serves a store of `scheme` with a backup folder under load, backs it up
/// through the API, restores the copy and checks it (see the file doc).
fn backup_under_load(scheme: &str, file: &str) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let backups = dir.path().join("backups");
    std::fs::create_dir(&backups).expect("the backup folder");
    let live = format!("{scheme}:{}", dir.path().join(file).display());
    let (child, addr) = serve_with(&[
        "--store",
        &live,
        "--listen",
        "127.0.0.1:0",
        "--backup-dir",
        backups.to_str().expect("a UTF-8 path"),
    ]);
    let (status, body) = http(&addr, "POST", "/api/v1/models", ASK);
    assert_eq!(status, 201, "{body}");
    let acked: Acked = Arc::default();
    let halt = Arc::new(AtomicBool::new(false));
    let clients = run_clients(&addr, &acked, &halt);
    wait_answers(&acked, 40, &clients);
    // What was acknowledged before the backup is asked for must be in it.
    let before = acked.lock().expect("the record").clone();
    let name = format!("copy-{file}");
    let (status, body) = http(
        &addr,
        "POST",
        "/api/v1/backups",
        &json!({ "name": name }).to_string(),
    );
    assert_eq!(status, 201, "{body}");
    let reply: Value = serde_json::from_str(&body).expect("JSON");
    assert!(reply["pairs"].as_u64().unwrap_or(0) > 0, "{reply}");
    assert!(
        reply["holds"]["processes"].as_u64().unwrap_or(0) >= before.len() as u64,
        "{reply}"
    );
    // The clients go on after the backup (it held nothing back).
    let after = acked.lock().expect("the record").len();
    wait_answers(&acked, after + 16, &clients);
    halt.store(true, Ordering::Release);
    for c in clients {
        c.join().expect("a client");
    }
    assert_eq!(stop(child), Some(0));

    // Restored where no store is, checked, then served: it runs on.
    let restored = format!(
        "{scheme}:{}",
        dir.path().join(format!("restored-{file}")).display()
    );
    let out = acts(
        &restored,
        &["restore", "--from", reply["path"].as_str().expect("a path")],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("it holds 1 model(s)"), "{}", text(&out));
    let (child, addr) = serve_with(&["--store", &restored, "--listen", "127.0.0.1:0"]);
    holds_what_was_acknowledged(&addr, &before);
    // Everything the copy holds that still waits is answered and ends.
    let listed = get(&addr, "/api/v1/processes?state=running&limit=1000");
    for p in listed["processes"].as_array().cloned().unwrap_or_default() {
        let pid = p["pid"].as_str().expect("a pid").to_owned();
        asks::answer(&addr, &pid, &json!("late"));
        asks::wait_completed(&addr, &pid, &json!("late"));
    }
    assert_eq!(stop(child), Some(0));
}

#[test]
fn a_redb_store_backed_up_while_clients_run_restores_with_everything_acknowledged() {
    backup_under_load("redb", "live.redb");
}

#[test]
fn a_rocksdb_store_backed_up_while_clients_run_restores_with_everything_acknowledged() {
    backup_under_load("rocksdb", "live-rocksdb");
}

/// `acts backup` on a store nobody serves; the copy is the store.
#[test]
fn acts_backup_copies_a_store_nobody_serves_and_refuses_what_it_cannot() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let store = format!("redb:{}", dir.path().join("s.redb").display());
    let model = dir.path().join("ask.yml");
    std::fs::write(&model, ASK).expect("written");
    assert!(
        acts(&store, &["deploy", model.to_str().expect("UTF-8")])
            .status
            .success()
    );
    for i in 0..3 {
        let out = acts(&store, &["start", "ask", "--var", &format!("pid=\"p{i}\"")]);
        assert!(out.status.success(), "{}", text(&out));
    }
    let to = dir.path().join("b.redb");
    let out = acts(
        &store,
        &["backup", "--to", to.to_str().expect("UTF-8"), "--json"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["holds"]["processes"], 3, "{report}");
    assert_eq!(report["holds"]["by_state"]["running"], 3, "{report}");
    assert_eq!(report["holds"]["models"], 1, "{report}");
    // The copy is a store of its own.
    let copy = format!("redb:{}", to.display());
    let out = acts(&copy, &["ps", "--count"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "3",
        "{}",
        text(&out)
    );
    // A backup never writes over anything.
    let out = acts(&store, &["backup", "--to", to.to_str().expect("UTF-8")]);
    assert!(!out.status.success());
    assert!(text(&out).contains("exists already"), "{}", text(&out));
    // A restore never writes over a store.
    let out = acts(&store, &["restore", "--from", to.to_str().expect("UTF-8")]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("exists"), "{}", text(&out));
    // A missing backup, a server store: said so.
    let out = acts(
        &format!("redb:{}", dir.path().join("new.redb").display()),
        &["restore", "--from", "/nonexistent/b.redb"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("no such backup"), "{}", text(&out));
    let out = acts(
        "redis://127.0.0.1:1/x",
        &[
            "backup",
            "--to",
            dir.path().join("r").to_str().expect("UTF-8"),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("BGSAVE"), "{}", text(&out));
    // Nothing was left half-written.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("readable")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("partial") || n.contains("restoring"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}

/// The API's refusals: only an admin, only a name, never over a copy,
/// only with a backup folder.
#[test]
fn the_backup_call_refuses_paths_taken_names_other_callers_and_servers_without_a_folder() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let backups = dir.path().join("backups");
    std::fs::create_dir(&backups).expect("the backup folder");
    let config = dir.path().join("serve.yaml");
    std::fs::write(
        &config,
        format!(
            "tokens:\n  - principal: root\n    roles: [admin]\n    sha256: {}\n  - principal: ops\n    roles: [operator]\n    sha256: {}\n",
            acts_server::hash_token("admin-token"),
            acts_server::hash_token("operator-token")
        ),
    )
    .expect("the config");
    let store = format!("redb:{}", dir.path().join("s.redb").display());
    let (child, addr) = serve_with(&[
        "--store",
        &store,
        "--config",
        config.to_str().expect("UTF-8"),
        "--listen",
        "127.0.0.1:0",
        "--backup-dir",
        backups.to_str().expect("UTF-8"),
    ]);
    let call = |token: &str, body: &str| {
        let auth = format!("Bearer {token}");
        request(
            &addr,
            "POST",
            "/api/v1/backups",
            &[
                ("Host", &addr),
                ("Content-Type", "application/json"),
                ("Authorization", &auth),
            ],
            body,
        )
    };
    let (status, body) = call("operator-token", r#"{"name": "b1"}"#);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("admin"), "{body}");
    for name in ["../b1", "/tmp/b1", "a/b", ".hidden", "", "x\u{0}y"] {
        let (status, body) = call("admin-token", &json!({ "name": name }).to_string());
        assert_eq!(status, 400, "{name:?}: {body}");
    }
    let (status, body) = call("admin-token", r#"{"name": "b1", "path": "/etc"}"#);
    assert_eq!(status, 400, "{body}");
    let (status, body) = call("admin-token", r#"{"name": "b1"}"#);
    assert_eq!(status, 201, "{body}");
    assert!(backups.join("b1").is_file());
    let (status, body) = call("admin-token", r#"{"name": "b1"}"#);
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("exists already"), "{body}");
    assert_eq!(stop(child), Some(0));
    // Without a backup folder the call is refused, and so is a folder
    // that is not there.
    let (child, addr) = serve_with(&["--store", &store, "--listen", "127.0.0.1:0"]);
    let (status, body) = http(&addr, "POST", "/api/v1/backups", r#"{"name": "b2"}"#);
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("--backup-dir"), "{body}");
    assert_eq!(stop(child), Some(0));
    let out = acts(
        &store,
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--backup-dir",
            "/nonexistent/backups",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("no such folder"), "{}", text(&out));
    assert!(!Path::new("/nonexistent/backups").exists());
}

/// Redis keeps its own backups: a `BGSAVE` while 8 clients run cycles,
/// the snapshot loaded by a new server, and every process acknowledged
/// before the save is there and runs on (the procedure of
/// docs/OPERATIONS.md, "Backups").
#[cfg(feature = "redis")]
#[test]
fn a_redis_store_saved_in_the_background_while_clients_run_restores_with_everything_acknowledged() {
    use acts_testkit::redis_server::RedisServer;
    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let store = format!("{}/live", server.url());
    let (child, addr) = serve_with(&["--store", &store, "--listen", "127.0.0.1:0"]);
    let (status, body) = http(&addr, "POST", "/api/v1/models", ASK);
    assert_eq!(status, 201, "{body}");
    let acked: Acked = Arc::default();
    let halt = Arc::new(AtomicBool::new(false));
    let clients = run_clients(&addr, &acked, &halt);
    wait_answers(&acked, 40, &clients);
    let before = acked.lock().expect("the record").clone();
    let dir = tempfile::tempdir().expect("a temporary folder");
    let copy = dir.path().join("dump.rdb");
    server
        .bgsave_snapshot(&copy)
        .unwrap_or_else(|e| panic!("{e}"));
    let after = acked.lock().expect("the record").len();
    wait_answers(&acked, after + 16, &clients);
    halt.store(true, Ordering::Release);
    for c in clients {
        c.join().expect("a client");
    }
    assert_eq!(stop(child), Some(0));
    drop(server);

    let restored = RedisServer::start_from_snapshot(&copy).unwrap_or_else(|e| panic!("{e}"));
    let (child, addr) = serve_with(&[
        "--store",
        &format!("{}/live", restored.url()),
        "--listen",
        "127.0.0.1:0",
    ]);
    holds_what_was_acknowledged(&addr, &before);
    assert_eq!(stop(child), Some(0));
}
