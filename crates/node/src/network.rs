//! The address plan of a topology: node InternalIPs come from `nodeCIDR`, each node's pod
//! CIDR is the node's /24 of `podCIDR`. IPv4 CIDRs parsed, checked for size and overlap.
//!
//! Pure arithmetic; knows nothing about nodes beyond their position.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::Deserialize;

/// An IPv4 network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Cidr {
    network: u32,
    prefix: u8,
}

impl FromStr for Ipv4Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (address, prefix) = text
            .split_once('/')
            .ok_or_else(|| format!("{text:?} is not an IPv4 CIDR (a.b.c.d/n)"))?;
        let address: Ipv4Addr = address
            .parse()
            .map_err(|_| format!("{text:?}: {address:?} is not an IPv4 address"))?;
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= 32)
            .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to 32"))?;
        let mask = Ipv4Cidr::mask(prefix);
        let address = u32::from(address);
        if address & !mask != 0 {
            return Err(format!(
                "{text:?} has host bits set (the network is {}/{prefix})",
                Ipv4Addr::from(address & mask)
            ));
        }
        Ok(Ipv4Cidr {
            network: address,
            prefix,
        })
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.network), self.prefix)
    }
}

impl<'de> Deserialize<'de> for Ipv4Cidr {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl Ipv4Cidr {
    fn mask(prefix: u8) -> u32 {
        if prefix == 0 {
            0
        } else {
            u32::MAX << (32 - prefix)
        }
    }

    fn last(&self) -> u32 {
        self.network | !Ipv4Cidr::mask(self.prefix)
    }

    /// Whether the two networks share an address.
    pub fn overlaps(&self, other: &Ipv4Cidr) -> bool {
        self.network <= other.last() && other.network <= self.last()
    }

    /// How many /24 subnets it holds (0 when it is smaller than a /24).
    pub fn subnets_24(&self) -> u64 {
        if self.prefix > 24 {
            0
        } else {
            1u64 << (24 - self.prefix)
        }
    }

    /// How many addresses it holds.
    pub fn size(&self) -> u64 {
        1u64 << (32 - u32::from(self.prefix))
    }

    /// The `index`-th /24 subnet's first address.
    pub fn subnet_24(&self, index: u32) -> Ipv4Addr {
        Ipv4Addr::from(self.network.wrapping_add(index << 8))
    }

    /// The address `offset` after the network address.
    pub fn address(&self, offset: u32) -> Ipv4Addr {
        Ipv4Addr::from(self.network.wrapping_add(offset))
    }
}

/// A topology's address plan.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Networking {
    /// Pod addresses; each node gets the next /24 (default `10.244.0.0/16`).
    #[serde(default = "default_pod_cidr", rename = "podCIDR")]
    pub pod_cidr: Ipv4Cidr,
    /// Node InternalIPs, from the third address on (default `10.0.0.0/16`).
    #[serde(default = "default_node_cidr", rename = "nodeCIDR")]
    pub node_cidr: Ipv4Cidr,
}

fn default_pod_cidr() -> Ipv4Cidr {
    Ipv4Cidr {
        network: u32::from(Ipv4Addr::new(10, 244, 0, 0)),
        prefix: 16,
    }
}

fn default_node_cidr() -> Ipv4Cidr {
    Ipv4Cidr {
        network: u32::from(Ipv4Addr::new(10, 0, 0, 0)),
        prefix: 16,
    }
}

impl Default for Networking {
    fn default() -> Self {
        Networking {
            pod_cidr: default_pod_cidr(),
            node_cidr: default_node_cidr(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_parse_and_overlap() {
        let cidr = |text: &str| text.parse::<Ipv4Cidr>();
        let table = [
            ("10.244.0.0/16", Ok("10.244.0.0/16")),
            (
                "10.244.1.0/16",
                Err("has host bits set (the network is 10.244.0.0/16)"),
            ),
            ("10.244.0.0", Err("is not an IPv4 CIDR")),
            ("10.300.0.0/16", Err("is not an IPv4 address")),
            ("10.0.0.0/33", Err("prefix length must be 0 to 32")),
        ];
        for (text, want) in table {
            match (cidr(text), want) {
                (Ok(got), Ok(want)) => assert_eq!(got.to_string(), want),
                (Err(got), Err(want)) => assert!(got.contains(want), "{got}"),
                (got, want) => panic!("{text}: {got:?} vs {want:?}"),
            }
        }
        let a = cidr("10.0.0.0/8").expect("cidr");
        let b = cidr("10.244.0.0/16").expect("cidr");
        let c = cidr("192.168.0.0/16").expect("cidr");
        assert!(a.overlaps(&b) && b.overlaps(&a));
        assert!(!a.overlaps(&c));
    }

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
}
