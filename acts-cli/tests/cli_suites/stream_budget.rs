//! Live streams cannot hold the server's memory: 100 subscribers of
//! `GET /api/v1/messages` that never read, while processes send 50 KB
//! messages, leave `acts serve` within its stream budget (the bytes
//! queued, and its resident memory), and a normal request is still
//! answered; a subscriber whose socket takes nothing for the stall time is
//! disconnected and its place given back.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::{http, serve_with, stop};

const MODEL: &str = "id: fat\nver: '1'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: approve }\n";

/// A hang guard, not a timing assumption.
const GUARD: Duration = Duration::from_secs(120);

/// Resident memory of process `pid`, bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

/// Opens a message stream and never reads it.
fn subscribe(addr: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connects");
    write!(s, "GET /api/v1/messages HTTP/1.1\r\nHost: {addr}\r\n\r\n").expect("sends");
    s
}

fn metric(addr: &str, name: &str) -> f64 {
    let (_, text) = http(addr, "GET", "/metrics", "");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in the metrics"))
}

/// A config whose streams queue `queue` bytes each (any number of
/// messages), `total` in all, and
/// drop a client that takes nothing for `stall_secs`.
fn config(dir: &std::path::Path, queue: usize, total: usize, stall_secs: u64) -> String {
    let path = dir.join("serve.yml");
    std::fs::write(
        &path,
        format!(
            "streams:\n  queue_messages: 1000000\n  queue_bytes: {queue}\n  total_bytes: {total}\n  stall: {stall_secs}\n"
        ),
    )
    .expect("writable");
    path.to_str().expect("UTF-8").to_owned()
}

#[test]
fn subscribers_that_never_read_stay_within_the_budget() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let store = format!("redb:{}?cache_mb=8", dir.path().join("s.db").display());
    let config = config(dir.path(), 2 << 20, 16 << 20, 600);
    let (child, addr) = serve_with(&[
        "--store",
        &store,
        "--listen",
        "127.0.0.1:0",
        "--config",
        &config,
    ]);
    assert_eq!(http(&addr, "POST", "/api/v1/models", MODEL).0, 201);
    let fat = "x".repeat(50 * 1024);
    let start = |pid: &str| {
        let (status, body) = http(
            &addr,
            "POST",
            "/api/v1/processes",
            &format!(r#"{{"model": "fat", "vars": {{"pid": "{pid}", "fat": "{fat}"}}}}"#),
        );
        assert_eq!(status, 201, "{body}");
    };
    // One reader shows the messages are as big as the test says.
    let mut reader = BufReader::new(subscribe(&addr));
    reader
        .get_ref()
        .set_read_timeout(Some(GUARD))
        .expect("a hang guard");
    start("warm");
    let mut longest = 0;
    let mut line = String::new();
    while longest < 50 * 1024 {
        line.clear();
        assert!(
            reader.read_line(&mut line).expect("reads") > 0,
            "the stream ended"
        );
        longest = longest.max(line.len());
    }
    drop(reader);
    let before = rss(child.id());
    let quiet: Vec<TcpStream> = (0..100).map(|_| subscribe(&addr)).collect();
    let took = Instant::now();
    for i in 0..200 {
        start(&format!("p{i}"));
    }
    let queued = metric(&addr, "acts_streams_queued_bytes");
    let peak = rss(child.id());
    let asked = Instant::now();
    let (status, _) = http(&addr, "GET", "/api/v1/processes?limit=10", "");
    let latency = asked.elapsed();
    assert_eq!(status, 200, "a normal request is answered");
    eprintln!(
        "200 starts with 100 stuck subscribers in {:?}; queued {queued} bytes; RSS {} -> {} MiB; a listing took {latency:?}",
        took.elapsed(),
        before >> 20,
        peak >> 20
    );
    assert!(
        queued <= 16_777_216.0,
        "queued {queued} bytes, over the budget"
    );
    // The budget (16 MiB) plus the connections' own HTTP buffers (about
    // 512 KiB each) and room for the engine's 200 processes; without the
    // bounds, 100 × 600 messages of 50 KB would be 3 GB.
    let allowed = 16 * (1 << 20) + 100 * (1 << 19) + 96 * (1 << 20);
    assert!(
        peak.saturating_sub(before) <= allowed,
        "RSS grew by {} MiB",
        (peak - before) >> 20
    );
    drop(quiet);
    assert_eq!(stop(child), Some(0));
}

#[test]
fn a_subscriber_that_takes_nothing_is_disconnected() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    // Queues big enough that only the stall can end the stream.
    let config = config(dir.path(), 256 << 20, 1 << 30, 1);
    let (child, addr) = serve_with(&[
        "--store",
        "memory:",
        "--listen",
        "127.0.0.1:0",
        "--config",
        &config,
    ]);
    assert_eq!(http(&addr, "POST", "/api/v1/models", MODEL).0, 201);
    let quiet = subscribe(&addr);
    let fat = "y".repeat(50 * 1024);
    // Fill the socket until the server cuts the subscriber off.
    let started = Instant::now();
    let mut i = 0;
    while metric(&addr, "acts_streams_open") > 0.0 {
        assert!(
            started.elapsed() < GUARD,
            "the stuck subscriber was never dropped"
        );
        let (status, _) = http(
            &addr,
            "POST",
            "/api/v1/processes",
            &format!(r#"{{"model": "fat", "vars": {{"pid": "q{i}", "fat": "{fat}"}}}}"#),
        );
        assert_eq!(status, 201);
        i += 1;
        if i > 400 {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    drop(quiet);
    assert_eq!(stop(child), Some(0));
}
