//! [`ShellConfig`]: the `shell:` section (acts-server 0.25's `[shell]` keys
//! and ours), and the compiled script policy.

use std::path::PathBuf;

use serde::Deserialize;
use wildmatch::WildMatch;

use crate::ConfigError;

/// Largest `timeout-ms`.
const MAX_TIMEOUT_MS: u64 = 60 * 60 * 1000;
/// Largest `max-output-bytes` (each stream's capture is held in memory and
/// becomes the act's outputs).
const MAX_OUTPUT_BYTES: usize = 64 * 1024 * 1024;

/// How `acts.app.shell` may run scripts. It runs code on the host, so it is
/// off unless `enabled` is true; its bounds are always in force.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct ShellConfig {
    /// Whether shell acts run at all (default false: each fails with ecode
    /// `shell.disabled`).
    pub enabled: bool,
    /// When not empty, only a script matching one of these globs runs
    /// (`*` matches any text, newlines and `/` included; `?` one
    /// character).
    pub allow: Vec<String>,
    /// A script matching one of these globs never runs (wins over
    /// `allow`).
    pub deny: Vec<String>,
    /// How long a script may run, ms (default 300,000; 1..=3,600,000); then
    /// its whole process group is killed and the act fails
    /// `shell.timeout`.
    pub timeout_ms: u64,
    /// Most bytes captured from each of stdout and stderr (default 1 MiB;
    /// 1..=64 MiB); past it the process group is killed and the act fails
    /// `shell.output_limit`.
    pub max_output_bytes: usize,
    /// The environment a script sees beyond `PATH=/usr/local/bin:/usr/bin:/bin`,
    /// `HOME`/`TMPDIR`/`PWD` (its scratch folder) and `LANG=C.UTF-8`:
    /// `NAME` passes the server's own `NAME` on (if set), `NAME=value`
    /// sets it. Nothing else of the server's environment (tokens, store
    /// URLs) reaches a script.
    pub env: Vec<String>,
    /// Where scratch folders are made (default: the system's temporary
    /// folder). Each script runs in a fresh one, removed after.
    pub scratch_root: Option<PathBuf>,
}

impl Default for ShellConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            allow: Vec::new(),
            deny: Vec::new(),
            timeout_ms: 300_000,
            max_output_bytes: 1024 * 1024,
            env: Vec::new(),
            scratch_root: None,
        }
    }
}

/// The allow and deny globs, compiled.
#[derive(Debug, Clone, Default)]
pub(crate) struct ScriptPolicy {
    allow: Vec<WildMatch>,
    deny: Vec<WildMatch>,
}

impl ScriptPolicy {
    /// Whether `script` may run: matched by no `deny`, and by an `allow`
    /// when there are any.
    pub(crate) fn allows(&self, script: &str) -> bool {
        if self.deny.iter().any(|g| g.matches(script)) {
            return false;
        }
        self.allow.is_empty() || self.allow.iter().any(|g| g.matches(script))
    }
}

impl ShellConfig {
    /// The bounds checked and the policy compiled.
    pub(crate) fn check(&self) -> Result<ScriptPolicy, ConfigError> {
        if !(1..=MAX_TIMEOUT_MS).contains(&self.timeout_ms) {
            return Err(ConfigError::new(
                "shell",
                "timeout-ms",
                format!(
                    "must be between 1 and {MAX_TIMEOUT_MS} (got {})",
                    self.timeout_ms
                ),
            ));
        }
        if !(1..=MAX_OUTPUT_BYTES).contains(&self.max_output_bytes) {
            return Err(ConfigError::new(
                "shell",
                "max-output-bytes",
                format!(
                    "must be between 1 and {MAX_OUTPUT_BYTES} (got {})",
                    self.max_output_bytes
                ),
            ));
        }
        for e in &self.env {
            let name = e.split_once('=').map_or(e.as_str(), |(n, _)| n);
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(ConfigError::new(
                    "shell",
                    "env",
                    format!("'{e}' is not NAME or NAME=value (letters, digits and _ in NAME)"),
                ));
            }
        }
        let compile =
            |key: &'static str, globs: &[String]| -> Result<Vec<WildMatch>, ConfigError> {
                globs
                    .iter()
                    .map(|g| {
                        if g.is_empty() {
                            Err(ConfigError::new(
                                "shell",
                                key,
                                "an empty pattern matches only an empty script; remove it",
                            ))
                        } else {
                            Ok(WildMatch::new(g))
                        }
                    })
                    .collect()
            };
        Ok(ScriptPolicy {
            allow: compile("allow", &self.allow)?,
            deny: compile("deny", &self.deny)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_wins_and_globs_span_lines() {
        let p = ShellConfig {
            allow: vec!["echo *".into(), "ls".into()],
            deny: vec!["*rm -rf*".into()],
            ..Default::default()
        }
        .check()
        .expect("policy");
        assert!(p.allows("ls"));
        assert!(p.allows("echo a/b\necho c"));
        assert!(!p.allows("ls -l"));
        assert!(!p.allows("echo x; rm -rf /"));
        let open = ShellConfig::default().check().expect("policy");
        assert!(open.allows("anything"));
    }

    #[test]
    fn bounds_and_env_names_are_checked() {
        for (key, c) in [
            (
                "timeout-ms",
                ShellConfig {
                    timeout_ms: 0,
                    ..Default::default()
                },
            ),
            (
                "max-output-bytes",
                ShellConfig {
                    max_output_bytes: 0,
                    ..Default::default()
                },
            ),
            (
                "env",
                ShellConfig {
                    env: vec!["A B".into()],
                    ..Default::default()
                },
            ),
            (
                "allow",
                ShellConfig {
                    allow: vec![String::new()],
                    ..Default::default()
                },
            ),
        ] {
            assert_eq!(c.check().expect_err(key).key, key);
        }
    }
}
