//! The cluster-wide policies of the network-policy-api project as serde types with upstream's
//! field names: AdminNetworkPolicy and BaselineAdminNetworkPolicy
//! (`policy.networking.k8s.io/v1alpha1`) and ClusterNetworkPolicy (`v1alpha2`). Only the
//! fields evaluation reads are typed; status and unknown fields are ignored. Knows nothing of
//! how they are evaluated (`compile.rs`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::{Deserialize, Serialize};

/// The API group of every kind here.
pub const GROUP: &str = "policy.networking.k8s.io";

/// `subject` (ANP, BANP, CNP): exactly one of `namespaces` or `pods`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    /// Every pod of the namespaces this selects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<LabelSelector>,
    /// The pods this selects in the namespaces it selects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<NamespacedPod>,
}

/// `pods`: a namespace selector AND a pod selector (empty selects all).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NamespacedPod {
    /// The namespaces.
    #[serde(default)]
    pub namespace_selector: LabelSelector,
    /// The pods within them.
    #[serde(default)]
    pub pod_selector: LabelSelector,
}

/// A peer of any rule (ANP/BANP/CNP ingress and egress peers share their fields; `nodes`,
/// `networks` and `domainNames` are egress-only upstream).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Peer {
    /// Every pod of these namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<LabelSelector>,
    /// Pods of namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<NamespacedPod>,
    /// Node IPs (not modelled: matches no pod and no address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<LabelSelector>,
    /// CIDR blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networks: Option<Vec<String>>,
    /// Domain names (not modelled: matches no pod and no address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_names: Option<Vec<String>>,
}

/// `v1alpha1` `portNumber`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortNumber {
    /// TCP (default), UDP or SCTP.
    #[serde(default = "tcp")]
    pub protocol: String,
    /// The port.
    pub port: i32,
}

/// `v1alpha1` `portRange`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortRange {
    /// TCP (default), UDP or SCTP.
    #[serde(default = "tcp")]
    pub protocol: String,
    /// First port.
    pub start: i32,
    /// Last port (inclusive).
    pub end: i32,
}

fn tcp() -> String {
    "TCP".to_string()
}

/// `v1alpha1` `AdminNetworkPolicyPort`: exactly one field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdminPort {
    /// One port of one protocol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_number: Option<PortNumber>,
    /// A container port of the destination pod, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub named_port: Option<String>,
    /// A range of ports of one protocol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_range: Option<PortRange>,
}

/// An ANP/BANP rule (`from` for ingress, `to` for egress).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdminRule {
    /// The rule's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `Allow`, `Deny` or `Pass` (ANP only).
    pub action: String,
    /// Ingress peers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<Peer>,
    /// Egress peers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<Peer>,
    /// Ports; absent = all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<AdminPort>>,
}

/// AdminNetworkPolicy's and BaselineAdminNetworkPolicy's spec (BANP has no priority).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdminSpec {
    /// 0–1000, lower first (ANP only).
    #[serde(default)]
    pub priority: i32,
    /// The pods the policy applies to.
    #[serde(default)]
    pub subject: Subject,
    /// Ingress rules, in precedence order.
    #[serde(default)]
    pub ingress: Vec<AdminRule>,
    /// Egress rules, in precedence order.
    #[serde(default)]
    pub egress: Vec<AdminRule>,
}

/// `AdminNetworkPolicy` (`policy.networking.k8s.io/v1alpha1`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AdminNetworkPolicy {
    /// Name (cluster-scoped).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Spec.
    #[serde(default)]
    pub spec: AdminSpec,
}

/// `BaselineAdminNetworkPolicy` (`policy.networking.k8s.io/v1alpha1`; the singleton `default`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BaselineAdminNetworkPolicy {
    /// Name (cluster-scoped).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Spec.
    #[serde(default)]
    pub spec: AdminSpec,
}

/// `v1alpha2` `destinationPort`: a number or a range.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DestinationPort {
    /// One port (0 = unset).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub number: i32,
    /// A range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<Range>,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// `v1alpha2` port range (inclusive).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Range {
    /// First port.
    pub start: i32,
    /// Last port.
    pub end: i32,
}

/// `v1alpha2` protocol-specific match (`tcp`, `udp`, `sctp`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProtocolPorts {
    /// Absent = every port of the protocol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_port: Option<DestinationPort>,
}

/// `v1alpha2` `ClusterNetworkPolicyProtocol`: exactly one field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProtocol {
    /// TCP matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<ProtocolPorts>,
    /// UDP matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<ProtocolPorts>,
    /// SCTP matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sctp: Option<ProtocolPorts>,
    /// A container port of the destination pod, by name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub destination_named_port: String,
}

/// A ClusterNetworkPolicy rule.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRule {
    /// The rule's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `Accept`, `Deny` or `Pass`.
    pub action: String,
    /// Ingress peers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<Peer>,
    /// Egress peers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<Peer>,
    /// Protocols; absent = all traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocols: Option<Vec<ClusterProtocol>>,
}

/// ClusterNetworkPolicy's spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    /// `Admin` or `Baseline`.
    #[serde(default)]
    pub tier: String,
    /// 0–1000, lower first within the tier.
    #[serde(default)]
    pub priority: i32,
    /// The pods the policy applies to.
    #[serde(default)]
    pub subject: Subject,
    /// Ingress rules, in precedence order.
    #[serde(default)]
    pub ingress: Vec<ClusterRule>,
    /// Egress rules, in precedence order.
    #[serde(default)]
    pub egress: Vec<ClusterRule>,
}

/// `ClusterNetworkPolicy` (`policy.networking.k8s.io/v1alpha2`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterNetworkPolicy {
    /// Name (cluster-scoped).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Spec.
    #[serde(default)]
    pub spec: ClusterSpec,
}
