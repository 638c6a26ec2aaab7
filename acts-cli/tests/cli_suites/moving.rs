//! Moving a store to another backend with the shipped `acts`: `acts
//! export` and `acts import`, redb → PostgreSQL → RocksDB → Redis → redb.
//! Every store on the way holds the same pairs, byte for byte, and the
//! processes run on as if never moved: the story of the store-format
//! fixtures (a model in two versions, two processes waiting, one done)
//! answered and continued on the original and on each copy gives the same
//! outcomes. Cut short, an import goes on where it stopped; a damaged or
//! cut file, a store that is not empty and a file of a newer version are
//! refused with what to do.

use std::path::Path;

use acts_store::BatchOp;
use acts_store::keys::KeyBuilder;
use acts_testkit::postgres_server::PostgresServer;
use acts_testkit::redis_server::RedisServer;
use serde_json::Value;

use crate::store_formats::{acts_output, all_pairs, check_story, json, runtime, write_story};

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

fn export(store: &str, to: &Path) -> Value {
    json(store, &["export", "--to", path(to), "--json"])
}

fn import(store: &str, from: &Path) -> Value {
    json(store, &["import", "--from", path(from), "--json"])
}

/// `acts ARGS` on `store`, which must fail; its stderr.
fn refused(store: &str, args: &[&str]) -> String {
    let out = acts_output(store, args);
    assert!(!out.status.success(), "acts {args:?} on {store} was taken");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_store_moved_through_every_backend_and_back_runs_on_as_if_never_moved() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let postgres = PostgresServer::start().unwrap_or_else(|e| panic!("{e}"));
    let redis = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let origin = format!("redb:{}", dir.path().join("origin.redb").display());
    let chain = [
        origin.clone(),
        postgres.url_of("moved"),
        format!("rocksdb:{}", dir.path().join("moved.rocks").display()),
        format!("{}/moved", redis.url()),
        format!("redb:{}", dir.path().join("back.redb").display()),
    ];
    write_story(&origin);
    let pairs = all_pairs(&origin);
    assert!(pairs.len() > 20, "the story holds rows and indexes");
    for (i, step) in chain.windows(2).enumerate() {
        let file = dir.path().join(format!("step{i}.jsonl"));
        let out = export(&step[0], &file);
        assert_eq!(out["pairs"], pairs.len(), "{} exported: {out}", step[0]);
        assert_eq!(out["holds"]["processes"], 3, "{out}");
        let taken = import(&step[1], &file);
        assert_eq!(
            taken["pairs"], out["pairs"],
            "{} imported: {taken}",
            step[1]
        );
        assert_eq!(taken["holds"], out["holds"], "{taken}");
        assert_eq!(taken["resumed_after"], 0, "{taken}");
        assert!(
            all_pairs(&step[1]) == pairs,
            "{} holds the pairs of the original, byte for byte",
            step[1]
        );
    }
    // Run on: the same answers give the same outcomes on the original and
    // on every store it was moved through.
    for (store, what) in chain.iter().zip([
        "the original",
        "PostgreSQL",
        "RocksDB",
        "Redis",
        "redb again",
    ]) {
        check_story(store, &format!("moved: {what}"));
    }
}

/// What a cut import leaves in its target (each batch is all or nothing):
/// the first `n` pairs of the export and the record of how far it got.
fn plant_cut_import(target: &str, export_id: &str, pairs: &[(Vec<u8>, Vec<u8>)], n: usize) {
    runtime().block_on(async {
        let store = acts::open_store(target).await.expect("the store opens");
        let mut ops: Vec<BatchOp> = pairs[..n]
            .iter()
            .map(|(k, v)| BatchOp::put(k.clone(), v.clone()))
            .collect();
        ops.push(BatchOp::put(
            KeyBuilder::new().str("import").str("progress").finish(),
            serde_json::json!({"id": export_id, "pairs": n}).to_string(),
        ));
        store.batch(ops).await.expect("planted");
    });
}

#[test]
fn an_import_cut_short_goes_on_where_it_stopped() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let origin = format!("redb:{}", dir.path().join("origin.redb").display());
    write_story(&origin);
    let pairs = all_pairs(&origin);
    let file = dir.path().join("story.jsonl");
    let out = export(&origin, &file);
    let text = std::fs::read_to_string(&file).expect("read");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), pairs.len() + 2, "a header, the pairs, the end");
    let header: Value = serde_json::from_str(lines[0]).expect("a header");
    let id = header["id"].as_str().expect("an id");
    // A file cut in the middle is refused and counts for nothing.
    let target = format!("redb:{}", dir.path().join("target.redb").display());
    let cut = dir.path().join("cut.jsonl");
    std::fs::write(&cut, lines[..12].join("\n") + "\n").expect("written");
    let err = refused(&target, &["import", "--from", path(&cut)]);
    assert!(err.contains("ends before its end line"), "{err}");
    // A store an import of this file left half way goes on from there.
    plant_cut_import(&target, id, &pairs, 10);
    let taken = import(&target, &file);
    assert_eq!(taken["pairs"], out["pairs"], "{taken}");
    assert_eq!(taken["resumed_after"], 10, "{taken}");
    assert_eq!(taken["holds"], out["holds"], "{taken}");
    assert!(
        all_pairs(&target) == pairs,
        "the same pairs, the record gone"
    );
    check_story(&target, "imported after a cut");
    // One left half way by another export is not mixed with this one.
    let other = format!("redb:{}", dir.path().join("other.redb").display());
    plant_cut_import(&other, "another-export", &pairs, 10);
    let err = refused(&other, &["import", "--from", path(&file)]);
    assert!(err.contains("holds part of another export"), "{err}");
}

#[test]
fn damaged_files_full_stores_and_newer_versions_are_refused_with_what_to_do() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let origin = format!("redb:{}", dir.path().join("origin.redb").display());
    write_story(&origin);
    let file = dir.path().join("story.jsonl");
    export(&origin, &file);
    // Never over an existing file.
    let err = refused(&origin, &["export", "--to", path(&file)]);
    assert!(err.contains("never writes over"), "{err}");
    // Not into a store that holds anything.
    let err = refused(&origin, &["import", "--from", path(&file)]);
    assert!(err.contains("the store is not empty"), "{err}");
    let text = std::fs::read_to_string(&file).expect("read");
    let fresh = |name: &str| format!("redb:{}", dir.path().join(name).display());
    let planted = |name: &str, body: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).expect("written");
        p
    };
    // A value changed: the checksum says so, and nothing is counted done.
    let changed = planted("changed.jsonl", {
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let pair: Value = serde_json::from_str(&lines[3]).expect("a pair");
        lines[3] = serde_json::json!({"k": pair["k"], "v": "AAAA"}).to_string();
        lines.join("\n") + "\n"
    });
    let err = refused(&fresh("a.redb"), &["import", "--from", path(&changed)]);
    assert!(err.contains("it was changed or cut"), "{err}");
    // Not an export at all, a line that is not base64, an unknown field.
    for (name, body, says) in [
        (
            "text.jsonl",
            "hello\n".to_owned(),
            "not an export's first line",
        ),
        (
            "b64.jsonl",
            text.lines().take(1).collect::<Vec<_>>().join("\n") + "\n{\"k\":\"!!\",\"v\":\"\"}\n",
            "not base64",
        ),
        (
            "field.jsonl",
            text.lines().take(1).collect::<Vec<_>>().join("\n")
                + "\n{\"k\":\"\",\"v\":\"\",\"x\":1}\n",
            "not a pair",
        ),
        ("empty.jsonl", String::new(), "the file is empty"),
    ] {
        let p = planted(name, body);
        let err = refused(
            &fresh(&format!("{name}.redb")),
            &["import", "--from", path(&p)],
        );
        assert!(err.contains(says), "{name}: {err}");
    }
    // A file of a newer version: both versions named.
    let newer = planted(
        "newer.jsonl",
        text.replacen("{\"acts_export\":1,", "{\"acts_export\":9,", 1),
    );
    let err = refused(&fresh("n.redb"), &["import", "--from", path(&newer)]);
    assert!(
        err.contains("an export of version 9") && err.contains("reads versions up to 1"),
        "{err}"
    );
    // A missing file.
    let err = refused(
        &fresh("m.redb"),
        &["import", "--from", "/nonexistent/x.jsonl"],
    );
    assert!(err.contains("cannot read the export"), "{err}");
}

/// An export of `n` made-up pairs with a true end line (a store of no
/// models and no processes): big enough that an import takes a while.
fn made_up_export(path: &Path, n: usize) {
    use base64::Engine as _;
    use sha2::Digest as _;
    use std::io::Write as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("created"));
    let header = serde_json::json!({"acts_export": 1, "id": "made-up", "written_by": "a test",
        "source": "memory:", "created_at": 0});
    writeln!(out, "{header}").expect("written");
    let (mut sum, mut bytes) = (sha2::Sha256::new(), 0u64);
    for i in 0..n {
        let (k, v) = (format!("zz-test/{i:08}").into_bytes(), vec![b'v'; 200]);
        sum.update((k.len() as u64).to_be_bytes());
        sum.update(&k);
        sum.update((v.len() as u64).to_be_bytes());
        sum.update(&v);
        bytes += (k.len() + v.len()) as u64;
        writeln!(
            out,
            "{}",
            serde_json::json!({"k": b64.encode(&k), "v": b64.encode(&v)})
        )
        .expect("written");
    }
    let sha: String = sum.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let end = serde_json::json!({"end": {"pairs": n, "bytes": bytes, "sha256": sha,
        "holds": {"models": 0, "processes": 0, "by_state": {}}}});
    writeln!(out, "{end}").expect("written");
}

/// Ctrl-C in the middle of an import (every interleaving accepted: it may
/// also have ended first): it stops with exit 130 saying the same command
/// goes on, and the same command does, to every pair.
#[test]
fn ctrl_c_during_an_import_says_how_to_go_on_and_the_same_command_does() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = dir.path().join("big.jsonl");
    let n = 200_000;
    made_up_export(&file, n);
    let target = format!("redb:{}", dir.path().join("target.redb").display());
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("acts"))
        .args([
            "--store",
            &target,
            "import",
            "--from",
            path(&file),
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("acts starts");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let code = crate::cli::interrupt(&mut child);
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
        .expect("read");
    match code {
        Some(130) => {
            assert!(err.contains("the same `acts import` goes on"), "{err}");
            let taken = import(&target, &file);
            assert_eq!(taken["pairs"], n, "{taken}");
            assert!(
                taken["resumed_after"]
                    .as_u64()
                    .is_some_and(|p| p < n as u64),
                "{taken}"
            );
        }
        Some(0) => {} // it ended before the signal
        other => panic!("import stopped with {other:?}: {err}"),
    }
    // Every pair of the file (beside them, the facts the count's start
    // records in a store that had none), and no import record left.
    let pairs = all_pairs(&target);
    let made_up = pairs
        .iter()
        .filter(|(k, _)| k.starts_with(b"zz-test/"))
        .count();
    assert_eq!(made_up, n, "every pair of the file");
    assert!(
        !pairs
            .iter()
            .any(|(k, _)| k.windows(8).any(|w| w == b"progress")),
        "the import's record is gone"
    );
}
