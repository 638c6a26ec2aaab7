//! The `acts` binary end to end: every example with `--auto --json`,
//! answers files, bad input, and a run killed mid-way finished by
//! `acts resume` on the same redb file.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

fn acts(store: &str) -> Command {
    let mut c = Command::cargo_bin("acts").expect("the acts binary is built");
    c.arg("--store").arg(store).timeout(Duration::from_secs(60));
    c
}

/// Writes a model file into `dir`.
fn model_file(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("the temp dir is writable");
    path
}

fn report(out: &[u8]) -> Value {
    let text = String::from_utf8_lossy(out);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON report ({e}): {text}"))
}

fn run_example(name: &str, extra: &[&str]) -> (i32, Value) {
    let out = acts("memory:")
        .arg("run")
        .arg(examples().join(name))
        .args(extra)
        .arg("--json")
        .output()
        .expect("acts runs");
    let code = out.status.code().unwrap_or(-1);
    assert!(
        !out.stdout.is_empty(),
        "{name}: no report; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (code, report(&out.stdout))
}

#[test]
fn every_example_completes_with_auto() {
    let mut count = 0;
    for entry in std::fs::read_dir(examples()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".yml") || name.ends_with(".test.yml") || name == "subflow-child.yml" {
            continue;
        }
        let child = examples().join("subflow-child.yml");
        let extra: Vec<&str> = if name == "subflow.yml" {
            vec!["--deploy", child.to_str().unwrap(), "--auto"]
        } else {
            vec!["--auto"]
        };
        let (code, r) = run_example(&name, &extra);
        assert_eq!(code, 0, "{name}: {r}");
        assert_eq!(r["state"], "completed", "{name}: {r}");
        let msgs = r["messages"].as_array().unwrap();
        assert_eq!(msgs.first().unwrap()["type"], "workflow", "{name}");
        assert_eq!(msgs.last().unwrap()["state"], "completed", "{name}");
        count += 1;
    }
    assert!(count >= 8, "at least eight examples, found {count}");
}

#[test]
fn the_json_report_has_outputs_and_the_messages_in_order() {
    let (code, r) = run_example("approval.yml", &["--auto"]);
    assert_eq!(code, 0);
    assert_eq!(r["model"], "approval");
    assert_eq!(r["outputs"]["level"], "manager");
    assert_eq!(r["error"], Value::Null);
    let shorts: Vec<String> = r["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}/{}",
                m["type"].as_str().unwrap(),
                m["state"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        shorts,
        [
            "workflow/created",
            "step/created",
            "act/created",
            "act/completed",
            "step/completed",
            "step/created",
            "act/completed",
            "step/completed",
            "workflow/completed"
        ]
    );
    let subflow = run_example(
        "subflow.yml",
        &[
            "--deploy",
            examples().join("subflow-child.yml").to_str().unwrap(),
            "--auto",
        ],
    );
    assert_eq!(subflow.1["outputs"]["answer"], 42);
    let models: Vec<&str> = subflow.1["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["type"] == "workflow")
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(
        models.contains(&"Doubler"),
        "child messages are included: {models:?}"
    );
}

#[test]
fn answers_files_drive_actions_and_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let reject = dir.path().join("reject.json");
    std::fs::write(
        &reject,
        r#"{"approve": {"action": "error", "vars": {"ecode": "E_NO", "message": "too much"}}}"#,
    )
    .unwrap();
    let (code, r) = run_example("approval.yml", &["--answers", reject.to_str().unwrap()]);
    assert_eq!(code, 1, "{r}");
    assert_eq!(r["state"], "error");
    assert_eq!(r["error"]["ecode"], "E_NO", "{r}");

    let abort = dir.path().join("abort.json");
    std::fs::write(&abort, r#"{"approve": {"action": "abort"}}"#).unwrap();
    let (code, r) = run_example("approval.yml", &["--answers", abort.to_str().unwrap()]);
    assert_eq!((code, r["state"].as_str()), (1, Some("aborted")));

    // Answered per element: the sequence's acts share a key, the list is
    // used in turn.
    let vars = dir.path().join("vars.json");
    std::fs::write(
        &vars,
        r#"{"approve": {"action": "submit", "vars": {"note": "fine"}}}"#,
    )
    .unwrap();
    let (code, r) = run_example("approval.yml", &["--answers", vars.to_str().unwrap()]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["messages"][3]["state"], "submitted");
}

/// An answer the engine refuses does not end the run: it is reported (on
/// stderr, and in the `--json` report's `refused`) and the next answer
/// follows, as a client of acts 0.25 goes on with its next call.
#[test]
fn a_refused_answer_is_reported_and_the_next_one_follows() {
    let dir = tempfile::tempdir().unwrap();
    let answers = dir.path().join("answers.json");
    // `cancel` of an act whose step has not completed, `error` without an
    // ecode, `back` to a step that does not exist: each refused; then the
    // approval.
    std::fs::write(
        &answers,
        r#"{"approve": [{"action": "cancel"}, {"action": "error"}, {"action": "back", "vars": {"to": "nowhere"}}, {"action": "complete", "vars": {"approved": true}}]}"#,
    )
    .unwrap();
    let (code, r) = run_example("approval.yml", &["--answers", answers.to_str().unwrap()]);
    assert_eq!((code, r["state"].as_str()), (0, Some("completed")), "{r}");
    assert_eq!(r["outputs"]["decided"], true, "{r}");
    let refused = r["refused"].as_array().expect("a list of refused answers");
    let actions: Vec<&str> = refused
        .iter()
        .filter_map(|x| x["action"].as_str())
        .collect();
    assert_eq!(actions, ["cancel", "error", "back"], "{r}");
    assert!(
        refused
            .iter()
            .all(|x| x["act"] == "approve" && x["message"].as_str().is_some_and(|m| !m.is_empty())),
        "{r}"
    );
    // Without --json: said on stderr, and the run still completes.
    let out = acts("memory:")
        .arg("run")
        .arg(examples().join("approval.yml"))
        .args(["--answers", answers.to_str().unwrap()])
        .output()
        .expect("acts runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(err.matches("was refused").count(), 3, "{err}");
    assert!(err.contains("the next answer follows"), "{err}");
}

/// `acts test` checks refusals: an answer marked `refused: true` must be
/// refused, and one refused without the mark fails the test.
#[test]
fn acts_test_expects_the_refusals_it_is_told_of() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        examples().join("approval.yml"),
        dir.path().join("approval.yml"),
    )
    .unwrap();
    let test = dir.path().join("approval.test.yml");
    let run_test = |answers: &str| {
        std::fs::write(
            &test,
            format!("answers:\n  approve: {answers}\nexpect:\n  state: completed\n"),
        )
        .unwrap();
        let out = acts("memory:")
            .arg("test")
            .arg(dir.path())
            .output()
            .expect("acts test runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, out) = run_test("[{ action: cancel, refused: true }, { action: complete }]");
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = run_test("[{ action: cancel }, { action: complete }]");
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("'cancel' to act 'approve' was refused"),
        "{out}"
    );
    let (code, out) = run_test("[{ action: complete, refused: true }]");
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("expected to be refused, but was taken"),
        "{out}"
    );
}

#[test]
fn bad_input_exits_2_and_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let missing = acts("memory:")
        .args(["run", "no-such-file.yml", "--auto"])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&missing.get_output().stderr).into_owned();
    assert!(err.contains("no-such-file.yml"), "{err}");
    // stdout says the model is invalid, and shows no outputs of a run
    // that never was
    let out = String::from_utf8_lossy(&missing.get_output().stdout).into_owned();
    assert_eq!(out.trim(), "model no-such-file.yml invalid", "{out}");

    let bad = dir.path().join("bad.yml");
    std::fs::write(
        &bad,
        "id: bad\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.core.irqq\n",
    )
    .unwrap();
    let out = acts("memory:")
        .arg("run")
        .arg(&bad)
        .arg("--auto")
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("bad.yml"), "{err}");
    assert!(
        err.contains("s1") && err.contains("acts.core.irqq"),
        "{err}"
    );
    assert!(err.contains("line 5"), "{err}");

    let out = acts("memory:")
        .arg("run")
        .arg(examples().join("approval.yml"))
        .args(["--auto", "--var", "amount=lots"])
        .assert()
        .code(2);
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("--var"));

    let out = acts("memory:")
        .arg("run")
        .arg(examples().join("approval.yml"))
        .args(["--auto", "--var", "amount=\"lots\""])
        .assert()
        .code(2);
    assert!(
        String::from_utf8_lossy(&out.get_output().stderr).contains("inputs"),
        "a start refused by the inputs schema"
    );
    acts("memory:").args(["run"]).assert().code(2);
    acts("mysql://nowhere").args(["models"]).assert().code(2);
    // A store that cannot be reached now is a failure of the run (1),
    // saying so, not bad input.
    let out = acts("postgres://acts@127.0.0.1:1/acts")
        .args(["models"])
        .assert()
        .code(1);
    assert!(
        String::from_utf8_lossy(&out.get_output().stderr).contains("unreachable"),
        "{}",
        String::from_utf8_lossy(&out.get_output().stderr)
    );
}

#[test]
fn a_killed_run_is_finished_by_resume_on_the_same_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("acts.db");
    let store = format!("redb:{}", db.display());
    // Interactive run: it waits at the irq for a line on stdin that never
    // comes; then it is killed.
    let mut child = interactive_approval(&store);
    // Wait until the interrupt is asked for (the prompt on stderr).
    let mut stderr = child.stderr.take().unwrap();
    wait_for(&mut stderr, "interrupt:");
    child.kill().unwrap();
    child.wait().unwrap();

    let ps = acts(&store)
        .args(["ps", "--state", "running"])
        .assert()
        .success();
    let listing = String::from_utf8_lossy(&ps.get_output().stdout).into_owned();
    assert!(listing.contains("approval"), "{listing}");

    let out = acts(&store)
        .args(["resume", "--auto", "--json"])
        .assert()
        .success();
    let r = report(&out.get_output().stdout);
    assert_eq!(r["state"], "completed", "{r}");
    assert_eq!(r["outputs"]["decided"], true);
    let again = acts(&store).args(["resume", "--auto"]).assert().success();
    assert!(String::from_utf8_lossy(&again.get_output().stdout).contains("nothing to resume"));
}

#[test]
fn deploy_start_act_show_and_models_work_on_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("redb:{}", dir.path().join("s.db").display());
    acts(&store)
        .arg("deploy")
        .arg(examples().join("approval.yml"))
        .assert()
        .success();
    let models = acts(&store).arg("models").assert().success();
    assert!(String::from_utf8_lossy(&models.get_output().stdout).contains("approval"));
    let started = acts(&store)
        .args(["start", "approval", "--var", "pid=\"order7\""])
        .assert()
        .success();
    assert!(String::from_utf8_lossy(&started.get_output().stdout).starts_with("order7 running"));
    let show = acts(&store).args(["show", "order7"]).assert().success();
    let tree = String::from_utf8_lossy(&show.get_output().stdout).into_owned();
    assert!(tree.contains("[approve] interrupted"), "{tree}");
    let tid = tree
        .lines()
        .find(|l| l.contains("[approve]"))
        .and_then(|l| l.split('(').nth(1))
        .and_then(|s| s.split(')').next())
        .unwrap()
        .to_owned();
    // The node id the interrupt prompt shows first names the waiting task
    // as well as its task id does.
    let nid = tree
        .lines()
        .find(|l| l.contains("[approve]"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .to_owned();
    assert_ne!(nid, tid);
    acts(&store)
        .args(["act", "complete", "order7", &nid])
        .assert()
        .success();
    let show = acts(&store).args(["show", "order7"]).assert().success();
    assert!(String::from_utf8_lossy(&show.get_output().stdout).contains("completed"));
    // The act is done: a second answer is refused (bad input).
    acts(&store)
        .args(["act", "complete", "order7", &tid])
        .assert()
        .code(2);
    acts(&store)
        .args(["act", "fly", "order7", &tid])
        .assert()
        .code(2);
}

#[test]
fn a_misspelled_key_is_a_warning_with_its_place_and_an_error_with_strict() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("redb:{}", dir.path().join("s.db").display());
    let model = model_file(
        &dir,
        "typo.yml",
        "id: typo\nver: '1'\nsteps:\n  - id: s1\n    iff: 'false'\n    uses: acts.transform.set\n    params: { a: 1 }\n",
    );
    let out = acts(&store).arg("deploy").arg(&model).assert().success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        err.contains("line 5, column 5: unknown key 'iff' in a step (did you mean 'if'?)"),
        "{err}"
    );
    // With --strict the model is refused and not deployed.
    let strict_store = format!("redb:{}", dir.path().join("strict.db").display());
    let out = acts(&strict_store)
        .arg("--strict")
        .arg("deploy")
        .arg(&model)
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("not deployed (--strict)"), "{err}");
    let models = acts(&strict_store).arg("models").assert().success();
    assert!(!String::from_utf8_lossy(&models.get_output().stdout).contains("typo"));
}

#[test]
fn console_output_of_scripts_reaches_stderr_and_verbose_says_more() {
    let dir = tempfile::tempdir().unwrap();
    let model = model_file(
        &dir,
        "talk.yml",
        "id: talk\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.transform.code\n    params: 'console.log(\"hello from the script\"); return { a: 1 }'\n",
    );
    let out = acts("memory:")
        .env_remove("RUST_LOG")
        .arg("run")
        .arg(&model)
        .arg("--auto")
        .assert()
        .success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("hello from the script"), "{err}");
    // RUST_LOG takes precedence: off silences it.
    let out = acts("memory:")
        .env("RUST_LOG", "off")
        .arg("run")
        .arg(&model)
        .arg("--auto")
        .assert()
        .success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(!err.contains("hello from the script"), "{err}");
    acts("memory:").arg("-vv").arg("models").assert().success();
}

#[test]
fn a_damaged_or_empty_store_file_is_a_clear_error_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("acts.db");
    let url = format!("redb:{}", db.display());
    acts(&url)
        .arg("run")
        .arg(examples().join("approval.yml"))
        .arg("--auto")
        .assert()
        .code(0);
    let mut bytes = std::fs::read(&db).unwrap();
    for b in bytes.iter_mut().skip(4096) {
        *b = 0xDE;
    }
    std::fs::write(&db, &bytes).unwrap();
    for cmd in [&["ps"][..], &["models"][..], &["show", "nope"][..]] {
        let out = acts(&url).args(cmd).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd:?}: {err}");
        assert!(
            err.contains("acts.db") && err.contains("damaged"),
            "{cmd:?}: {err}"
        );
        assert!(err.contains("backup"), "says what to do: {err}");
        assert!(!err.contains("panicked"), "{cmd:?}: {err}");
    }
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let out = acts(&format!("redb:{}", empty.display()))
        .arg("ps")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("empty.db") && err.contains("empty file"),
        "{err}"
    );
    assert_eq!(
        std::fs::metadata(&empty).unwrap().len(),
        0,
        "never overwritten"
    );
}

/// An interactive `acts run` of the approval example on `store` (stdin
/// piped and kept open: its prompt waits for a line).
fn interactive_approval(store: &str) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("acts"))
        .args(["--store", store, "run"])
        .arg(examples().join("approval.yml"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("acts starts")
}

/// Sends SIGINT (what Ctrl-C sends) to `child` and waits for it (within a
/// hang guard), returning its exit code.
pub(crate) fn interrupt(child: &mut std::process::Child) -> Option<i32> {
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    for _ in 0..200 {
        if let Some(s) = child.try_wait().expect("the child can be waited for") {
            return s.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("the command did not stop after Ctrl-C (hang guard)");
}

/// Reads `stream` until `needle` shows (or the stream ends: a failure).
fn wait_for(stream: &mut impl std::io::Read, needle: &str) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        let n = stream.read(&mut buf).expect("the stream reads");
        assert!(
            n > 0,
            "ended before '{needle}': {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
        if String::from_utf8_lossy(&seen).contains(needle) {
            return;
        }
    }
}

#[test]
fn ctrl_c_at_the_prompt_exits_130_and_resume_continues() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("redb:{}", dir.path().join("acts.db").display());
    let mut child = interactive_approval(&store);
    let mut stderr = child.stderr.take().unwrap();
    wait_for(&mut stderr, "interrupt:");
    // stdin stays open: the prompt is still reading the terminal.
    assert_eq!(interrupt(&mut child), Some(130));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(rest.contains("acts resume"), "{rest}");
    let out = acts(&store)
        .args(["resume", "--auto", "--json"])
        .assert()
        .success();
    assert_eq!(report(&out.get_output().stdout)["state"], "completed");
}

#[test]
fn ctrl_c_stops_an_auto_run_busy_in_a_script() {
    let dir = tempfile::tempdir().unwrap();
    let model = model_file(
        &dir,
        "spin.yml",
        "id: spin\nver: '1'\nsteps:\n  - id: s1\n    uses: acts.transform.code\n    params: 'console.log(\"spinning\"); while (true) {}'\n",
    );
    let store = format!("redb:{}", dir.path().join("acts.db").display());
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("acts"))
        .args(["--store", &store, "run"])
        .arg(&model)
        .arg("--auto")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The db file exists once the store is open; the script may or may not
    // have started: Ctrl-C must stop the run at any point.
    for _ in 0..200 {
        if dir.path().join("acts.db").exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(interrupt(&mut child), Some(130));
    // The store is consistent: it opens, and every command works on it.
    acts(&store).arg("ps").assert().success();
}

#[test]
fn a_store_held_by_another_run_names_the_holder_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("acts.db");
    let store = format!("redb:{}", db.display());
    let mut child = interactive_approval(&store);
    let mut stderr = child.stderr.take().unwrap();
    wait_for(&mut stderr, "interrupt:");
    for cmd in [&["ps"][..], &["models"][..], &["show", "x"][..]] {
        let out = acts(&store).args(cmd).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cmd:?}: {err}");
        assert!(err.contains("in use"), "{err}");
        assert!(
            err.contains(&format!("process {}", child.id())) && err.contains("approval.yml"),
            "names the holder: {err}"
        );
        assert!(
            err.contains(&format!("kill -INT {}", child.id())),
            "says what to do: {err}"
        );
    }
    assert_eq!(interrupt(&mut child), Some(130));
    assert!(
        !dir.path().join("acts.db.owner").exists(),
        "the holder's record is gone with it"
    );
    acts(&store).arg("ps").assert().success();
}

#[test]
fn start_quiet_prints_the_pid_and_ps_show_models_print_json() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = format!("redb:{}", dir.path().join("j.db").display());
    acts(&store)
        .arg("deploy")
        .arg(examples().join("approval.yml"))
        .assert()
        .success();
    let out = acts(&store)
        .args(["start", "approval", "--quiet", "--var", "amount=50"])
        .output()
        .expect("acts start runs");
    assert!(out.status.success());
    let pid = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        !pid.is_empty() && !pid.contains(' '),
        "just the pid: {pid:?}"
    );
    let json_of = |args: &[&str]| -> Value {
        let out = acts(&store).args(args).output().expect("acts runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("one JSON document")
    };
    let ps = json_of(&["ps", "--json"]);
    assert_eq!(ps[0]["pid"], pid.as_str());
    assert_eq!(ps[0]["state"], "running");
    let show = json_of(&["show", &pid, "--json"]);
    assert_eq!(show["process"]["pid"], pid.as_str());
    assert!(
        show["tasks"]
            .as_array()
            .is_some_and(|ts| ts.iter().any(|t| t["state"] == "interrupted")),
        "{show}"
    );
    let models = json_of(&["models", "--json"]);
    assert_eq!(models[0]["id"], "approval");
}

#[test]
fn completions_are_printed_for_known_shells_only() {
    let out = acts("memory:")
        .args(["completions", "bash"])
        .output()
        .expect("acts runs");
    assert!(out.status.success());
    let script = String::from_utf8_lossy(&out.stdout);
    assert!(
        script.contains("_acts()") && script.contains("serve"),
        "{script}"
    );
    let out = acts("memory:")
        .args(["completions", "tcsh"])
        .output()
        .expect("acts runs");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn versions_are_listed_started_by_revision_and_guarded_on_removal() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("redb:{}", dir.path().join("s.db").display());
    let v1 = "id: m\nver: '1.0'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: ask }\n";
    let file = model_file(&dir, "m.yml", v1);
    let deploy = |expect: &str| {
        let out = acts(&store).arg("deploy").arg(&file).assert().success();
        let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        assert!(text.starts_with(expect), "{text}");
    };
    deploy("deployed m (revision 1)");
    deploy("unchanged: m (revision 1");
    acts(&store)
        .args(["start", "m", "--var", "pid=\"p1\""])
        .assert()
        .success();
    model_file(&dir, "m.yml", &v1.replace("1.0", "2.0"));
    deploy("deployed m (revision 2)");
    let out = acts(&store)
        .args(["start", "m", "--rev", "1", "-q"])
        .assert()
        .success();
    assert!(!out.get_output().stdout.is_empty());
    let listed = acts(&store)
        .args(["versions", "m", "--json"])
        .assert()
        .success();
    let versions: Value = serde_json::from_slice(&listed.get_output().stdout).unwrap();
    let rows: Vec<(u64, &str, u64, bool)> = versions
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["revision"].as_u64().unwrap(),
                v["ver"].as_str().unwrap(),
                v["unfinished"].as_u64().unwrap(),
                v["latest"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows, [(1, "1.0", 2, false), (2, "2.0", 0, true)]);
    let refused = acts(&store)
        .args(["versions", "m", "--remove", "1"])
        .assert()
        .code(2);
    let why = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
    assert!(why.contains("'p1'") || why.contains("unfinished"), "{why}");
    acts(&store)
        .args(["versions", "m", "--remove", "7"])
        .assert()
        .code(2);
    acts(&store)
        .args(["start", "m", "--rev", "7"])
        .assert()
        .code(2);
}

#[test]
fn ps_finds_processes_by_an_indexed_variable() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("redb:{}", dir.path().join("s.db").display());
    let file = model_file(
        &dir,
        "orders.yml",
        "id: orders\nver: '1'\nindex: [customer, amount]\nsteps:\n  - id: review\n    uses: acts.core.irq\n    params: { key: review }\n",
    );
    acts(&store).arg("deploy").arg(&file).assert().success();
    for (pid, customer, amount) in [
        ("a1", "acme", 100),
        ("a2", "acme", 300),
        ("g1", "globex", 200),
    ] {
        acts(&store)
            .args(["start", "orders", "--var"])
            .arg(format!("pid=\"{pid}\""))
            .arg("--var")
            .arg(format!("customer=\"{customer}\""))
            .arg("--var")
            .arg(format!("amount={amount}"))
            .assert()
            .success();
    }
    let out = acts(&store)
        .args([
            "ps",
            "--model",
            "orders",
            "--where",
            "customer=acme",
            "--json",
        ])
        .assert()
        .success();
    let list: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let pids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_str().unwrap())
        .collect();
    assert_eq!(pids, ["a1", "a2"]);
    let out = acts(&store)
        .args([
            "ps",
            "--model",
            "orders",
            "--where",
            "amount>=150",
            "--where",
            "amount<=250",
            "--count",
        ])
        .assert()
        .success();
    assert_eq!(
        String::from_utf8_lossy(&out.get_output().stdout).trim(),
        "1"
    );
    let out = acts(&store)
        .args(["ps", "--model", "orders", "--where", "region=eu"])
        .assert()
        .code(2);
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("does not index 'region'"));
    acts(&store)
        .args(["ps", "--where", "customer=acme"])
        .assert()
        .code(2);
}

#[test]
fn migrate_reports_a_dry_run_and_moves_running_processes() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("redb:{}", dir.path().join("s.db").display());
    let v1 =
        "id: r\nver: '1'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: ask }\n";
    let file = model_file(&dir, "r.yml", v1);
    acts(&store).arg("deploy").arg(&file).assert().success();
    acts(&store)
        .args(["start", "r", "--var", "pid=\"r1\""])
        .assert()
        .success();
    model_file(
        &dir,
        "r.yml",
        &v1.replace("id: ask", "id: approve").replace("'1'", "'2'"),
    );
    acts(&store).arg("deploy").arg(&file).assert().success();
    let dry = acts(&store)
        .args(["migrate", "r", "--from", "1", "--to", "2", "--dry-run"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&dry.get_output().stdout).into_owned();
    assert!(
        text.contains("r1 unmigratable") && text.contains("map it"),
        "{text}"
    );
    let map = model_file(&dir, "map.yml", "ask: approve\n");
    let done = acts(&store)
        .args([
            "migrate", "r", "--from", "1", "--to", "2", "--json", "--map",
        ])
        .arg(&map)
        .assert()
        .success();
    let report: Value = serde_json::from_slice(&done.get_output().stdout).unwrap();
    assert_eq!(report["processes"][0]["outcome"], "migrated", "{report}");
    let show = acts(&store).args(["show", "r1"]).assert().success();
    let text = String::from_utf8_lossy(&show.get_output().stdout).into_owned();
    assert!(
        text.contains("(version 2)") && text.contains("migrate by"),
        "{text}"
    );
    acts(&store)
        .args(["migrate", "r", "--from", "1", "--to", "7"])
        .assert()
        .code(2);
}
