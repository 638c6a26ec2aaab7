//! `acts serve` is driven by no web page: over real HTTP to the shipped
//! binary, a browser's cross-origin "simple" requests (a `text/plain`
//! deploy or start), a request from another page's origin, and a DNS
//! rebinding page's read (its own name as `Host`) are refused — and
//! leave nothing behind — while programs (no `Origin`) and the server's
//! own dashboard origin are served. With tokens, a call that changes
//! something still refuses a foreign origin.

use crate::support;

use support::{request, serve, serve_with, stop};

const MODEL: &str = "id: page\nver: '1'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: approve }\n";

#[test]
fn without_tokens_other_pages_and_other_hosts_are_refused() {
    let (child, addr) = serve("memory:");
    let port = addr.rsplit(':').next().expect("a port").to_owned();
    let host = addr.as_str();
    // A page's simple POST of a model as text/plain: 415 (no preflight is
    // needed for it, so the server must refuse it itself).
    let (status, body) = request(
        host,
        "POST",
        "/api/v1/models",
        &[
            ("Host", host),
            ("Origin", "http://evil.example"),
            ("Content-Type", "text/plain"),
        ],
        MODEL,
    );
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("forbidden_origin"), "{body}");
    let (status, body) = request(
        host,
        "POST",
        "/api/v1/models",
        &[("Host", host), ("Content-Type", "text/plain")],
        MODEL,
    );
    assert_eq!(status, 415, "{body}");
    assert!(body.contains("application/yaml"), "{body}");
    let (status, body) = request(
        host,
        "POST",
        "/api/v1/models",
        &[
            ("Host", host),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        "id=page",
    );
    assert_eq!(status, 415, "{body}");
    // Nothing was deployed.
    let (status, body) = request(host, "GET", "/api/v1/models", &[("Host", host)], "");
    assert_eq!(status, 200);
    assert!(!body.contains("\"page\""), "{body}");
    // A program deploys as YAML (no Origin), and the dashboard's own
    // origin may call too.
    let (status, body) = request(
        host,
        "POST",
        "/api/v1/models",
        &[("Host", host), ("Content-Type", "application/yaml")],
        MODEL,
    );
    assert_eq!(status, 201, "{body}");
    // A cross-origin start as text/plain: refused, no process.
    let start = r#"{"model": "page", "vars": {"pid": "fromapage"}}"#;
    let (status, _) = request(
        host,
        "POST",
        "/api/v1/processes",
        &[
            ("Host", host),
            ("Origin", "https://evil.example"),
            ("Sec-Fetch-Site", "cross-site"),
            ("Content-Type", "text/plain"),
        ],
        start,
    );
    assert_eq!(status, 403);
    let (status, body) = request(
        host,
        "POST",
        "/api/v1/processes",
        &[("Host", host), ("Content-Type", "text/plain")],
        start,
    );
    assert_eq!(status, 415, "{body}");
    let (status, _) = request(
        host,
        "GET",
        "/api/v1/processes/fromapage",
        &[("Host", host)],
        "",
    );
    assert_eq!(status, 404, "no process was started");
    let own = format!("http://{host}");
    let (status, body) = request(
        host,
        "POST",
        "/api/v1/processes",
        &[
            ("Host", host),
            ("Origin", &own),
            ("Sec-Fetch-Site", "same-origin"),
            ("Content-Type", "application/json"),
        ],
        r#"{"model": "page", "vars": {"pid": "fromdashboard"}}"#,
    );
    assert_eq!(status, 201, "{body}");
    // A rebinding page reads with its name as the Host: 403, no data.
    let rebound = format!("evil.example:{port}");
    let (status, body) = request(host, "GET", "/api/v1/processes", &[("Host", &rebound)], "");
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("forbidden_host") && !body.contains("fromdashboard"));
    // Another port on loopback is another server.
    let (status, _) = request(
        host,
        "GET",
        "/api/v1/processes",
        &[("Host", "127.0.0.1:1")],
        "",
    );
    assert_eq!(status, 403);
    // localhost with the port is this server.
    let named = format!("localhost:{port}");
    let (status, body) = request(host, "GET", "/api/v1/processes", &[("Host", &named)], "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("fromdashboard"), "{body}");
    stop(child);
}

#[test]
fn with_tokens_a_foreign_origin_cannot_change_anything() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let secret = "guard-test-secret";
    let config = dir.path().join("serve.yml");
    std::fs::write(
        &config,
        format!(
            "tokens:\n  - principal: root\n    roles: [admin]\n    sha256: {}\n",
            acts_server::hash_token(secret)
        ),
    )
    .expect("writable");
    let config = config.to_str().expect("a UTF-8 path");
    let (child, addr) = serve_with(&[
        "--store",
        "memory:",
        "--listen",
        "127.0.0.1:0",
        "--config",
        config,
    ]);
    let host = addr.as_str();
    let bearer = format!("Bearer {secret}");
    // Behind a proxy the name may be anything: with a token it is served.
    let (status, body) = request(
        host,
        "GET",
        "/api/v1/models",
        &[("Host", "acts.example.com"), ("Authorization", &bearer)],
        "",
    );
    assert_eq!(status, 200, "{body}");
    // A change from another page's origin is refused even with the token.
    let (status, body) = request(
        host,
        "POST",
        "/api/v1/models",
        &[
            ("Host", host),
            ("Authorization", &bearer),
            ("Origin", "https://evil.example"),
            ("Content-Type", "application/yaml"),
        ],
        MODEL,
    );
    assert_eq!(status, 403, "{body}");
    let (status, body) = request(
        host,
        "POST",
        "/api/v1/models",
        &[
            ("Host", host),
            ("Authorization", &bearer),
            ("Content-Type", "application/yaml"),
        ],
        MODEL,
    );
    assert_eq!(status, 201, "{body}");
    stop(child);
}
