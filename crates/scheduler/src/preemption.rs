//! DefaultPreemption, for a pod that fits nowhere: on every node whose rejection removing pods
//! could cure (not NodeUnschedulable, NodeName, TaintToleration or NodeAffinity), take away
//! all lower-priority pods; if the pod then fits, give back as many as possible — PDB-violating
//! ones first, most important first — and the rest are the victims. Devices of claims reserved
//! only by victims count as freed. A victim in a pod group takes its whole group with it
//! (never strand part of a gang). The node is chosen in upstream's order: fewest PDB
//! violations, lowest highest-victim priority, smallest priority sum, fewest victims, latest
//! start among the most important victims, then by name. `preemptionPolicy: Never` never
//! preempts.
//!
//! Pure: the scheduler's snapshot in, a nomination out.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use tessera_model::selector::matches_typed;

use crate::filters::Plugin;

/// The label joining pods into a gang (scheduler-plugins' convention).
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

/// The pod group a pod belongs to (its [`POD_GROUP_LABEL`]).
pub fn pod_group(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(POD_GROUP_LABEL)
        .map(String::as_str)
}

/// A disruption budget as preemption sees it.
#[derive(Debug, Clone)]
pub struct Budget {
    /// Its namespace.
    pub namespace: String,
    /// The pods it covers.
    pub selector: LabelSelector,
    /// `status.disruptionsAllowed`.
    pub allowed: i64,
}

/// A preemption decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nomination {
    /// The node the pod is nominated to.
    pub node: String,
    /// The pods to evict: (namespace, name).
    pub victims: Vec<(String, String)>,
}

/// Why preemption found nothing, per node: the second half of a FailedScheduling message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoPreemption {
    /// `preemptionPolicy: Never`.
    NotEligible,
    /// Per node: true when removing pods could not help (unresolvable), false when no set of
    /// lower-priority victims makes room.
    Nodes(BTreeMap<String, bool>),
}

impl NoPreemption {
    /// Upstream's text after `preemption: `.
    pub fn message(&self) -> String {
        match self {
            NoPreemption::NotEligible => "not eligible due to preemptionPolicy=Never.".into(),
            NoPreemption::Nodes(nodes) => {
                let helpless = nodes.values().filter(|h| **h).count();
                let no_victims = nodes.len() - helpless;
                let mut parts = Vec::new();
                if no_victims > 0 {
                    parts.push(format!(
                        "{no_victims} No preemption victims found for incoming pod"
                    ));
                }
                if helpless > 0 {
                    parts.push(format!(
                        "{helpless} Preemption is not helpful for scheduling"
                    ));
                }
                parts.sort();
                format!(
                    "0/{} nodes are available: {}.",
                    nodes.len(),
                    parts.join(", ")
                )
            }
        }
    }
}

/// Whether a plugin's rejection can be cured by removing pods.
pub fn resolvable(plugin: Plugin) -> bool {
    !matches!(
        plugin,
        Plugin::NodeUnschedulable
            | Plugin::NodeName
            | Plugin::TaintToleration
            | Plugin::NodeAffinity
            | Plugin::VolumeBinding
    )
}

/// The priority of a pod.
pub fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

fn start_time(pod: &Pod) -> Option<i128> {
    pod.status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0.as_nanosecond())
}

/// Upstream's `MoreImportantPod`: higher priority, then the one that started earlier.
pub fn more_important(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    priority(b).cmp(&priority(a)).then_with(|| {
        start_time(a)
            .unwrap_or(i128::MAX)
            .cmp(&start_time(b).unwrap_or(i128::MAX))
    })
}

fn key(pod: &Pod) -> (String, String) {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

/// The pods of `victim`'s gang (itself included) among `all`.
pub fn gang_of<'a>(victim: &Pod, all: &[&'a Pod]) -> Vec<&'a Pod> {
    match pod_group(victim) {
        None => all
            .iter()
            .copied()
            .filter(|p| key(p) == key(victim))
            .collect(),
        Some(group) => all
            .iter()
            .copied()
            .filter(|p| {
                p.metadata.namespace == victim.metadata.namespace && pod_group(p) == Some(group)
            })
            .collect(),
    }
}

/// How many budget violations evicting `victims` causes.
pub fn violations(victims: &[&Pod], budgets: &[Budget]) -> usize {
    let mut left: Vec<i64> = budgets.iter().map(|b| b.allowed).collect();
    let mut count = 0;
    for victim in victims {
        let labels = victim.metadata.labels.clone().unwrap_or_default();
        let namespace = victim.metadata.namespace.as_deref().unwrap_or_default();
        let mut violates = false;
        for (i, budget) in budgets.iter().enumerate() {
            if budget.namespace == namespace && matches_typed(&budget.selector, &labels) {
                left[i] -= 1;
                violates |= left[i] < 0;
            }
        }
        count += usize::from(violates);
    }
    count
}

/// Claims that only `victims` reserve: their devices are freed by the eviction.
pub fn freed_claims<'a>(
    claims: impl IntoIterator<Item = &'a ResourceClaim>,
    victims: &BTreeSet<String>,
) -> BTreeSet<(String, String)> {
    claims
        .into_iter()
        .filter(|c| {
            let reserved = c.status.as_ref().and_then(|s| s.reserved_for.as_ref());
            reserved.is_some_and(|r| !r.is_empty() && r.iter().all(|c| victims.contains(&c.uid)))
        })
        .map(|c| {
            (
                c.metadata.namespace.clone().unwrap_or_default(),
                c.metadata.name.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// The ordering key of a candidate node (smaller is better).
pub fn candidate_rank(
    node: &str,
    victims: &[&Pod],
    budgets: &[Budget],
) -> (usize, i32, i64, usize, std::cmp::Reverse<i128>, String) {
    let highest = victims
        .iter()
        .map(|p| priority(p))
        .max()
        .unwrap_or(i32::MIN);
    let sum: i64 = victims.iter().map(|p| i64::from(priority(p))).sum();
    let latest_start = victims
        .iter()
        .filter(|p| priority(p) == highest)
        .filter_map(|p| start_time(p))
        .max()
        .unwrap_or(i128::MIN);
    (
        violations(victims, budgets),
        highest,
        sum,
        victims.len(),
        std::cmp::Reverse(latest_start),
        node.to_string(),
    )
}
