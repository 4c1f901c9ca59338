//! Hostnames as the Gateway API compares them: a leading `*.` label matches one or more
//! labels (`*.example.com` matches `a.example.com` and `a.b.example.com`, not
//! `example.com`), the intersection of a listener's hostname with a route's hostnames, and
//! how specific a matching hostname is (precedence: exact before wildcard, then longer).
//!
//! Text only; knows nothing of listeners or routes beyond their hostname strings.

/// Whether the pattern (an exact name or `*.suffix`) matches the name `host`, which may
/// itself be a wildcard (then it must lie within the pattern).
pub fn matches(pattern: &str, host: &str) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    let host = host.to_ascii_lowercase();
    match pattern.strip_prefix('*') {
        Some(suffix) => {
            // `suffix` is ".example.com"; the host needs at least one label before it.
            let host = host.strip_prefix('*').map_or(host.as_str(), |h| h);
            host.len() > suffix.len() && host.ends_with(suffix)
                || (host.starts_with('.') && host == suffix)
        }
        None => pattern == host,
    }
}

/// The hostnames a route has on a listener: the intersection of the listener's hostname
/// (`None`: any) and the route's (`[]`: any). `Some(vec![])` means none intersect; `None`
/// means any hostname.
pub fn intersect(listener: Option<&str>, route: &[String]) -> Option<Vec<String>> {
    match (listener, route) {
        (None, []) => None,
        (None, route) => Some(route.to_vec()),
        (Some(listener), []) => Some(vec![listener.to_ascii_lowercase()]),
        (Some(listener), route) => Some(
            route
                .iter()
                .filter_map(|r| {
                    if matches(listener, r) || r.eq_ignore_ascii_case(listener) {
                        Some(r.to_ascii_lowercase())
                    } else if matches(r, listener) {
                        Some(listener.to_ascii_lowercase())
                    } else {
                        None
                    }
                })
                .collect(),
        ),
    }
}

/// How specifically `hostname` matches `host`: `None` when it does not; otherwise exact
/// names rank above wildcards and longer above shorter; the "any hostname" catch-all ranks
/// lowest.
pub fn specificity(hostnames: Option<&[String]>, host: &str) -> Option<(bool, usize)> {
    let Some(hostnames) = hostnames else {
        return Some((false, 0));
    };
    hostnames
        .iter()
        .filter(|h| matches(h, host))
        .map(|h| (!h.starts_with('*'), h.len()))
        .max()
}

/// The host a request names (its `Host` header), lower case, without a port.
pub fn request_host(host: &str) -> String {
    let host = host.trim();
    let bare = match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    };
    bare.trim_end_matches('.').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_one_or_more_labels() {
        let table = [
            ("example.com", "example.com", true),
            ("example.com", "EXAMPLE.com", true),
            ("example.com", "a.example.com", false),
            ("*.example.com", "a.example.com", true),
            ("*.example.com", "a.b.example.com", true),
            ("*.example.com", "example.com", false),
            ("*.example.com", "*.example.com", true),
            ("*.example.com", "*.a.example.com", true),
            ("*.a.example.com", "*.example.com", false),
            ("*.example.com", "aexample.com", false),
        ];
        for (pattern, host, want) in table {
            assert_eq!(matches(pattern, host), want, "{pattern} {host}");
        }
    }

    #[test]
    fn listener_and_route_hostnames_intersect() {
        let v = |hosts: &[&str]| hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>();
        type Case = (Option<&'static str>, Vec<String>, Option<Vec<String>>);
        let table: Vec<Case> = vec![
            (None, v(&[]), None),
            (None, v(&["a.com"]), Some(v(&["a.com"]))),
            (Some("a.com"), v(&[]), Some(v(&["a.com"]))),
            (Some("a.com"), v(&["a.com", "b.com"]), Some(v(&["a.com"]))),
            (Some("a.com"), v(&["b.com"]), Some(v(&[]))),
            (
                Some("*.a.com"),
                v(&["x.a.com", "b.com"]),
                Some(v(&["x.a.com"])),
            ),
            (Some("x.a.com"), v(&["*.a.com"]), Some(v(&["x.a.com"]))),
            (Some("*.a.com"), v(&["*.x.a.com"]), Some(v(&["*.x.a.com"]))),
            (Some("*.x.a.com"), v(&["*.a.com"]), Some(v(&["*.x.a.com"]))),
            (Some("*.a.com"), v(&["a.com"]), Some(v(&[]))),
        ];
        for (listener, route, want) in table {
            assert_eq!(intersect(listener, &route), want, "{listener:?} {route:?}");
        }
    }

    #[test]
    fn exact_hostnames_outrank_wildcards_and_catch_alls() {
        let v = |hosts: &[&str]| hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>();
        let exact = v(&["foo.example.com"]);
        let wild = v(&["*.example.com"]);
        let wider = v(&["*.com"]);
        let host = "foo.example.com";
        assert!(specificity(Some(&exact), host) > specificity(Some(&wild), host));
        assert!(specificity(Some(&wild), host) > specificity(Some(&wider), host));
        assert!(specificity(Some(&wider), host) > specificity(None, host));
        assert_eq!(specificity(Some(&v(&["bar.example.com"])), host), None);
        assert_eq!(request_host("Foo.Example.com:8080"), "foo.example.com");
        assert_eq!(request_host("foo.example.com."), "foo.example.com");
    }
}
