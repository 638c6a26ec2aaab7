//! `acts serve` as a real process on a real socket: it answers over HTTP,
//! stops gracefully on SIGTERM with everything acknowledged stored, points
//! other commands at its API while it holds the store, refuses a
//! non-loopback address without access tokens, and with tokens from a
//! config file listens anywhere and lets each principal do its part.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command};
use std::time::Duration;

use support::{http, serve, serve_with};

use serde_json::Value;

const APPROVAL: &str = "id: approval\nver: '1'\nindex: [amount]\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: approve }\n";

fn sigterm(child: &Child) {
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs")
        .success();
    assert!(ok, "the signal was sent");
}

#[test]
fn serve_answers_stops_on_sigterm_and_keeps_what_it_acknowledged() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let store = format!("redb:{}", dir.path().join("s.db").display());
    let (mut child, addr) = serve(&store);
    let (status, body) = http(&addr, "GET", "/healthz", "");
    assert_eq!((status, body.as_str()), (200, "ok"));
    let (status, body) = http(&addr, "POST", "/api/v1/models", APPROVAL);
    assert_eq!(status, 201, "{body}");
    let (status, body) = http(
        &addr,
        "POST",
        "/api/v1/processes",
        r#"{"model": "approval", "vars": {"pid": "kept"}}"#,
    );
    assert_eq!(status, 201, "{body}");
    // While it serves, another command is pointed at its API.
    let ps = Command::new(assert_cmd::cargo::cargo_bin("acts"))
        .args(["ps", "--store", &store])
        .output()
        .expect("acts ps runs");
    let err = String::from_utf8_lossy(&ps.stderr);
    assert!(!ps.status.success());
    assert!(err.contains(&format!("http://{addr}")), "{err}");
    sigterm(&child);
    let code = child.wait().expect("it stops");
    assert_eq!(code.code(), Some(0), "a clean stop");
    // What it acknowledged is in the store.
    let ps = Command::new(assert_cmd::cargo::cargo_bin("acts"))
        .args(["ps", "--store", &store])
        .output()
        .expect("acts ps runs");
    let out = String::from_utf8_lossy(&ps.stdout);
    assert!(
        ps.status.success(),
        "{}",
        String::from_utf8_lossy(&ps.stderr)
    );
    assert!(out.contains("kept") && out.contains("running"), "{out}");
    // Served again, it carries on where it stopped.
    let (mut child, addr) = serve(&store);
    let (status, body) = http(&addr, "GET", "/api/v1/processes/kept", "");
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("JSON");
    let tid = v["tasks"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["state"] == "interrupted"))
        .and_then(|t| t["tid"].as_str())
        .expect("the interrupt still waits")
        .to_owned();
    let (status, body) = http(
        &addr,
        "POST",
        &format!("/api/v1/processes/kept/tasks/{tid}/complete"),
        "",
    );
    assert_eq!(status, 204, "{body}");
    let (_, body) = http(&addr, "GET", "/api/v1/processes/kept", "");
    let v: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(v["process"]["state"], "completed");
    sigterm(&child);
    assert_eq!(child.wait().expect("it stops").code(), Some(0));
}

#[test]
fn serve_refuses_an_address_beyond_loopback() {
    let out = Command::new(assert_cmd::cargo::cargo_bin("acts"))
        .args(["serve", "--store", "memory:", "--listen", "0.0.0.0:0"])
        .output()
        .expect("acts serve runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("loopback only"), "{err}");
}

#[test]
fn the_commands_work_through_a_running_server() {
    let (mut child, addr) = serve("memory:");
    let server = format!("http://{addr}");
    let acts = |args: &[&str]| {
        Command::new(assert_cmd::cargo::cargo_bin("acts"))
            .args(args)
            .env("ACTS_SERVER", &server)
            .output()
            .expect("acts runs")
    };
    let dir = tempfile::tempdir().expect("a temporary folder");
    let model = dir.path().join("approval.yml");
    std::fs::write(&model, APPROVAL).expect("writable");
    let out = acts(&["deploy", model.to_str().expect("a UTF-8 path")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = acts(&["start", "approval", "--quiet"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let out = acts(&["show", &pid, "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let tid = v["tasks"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["state"] == "interrupted"))
        .and_then(|t| t["tid"].as_str())
        .expect("it waits")
        .to_owned();
    // Operator controls through the server: paused, refused, resumed.
    let out = acts(&["control", "pause", &pid, "--reason", "audit"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = acts(&["act", "complete", &pid, &tid]);
    assert!(!out.status.success());
    let why = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        why.contains("is paused") && why.contains("(audit)"),
        "{why}"
    );
    let out = acts(&["show", &pid]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("pause by"));
    let out = acts(&[
        "ps",
        "--model",
        "approval",
        "--where",
        "amount>=0",
        "--count",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "0",
        "no amount given"
    );
    let out = acts(&["ps", "--model", "approval", "--where", "region=eu"]);
    assert_eq!(out.status.code(), Some(2), "approval indexes only amount");
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not index"));
    let out = acts(&["ps", "--stuck", "--json"]);
    let stuck: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(stuck, serde_json::json!([]), "paused is not stuck");
    let out = acts(&["control", "resume", &pid]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = acts(&["act", "complete", &pid, &tid]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = acts(&["ps", "--json"]);
    let list: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(list[0]["state"], "completed");
    let out = acts(&["models"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("approval"));
    // Versions through the server: listed, started by revision, guarded.
    let out = acts(&["versions", "approval", "--json"]);
    let versions: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(versions[0]["revision"], 1);
    assert_eq!(versions[0]["latest"], true);
    assert_eq!(versions[0]["processes"], 1);
    let out = acts(&["start", "approval", "--rev", "1", "-q"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = acts(&["versions", "approval", "--remove", "1"]);
    assert_eq!(out.status.code(), Some(2), "refused: it is the latest");
    assert!(String::from_utf8_lossy(&out.stderr).contains("latest"));
    // Listings through the server: the new process's open interrupt,
    // counted and listed; no deliveries without a durable channel.
    let out = acts(&["tasks", "--inbox", "--count"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");
    let out = acts(&["tasks", "--model", "approval", "--kind", "step", "--json"]);
    let steps: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(
        steps.as_array().is_some_and(|a| a.len() == 2),
        "each process's one step: {steps}"
    );
    let out = acts(&["deliveries", "--state", "failed", "--count"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
    let out = acts(&["deliveries", "--discard", "c", "m"]);
    assert_eq!(out.status.code(), Some(2), "no such dead letter");
    // A retry through the server: refused for a process not in error.
    let out = acts(&["control", "retry", &pid]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not ended in an error"));
    // Bad input through the server is still bad input (exit code 2) ...
    let out = acts(&["act", "complete", "nope", "x"]);
    assert_eq!(out.status.code(), Some(2));
    // ... and a command that needs the store says what to do instead.
    let out = acts(&["run", model.to_str().expect("a UTF-8 path"), "--auto"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("with --server use"));
    sigterm(&child);
    assert_eq!(child.wait().expect("it stops").code(), Some(0));
}

#[test]
fn sigterm_under_load_loses_nothing_it_acknowledged() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let store = format!("redb:{}", dir.path().join("load.db").display());
    let (child, addr) = serve(&store);
    let (status, body) = http(&addr, "POST", "/api/v1/models", APPROVAL);
    assert_eq!(status, 201, "{body}");
    // Eight clients start processes as fast as they can; the server is
    // told to stop while they do.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let clients: Vec<_> = (0..8)
        .map(|c| {
            let addr = addr.clone();
            let done = done.clone();
            std::thread::spawn(move || {
                let mut acknowledged = Vec::new();
                for i in 0..200 {
                    let pid = format!("c{c}n{i}");
                    let body = format!(r#"{{"model": "approval", "vars": {{"pid": "{pid}"}}}}"#);
                    // A refused or cut connection: the server is going.
                    let Ok(mut s) = TcpStream::connect(&addr) else {
                        break;
                    };
                    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                    if write!(
                        s,
                        "POST /api/v1/processes HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .is_err()
                    {
                        break;
                    }
                    let mut response = String::new();
                    if s.read_to_string(&mut response).is_err() {
                        break;
                    }
                    if response.starts_with("HTTP/1.1 201") {
                        acknowledged.push(pid);
                        done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    } else {
                        break;
                    }
                }
                acknowledged
            })
        })
        .collect();
    // Some starts are through (the rest still coming): stop the server.
    let guard = std::time::Instant::now();
    while done.load(std::sync::atomic::Ordering::SeqCst) < 20 {
        assert!(
            guard.elapsed() < Duration::from_secs(30),
            "starts go through (hang guard)"
        );
        std::thread::yield_now();
    }
    sigterm(&child);
    let mut child = child;
    assert_eq!(child.wait().expect("it stops").code(), Some(0));
    let acknowledged: Vec<String> = clients
        .into_iter()
        .flat_map(|c| c.join().expect("a client thread"))
        .collect();
    assert!(acknowledged.len() >= 20, "the starts before the signal");
    // Every start the server acknowledged is in the store.
    let out = Command::new(assert_cmd::cargo::cargo_bin("acts"))
        .args(["ps", "--json", "--store", &store])
        .output()
        .expect("acts ps runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stored: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let stored: std::collections::HashSet<&str> = stored
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|p| p["pid"].as_str())
        .collect();
    for pid in &acknowledged {
        assert!(
            stored.contains(pid.as_str()),
            "{pid} was acknowledged but is not stored"
        );
    }
}

/// `acts token new`: the token it printed and the config entry.
fn new_token(principal: &str, role: &str) -> (String, String) {
    let out = Command::new(assert_cmd::cargo::cargo_bin("acts"))
        .args(["token", "new", "--principal", principal, "--role", role])
        .output()
        .expect("acts token runs");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let token = text
        .lines()
        .find_map(|l| l.strip_prefix("token: "))
        .expect("a token line")
        .to_owned();
    let entry: String = text
        .lines()
        .filter(|l| !l.starts_with("token: ") && !l.starts_with('#'))
        .map(|l| format!("  {l}\n"))
        .collect();
    assert!(!entry.contains(&token), "the config holds only the hash");
    (token, entry)
}

#[test]
fn tokens_from_a_config_guard_the_server_and_the_cli_sends_them() {
    let (root, root_entry) = new_token("root", "admin");
    let (ann, ann_entry) = new_token("ann", "finance");
    let dir = tempfile::tempdir().expect("a temporary folder");
    let config = dir.path().join("serve.yml");
    std::fs::write(&config, format!("tokens:\n{root_entry}{ann_entry}")).expect("writable");
    // With tokens it may listen beyond loopback.
    let (mut child, addr) = serve_with(&[
        "--store",
        "memory:",
        "--listen",
        "0.0.0.0:0",
        "--config",
        config.to_str().expect("a UTF-8 path"),
    ]);
    let port = addr.rsplit(':').next().expect("a port");
    let server = format!("http://127.0.0.1:{port}");
    let acts = |token: Option<&str>, args: &[&str]| {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("acts"));
        c.args(args)
            .env("ACTS_SERVER", &server)
            .env_remove("ACTS_TOKEN");
        if let Some(t) = token {
            c.env("ACTS_TOKEN", t);
        }
        c.output().expect("acts runs")
    };
    let model = dir.path().join("approval.yml");
    std::fs::write(&model, APPROVAL).expect("writable");
    let model = model.to_str().expect("a UTF-8 path");
    let out = acts(None, &["models"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a token"));
    let out = acts(Some(&ann), &["deploy", model]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("admin role"));
    let out = acts(Some(&root), &["deploy", model]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = acts(Some(&ann), &["start", "approval", "--quiet"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let out = acts(Some(&ann), &["show", &pid]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("started by: ann"));
    // The interrupt addresses nobody: Ann may not answer it, the admin may.
    let out = acts(Some(&ann), &["act", "complete", &pid, "ask"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("addresses nobody"));
    let out = acts(Some(&root), &["act", "complete", &pid, "ask"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = acts(Some(&ann), &["show", &pid]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("next by root"), "{shown}");
    sigterm(&child);
    assert_eq!(child.wait().expect("it stops").code(), Some(0));
}

/// `acts serve` on memory with config file `config` (run to its end).
fn serve_with_config(config: &std::path::Path) -> std::process::Output {
    Command::new(assert_cmd::cargo::cargo_bin("acts"))
        .args(["serve", "--store", "memory:", "--config"])
        .arg(config)
        .output()
        .expect("acts serve runs")
}

#[test]
fn a_bad_config_is_refused_with_what_is_wrong() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let config = dir.path().join("serve.yml");
    std::fs::write(&config, "tokens:\n  - principal: ann\n    sha256: nothex\n").expect("writable");
    let out = serve_with_config(&config);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("64 hex digits") && err.contains("ann"),
        "{err}"
    );
    std::fs::write(&config, "tokenz: []\n").expect("writable");
    let out = serve_with_config(&config);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tokenz"));
}

/// Every command is written once (against one interface with two
/// transports): what it prints on a store and through a server holding
/// that store is the same, text and JSON.
#[test]
fn each_command_prints_the_same_on_the_store_and_through_the_server() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let store = format!("redb:{}", dir.path().join("acts.db").display());
    let model = dir.path().join("approval.yml");
    std::fs::write(&model, APPROVAL).expect("writable");
    let on_store = |args: &[&str]| {
        Command::new(assert_cmd::cargo::cargo_bin("acts"))
            .args(["--store", &store])
            .args(args)
            .env_remove("ACTS_SERVER")
            .output()
            .expect("acts runs")
    };
    let out = on_store(&["deploy", model.to_str().expect("a UTF-8 path")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for pid in ["p1", "p2"] {
        let out = on_store(&[
            "start",
            "approval",
            "--var",
            &format!("pid=\"{pid}\""),
            "-q",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = on_store(&["act", "complete", "p2", "ask"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let commands: &[&[&str]] = &[
        &["show", "p1"],
        &["show", "p1", "--json"],
        &["ps"],
        &["ps", "--json"],
        &["ps", "--state", "completed", "--json"],
        &[
            "ps",
            "--model",
            "approval",
            "--where",
            "amount>=0",
            "--count",
        ],
        &["tasks", "--model", "approval", "--json"],
        &["tasks", "--inbox", "--count"],
        &["deliveries", "--count"],
        &["models", "--json"],
        &["versions", "approval"],
        &["act", "nonsense", "p1", "ask"],
        &["show", "nope"],
    ];
    let local: Vec<_> = commands.iter().map(|c| on_store(c)).collect();
    let (mut child, addr) = serve(&store);
    let server = format!("http://{addr}");
    for (args, here) in commands.iter().zip(&local) {
        let there = Command::new(assert_cmd::cargo::cargo_bin("acts"))
            .args(*args)
            .env("ACTS_SERVER", &server)
            .output()
            .expect("acts runs");
        assert_eq!(
            here.status.code(),
            there.status.code(),
            "{args:?}: the exit code"
        );
        assert_eq!(
            String::from_utf8_lossy(&here.stdout),
            String::from_utf8_lossy(&there.stdout),
            "{args:?}: what it prints"
        );
    }
    sigterm(&child);
    assert_eq!(child.wait().expect("it stops").code(), Some(0));
}
