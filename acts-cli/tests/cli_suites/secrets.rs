//! A store URL's password is never shown: not in an error, not in what
//! `acts serve` says at start (the URL as shown has `***` in its place).

use assert_cmd::Command;

/// What `acts --store URL ps` says when it fails.
fn failure_of(url: &str) -> String {
    let out = Command::new(assert_cmd::cargo::cargo_bin("acts"))
        .args(["--store", url, "ps"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("acts runs");
    assert!(!out.status.success(), "{url} cannot open");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_password_in_a_store_url_is_never_shown() {
    for (url, shown) in [
        // Nothing listens on port 1: the connection is refused.
        (
            "postgres://acts:s3cret@127.0.0.1:1/acts",
            "postgres://acts:***@127.0.0.1:1/acts",
        ),
        // Not a URL the driver takes.
        (
            "postgres://acts:s3cret@127.0.0.1:port/acts",
            "postgres://acts:***@127.0.0.1:port/acts",
        ),
        (
            "postgres://acts@127.0.0.1:1/acts?password=s3cret",
            "postgres://acts@127.0.0.1:1/acts?password=***",
        ),
        (
            "redis://:s3cret@127.0.0.1:1/ns",
            "redis://:***@127.0.0.1:1/ns",
        ),
        ("nosuch://u:s3cret@host/x", "nosuch://u:***@host/x"),
    ] {
        let said = failure_of(url);
        assert!(said.contains(shown), "{url}: {said}");
        assert!(!said.contains("s3cret"), "{url}: {said}");
    }
    // Built with or without the redis feature, the answer names no
    // password (a node list's URLs each redacted).
    let said = failure_of("redis+cluster://:s3cret@127.0.0.1:1,127.0.0.1:2/ns");
    assert!(!said.contains("s3cret"), "{said}");
    // The sentinels' password, handed to every sentinel and the master.
    let said = failure_of("redis+sentinel://:s3cret@127.0.0.1:1,127.0.0.1:2/acts/ns");
    assert!(!said.contains("s3cret"), "{said}");
}
