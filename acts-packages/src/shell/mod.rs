//! `acts.app.shell`: a script per act, off unless the operator enables it.
//!
//! - `config.rs`: [`ShellConfig`], the `shell:` section, and the allow/deny
//!   policy.
//! - `run.rs`: one run to a bounded end (process group, pipes, deadline,
//!   cap, scratch folder).
//! - here: the package — params, the policy check, outputs and ecodes.
//!
//! The allow/deny globs are a policy over the script's text, not a
//! sandbox: a script can do whatever the server's account may. Treat a
//! hostile model as needing an OS boundary (a container, a user of its
//! own) around the server — or keep the package off.
//!
//! May use: `error` (`ConfigError`) and `text`, the crate's shared files; not
//! the http package (it is not its business).

mod config;
mod run;

pub use config::ShellConfig;

use std::time::Duration;

use acts::{ActPackage, PackageContext, PackageDefinition, PackageFailure, RunAs, Vars};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::ConfigError;
use config::ScriptPolicy;
use run::{Ended, Scratch, Spec};

/// The package id.
const ID: &str = "acts.app.shell";

/// How much of stderr a failure quotes.
const STDERR_TAIL: usize = 2048;

/// Most bytes of one script.
const MAX_SCRIPT_BYTES: usize = 256 * 1024;

/// The `acts.app.shell` package (see the module docs).
#[derive(Debug, Clone)]
pub struct ShellPackage {
    config: ShellConfig,
    policy: ScriptPolicy,
    /// The environment every script gets (resolved at start).
    env: Vec<(String, String)>,
}

impl ShellPackage {
    /// The package with `config`, whose bounds and patterns are checked
    /// here. A disabled package is still a package: its acts fail with
    /// ecode `shell.disabled`.
    pub fn new(config: &ShellConfig) -> Result<Self, ConfigError> {
        let policy = config.check()?;
        let mut env = vec![
            ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ];
        for e in &config.env {
            let (name, value) = match e.split_once('=') {
                Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
                None => (e.clone(), std::env::var(e).ok()),
            };
            env.retain(|(n, _)| *n != name);
            if let Some(v) = value {
                env.push((name, v));
            }
        }
        Ok(Self {
            config: config.clone(),
            policy,
            env,
        })
    }
}

/// The shells a script may name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Shell {
    #[default]
    Sh,
    Bash,
    Nu,
    Powershell,
}

impl Shell {
    /// The program and the script file's name.
    fn program(self) -> (&'static str, &'static str) {
        match self {
            Shell::Sh => ("sh", "script.sh"),
            Shell::Bash => ("bash", "script.sh"),
            Shell::Nu => ("nu", "script.nu"),
            Shell::Powershell => ("pwsh", "script.ps1"),
        }
    }
}

/// How stdout becomes `data`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Output {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShellParams {
    #[serde(default)]
    shell: Option<Shell>,
    script: String,
    #[serde(default, rename = "content-type")]
    content_type: Option<Output>,
    /// Values the script reads as environment variables (an acts
    /// extension): a value pasted into the script text with `${{ }}` can
    /// inject commands, one read as `"$NAME"` cannot.
    #[serde(default)]
    env: serde_json::Map<String, Value>,
}

/// Most bytes of an act's `env` values together.
const MAX_ENV_BYTES: usize = 64 * 1024;

/// Names an act's `env` may not set: the ones the package sets, and the
/// loader's.
fn reserved(name: &str) -> bool {
    matches!(
        name,
        "PATH" | "HOME" | "TMPDIR" | "PWD" | "LANG" | "IFS" | "ENV" | "BASH_ENV"
    ) || name.starts_with("LD_")
        || name.starts_with("ACTS_")
}

/// The act's `env` as pairs, checked.
fn act_env(env: &serde_json::Map<String, Value>) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut bytes = 0;
    for (k, v) in env {
        let ok = !k.is_empty()
            && !k.starts_with(|c: char| c.is_ascii_digit())
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            return Err(format!(
                "env name '{k}' must be letters, digits and _ (not first a digit)"
            ));
        }
        if reserved(k) {
            return Err(format!(
                "env name '{k}' is set by the package, not by a model"
            ));
        }
        let v = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if v.contains('\0') {
            return Err(format!("env '{k}' holds a NUL character"));
        }
        bytes += k.len() + v.len();
        out.push((k.clone(), v));
    }
    if bytes > MAX_ENV_BYTES {
        return Err(format!("env is {bytes} bytes, more than {MAX_ENV_BYTES}"));
    }
    Ok(out)
}

fn fail(ecode: &str, message: impl Into<String>) -> PackageFailure {
    PackageFailure::new(ecode, message)
}

#[async_trait]
impl ActPackage for ShellPackage {
    fn definition(&self) -> PackageDefinition {
        let schema = json!({
            "type": "object",
            "required": ["script"],
            "additionalProperties": false,
            "properties": {
                "shell": {"enum": ["sh", "bash", "nu", "powershell"]},
                "script": {"type": "string", "maxLength": MAX_SCRIPT_BYTES},
                "content-type": {"enum": ["text", "json", null]},
                "env": {"type": "object", "maxProperties": 100}
            }
        });
        let mut d = PackageDefinition::new(ID, RunAs::Func, schema);
        d.name = "Shell".into();
        d.desc = "runs a sh, bash or nu script (off unless the operator enables it); its stdout is the act's `data`".into();
        d
    }

    async fn run(&self, ctx: PackageContext) -> Result<Vars, PackageFailure> {
        if !self.config.enabled {
            return Err(fail(
                "shell.disabled",
                format!(
                    "{ID} is off on this server: it runs code on the host. The operator turns it \
                     on with `shell: {{enabled: true}}` in the config file (`--config FILE`; \
                     with allow/deny patterns, see docs/MODEL.md)"
                ),
            ));
        }
        let p: ShellParams = serde_json::from_value(ctx.params.clone())
            .map_err(|e| fail("shell.params", format!("{ID}: invalid params: {e}")))?;
        if p.script.len() > MAX_SCRIPT_BYTES {
            return Err(fail(
                "shell.params",
                format!(
                    "the script is {} bytes, more than {MAX_SCRIPT_BYTES}",
                    p.script.len()
                ),
            ));
        }
        if !self.policy.allows(&p.script) {
            return Err(fail(
                "shell.refused",
                "the script is refused by the shell: allow/deny patterns of this server",
            ));
        }
        let (program, file_name) = p.shell.unwrap_or_default().program();
        let mut env = self.env.clone();
        for (k, v) in act_env(&p.env).map_err(|e| fail("shell.params", e))? {
            env.retain(|(n, _)| *n != k);
            env.push((k, v));
        }
        env.push(("ACTS_PID".into(), ctx.pid.clone()));
        env.push(("ACTS_TID".into(), ctx.tid.clone()));
        let spec = Spec {
            program,
            file_name,
            script: &p.script,
            env: &env,
            timeout: Duration::from_millis(self.config.timeout_ms),
            cap: self.config.max_output_bytes,
        };
        let scratch = Scratch::new(self.config.scratch_root.clone())
            .await
            .map_err(|e| fail("shell.spawn", format!("cannot make a scratch folder: {e}")))?;
        let ended = run::run(&spec, &scratch).await;
        scratch.remove().await;
        let ended = ended.map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                fail(
                    "shell.spawn",
                    format!("the shell '{program}' is not installed on this server"),
                )
            } else {
                fail("shell.spawn", format!("cannot run '{program}': {e}"))
            }
        })?;
        let stdout = match ended {
            Ended::TimedOut { stderr } => {
                return Err(fail(
                    "shell.timeout",
                    format!(
                        "the script ran longer than shell.timeout-ms ({} ms) and was killed{}",
                        self.config.timeout_ms,
                        quoted(&stderr)
                    ),
                ));
            }
            Ended::Flooded { stream } => {
                return Err(fail(
                    "shell.output_limit",
                    format!(
                        "the script wrote more than shell.max-output-bytes ({} bytes) to {stream} and was killed",
                        self.config.max_output_bytes
                    ),
                ));
            }
            Ended::Exited {
                status,
                stdout,
                stderr,
            } => {
                if !status.success() {
                    let how = match status.code() {
                        Some(c) => format!("exit status {c}"),
                        None => "killed by a signal".to_owned(),
                    };
                    return Err(fail(
                        "shell.exit",
                        format!("the script failed ({how}){}", quoted(&stderr)),
                    ));
                }
                stdout
            }
        };
        let text = String::from_utf8_lossy(&stdout).into_owned();
        let data = match p.content_type.unwrap_or_default() {
            Output::Text => Value::String(text),
            Output::Json => serde_json::from_str(&text).map_err(|e| {
                fail(
                    "shell.json",
                    format!(
                        "the script's output is not JSON ({e}): {}",
                        crate::text::head(&text, 200)
                    ),
                )
            })?,
        };
        let mut out = Vars::new();
        out.insert("data".into(), data);
        Ok(out)
    }
}

/// `: <stderr tail>`, or nothing for an empty stderr.
fn quoted(stderr: &[u8]) -> String {
    let tail = crate::text::tail(stderr, STDERR_TAIL);
    if tail.is_empty() {
        String::new()
    } else {
        format!(": {tail}")
    }
}
