//! `acts serve` on a real private Redis says what the store guarantees and
//! refuses one that loses data: an evicting server is refused at start
//! with the setting named; switched to evicting while serving, the next
//! start is refused and `/readyz` says why (and both recover when it is
//! switched back); a server without persistence is named at start and the
//! stop claims no more than it keeps; `noeviction` with an fsynced AOF
//! gets no warning — and a server that evicted keys while acts ran is
//! named at `/readyz` and at the stop, even once it is set back.
//! (Feature `redis`: `scripts/test.sh` runs it.)

#![cfg(feature = "redis")]

use crate::support;

use acts_testkit::redis_server::{Persistence, RedisServer};
use support::{http, serve_logged, stop};

const MODEL: &str = "id: approval\nver: '1'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: approve }\n";

fn config_set(url: &str, key: &str, value: &str) {
    let port = url.rsplit(':').next().expect("a port");
    let out = std::process::Command::new("redis-cli")
        .args(["-p", port, "CONFIG", "SET", key, value])
        .output()
        .expect("redis-cli runs");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("OK"),
        "CONFIG SET {key} {value}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn start(addr: &str, pid: &str) -> (u16, String) {
    http(
        addr,
        "POST",
        "/api/v1/processes",
        &format!(r#"{{"model": "approval", "vars": {{"pid": "{pid}"}}}}"#),
    )
}

#[test]
fn an_evicting_redis_is_refused_at_start_and_while_serving() {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let store = format!("{}/evict", server.url());
    config_set(server.url(), "maxmemory-policy", "allkeys-lru");
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("acts"))
        .args(["serve", "--store", &store, "--listen", "127.0.0.1:0"])
        .output()
        .expect("acts serve runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("maxmemory-policy allkeys-lru") && err.contains("noeviction"),
        "{err}"
    );

    config_set(server.url(), "maxmemory-policy", "noeviction");
    let (child, addr, log) = serve_logged(&["--store", &store, "--listen", "127.0.0.1:0"]);
    let (status, body) = http(&addr, "POST", "/api/v1/models", MODEL);
    assert_eq!(status, 201, "{body}");
    assert_eq!(start(&addr, "before").0, 201);
    assert_eq!(http(&addr, "GET", "/readyz", "").0, 200);
    // Switched while serving: /readyz says why, the next start is refused.
    config_set(server.url(), "maxmemory-policy", "allkeys-lru");
    let (status, body) = http(&addr, "GET", "/readyz", "");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("maxmemory-policy allkeys-lru"), "{body}");
    let (status, body) = start(&addr, "refused");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("maxmemory-policy"), "{body}");
    let (_, metrics) = http(&addr, "GET", "/metrics", "");
    assert!(metrics.contains("acts_store_ready 0"), "{metrics}");
    // Switched back: taken again.
    config_set(server.url(), "maxmemory-policy", "noeviction");
    assert_eq!(http(&addr, "GET", "/readyz", "").0, 200);
    assert_eq!(start(&addr, "after").0, 201);
    assert_eq!(
        http(&addr, "GET", "/api/v1/processes/refused", "").0,
        404,
        "the refused start left nothing"
    );
    assert_eq!(stop(child), Some(0));
    // This server keeps nothing on disk: said at start, and at the stop.
    let log = log.text();
    assert!(
        log.contains("warning") && log.contains("keeps nothing on disk"),
        "{log}"
    );
    assert!(!log.contains("everything acknowledged is stored"), "{log}");
    assert!(log.contains("handed to the store, but"), "{log}");
}

#[test]
fn an_fsynced_append_only_redis_gets_no_warning() {
    let server =
        RedisServer::start_with(Persistence::AppendFsyncAlways).unwrap_or_else(|e| panic!("{e}"));
    let store = format!("{}/synced", server.url());
    let (child, addr, log) = serve_logged(&["--store", &store, "--listen", "127.0.0.1:0"]);
    assert_eq!(http(&addr, "GET", "/readyz", "").0, 200);
    let (_, metrics) = http(&addr, "GET", "/metrics", "");
    assert!(metrics.contains("acts_store_synced 1"), "{metrics}");
    // The store's traffic is counted: opening it took round trips.
    let round_trips = metrics
        .lines()
        .find_map(|l| l.strip_prefix("acts_store_round_trips_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("acts_store_round_trips_total in: {metrics}"));
    assert!(round_trips > 0.0, "{metrics}");
    assert!(metrics.contains("acts_store_sent_bytes_total"), "{metrics}");
    assert_eq!(stop(child), Some(0));
    let log = log.text();
    assert!(!log.contains("warning"), "{log}");
    assert!(log.contains("everything acknowledged is stored"), "{log}");
}

#[test]
fn a_redis_that_evicted_keys_while_serving_is_named_at_readyz_and_at_the_stop() {
    let server =
        RedisServer::start_with(Persistence::AppendFsyncAlways).unwrap_or_else(|e| panic!("{e}"));
    let store = format!("{}/evicted", server.url());
    let (child, addr, log) = serve_logged(&["--store", &store, "--listen", "127.0.0.1:0"]);
    assert_eq!(http(&addr, "GET", "/readyz", ""), (200, "ready".to_owned()));
    assert_eq!(http(&addr, "POST", "/api/v1/models", MODEL).0, 201);
    for pid in ["p1", "p2", "p3"] {
        assert_eq!(start(&addr, pid).0, 201);
    }
    // The server runs out of memory and evicts what acts acknowledged:
    // every key goes (1 byte of memory), on the next command it runs.
    config_set(server.url(), "maxmemory-policy", "allkeys-lru");
    config_set(server.url(), "maxmemory", "1");
    let (status, body) = http(&addr, "GET", "/readyz", "");
    assert_eq!(status, 503, "{body}");
    // Set back: writes are taken again, but what was lost stays said.
    config_set(server.url(), "maxmemory", "0");
    config_set(server.url(), "maxmemory-policy", "noeviction");
    let (status, body) = http(&addr, "GET", "/readyz", "");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.starts_with("ready; warning:") && body.contains("Redis evicted"),
        "{body}"
    );
    let (_, metrics) = http(&addr, "GET", "/metrics", "");
    assert!(metrics.contains("acts_store_synced 0"), "{metrics}");
    assert_eq!(stop(child), Some(0));
    let log = log.text();
    assert!(!log.contains("everything acknowledged is stored"), "{log}");
    assert!(
        log.contains("handed to the store, but") && log.contains("Redis evicted"),
        "{log}"
    );
}
