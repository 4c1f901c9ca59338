//! What evaluation reads of the cluster: namespaces (labels), pods (labels, IPs, named
//! container ports), protocols and the names of policies, tiers and rules. Built from
//! k8s-openapi objects; knows nothing of policies' rules.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use k8s_openapi::api::core::v1::{Namespace, Pod};

/// The label every namespace carries with its own name (set by the API server, immutable).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Labels.
pub type Labels = BTreeMap<String, String>;

/// A transport protocol a NetworkPolicy can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// TCP (the default).
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl Protocol {
    /// Every protocol.
    pub const ALL: [Protocol; 3] = [Protocol::Tcp, Protocol::Udp, Protocol::Sctp];

    /// Upstream's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        }
    }

    /// A protocol as an object spells it; absent means TCP.
    pub fn from_field(field: Option<&str>) -> Option<Protocol> {
        field.map_or(Some(Protocol::Tcp), |p| p.parse().ok())
    }
}

impl FromStr for Protocol {
    type Err = String;

    /// Upstream's exact spellings only (`TCP`, `UDP`, `SCTP`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Protocol::ALL
            .into_iter()
            .find(|p| p.as_str() == text)
            .ok_or_else(|| format!("unsupported protocol {text:?}: TCP, UDP or SCTP"))
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A named container port of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedPort {
    /// The port's name.
    pub name: String,
    /// Its number.
    pub port: u16,
    /// Its protocol.
    pub protocol: Protocol,
}

/// What evaluation knows of a pod.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodInfo {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: Labels,
    /// Pod IPs (one per family).
    pub ips: Vec<IpAddr>,
    /// Named container ports (of every container).
    pub ports: Vec<NamedPort>,
}

impl PodInfo {
    /// The pod's information from a Pod object: labels, `status.podIPs` (else `podIP`), and
    /// every container's named ports (a port without a name cannot be named by a policy).
    pub fn from_pod(pod: &Pod) -> PodInfo {
        let status = pod.status.as_ref();
        let mut ips: Vec<IpAddr> = status
            .and_then(|s| s.pod_ips.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|ip| ip.ip.parse().ok())
            .collect();
        if ips.is_empty()
            && let Some(ip) = status
                .and_then(|s| s.pod_ip.as_deref())
                .and_then(|ip| ip.parse().ok())
        {
            ips.push(ip);
        }
        let ports = pod
            .spec
            .iter()
            .flat_map(|spec| spec.containers.iter())
            .flat_map(|c| c.ports.iter().flatten())
            .filter_map(|p| {
                Some(NamedPort {
                    name: p.name.clone()?,
                    port: u16::try_from(p.container_port).ok()?,
                    protocol: Protocol::from_field(p.protocol.as_deref())?,
                })
            })
            .collect();
        PodInfo {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            ips,
            ports,
        }
    }

    /// The number of the container port named `name` for `protocol`, if the pod has one.
    pub fn named_port(&self, name: &str, protocol: Option<Protocol>) -> Option<(u16, Protocol)> {
        self.ports
            .iter()
            .find(|p| p.name == name && protocol.is_none_or(|want| want == p.protocol))
            .map(|p| (p.port, p.protocol))
    }
}

/// A namespace's labels, with the automatic `kubernetes.io/metadata.name` label added.
pub fn namespace_labels(name: &str, labels: Option<&Labels>) -> Labels {
    let mut labels = labels.cloned().unwrap_or_default();
    labels
        .entry(NAMESPACE_NAME_LABEL.to_string())
        .or_insert_with(|| name.to_string());
    labels
}

/// A Namespace object's name and labels.
pub fn namespace_info(namespace: &Namespace) -> (String, Labels) {
    let name = namespace.metadata.name.clone().unwrap_or_default();
    let labels = namespace_labels(&name, namespace.metadata.labels.as_ref());
    (name, labels)
}

/// The kind of a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PolicyKind {
    /// `networking.k8s.io/v1` NetworkPolicy (namespaced).
    NetworkPolicy,
    /// `policy.networking.k8s.io/v1alpha1` AdminNetworkPolicy.
    AdminNetworkPolicy,
    /// `policy.networking.k8s.io/v1alpha1` BaselineAdminNetworkPolicy.
    BaselineAdminNetworkPolicy,
    /// `policy.networking.k8s.io/v1alpha2` ClusterNetworkPolicy.
    ClusterNetworkPolicy,
}

impl PolicyKind {
    /// The kind's name.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyKind::NetworkPolicy => "NetworkPolicy",
            PolicyKind::AdminNetworkPolicy => "AdminNetworkPolicy",
            PolicyKind::BaselineAdminNetworkPolicy => "BaselineAdminNetworkPolicy",
            PolicyKind::ClusterNetworkPolicy => "ClusterNetworkPolicy",
        }
    }
}

/// A policy's identity: kind, namespace (NetworkPolicy only) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PolicyRef {
    /// Kind.
    pub kind: PolicyKind,
    /// Namespace (`None` for cluster-scoped kinds).
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl fmt::Display for PolicyRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind.as_str(), self.name),
            None => write!(f, "{} {}", self.kind.as_str(), self.name),
        }
    }
}

/// The tiers of evaluation, in upstream's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tier {
    /// AdminNetworkPolicy and ClusterNetworkPolicy `tier: Admin`.
    Admin,
    /// NetworkPolicy.
    NetworkPolicy,
    /// BaselineAdminNetworkPolicy and ClusterNetworkPolicy `tier: Baseline`.
    Baseline,
    /// Nothing decided: Kubernetes allows.
    Default,
}

impl Tier {
    /// The tier's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Admin => "Admin",
            Tier::NetworkPolicy => "NetworkPolicy",
            Tier::Baseline => "Baseline",
            Tier::Default => "Default",
        }
    }
}

/// A traffic direction, seen from the pod a policy selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Traffic into the selected pod.
    Ingress,
    /// Traffic out of the selected pod.
    Egress,
}

impl Direction {
    /// Upstream's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Ingress => "Ingress",
            Direction::Egress => "Egress",
        }
    }
}
