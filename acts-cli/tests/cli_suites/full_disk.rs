//! A full disk under `acts serve`'s redb file heals without a restart: on
//! a 6 MiB tmpfs (mounted in a private mount namespace, so nothing is left
//! mounted if the test dies) starts are acknowledged until the disk is
//! full, then refused with 503 while `/readyz` is 503 with the reason;
//! once the filesystem is grown the same server takes starts again, and
//! every start it acknowledged is there.

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{address_in, http};

const MODEL: &str = "id: fill\nver: '1'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: approve }\n";

/// A hang guard, not a timing assumption.
const GUARD: Duration = Duration::from_secs(120);

#[test]
fn a_full_disk_is_refused_then_healed_without_a_restart() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let mnt = dir.path().join("disk");
    std::fs::create_dir(&mnt).expect("a mount point");
    let mnt = mnt.to_str().expect("a UTF-8 path").to_owned();
    let acts = assert_cmd::cargo::cargo_bin("acts");
    // Inside a user + mount namespace: mount a small tmpfs, serve on it in
    // the background, grow the tmpfs when the test writes a line.
    let script = format!(
        "mount -t tmpfs -o size=6m tmpfs '{mnt}' || exit 97\n\
         '{acts}' serve --store 'redb:{mnt}/s.db' --listen 127.0.0.1:0 &\n\
         read _ || true\n\
         mount -o remount,size=256m '{mnt}' || exit 98\n\
         wait\n",
        acts = acts.display()
    );
    let mut child = Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "sh", "-c", &script])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("unshare runs (util-linux)");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut reader = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    reader.read_line(&mut line).expect("a first line");
    let addr = address_in(&line).unwrap_or_else(|| {
        let mut rest = String::new();
        let _ = reader.read_to_string(&mut rest);
        panic!("the server did not start in a private tmpfs (needs user namespaces): {line}{rest}")
    });
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = reader.read_to_string(&mut rest);
    });
    let (status, body) = http(&addr, "POST", "/api/v1/models", MODEL);
    assert_eq!(status, 201, "{body}");
    // Fill the disk: starts with a fat var until one is refused.
    let fat = "x".repeat(32 * 1024);
    let mut acknowledged = Vec::new();
    let started = Instant::now();
    let refused = loop {
        assert!(started.elapsed() < GUARD, "the disk never filled");
        let pid = format!("p{}", acknowledged.len());
        let (status, body) = http(
            &addr,
            "POST",
            "/api/v1/processes",
            &format!(r#"{{"model": "fill", "vars": {{"pid": "{pid}", "fat": "{fat}"}}}}"#),
        );
        match status {
            201 => acknowledged.push(pid),
            503 => break body,
            other => panic!("a start answered {other}: {body}"),
        }
    };
    assert!(!acknowledged.is_empty(), "some starts were taken first");
    assert!(
        refused.contains("No space") || refused.contains("I/O error"),
        "{refused}"
    );
    // Full: not ready, and says why.
    let (status, body) = http(&addr, "GET", "/readyz", "");
    assert_eq!(status, 503, "{body}");
    // Grow the filesystem; the same server heals (the file is reopened).
    writeln!(stdin, "grow").expect("the script reads");
    let healed = Instant::now();
    loop {
        let (status, body) = http(&addr, "GET", "/readyz", "");
        if status == 200 {
            break;
        }
        assert!(healed.elapsed() < GUARD, "never ready again: {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, body) = http(
        &addr,
        "POST",
        "/api/v1/processes",
        r#"{"model": "fill", "vars": {"pid": "after"}}"#,
    );
    assert_eq!(status, 201, "{body}");
    // Nothing acknowledged was lost.
    for pid in acknowledged
        .iter()
        .chain(std::iter::once(&"after".to_owned()))
    {
        let (status, body) = http(&addr, "GET", &format!("/api/v1/processes/{pid}"), "");
        assert_eq!(status, 200, "{pid}: {body}");
    }
    let _ = Command::new("pkill")
        .args(["-TERM", "-f", &format!("redb:{mnt}/s.db")])
        .status();
    drop(stdin);
    let _ = child.wait();
}
