//! The address plan of a topology: node InternalIPs come from `nodeCIDR`, each node's pod
//! CIDR is the node's /24 of `podCIDR`; Services take ClusterIPs from `serviceCIDR` and node
//! ports from `serviceNodePortRange`; cluster DNS names end in `clusterDomain`. Checked for
//! size, overlap and form, each finding naming its field.
//!
//! Pure arithmetic; knows nothing about nodes beyond their position, nor about who holds a
//! Service address (`tessera_api::service_allocation`).

use std::net::Ipv4Addr;

use serde::Deserialize;
pub use tessera_model::net::{Ipv4Cidr, PortRange};

/// A topology's address plan.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Networking {
    /// Pod addresses; each node gets the next /24 (default `10.244.0.0/16`).
    #[serde(
        default = "default_pod_cidr",
        rename = "podCIDR",
        deserialize_with = "pod_cidr"
    )]
    pub pod_cidr: Ipv4Cidr,
    /// Node InternalIPs, from the third address on (default `10.0.0.0/16`).
    #[serde(
        default = "default_node_cidr",
        rename = "nodeCIDR",
        deserialize_with = "node_cidr"
    )]
    pub node_cidr: Ipv4Cidr,
    /// Service ClusterIPs, as kube-apiserver's `--service-cluster-ip-range` (default
    /// `10.96.0.0/12`).
    #[serde(
        default = "default_service_cidr",
        rename = "serviceCIDR",
        deserialize_with = "service_cidr"
    )]
    pub service_cidr: Ipv4Cidr,
    /// Service node ports, as kube-apiserver's `--service-node-port-range` (default
    /// `30000-32767`).
    #[serde(
        default = "default_node_port_range",
        deserialize_with = "node_port_range"
    )]
    pub service_node_port_range: PortRange,
    /// The cluster DNS domain, as the kubelet's `--cluster-domain` (default `cluster.local`).
    #[serde(default = "default_cluster_domain")]
    pub cluster_domain: String,
}

/// Reads a field's text and parses it, naming the field in the error.
fn parse_field<'de, D, T>(deserializer: D, field: &str) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: std::str::FromStr<Err = String>,
{
    let text = String::deserialize(deserializer)?;
    text.parse()
        .map_err(|message| serde::de::Error::custom(format!("networking.{field}: {message}")))
}

fn pod_cidr<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Ipv4Cidr, D::Error> {
    parse_field(deserializer, "podCIDR")
}

fn node_cidr<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Ipv4Cidr, D::Error> {
    parse_field(deserializer, "nodeCIDR")
}

fn service_cidr<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Ipv4Cidr, D::Error> {
    parse_field(deserializer, "serviceCIDR")
}

fn node_port_range<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<PortRange, D::Error> {
    parse_field(deserializer, "serviceNodePortRange")
}

fn default_pod_cidr() -> Ipv4Cidr {
    Ipv4Cidr::new(Ipv4Addr::new(10, 244, 0, 0), 16)
}

fn default_node_cidr() -> Ipv4Cidr {
    Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, 0), 16)
}

fn default_service_cidr() -> Ipv4Cidr {
    Ipv4Cidr::new(Ipv4Addr::new(10, 96, 0, 0), 12)
}

fn default_node_port_range() -> PortRange {
    PortRange {
        base: 30000,
        size: 2768,
    }
}

fn default_cluster_domain() -> String {
    "cluster.local".into()
}

impl Default for Networking {
    fn default() -> Self {
        Networking {
            pod_cidr: default_pod_cidr(),
            node_cidr: default_node_cidr(),
            service_cidr: default_service_cidr(),
            service_node_port_range: default_node_port_range(),
            cluster_domain: default_cluster_domain(),
        }
    }
}

impl Networking {
    /// Checks the plan for `nodes` nodes; errors are (field, message).
    pub fn check(&self, nodes: u64) -> Result<(), (String, String)> {
        if self.pod_cidr.overlaps(&self.node_cidr) {
            return Err((
                "networking.podCIDR".into(),
                format!(
                    "{} overlaps networking.nodeCIDR {}",
                    self.pod_cidr, self.node_cidr
                ),
            ));
        }
        if self.pod_cidr.subnets_24() < nodes {
            return Err((
                "networking.podCIDR".into(),
                format!(
                    "{} holds {} node /24s, the topology has {nodes} nodes",
                    self.pod_cidr,
                    self.pod_cidr.subnets_24()
                ),
            ));
        }
        if self.node_cidr.size() < nodes + 3 {
            return Err((
                "networking.nodeCIDR".into(),
                format!("{} is too small for {nodes} nodes", self.node_cidr),
            ));
        }
        self.check_services()
    }

    /// The Service ranges and domain: the service network apart from pods and nodes, large
    /// enough to allocate from and no larger than kube-apiserver accepts (a /12).
    fn check_services(&self) -> Result<(), (String, String)> {
        let field = |name: &str| format!("networking.{name}");
        for (name, other) in [("podCIDR", self.pod_cidr), ("nodeCIDR", self.node_cidr)] {
            if self.service_cidr.overlaps(&other) {
                return Err((
                    field("serviceCIDR"),
                    format!("{} overlaps networking.{name} {other}", self.service_cidr),
                ));
            }
        }
        if self.service_cidr.prefix() < 12 {
            return Err((
                field("serviceCIDR"),
                format!(
                    "{} is too large; for 32-bit addresses, the mask must be >= 12",
                    self.service_cidr
                ),
            ));
        }
        if self.service_cidr.prefix() > 29 {
            return Err((
                field("serviceCIDR"),
                format!(
                    "{} is too small to allocate Service IPs from",
                    self.service_cidr
                ),
            ));
        }
        if !is_dns_subdomain(&self.cluster_domain) {
            return Err((
                field("clusterDomain"),
                format!(
                    "{:?} must be a lowercase RFC 1123 subdomain (e.g. cluster.local)",
                    self.cluster_domain
                ),
            ));
        }
        Ok(())
    }

    /// The pod CIDR of the node at `index`.
    pub fn node_pod_cidr(&self, index: u32) -> String {
        format!("{}/24", self.pod_cidr.subnet_24(index))
    }

    /// A pod address on the node at `index`.
    pub fn pod_ip(&self, index: u32, octet: u8) -> String {
        let base = u32::from(self.pod_cidr.subnet_24(index));
        Ipv4Addr::from(base + u32::from(octet)).to_string()
    }

    /// The InternalIP of the node at `index`.
    pub fn node_ip(&self, index: u32) -> String {
        self.node_cidr.address(index + 2).to_string()
    }
}

/// A DNS-1123 subdomain: dot-separated lowercase alphanumeric labels, `-` inside.
fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_checked_and_addresses_derived() {
        let plan = Networking::default();
        assert_eq!(plan.node_pod_cidr(3), "10.244.3.0/24");
        assert_eq!(plan.pod_ip(3, 7), "10.244.3.7");
        assert_eq!(plan.node_ip(0), "10.0.0.2");
        assert_eq!(plan.node_ip(300), "10.0.1.46");
        assert!(plan.check(256).is_ok());
        assert!(
            plan.check(257)
                .is_err_and(|(field, _)| field == "networking.podCIDR")
        );
        let overlapping = Networking {
            pod_cidr: "10.0.0.0/8".parse().expect("cidr"),
            ..Networking::default()
        };
        assert_eq!(
            overlapping.check(1),
            Err((
                "networking.podCIDR".into(),
                "10.0.0.0/8 overlaps networking.nodeCIDR 10.0.0.0/16".into()
            ))
        );
    }

    #[test]
    fn service_ranges_are_checked() {
        let plan = |yaml: &str| serde_saphyr::from_str::<Networking>(yaml);
        let table = [
            ("{}", Ok(())),
            (
                "{serviceCIDR: 10.244.0.0/20}",
                Err((
                    "networking.serviceCIDR",
                    "10.244.0.0/20 overlaps networking.podCIDR 10.244.0.0/16",
                )),
            ),
            (
                "{serviceCIDR: 10.0.0.0/24}",
                Err((
                    "networking.serviceCIDR",
                    "10.0.0.0/24 overlaps networking.nodeCIDR 10.0.0.0/16",
                )),
            ),
            (
                "{serviceCIDR: 172.16.0.0/8}",
                Err((
                    "",
                    "networking.serviceCIDR: \"172.16.0.0/8\" has host bits set (the network is 172.0.0.0/8)",
                )),
            ),
            (
                "{podCIDR: 10.244.0.0}",
                Err(("", "networking.podCIDR: \"10.244.0.0\" is not an IPv4 CIDR")),
            ),
            (
                "{nodeCIDR: 10.0.0.300/16}",
                Err((
                    "",
                    "networking.nodeCIDR: \"10.0.0.300/16\": \"10.0.0.300\" is not an IPv4 address",
                )),
            ),
            (
                "{serviceCIDR: 172.0.0.0/8}",
                Err((
                    "networking.serviceCIDR",
                    "172.0.0.0/8 is too large; for 32-bit addresses, the mask must be >= 12",
                )),
            ),
            (
                "{serviceCIDR: 172.16.0.0/30}",
                Err((
                    "networking.serviceCIDR",
                    "172.16.0.0/30 is too small to allocate Service IPs from",
                )),
            ),
            (
                "{clusterDomain: Cluster.Local}",
                Err((
                    "networking.clusterDomain",
                    "\"Cluster.Local\" must be a lowercase RFC 1123 subdomain (e.g. cluster.local)",
                )),
            ),
            (
                "{serviceNodePortRange: 32767-30000}",
                Err((
                    "",
                    "networking.serviceNodePortRange: \"32767-30000\": the last port is before the first",
                )),
            ),
        ];
        for (yaml, want) in table {
            let checked = plan(yaml)
                .map_err(|e| (String::new(), e.to_string()))
                .and_then(|plan| plan.check(2));
            match (checked, want) {
                (Ok(()), Ok(())) => {}
                (Err((field, message)), Err((want_field, want_message))) => {
                    assert_eq!(field, want_field, "{yaml}: {message}");
                    assert!(message.contains(want_message), "{yaml}: {message}");
                }
                (got, want) => panic!("{yaml}: {got:?} vs {want:?}"),
            }
        }
        let custom = plan("{serviceCIDR: 172.20.0.0/16, serviceNodePortRange: 31000-31999, clusterDomain: lab.example}")
            .expect("plan");
        assert_eq!(custom.service_cidr.to_string(), "172.20.0.0/16");
        assert_eq!(custom.service_node_port_range.to_string(), "31000-31999");
        assert_eq!(custom.cluster_domain, "lab.example");
    }
}
