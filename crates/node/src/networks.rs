//! The traffic classes of a topology: its `networks` (management, service, storage,
//! high-performance; CIDR, optional VLAN, RDMA) and, per server model, which NICs carry which
//! network (`serverNetworks`). Checked with the field named: malformed or overlapping CIDRs,
//! a NIC naming an unknown network or server, a NIC the catalog does not know without its
//! speed and NUMA node. Resolves each node's attached NICs and a pod's address on a
//! secondary network (the pod's host octet in the node's /24 of the network, as pod IPs are
//! handed out in the pod CIDR).
//!
//! ```yaml
//! networks:
//! - {name: storage, purpose: storage, cidr: 172.17.0.0/16, vlan: 200}
//! - {name: hpn, purpose: high-performance, cidr: 172.30.0.0/16, rdma: true}
//! serverNetworks:
//! - server: hgx-h200
//!   nics:
//!   - {name: mlx5_0, network: hpn}                       # a catalog NIC: speed, NUMA, PCIe from it
//!   - {name: mlx5_8, network: storage, gbps: 200, numa: 0}  # a NIC the catalog does not list
//! ```
//!
//! Pure data; knows nothing about pods, NetworkAttachmentDefinitions or the API.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use serde::Deserialize;
use tessera_devices::Catalog;
use tessera_model::net::Ipv4Cidr;

use crate::network::Networking;

/// What a network carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Purpose {
    /// Node management, in-band control plane.
    Management,
    /// North-south service traffic (inference front ends, registries).
    Service,
    /// Storage (model store, checkpoints, datasets).
    Storage,
    /// The GPU-to-GPU fabric (InfiniBand or RoCE).
    HighPerformance,
}

/// A network of the topology file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Network {
    /// Name, what NICs and NetworkAttachmentDefinitions refer to.
    pub name: String,
    /// Its traffic class.
    pub purpose: Purpose,
    /// Its IPv4 network (checked by [`check`]).
    pub cidr: String,
    /// An 802.1Q VLAN ID.
    #[serde(default)]
    pub vlan: Option<u16>,
    /// Whether its NICs do RDMA (offered as DRA devices, see [`crate::nic_devices`]).
    #[serde(default)]
    pub rdma: bool,
}

/// Which NICs of one server model carry which network.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServerNetworks {
    /// The catalog server model.
    pub server: String,
    /// Its NICs.
    pub nics: Vec<NicEntry>,
}

/// One NIC of a server model and its network; speed, NUMA node and PCIe placement come from
/// the catalog when it lists the NIC, from the entry otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NicEntry {
    /// Interface or device name (`mlx5_0`, `eno1`).
    pub name: String,
    /// The network it carries.
    pub network: String,
    /// Link speed in Gbit/s (required for a NIC the catalog does not list).
    #[serde(default)]
    pub gbps: Option<u32>,
    /// NUMA node (required for a NIC the catalog does not list).
    #[serde(default)]
    pub numa: Option<u8>,
    /// The PCIe switch it hangs off.
    #[serde(default)]
    pub pcie_switch: Option<String>,
}

/// A NIC of a node with its network, resolved against the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachedNic {
    /// Interface or device name.
    pub name: String,
    /// The network it carries.
    pub network: String,
    /// Link speed in Gbit/s.
    pub gbps: u32,
    /// NUMA node.
    pub numa: u8,
    /// PCIe root complex (`resource.kubernetes.io/pcieRoot`), when the catalog knows it.
    pub pcie_root: Option<String>,
    /// PCIe switch, when known.
    pub pcie_switch: Option<String>,
    /// PCI bus ID, when the catalog knows it.
    pub bus_id: Option<String>,
    /// Whether its network does RDMA.
    pub rdma: bool,
}

/// A finding: (field, message).
pub type Finding = (String, String);

fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Checks the networks against each other, the address plan and the number of nodes.
fn check_networks(networks: &[Network], plan: &Networking, nodes: u64) -> Result<(), Finding> {
    let mut seen: Vec<(String, Ipv4Cidr)> = Vec::new();
    for (i, network) in networks.iter().enumerate() {
        let at = |field: &str| format!("networks[{i}].{field}");
        if !is_dns_label(&network.name) {
            return Err((
                at("name"),
                format!("{:?} must be a lowercase DNS label", network.name),
            ));
        }
        if seen.iter().any(|(name, _)| *name == network.name) {
            return Err((
                at("name"),
                format!("duplicate network name {:?}", network.name),
            ));
        }
        let cidr: Ipv4Cidr = network.cidr.parse().map_err(|m| (at("cidr"), m))?;
        if let Some((other, _)) = seen.iter().find(|(_, c)| c.overlaps(&cidr)) {
            return Err((at("cidr"), format!("{cidr} overlaps network {other:?}")));
        }
        for (name, range) in [
            ("podCIDR", plan.pod_cidr),
            ("serviceCIDR", plan.service_cidr),
        ] {
            if cidr.overlaps(&range) {
                return Err((
                    at("cidr"),
                    format!("{cidr} overlaps networking.{name} {range}"),
                ));
            }
        }
        if cidr.subnets_24() < nodes {
            return Err((
                at("cidr"),
                format!(
                    "{cidr} holds {} node /24s, the topology has {nodes} nodes",
                    cidr.subnets_24()
                ),
            ));
        }
        if let Some(vlan) = network.vlan
            && !(1..=4094).contains(&vlan)
        {
            return Err((at("vlan"), format!("{vlan} must be between 1 and 4094")));
        }
        seen.push((network.name.clone(), cidr));
    }
    Ok(())
}

/// Checks the networks and NIC assignments of a topology with `nodes` nodes.
pub fn check(
    networks: &[Network],
    servers: &[ServerNetworks],
    plan: &Networking,
    catalog: &Catalog,
    nodes: u64,
) -> Result<(), Finding> {
    check_networks(networks, plan, nodes)?;
    let mut models = BTreeSet::new();
    for (s, entry) in servers.iter().enumerate() {
        let at = |field: &str| format!("serverNetworks[{s}].{field}");
        let model = catalog.server(&entry.server).ok_or_else(|| {
            (
                at("server"),
                format!("{:?} is not a catalog server model", entry.server),
            )
        })?;
        if !models.insert(entry.server.as_str()) {
            return Err((at("server"), format!("{:?} is listed twice", entry.server)));
        }
        let mut names = BTreeSet::new();
        for (n, nic) in entry.nics.iter().enumerate() {
            let field = |name: &str| at(&format!("nics[{n}].{name}"));
            if !names.insert(nic.name.as_str()) {
                return Err((field("name"), format!("NIC {:?} is listed twice", nic.name)));
            }
            if !networks.iter().any(|net| net.name == nic.network) {
                return Err((
                    field("network"),
                    format!("{:?} is not a network of the topology", nic.network),
                ));
            }
            let known = model.nics.iter().find(|c| c.name == nic.name);
            match (known, nic.gbps, nic.numa) {
                (Some(_), _, _) => {}
                (None, None, _) => {
                    return Err((
                        field("gbps"),
                        format!("required: {} lists no NIC {:?}", entry.server, nic.name),
                    ));
                }
                (None, _, None) => {
                    return Err((
                        field("numa"),
                        format!("required: {} lists no NIC {:?}", entry.server, nic.name),
                    ));
                }
                (None, Some(_), Some(numa)) if numa >= model.sockets => {
                    return Err((
                        field("numa"),
                        format!(
                            "NUMA node {numa} does not exist on {} socket(s)",
                            model.sockets
                        ),
                    ));
                }
                (None, Some(_), Some(_)) => {}
            }
        }
    }
    Ok(())
}

/// The NICs a node of server model `server` carries networks on, in the file's order.
pub fn attached_nics(
    networks: &[Network],
    servers: &[ServerNetworks],
    catalog: &Catalog,
    server: &str,
) -> Vec<AttachedNic> {
    let Some(entry) = servers.iter().find(|s| s.server == server) else {
        return Vec::new();
    };
    let model = catalog.server(server);
    entry
        .nics
        .iter()
        .map(|nic| {
            let known = model.and_then(|m| m.nics.iter().find(|c| c.name == nic.name));
            let rdma = networks.iter().any(|n| n.name == nic.network && n.rdma);
            AttachedNic {
                name: nic.name.clone(),
                network: nic.network.clone(),
                gbps: known.map_or(nic.gbps.unwrap_or(0), |k| k.gbps),
                numa: known.map_or(nic.numa.unwrap_or(0), |k| k.numa),
                pcie_root: known.map(|k| k.pcie_root.clone()),
                pcie_switch: known
                    .map(|k| k.pcie_switch.clone())
                    .or_else(|| nic.pcie_switch.clone()),
                bus_id: known.map(|k| k.bus_id.clone()),
                rdma,
            }
        })
        .collect()
}

/// A pod's address on `network`: the host octet of its pod IP in node `index`'s /24 of the
/// network (`None` when the network is unknown or its CIDR does not parse).
pub fn secondary_address(
    networks: &[Network],
    network: &str,
    index: u32,
    octet: u8,
) -> Option<(Ipv4Addr, u8)> {
    let cidr: Ipv4Cidr = networks
        .iter()
        .find(|n| n.name == network)?
        .cidr
        .parse()
        .ok()?;
    let base = u32::from(cidr.subnet_24(index));
    Some((Ipv4Addr::from(base + u32::from(octet)), cidr.prefix()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn network(name: &str, purpose: Purpose, cidr: &str) -> Network {
        Network {
            name: name.into(),
            purpose,
            cidr: cidr.into(),
            vlan: None,
            rdma: purpose == Purpose::HighPerformance,
        }
    }

    fn four() -> Vec<Network> {
        vec![
            network("management", Purpose::Management, "10.0.0.0/16"),
            network("service", Purpose::Service, "172.16.0.0/16"),
            network("storage", Purpose::Storage, "172.17.0.0/16"),
            network("hpn", Purpose::HighPerformance, "172.30.0.0/16"),
        ]
    }

    fn nic(name: &str, network: &str, gbps: Option<u32>, numa: Option<u8>) -> NicEntry {
        NicEntry {
            name: name.into(),
            network: network.into(),
            gbps,
            numa,
            pcie_switch: None,
        }
    }

    fn hgx(nics: Vec<NicEntry>) -> Vec<ServerNetworks> {
        vec![ServerNetworks {
            server: "hgx-h200".into(),
            nics,
        }]
    }

    #[test]
    fn bad_networks_and_nics_name_the_field() {
        let catalog = Catalog::built_in().expect("catalog");
        let plan = Networking::default();
        let with = |i: usize, edit: fn(&mut Network)| {
            let mut networks = four();
            edit(&mut networks[i]);
            networks
        };
        let ok_nics = hgx(vec![nic("mlx5_0", "hpn", None, None)]);
        type Case = (
            Vec<Network>,
            Vec<ServerNetworks>,
            Option<(&'static str, &'static str)>,
        );
        let cases: Vec<Case> = vec![
            (four(), ok_nics.clone(), None),
            (
                with(2, |n| n.cidr = "172.17.0.0".into()),
                ok_nics.clone(),
                Some((
                    "networks[2].cidr",
                    "\"172.17.0.0\" is not an IPv4 CIDR (a.b.c.d/n)",
                )),
            ),
            (
                with(3, |n| n.cidr = "172.30.1.0/16".into()),
                ok_nics.clone(),
                Some((
                    "networks[3].cidr",
                    "\"172.30.1.0/16\" has host bits set (the network is 172.30.0.0/16)",
                )),
            ),
            (
                with(3, |n| n.cidr = "172.17.128.0/17".into()),
                ok_nics.clone(),
                Some((
                    "networks[3].cidr",
                    "172.17.128.0/17 overlaps network \"storage\"",
                )),
            ),
            (
                with(1, |n| n.cidr = "10.244.0.0/16".into()),
                ok_nics.clone(),
                Some((
                    "networks[1].cidr",
                    "10.244.0.0/16 overlaps networking.podCIDR 10.244.0.0/16",
                )),
            ),
            (
                with(1, |n| n.cidr = "172.16.0.0/28".into()),
                ok_nics.clone(),
                Some((
                    "networks[1].cidr",
                    "172.16.0.0/28 holds 0 node /24s, the topology has 3 nodes",
                )),
            ),
            (
                with(2, |n| n.vlan = Some(4095)),
                ok_nics.clone(),
                Some(("networks[2].vlan", "4095 must be between 1 and 4094")),
            ),
            (
                with(2, |n| n.name = "hpn".into()),
                ok_nics.clone(),
                Some(("networks[3].name", "duplicate network name \"hpn\"")),
            ),
            (
                four(),
                hgx(vec![nic("mlx5_0", "infiniband", None, None)]),
                Some((
                    "serverNetworks[0].nics[0].network",
                    "\"infiniband\" is not a network of the topology",
                )),
            ),
            (
                four(),
                hgx(vec![nic("eno1", "management", None, Some(0))]),
                Some((
                    "serverNetworks[0].nics[0].gbps",
                    "required: hgx-h200 lists no NIC \"eno1\"",
                )),
            ),
            (
                four(),
                hgx(vec![nic("eno1", "management", Some(25), Some(2))]),
                Some((
                    "serverNetworks[0].nics[0].numa",
                    "NUMA node 2 does not exist on 2 socket(s)",
                )),
            ),
            (
                four(),
                vec![ServerNetworks {
                    server: "hgx-h9000".into(),
                    nics: vec![],
                }],
                Some((
                    "serverNetworks[0].server",
                    "\"hgx-h9000\" is not a catalog server model",
                )),
            ),
        ];
        for (i, (networks, servers, want)) in cases.into_iter().enumerate() {
            let got = check(&networks, &servers, &plan, &catalog, 3);
            let want = want.map_or(Ok(()), |(f, m)| Err((f.to_string(), m.to_string())));
            assert_eq!(got, want, "case {i}");
        }
    }

    #[test]
    fn nics_resolve_from_the_catalog_or_the_entry() {
        let catalog = Catalog::built_in().expect("catalog");
        let servers = hgx(vec![
            nic("mlx5_4", "hpn", None, None),
            NicEntry {
                pcie_switch: Some("sw9".into()),
                ..nic("mlx5_8", "storage", Some(200), Some(1))
            },
        ]);
        let nics = attached_nics(&four(), &servers, &catalog, "hgx-h200");
        type Row<'a> = (&'a str, u32, u8, Option<&'a str>, Option<&'a str>, bool);
        let got: Vec<Row> = nics
            .iter()
            .map(|n| {
                (
                    n.name.as_str(),
                    n.gbps,
                    n.numa,
                    n.pcie_root.as_deref(),
                    n.pcie_switch.as_deref(),
                    n.rdma,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("mlx5_4", 400, 1, Some("pci0000:97"), Some("sw4"), true),
                ("mlx5_8", 200, 1, None, Some("sw9"), false),
            ]
        );
        assert!(attached_nics(&four(), &servers, &catalog, "dgx-h100").is_empty());
    }

    #[test]
    fn secondary_addresses_follow_the_pod_octet_in_the_nodes_slash_24() {
        let cases = [
            ("storage", 0, 2, Some("172.17.0.2/16")),
            ("hpn", 5, 17, Some("172.30.5.17/16")),
            ("nowhere", 0, 2, None),
        ];
        for (network, index, octet, want) in cases {
            let got = secondary_address(&four(), network, index, octet)
                .map(|(ip, prefix)| format!("{ip}/{prefix}"));
            assert_eq!(got.as_deref(), want, "{network}");
        }
    }
}
