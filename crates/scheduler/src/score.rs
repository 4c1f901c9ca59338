//! kube-scheduler's Score plugins with their default weights: TaintToleration (3, fewer
//! intolerable PreferNoSchedule taints is better), NodeAffinity (2, the weights of matching
//! preferred terms), NodeResourcesFit (1, `LeastAllocated` by default or `MostAllocated`, over
//! CPU and memory with upstream's non-zero requests) and NodeResourcesBalancedAllocation (1),
//! and Tessera's ModelLocality (3, the share of the pod's model bytes the node already caches,
//! read from its `status.images`; see `tessera_storage::models`).
//! Each plugin's scores are normalized to 0–100 over the feasible nodes before weighting.
//!
//! Pure.

use k8s_openapi::api::core::v1::{Pod, PreferredSchedulingTerm, Toleration};
use tessera_model::node_selector;
use tessera_model::taints::tolerated;

use crate::node_info::{NodeInfo, narrow};

pub use crate::profile::Strategy;
use crate::profile::{Profile, shape_score};
use crate::resources::Demand;

/// The maximum node score.
pub const MAX: i64 = 100;

/// NodeResourcesFit's score of `node` with the pod on it: the weighted mean over the
/// profile's resources (CPU and memory with upstream's non-zero requests) of the strategy's
/// per-resource score.
pub fn resources_fit(profile: &Profile, demand: &Demand, node: &NodeInfo) -> i64 {
    fit_score(&axes(profile, demand), &profile.strategy, demand, node)
}

/// A resource NodeResourcesFit scores, resolved once per pod.
enum Axis<'a> {
    Cpu,
    Memory,
    /// Any other resource, with the pod's request of it.
    Other(&'a str, i128),
}

fn axes<'a>(profile: &'a Profile, demand: &Demand) -> Vec<(Axis<'a>, i64)> {
    profile
        .resources
        .iter()
        .map(|(resource, weight)| {
            let axis = match resource.as_str() {
                "cpu" => Axis::Cpu,
                "memory" => Axis::Memory,
                other => Axis::Other(other, demand.requests.get(other).copied().unwrap_or(0)),
            };
            (axis, *weight)
        })
        .collect()
}

fn fit_score(axes: &[(Axis, i64)], strategy: &Strategy, demand: &Demand, node: &NodeInfo) -> i64 {
    let mut total = 0i64;
    let mut weights = 0i64;
    for (axis, weight) in axes {
        let (allocatable, requested) = match axis {
            Axis::Cpu => (
                node.common.cpu,
                node.common.cpu_nonzero.saturating_add(demand.nonzero.0),
            ),
            Axis::Memory => (
                node.common.memory,
                node.common.memory_nonzero.saturating_add(demand.nonzero.1),
            ),
            Axis::Other(name, wanted) => (
                narrow(node.allocatable.get(*name).copied().unwrap_or(0)),
                narrow(node.requested.get(*name).copied().unwrap_or(0) + wanted),
            ),
        };
        if allocatable <= 0 {
            continue;
        }
        let requested = requested.min(allocatable);
        let score = match strategy {
            Strategy::LeastAllocated => per_hundred(allocatable - requested, allocatable),
            Strategy::MostAllocated => per_hundred(requested, allocatable),
            Strategy::RequestedToCapacityRatio(shape) => {
                shape_score(shape, per_hundred(requested, allocatable))
            }
        };
        total += score * weight;
        weights += weight;
    }
    if weights == 0 { 0 } else { total / weights }
}

/// `part · 100 / whole`, truncated as upstream's int64 arithmetic (`0 ≤ part ≤ whole`,
/// `whole > 0`); the product is widened only when it would overflow.
fn per_hundred(part: i64, whole: i64) -> i64 {
    match part.checked_mul(MAX) {
        Some(product) => product / whole,
        None => narrow(i128::from(part) * i128::from(MAX) / i128::from(whole)),
    }
}

/// NodeResourcesBalancedAllocation: how even CPU and memory use would be, in upstream's
/// floating point (`(1 − |cpu share − memory share| / 2) · 100`, each share capped at 1).
pub fn balanced(pod: (i64, i64), node: &NodeInfo) -> i64 {
    let common = &node.common;
    if common.cpu <= 0 || common.memory <= 0 {
        return MAX;
    }
    // Both divisions side by side, so they can run as one vector division.
    let requested = [
        common.cpu_nonzero.saturating_add(pod.0) as f64,
        common.memory_nonzero.saturating_add(pod.1) as f64,
    ];
    let allocatable = [common.cpu as f64, common.memory as f64];
    let shares = [
        (requested[0] / allocatable[0]).min(1.0),
        (requested[1] / allocatable[1]).min(1.0),
    ];
    let deviation = ((shares[0] - shares[1]) / 2.0).abs();
    ((1.0 - deviation) * MAX as f64) as i64
}

/// The pod's preferred node-affinity terms.
fn preferred_terms(pod: &Pod) -> &[PreferredSchedulingTerm] {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default()
}

fn affinity_of(terms: &[PreferredSchedulingTerm], node: &NodeInfo) -> i64 {
    terms
        .iter()
        .filter(|term| node_selector::term_matches(&term.preference, &node.name, &node.labels))
        .map(|term| i64::from(term.weight))
        .sum()
}

/// NodeAffinity's raw score: the summed weights of matching preferred terms.
pub fn affinity(pod: &Pod, node: &NodeInfo) -> i64 {
    affinity_of(preferred_terms(pod), node)
}

fn intolerable_by(tolerations: &[Toleration], node: &NodeInfo) -> i64 {
    node.taints
        .iter()
        .filter(|t| t.effect == "PreferNoSchedule" && !tolerated(tolerations, t))
        .count() as i64
}

/// TaintToleration's raw score: intolerable PreferNoSchedule taints (fewer is better).
pub fn intolerable(pod: &Pod, node: &NodeInfo) -> i64 {
    intolerable_by(crate::filters::tolerations(pod), node)
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

/// The part of a node's score that depends only on resources — NodeResourcesFit,
/// NodeResourcesBalancedAllocation and NUMA alignment, weighted — resolved once per pod.
pub struct ResourceScorer<'p> {
    axes: Vec<(Axis<'p>, i64)>,
    strategy: &'p Strategy,
    weights: (i64, i64, i64),
}

impl<'p> ResourceScorer<'p> {
    /// The scorer of `demand` under `profile`.
    pub fn new(profile: &'p Profile, demand: &Demand) -> ResourceScorer<'p> {
        ResourceScorer {
            axes: axes(profile, demand),
            strategy: &profile.strategy,
            weights: (
                profile.weight("NodeResourcesFit"),
                profile.weight("NodeResourcesBalancedAllocation"),
                profile.weight("NodeResourceTopologyMatch"),
            ),
        }
    }

    /// The weighted resource score of `node`.
    pub fn score(&self, demand: &Demand, node: &NodeInfo) -> i64 {
        let (w_fit, w_balanced, w_numa) = self.weights;
        w_fit * fit_score(&self.axes, self.strategy, demand, node)
            + w_balanced * balanced(demand.nonzero, node)
            + w_numa * numa_alignment(demand.gpus, node)
    }

    /// Everything [`ResourceScorer::score`] reads, when that is only CPU and memory (no other
    /// resource is scored and no GPU layout matters): equal keys give equal scores under one
    /// profile, so a score can be remembered by its key.
    pub fn key(&self, demand: &Demand, node: &NodeInfo) -> Option<ResourceKey> {
        let plain_axes = self
            .axes
            .iter()
            .all(|(axis, _)| matches!(axis, Axis::Cpu | Axis::Memory));
        let numa_matters = demand.gpus > 0 && node.gpu_numa.is_some();
        (plain_axes && !numa_matters).then_some(ResourceKey {
            cpu: node.common.cpu,
            memory: node.common.memory,
            cpu_used: node.common.cpu_nonzero,
            memory_used: node.common.memory_nonzero,
            cpu_wanted: demand.nonzero.0,
            memory_wanted: demand.nonzero.1,
        })
    }
}

/// What a CPU-and-memory resource score reads (compared field by field: a hot path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceKey {
    cpu: i64,
    memory: i64,
    cpu_used: i64,
    memory_used: i64,
    cpu_wanted: i64,
    memory_wanted: i64,
}

/// The weighted total score of each candidate node for `pod` under `profile`, given each
/// candidate's [`ResourceScorer`] score.
pub fn score(pod: &Pod, nodes: &[&NodeInfo], profile: &Profile, resource: &[i64]) -> Vec<i64> {
    let tolerations = crate::filters::tolerations(pod);
    let taints = normalize(
        &nodes
            .iter()
            .map(|n| intolerable_by(tolerations, n))
            .collect::<Vec<_>>(),
        true,
    );
    let preferred = preferred_terms(pod);
    let affinity = if preferred.is_empty() {
        vec![0; nodes.len()]
    } else {
        normalize(
            &nodes
                .iter()
                .map(|n| affinity_of(preferred, n))
                .collect::<Vec<_>>(),
            false,
        )
    };
    let (w_taint, w_affinity) = (
        profile.weight("TaintToleration"),
        profile.weight("NodeAffinity"),
    );
    let w_models = profile.weight("ModelLocality");
    let models = if w_models == 0 {
        vec![0; nodes.len()]
    } else {
        model_locality(pod, nodes)
    };
    (0..nodes.len())
        .map(|i| {
            w_taint * taints[i] + w_affinity * affinity[i] + w_models * models[i] + resource[i]
        })
        .collect()
}

/// Whether `pod` may ask for models (a CSI volume or an init container), checked on the typed
/// pod before it is read as JSON.
fn may_ask_for_models(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    spec.volumes.iter().flatten().any(|v| {
        v.csi
            .as_ref()
            .is_some_and(|c| c.driver == tessera_storage::models::MODEL_CSI_DRIVER)
    }) || spec
        .init_containers
        .iter()
        .flatten()
        .any(|c| c.name == tessera_storage::models::STORAGE_INITIALIZER)
}

/// ModelLocality's score of each node (0–100, not normalized: the share of the pod's model
/// bytes the node holds), sizes as the largest any candidate lists; a pod whose model requests
/// do not read scores 0 everywhere (the twin reports the error when it starts the pod).
pub fn model_locality(pod: &Pod, nodes: &[&NodeInfo]) -> Vec<i64> {
    use tessera_storage::models::{model_locality_score, pod_models};
    if !may_ask_for_models(pod) {
        return vec![0; nodes.len()];
    }
    let requests = serde_json::to_value(pod)
        .ok()
        .and_then(|value| pod_models(&value).ok())
        .unwrap_or_default();
    if requests.is_empty() {
        return vec![0; nodes.len()];
    }
    let wanted: Vec<_> = requests
        .into_iter()
        .map(|request| {
            let size = nodes
                .iter()
                .flat_map(|n| n.models.iter())
                .filter(|(held, _)| *held == request.model)
                .map(|(_, size)| *size)
                .max()
                .unwrap_or(0);
            (request.model, size)
        })
        .collect();
    nodes
        .iter()
        .map(|node| model_locality_score(&wanted, &node.models))
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Node;
    use serde_json::json;

    use super::*;

    fn node(name: &str, images: &[(&str, u64)]) -> NodeInfo {
        let images: Vec<_> = images
            .iter()
            .map(|(n, size)| json!({"names": [n], "sizeBytes": size}))
            .collect();
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
                "images": images},
        }))
        .unwrap();
        NodeInfo::new(&node)
    }

    fn pod(models: &[&str]) -> Pod {
        let volumes: Vec<_> = models
            .iter()
            .enumerate()
            .map(|(i, m)| {
                json!({"name": format!("m{i}"), "csi": {"driver": "model.csi.tessera.dev",
                    "volumeAttributes": {"model": m, "revision": "main"}}})
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i"}], "volumes": volumes},
        }))
        .unwrap()
    }

    #[test]
    fn model_locality_prefers_the_bytes_a_node_holds() {
        let big = "model.tessera.dev/org/big:main";
        let small = "model.tessera.dev/org/small:main";
        struct Case {
            name: &'static str,
            pod: Vec<&'static str>,
            nodes: Vec<Vec<(&'static str, u64)>>,
            want: Vec<i64>,
        }
        for case in [
            Case {
                name: "no models asked",
                pod: vec![],
                nodes: vec![vec![(big, 900)], vec![]],
                want: vec![0, 0],
            },
            Case {
                name: "one model, one holder",
                pod: vec!["org/big"],
                nodes: vec![vec![(big, 900)], vec![], vec![("nginx:1", 10)]],
                want: vec![100, 0, 0],
            },
            Case {
                name: "two models weighed by size",
                pod: vec!["org/big", "org/small"],
                nodes: vec![
                    vec![(big, 900)],
                    vec![(small, 100)],
                    vec![(big, 900), (small, 100)],
                ],
                want: vec![90, 10, 100],
            },
            Case {
                name: "another revision is not the model",
                pod: vec!["org/big"],
                nodes: vec![vec![("model.tessera.dev/org/big:v2", 900)]],
                want: vec![0],
            },
        ] {
            let infos: Vec<NodeInfo> = case
                .nodes
                .iter()
                .enumerate()
                .map(|(i, images)| node(&format!("n{i}"), images))
                .collect();
            let refs: Vec<&NodeInfo> = infos.iter().collect();
            assert_eq!(
                model_locality(&pod(&case.pod), &refs),
                case.want,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn model_locality_is_weighted_and_can_be_disabled() {
        let held = "model.tessera.dev/org/big:main";
        let infos = [node("a", &[]), node("b", &[(held, 900)])];
        let refs: Vec<&NodeInfo> = infos.iter().collect();
        let pod = pod(&["org/big"]);
        let mut profile = Profile::default();
        // b is a little worse on resources, and still wins.
        let scores = score(&pod, &refs, &profile, &[60, 20]);
        assert!(scores[1] > scores[0], "{scores:?}");
        assert_eq!(scores[1] - scores[0], 3 * 100 - 40);
        profile.weights.insert("ModelLocality".into(), 0);
        let scores = score(&pod, &refs, &profile, &[60, 20]);
        assert!(scores[0] > scores[1], "{scores:?}");
    }
}
