//! Multus's pod annotations: the `k8s.v1.cni.cncf.io/networks` selection a pod makes (both
//! forms: comma-separated `[namespace/]name[@interface]`, or a JSON list of
//! NetworkSelectionElements) parsed as Multus's `parsePodNetworkAnnotation` parses it, and the
//! `k8s.v1.cni.cncf.io/network-status` a runtime writes back (name, interface, ips, mac,
//! default, dns), with the MAC a bridge-style plugin derives from the address. Also the
//! published CustomResourceDefinitions of NetworkAttachmentDefinition (`k8s.cni.cncf.io/v1`)
//! and MultiNetworkPolicy (`k8s.cni.cncf.io/v1beta1`), bundled as `tessera up` serves them.
//!
//! Pure parsing and formatting; knows nothing about NetworkAttachmentDefinitions, the
//! topology's networks or who hands out addresses.

use crate::json::Pointer as _;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The annotation a pod selects secondary networks with.
pub const NETWORKS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";
/// The annotation the runtime reports the pod's attachments in.
pub const NETWORK_STATUS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/network-status";
/// The annotation tying a MultiNetworkPolicy to NetworkAttachmentDefinitions.
pub const POLICY_FOR_ANNOTATION: &str = "k8s.v1.cni.cncf.io/policy-for";
/// The group of NetworkAttachmentDefinitions and MultiNetworkPolicies.
pub const GROUP: &str = "k8s.cni.cncf.io";

const PUBLISHED: [&str; 2] = [
    include_str!("../data/crd-network-attachment-definitions.json"),
    include_str!("../data/crd-multi-networkpolicies.json"),
];

/// The NetworkAttachmentDefinition and MultiNetworkPolicy definitions, bundled.
pub fn definitions() -> Vec<Value> {
    crate::provisioning::bundle(&PUBLISHED)
}

/// The longest interface name Linux takes (`IFNAMSIZ - 1`).
const MAX_INTERFACE: usize = 15;

/// One network a pod asks for (Multus's NetworkSelectionElement, the fields Tessera reads).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct NetworkSelection {
    /// The NetworkAttachmentDefinition's name.
    pub name: String,
    /// Its namespace (the pod's when not given).
    #[serde(default)]
    pub namespace: String,
    /// The interface name asked for (`net1`, …, when not given).
    #[serde(
        default,
        rename = "interface",
        skip_serializing_if = "String::is_empty"
    )]
    pub interface: String,
    /// Addresses asked for.
    #[serde(default, rename = "ips", skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<String>,
    /// A MAC address asked for.
    #[serde(default, rename = "mac", skip_serializing_if = "String::is_empty")]
    pub mac: String,
}

/// Why a networks annotation does not parse; the messages are Multus's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    /// The annotation is empty.
    #[error("parsePodNetworkAnnotation: pod annotation does not have \"network\" as key")]
    Empty,
    /// The JSON form does not decode.
    #[error(
        "parsePodNetworkAnnotation: failed to parse pod Network Attachment Selection Annotation JSON format: {0}"
    )]
    Json(String),
    /// More than one `/` in an item.
    #[error(
        "parsePodNetworkAnnotation: parsePodNetworkObjectName: Invalid network object (failed at '/')"
    )]
    Slash,
    /// More than one `@` in an item.
    #[error(
        "parsePodNetworkAnnotation: parsePodNetworkObjectName: Invalid network object (failed at '@')"
    )]
    At,
    /// A name or namespace that is not a DNS-1123 label.
    #[error(
        "parsePodNetworkAnnotation: parsePodNetworkObjectName: Failed to parse: one or more items did not match comma-delimited format (must consist of lower case alphanumeric characters). Must start and end with an alphanumeric character), mismatch @ '{0}'"
    )]
    Name(String),
    /// An interface name Linux would refuse.
    #[error(
        "parsePodNetworkAnnotation: parsePodNetworkObjectName: Failed to parse interface name: must be less than 15 chars and not contain '/' or spaces. interface name '{0}'"
    )]
    Interface(String),
    /// A requested MAC address that does not parse.
    #[error("parsePodNetworkAnnotation: failed to mac: address {0}: invalid MAC address")]
    Mac(String),
    /// A requested address that does not parse.
    #[error("failed to parse IP address {0:?}")]
    Ip(String),
}

fn is_dns_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes.iter().all(|b| edge(b) || *b == b'-')
}

fn is_mac(text: &str) -> bool {
    let parts: Vec<&str> = text.split([':', '-']).collect();
    matches!(parts.len(), 6 | 8 | 20)
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn is_ip(text: &str) -> bool {
    match text.split_once('/') {
        Some((address, prefix)) => {
            let max = if address.contains(':') { 128 } else { 32 };
            address.parse::<std::net::IpAddr>().is_ok()
                && prefix.parse::<u8>().is_ok_and(|p| p <= max)
        }
        None => text.parse::<std::net::IpAddr>().is_ok(),
    }
}

/// One `[namespace/]name[@interface]` item.
fn parse_item(item: &str) -> Result<NetworkSelection, SelectionError> {
    let slash: Vec<&str> = item.split('/').collect();
    let (namespace, rest) = match slash.as_slice() {
        [name] => ("", *name),
        [namespace, name] => (namespace.trim(), *name),
        _ => return Err(SelectionError::Slash),
    };
    let at: Vec<&str> = rest.split('@').collect();
    let (name, interface) = match at.as_slice() {
        [name] => (name.trim(), ""),
        [name, interface] => (name.trim(), interface.trim()),
        _ => return Err(SelectionError::At),
    };
    for part in [namespace, name] {
        if !part.is_empty() && !is_dns_label(part) {
            return Err(SelectionError::Name(part.to_string()));
        }
    }
    if interface.len() > MAX_INTERFACE
        || interface.contains(|c: char| c == '/' || c.is_ascii_whitespace())
    {
        return Err(SelectionError::Interface(interface.to_string()));
    }
    Ok(NetworkSelection {
        name: name.to_string(),
        namespace: namespace.to_string(),
        interface: interface.to_string(),
        ips: Vec::new(),
        mac: String::new(),
    })
}

/// The networks a pod in `namespace` selects with `annotation`, in order, each with its
/// namespace filled in.
pub fn parse_networks(
    annotation: &str,
    namespace: &str,
) -> Result<Vec<NetworkSelection>, SelectionError> {
    if annotation.is_empty() {
        return Err(SelectionError::Empty);
    }
    let mut networks: Vec<NetworkSelection> = if annotation.contains(['[', '{', '"']) {
        serde_json::from_str(annotation).map_err(|e| SelectionError::Json(e.to_string()))?
    } else {
        annotation
            .split(',')
            .map(|item| parse_item(item.trim()))
            .collect::<Result<_, _>>()?
    };
    for network in &mut networks {
        if network.namespace.is_empty() {
            network.namespace = namespace.to_string();
        }
        if !network.mac.is_empty() && !is_mac(&network.mac) {
            return Err(SelectionError::Mac(network.mac.clone()));
        }
        if let Some(ip) = network.ips.iter().find(|ip| !is_ip(ip)) {
            return Err(SelectionError::Ip(ip.clone()));
        }
    }
    Ok(networks)
}

/// One attachment of a pod as the network-status annotation reports it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct NetworkStatus {
    /// The network: the cluster network's name, or `namespace/name` of a
    /// NetworkAttachmentDefinition.
    pub name: String,
    /// The interface in the pod.
    pub interface: String,
    /// Its addresses.
    pub ips: Vec<String>,
    /// Its MAC address.
    pub mac: String,
    /// Whether it is the pod's default network.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub default: bool,
    /// DNS settings (none for the simulated attachments).
    #[serde(default)]
    pub dns: serde_json::Map<String, serde_json::Value>,
}

/// A pod's attachments as its network-status annotation reports them; none when it has no
/// such annotation or one that does not parse.
pub fn network_statuses(pod: &Value) -> Vec<NetworkStatus> {
    pod.at("/metadata/annotations")
        .and_then(|a| a.get(NETWORK_STATUS_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// An address of a network-status entry without its prefix length (`172.17.2.2/24`).
pub fn status_address(ip: &str) -> &str {
    ip.split('/').next().unwrap_or_default()
}

/// The MAC a bridge-style CNI plugin derives from an IPv4 address: `0a:58:` and its bytes.
pub fn mac_for(address: Ipv4Addr) -> String {
    let [a, b, c, d] = address.octets();
    format!("0a:58:{a:02x}:{b:02x}:{c:02x}:{d:02x}")
}

/// An attachment on `address` named `name` at `interface`.
pub fn status(name: &str, interface: &str, address: Ipv4Addr, default: bool) -> NetworkStatus {
    NetworkStatus {
        name: name.to_string(),
        interface: interface.to_string(),
        ips: vec![address.to_string()],
        mac: mac_for(address),
        default,
        dns: serde_json::Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn selection(namespace: &str, name: &str, interface: &str) -> NetworkSelection {
        NetworkSelection {
            name: name.into(),
            namespace: namespace.into(),
            interface: interface.into(),
            ips: Vec::new(),
            mac: String::new(),
        }
    }

    #[test]
    fn both_forms_parse_as_multus_parses_them() {
        let ok = |list: &[(&str, &str, &str)]| {
            Ok(list
                .iter()
                .map(|(ns, name, interface)| selection(ns, name, interface))
                .collect::<Vec<_>>())
        };
        let cases: Vec<(&str, Result<Vec<NetworkSelection>, SelectionError>)> = vec![
            ("storage", ok(&[("ml", "storage", "")])),
            (
                "storage, infra/hpn@ib0",
                ok(&[("ml", "storage", ""), ("infra", "hpn", "ib0")]),
            ),
            ("hpn@net1 ", ok(&[("ml", "hpn", "net1")])),
            (
                r#"[{"name":"hpn","namespace":"x","interface":"net1"}]"#,
                ok(&[("x", "hpn", "net1")]),
            ),
            (
                r#"[{"name":"storage","ips":["172.17.0.9/16"],"mac":"0a:58:ac:11:00:09","default-route":["172.17.0.1"]}]"#,
                Ok(vec![NetworkSelection {
                    ips: vec!["172.17.0.9/16".into()],
                    mac: "0a:58:ac:11:00:09".into(),
                    ..selection("ml", "storage", "")
                }]),
            ),
            ("", Err(SelectionError::Empty)),
            ("a/b/c", Err(SelectionError::Slash)),
            ("net@a@b", Err(SelectionError::At)),
            ("Storage", Err(SelectionError::Name("Storage".into()))),
            // An empty trailing item is an empty name: Multus's check skips empty items, and
            // the attachment is later not found.
            ("storage,", ok(&[("ml", "storage", ""), ("ml", "", "")])),
            (
                "hpn@averyveryverylongname",
                Err(SelectionError::Interface("averyveryverylongname".into())),
            ),
            (
                r#"[{"name":"hpn","mac":"zz:58:ac:11:00:09"}]"#,
                Err(SelectionError::Mac("zz:58:ac:11:00:09".into())),
            ),
            (
                r#"[{"name":"hpn","ips":["172.17.0.300"]}]"#,
                Err(SelectionError::Ip("172.17.0.300".into())),
            ),
            (
                r#"[{"name":"hpn"}"#,
                Err(SelectionError::Json(
                    "EOF while parsing a list at line 1 column 15".into(),
                )),
            ),
            (
                r#"{"name":"hpn"}"#,
                Err(SelectionError::Json(
                    "invalid type: map, expected a sequence at line 1 column 0".into(),
                )),
            ),
        ];
        for (annotation, want) in cases {
            let got = parse_networks(annotation, "ml");
            assert_eq!(got, want, "{annotation:?}");
        }
    }

    #[test]
    fn errors_read_as_multus_writes_them() {
        let message = parse_networks("a/b/c", "ml")
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            "parsePodNetworkAnnotation: parsePodNetworkObjectName: Invalid network object (failed at '/')"
        );
    }

    #[test]
    fn network_status_is_multus_json() {
        let statuses = vec![
            status(
                "tessera-pod-network",
                "eth0",
                Ipv4Addr::new(10, 244, 1, 5),
                true,
            ),
            status("ml/hpn", "net1", Ipv4Addr::new(172, 30, 1, 5), false),
        ];
        let json = serde_json::to_value(&statuses).expect("json");
        assert_eq!(
            json,
            serde_json::json!([
                {"name": "tessera-pod-network", "interface": "eth0", "ips": ["10.244.1.5"],
                 "mac": "0a:58:0a:f4:01:05", "default": true, "dns": {}},
                {"name": "ml/hpn", "interface": "net1", "ips": ["172.30.1.5"],
                 "mac": "0a:58:ac:1e:01:05", "dns": {}},
            ])
        );
    }

    #[test]
    fn both_published_definitions_are_bundled() {
        let served: Vec<(String, Vec<String>)> = definitions()
            .iter()
            .map(|crd| {
                let versions = crd["spec"]["versions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|v| v["served"] == true)
                    .filter_map(|v| v["name"].as_str().map(str::to_string))
                    .collect();
                (
                    crd["metadata"]["name"].as_str().unwrap_or_default().into(),
                    versions,
                )
            })
            .collect();
        assert_eq!(
            served,
            vec![
                (
                    "network-attachment-definitions.k8s.cni.cncf.io".to_string(),
                    vec!["v1".to_string()]
                ),
                (
                    "multi-networkpolicies.k8s.cni.cncf.io".to_string(),
                    vec!["v1beta1".to_string()]
                ),
            ]
        );
    }

    proptest! {
        #[test]
        fn any_annotation_parses_or_errs_without_panicking(text in "\\PC{0,64}") {
            let _ = parse_networks(&text, "ml");
        }

        #[test]
        fn valid_names_round_trip(
            items in proptest::collection::vec(
                ("[a-z][a-z0-9-]{0,8}[a-z0-9]", "[a-z][a-z0-9]{0,5}", "[a-z][a-z0-9]{0,10}"),
                1..4,
            )
        ) {
            let text: Vec<String> = items
                .iter()
                .map(|(ns, name, interface)| format!("{ns}/{name}@{interface}"))
                .collect();
            let parsed = parse_networks(&text.join(","), "ml").expect("parses");
            let got: Vec<(String, String, String)> = parsed
                .into_iter()
                .map(|n| (n.namespace, n.name, n.interface))
                .collect();
            let want: Vec<(String, String, String)> = items
                .iter()
                .map(|(a, b, c)| (a.clone(), b.clone(), c.clone()))
                .collect();
            prop_assert_eq!(got, want);
        }
    }
}
