//! The config file (`--config FILE`, YAML): what `acts serve` listens on and
//! who may call it, and — for every command that opens a store — how the
//! packages that reach outside (`http:`, `shell:`) may do so.

use std::path::Path;

use acts_packages::{HttpConfig, PackagesConfig, ShellConfig};
use acts_server::{StreamLimits, TokenConfig};
use serde::Deserialize;

use crate::failure::Failure;

/// Largest config file read (a config is a few lines; this bounds a
/// wrong path to a huge file).
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// The keys a config may have (named in the error for a bad one).
const KEYS: &str = "listen, grpc, tokens: [{principal, roles, sha256}], streams: {queue_messages, \
                    queue_bytes, total_bytes, per_principal, max_streams, stall}, http: \
                    {allowed-hosts, allow-private-addresses, allowed-private-networks, \
                    max-response-bytes, connect-timeout-ms, timeout-ms, max-redirects, retries, \
                    retry-backoff-ms}, shell: {enabled, allow, deny, timeout-ms, max-output-bytes, \
                    env, scratch-root}";

/// The config file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfigFile {
    /// Where `acts serve` listens (`--listen` wins).
    pub(crate) listen: Option<String>,
    /// The access tokens.
    #[serde(default)]
    pub(crate) tokens: Vec<TokenConfig>,
    /// The bounds of live message streams.
    #[serde(default)]
    pub(crate) streams: StreamLimits,
    /// Where to serve the acts 0.25 gRPC protocol (`--grpc` wins; absent:
    /// not served).
    pub(crate) grpc: Option<String>,
    /// `acts.core.http` (acts-server 0.25's `[http]` keys).
    #[serde(default)]
    http: HttpConfig,
    /// `acts.app.shell` (acts-server 0.25's `[shell]` keys; off unless
    /// `enabled: true`).
    #[serde(default)]
    shell: ShellConfig,
}

impl ConfigFile {
    /// Reads `path` (none: every default).
    pub(crate) fn read(path: Option<&Path>) -> Result<Self, Failure> {
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let shown = path.display();
        let meta = std::fs::metadata(path)
            .map_err(|e| Failure::input(format!("cannot read the config '{shown}': {e}")))?;
        if meta.len() > MAX_CONFIG_BYTES {
            return Err(Failure::input(format!(
                "the config '{shown}' is {} bytes, more than the limit of {MAX_CONFIG_BYTES}",
                meta.len()
            )));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::input(format!("cannot read the config '{shown}': {e}")))?;
        let cfg: Self = serde_norway::from_str(&text).map_err(|e| {
            Failure::input(format!(
                "the config '{shown}' is not valid (keys: {KEYS}): {e}"
            ))
        })?;
        // the packages' bounds are checked now, not when an act first runs
        acts_packages::install(acts::Engine::builder(), &cfg.packages())
            .map_err(|e| Failure::input(format!("the config '{shown}': {e}")))?;
        Ok(cfg)
    }

    /// The packages' settings.
    pub(crate) fn packages(&self) -> PackagesConfig {
        PackagesConfig {
            http: self.http.clone(),
            shell: self.shell.clone(),
        }
    }

    /// What the start-up says of the packages that reach outside.
    pub(crate) fn packages_note(&self) -> String {
        let h = &self.http;
        let private = if h.allow_private_addresses {
            "private addresses allowed (metadata never)".to_owned()
        } else if h.allowed_private_networks.is_empty() {
            "private and loopback addresses refused".to_owned()
        } else {
            format!(
                "private addresses refused except {}",
                h.allowed_private_networks.join(", ")
            )
        };
        let hosts = if h.allowed_hosts.is_empty() {
            "any host".to_owned()
        } else {
            format!("hosts {}", h.allowed_hosts.join(", "))
        };
        let shell = if self.shell.enabled {
            format!(
                "on ({} allow, {} deny patterns; {} ms, {} bytes per stream)",
                self.shell.allow.len(),
                self.shell.deny.len(),
                self.shell.timeout_ms,
                self.shell.max_output_bytes
            )
        } else {
            "off (shell: {enabled: true} in --config turns it on)".to_owned()
        };
        format!("acts.core.http: {hosts}, {private}; acts.app.shell: {shell}")
    }
}

/// The tokens of `ACTS_TOKENS` (a YAML or JSON list like the config's
/// `tokens:`).
pub(crate) fn env_tokens() -> Result<Vec<TokenConfig>, Failure> {
    match std::env::var("ACTS_TOKENS") {
        Ok(text) if !text.trim().is_empty() => serde_norway::from_str(&text).map_err(|e| {
            Failure::input(format!(
                "ACTS_TOKENS is not a list of {{principal, roles, sha256}}: {e}"
            ))
        }),
        _ => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("c.yaml");
        std::fs::write(&p, text).expect("write");
        (dir, p)
    }

    #[test]
    fn the_packages_sections_are_read_and_their_bounds_checked() {
        let (_d, p) = write(
            "http:\n  allow-private-addresses: true\n  timeout-ms: 500\nshell:\n  enabled: true\n  deny: ['*rm *']\n",
        );
        let c = ConfigFile::read(Some(&p)).expect("valid");
        assert!(c.packages().http.allow_private_addresses);
        assert!(c.packages().shell.enabled);
        assert!(
            c.packages_note().contains("acts.app.shell: on"),
            "{}",
            c.packages_note()
        );
        let (_d, p) = write("http:\n  timeout-ms: 0\n");
        let e = ConfigFile::read(Some(&p)).expect_err("out of range");
        assert!(e.message.contains("http.timeout-ms"), "{}", e.message);
        let (_d, p) = write("shell:\n  enable: true\n");
        let e = ConfigFile::read(Some(&p)).expect_err("typo");
        assert!(e.message.contains("enable"), "{}", e.message);
    }
}
