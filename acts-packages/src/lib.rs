//! acts' application packages that reach outside the engine, as acts-server
//! 0.25 ships them:
//!
//! - [`HttpPackage`] (`uses: acts.core.http`): one HTTP request per act,
//!   safe by default — `http`/`https` only; loopback, private, link-local
//!   and cloud-metadata addresses refused (checked on the addresses the
//!   client dials, on every redirect, and on the peer it talked to); a host
//!   allow-list; timeouts, a response-size cap and a redirect limit always
//!   in force; an `Idempotency-Key` that survives a crash; retries with
//!   backoff where a retry is safe. Configured by [`HttpConfig`].
//! - [`ShellPackage`] (`uses: acts.app.shell`): a `sh`/`bash`/`nu` script,
//!   **off unless the operator turns it on** ([`ShellConfig::enabled`]);
//!   allow/deny globs over the script, a timeout and an output cap per
//!   stream always in force, the whole process group killed and reaped, no
//!   stdin, a scrubbed environment, a scratch folder removed after.
//!
//! Both run as application packages ([`acts::ActPackage`]): the engine
//! calls them after the act's start is committed, off the process's lane,
//! and again after a crash (so both are written to be re-run).
//! [`install`] registers both on an engine builder from one
//! [`PackagesConfig`] (the `http:` and `shell:` sections of `acts serve
//! --config`).
//!
//! May depend on: the facade `acts` (the package trait and its types),
//! reqwest, tokio's process and net, nix (signals); never on `acts-core`,
//! a store backend or the server.
//!
//! Start reading at [`install`], then `http/mod.rs` and `shell/mod.rs`.

mod error;
mod http;
mod shell;
mod text;

pub use error::ConfigError;
pub use http::{HttpConfig, HttpPackage};
pub use shell::{ShellConfig, ShellPackage};

use std::sync::Arc;

use serde::Deserialize;

/// The packages' settings: the `http:` and `shell:` sections of a config
/// file (keys as acts-server 0.25's `[http]` and `[shell]`, kebab-case).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackagesConfig {
    /// `acts.core.http`.
    #[serde(default)]
    pub http: HttpConfig,
    /// `acts.app.shell` (off unless `enabled: true`).
    #[serde(default)]
    pub shell: ShellConfig,
}

/// Registers `acts.core.http` and `acts.app.shell` on `builder`, configured
/// by `config`. The shell package is registered even when it is off: its
/// acts then fail with ecode `shell.disabled` and a message that says how to
/// turn it on, rather than a model failing to deploy with "unknown package".
pub fn install(
    builder: acts::EngineBuilder,
    config: &PackagesConfig,
) -> Result<acts::EngineBuilder, ConfigError> {
    Ok(packages(config)?
        .into_iter()
        .fold(builder, |b, p| b.package(p)))
}

/// Both packages, configured by `config`, to share between engines (each
/// partition of a cluster node registers the same ones).
pub fn packages(config: &PackagesConfig) -> Result<Vec<Arc<dyn acts::ActPackage>>, ConfigError> {
    Ok(vec![
        Arc::new(HttpPackage::new(&config.http)?),
        Arc::new(ShellPackage::new(&config.shell)?),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_and_head_cut_on_character_boundaries() {
        assert_eq!(text::tail(b"abc\n", 10), "abc");
        assert_eq!(text::tail("xxé".as_bytes(), 2), "…é");
        assert_eq!(text::head("héllo", 2), "h…");
        assert_eq!(text::head("hi", 2), "hi");
    }

    #[test]
    fn the_config_reads_the_reference_keys_and_refuses_unknown_ones() {
        let c: PackagesConfig = serde_json::from_value(serde_json::json!({
            "http": {"allowed-hosts": ["*.example.com"], "allow-private-addresses": true,
                     "max-response-bytes": 10, "connect-timeout-ms": 5, "timeout-ms": 7},
            "shell": {"enabled": true, "allow": ["echo *"], "deny": ["*rm*"],
                      "timeout-ms": 9, "max-output-bytes": 11}
        }))
        .expect("reference keys");
        assert_eq!(c.http.allowed_hosts, vec!["*.example.com"]);
        assert!(c.http.allow_private_addresses);
        assert_eq!(c.http.timeout_ms, 7);
        assert!(c.shell.enabled);
        assert_eq!(c.shell.max_output_bytes, 11);
        let typo = serde_json::from_value::<PackagesConfig>(
            serde_json::json!({"http": {"allowed-host": ["a"]}}),
        )
        .expect_err("a typo is refused");
        assert!(typo.to_string().contains("allowed-host"), "{typo}");
    }
}
