//! Where `acts.core.http` may connect: the scheme, the host allow-list and
//! the address rules, applied to the URL, to every address a name resolves
//! to before the client dials it ([`SafeResolver`]: the client dials only
//! what passed), to every redirect, and to the peer a response came from.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::Host;
use wildmatch::WildMatch;

use super::config::HttpConfig;

/// Why a target was refused (the act fails with ecode `http.refused`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// Not `http` or `https`.
    #[error("the scheme '{0}' is not allowed (http and https only)")]
    Scheme(String),
    /// A URL without a host.
    #[error("the url has no host")]
    NoHost,
    /// Not on `allowed-hosts`.
    #[error("the host '{0}' is not in http.allowed-hosts")]
    Host(String),
    /// A refused address.
    #[error("the address {ip} is {why}")]
    Address {
        /// The address.
        ip: IpAddr,
        /// Which rule refused it.
        why: &'static str,
    },
    /// A name whose every address is refused.
    #[error("'{host}' resolves only to refused addresses ({reasons})")]
    Resolved {
        /// The name.
        host: String,
        /// Each refused address and why.
        reasons: String,
    },
}

/// The egress rules of one [`HttpConfig`].
#[derive(Debug)]
pub(crate) struct Egress {
    hosts: Vec<WildMatch>,
    allow_private: bool,
    networks: Vec<ipnet::IpNet>,
}

impl Egress {
    /// The rules of `config` (checked: its networks parse).
    pub(crate) fn new(config: &HttpConfig) -> Self {
        Self {
            networks: config.private_networks().unwrap_or_default(),
            hosts: config
                .allowed_hosts
                .iter()
                .map(|h| WildMatch::new(&h.trim().trim_end_matches('.').to_ascii_lowercase()))
                .collect(),
            allow_private: config.allow_private_addresses,
        }
    }

    /// The checks a URL allows before anything is resolved: scheme, host
    /// allow-list and, for an address written in the URL (in any of its
    /// spellings, which the URL parser has made one), the address rules.
    pub(crate) fn check_url(&self, url: &Url) -> Result<(), Refusal> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Refusal::Scheme(url.scheme().to_owned()));
        }
        let host = url.host().ok_or(Refusal::NoHost)?;
        let name = match &host {
            Host::Domain(d) => d.trim_end_matches('.').to_ascii_lowercase(),
            Host::Ipv4(ip) => ip.to_string(),
            Host::Ipv6(ip) => ip.to_string(),
        };
        if !self.hosts.is_empty() && !self.hosts.iter().any(|g| g.matches(&name)) {
            return Err(Refusal::Host(name));
        }
        match host {
            Host::Ipv4(ip) => self.check_ip(IpAddr::V4(ip)),
            Host::Ipv6(ip) => self.check_ip(IpAddr::V6(ip)),
            Host::Domain(_) => Ok(()),
        }
    }

    /// The address rules.
    pub(crate) fn check_ip(&self, ip: IpAddr) -> Result<(), Refusal> {
        match classify(ip) {
            Class::Public => Ok(()),
            Class::Private(_) if self.allow_private || self.in_networks(ip) => Ok(()),
            Class::Private(why) | Class::Never(why) => Err(Refusal::Address { ip, why }),
        }
    }

    /// Whether `ip` (or the IPv4 address it carries) is in an allowed
    /// private network.
    fn in_networks(&self, ip: IpAddr) -> bool {
        let v4 = match ip {
            IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4),
            IpAddr::V4(_) => None,
        };
        self.networks
            .iter()
            .any(|n| n.contains(&ip) || v4.is_some_and(|v| n.contains(&v)))
    }

    /// The permitted ones of `addrs`; an error naming each refused one when
    /// none is left.
    fn filter(
        &self,
        host: &str,
        addrs: impl Iterator<Item = SocketAddr>,
    ) -> Result<Vec<SocketAddr>, Refusal> {
        let mut ok = Vec::new();
        let mut refused = Vec::new();
        for a in addrs {
            match self.check_ip(a.ip()) {
                Ok(()) => ok.push(a),
                Err(e) => refused.push(e.to_string()),
            }
        }
        if ok.is_empty() {
            let reasons = if refused.is_empty() {
                "no address at all".to_owned()
            } else {
                refused.join("; ")
            };
            return Err(Refusal::Resolved {
                host: host.to_owned(),
                reasons,
            });
        }
        Ok(ok)
    }
}

/// How an address is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Public,
    /// Allowed only with `allow-private-addresses`.
    Private(&'static str),
    /// Never allowed.
    Never(&'static str),
}

/// The IPv4 address an IPv6 one carries, for the forms that reach an IPv4
/// host: IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`,
/// deprecated), NAT64 (`64:ff9b::/96`) and 6to4 (`2002:AABB:CCDD::/48`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if s[..6] == [0; 6] && !(s[6] == 0 && s[7] <= 1) {
        return Some(tail); // ::a.b.c.d (not :: or ::1)
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(tail);
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    None
}

fn classify(ip: IpAddr) -> Class {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => classify_v4(v4),
            None => classify_v6(v6),
        },
    }
}

fn classify_v4(ip: Ipv4Addr) -> Class {
    let [a, b, c, d] = ip.octets();
    if [a, b, c, d] == [169, 254, 169, 254] || [a, b, c, d] == [100, 100, 100, 200] {
        return Class::Never("a cloud metadata address");
    }
    if ip.is_unspecified() || a == 0 {
        return Class::Never("an unspecified address (0.0.0.0/8)");
    }
    if ip.is_broadcast() || ip.is_multicast() || a >= 240 {
        return Class::Never("a multicast, broadcast or reserved address");
    }
    if ip.is_loopback() {
        return Class::Private("a loopback address");
    }
    if ip.is_private() {
        return Class::Private("a private address (RFC 1918)");
    }
    if ip.is_link_local() {
        return Class::Private("a link-local address");
    }
    if a == 100 && (64..128).contains(&b) {
        return Class::Private("a carrier-grade NAT address (100.64.0.0/10)");
    }
    if a == 198 && (18..20).contains(&b) {
        return Class::Private("a benchmarking network address (198.18.0.0/15)");
    }
    if ip.is_documentation() || (a == 192 && b == 0 && c == 0) {
        return Class::Never("a documentation or protocol-assignment address");
    }
    Class::Public
}

fn classify_v6(ip: Ipv6Addr) -> Class {
    if ip == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254) {
        return Class::Never("a cloud metadata address");
    }
    if ip.is_unspecified() {
        return Class::Never("the unspecified address (::)");
    }
    if ip.is_multicast() {
        return Class::Never("a multicast address");
    }
    if ip.is_loopback() {
        return Class::Private("a loopback address");
    }
    let first = ip.segments()[0];
    if first & 0xfe00 == 0xfc00 {
        return Class::Private("a unique-local address (fc00::/7)");
    }
    if first & 0xffc0 == 0xfe80 {
        return Class::Private("a link-local address (fe80::/10)");
    }
    if first & 0xffc0 == 0xfec0 {
        return Class::Private("a site-local address (fec0::/10)");
    }
    if first == 0x2001 && ip.segments()[1] == 0x0db8 {
        return Class::Never("a documentation address (2001:db8::/32)");
    }
    Class::Public
}

/// The client's resolver: a name's addresses with every refused one
/// dropped, so the connector can only dial a permitted address (a name
/// that resolves to 127.0.0.1, or rebinds to it between two lookups, is
/// refused at the lookup the connection uses).
#[derive(Debug)]
pub(crate) struct SafeResolver {
    pub(crate) egress: Arc<Egress>,
}

impl Resolve for SafeResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let egress = self.egress.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), 0)).await.map_err(
                |e| -> Box<dyn std::error::Error + Send + Sync> {
                    format!("cannot resolve '{host}': {e}").into()
                },
            )?;
            let ok = egress
                .filter(&host, addrs)
                .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { Box::new(e) })?;
            Ok(Box::new(ok.into_iter()) as Addrs)
        })
    }
}

/// The redirect policy: at most `max` hops, each target checked like the
/// first URL (an address in it here; a name at its lookup).
pub(crate) fn redirects(egress: Arc<Egress>, max: usize) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        if max == 0 {
            // not followed: the 3xx is the answer
            return attempt.stop();
        }
        if attempt.previous().len() > max {
            return attempt.error(format!("more than {max} redirects (http.max-redirects)"));
        }
        match egress.check_url(attempt.url()) {
            Ok(()) => attempt.follow(),
            Err(e) => attempt.error(e),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn egress(private: bool, hosts: &[&str]) -> Egress {
        Egress::new(&HttpConfig {
            allow_private_addresses: private,
            allowed_hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
            ..Default::default()
        })
    }

    fn check(e: &Egress, url: &str) -> Result<(), Refusal> {
        e.check_url(&Url::parse(url).expect("url"))
    }

    #[test]
    fn every_spelling_of_loopback_is_refused() {
        let e = egress(false, &[]);
        for url in [
            "http://127.0.0.1/",
            "http://127.1/",
            "http://0x7f000001/",
            "http://2130706433/",
            "http://0177.0.0.1/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://[::127.0.0.1]/",
            "http://[64:ff9b::7f00:1]/",
            "http://[2002:7f00:1::]/",
        ] {
            let r = check(&e, url);
            assert!(
                matches!(r, Err(Refusal::Address { why, .. }) if why.contains("loopback")),
                "{url}: {r:?}"
            );
        }
    }

    #[test]
    fn private_link_local_and_metadata_addresses_are_refused() {
        let e = egress(false, &[]);
        for url in [
            "http://10.1.2.3/",
            "http://172.16.0.1/",
            "http://192.168.1.1/",
            "http://169.254.1.1/",
            "http://100.64.0.1/",
            "http://[fd12::1]/",
            "http://[fe80::1]/",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::ffff:169.254.169.254]/",
            "http://100.100.100.200/",
            "http://[fd00:ec2::254]/",
            "http://0.0.0.0/",
            "http://[::]/",
            "http://255.255.255.255/",
            "http://224.0.0.1/",
        ] {
            assert!(check(&e, url).is_err(), "{url} must be refused");
        }
        for url in ["http://93.184.215.14/", "https://[2606:4700::1111]/"] {
            assert_eq!(check(&e, url), Ok(()), "{url} is public");
        }
    }

    #[test]
    fn allow_private_opens_private_ranges_but_never_metadata() {
        let e = egress(true, &[]);
        assert_eq!(check(&e, "http://127.0.0.1:8080/"), Ok(()));
        assert_eq!(check(&e, "http://10.0.0.1/"), Ok(()));
        for url in [
            "http://169.254.169.254/",
            "http://[fd00:ec2::254]/",
            "http://100.100.100.200/",
            "http://0.0.0.0/",
        ] {
            assert!(check(&e, url).is_err(), "{url} must stay refused");
        }
    }

    #[test]
    fn schemes_and_the_host_allow_list() {
        let e = egress(false, &["api.example.com", "*.example.org"]);
        assert!(matches!(
            check(&e, "file:///etc/passwd"),
            Err(Refusal::Scheme(_))
        ));
        assert!(matches!(
            check(&e, "ftp://api.example.com/"),
            Err(Refusal::Scheme(_))
        ));
        assert_eq!(check(&e, "https://API.example.com./x"), Ok(()));
        assert_eq!(check(&e, "https://a.b.example.org/"), Ok(()));
        assert!(matches!(
            check(&e, "https://example.org/"),
            Err(Refusal::Host(_))
        ));
        assert!(matches!(
            check(&e, "https://evil.com/"),
            Err(Refusal::Host(_))
        ));
        assert!(matches!(
            check(&e, "https://api.example.com.evil.com/"),
            Err(Refusal::Host(_))
        ));
    }

    #[test]
    fn an_allowed_private_network_opens_only_itself() {
        let e = Egress::new(&HttpConfig {
            allowed_private_networks: vec!["127.0.0.2/32".into(), "10.1.0.0/16".into()],
            ..Default::default()
        });
        assert_eq!(check(&e, "http://127.0.0.2:9/"), Ok(()));
        assert_eq!(check(&e, "http://[::ffff:127.0.0.2]:9/"), Ok(()));
        assert_eq!(check(&e, "http://10.1.2.3/"), Ok(()));
        assert!(check(&e, "http://127.0.0.1/").is_err());
        assert!(check(&e, "http://10.2.0.1/").is_err());
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_refused_at_the_lookup() {
        let r = SafeResolver {
            egress: Arc::new(egress(false, &[])),
        };
        let name: Name = "localhost".parse().expect("name");
        let e = r.resolve(name).await.err().expect("refused");
        assert!(e.to_string().contains("refused addresses"), "{e}");
        let open = SafeResolver {
            egress: Arc::new(egress(true, &[])),
        };
        let name: Name = "localhost".parse().expect("name");
        assert!(open.resolve(name).await.is_ok());
    }
}
