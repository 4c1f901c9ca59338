//! Which scheduling-gated pods of an admitted PodSet go to which topology domain, as Kueue's
//! topology ungater decides it (`pkg/controller/tas/topology_ungater.go`): by rank when every
//! pod carries a usable index label (`readRanksIfAvailable`: ranks from the pod index label,
//! and the sub-group index when the request names one, minus the PodSet's offset; the ranks
//! fill the domains in order), else greedily (`assignGatedPodsToDomainsGreedy`: each domain
//! receives what its count still lacks after the pods already ungated into it). An ungated pod
//! gets the domain's level values as node selector entries.
//!
//! Knows nothing about pods as stored objects or how gates are removed (the shell patches).

use std::collections::BTreeMap;

use crate::tas::request::TopologyAssignment;
use crate::tas::tree::domain_id;

/// What the ungater reads of one pod of the PodSet (terminated pods are left out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodView {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// The pod still holds the `kueue.x-k8s.io/topology` scheduling gate.
    pub gated: bool,
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
}

/// How ranks are read (`PodSetTopologyRequest`'s index labels with the PodSet's offsets).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RankLabels {
    /// `podIndexLabel`.
    pub pod_index_label: String,
    /// `subGroupIndexLabel` with `subGroupCount`.
    pub sub_group: Option<(String, Option<i32>)>,
    /// The PodSet's first rank (a leader's PodSet comes first in its group).
    pub offset: i32,
    /// The rank bound of the PodSet (offset plus its count).
    pub max_rank: i32,
}

/// A pod to ungate and the node selector entries it gains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ungate {
    /// The pod's name.
    pub pod: String,
    /// The assigned domain's level values by level key.
    pub node_labels: BTreeMap<String, String>,
}

/// The gated pods of a PodSet with `count` pods to ungate, and where to.
pub fn pods_to_ungate(
    assignment: &TopologyAssignment,
    count: i32,
    pods: &[PodView],
    ranks: Option<&RankLabels>,
) -> Vec<Ungate> {
    let by_rank = rank_to_domain(assignment);
    let placed: Vec<(&PodView, usize)> = match ranks.and_then(|r| read_ranks(pods, r, count)) {
        Some(ranked) if ranks_consistent(&ranked, &by_rank, assignment) => ranked
            .into_iter()
            .filter(|(_, pod)| pod.gated)
            .map(|(rank, pod)| (pod, by_rank[rank]))
            .collect(),
        _ => greedy(assignment, pods),
    };
    placed
        .into_iter()
        .map(|(pod, domain)| Ungate {
            pod: pod.name.clone(),
            node_labels: assignment
                .levels
                .iter()
                .cloned()
                .zip(assignment.domains[domain].values.iter().cloned())
                .collect(),
        })
        .collect()
}

/// The domain index of every rank, ranks filling the domains in order (`rankToDomainID`).
fn rank_to_domain(assignment: &TopologyAssignment) -> Vec<usize> {
    assignment
        .domains
        .iter()
        .enumerate()
        .flat_map(|(index, domain)| {
            std::iter::repeat_n(index, usize::try_from(domain.count).unwrap_or(0))
        })
        .collect()
}

/// The domain id a pod's node selector points at.
fn selected_domain(assignment: &TopologyAssignment, pod: &PodView) -> String {
    let values: Vec<String> = assignment
        .levels
        .iter()
        .map(|level| pod.node_selector.get(level).cloned().unwrap_or_default())
        .collect();
    domain_id(&values)
}

/// Every rank has a domain and every ungated pod sits where its rank says.
fn ranks_consistent(
    ranked: &BTreeMap<usize, &PodView>,
    by_rank: &[usize],
    assignment: &TopologyAssignment,
) -> bool {
    ranked.iter().all(|(&rank, pod)| {
        let Some(&domain) = by_rank.get(rank) else {
            return false;
        };
        pod.gated
            || selected_domain(assignment, pod) == domain_id(&assignment.domains[domain].values)
    })
}

/// A label's value as an unsigned integer below `bound` (`ReadUIntFromLabelBelowBound`).
fn read_index(pod: &PodView, label: &str, bound: i32) -> Option<i64> {
    let value: i64 = pod.labels.get(label)?.parse().ok()?;
    (value >= 0 && value < i64::from(bound)).then_some(value)
}

/// The pods by rank (`readRanksForLabels`), `None` when a pod has no usable rank or two share
/// one.
fn read_ranks<'p>(
    pods: &'p [PodView],
    labels: &RankLabels,
    count: i32,
) -> Option<BTreeMap<usize, &'p PodView>> {
    let single_job_size = match &labels.sub_group {
        Some((_, Some(groups))) if *groups > 0 => count / groups,
        Some(_) => return None,
        None => count,
    };
    let mut ranked = BTreeMap::new();
    for pod in pods {
        let index = read_index(pod, &labels.pod_index_label, labels.max_rank)?;
        let mut rank = index - i64::from(labels.offset);
        if let Some((label, Some(groups))) = &labels.sub_group {
            let job = read_index(pod, label, *groups)?;
            if index >= i64::from(single_job_size) {
                return None;
            }
            rank = index + job * i64::from(single_job_size) - i64::from(labels.offset);
        }
        if rank < 0 || rank >= i64::from(count) {
            return None;
        }
        let rank = usize::try_from(rank).ok()?;
        if ranked.insert(rank, pod).is_some() {
            return None;
        }
    }
    Some(ranked)
}

/// Gated pods in order fill each domain up to its count less the pods already ungated there.
fn greedy<'p>(assignment: &TopologyAssignment, pods: &'p [PodView]) -> Vec<(&'p PodView, usize)> {
    let mut ungated: BTreeMap<String, i32> = BTreeMap::new();
    let mut gated = Vec::new();
    for pod in pods {
        if pod.gated {
            gated.push(pod);
        } else {
            *ungated.entry(selected_domain(assignment, pod)).or_default() += 1;
        }
    }
    let mut gated = gated.into_iter();
    let mut placed = Vec::new();
    for (index, domain) in assignment.domains.iter().enumerate() {
        let already = ungated
            .get(&domain_id(&domain.values))
            .copied()
            .unwrap_or(0);
        let missing = usize::try_from((domain.count - already).max(0)).unwrap_or(0);
        placed.extend(gated.by_ref().take(missing).map(|pod| (pod, index)));
    }
    placed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tas::request::TopologyDomainAssignment;

    const RACK: &str = "rack";
    const INDEX: &str = "batch.kubernetes.io/job-completion-index";

    fn assignment(domains: &[(&str, i32)]) -> TopologyAssignment {
        TopologyAssignment {
            levels: vec![RACK.to_owned()],
            domains: domains
                .iter()
                .map(|(rack, count)| TopologyDomainAssignment {
                    values: vec![(*rack).to_owned()],
                    count: *count,
                })
                .collect(),
        }
    }

    /// A pod: name, rank label, gated, the rack it was sent to.
    fn pod(name: &str, index: Option<&str>, rack: Option<&str>) -> PodView {
        PodView {
            name: name.to_owned(),
            labels: index
                .map(|i| BTreeMap::from([(INDEX.to_owned(), i.to_owned())]))
                .unwrap_or_default(),
            gated: rack.is_none(),
            node_selector: rack
                .map(|r| BTreeMap::from([(RACK.to_owned(), r.to_owned())]))
                .unwrap_or_default(),
        }
    }

    #[test]
    fn gated_pods_go_to_domains_by_rank_or_greedily() {
        let ranks = RankLabels {
            pod_index_label: INDEX.to_owned(),
            sub_group: None,
            offset: 0,
            max_rank: 3,
        };
        type Case = (
            &'static str,
            Vec<(&'static str, i32)>,
            Vec<PodView>,
            Vec<(&'static str, &'static str)>,
        );
        let cases: Vec<Case> = vec![
            (
                "greedy: domains filled in order",
                vec![("r1", 2), ("r2", 1)],
                vec![
                    pod("a", None, None),
                    pod("b", None, None),
                    pod("c", None, None),
                ],
                vec![("a", "r1"), ("b", "r1"), ("c", "r2")],
            ),
            (
                "greedy: ungated pods count towards their domain",
                vec![("r1", 2), ("r2", 1)],
                vec![
                    pod("a", None, Some("r1")),
                    pod("b", None, None),
                    pod("c", None, None),
                ],
                vec![("b", "r1"), ("c", "r2")],
            ),
            (
                "ranks: the index decides the domain",
                vec![("r1", 1), ("r2", 2)],
                vec![
                    pod("a", Some("2"), None),
                    pod("b", Some("0"), None),
                    pod("c", Some("1"), None),
                ],
                vec![("b", "r1"), ("c", "r2"), ("a", "r2")],
            ),
            (
                "ranks: duplicate indices fall back to greedy",
                vec![("r1", 1), ("r2", 2)],
                vec![pod("a", Some("1"), None), pod("b", Some("1"), None)],
                vec![("a", "r1"), ("b", "r2")],
            ),
            (
                "ranks: an ungated pod elsewhere than its rank says falls back to greedy",
                vec![("r1", 1), ("r2", 2)],
                vec![pod("a", Some("0"), Some("r2")), pod("b", Some("2"), None)],
                vec![("b", "r1")],
            ),
        ];
        for (name, domains, pods, want) in cases {
            let got: Vec<(String, String)> =
                pods_to_ungate(&assignment(&domains), 3, &pods, Some(&ranks))
                    .into_iter()
                    .map(|u| (u.pod, u.node_labels[RACK].clone()))
                    .collect();
            let want: Vec<(String, String)> = want
                .iter()
                .map(|(p, r)| ((*p).to_owned(), (*r).to_owned()))
                .collect();
            assert_eq!(got, want, "{name}");
        }
    }
}
