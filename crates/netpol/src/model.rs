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
    /// `k8s.cni.cncf.io/v1beta1` MultiNetworkPolicy (namespaced; a secondary network's
    /// NetworkPolicy, evaluated as one).
    MultiNetworkPolicy,
}

impl PolicyKind {
    /// The kind's name.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyKind::NetworkPolicy => "NetworkPolicy",
            PolicyKind::AdminNetworkPolicy => "AdminNetworkPolicy",
            PolicyKind::BaselineAdminNetworkPolicy => "BaselineAdminNetworkPolicy",
            PolicyKind::ClusterNetworkPolicy => "ClusterNetworkPolicy",
            PolicyKind::MultiNetworkPolicy => "MultiNetworkPolicy",
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

/// A port and protocol as the tools spell them: `80/TCP`, `53/udp`, or `80` (TCP).
pub fn parse_port(text: &str) -> Result<(u16, Protocol), String> {
    let (number, protocol) = match text.split_once('/') {
        Some((n, p)) => (n, p.to_ascii_uppercase().parse::<Protocol>()?),
        None => (text, Protocol::Tcp),
    };
    let port: u16 = number
        .parse()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("{text:?}: a port is a number from 1 to 65535, e.g. 80/TCP"))?;
    Ok((port, protocol))
}

/// One end of a connection as the tools spell it: `NAMESPACE/POD` or an IP address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointName {
    /// A pod.
    Pod {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// An address.
    Address(IpAddr),
}

impl EndpointName {
    /// `NAMESPACE/POD`, `POD` (in `default`) or an IP address.
    pub fn parse(text: &str) -> Result<EndpointName, String> {
        if let Ok(ip) = text.parse() {
            return Ok(EndpointName::Address(ip));
        }
        let (namespace, name) = text.split_once('/').unwrap_or(("default", text));
        if namespace.is_empty() || name.is_empty() || name.contains('/') {
            return Err(format!("{text:?}: expected NAMESPACE/POD or an IP address"));
        }
        Ok(EndpointName::Pod {
            namespace: namespace.into(),
            name: name.into(),
        })
    }

    /// A destination with its port: `NAMESPACE/POD:PORT/PROTO` or `IP:PORT/PROTO`
    /// (`[IPv6]:PORT/PROTO`).
    pub fn parse_with_port(text: &str) -> Result<(EndpointName, u16, Protocol), String> {
        let (end, port) = text
            .rsplit_once(':')
            .ok_or_else(|| format!("{text:?}: expected NAMESPACE/POD:PORT/PROTO"))?;
        let end = end
            .strip_prefix('[')
            .and_then(|e| e.strip_suffix(']'))
            .unwrap_or(end);
        let (port, protocol) = parse_port(port)?;
        Ok((EndpointName::parse(end)?, port, protocol))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_and_endpoints_parse_as_the_tools_spell_them() {
        assert_eq!(parse_port("80/TCP"), Ok((80, Protocol::Tcp)));
        assert_eq!(parse_port("53/udp"), Ok((53, Protocol::Udp)));
        assert_eq!(parse_port("9003/SCTP"), Ok((9003, Protocol::Sctp)));
        assert_eq!(parse_port("81"), Ok((81, Protocol::Tcp)));
        for bad in ["0/TCP", "65536", "80/ICMP", "http", ""] {
            assert!(parse_port(bad).is_err(), "{bad}");
        }
        let pod = |ns: &str, name: &str| EndpointName::Pod {
            namespace: ns.into(),
            name: name.into(),
        };
        assert_eq!(EndpointName::parse("x/a"), Ok(pod("x", "a")));
        assert_eq!(EndpointName::parse("a"), Ok(pod("default", "a")));
        assert_eq!(
            EndpointName::parse("10.0.0.1"),
            Ok(EndpointName::Address("10.0.0.1".parse().expect("ip")))
        );
        assert!(EndpointName::parse("x/a/b").is_err());
        assert_eq!(
            EndpointName::parse_with_port("y/b:81/UDP"),
            Ok((pod("y", "b"), 81, Protocol::Udp))
        );
        assert_eq!(
            EndpointName::parse_with_port("[fd00::1]:80/TCP"),
            Ok((
                EndpointName::Address("fd00::1".parse().expect("ip")),
                80,
                Protocol::Tcp
            ))
        );
        assert!(EndpointName::parse_with_port("y/b").is_err());
    }
}
