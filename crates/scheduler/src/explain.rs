//! `tessera explain pod`: every node's verdict from every filter (not only the first that
//! failed), what the pod's claims find on each node (devices matching each request, how many
//! are free), and the smallest changes that would let the pod fit — tolerate a taint, ask for
//! less of a resource, wait for a named pod that holds what is missing, relax a selector.
//!
//! The report groups nodes with the same verdicts (a thousand CPU nodes that all lack the
//! GPU read as one entry), naming the first few of each group.
//!
//! Pure: the scheduler's snapshot in, a report out.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;

use crate::extended::IN_MEMORY_NAME;
use crate::filters::{self, Plugin};
use crate::node_info::NodeInfo;
use crate::pod_topology::Context;
use crate::resources::{Amounts, pod_requests};
use crate::schedule::Scheduler;
use crate::volumes::PodVolumes;

/// One node's verdicts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeReport {
    /// The node.
    pub node: String,
    /// Each filter's verdict: (plugin, `None` = passes, or the reasons).
    pub verdicts: Vec<(Plugin, Option<Vec<String>>)>,
}

impl NodeReport {
    /// Whether every filter passed.
    pub fn fits(&self) -> bool {
        self.verdicts.iter().all(|(_, v)| v.is_none())
    }

    fn failing(&self) -> Vec<Plugin> {
        self.verdicts
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(p, _)| *p)
            .collect()
    }
}

/// The explanation of a pod's placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// Per node, by name.
    pub nodes: Vec<NodeReport>,
    /// What would make the pod fit, smallest first.
    pub suggestions: Vec<String>,
}

fn amount_text(resource: &str, milli: i128) -> String {
    if resource == "cpu" {
        if milli % 1000 == 0 {
            format!("{}", milli / 1000)
        } else {
            format!("{milli}m")
        }
    } else if resource == "memory" || resource == "ephemeral-storage" {
        let bytes = milli / 1000;
        if bytes % (1 << 30) == 0 {
            format!("{}Gi", bytes >> 30)
        } else {
            format!("{}Mi", bytes >> 20)
        }
    } else {
        format!("{}", milli / 1000)
    }
}

/// How many node names a group of nodes with the same verdicts lists before "and N more".
const NAMED_PER_GROUP: usize = 8;

/// A group's heading: its nodes' names (the first [`NAMED_PER_GROUP`]) and, for more than
/// one, how many.
fn group_heading(names: &[&str]) -> String {
    match names {
        [one] => format!("{one}:"),
        _ if names.len() <= NAMED_PER_GROUP => {
            format!("{} ({} nodes):", names.join(", "), names.len())
        }
        _ => format!(
            "{}, … and {} more ({} nodes):",
            names[..NAMED_PER_GROUP].join(", "),
            names.len() - NAMED_PER_GROUP,
            names.len()
        ),
    }
}

impl Explanation {
    /// Nodes with the same verdicts, in the order of each group's first node.
    fn groups(&self) -> Vec<(Vec<&str>, &NodeReport)> {
        let mut groups: Vec<(Vec<&str>, &NodeReport)> = Vec::new();
        for node in &self.nodes {
            match groups
                .iter_mut()
                .find(|(_, first)| first.verdicts == node.verdicts)
            {
                Some((names, _)) => names.push(&node.node),
                None => groups.push((vec![&node.node], node)),
            }
        }
        groups
    }

    /// The report as `tessera explain pod` prints it.
    pub fn render(&self, pod: &str) -> String {
        let mut out = String::new();
        let fitting = self.nodes.iter().filter(|n| n.fits()).count();
        let _ = writeln!(out, "Pod {pod}: {fitting}/{} nodes fit", self.nodes.len());
        for (names, report) in self.groups() {
            let _ = writeln!(out, "{}", group_heading(&names));
            for (plugin, verdict) in &report.verdicts {
                let text = match verdict {
                    None => "ok".to_string(),
                    Some(reasons) => reasons.join("; "),
                };
                let _ = writeln!(out, "  {plugin:?}: {text}");
            }
        }
        if !self.suggestions.is_empty() {
            let _ = writeln!(out, "To fit:");
            for suggestion in &self.suggestions {
                let _ = writeln!(out, "  - {suggestion}");
            }
        }
        out
    }
}

fn verdict<T>(result: Result<T, filters::Rejection>) -> Option<Vec<String>> {
    result.err().map(|r| r.reasons)
}

impl Scheduler {
    /// Explains where `pod` (with its resolved `claims`) fits and why not elsewhere.
    pub fn explain(&self, pod: &Pod, claims: &[ResourceClaim], pods: &[Pod]) -> Explanation {
        let demand = self.demand(pod);
        let requests = &demand.requests;
        let context = Context::new(pod, self.nodes(), &Default::default());
        let mut reports = Vec::new();
        let mut devices: BTreeMap<String, Vec<tessera_dra::Diagnosis>> = BTreeMap::new();
        let pod_volumes = self.pod_volumes(pod);
        for node in self.nodes() {
            let volume_verdict = match (&pod_volumes, self.volume_snapshot()) {
                (PodVolumes::Unschedulable(message), _) => Some(vec![message.clone()]),
                (PodVolumes::Claims(claims), Some(snapshot)) => {
                    verdict(crate::volumes::filter(claims, node, snapshot))
                }
                _ => None,
            };
            let node_claims = self.claims_on(pod, &demand, node, claims);
            let claims_verdict = self
                .claims_verdict(node, &node_claims)
                .map(|(reasons, found)| {
                    devices.insert(node.name.clone(), found);
                    reasons
                });
            let verdicts = vec![
                (
                    Plugin::NodeUnschedulable,
                    verdict(filters::node_unschedulable(pod, node)),
                ),
                (Plugin::NodeName, verdict(filters::node_name(pod, node))),
                (
                    Plugin::TaintToleration,
                    verdict(filters::taint_toleration(pod, node)).map(|_| untolerated(pod, node)),
                ),
                (
                    Plugin::NodeAffinity,
                    verdict(filters::node_affinity(pod, node)),
                ),
                (
                    Plugin::NodePorts,
                    verdict(filters::node_ports(&demand, node)),
                ),
                (
                    Plugin::NodeResourcesFit,
                    verdict(filters::node_resources_fit(&demand, node))
                        .map(|_| shortfall(requests, node)),
                ),
                (
                    Plugin::NodeResourceTopologyMatch,
                    verdict(filters::node_resource_topology(&demand, node)),
                ),
                (
                    Plugin::PodTopologySpread,
                    verdict(context.spread_filter(node)),
                ),
                (
                    Plugin::InterPodAffinity,
                    verdict(context.affinity_filter(node)),
                ),
                (Plugin::DynamicResources, claims_verdict),
                (Plugin::VolumeBinding, volume_verdict),
            ];
            reports.push(NodeReport {
                node: node.name.clone(),
                verdicts,
            });
        }
        let suggestions = suggest(pod, requests, self.nodes(), &reports, pods, &devices);
        Explanation {
            nodes: reports,
            suggestions,
        }
    }
}

/// The taints a pod does not tolerate on a node, as `key=value:effect`.
fn untolerated(pod: &Pod, node: &NodeInfo) -> Vec<String> {
    let tolerations = crate::filters::tolerations(pod);
    node.taints
        .iter()
        .filter(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
        .filter(|t| !tessera_model::taints::tolerated(tolerations, t))
        .map(|t| match t.value.as_deref().filter(|v| !v.is_empty()) {
            Some(value) => format!("untolerated taint {}={value}:{}", t.key, t.effect),
            None => format!("untolerated taint {}:{}", t.key, t.effect),
        })
        .collect()
}

/// Per resource: wanted, free.
fn shortfall(requests: &Amounts, node: &NodeInfo) -> Vec<String> {
    let mut out = Vec::new();
    for (name, amount) in requests {
        let free = node.allocatable.get(name).copied().unwrap_or(0)
            - node.requested.get(name).copied().unwrap_or(0);
        if *amount > free {
            out.push(format!(
                "Insufficient {name}: wants {}, {} free of {}",
                amount_text(name, *amount),
                amount_text(name, free.max(0)),
                amount_text(name, node.allocatable.get(name).copied().unwrap_or(0))
            ));
        }
    }
    let pods_free = node.allocatable.get("pods").copied().unwrap_or(0)
        - node.requested.get("pods").copied().unwrap_or(0);
    if pods_free < 1000 {
        out.push("Too many pods".into());
    }
    out
}

fn suggest(
    pod: &Pod,
    requests: &Amounts,
    nodes: &[Arc<NodeInfo>],
    reports: &[NodeReport],
    pods: &[Pod],
    devices: &BTreeMap<String, Vec<tessera_dra::Diagnosis>>,
) -> Vec<String> {
    let mut suggestions = Vec::new();
    if reports.iter().any(NodeReport::fits) {
        return suggestions;
    }
    let by_name: BTreeMap<&str, &NodeInfo> =
        nodes.iter().map(|n| (n.name.as_str(), &**n)).collect();
    for report in reports {
        let failing = report.failing();
        let Some(node) = by_name.get(report.node.as_str()) else {
            continue;
        };
        match failing.as_slice() {
            [Plugin::TaintToleration] => {
                let taints: Vec<String> = untolerated(pod, node)
                    .into_iter()
                    .map(|t| t.trim_start_matches("untolerated taint ").to_string())
                    .collect();
                suggestions.push(format!(
                    "tolerate {} to run on {}",
                    taints.join(", "),
                    node.name
                ));
            }
            [Plugin::NodeResourcesFit] => {
                for (name, amount) in requests {
                    let free = node.allocatable.get(name).copied().unwrap_or(0)
                        - node.requested.get(name).copied().unwrap_or(0);
                    if *amount <= free {
                        continue;
                    }
                    if node.allocatable.get(name).copied().unwrap_or(0) >= *amount {
                        // Enough exists: name the pods holding it.
                        let holders: Vec<String> = pods
                            .iter()
                            .filter(|p| {
                                p.spec.as_ref().and_then(|s| s.node_name.as_deref())
                                    == Some(node.name.as_str())
                            })
                            .filter(|p| pod_requests(p).get(name).copied().unwrap_or(0) > 0)
                            .map(|p| {
                                format!(
                                    "{}/{}",
                                    p.metadata.namespace.as_deref().unwrap_or_default(),
                                    p.metadata.name.as_deref().unwrap_or_default()
                                )
                            })
                            .collect();
                        if !holders.is_empty() {
                            suggestions.push(format!(
                                "wait for {} on {} to finish (they hold {name})",
                                holders.join(", "),
                                node.name
                            ));
                        }
                    }
                    if free > 0 {
                        suggestions.push(format!(
                            "ask for at most {} {name} to fit on {} now",
                            amount_text(name, free),
                            node.name
                        ));
                    }
                }
            }
            [Plugin::NodeAffinity] => suggestions.push(format!(
                "relax the node selector or affinity to allow {}",
                node.name
            )),
            [Plugin::DynamicResources] => {
                for found in devices.get(&node.name).into_iter().flatten() {
                    let short = found.wants.is_some_and(|n| n > found.free);
                    let special = found.claim.rsplit('/').next() == Some(IN_MEMORY_NAME);
                    if short && found.free > 0 && special {
                        suggestions.push(format!(
                            "ask for at most {} device(s) of class {} as extended resources to fit on {}",
                            found.free, found.class, node.name
                        ));
                    } else if short && found.free > 0 {
                        suggestions.push(format!(
                            "ask for at most {} device(s) in request {} of claim {} to fit on {}",
                            found.free, found.request, found.claim, node.name
                        ));
                    } else if short && found.matching > found.free {
                        suggestions.push(format!(
                            "wait for the {} device(s) of class {} in use on {} to be released",
                            found.matching - found.free,
                            found.class,
                            node.name
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    suggestions.sort();
    suggestions.dedup();
    suggestions
}

/// Explains `pod` over a whole cluster as listed: the nodes with every other pod on them (the
/// pod itself does not count against the nodes it is judged for), the DRA objects, and the
/// pod's own claims found by name in its namespace. What `tessera explain pod` and the pending
/// runbook both ask.
pub fn explain_in_cluster(
    pod: &Pod,
    nodes: &[k8s_openapi::api::core::v1::Node],
    pods: &[Pod],
    claims: &[ResourceClaim],
    slices: &[k8s_openapi::api::resource::v1::ResourceSlice],
    classes: &[k8s_openapi::api::resource::v1::DeviceClass],
) -> Explanation {
    explain_in_cluster_with_volumes(pod, nodes, pods, claims, slices, classes, None)
}

/// [`explain_in_cluster`] with the cluster's storage objects, so VolumeBinding's verdict
/// is given too.
pub fn explain_in_cluster_with_volumes(
    pod: &Pod,
    nodes: &[k8s_openapi::api::core::v1::Node],
    pods: &[Pod],
    claims: &[ResourceClaim],
    slices: &[k8s_openapi::api::resource::v1::ResourceSlice],
    classes: &[k8s_openapi::api::resource::v1::DeviceClass],
    volumes: Option<crate::volumes::Volumes>,
) -> Explanation {
    let others: Vec<Pod> = pods
        .iter()
        .filter(|p| p.metadata.uid != pod.metadata.uid)
        .cloned()
        .collect();
    let namespace = pod.metadata.namespace.as_deref();
    let pod_claims: Vec<ResourceClaim> = tessera_model::pod_claims::claim_names(pod)
        .into_iter()
        .filter_map(|(_, claim_name)| {
            let claim_name = claim_name?;
            claims
                .iter()
                .find(|k| {
                    k.metadata.namespace.as_deref() == namespace
                        && k.metadata.name.as_deref() == Some(claim_name.as_str())
                })
                .cloned()
        })
        .collect();
    let scheduler = Scheduler::new(
        crate::node_info::build(nodes, &others),
        slices.to_vec(),
        classes.to_vec(),
        claims.iter().cloned().map(std::sync::Arc::new),
        crate::score::Strategy::default(),
    );
    let scheduler = match volumes {
        Some(volumes) => scheduler.with_volumes(volumes),
        None => scheduler,
    };
    scheduler.explain(pod, &pod_claims, &others)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(node: &str, taint: Option<&str>) -> NodeReport {
        NodeReport {
            node: node.into(),
            verdicts: vec![
                (Plugin::NodeName, None),
                (
                    Plugin::TaintToleration,
                    taint.map(|t| vec![format!("untolerated taint {t}")]),
                ),
            ],
        }
    }

    /// A node's name and its untolerated taint.
    type Node<'a> = (&'a str, Option<&'a str>);

    #[test]
    fn nodes_with_the_same_verdicts_read_as_one_group() {
        let cpus: Vec<String> = (1..=10).map(|i| format!("cpu-{i:02}")).collect();
        // (nodes as (name, taint), the report's node lines)
        let table: Vec<(Vec<Node>, Vec<&str>)> = vec![
            (vec![("a", None)], vec!["a:"]),
            (
                vec![
                    ("a", Some("x=y:NoSchedule")),
                    ("b", None),
                    ("c", Some("x=y:NoSchedule")),
                ],
                vec!["a, c (2 nodes):", "b:"],
            ),
            (
                cpus.iter().map(|n| (n.as_str(), None)).collect(),
                vec![
                    "cpu-01, cpu-02, cpu-03, cpu-04, cpu-05, cpu-06, cpu-07, cpu-08, … and 2 more (10 nodes):",
                ],
            ),
        ];
        for (nodes, want) in table {
            let explanation = Explanation {
                nodes: nodes.iter().map(|(n, t)| report(n, *t)).collect(),
                suggestions: Vec::new(),
            };
            let text = explanation.render("default/p");
            let headings: Vec<&str> = text
                .lines()
                .skip(1)
                .filter(|line| !line.starts_with(' '))
                .collect();
            assert_eq!(headings, want, "{text}");
        }
        let grouped = Explanation {
            nodes: vec![
                report("a", Some("x=y:NoSchedule")),
                report("b", Some("x=y:NoSchedule")),
            ],
            suggestions: vec!["tolerate x=y:NoSchedule".into()],
        };
        assert_eq!(
            grouped.render("default/p"),
            "Pod default/p: 0/2 nodes fit\na, b (2 nodes):\n  NodeName: ok\n  TaintToleration: \
             untolerated taint x=y:NoSchedule\nTo fit:\n  - tolerate x=y:NoSchedule\n"
        );
    }
}
