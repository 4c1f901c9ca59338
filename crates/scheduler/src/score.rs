//! kube-scheduler's Score plugins with their default weights: TaintToleration (3, fewer
//! intolerable PreferNoSchedule taints is better), NodeAffinity (2, the weights of matching
//! preferred terms), NodeResourcesFit (1, `LeastAllocated` by default or `MostAllocated`, over
//! CPU and memory with upstream's non-zero requests) and NodeResourcesBalancedAllocation (1).
//! Each plugin's scores are normalized to 0–100 over the feasible nodes before weighting.
//!
//! Pure.

use k8s_openapi::api::core::v1::Pod;
use tessera_model::node_selector;
use tessera_model::taints::tolerated;

use crate::node_info::NodeInfo;
use crate::resources::nonzero_cpu_memory;

pub use crate::profile::Strategy;
use crate::profile::{Profile, shape_score};
use crate::resources::Amounts;

/// The maximum node score.
pub const MAX: i64 = 100;

/// NodeResourcesFit's score of `node` with the pod on it: the weighted mean over the
/// profile's resources (CPU and memory with upstream's non-zero requests) of the strategy's
/// per-resource score.
pub fn resources_fit(
    profile: &Profile,
    requests: &Amounts,
    demand: (i128, i128),
    node: &NodeInfo,
) -> i64 {
    let mut total = 0i128;
    let mut weights = 0i128;
    for (resource, weight) in &profile.resources {
        let allocatable = match resource.as_str() {
            "cpu" => node.common.cpu,
            "memory" => node.common.memory,
            other => node.allocatable.get(other).copied().unwrap_or(0),
        };
        if allocatable <= 0 {
            continue;
        }
        let requested = match resource.as_str() {
            "cpu" => node.nonzero.0 + demand.0,
            "memory" => node.nonzero.1 + demand.1,
            other => {
                node.requested.get(other).copied().unwrap_or(0)
                    + requests.get(other).copied().unwrap_or(0)
            }
        }
        .min(allocatable);
        let score = match &profile.strategy {
            Strategy::LeastAllocated => (allocatable - requested) * i128::from(MAX) / allocatable,
            Strategy::MostAllocated => requested * i128::from(MAX) / allocatable,
            Strategy::RequestedToCapacityRatio(shape) => {
                let utilization = i64::try_from(requested * 100 / allocatable).unwrap_or(100);
                i128::from(shape_score(shape, utilization))
            }
        };
        total += score * i128::from(*weight);
        weights += i128::from(*weight);
    }
    if weights == 0 {
        0
    } else {
        i64::try_from(total / weights).unwrap_or(0)
    }
}

/// NodeResourcesBalancedAllocation: how even CPU and memory use would be.
pub fn balanced(pod: (i128, i128), node: &NodeInfo) -> i64 {
    // Integer arithmetic in parts per million: CPU and memory shares after placement.
    let share = |requested: i128, allocatable: i128| -> i128 {
        if allocatable <= 0 {
            0
        } else {
            (requested * 1_000_000 / allocatable).min(1_000_000)
        }
    };
    let cpu = share(node.nonzero.0 + pod.0, node.common.cpu);
    let memory = share(node.nonzero.1 + pod.1, node.common.memory);
    let deviation = (cpu - memory).abs() / 2;
    i64::try_from((1_000_000 - deviation) * i128::from(MAX) / 1_000_000).unwrap_or(0)
}

/// NodeAffinity's raw score: the summed weights of matching preferred terms.
pub fn affinity(pod: &Pod, node: &NodeInfo) -> i64 {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .into_iter()
        .flatten()
        .filter(|term| node_selector::term_matches(&term.preference, &node.name, &node.labels))
        .map(|term| i64::from(term.weight))
        .sum()
}

/// TaintToleration's raw score: intolerable PreferNoSchedule taints (fewer is better).
pub fn intolerable(pod: &Pod, node: &NodeInfo) -> i64 {
    let tolerations = crate::filters::tolerations(pod);
    node.taints
        .iter()
        .filter(|t| t.effect == "PreferNoSchedule" && !tolerated(tolerations, t))
        .count() as i64
}

/// Scales raw scores to 0–100 by the highest (or, `reverse`, so the lowest gets 100).
fn normalize(raw: &[i64], reverse: bool) -> Vec<i64> {
    let max = raw.iter().copied().max().unwrap_or(0);
    raw.iter()
        .map(|&r| {
            let scaled = if max > 0 { r * MAX / max } else { 0 };
            if reverse { MAX - scaled } else { scaled }
        })
        .collect()
}

/// NUMA alignment of a GPU pod on a node that publishes its GPU layout: 100 when one NUMA
/// node has the GPUs free (the kubelet can align them under any policy), else 0.
pub fn numa_alignment(wanted: i64, node: &NodeInfo) -> i64 {
    match node.gpu_numa.as_ref() {
        Some(numa) if wanted > 0 && numa.free.values().any(|f| *f >= wanted) => MAX,
        _ => 0,
    }
}

/// Scales raw scores (possibly negative) to 0–100 over their range, upstream's
/// `(s − min) · 100 / (max − min)`; `reverse` gives the lowest 100. All equal: all 0.
pub fn normalize_range(raw: &[i64], reverse: bool) -> Vec<i64> {
    let (Some(&min), Some(&max)) = (raw.iter().min(), raw.iter().max()) else {
        return Vec::new();
    };
    raw.iter()
        .map(|&r| {
            if max == min {
                0
            } else {
                let scaled = (r - min) * MAX / (max - min);
                if reverse { MAX - scaled } else { scaled }
            }
        })
        .collect()
}

/// The weighted total score of each candidate node for `pod` under `profile`.
pub fn score(pod: &Pod, nodes: &[&NodeInfo], profile: &Profile) -> Vec<i64> {
    let demand = nonzero_cpu_memory(pod);
    let requests = crate::resources::pod_requests(pod);
    let gpus = crate::filters::gpus_wanted(&requests);
    let taints = normalize(
        &nodes
            .iter()
            .map(|n| intolerable(pod, n))
            .collect::<Vec<_>>(),
        true,
    );
    let affinity = normalize(
        &nodes.iter().map(|n| affinity(pod, n)).collect::<Vec<_>>(),
        false,
    );
    let (w_taint, w_affinity, w_fit, w_balanced, w_numa) = (
        profile.weight("TaintToleration"),
        profile.weight("NodeAffinity"),
        profile.weight("NodeResourcesFit"),
        profile.weight("NodeResourcesBalancedAllocation"),
        profile.weight("NodeResourceTopologyMatch"),
    );
    nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            w_taint * taints[i]
                + w_affinity * affinity[i]
                + w_fit * resources_fit(profile, &requests, demand, node)
                + w_balanced * balanced(demand, node)
                + w_numa * numa_alignment(gpus, node)
        })
        .collect()
}
