//! The examples of `docs/OPERATIONS.md` run as written: every ```yaml
//! file=NAME block is written into a fresh folder, then every line of every
//! ```sh run block runs there, in order, against one fresh redb store (the
//! `acts` of each line is this build's binary). A line whose comment says
//! `fails` must fail with a message; every other line must succeed.

use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;

/// The fenced blocks of `text` whose info string starts with `kind`: the
/// info string's rest and the body.
fn blocks<'a>(text: &'a str, kind: &str) -> Vec<(&'a str, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(info) = line.strip_prefix("```") else {
            continue;
        };
        let mut body = String::new();
        for l in lines.by_ref() {
            if l.starts_with("```") {
                break;
            }
            body.push_str(l);
            body.push('\n');
        }
        if let Some(rest) = info.strip_prefix(kind) {
            out.push((rest.trim(), body));
        }
    }
    out
}

#[test]
fn every_example_of_the_operations_guide_runs_as_written() {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/OPERATIONS.md");
    let text = std::fs::read_to_string(&doc).expect("docs/OPERATIONS.md");
    let dir = tempfile::tempdir().expect("a temporary folder");
    for (info, body) in blocks(&text, "yaml") {
        if let Some(name) = info.strip_prefix("file=") {
            std::fs::write(dir.path().join(name), body).expect("written");
        }
    }
    let store = format!("redb:{}", dir.path().join("ops.db").display());
    let mut ran = 0;
    for (info, body) in blocks(&text, "sh") {
        if info != "run" {
            continue;
        }
        for line in body.lines() {
            // A comment starts after two spaces (or the line is one).
            let (command, comment) = match line.find("  #") {
                Some(i) => (&line[..i], &line[i..]),
                None => (line, ""),
            };
            let command = command.trim();
            if command.is_empty() || command.starts_with('#') {
                continue;
            }
            let words = shlex::split(command).unwrap_or_else(|| panic!("not a command: {line}"));
            assert_eq!(words[0], "acts", "{line}: the examples run acts");
            let out = Command::cargo_bin("acts")
                .expect("the acts binary is built")
                .current_dir(dir.path())
                .arg("--store")
                .arg(&store)
                .args(&words[1..])
                .timeout(Duration::from_secs(60))
                .output()
                .expect("acts runs");
            let must_fail = comment.contains("fails");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                !out.status.success(),
                must_fail,
                "`{line}` {}: {stderr}{}",
                if must_fail { "succeeded" } else { "failed" },
                String::from_utf8_lossy(&out.stdout)
            );
            if must_fail {
                assert!(stderr.starts_with("acts: "), "{line}: no message: {stderr}");
            }
            ran += 1;
        }
    }
    assert!(ran >= 20, "only {ran} example lines ran");
}
