//! Property: an evaluator changed step by step (pods, namespaces and policies added,
//! relabelled, replaced and removed in any order) decides exactly as one built from scratch
//! from the final objects — every pair's verdict, the matrix, and which policies select
//! each pod — and a policy change touches only the pods the policy selected or selects.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use proptest::prelude::*;
use tessera_netpol::cluster::{
    self, AdminNetworkPolicy, AdminRule, AdminSpec, ClusterNetworkPolicy,
};
use tessera_netpol::model::{Labels, NamedPort};
use tessera_netpol::{Endpoint, Evaluator, PodInfo, Policy, PolicyRef, Protocol};

const NAMESPACES: [&str; 3] = ["x", "y", "z"];
const PODS: [&str; 3] = ["a", "b", "c"];

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn selector(choice: u8) -> Option<LabelSelector> {
    let by = |k: &str, v: &str| LabelSelector {
        match_labels: Some([(k.to_string(), v.to_string())].into()),
        ..Default::default()
    };
    match choice % 6 {
        0 => None,
        1 => Some(LabelSelector::default()),
        2 => Some(by("pod", "a")),
        3 => Some(by("pod", "b")),
        4 => Some(by("team", "red")),
        _ => Some(by("team", "blue")),
    }
}

fn ns_selector(choice: u8) -> Option<LabelSelector> {
    let by = |v: &str| LabelSelector {
        match_labels: Some([("kubernetes.io/metadata.name".to_string(), v.to_string())].into()),
        ..Default::default()
    };
    match choice % 5 {
        0 => None,
        1 => Some(LabelSelector::default()),
        2 => Some(by("x")),
        3 => Some(by("y")),
        _ => Some(LabelSelector {
            match_labels: Some([("env".to_string(), "prod".to_string())].into()),
            ..Default::default()
        }),
    }
}

fn peer(choice: (u8, u8, u8)) -> NetworkPolicyPeer {
    if choice.2.is_multiple_of(7) {
        return NetworkPolicyPeer {
            ip_block: Some(k8s_openapi::api::networking::v1::IPBlock {
                cidr: "10.0.0.0/8".into(),
                except: Some(vec![format!("10.{}.0.0/16", choice.0 % 4)]),
            }),
            ..Default::default()
        };
    }
    let pods = selector(choice.0);
    let namespaces = ns_selector(choice.1);
    NetworkPolicyPeer {
        pod_selector: if pods.is_none() && namespaces.is_none() {
            Some(LabelSelector::default())
        } else {
            pods
        },
        namespace_selector: namespaces,
        ip_block: None,
    }
}

fn port(choice: u8) -> NetworkPolicyPort {
    match choice % 5 {
        0 => NetworkPolicyPort {
            port: Some(IntOrString::Int(80)),
            ..Default::default()
        },
        1 => NetworkPolicyPort {
            port: Some(IntOrString::String("serve-81-tcp".into())),
            ..Default::default()
        },
        2 => NetworkPolicyPort {
            port: Some(IntOrString::Int(79)),
            end_port: Some(81),
            ..Default::default()
        },
        3 => NetworkPolicyPort {
            protocol: Some("UDP".into()),
            ..Default::default()
        },
        _ => NetworkPolicyPort {
            port: Some(IntOrString::String("serve-80-tcp".into())),
            ..Default::default()
        },
    }
}

type PolicySeed = (u8, u8, u8, Vec<(u8, u8, u8)>, Vec<u8>, Vec<(u8, u8, u8)>);

fn network_policy(seed: &PolicySeed) -> Policy {
    let (name, target, types, ingress_peers, ports, egress_peers) = seed;
    let ingress = (!ingress_peers.is_empty() || types.is_multiple_of(2)).then(|| {
        vec![NetworkPolicyIngressRule {
            from: (!ingress_peers.is_empty())
                .then(|| ingress_peers.iter().map(|p| peer(*p)).collect()),
            ports: (!ports.is_empty()).then(|| ports.iter().map(|p| port(*p)).collect()),
        }]
    });
    let egress = (!egress_peers.is_empty()).then(|| {
        vec![NetworkPolicyEgressRule {
            to: Some(egress_peers.iter().map(|p| peer(*p)).collect()),
            ports: (!ports.is_empty()).then(|| ports.iter().map(|p| port(*p)).collect()),
        }]
    });
    let policy_types = match types % 4 {
        0 => None,
        1 => Some(vec!["Ingress".to_string()]),
        2 => Some(vec!["Egress".to_string()]),
        _ => Some(vec!["Ingress".to_string(), "Egress".to_string()]),
    };
    Policy::from_network_policy(&NetworkPolicy {
        metadata: ObjectMeta {
            namespace: Some(NAMESPACES[usize::from(name % 3)].into()),
            name: Some(format!("np-{}", name % 4)),
            ..Default::default()
        },
        spec: Some(NetworkPolicySpec {
            pod_selector: selector(*target),
            policy_types,
            ingress,
            egress,
        }),
    })
}

fn cluster_policy(seed: &(u8, u8, u8, Vec<(u8, u8)>)) -> Policy {
    let (name, priority, subject, rules) = seed;
    let action = |a: u8| ["Allow", "Deny", "Pass"][usize::from(a % 3)].to_string();
    let to_rule = |(a, p): &(u8, u8), ingress: bool| {
        let peer = cluster::Peer {
            namespaces: ns_selector(*p).filter(|_| p.is_multiple_of(2)),
            pods: (p % 2 == 1).then(|| cluster::NamespacedPod {
                namespace_selector: ns_selector(*p).unwrap_or_default(),
                pod_selector: selector(*p).unwrap_or_default(),
            }),
            ..Default::default()
        };
        AdminRule {
            name: format!("r{a}{p}"),
            action: action(*a),
            from: if ingress { vec![peer.clone()] } else { vec![] },
            to: if ingress { vec![] } else { vec![peer] },
            ports: (a % 4 == 3).then(|| {
                vec![cluster::AdminPort {
                    named_port: Some("serve-80-tcp".into()),
                    ..Default::default()
                }]
            }),
        }
    };
    let spec = AdminSpec {
        priority: i32::from(priority % 3),
        subject: cluster::Subject {
            namespaces: ns_selector(*subject).or_else(|| Some(LabelSelector::default())),
            pods: None,
        },
        ingress: rules.iter().map(|r| to_rule(r, true)).collect(),
        egress: rules.iter().map(|r| to_rule(r, false)).collect(),
    };
    if name.is_multiple_of(3) {
        let mut cnp = ClusterNetworkPolicy::default();
        cnp.metadata.name = Some(format!("cnp-{}", name % 2));
        cnp.spec = cluster::ClusterSpec {
            tier: if priority.is_multiple_of(2) {
                "Admin".into()
            } else {
                "Baseline".into()
            },
            priority: i32::from(priority % 3),
            subject: spec.subject.clone(),
            ingress: vec![],
            egress: rules
                .iter()
                .map(|(a, p)| cluster::ClusterRule {
                    name: String::new(),
                    action: ["Accept", "Deny", "Pass"][usize::from(a % 3)].into(),
                    from: vec![],
                    to: vec![cluster::Peer {
                        namespaces: ns_selector(*p).or_else(|| Some(LabelSelector::default())),
                        ..Default::default()
                    }],
                    protocols: None,
                })
                .collect(),
        };
        return Policy::from_cluster(&cnp);
    }
    if name % 3 == 1 {
        let mut banp = cluster::BaselineAdminNetworkPolicy::default();
        banp.metadata.name = Some("default".into());
        banp.spec = spec;
        return Policy::from_baseline(&banp);
    }
    let mut anp = AdminNetworkPolicy::default();
    anp.metadata.name = Some(format!("anp-{}", name % 2));
    anp.spec = spec;
    Policy::from_admin(&anp)
}

#[derive(Debug, Clone)]
enum Op {
    Pod(u8, u8, u8),
    RemovePod(u8),
    Namespace(u8, bool),
    Policy(PolicySeed),
    Cluster((u8, u8, u8, Vec<(u8, u8)>)),
    RemovePolicy(u8),
}

fn op() -> impl Strategy<Value = Op> {
    let small = 0u8..12;
    let peer = (0u8..12, 0u8..12, 0u8..12);
    prop_oneof![
        (0u8..9, 0u8..4, 0u8..4).prop_map(|(p, team, ip)| Op::Pod(p, team, ip)),
        (0u8..9).prop_map(Op::RemovePod),
        (0u8..3, any::<bool>()).prop_map(|(n, prod)| Op::Namespace(n, prod)),
        (
            small.clone(),
            small.clone(),
            small.clone(),
            prop::collection::vec(peer.clone(), 0..3),
            prop::collection::vec(0u8..5, 0..3),
            prop::collection::vec(peer, 0..3)
        )
            .prop_map(Op::Policy),
        (
            small.clone(),
            small.clone(),
            small.clone(),
            prop::collection::vec((0u8..12, 0u8..12), 1..4)
        )
            .prop_map(Op::Cluster),
        small.prop_map(Op::RemovePolicy),
    ]
}

fn pod(index: u8, team: u8, ip: u8) -> PodInfo {
    let ns = NAMESPACES[usize::from(index / 3)];
    let name = PODS[usize::from(index % 3)];
    let team = ["red", "blue", "green", "red"][usize::from(team % 4)];
    let port = |name: &str, port: u16| NamedPort {
        name: name.into(),
        port,
        protocol: Protocol::Tcp,
    };
    PodInfo {
        namespace: ns.into(),
        name: name.into(),
        labels: labels(&[("pod", name), ("team", team)]),
        ips: vec![
            format!("10.{}.0.{}", ip % 3, index + 1)
                .parse()
                .expect("ip"),
        ],
        // Pod a serves 80 under the name serve-81-tcp: named ports resolve per pod.
        ports: if name == "a" {
            vec![port("serve-81-tcp", 80), port("serve-80-tcp", 81)]
        } else {
            vec![port("serve-80-tcp", 80), port("serve-81-tcp", 81)]
        },
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn incremental_equals_from_scratch(ops in prop::collection::vec(op(), 1..40)) {
        let mut evaluator = Evaluator::new();
        let mut namespaces: BTreeMap<String, Labels> = BTreeMap::new();
        let mut pods: BTreeMap<(String, String), PodInfo> = BTreeMap::new();
        let mut policies: BTreeMap<PolicyRef, Policy> = BTreeMap::new();
        for op in &ops {
            match op {
                Op::Pod(p, team, ip) => {
                    let pod = pod(*p, *team, *ip);
                    pods.insert((pod.namespace.clone(), pod.name.clone()), pod.clone());
                    evaluator.upsert_pod(pod);
                }
                Op::RemovePod(p) => {
                    let pod = pod(*p, 0, 0);
                    pods.remove(&(pod.namespace.clone(), pod.name.clone()));
                    evaluator.remove_pod(&pod.namespace, &pod.name);
                }
                Op::Namespace(n, prod) => {
                    let name = NAMESPACES[usize::from(*n)];
                    let l = if *prod { labels(&[("env", "prod")]) } else { Labels::new() };
                    namespaces.insert(name.into(), l.clone());
                    evaluator.upsert_namespace(name, &l);
                }
                Op::Policy(seed) => {
                    let policy = network_policy(seed);
                    let before: BTreeSet<_> = evaluator.subjects(&policy.id).into_iter().collect();
                    policies.insert(policy.id.clone(), policy.clone());
                    let touched = evaluator.upsert_policy(policy.clone());
                    let after: BTreeSet<_> = evaluator.subjects(&policy.id).into_iter().collect();
                    let touched: BTreeSet<_> = touched.pods.into_iter().collect();
                    prop_assert!(touched.is_subset(&before.union(&after).copied().collect()));
                    prop_assert!(before.symmetric_difference(&after).all(|p| touched.contains(p)));
                }
                Op::Cluster(seed) => {
                    let policy = cluster_policy(seed);
                    policies.insert(policy.id.clone(), policy.clone());
                    evaluator.upsert_policy(policy);
                }
                Op::RemovePolicy(choice) => {
                    if let Some(id) = policies.keys().nth(usize::from(*choice)).cloned() {
                        let before: BTreeSet<_> = evaluator.subjects(&id).into_iter().collect();
                        policies.remove(&id);
                        let touched: BTreeSet<_> = evaluator.remove_policy(&id).pods.into_iter().collect();
                        prop_assert_eq!(touched, before);
                    }
                }
            }
        }
        let scratch = Evaluator::build(
            namespaces.clone(),
            pods.values().cloned(),
            policies.values().cloned(),
        );
        let keys: Vec<_> = pods.keys().cloned().collect();
        let ids: Vec<_> = keys.iter().map(|(ns, n)| evaluator.pod_id(ns, n).expect("pod")).collect();
        let scratch_ids: Vec<_> = keys.iter().map(|(ns, n)| scratch.pod_id(ns, n).expect("pod")).collect();
        for (a, b) in ids.iter().zip(&scratch_ids) {
            let names = |e: &Evaluator, id| e.selecting(id).iter().filter_map(|p| e.policy(*p)).map(|p| p.id.clone()).collect::<Vec<_>>();
            prop_assert_eq!(names(&evaluator, *a), names(&scratch, *b));
        }
        for (port, proto) in [(80, Protocol::Tcp), (81, Protocol::Tcp), (80, Protocol::Udp)] {
            let matrix = evaluator.matrix(&ids, port, proto);
            let scratch_matrix = scratch.matrix(&scratch_ids, port, proto);
            for i in 0..ids.len() {
                for j in 0..ids.len() {
                    let verdict = evaluator.verdict(Endpoint::Pod(ids[i]), Endpoint::Pod(ids[j]), port, proto);
                    let scratch_verdict = scratch.verdict(Endpoint::Pod(scratch_ids[i]), Endpoint::Pod(scratch_ids[j]), port, proto);
                    prop_assert_eq!(&verdict, &scratch_verdict);
                    prop_assert_eq!(verdict.allowed, matrix.allowed(i, j), "{:?} → {:?}", keys[i], keys[j]);
                    prop_assert_eq!(scratch_matrix.allowed(i, j), matrix.allowed(i, j));
                }
            }
        }
    }
}
