//! A seeded synthetic cluster for benchmarks: namespaces of teams and environments, pods of
//! apps and roles with named ports and IPs, and a mix of NetworkPolicies (pod and namespace
//! selectors, both in one peer, ipBlocks with exceptions, named and ranged ports, egress)
//! with a few AdminNetworkPolicies, ClusterNetworkPolicies and a BaselineAdminNetworkPolicy.
//! Pure: the same seed gives the same cluster. Knows nothing of timing.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::cluster::{self, AdminNetworkPolicy, AdminRule, AdminSpec, ClusterNetworkPolicy};
use crate::compile::Policy;
use crate::model::{Labels, NamedPort, PodInfo, Protocol};
use crate::objects::Objects;

const PODS_PER_NAMESPACE: usize = 100;
const APPS: usize = 20;
const ROLES: [&str; 4] = ["web", "db", "cache", "batch"];
const TEAMS: usize = 10;

/// A small deterministic generator (xorshift64*).
struct Seeded(u64);

impl Seeded {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let value = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (value % n.max(1) as u64) as usize
    }
}

fn labels(pairs: &[(&str, String)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn match_labels(key: &str, value: String) -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([(key.to_string(), value)])),
        ..LabelSelector::default()
    }
}

/// The address of pod `index` of namespace `namespace`.
pub fn pod_ip(namespace: usize, index: usize) -> IpAddr {
    let [_, _, high, low] = u32::try_from(index).unwrap_or_default().to_be_bytes();
    IpAddr::V4(Ipv4Addr::new(
        10,
        u8::try_from(namespace % 256).unwrap_or(0),
        high,
        low,
    ))
}

/// A cluster of `pods` pods (100 a namespace) and `policies` policies, from `seed`.
pub fn cluster(pods: usize, policies: usize, seed: u64) -> Objects {
    let mut random = Seeded(seed | 1);
    let namespaces = pods.div_ceil(PODS_PER_NAMESPACE).max(1);
    let mut objects = Objects::default();
    for n in 0..namespaces {
        objects.namespaces.push((
            format!("ns-{n}"),
            labels(&[
                ("team", format!("t{}", n % TEAMS)),
                ("env", if n % 3 == 0 { "prod" } else { "dev" }.to_string()),
            ]),
        ));
    }
    for p in 0..pods {
        let (n, i) = (p / PODS_PER_NAMESPACE, p % PODS_PER_NAMESPACE);
        objects.pods.push(PodInfo {
            namespace: format!("ns-{n}"),
            name: format!("pod-{i}"),
            labels: labels(&[
                ("app", format!("a{}", random.below(APPS))),
                ("role", ROLES[random.below(ROLES.len())].to_string()),
            ]),
            ips: vec![pod_ip(n, i)],
            ports: vec![
                NamedPort {
                    name: "http".into(),
                    port: 80,
                    protocol: Protocol::Tcp,
                },
                NamedPort {
                    name: "metrics".into(),
                    port: 9090,
                    protocol: Protocol::Tcp,
                },
            ],
        });
    }
    for k in 0..policies {
        let policy = match k % 250 {
            0 => admin(k, &mut random),
            125 => cluster_policy(k, &mut random),
            _ => network_policy(k, namespaces, &mut random),
        };
        objects.policies.push(policy);
    }
    let mut baseline = cluster::BaselineAdminNetworkPolicy::default();
    baseline.metadata.name = Some("default".into());
    baseline.spec = AdminSpec {
        subject: cluster::Subject {
            namespaces: Some(match_labels("env", "prod".into())),
            pods: None,
        },
        ingress: vec![AdminRule {
            name: "deny-from-dev".into(),
            action: "Deny".into(),
            from: vec![cluster::Peer {
                namespaces: Some(match_labels("env", "dev".into())),
                ..Default::default()
            }],
            ..AdminRule::default()
        }],
        ..AdminSpec::default()
    };
    objects.policies.push(Policy::from_baseline(&baseline));
    objects
}

fn network_policy(k: usize, namespaces: usize, random: &mut Seeded) -> Policy {
    let namespace = random.below(namespaces);
    let app = || format!("a{}", k % APPS);
    let role = |r: &mut Seeded| ROLES[r.below(ROLES.len())].to_string();
    let port = |number: i32, end: Option<i32>| NetworkPolicyPort {
        port: Some(IntOrString::Int(number)),
        end_port: end,
        protocol: None,
    };
    let named = |name: &str| NetworkPolicyPort {
        port: Some(IntOrString::String(name.into())),
        ..NetworkPolicyPort::default()
    };
    let (ingress, egress, types) = match k % 4 {
        // Ingress from one role of the same namespace, to a named port.
        0 => (
            Some(vec![NetworkPolicyIngressRule {
                from: Some(vec![NetworkPolicyPeer {
                    pod_selector: Some(match_labels("role", role(random))),
                    ..Default::default()
                }]),
                ports: Some(vec![named("http")]),
            }]),
            None,
            vec!["Ingress"],
        ),
        // Ingress from an app of a team's namespaces (both selectors in one peer), or a role.
        1 => (
            Some(vec![NetworkPolicyIngressRule {
                from: Some(vec![
                    NetworkPolicyPeer {
                        namespace_selector: Some(match_labels(
                            "team",
                            format!("t{}", random.below(TEAMS)),
                        )),
                        pod_selector: Some(match_labels("app", format!("a{}", random.below(APPS)))),
                        ip_block: None,
                    },
                    NetworkPolicyPeer {
                        pod_selector: Some(match_labels("role", role(random))),
                        ..Default::default()
                    },
                ]),
                ports: Some(vec![port(80, Some(90)), named("metrics")]),
            }]),
            None,
            vec!["Ingress"],
        ),
        // Egress to production namespaces on 80, and to the pod network minus one namespace.
        2 => (
            None,
            Some(vec![
                NetworkPolicyEgressRule {
                    to: Some(vec![NetworkPolicyPeer {
                        namespace_selector: Some(match_labels("env", "prod".into())),
                        ..Default::default()
                    }]),
                    ports: Some(vec![port(80, None)]),
                },
                NetworkPolicyEgressRule {
                    to: Some(vec![NetworkPolicyPeer {
                        ip_block: Some(IPBlock {
                            cidr: "10.0.0.0/8".into(),
                            except: Some(vec![format!(
                                "10.{}.0.0/16",
                                random.below(namespaces) % 256
                            )]),
                        }),
                        ..Default::default()
                    }]),
                    ports: None,
                },
            ]),
            vec!["Egress"],
        ),
        // Both directions: ingress from the namespace's web pods, egress to its db pods.
        _ => (
            Some(vec![NetworkPolicyIngressRule {
                from: Some(vec![NetworkPolicyPeer {
                    pod_selector: Some(match_labels("role", "web".into())),
                    ..Default::default()
                }]),
                ports: None,
            }]),
            Some(vec![NetworkPolicyEgressRule {
                to: Some(vec![NetworkPolicyPeer {
                    pod_selector: Some(match_labels("role", "db".into())),
                    ..Default::default()
                }]),
                ports: Some(vec![port(5432, None), named("http")]),
            }]),
            vec!["Ingress", "Egress"],
        ),
    };
    Policy::from_network_policy(&NetworkPolicy {
        metadata: ObjectMeta {
            namespace: Some(format!("ns-{namespace}")),
            name: Some(format!("policy-{k}")),
            ..ObjectMeta::default()
        },
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(match_labels("app", app())),
            ingress,
            egress,
            policy_types: Some(types.into_iter().map(String::from).collect()),
        }),
    })
}

fn admin(k: usize, random: &mut Seeded) -> Policy {
    let mut anp = AdminNetworkPolicy::default();
    anp.metadata.name = Some(format!("admin-{k}"));
    anp.spec = AdminSpec {
        priority: i32::try_from(k % 1000).unwrap_or(0),
        subject: cluster::Subject {
            namespaces: Some(match_labels("team", format!("t{}", random.below(TEAMS)))),
            pods: None,
        },
        ingress: vec![
            AdminRule {
                name: "pass-same-team".into(),
                action: "Pass".into(),
                from: vec![cluster::Peer {
                    namespaces: Some(match_labels("env", "prod".into())),
                    ..Default::default()
                }],
                ..AdminRule::default()
            },
            AdminRule {
                name: "deny-batch".into(),
                action: "Deny".into(),
                from: vec![cluster::Peer {
                    pods: Some(cluster::NamespacedPod {
                        namespace_selector: LabelSelector::default(),
                        pod_selector: match_labels("role", "batch".into()),
                    }),
                    ..Default::default()
                }],
                ports: Some(vec![cluster::AdminPort {
                    named_port: Some("http".into()),
                    ..Default::default()
                }]),
                ..AdminRule::default()
            },
        ],
        egress: vec![],
    };
    Policy::from_admin(&anp)
}

fn cluster_policy(k: usize, random: &mut Seeded) -> Policy {
    let mut cnp = ClusterNetworkPolicy::default();
    cnp.metadata.name = Some(format!("cluster-{k}"));
    cnp.spec = cluster::ClusterSpec {
        tier: "Admin".into(),
        priority: i32::try_from(k % 1000).unwrap_or(0),
        subject: cluster::Subject {
            namespaces: Some(match_labels("team", format!("t{}", random.below(TEAMS)))),
            pods: None,
        },
        ingress: vec![],
        egress: vec![cluster::ClusterRule {
            name: "accept-metrics".into(),
            action: "Accept".into(),
            to: vec![cluster::Peer {
                namespaces: Some(LabelSelector::default()),
                ..Default::default()
            }],
            protocols: Some(vec![cluster::ClusterProtocol {
                tcp: Some(cluster::ProtocolPorts {
                    destination_port: Some(cluster::DestinationPort {
                        number: 9090,
                        range: None,
                    }),
                }),
                ..Default::default()
            }]),
            ..cluster::ClusterRule::default()
        }],
    };
    Policy::from_cluster(&cnp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_cluster_of_the_asked_size() {
        let a = cluster(250, 300, 7);
        let b = cluster(250, 300, 7);
        assert_eq!(a.pods, b.pods);
        assert_eq!(a.policies, b.policies);
        assert_eq!(a.pods.len(), 250);
        // 300 asked for, plus the baseline.
        assert_eq!(a.policies.len(), 301);
        assert_eq!(a.namespaces.len(), 3);
        let evaluator = a.evaluator();
        let ids = evaluator.pod_ids();
        let matrix = evaluator.matrix(&ids, 80, Protocol::Tcp);
        let allowed = matrix.count_allowed();
        // Policies isolate some pairs and leave others open.
        assert!(allowed > 0 && allowed < 250 * 250, "{allowed}");
    }
}
