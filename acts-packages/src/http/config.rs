//! [`HttpConfig`]: the `http:` section (acts-server 0.25's `[http]` keys and
//! ours), each bound checked at start.

use serde::Deserialize;

use crate::ConfigError;

/// Largest `connect-timeout-ms`.
pub(crate) const MAX_CONNECT_TIMEOUT_MS: u64 = 5 * 60 * 1000;
/// Largest `timeout-ms` (of the config or of an act).
pub(crate) const MAX_TIMEOUT_MS: u64 = 60 * 60 * 1000;
/// Largest `max-response-bytes`: a response becomes the act's vars, stored
/// with the process.
pub(crate) const MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;
/// Most redirects one request may follow.
pub(crate) const MAX_REDIRECTS: usize = 20;
/// Most retries of one request.
pub(crate) const MAX_RETRIES: u32 = 10;

/// How `acts.core.http` may reach the outside world. Every bound is always
/// in force: none has a value that turns it off, and a value out of range
/// fails the start (never a silent clamp).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct HttpConfig {
    /// Hosts that may be requested, as globs (`*.example.com` matches
    /// `a.example.com`, not `example.com`); empty: any host (the address
    /// rules still apply).
    pub allowed_hosts: Vec<String>,
    /// Whether loopback, private (RFC 1918, unique-local), link-local and
    /// carrier-grade NAT addresses may be requested (default false). Cloud
    /// metadata addresses are refused even then.
    pub allow_private_addresses: bool,
    /// Private networks that may be requested while the other private
    /// ranges stay refused, as CIDRs (`10.1.0.0/16`, `fd12::/64`,
    /// `127.0.0.2/32`); an acts extension. Metadata addresses stay refused.
    pub allowed_private_networks: Vec<String>,
    /// Most bytes of a response body (default 1 MiB, at most 64 MiB): a
    /// larger answer fails the act with `http.too_large`. The body becomes
    /// the act's outputs, which the engine also bounds (`max_vars_bytes`).
    pub max_response_bytes: u64,
    /// How long a connection may take, ms (default 10,000; 1..=300,000).
    pub connect_timeout_ms: u64,
    /// How long one request may take, body included, ms (default 30,000;
    /// 1..=3,600,000). An act's own `timeout-ms` may only tighten it.
    pub timeout_ms: u64,
    /// Most redirects followed, each checked like the first URL (default
    /// 10; 0..=20; 0 follows none and returns the 3xx).
    pub max_redirects: usize,
    /// Most retries of a request that failed to connect, or of an
    /// idempotent one (GET, HEAD, OPTIONS, PUT, DELETE) that timed out or
    /// was answered 429, 502, 503 or 504 (default 2; 0..=10).
    pub retries: u32,
    /// The first retry's wait, ms, doubled for each next one and never
    /// more than 10 s; a `Retry-After` in seconds is honoured up to that
    /// (default 200; 1..=10,000).
    pub retry_backoff_ms: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            allowed_hosts: Vec::new(),
            allow_private_addresses: false,
            allowed_private_networks: Vec::new(),
            max_response_bytes: 1024 * 1024,
            connect_timeout_ms: 10_000,
            timeout_ms: 30_000,
            max_redirects: 10,
            retries: 2,
            retry_backoff_ms: 200,
        }
    }
}

/// Most a retry waits, ms.
pub(crate) const MAX_BACKOFF_MS: u64 = 10_000;

impl HttpConfig {
    /// Every bound in range, or the first one that is not.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        let range = |key: &'static str, v: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(ConfigError::new(
                    "http",
                    key,
                    format!("must be between {lo} and {hi} (got {v})"),
                ))
            }
        };
        range(
            "max-response-bytes",
            self.max_response_bytes,
            1,
            MAX_RESPONSE_BYTES,
        )?;
        range(
            "connect-timeout-ms",
            self.connect_timeout_ms,
            1,
            MAX_CONNECT_TIMEOUT_MS,
        )?;
        range("timeout-ms", self.timeout_ms, 1, MAX_TIMEOUT_MS)?;
        range(
            "max-redirects",
            self.max_redirects as u64,
            0,
            MAX_REDIRECTS as u64,
        )?;
        range(
            "retries",
            u64::from(self.retries),
            0,
            u64::from(MAX_RETRIES),
        )?;
        range("retry-backoff-ms", self.retry_backoff_ms, 1, MAX_BACKOFF_MS)?;
        self.private_networks()?;
        for h in &self.allowed_hosts {
            let h = h.trim();
            if h.is_empty() || h.contains('/') || h.contains(':') {
                return Err(ConfigError::new(
                    "http",
                    "allowed-hosts",
                    format!(
                        "'{h}' is not a host name or glob (write 'api.example.com' or \
                         '*.example.com', without a scheme, port or path)"
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl HttpConfig {
    /// `allowed-private-networks`, parsed.
    pub(crate) fn private_networks(&self) -> Result<Vec<ipnet::IpNet>, ConfigError> {
        self.allowed_private_networks
            .iter()
            .map(|n| {
                n.trim().parse().map_err(|_| {
                    ConfigError::new(
                        "http",
                        "allowed-private-networks",
                        format!("'{n}' is not a network in CIDR form (e.g. 10.1.0.0/16)"),
                    )
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_in_range() {
        HttpConfig::default().check().expect("defaults");
    }

    #[test]
    fn every_bound_out_of_range_is_refused_by_name() {
        let cases: Vec<(&str, HttpConfig)> = vec![
            (
                "timeout-ms",
                HttpConfig {
                    timeout_ms: 0,
                    ..Default::default()
                },
            ),
            (
                "timeout-ms",
                HttpConfig {
                    timeout_ms: MAX_TIMEOUT_MS + 1,
                    ..Default::default()
                },
            ),
            (
                "connect-timeout-ms",
                HttpConfig {
                    connect_timeout_ms: 0,
                    ..Default::default()
                },
            ),
            (
                "max-response-bytes",
                HttpConfig {
                    max_response_bytes: 0,
                    ..Default::default()
                },
            ),
            (
                "max-redirects",
                HttpConfig {
                    max_redirects: 21,
                    ..Default::default()
                },
            ),
            (
                "retries",
                HttpConfig {
                    retries: 11,
                    ..Default::default()
                },
            ),
            (
                "allowed-private-networks",
                HttpConfig {
                    allowed_private_networks: vec!["10.0.0.0".into()],
                    ..Default::default()
                },
            ),
            (
                "allowed-hosts",
                HttpConfig {
                    allowed_hosts: vec!["https://api.example.com".into()],
                    ..Default::default()
                },
            ),
        ];
        for (key, c) in cases {
            let e = c.check().expect_err(key);
            assert_eq!(e.key, key, "{e}");
        }
    }
}
