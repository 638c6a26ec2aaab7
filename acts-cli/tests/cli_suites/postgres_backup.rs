//! Backups of a store on PostgreSQL, restored for real: a private server
//! archiving its WAL, `acts serve` on it with ten processes each waiting
//! for an answer, a base backup (`pg_basebackup`), five answered, a named
//! restore point and a `pg_dump`, then the other five answered and the
//! server lost. Restored — to the restore point from the base backup and
//! the WAL archive (point-in-time recovery), and from the dump
//! (`pg_restore`) — the store has the five answers and five open
//! questions, and `acts serve` on it answers them and ends every process.
#![cfg(feature = "postgres")]

use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use acts_testkit::postgres_server::{PostgresServer, folder, hand_to_server_user, run};
use serde_json::json;
use support::asks::{self, get};
use support::nodes::ASK;
use support::{http, serve, stop};

const PROCESSES: u64 = 10;

/// Answers `ask{i}` with `i`.
fn answer(addr: &str, i: u64) {
    asks::answer(addr, &format!("ask{i}"), &json!(i));
}

/// `ask{i}` has ended with its answer.
fn wait_completed(addr: &str, i: u64) {
    asks::wait_completed(addr, &format!("ask{i}"), &json!(i));
}

/// A restored store: the first five answered, the other five waiting;
/// answered now, every process ends with its answer.
fn resumes(url: &str) {
    let (child, addr) = serve(url);
    for i in 0..PROCESSES / 2 {
        wait_completed(&addr, i);
    }
    for i in PROCESSES / 2..PROCESSES {
        let body = get(&addr, &format!("/api/v1/processes/ask{i}"));
        assert_eq!(body["process"]["state"], "running", "ask{i}: {body}");
        answer(&addr, i);
    }
    for i in PROCESSES / 2..PROCESSES {
        wait_completed(&addr, i);
    }
    stop(child);
}

/// Waits until `server` has left recovery (a restore that promotes).
fn wait_promoted(server: &PostgresServer) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.psql("SELECT pg_is_in_recovery()").as_deref() != Ok("f") {
        assert!(
            Instant::now() < deadline,
            "the restored server stays in recovery"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

#[test]
fn a_store_restored_from_a_dump_or_to_a_point_in_time_resumes_its_processes() {
    let archive = folder().expect("a WAL archive folder");
    let archive_dir = archive.path().join("wal");
    std::fs::create_dir(&archive_dir).expect("the archive");
    hand_to_server_user(&archive_dir).expect("the archive to the server's user");
    // A segment appears in the archive whole or not at all (copied under
    // another name, then renamed).
    let mut server = PostgresServer::start_with(&format!(
        "-c archive_mode=on -c archive_command='cp %p {0}/%f.part && mv {0}/%f.part {0}/%f'",
        archive_dir.display()
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let url = server.url_of("backup");

    let (child, addr) = serve(&url);
    let (status, body) = http(&addr, "POST", "/api/v1/models", ASK);
    assert_eq!(status, 201, "{body}");
    for i in 0..PROCESSES {
        let (status, body) = http(
            &addr,
            "POST",
            "/api/v1/processes",
            &json!({"model": "ask", "vars": {"pid": format!("ask{i}")}}).to_string(),
        );
        assert_eq!(status, 201, "{body}");
    }
    // The base backup: every process waits for its answer.
    let base = folder().expect("a folder for the base backup");
    let mut backup = server.tool("pg_basebackup");
    backup
        .args(["-h", "127.0.0.1", "-p", &server.port().to_string()])
        .args(["-U", "postgres", "-X", "stream", "--no-sync", "-D"])
        .arg(base.path().join("data"));
    run(backup, "pg_basebackup").unwrap_or_else(|e| panic!("{e}"));
    for i in 0..PROCESSES / 2 {
        answer(&addr, i);
    }
    for i in 0..PROCESSES / 2 {
        wait_completed(&addr, i);
    }
    // The point to restore to, and a dump of the same state.
    server
        .psql("SELECT pg_create_restore_point('five_answered')")
        .unwrap_or_else(|e| panic!("{e}"));
    let dump = archive.path().join("store.dump");
    let mut pg_dump = server.tool("pg_dump");
    pg_dump
        .args(["-h", "127.0.0.1", "-p", &server.port().to_string()])
        .args(["-U", "postgres", "-d", "postgres", "-Fc", "-f"])
        .arg(&dump);
    run(pg_dump, "pg_dump").unwrap_or_else(|e| panic!("{e}"));
    // After the point: the rest answered (what the restores must not have).
    for i in PROCESSES / 2..PROCESSES {
        answer(&addr, i);
    }
    stop(child);
    // Every WAL segment up to here archived, then the server is lost.
    let last = server
        .psql("SELECT pg_walfile_name(pg_switch_wal())")
        .unwrap_or_else(|e| panic!("{e}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !archive_dir.join(&last).exists() {
        assert!(Instant::now() < deadline, "WAL {last} was never archived");
        std::thread::sleep(Duration::from_millis(50));
    }
    server.stop();
    drop(server);

    // Point-in-time recovery: the base backup, replayed from the archive
    // to the restore point, then promoted.
    let data = base.path().join("data");
    write(&data.join("recovery.signal"), "");
    let auto = data.join("postgresql.auto.conf");
    let mut conf = std::fs::read_to_string(&auto).unwrap_or_default();
    conf.push_str(&format!(
        "restore_command = 'cp {}/%f %p'\nrecovery_target_name = 'five_answered'\nrecovery_target_action = 'promote'\n",
        archive_dir.display()
    ));
    write(&auto, &conf);
    let restored = PostgresServer::start_in(base, "").unwrap_or_else(|e| panic!("{e}"));
    wait_promoted(&restored);
    resumes(&restored.url_of("backup"));
    drop(restored);

    // The dump, restored into a new server.
    let fresh = PostgresServer::start().unwrap_or_else(|e| panic!("{e}"));
    let mut pg_restore = fresh.tool("pg_restore");
    pg_restore
        .args(["-h", "127.0.0.1", "-p", &fresh.port().to_string()])
        .args(["-U", "postgres", "-d", "postgres"])
        .arg(&dump);
    run(pg_restore, "pg_restore").unwrap_or_else(|e| panic!("{e}"));
    resumes(&fresh.url_of("backup"));
}
