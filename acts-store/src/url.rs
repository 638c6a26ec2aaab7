//! Store URLs as they may be shown: in an error, a log line, a status
//! page. A URL can carry a password (`postgres://user:secret@host/db`,
//! `redis://:secret@host`, `?password=secret`); what is shown never does.

/// `url` with any password replaced by `***`: the password of the
/// `user:password@` part of every host of a URL, and the value of a
/// `password` query parameter. A URL without one comes back unchanged.
pub fn redacted_url(url: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (url, None),
    };
    let mut out = String::with_capacity(url.len());
    match head.split_once("://") {
        Some((scheme, rest)) => {
            out.push_str(scheme);
            out.push_str("://");
            // The authority ends at the first '/' after it; its user part
            // at the last '@' in it.
            let (authority, path) = match rest.find('/') {
                Some(i) => rest.split_at(i),
                None => (rest, ""),
            };
            match authority.rsplit_once('@') {
                Some((user, hosts)) => {
                    match user.split_once(':') {
                        Some((name, _)) => {
                            out.push_str(name);
                            out.push_str(":***");
                        }
                        None => out.push_str(user),
                    }
                    out.push('@');
                    out.push_str(hosts);
                }
                None => out.push_str(authority),
            }
            out.push_str(path);
        }
        None => out.push_str(head),
    }
    if let Some(query) = query {
        out.push('?');
        let params: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => p.to_owned(),
            })
            .collect();
        out.push_str(&params.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redacted_url;

    #[test]
    fn passwords_are_never_shown() {
        let cases = [
            (
                "postgres://acts:s3cret@db:5432/acts?namespace=o",
                "postgres://acts:***@db:5432/acts?namespace=o",
            ),
            (
                "postgres://acts:p@ss@db1:5432,db2:5432/acts",
                "postgres://acts:***@db1:5432,db2:5432/acts",
            ),
            (
                "redis://:s3cret@127.0.0.1:6379/ns",
                "redis://:***@127.0.0.1:6379/ns",
            ),
            (
                "postgres://acts@db/acts?password=s3cret&namespace=o",
                "postgres://acts@db/acts?password=***&namespace=o",
            ),
            (
                "postgres://acts@db:5432/acts",
                "postgres://acts@db:5432/acts",
            ),
            ("redb:acts.db", "redb:acts.db"),
            ("memory:", "memory:"),
            ("redis+cluster://a:1,b:2/ns", "redis+cluster://a:1,b:2/ns"),
            (
                "redis+sentinel://:s3cret@a:1,b:2/m/ns",
                "redis+sentinel://:***@a:1,b:2/m/ns",
            ),
        ];
        for (url, shown) in cases {
            assert_eq!(redacted_url(url), shown, "{url}");
            assert!(!redacted_url(url).contains("s3cret"), "{url}");
        }
    }
}
