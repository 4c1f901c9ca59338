//! What the node's runtime (Multus in front of the cluster network) attaches a starting pod
//! to: the cluster network on `eth0`, and each NetworkAttachmentDefinition the pod's
//! `k8s.v1.cni.cncf.io/networks` annotation selects on `net1`, `net2`, … (or the interface
//! asked for), with an address on the topology network the definition's CNI config names
//! (`"name"`), carried by one of the node's NICs. The result is the
//! `k8s.v1.cni.cncf.io/network-status` annotation; a definition that does not exist fails as
//! Multus reports it (event reason `NoNetworkFound`).
//!
//! Pure; the twin fetches the definitions, posts the event and patches the annotation.
//! Knows nothing about policies.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Pod;
use tessera_model::multus::{
    self, NETWORKS_ANNOTATION, NetworkSelection, NetworkStatus, SelectionError,
};

use crate::networks::secondary_address;
use crate::topology::NodeSpec;

/// The name the cluster network has in network-status.
pub const CLUSTER_NETWORK: &str = "tessera-pod-network";
/// The event reason Multus posts when a definition is missing.
pub const NO_NETWORK_FOUND: &str = "NoNetworkFound";

/// Why a pod cannot be attached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachError {
    /// The networks annotation does not parse.
    #[error("{0}")]
    Annotation(#[from] SelectionError),
    /// A selected NetworkAttachmentDefinition does not exist (Multus's message).
    #[error(
        "cannot find a network-attachment-definition ({name}) in namespace ({namespace}): network-attachment-definitions.k8s.cni.cncf.io \"{name}\" not found"
    )]
    NoNetworkFound {
        /// The definition's namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The definition's CNI config names no network this node carries.
    #[error(
        "network-attachment-definition {namespace}/{name}: node {node} has no NIC on network {network:?}"
    )]
    NotCarried {
        /// The definition's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The node.
        node: String,
        /// The network its config names.
        network: String,
    },
}

/// The networks `pod` selects (empty when it has no annotation).
pub fn selections(pod: &Pod) -> Result<Vec<NetworkSelection>, AttachError> {
    let Some(annotation) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NETWORKS_ANNOTATION))
    else {
        return Ok(Vec::new());
    };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    Ok(multus::parse_networks(annotation, namespace)?)
}

/// The topology network a definition's CNI config (JSON text) names: its `name`, or the
/// definition's own name when the config has none.
fn configured_network(config: &str, definition: &str) -> String {
    serde_json::from_str::<serde_json::Value>(config)
        .ok()
        .and_then(|c| c.get("name")?.as_str().map(str::to_string))
        .unwrap_or_else(|| definition.to_string())
}

/// The network-status of `pod` on `node` with pod IP `pod_ip`; `definitions` holds the CNI
/// config of each existing definition the pod selects, by (namespace, name).
pub fn network_status(
    selected: &[NetworkSelection],
    node: &NodeSpec,
    pod_ip: &str,
    definitions: &BTreeMap<(String, String), String>,
) -> Result<Vec<NetworkStatus>, AttachError> {
    let ip: Ipv4Addr = pod_ip.parse().unwrap_or(Ipv4Addr::UNSPECIFIED);
    let octet = ip.octets()[3];
    let mut statuses = vec![multus::status(CLUSTER_NETWORK, "eth0", ip, true)];
    for (i, selection) in selected.iter().enumerate() {
        let key = (selection.namespace.clone(), selection.name.clone());
        let config = definitions
            .get(&key)
            .ok_or_else(|| AttachError::NoNetworkFound {
                namespace: key.0.clone(),
                name: key.1.clone(),
            })?;
        let network = configured_network(config, &selection.name);
        let not_carried = || AttachError::NotCarried {
            namespace: key.0.clone(),
            name: key.1.clone(),
            node: node.name.clone(),
            network: network.clone(),
        };
        if !node.nics.iter().any(|nic| nic.network == network) {
            return Err(not_carried());
        }
        let requested = selection
            .ips
            .first()
            .and_then(|ip| ip.split('/').next()?.parse::<Ipv4Addr>().ok());
        let address = match requested {
            Some(address) => address,
            None => {
                secondary_address(&node.networks, &network, node.index, octet)
                    .ok_or_else(not_carried)?
                    .0
            }
        };
        let interface = if selection.interface.is_empty() {
            format!("net{}", i + 1)
        } else {
            selection.interface.clone()
        };
        let name = format!("{}/{}", selection.namespace, selection.name);
        let mut status = multus::status(&name, &interface, address, false);
        if !selection.mac.is_empty() {
            status.mac = selection.mac.clone();
        }
        statuses.push(status);
    }
    Ok(statuses)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;
    use serde_json::json;

    const LAB: &str = include_str!("../../../examples/lab/networks/lab.yaml");

    fn node(name: &str) -> NodeSpec {
        Topology::parse(LAB)
            .expect("lab")
            .nodes()
            .into_iter()
            .find(|n| n.name == name)
            .expect("node")
    }

    fn pod(annotation: Option<&str>) -> Pod {
        let mut pod = json!({"metadata": {"namespace": "ml", "name": "p"}});
        if let Some(a) = annotation {
            pod["metadata"]["annotations"] = json!({NETWORKS_ANNOTATION: a});
        }
        serde_json::from_value(pod).expect("pod")
    }

    fn definitions() -> BTreeMap<(String, String), String> {
        [
            (
                "ml",
                "storage",
                r#"{"cniVersion":"0.3.1","type":"macvlan","name":"storage"}"#,
            ),
            (
                "infra",
                "hpn",
                r#"{"cniVersion":"0.3.1","type":"host-device","name":"hpn"}"#,
            ),
            (
                "ml",
                "fast",
                r#"{"cniVersion":"0.3.1","type":"host-device","name":"hpn"}"#,
            ),
            ("ml", "service", "not json"),
        ]
        .into_iter()
        .map(|(ns, name, config)| ((ns.into(), name.into()), config.into()))
        .collect()
    }

    /// (name, interface, ip) of each attachment.
    type Rows = Vec<(String, String, String)>;

    #[test]
    fn pods_get_an_address_on_each_selected_network() {
        let h200 = node("h200-1");
        let ip = h200.pod_ip(7);
        let third = ip.split('.').nth(2).unwrap_or_default().to_string();
        let row =
            |name: &str, interface: &str, ip: String| (name.to_string(), interface.to_string(), ip);
        let eth0 = row(CLUSTER_NETWORK, "eth0", ip.clone());
        let cases: Vec<(&str, Option<&str>, Result<Rows, String>)> = vec![
            ("no annotation", None, Ok(vec![eth0.clone()])),
            (
                "the name form",
                Some("storage"),
                Ok(vec![
                    eth0.clone(),
                    row("ml/storage", "net1", format!("172.17.{third}.7")),
                ]),
            ),
            (
                "the JSON form, across namespaces",
                Some(r#"[{"name":"hpn","namespace":"infra","interface":"ib0"},{"name":"fast"}]"#),
                Ok(vec![
                    eth0.clone(),
                    row("infra/hpn", "ib0", format!("172.30.{third}.7")),
                    row("ml/fast", "net2", format!("172.30.{third}.7")),
                ]),
            ),
            (
                "a requested address",
                Some(r#"[{"name":"storage","ips":["172.17.9.9/16"]}]"#),
                Ok(vec![eth0.clone(), row("ml/storage", "net1", "172.17.9.9".into())]),
            ),
            (
                "a missing definition",
                Some("storage,hpn"),
                Err("cannot find a network-attachment-definition (hpn) in namespace (ml): network-attachment-definitions.k8s.cni.cncf.io \"hpn\" not found".into()),
            ),
            (
                "a config naming no network of the node (falls back to the definition's name)",
                Some("service"),
                Ok(vec![
                    eth0.clone(),
                    row("ml/service", "net1", format!("172.16.{third}.7")),
                ]),
            ),
            (
                "a malformed annotation",
                Some("a/b/c"),
                Err("parsePodNetworkAnnotation: parsePodNetworkObjectName: Invalid network object (failed at '/')".into()),
            ),
        ];
        for (case, annotation, want) in cases {
            let got = selections(&pod(annotation))
                .and_then(|s| network_status(&s, &h200, &ip, &definitions()))
                .map(|statuses| {
                    statuses
                        .into_iter()
                        .map(|s| (s.name, s.interface, s.ips.join(",")))
                        .collect::<Rows>()
                })
                .map_err(|e| e.to_string());
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn a_node_without_a_nic_on_the_network_refuses_it() {
        let cpu = node("cpu-1");
        let selected = selections(&pod(Some("storage"))).expect("parses");
        let got = network_status(&selected, &cpu, &cpu.pod_ip(2), &definitions());
        assert_eq!(
            got.map_err(|e| e.to_string()),
            Err("network-attachment-definition ml/storage: node cpu-1 has no NIC on network \"storage\"".into())
        );
    }
}
