//! Where one request to a Gateway goes: the listener on its port (most specific hostname
//! first), the matching route rule across every route attached there by the spec's
//! precedence, the rule's filters, and a backend picked by weight from the caller's seed.
//!
//! HTTPRoute precedence (gateway-api `HTTPRouteRule`): the most specific matching hostname,
//! then an `Exact` path over the longest `PathPrefix`, then a method match, then the most
//! header matches, then the most query-parameter matches; across routes the oldest
//! (creationTimestamp), then `{namespace}/{name}` alphabetically; within a route the first
//! rule and match. GRPCRoute: hostname, then the longest exact service, the longest exact
//! method, the most header matches, then the same tie-breaks. No match answers 404; a picked
//! backend that does not resolve (or no backend at all) answers 500, as the spec requires.
//!
//! Knows no endpoints and no sockets: a [`Forward`] names a backend and the request as the
//! filters left it.

use std::cmp::Reverse;
use std::net::Ipv4Addr;

use crate::Model;
use crate::attach::BackendVerdict;
use crate::hostname;
use crate::objects::{BackendRef, Filter, Key, RouteKind};

/// A request arriving at an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The address connected to.
    pub address: Ipv4Addr,
    /// The port connected to.
    pub port: u16,
    /// Whether the client speaks TLS (an `https://` URL).
    pub tls: bool,
    /// The `Host` header (a port in it is ignored).
    pub host: String,
    /// The method.
    pub method: String,
    /// The path, with its query.
    pub path: String,
    /// The headers, in order.
    pub headers: Vec<(String, String)>,
}

impl Request {
    fn header(&self, name: &str) -> impl Iterator<Item = &str> {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether this is a gRPC request (`content-type: application/grpc…`).
    pub fn is_grpc(&self) -> bool {
        self.header("content-type")
            .any(|v| v.starts_with("application/grpc"))
    }

    fn path_and_query(&self) -> (&str, Vec<(&str, &str)>) {
        let (path, query) = self.path.split_once('?').unwrap_or((&self.path, ""));
        let query = query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| p.split_once('=').unwrap_or((p, "")))
            .collect();
        (path, query)
    }
}

/// A backend a request is sent to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    /// API group ("" for Services).
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Port (Services).
    pub port: Option<u16>,
}

/// A request on its way to a backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    /// The Gateway.
    pub gateway: Key,
    /// The listener's name.
    pub listener: String,
    /// The route's kind and key.
    pub route: (RouteKind, Key),
    /// The rule's index in the route.
    pub rule: usize,
    /// The backend.
    pub backend: Backend,
    /// The host (without a port).
    pub host: String,
    /// The method.
    pub method: String,
    /// The path with its query.
    pub path: String,
    /// The headers after the filters.
    pub headers: Vec<(String, String)>,
}

/// What happens to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Routed {
    /// The address is no Gateway's.
    NotAGateway,
    /// The Gateway has no programmed listener on the port for the request's protocol.
    Refused,
    /// The Gateway answers itself.
    Respond {
        /// HTTP status.
        status: u16,
        /// Response headers.
        headers: Vec<(String, String)>,
    },
    /// The request goes to a backend.
    Forward(Box<Forward>),
}

/// SplitMix64: the backend pick from the caller's seed.
pub fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The index of the backend a seed picks by weight; `None` when every weight is 0.
pub fn pick(backends: &[BackendRef], seed: u64) -> Option<usize> {
    let total: u64 = backends.iter().map(|b| u64::from(b.weight)).sum();
    if total == 0 {
        return None;
    }
    let mut point = mix(seed) % total;
    for (i, backend) in backends.iter().enumerate() {
        let weight = u64::from(backend.weight);
        if point < weight {
            return Some(i);
        }
        point -= weight;
    }
    None
}

fn apply_modifier(headers: &mut Vec<(String, String)>, filter: &Filter) {
    if let Filter::RequestHeaderModifier { set, add, remove } = filter {
        for (name, value) in set {
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
            headers.push((name.clone(), value.clone()));
        }
        for (name, value) in add {
            headers.push((name.clone(), value.clone()));
        }
        for name in remove {
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        }
    }
}

fn redirect(filter: &Filter, request: &Request, host: &str) -> Option<Routed> {
    let Filter::RequestRedirect {
        scheme,
        hostname,
        port,
        path,
        status,
    } = filter
    else {
        return None;
    };
    let request_scheme = if request.tls { "https" } else { "http" };
    let scheme_out = scheme.as_deref().unwrap_or(request_scheme);
    let port_out = match (port, scheme) {
        (Some(p), _) => Some(*p),
        (None, Some(_)) => None,
        (None, None) => Some(request.port),
    };
    let well_known = matches!(
        (scheme_out, port_out),
        ("http", Some(80)) | ("https", Some(443))
    );
    let host_out = hostname.as_deref().unwrap_or(host);
    let authority = match port_out {
        Some(p) if !well_known => format!("{host_out}:{p}"),
        _ => host_out.to_string(),
    };
    let path_out = path.clone().unwrap_or_else(|| request.path.clone());
    Some(Routed::Respond {
        status: *status,
        headers: vec![(
            "location".to_string(),
            format!("{scheme_out}://{authority}{path_out}"),
        )],
    })
}

/// The precedence of one matching rule match (greater wins).
type Rank = (
    (bool, usize),
    [usize; 6],
    Reverse<String>,
    Reverse<String>,
    Reverse<usize>,
    Reverse<usize>,
);

/// Routes `request`, picking a backend with `seed`.
pub fn route(model: &Model, request: &Request, seed: u64) -> Routed {
    let Some((g, gateway)) = model
        .gateways
        .iter()
        .enumerate()
        .find(|(_, g)| g.address == Some(request.address))
    else {
        return Routed::NotAGateway;
    };
    let protocol = if request.tls { "HTTPS" } else { "HTTP" };
    let host = hostname::request_host(&request.host);
    let on_port: Vec<(usize, &crate::ListenerState)> = gateway
        .listeners
        .iter()
        .enumerate()
        .filter(|(_, l)| l.port == request.port && l.protocol == protocol && l.usable())
        .collect();
    if on_port.is_empty() || !gateway.programmed() {
        return Routed::Refused;
    }
    let not_found = Routed::Respond {
        status: 404,
        headers: Vec::new(),
    };
    let Some((l, listener)) = on_port
        .into_iter()
        .filter(|(_, l)| {
            l.hostname
                .as_deref()
                .is_none_or(|h| hostname::matches(h, &host))
        })
        .max_by_key(|(_, l)| {
            l.hostname
                .as_deref()
                .map_or((false, false, 0), |h| (true, !h.starts_with('*'), h.len()))
        })
    else {
        return not_found;
    };
    let grpc = request.is_grpc();
    let kind = if grpc {
        RouteKind::Grpc
    } else {
        RouteKind::Http
    };
    let (path, query) = request.path_and_query();
    let header_values = |name: &str| request.header(name).collect::<Vec<_>>();
    let mut best: Option<(Rank, usize, usize)> = None;
    for (r, state) in model.routes.iter().enumerate() {
        let route = &state.route;
        if route.kind != kind {
            continue;
        }
        let attached = state
            .parents
            .iter()
            .any(|p| p.gateway == g && p.accepted.as_ref().is_ok_and(|ls| ls.contains(&l)));
        if !attached {
            continue;
        }
        let hostnames = hostname::intersect(listener.hostname.as_deref(), &route.hostnames);
        let Some(host_rank) = hostname::specificity(hostnames.as_deref(), &host) else {
            continue;
        };
        let name = format!("{}/{}", route.key.0, route.key.1);
        for (ri, rule) in route.rules.iter().enumerate() {
            let mut ranks: Vec<(usize, [usize; 6])> = Vec::new();
            if grpc {
                let (service, method) = path
                    .trim_start_matches('/')
                    .split_once('/')
                    .unwrap_or((path.trim_start_matches('/'), ""));
                for (mi, m) in rule.grpc.iter().enumerate() {
                    let ok = m.service.as_ref().is_none_or(|s| s.matches(service))
                        && m.method.as_ref().is_none_or(|s| s.matches(method))
                        && m.headers
                            .iter()
                            .all(|(n, v)| header_values(n).iter().any(|h| v.matches(h)));
                    if ok {
                        ranks.push((mi, [m.service_len, m.method_len, m.headers.len(), 0, 0, 0]));
                    }
                }
            } else {
                for (mi, m) in rule.http.iter().enumerate() {
                    let ok = m.path.matches(path)
                        && m.method.as_deref().is_none_or(|x| x == request.method)
                        && m.headers
                            .iter()
                            .all(|(n, v)| header_values(n).iter().any(|h| v.matches(h)))
                        && m.query
                            .iter()
                            .all(|(n, v)| query.iter().any(|(qn, qv)| qn == n && v.matches(qv)));
                    if ok {
                        let (exact, prefix) = match &m.path {
                            crate::objects::PathMatch::Exact(_) => (1, 0),
                            crate::objects::PathMatch::Prefix(p) => {
                                (0, p.trim_end_matches('/').len() + 1)
                            }
                            crate::objects::PathMatch::Regex(_) => (0, 0),
                        };
                        ranks.push((
                            mi,
                            [
                                exact,
                                prefix,
                                usize::from(m.method.is_some()),
                                m.headers.len(),
                                m.query.len(),
                                0,
                            ],
                        ));
                    }
                }
            }
            for (mi, rank) in ranks {
                let rank: Rank = (
                    host_rank,
                    rank,
                    Reverse(route.created.clone()),
                    Reverse(name.clone()),
                    Reverse(ri),
                    Reverse(mi),
                );
                if best.as_ref().is_none_or(|(b, _, _)| rank > *b) {
                    best = Some((rank, r, ri));
                }
            }
        }
    }
    let Some((_, r, ri)) = best else {
        return not_found;
    };
    let state = &model.routes[r];
    let rule = &state.route.rules[ri];
    let mut headers = request.headers.clone();
    for filter in &rule.filters {
        if let Some(answer) = redirect(filter, request, &host) {
            return answer;
        }
        apply_modifier(&mut headers, filter);
    }
    let internal_error = Routed::Respond {
        status: 500,
        headers: Vec::new(),
    };
    let Some(b) = pick(&rule.backends, seed) else {
        return internal_error;
    };
    if state.backends[ri][b] != BackendVerdict::Resolved {
        return internal_error;
    }
    let backend = &rule.backends[b];
    for filter in &backend.filters {
        apply_modifier(&mut headers, filter);
    }
    Routed::Forward(Box::new(Forward {
        gateway: gateway.key.clone(),
        listener: listener.name.clone(),
        route: (state.route.kind, state.route.key.clone()),
        rule: ri,
        backend: Backend {
            group: backend.group.clone(),
            kind: backend.kind.clone(),
            namespace: backend.namespace.clone(),
            name: backend.name.clone(),
            port: backend.port,
        },
        host,
        method: request.method.clone(),
        path: request.path.clone(),
        headers,
    }))
}

#[cfg(test)]
mod tests;
