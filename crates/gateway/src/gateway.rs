//! GatewayClasses and Gateways: which classes name Tessera's controller and whether they are
//! accepted, each Gateway's listeners (protocol, route kinds, conflicts with each other) and
//! the address each Gateway gets from the pool.
//!
//! Classes naming another controller are not Tessera's: they and their Gateways are left out
//! of the model entirely, so nothing here ever writes their status. Routes and their
//! attachment are [`crate::attach`]'s.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use serde_json::Value;
use tessera_model::json::text;
use tessera_model::net::Ipv4Cidr;

use crate::objects::{Key, RouteKind, generation, key};
use crate::{CONTROLLER_NAME, GROUP};

/// A GatewayClass of Tessera's controller and what was decided about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassVerdict {
    /// The class's name.
    pub name: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// `Ok` when accepted; otherwise the `Accepted=False` reason and message.
    pub accepted: Result<(), (&'static str, String)>,
}

/// Which classes are Tessera's, and whether each is accepted. A class with a
/// `parametersRef` is refused (`InvalidParameters`): Tessera's classes take no parameters.
pub fn classes(objects: &[Value]) -> Vec<ClassVerdict> {
    objects
        .iter()
        .filter(|c| text(c, "/spec/controllerName") == CONTROLLER_NAME)
        .map(|c| ClassVerdict {
            name: text(c, "/metadata/name").to_string(),
            generation: generation(c),
            accepted: match c.pointer("/spec/parametersRef") {
                Some(p) if !p.is_null() => Err((
                    "InvalidParameters",
                    format!(
                        "spec.parametersRef: {}/{} {:?} is not supported: {CONTROLLER_NAME} takes no parameters",
                        text(p, "/group"),
                        text(p, "/kind"),
                        text(p, "/name")
                    ),
                )),
                _ => Ok(()),
            },
        })
        .collect()
}

/// A route kind as a listener's status lists it.
pub fn kind_entry(kind: RouteKind) -> Value {
    serde_json::json!({"group": GROUP, "kind": kind.name()})
}

/// A listener and what was decided about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerState {
    /// `name`.
    pub name: String,
    /// `hostname`, lower case.
    pub hostname: Option<String>,
    /// `port`.
    pub port: u16,
    /// `protocol`.
    pub protocol: String,
    /// The listener's `allowedRoutes`, as written.
    pub allowed_routes: Value,
    /// The route kinds it supports (its `allowedRoutes.kinds` that Tessera serves).
    pub kinds: Vec<RouteKind>,
    /// `allowedRoutes.kinds` named a kind Tessera cannot serve on this protocol.
    pub invalid_kinds: Vec<String>,
    /// `Accepted=False`: the reason and message (unsupported protocol).
    pub unsupported: Option<(&'static str, String)>,
    /// `Conflicted=True`: the reason and message.
    pub conflict: Option<(&'static str, String)>,
    /// Routes attached (counted by [`crate::attach`]).
    pub attached_routes: u32,
}

impl ListenerState {
    /// Whether routes may attach: accepted and not conflicted.
    pub fn usable(&self) -> bool {
        self.unsupported.is_none() && self.conflict.is_none()
    }
}

/// A Gateway of a Tessera class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayState {
    /// Namespace and name.
    pub key: Key,
    /// `metadata.generation`.
    pub generation: i64,
    /// `spec.gatewayClassName`.
    pub class: String,
    /// Whether the class is accepted.
    pub class_accepted: bool,
    /// The listeners, in spec order.
    pub listeners: Vec<ListenerState>,
    /// The address it got; `None` when the pool is spent or a requested one is unusable.
    pub address: Option<Ipv4Addr>,
    /// Why there is no address (`Programmed=False` reason and message).
    pub address_problem: Option<(&'static str, String)>,
}

impl GatewayState {
    /// Whether some listener takes routes and the Gateway has an address.
    pub fn programmed(&self) -> bool {
        self.class_accepted
            && self.address.is_some()
            && self.listeners.iter().any(ListenerState::usable)
    }
}

/// The route kinds a protocol can carry.
fn protocol_kinds(protocol: &str) -> Option<&'static [RouteKind]> {
    match protocol {
        "HTTP" | "HTTPS" => Some(&[RouteKind::Http, RouteKind::Grpc]),
        _ => None,
    }
}

fn listener(raw: &Value) -> ListenerState {
    let protocol = text(raw, "/protocol").to_string();
    let hostname = Some(text(raw, "/hostname").to_ascii_lowercase()).filter(|h| !h.is_empty());
    let mut kinds = Vec::new();
    let mut invalid_kinds = Vec::new();
    let unsupported = match protocol_kinds(&protocol) {
        None => Some((
            "UnsupportedProtocol",
            format!(
                "protocol {protocol:?} is not supported by {CONTROLLER_NAME} (supported: HTTP, HTTPS)"
            ),
        )),
        Some(supported) => {
            let asked = raw
                .pointer("/allowedRoutes/kinds")
                .and_then(Value::as_array)
                .filter(|k| !k.is_empty());
            match asked {
                None => kinds.extend_from_slice(supported),
                Some(asked) => {
                    for kind in asked {
                        let group = kind.get("group").and_then(Value::as_str).unwrap_or(GROUP);
                        let name = text(kind, "/kind");
                        match RouteKind::parse(group, name) {
                            Some(k) if supported.contains(&k) => {
                                if !kinds.contains(&k) {
                                    kinds.push(k);
                                }
                            }
                            _ => invalid_kinds.push(if group.is_empty() {
                                name.to_string()
                            } else {
                                format!("{group}/{name}")
                            }),
                        }
                    }
                }
            }
            None
        }
    };
    ListenerState {
        name: text(raw, "/name").to_string(),
        hostname,
        port: raw
            .get("port")
            .and_then(Value::as_u64)
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(0),
        protocol,
        allowed_routes: raw.get("allowedRoutes").cloned().unwrap_or(Value::Null),
        kinds,
        invalid_kinds,
        unsupported,
        conflict: None,
        attached_routes: 0,
    }
}

/// Marks listeners that are not distinct: on one port, protocols that cannot share it
/// (`ProtocolConflict`: HTTP beside HTTPS, say), or the same protocol and hostname twice
/// (`HostnameConflict`).
pub fn mark_conflicts(listeners: &mut [ListenerState]) {
    let n = listeners.len();
    for i in 0..n {
        for j in 0..n {
            if i == j || listeners[i].port != listeners[j].port {
                continue;
            }
            let (a, b) = (&listeners[i], &listeners[j]);
            let conflict = if a.protocol != b.protocol {
                Some((
                    "ProtocolConflict",
                    format!(
                        "listeners {:?} and {:?} use port {} with different protocols ({} and {})",
                        a.name, b.name, a.port, a.protocol, b.protocol
                    ),
                ))
            } else if a.hostname == b.hostname {
                Some((
                    "HostnameConflict",
                    format!(
                        "listeners {:?} and {:?} use port {} and protocol {} with the same hostname {}",
                        a.name,
                        b.name,
                        a.port,
                        a.protocol,
                        a.hostname
                            .as_deref()
                            .map_or("(any)".to_string(), |h| format!("{h:?}"))
                    ),
                ))
            } else {
                None
            };
            // A protocol conflict outranks a hostname one.
            if let Some(conflict) = conflict
                && listeners[i]
                    .conflict
                    .as_ref()
                    .is_none_or(|c| c.0 != "ProtocolConflict")
            {
                listeners[i].conflict = Some(conflict);
            }
        }
    }
}

/// The IPv4 addresses a Gateway asks for in `spec.addresses` (type `IPAddress`, the
/// default); `Err` names a request Tessera cannot honour.
fn requested_addresses(gateway: &Value) -> Result<Vec<Ipv4Addr>, String> {
    let mut out = Vec::new();
    for (i, address) in gateway
        .pointer("/spec/addresses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let kind = text(address, "/type");
        let value = text(address, "/value");
        if !kind.is_empty() && kind != "IPAddress" {
            return Err(format!(
                "spec.addresses[{i}].type: Unsupported value: {kind:?}: supported values: \"IPAddress\""
            ));
        }
        match value.parse() {
            Ok(ip) => out.push(ip),
            Err(_) => {
                return Err(format!(
                    "spec.addresses[{i}].value: Invalid value: {value:?}: not an IPv4 address"
                ));
            }
        }
    }
    Ok(out)
}

/// The Gateways of Tessera's classes, with listeners decided and addresses assigned: a
/// requested address is used when free; otherwise a Gateway keeps the address its status
/// already shows when it is free and in the pool, and the rest get the lowest free ones,
/// oldest Gateway first.
pub fn gateways(classes: &[ClassVerdict], objects: &[Value], pool: Ipv4Cidr) -> Vec<GatewayState> {
    let mut ours: Vec<&Value> = objects
        .iter()
        .filter(|g| {
            let class = text(g, "/spec/gatewayClassName");
            classes.iter().any(|c| c.name == class)
        })
        .collect();
    ours.sort_by(|a, b| {
        text(a, "/metadata/creationTimestamp")
            .cmp(text(b, "/metadata/creationTimestamp"))
            .then_with(|| key(a).cmp(&key(b)))
    });
    let mut taken: BTreeSet<Ipv4Addr> = BTreeSet::new();
    let mut states: Vec<GatewayState> = Vec::new();
    let mut wanting: Vec<usize> = Vec::new();
    let mut requested: Vec<Result<Vec<Ipv4Addr>, String>> = Vec::new();
    for gateway in &ours {
        let class = text(gateway, "/spec/gatewayClassName").to_string();
        let class_accepted = classes
            .iter()
            .any(|c| c.name == class && c.accepted.is_ok());
        let mut listeners: Vec<ListenerState> = gateway
            .pointer("/spec/listeners")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(listener)
            .collect();
        mark_conflicts(&mut listeners);
        states.push(GatewayState {
            key: key(gateway),
            generation: generation(gateway),
            class,
            class_accepted,
            listeners,
            address: None,
            address_problem: None,
        });
        requested.push(requested_addresses(gateway));
    }
    // Requested addresses first, then the ones statuses show, then the pool's lowest.
    for (i, want) in requested.iter().enumerate() {
        match want {
            Err(message) => {
                states[i].address_problem = Some(("AddressNotUsable", message.clone()));
            }
            Ok(addresses) if !addresses.is_empty() => {
                match addresses.iter().find(|a| !taken.contains(a)) {
                    Some(address) => {
                        taken.insert(*address);
                        states[i].address = Some(*address);
                    }
                    None => {
                        states[i].address_problem = Some((
                            "AddressNotUsable",
                            "every address in spec.addresses is held by another Gateway"
                                .to_string(),
                        ));
                    }
                }
            }
            Ok(_) => wanting.push(i),
        }
    }
    let mut rest = Vec::new();
    for i in wanting {
        let shown = ours[i]
            .pointer("/status/addresses/0/value")
            .and_then(Value::as_str)
            .and_then(|a| a.parse::<Ipv4Addr>().ok())
            .filter(|a| pool.contains(*a) && !taken.contains(a));
        match shown {
            Some(address) => {
                taken.insert(address);
                states[i].address = Some(address);
            }
            None => rest.push(i),
        }
    }
    // The pool's usable addresses: skip the network address, as allocators do.
    let mut offset: u32 = 1;
    for i in rest {
        let mut found = None;
        while u64::from(offset) < pool.size() {
            let candidate = pool.address(offset);
            offset += 1;
            if !taken.contains(&candidate) {
                found = Some(candidate);
                break;
            }
        }
        match found {
            Some(address) => {
                taken.insert(address);
                states[i].address = Some(address);
            }
            None => {
                states[i].address_problem = Some((
                    "AddressNotAssigned",
                    format!("no address is left in the Gateway address pool {pool}"),
                ));
            }
        }
    }
    states
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn class(name: &str, controller: &str) -> Value {
        json!({"metadata": {"name": name, "generation": 1},
               "spec": {"controllerName": controller}})
    }

    #[test]
    fn only_tessera_classes_are_decided() {
        let mut with_params = class("params", CONTROLLER_NAME);
        with_params["spec"]["parametersRef"] =
            json!({"group": "example.com", "kind": "Config", "name": "x"});
        let verdicts = classes(&[
            class("mine", CONTROLLER_NAME),
            class("theirs", "example.com/other"),
            with_params,
        ]);
        assert_eq!(verdicts.len(), 2);
        assert_eq!(verdicts[0].name, "mine");
        assert_eq!(verdicts[0].accepted, Ok(()));
        assert_eq!(
            verdicts[1].accepted.as_ref().err().map(|e| e.0),
            Some("InvalidParameters")
        );
    }

    fn listeners(spec: Value) -> Vec<ListenerState> {
        let mut out: Vec<ListenerState> = spec
            .as_array()
            .into_iter()
            .flatten()
            .map(listener)
            .collect();
        mark_conflicts(&mut out);
        out
    }

    #[test]
    fn listeners_are_validated_and_conflicts_marked() {
        // (listeners, per listener: (usable, Accepted reason if not, Conflicted reason))
        type Want = Vec<(bool, Option<&'static str>, Option<&'static str>)>;
        let table: Vec<(Value, Want)> = vec![
            (
                json!([{"name": "a", "port": 80, "protocol": "HTTP"}]),
                vec![(true, None, None)],
            ),
            (
                json!([{"name": "a", "port": 80, "protocol": "TCP"}]),
                vec![(false, Some("UnsupportedProtocol"), None)],
            ),
            (
                json!([{"name": "a", "port": 80, "protocol": "HTTP"},
                       {"name": "b", "port": 80, "protocol": "HTTPS"}]),
                vec![
                    (false, None, Some("ProtocolConflict")),
                    (false, None, Some("ProtocolConflict")),
                ],
            ),
            (
                json!([{"name": "a", "port": 80, "protocol": "HTTP", "hostname": "x.com"},
                       {"name": "b", "port": 80, "protocol": "HTTP", "hostname": "X.com"},
                       {"name": "c", "port": 80, "protocol": "HTTP", "hostname": "y.com"},
                       {"name": "d", "port": 8080, "protocol": "HTTP", "hostname": "x.com"}]),
                vec![
                    (false, None, Some("HostnameConflict")),
                    (false, None, Some("HostnameConflict")),
                    (true, None, None),
                    (true, None, None),
                ],
            ),
            (
                json!([{"name": "a", "port": 80, "protocol": "HTTP"},
                       {"name": "b", "port": 80, "protocol": "HTTP"},
                       {"name": "c", "port": 80, "protocol": "HTTPS", "hostname": "z.com"}]),
                vec![
                    (false, None, Some("ProtocolConflict")),
                    (false, None, Some("ProtocolConflict")),
                    (false, None, Some("ProtocolConflict")),
                ],
            ),
        ];
        for (spec, want) in table {
            let got = listeners(spec.clone());
            let got: Want = got
                .iter()
                .map(|l| {
                    (
                        l.usable(),
                        l.unsupported.as_ref().map(|u| u.0),
                        l.conflict.as_ref().map(|c| c.0),
                    )
                })
                .collect();
            assert_eq!(got, want, "{spec}");
        }
    }

    #[test]
    fn supported_kinds_follow_allowed_routes() {
        let got = listeners(json!([
            {"name": "all", "port": 80, "protocol": "HTTP"},
            {"name": "http-only", "port": 81, "protocol": "HTTP",
             "allowedRoutes": {"kinds": [{"kind": "HTTPRoute"}]}},
            {"name": "bad", "port": 82, "protocol": "HTTP",
             "allowedRoutes": {"kinds": [{"kind": "TCPRoute"}, {"group": "", "kind": "Service"},
                                         {"kind": "GRPCRoute"}]}},
        ]));
        assert_eq!(got[0].kinds, [RouteKind::Http, RouteKind::Grpc]);
        assert_eq!(got[1].kinds, [RouteKind::Http]);
        assert_eq!(got[2].kinds, [RouteKind::Grpc]);
        assert_eq!(
            got[2].invalid_kinds,
            [format!("{GROUP}/TCPRoute"), "Service".to_string()]
        );
    }

    #[test]
    fn addresses_are_requested_kept_or_the_lowest_free() {
        let verdicts = classes(&[class("mine", CONTROLLER_NAME)]);
        let gw = |name: &str, created: &str, extra: Value| {
            let mut g = json!({"metadata": {"namespace": "ns", "name": name,
                    "creationTimestamp": created},
                "spec": {"gatewayClassName": "mine",
                    "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}});
            if let Some(extra) = extra.as_object() {
                for (k, v) in extra {
                    if k == "status" {
                        g["status"] = v.clone();
                    } else {
                        g["spec"][k] = v.clone();
                    }
                }
            }
            g
        };
        let pool: Ipv4Cidr = "172.18.255.0/30".parse().expect("pool");
        let objects = vec![
            gw("b", "2026-01-02T00:00:00Z", json!({})),
            gw("a", "2026-01-01T00:00:00Z", json!({})),
            gw(
                "kept",
                "2026-01-03T00:00:00Z",
                json!({"status": {"addresses": [{"type": "IPAddress", "value": "172.18.255.1"}]}}),
            ),
            gw(
                "asks",
                "2026-01-04T00:00:00Z",
                json!({"addresses": [{"type": "IPAddress", "value": "10.1.2.3"}]}),
            ),
            gw(
                "bad",
                "2026-01-05T00:00:00Z",
                json!({"addresses": [{"type": "Hostname", "value": "x.example.com"}]}),
            ),
            gw(
                "other-class",
                "2026-01-01T00:00:00Z",
                json!({"gatewayClassName": "theirs"}),
            ),
            gw("late", "2026-01-06T00:00:00Z", json!({})),
        ];
        let states = gateways(&verdicts, &objects, pool);
        let got: Vec<(String, Option<String>, Option<&str>)> = states
            .iter()
            .map(|s| {
                (
                    s.key.1.clone(),
                    s.address.map(|a| a.to_string()),
                    s.address_problem.as_ref().map(|p| p.0),
                )
            })
            .collect();
        let want = vec![
            ("a".to_string(), Some("172.18.255.2".to_string()), None),
            ("b".to_string(), Some("172.18.255.3".to_string()), None),
            ("kept".to_string(), Some("172.18.255.1".to_string()), None),
            ("asks".to_string(), Some("10.1.2.3".to_string()), None),
            ("bad".to_string(), None, Some("AddressNotUsable")),
            ("late".to_string(), None, Some("AddressNotAssigned")),
        ];
        assert_eq!(got, want);
        assert!(states[0].programmed());
        assert!(!states[5].programmed());
    }
}
