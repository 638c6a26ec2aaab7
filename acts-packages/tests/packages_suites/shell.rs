//! `acts.app.shell` through the engine: off by default, outputs as text and
//! JSON, a scrubbed environment, a script that sleeps forever killed at its
//! timeout with nothing of it left running, an output flood cut at the cap,
//! a non-zero exit failing the act, the allow/deny policy, a running
//! script that holds no worker, and a running script killed with what it
//! started when its act or its process is aborted.

use crate::support;
use support::*;

use std::path::Path;
use std::time::Duration;

use acts::{TaskState, Vars};
use acts_packages::{PackagesConfig, ShellConfig};
use serde_json::json;

fn enabled(shell: ShellConfig) -> PackagesConfig {
    PackagesConfig {
        shell: ShellConfig {
            enabled: true,
            ..shell
        },
        ..Default::default()
    }
}

/// A one-act model running `script` (a YAML block scalar) in `shell`.
fn script_model(id: &str, shell: &str, content_type: &str, script: &str) -> String {
    let body: String = script.lines().map(|l| format!("        {l}\n")).collect();
    format!(
        "id: {id}\nver: '1'\nsteps:\n  - id: s\n    uses: acts.app.shell\n    params:\n      shell: {shell}\n      content-type: {content_type}\n      script: |\n{body}"
    )
}

/// Whether process `pid` still runs (a zombie waiting for its reaper does
/// not).
fn running(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .next();
            !matches!(state, Some("Z" | "X"))
        }
        Err(_) => false,
    }
}

/// Waits (a hang guard, not a timing claim) until process `pid` no longer
/// runs: a killed process is gone once the kernel delivered the signal.
async fn gone(pid: &str) {
    let waited = tokio::time::timeout(HANG, async {
        while running(pid) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "process {pid} is still running");
}

fn read_pid(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .trim()
        .to_owned()
}

#[tokio::test]
async fn the_shell_is_off_unless_the_operator_enables_it() {
    let engine = engine(&PackagesConfig::default(), None).await;
    let p = run(
        &engine,
        &script_model("off", "sh", "text", "echo hi"),
        Vars::new(),
    )
    .await;
    let (ecode, message) = failure(&p);
    assert_eq!(ecode, "shell.disabled");
    assert!(message.contains("enabled: true"), "{message}");
    engine.close().await;
}

#[tokio::test]
async fn stdout_is_the_data_as_text_or_json_in_a_scrubbed_environment() {
    let config = enabled(ShellConfig {
        env: vec!["GREETING=hello".into()],
        ..Default::default()
    });
    let engine = engine(&config, None).await;
    let p = run(
        &engine,
        &script_model(
            "json",
            "sh",
            "json",
            r#"printf '{"n": %d, "who": "%s"}' 42 "$GREETING""#,
        ),
        Vars::new(),
    )
    .await;
    assert_eq!(p.state, TaskState::Completed, "{p:?}");
    assert_eq!(p.outputs["data"], json!({"n": 42, "who": "hello"}));
    // the server's own environment (cargo sets CARGO_PKG_NAME for tests)
    // does not reach a script; HOME is its scratch folder
    let p = run(
        &engine,
        &script_model(
            "env",
            "bash",
            "text",
            "echo \"[${CARGO_PKG_NAME:-unset}] $PWD\"\ntouch left-behind",
        ),
        Vars::new(),
    )
    .await;
    let out = p.outputs["data"].as_str().expect("text").trim().to_owned();
    assert!(out.starts_with("[unset] /"), "{out}");
    assert!(out.ends_with("/work"), "{out}");
    let scratch = Path::new(out.trim_start_matches("[unset] "));
    assert!(
        !scratch.exists(),
        "the scratch folder {scratch:?} was removed"
    );
    engine.close().await;
}

#[tokio::test]
async fn act_env_values_stay_values_and_reserved_names_are_refused() {
    let engine = engine(&enabled(ShellConfig::default()), None).await;
    let model = "id: envs\nver: '1'\nsteps:\n  - id: s\n    uses: acts.app.shell\n    params:\n      env: { WHO: '${{ who }}', N: 3 }\n      script: printf '%s|%s' \"$WHO\" \"$N\"\n";
    let hostile = "x\"; echo injected; \"";
    let start = json!({"who": hostile})
        .as_object()
        .cloned()
        .unwrap_or_default();
    let p = run(&engine, model, start).await;
    assert_eq!(p.state, TaskState::Completed, "{p:?}");
    assert_eq!(p.outputs["data"], json!(format!("{hostile}|3")));
    for name in ["PATH", "LD_PRELOAD", "ACTS_PID", "1X"] {
        let m = format!(
            "id: bad\nver: '1'\nsteps:\n  - id: s\n    uses: acts.app.shell\n    params:\n      env: {{ '{name}': v }}\n      script: 'true'\n"
        );
        let p = run(&engine, &m, Vars::new()).await;
        assert_eq!(failure(&p).0, "shell.params", "{name}");
    }
    engine.close().await;
}

#[tokio::test]
async fn a_script_that_sleeps_forever_is_killed_at_its_timeout_with_nothing_left_running() {
    let pids = tempfile::tempdir().expect("tempdir");
    let config = enabled(ShellConfig {
        timeout_ms: 300,
        env: vec![format!("PIDS={}", pids.path().display())],
        ..Default::default()
    });
    let engine = engine(&config, None).await;
    let script = "echo $$ > \"$PIDS/shell\"\nsleep 1000 &\necho $! > \"$PIDS/bg\"\necho waiting >&2\nsleep 1000";
    let p = run(
        &engine,
        &script_model("sleepy", "sh", "text", script),
        Vars::new(),
    )
    .await;
    let (ecode, message) = failure(&p);
    assert_eq!(ecode, "shell.timeout", "{message}");
    assert!(
        message.contains("waiting"),
        "the stderr tail is quoted: {message}"
    );
    for name in ["shell", "bg"] {
        gone(&read_pid(pids.path(), name)).await;
    }
    engine.close().await;
}

/// Waits (a hang guard) until the script of process `pid` wrote the ids
/// of its shell and of its background job into `dir`; both ids.
async fn started(dir: &Path, pid: &str) -> [String; 2] {
    let bg = dir.join(format!("{pid}.bg"));
    let waited = tokio::time::timeout(HANG, async {
        while !std::fs::read_to_string(&bg).is_ok_and(|t| t.ends_with('\n')) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "the script of {pid} never started");
    [
        read_pid(dir, &format!("{pid}.shell")),
        read_pid(dir, &format!("{pid}.bg")),
    ]
}

#[tokio::test]
async fn a_running_script_is_killed_when_its_act_or_its_process_is_aborted() {
    let pids = tempfile::tempdir().expect("tempdir");
    let config = enabled(ShellConfig {
        env: vec![format!("PIDS={}", pids.path().display())],
        ..Default::default()
    });
    let engine = engine(&config, None).await;
    let exec = engine.executor();
    let script =
        "echo $$ > \"$PIDS/$ACTS_PID.shell\"\nsleep 1000 &\necho $! > \"$PIDS/$ACTS_PID.bg\"\nwait";
    let info = exec
        .model()
        .deploy_yaml(&script_model("held", "sh", "text", script))
        .await
        .expect("deploy");
    let mut rx = engine.channel(acts::ChannelOptions::default()).subscribe();

    // the process aborted: its script and what it started are killed
    let p = exec
        .proc()
        .start(&info.id, Vars::new())
        .await
        .expect("start");
    let ids = started(pids.path(), &p.pid).await;
    exec.proc().abort(&p.pid).await.expect("aborted");
    for id in &ids {
        gone(id).await;
    }
    let ended = wait_end(&engine, &mut rx, &p.pid).await;
    assert_eq!(ended.state, TaskState::Aborted, "{ended:?}");

    // the act aborted: the same
    let p = exec
        .proc()
        .start(&info.id, Vars::new())
        .await
        .expect("start");
    let ids = started(pids.path(), &p.pid).await;
    let act = exec
        .task()
        .list(&p.pid)
        .await
        .expect("tasks")
        .into_iter()
        .find(|t| t.kind == acts::MessageType::Act && t.uses.as_deref() == Some("acts.app.shell"))
        .expect("the shell act");
    assert_eq!(act.state, TaskState::Running, "{act:?}");
    exec.act()
        .abort(&p.pid, &act.tid, Vars::new())
        .await
        .expect("the act aborted");
    for id in &ids {
        gone(id).await;
    }
    wait_end(&engine, &mut rx, &p.pid).await;
    engine.close().await;
}

#[tokio::test]
async fn what_a_script_leaves_in_the_background_is_killed_when_it_exits() {
    let pids = tempfile::tempdir().expect("tempdir");
    let config = enabled(ShellConfig {
        env: vec![format!("PIDS={}", pids.path().display())],
        ..Default::default()
    });
    let engine = engine(&config, None).await;
    let script = "sleep 1000 > /dev/null 2>&1 &\necho $! > \"$PIDS/bg\"\necho done";
    let p = run(
        &engine,
        &script_model("bg", "sh", "text", script),
        Vars::new(),
    )
    .await;
    assert_eq!(p.state, TaskState::Completed, "{p:?}");
    assert_eq!(p.outputs["data"], json!("done\n"));
    gone(&read_pid(pids.path(), "bg")).await;
    engine.close().await;
}

#[tokio::test]
async fn an_output_flood_is_cut_at_the_cap() {
    let config = enabled(ShellConfig {
        max_output_bytes: 4096,
        ..Default::default()
    });
    let engine = engine(&config, None).await;
    for (script, stream) in [("yes", "stdout"), ("yes >&2", "stderr")] {
        let p = run(
            &engine,
            &script_model("flood", "sh", "text", script),
            Vars::new(),
        )
        .await;
        let (ecode, message) = failure(&p);
        assert_eq!(ecode, "shell.output_limit", "{message}");
        assert!(
            message.contains(stream) && message.contains("4096"),
            "{message}"
        );
    }
    engine.close().await;
}

#[tokio::test]
async fn a_non_zero_exit_fails_the_act_with_its_stderr_and_a_catch_can_handle_it() {
    let engine = engine(&enabled(ShellConfig::default()), None).await;
    let p = run(
        &engine,
        &script_model(
            "exit",
            "sh",
            "text",
            "echo partial\necho 'it broke' >&2\nexit 3",
        ),
        Vars::new(),
    )
    .await;
    let (ecode, message) = failure(&p);
    assert_eq!(ecode, "shell.exit");
    assert!(
        message.contains("exit status 3") && message.contains("it broke"),
        "{message}"
    );
    let caught = "id: caught\nver: '1'\nsteps:\n  - id: s\n    uses: acts.app.shell\n    params: { script: 'exit 1' }\n    catches:\n      - id: c\n        on: shell.exit\n        uses: acts.transform.set\n        params: { recovered: true }\n";
    let p = run(&engine, caught, Vars::new()).await;
    assert_eq!(p.state, TaskState::Completed, "{p:?}");
    assert_eq!(p.outputs.get("recovered"), Some(&json!(true)));
    let p = run(
        &engine,
        &script_model("notjson", "sh", "json", "echo nope"),
        Vars::new(),
    )
    .await;
    assert_eq!(failure(&p).0, "shell.json");
    engine.close().await;
}

#[tokio::test]
async fn the_policy_refuses_before_anything_runs() {
    let marks = tempfile::tempdir().expect("tempdir");
    let config = enabled(ShellConfig {
        allow: vec!["touch *".into()],
        deny: vec!["*forbidden*".into()],
        env: vec![format!("MARKS={}", marks.path().display())],
        ..Default::default()
    });
    let engine = engine(&config, None).await;
    for script in ["touch \"$MARKS/forbidden\"", "echo \"$MARKS/other\""] {
        let p = run(
            &engine,
            &script_model("policy", "sh", "text", script),
            Vars::new(),
        )
        .await;
        assert_eq!(failure(&p).0, "shell.refused", "{script}");
    }
    let p = run(
        &engine,
        &script_model("ok", "sh", "text", "touch \"$MARKS/fine\""),
        Vars::new(),
    )
    .await;
    assert_eq!(p.state, TaskState::Completed, "{p:?}");
    assert!(marks.path().join("fine").exists());
    assert!(!marks.path().join("forbidden").exists());
    engine.close().await;
}

#[tokio::test]
async fn a_shell_that_is_not_installed_is_named() {
    let engine = engine(&enabled(ShellConfig::default()), None).await;
    let installed = std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .any(|d| Path::new(d).join("pwsh").exists());
    if !installed {
        let p = run(
            &engine,
            &script_model("pwsh", "powershell", "text", "Write-Output hi"),
            Vars::new(),
        )
        .await;
        let (ecode, message) = failure(&p);
        assert_eq!(ecode, "shell.spawn");
        assert!(message.contains("'pwsh' is not installed"), "{message}");
    }
    engine.close().await;
}

/// On a one-thread runtime, a script that runs for as long as the test
/// does leaves the engine free: another process runs to its end meanwhile.
#[tokio::test(flavor = "current_thread")]
async fn a_running_script_holds_no_worker() {
    let marks = tempfile::tempdir().expect("tempdir");
    let config = enabled(ShellConfig {
        env: vec![format!("MARKS={}", marks.path().display())],
        ..Default::default()
    });
    let engine = engine(&config, None).await;
    let exec = engine.executor();
    let info = exec
        .model()
        .deploy_yaml(&script_model(
            "long",
            "sh",
            "text",
            "touch \"$MARKS/started\"\nsleep 1000",
        ))
        .await
        .expect("deploy");
    let long = exec
        .proc()
        .start(&info.id, Vars::new())
        .await
        .expect("start");
    // the script runs (a hang guard on its mark, not a timing claim)
    let started = marks.path().join("started");
    tokio::time::timeout(HANG, async {
        while !started.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the script starts");
    let other = run(
        &engine,
        "id: quick\nver: '1'\nsteps:\n  - id: s\n    uses: acts.transform.set\n    params: { done: true }\n",
        Vars::new(),
    )
    .await;
    assert_eq!(other.state, TaskState::Completed);
    let still = exec.proc().get(&long.pid).await.expect("process");
    assert_eq!(still.state, TaskState::Running, "{still:?}");
    exec.proc().abort(&long.pid).await.expect("abort");
    engine.close().await;
}
