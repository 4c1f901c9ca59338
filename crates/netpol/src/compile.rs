//! One form for every kind of policy: a subject, a tier and priority, and per direction an
//! ordered list of rules (action, peers, ports). NetworkPolicy, AdminNetworkPolicy,
//! BaselineAdminNetworkPolicy and ClusterNetworkPolicy are compiled into it here, with each
//! kind's defaults (policyTypes, protocol TCP, empty selectors); whether a rule matches a
//! connection is answered here too. Knows nothing of indexes or of the order of tiers.

use std::net::IpAddr;

use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tessera_model::selector::matches_typed;

use crate::cidr::{Cidr, IpBlock};
use crate::cluster::{self, AdminNetworkPolicy, BaselineAdminNetworkPolicy, ClusterNetworkPolicy};
use crate::model::{Direction, Labels, PodInfo, PolicyKind, PolicyRef, Protocol, Tier};

/// What a matching rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Allow (ANP/BANP `Allow`, CNP `Accept`, every NetworkPolicy rule).
    Allow,
    /// Deny.
    Deny,
    /// Skip the rest of the tier.
    Pass,
}

/// Which namespaces a subject or peer reaches.
#[derive(Debug, Clone, PartialEq)]
pub enum Namespaces {
    /// One namespace, by name (a NetworkPolicy's own).
    Named(String),
    /// Those a selector selects (empty = all).
    Selected(LabelSelector),
}

impl Namespaces {
    /// Whether a namespace (name, labels) is among them.
    pub fn matches(&self, name: &str, labels: &Labels) -> bool {
        match self {
            Namespaces::Named(own) => own == name,
            Namespaces::Selected(selector) => matches_typed(selector, labels),
        }
    }
}

/// Pods: a namespace match AND a pod selector (empty = all).
#[derive(Debug, Clone, PartialEq)]
pub struct PodSet {
    /// The namespaces.
    pub namespaces: Namespaces,
    /// The pods within them.
    pub pods: LabelSelector,
}

impl PodSet {
    /// Whether a pod in a namespace with `namespace_labels` is in the set.
    pub fn contains(&self, pod: &PodInfo, namespace_labels: &Labels) -> bool {
        self.namespaces.matches(&pod.namespace, namespace_labels)
            && matches_typed(&self.pods, &pod.labels)
    }
}

/// A peer of a rule.
#[derive(Debug, Clone, PartialEq)]
pub enum Peer {
    /// Pods.
    Pods(PodSet),
    /// Addresses (pod IPs and external ones).
    Block(IpBlock),
    /// Networks (CNP/ANP `networks`): any of these blocks.
    Networks(Vec<Cidr>),
    /// Matches nothing (nodes, domain names, a malformed block).
    Nothing,
    /// Matches every pod and address (a Deny or Pass peer of an unknown newer form).
    Everything,
}

/// The other end of a connection, as a peer sees it.
#[derive(Debug, Clone, Copy)]
pub enum Other<'a> {
    /// A pod and its namespace's labels.
    Pod(&'a PodInfo, &'a Labels),
    /// An address outside the pods known.
    Address(IpAddr),
}

impl Peer {
    /// Whether the other end of a connection is this peer.
    pub fn matches(&self, other: Other<'_>) -> bool {
        match (self, other) {
            (Peer::Pods(set), Other::Pod(pod, ns_labels)) => set.contains(pod, ns_labels),
            (Peer::Block(block), Other::Pod(pod, _)) => {
                pod.ips.iter().any(|ip| block.contains(*ip))
            }
            (Peer::Block(block), Other::Address(ip)) => block.contains(ip),
            (Peer::Networks(cidrs), Other::Pod(pod, _)) => pod
                .ips
                .iter()
                .any(|ip| cidrs.iter().any(|c| c.contains(*ip))),
            (Peer::Networks(cidrs), Other::Address(ip)) => cidrs.iter().any(|c| c.contains(ip)),
            (Peer::Everything, _) => true,
            _ => false,
        }
    }
}

/// One port match.
#[derive(Debug, Clone, PartialEq)]
pub enum PortMatch {
    /// Ports `start..=end` of a protocol (every port: 1..=65535).
    Range {
        /// Protocol.
        protocol: Protocol,
        /// First port.
        start: u16,
        /// Last port.
        end: u16,
    },
    /// The destination pod's container port of this name (and protocol, when given).
    Named {
        /// Protocol the container port must have (`None`: any).
        protocol: Option<Protocol>,
        /// Port name.
        name: String,
    },
    /// Matches nothing (a malformed port).
    Nothing,
}

impl PortMatch {
    /// Whether a connection to `port`/`protocol` of `destination` (a pod, or `None` for an
    /// address) matches.
    pub fn matches(&self, port: u16, protocol: Protocol, destination: Option<&PodInfo>) -> bool {
        match self {
            PortMatch::Range {
                protocol: p,
                start,
                end,
            } => *p == protocol && (*start..=*end).contains(&port),
            PortMatch::Named { protocol: p, name } => destination
                .and_then(|pod| pod.named_port(name, *p))
                .is_some_and(|(number, proto)| number == port && proto == protocol),
            PortMatch::Nothing => false,
        }
    }

    /// Whether the match depends on the destination pod.
    pub fn is_named(&self) -> bool {
        matches!(self, PortMatch::Named { .. })
    }
}

/// A rule: an action on the traffic of some peers to some ports.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The rule's name (cluster-wide kinds), if any.
    pub name: Option<String>,
    /// What it does.
    pub action: Action,
    /// The peers; `None` = every peer (a NetworkPolicy rule without `from`/`to`).
    pub peers: Option<Vec<Peer>>,
    /// The ports; `None` = every port of every protocol.
    pub ports: Option<Vec<PortMatch>>,
}

impl Rule {
    /// Whether the rule matches a connection whose other end is `other` and whose
    /// destination is `destination` (for named ports).
    pub fn matches(
        &self,
        other: Other<'_>,
        port: u16,
        protocol: Protocol,
        destination: Option<&PodInfo>,
    ) -> bool {
        self.ports_match(port, protocol, destination) && self.peers_match(other)
    }

    /// Whether the ports match.
    pub fn ports_match(
        &self,
        port: u16,
        protocol: Protocol,
        destination: Option<&PodInfo>,
    ) -> bool {
        self.ports
            .as_ref()
            .is_none_or(|ports| ports.iter().any(|m| m.matches(port, protocol, destination)))
    }

    /// Whether the peers match.
    pub fn peers_match(&self, other: Other<'_>) -> bool {
        self.peers
            .as_ref()
            .is_none_or(|peers| peers.iter().any(|p| p.matches(other)))
    }

    /// Whether any port match names a port.
    pub fn has_named_ports(&self) -> bool {
        self.ports.iter().flatten().any(PortMatch::is_named)
    }
}

/// A policy of any kind, compiled.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Identity.
    pub id: PolicyRef,
    /// Tier.
    pub tier: Tier,
    /// Priority within the tier (lower first; 0 for NetworkPolicy).
    pub priority: i32,
    /// The pods it applies to.
    pub subject: PodSet,
    /// Ingress rules; `None` = the policy does not affect ingress.
    pub ingress: Option<Vec<Rule>>,
    /// Egress rules; `None` = the policy does not affect egress.
    pub egress: Option<Vec<Rule>>,
}

impl Policy {
    /// The rules of a direction.
    pub fn rules(&self, direction: Direction) -> Option<&[Rule]> {
        match direction {
            Direction::Ingress => self.ingress.as_deref(),
            Direction::Egress => self.egress.as_deref(),
        }
    }

    /// The order policies are evaluated in: tier, priority, kind, namespace, name.
    pub fn order_key(&self) -> (Tier, i32, PolicyKind, Option<&str>, &str) {
        (
            self.tier,
            self.priority,
            self.id.kind,
            self.id.namespace.as_deref(),
            &self.id.name,
        )
    }

    /// A NetworkPolicy: policyTypes default to Ingress, plus Egress when egress rules are
    /// present; peers are ORed, a peer's selectors ANDed; ports default to TCP.
    pub fn from_network_policy(policy: &NetworkPolicy) -> Policy {
        let namespace = policy.metadata.namespace.clone().unwrap_or_default();
        let spec = policy.spec.clone().unwrap_or_default();
        let types: Vec<String> = spec.policy_types.clone().unwrap_or_else(|| {
            let mut types = vec!["Ingress".to_string()];
            if spec.egress.as_ref().is_some_and(|e| !e.is_empty()) {
                types.push("Egress".to_string());
            }
            types
        });
        let has = |t: &str| types.iter().any(|x| x == t);
        let rules = |peers: Option<&Vec<NetworkPolicyPeer>>,
                     ports: Option<&Vec<NetworkPolicyPort>>| Rule {
            name: None,
            action: Action::Allow,
            peers: peers.filter(|p| !p.is_empty()).map(|p| {
                p.iter()
                    .map(|peer| network_policy_peer(peer, &namespace))
                    .collect()
            }),
            ports: ports
                .filter(|p| !p.is_empty())
                .map(|p| p.iter().map(network_policy_port).collect()),
        };
        let ingress = has("Ingress").then(|| {
            spec.ingress
                .iter()
                .flatten()
                .map(|r| rules(r.from.as_ref(), r.ports.as_ref()))
                .collect()
        });
        let egress = has("Egress").then(|| {
            spec.egress
                .iter()
                .flatten()
                .map(|r| rules(r.to.as_ref(), r.ports.as_ref()))
                .collect()
        });
        Policy {
            id: PolicyRef {
                kind: PolicyKind::NetworkPolicy,
                namespace: Some(namespace.clone()),
                name: policy.metadata.name.clone().unwrap_or_default(),
            },
            tier: Tier::NetworkPolicy,
            priority: 0,
            subject: PodSet {
                namespaces: Namespaces::Named(namespace),
                pods: spec.pod_selector.unwrap_or_default(),
            },
            ingress,
            egress,
        }
    }

    /// An AdminNetworkPolicy (Admin tier; `Allow`, `Deny`, `Pass`).
    pub fn from_admin(policy: &AdminNetworkPolicy) -> Policy {
        admin_policy(
            PolicyKind::AdminNetworkPolicy,
            &policy.metadata.name,
            Tier::Admin,
            policy.spec.priority,
            &policy.spec,
        )
    }

    /// A BaselineAdminNetworkPolicy (Baseline tier; `Allow`, `Deny`).
    pub fn from_baseline(policy: &BaselineAdminNetworkPolicy) -> Policy {
        admin_policy(
            PolicyKind::BaselineAdminNetworkPolicy,
            &policy.metadata.name,
            Tier::Baseline,
            0,
            &policy.spec,
        )
    }

    /// A ClusterNetworkPolicy (`tier: Admin` or `Baseline`; `Accept`, `Deny`, `Pass`).
    pub fn from_cluster(policy: &ClusterNetworkPolicy) -> Policy {
        let spec = &policy.spec;
        let rules = |rules: &[cluster::ClusterRule], ingress: bool| -> Option<Vec<Rule>> {
            (!rules.is_empty()).then(|| {
                rules
                    .iter()
                    .map(|r| {
                        let action = action(&r.action, "Accept");
                        let peers = if ingress { &r.from } else { &r.to };
                        Rule {
                            name: (!r.name.is_empty()).then(|| r.name.clone()),
                            action,
                            peers: Some(cluster_peers(peers, action)),
                            ports: r
                                .protocols
                                .as_ref()
                                .map(|p| p.iter().flat_map(cluster_protocol).collect()),
                        }
                    })
                    .collect()
            })
        };
        Policy {
            id: PolicyRef {
                kind: PolicyKind::ClusterNetworkPolicy,
                namespace: None,
                name: policy.metadata.name.clone().unwrap_or_default(),
            },
            tier: if spec.tier == "Baseline" {
                Tier::Baseline
            } else {
                Tier::Admin
            },
            priority: spec.priority,
            subject: subject(&spec.subject),
            ingress: rules(&spec.ingress, true),
            egress: rules(&spec.egress, false),
        }
    }
}

fn network_policy_peer(peer: &NetworkPolicyPeer, namespace: &str) -> Peer {
    if let Some(block) = &peer.ip_block {
        return IpBlock::parse(&block.cidr, block.except.as_deref().unwrap_or_default())
            .map_or(Peer::Nothing, Peer::Block);
    }
    match (&peer.namespace_selector, &peer.pod_selector) {
        (None, None) => Peer::Nothing,
        (Some(ns), pods) => Peer::Pods(PodSet {
            namespaces: Namespaces::Selected(ns.clone()),
            pods: pods.clone().unwrap_or_default(),
        }),
        (None, Some(pods)) => Peer::Pods(PodSet {
            namespaces: Namespaces::Named(namespace.to_string()),
            pods: pods.clone(),
        }),
    }
}

fn port_number(value: i32) -> Option<u16> {
    u16::try_from(value).ok().filter(|p| *p > 0)
}

fn network_policy_port(port: &NetworkPolicyPort) -> PortMatch {
    let Some(protocol) = Protocol::from_field(port.protocol.as_deref()) else {
        return PortMatch::Nothing;
    };
    match &port.port {
        None => PortMatch::Range {
            protocol,
            start: 1,
            end: u16::MAX,
        },
        Some(IntOrString::String(name)) => PortMatch::Named {
            protocol: Some(protocol),
            name: name.clone(),
        },
        Some(IntOrString::Int(number)) => {
            let end = port.end_port.unwrap_or(*number);
            match (port_number(*number), port_number(end)) {
                (Some(start), Some(end)) if start <= end => PortMatch::Range {
                    protocol,
                    start,
                    end,
                },
                _ => PortMatch::Nothing,
            }
        }
    }
}

fn subject(subject: &cluster::Subject) -> PodSet {
    match (&subject.namespaces, &subject.pods) {
        (Some(ns), _) => PodSet {
            namespaces: Namespaces::Selected(ns.clone()),
            pods: LabelSelector::default(),
        },
        (None, Some(pods)) => PodSet {
            namespaces: Namespaces::Selected(pods.namespace_selector.clone()),
            pods: pods.pod_selector.clone(),
        },
        // No subject: selects nothing (a selector that no labels satisfy).
        (None, None) => PodSet {
            namespaces: Namespaces::Named(String::new()),
            pods: LabelSelector::default(),
        },
    }
}

fn action(text: &str, allow: &str) -> Action {
    match text {
        t if t == allow => Action::Allow,
        "Pass" => Action::Pass,
        _ => Action::Deny,
    }
}

/// A cluster-wide rule's peers. A peer with no field set is of an unknown newer version and
/// fails closed: it matches nothing for an allowing rule and everything for Deny and Pass.
fn cluster_peers(peers: &[cluster::Peer], action: Action) -> Vec<Peer> {
    peers
        .iter()
        .map(|peer| {
            if let Some(ns) = &peer.namespaces {
                Peer::Pods(PodSet {
                    namespaces: Namespaces::Selected(ns.clone()),
                    pods: LabelSelector::default(),
                })
            } else if let Some(pods) = &peer.pods {
                Peer::Pods(PodSet {
                    namespaces: Namespaces::Selected(pods.namespace_selector.clone()),
                    pods: pods.pod_selector.clone(),
                })
            } else if let Some(networks) = &peer.networks {
                networks
                    .iter()
                    .map(|n| n.parse().ok())
                    .collect::<Option<Vec<Cidr>>>()
                    .map_or(Peer::Nothing, Peer::Networks)
            } else if peer.nodes.is_some() || peer.domain_names.is_some() || action == Action::Allow
            {
                Peer::Nothing
            } else {
                Peer::Everything
            }
        })
        .collect()
}

fn admin_port(port: &cluster::AdminPort) -> PortMatch {
    if let Some(number) = &port.port_number {
        return match (
            Protocol::from_field(Some(&number.protocol)),
            port_number(number.port),
        ) {
            (Some(protocol), Some(p)) => PortMatch::Range {
                protocol,
                start: p,
                end: p,
            },
            _ => PortMatch::Nothing,
        };
    }
    if let Some(name) = &port.named_port {
        return PortMatch::Named {
            protocol: None,
            name: name.clone(),
        };
    }
    if let Some(range) = &port.port_range {
        return match (
            Protocol::from_field(Some(&range.protocol)),
            port_number(range.start),
            port_number(range.end),
        ) {
            (Some(protocol), Some(start), Some(end)) if start <= end => PortMatch::Range {
                protocol,
                start,
                end,
            },
            _ => PortMatch::Nothing,
        };
    }
    PortMatch::Nothing
}

fn cluster_protocol(protocol: &cluster::ClusterProtocol) -> Vec<PortMatch> {
    if !protocol.destination_named_port.is_empty() {
        return vec![PortMatch::Named {
            protocol: None,
            name: protocol.destination_named_port.clone(),
        }];
    }
    [
        (Protocol::Tcp, &protocol.tcp),
        (Protocol::Udp, &protocol.udp),
        (Protocol::Sctp, &protocol.sctp),
    ]
    .into_iter()
    .filter_map(|(proto, ports)| ports.as_ref().map(|p| (proto, p)))
    .map(|(protocol, ports)| match &ports.destination_port {
        None => PortMatch::Range {
            protocol,
            start: 1,
            end: u16::MAX,
        },
        Some(dest) => match (&dest.range, port_number(dest.number)) {
            (Some(range), _) => match (port_number(range.start), port_number(range.end)) {
                (Some(start), Some(end)) if start <= end => PortMatch::Range {
                    protocol,
                    start,
                    end,
                },
                _ => PortMatch::Nothing,
            },
            (None, Some(p)) => PortMatch::Range {
                protocol,
                start: p,
                end: p,
            },
            (None, None) => PortMatch::Nothing,
        },
    })
    .collect()
}

fn admin_policy(
    kind: PolicyKind,
    name: &Option<String>,
    tier: Tier,
    priority: i32,
    spec: &cluster::AdminSpec,
) -> Policy {
    let rules = |rules: &[cluster::AdminRule], ingress: bool| -> Option<Vec<Rule>> {
        (!rules.is_empty()).then(|| {
            rules
                .iter()
                .map(|r| {
                    let action = action(&r.action, "Allow");
                    let peers = if ingress { &r.from } else { &r.to };
                    Rule {
                        name: (!r.name.is_empty()).then(|| r.name.clone()),
                        action,
                        peers: Some(cluster_peers(peers, action)),
                        ports: r.ports.as_ref().map(|p| p.iter().map(admin_port).collect()),
                    }
                })
                .collect()
        })
    };
    Policy {
        id: PolicyRef {
            kind,
            namespace: None,
            name: name.clone().unwrap_or_default(),
        },
        tier,
        priority,
        subject: subject(&spec.subject),
        ingress: rules(&spec.ingress, true),
        egress: rules(&spec.egress, false),
    }
}
