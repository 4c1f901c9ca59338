//! GPU fragmentation as the FGD paper measures it (`pkg/utils/frag.go` of the artifact): the
//! typical pods of a workload (the most frequent request shapes covering 95% of its pods, each
//! with its probability), and a node's expected fragmented GPU thousandths for a pod drawn from
//! them — all its free GPU when the pod could not run there, only the GPUs too small for it when
//! it could (`NodeGpuShareFragAmountScore`).
//!
//! Pure.

use std::collections::BTreeMap;

use crate::cluster::{Demand, Node, accepts};

/// The share of pods the typical pods cover (the artifact's threshold 95 with step 1).
pub const TYPICAL_COVERAGE_PERCENT: f64 = 95.0;

/// One typical pod shape and its probability.
#[derive(Debug, Clone, PartialEq)]
pub struct TypicalPod {
    /// CPU (milli-cores).
    pub cpu: i64,
    /// Thousandths of each GPU (0 for a CPU pod).
    pub milli: i64,
    /// GPUs.
    pub gpus: u32,
    /// Allowed models (`|`-separated, empty: any).
    pub models: String,
    /// Probability among the typical pods.
    pub probability: f64,
}

/// The typical pods of `pods` (the workload before tuning): shapes keyed by CPU, GPU share,
/// GPU count and models (memory is not part of a shape), sorted by count then shape, both
/// descending; the shortest prefix covering 95% of the pods; each probability renormalised over
/// that prefix.
pub fn typical_pods(pods: &[Demand]) -> Vec<TypicalPod> {
    let mut counts: BTreeMap<(i64, i64, u32, String), f64> = BTreeMap::new();
    for pod in pods {
        // A GPU count with no share is a CPU pod to the artifact.
        let (milli, gpus) = if pod.uses_gpus() {
            (pod.milli, pod.gpus)
        } else {
            (0, pod.gpus)
        };
        *counts
            .entry((pod.cpu, milli, gpus, pod.models.clone()))
            .or_insert(0.0) += 1.0;
    }
    let total = pods.len() as f64;
    let mut sorted: Vec<((i64, i64, u32, String), f64)> = counts.into_iter().collect();
    sorted.sort_by(|(ka, a), (kb, b)| b.total_cmp(a).then_with(|| kb.cmp(ka)));
    let expected = TYPICAL_COVERAGE_PERCENT * total / 100.0;
    let mut covered = 0.0;
    let mut kept = 0;
    while covered < expected && kept < sorted.len() {
        covered += sorted[kept].1;
        kept += 1;
    }
    sorted
        .into_iter()
        .take(kept)
        .map(|((cpu, milli, gpus, models), count)| TypicalPod {
            cpu,
            milli,
            gpus,
            models,
            // As the artifact computes it: the share of all pods, then renormalised.
            probability: (count / total) / (covered / total),
        })
        .collect()
}

/// The fragmented GPU thousandths of a node with `cpu_left` and free `gpus` of `model`, for
/// a pod drawn from `typical`: Σ p · (the GPUs too small for the pod when it could run here,
/// else all free GPU thousandths).
pub fn node_fragmentation(cpu_left: i64, gpus: &[i64], model: &str, typical: &[TypicalPod]) -> f64 {
    let free: i64 = gpus.iter().sum();
    let mut amount = 0.0;
    for pod in typical {
        let fragmented = if pod.milli == 0 || !accepts(&pod.models, model) {
            // CPU pods (XL/XR) and pods that may not use this model (NoAccess).
            free
        } else {
            let room = gpus.iter().filter(|f| **f >= pod.milli).count();
            if room >= pod.gpus as usize && cpu_left >= pod.cpu {
                // Q3: only the GPUs too small for it are fragments.
                gpus.iter().filter(|f| **f < pod.milli).sum()
            } else {
                // Q1, Q2, Q4.
                free
            }
        };
        amount += pod.probability * fragmented as f64;
    }
    amount
}

/// For each node, how much the typical pods that list GPU models need its model: their GPU
/// demand that can use it (split evenly over the models each lists), as a share of all typical
/// GPU demand, divided by the model's share of the cluster's GPUs. 0 for a model nobody lists.
pub fn model_pressure(nodes: &[Node], typical: &[TypicalPod]) -> Vec<f64> {
    let mut supply: BTreeMap<&str, f64> = BTreeMap::new();
    for node in nodes {
        *supply.entry(node.model.as_str()).or_insert(0.0) += node.gpus.len() as f64;
    }
    let all_supply: f64 = supply.values().sum();
    let demand_of = |t: &TypicalPod| t.probability * (t.milli * i64::from(t.gpus)) as f64;
    let all_demand: f64 = typical.iter().filter(|t| t.milli > 0).map(demand_of).sum();
    let mut constrained: BTreeMap<&str, f64> = BTreeMap::new();
    for t in typical.iter().filter(|t| t.milli > 0) {
        let listed: Vec<&str> = t
            .models
            .split('|')
            .filter(|m| !m.is_empty() && supply.contains_key(m))
            .collect();
        for model in &listed {
            *constrained.entry(model).or_insert(0.0) += demand_of(t) / listed.len() as f64;
        }
    }
    nodes
        .iter()
        .map(|node| {
            let demand = constrained.get(node.model.as_str()).copied().unwrap_or(0.0);
            let share = supply.get(node.model.as_str()).copied().unwrap_or(0.0) / all_supply;
            if all_demand > 0.0 && share > 0.0 {
                demand / all_demand / share
            } else {
                0.0
            }
        })
        .collect()
}

/// For each node, the CPU (milli-cores) per GPU thousandth that the typical GPU pods able to
/// use its model ask for, weighted by probability (0 when none can).
pub fn cpu_per_gpu(nodes: &[Node], typical: &[TypicalPod]) -> Vec<f64> {
    nodes
        .iter()
        .map(|node| {
            let (cpu, gpu) = typical
                .iter()
                .filter(|t| t.milli > 0 && accepts(&t.models, &node.model))
                .fold((0.0, 0.0), |(cpu, gpu), t| {
                    (
                        cpu + t.probability * t.cpu as f64,
                        gpu + t.probability * (t.milli * i64::from(t.gpus)) as f64,
                    )
                });
            if gpu > 0.0 { cpu / gpu } else { 0.0 }
        })
        .collect()
}

/// [`node_fragmentation`] of a node as it is.
pub fn of_node(node: &Node, typical: &[TypicalPod]) -> f64 {
    node_fragmentation(node.cpu_left, &node.gpus, &node.model, typical)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demand(cpu: i64, gpus: u32, milli: i64) -> Demand {
        Demand {
            cpu,
            memory: 1,
            gpus,
            milli,
            models: String::new(),
        }
    }

    #[test]
    fn typical_pods_cover_95_percent_by_count() {
        // 60 × A, 30 × B, 6 × C, 4 × D: 95% needs A, B, C (96 pods).
        let mut pods = vec![demand(1000, 1, 500); 60];
        pods.extend(vec![demand(2000, 0, 0); 30]);
        pods.extend(vec![demand(4000, 8, 1000); 6]);
        pods.extend(vec![demand(8000, 2, 1000); 4]);
        let typical = typical_pods(&pods);
        assert_eq!(typical.len(), 3);
        assert_eq!(
            (typical[0].cpu, typical[1].milli, typical[2].gpus),
            (1000, 0, 8)
        );
        let sum: f64 = typical.iter().map(|t| t.probability).sum();
        assert!((sum - 1.0).abs() < 1e-12);
        assert!((typical[0].probability - 60.0 / 96.0).abs() < 1e-12);
    }

    #[test]
    fn fragmentation_counts_what_each_typical_pod_cannot_use() {
        let typical = vec![
            TypicalPod {
                cpu: 1000,
                milli: 500,
                gpus: 1,
                models: String::new(),
                probability: 0.5,
            },
            TypicalPod {
                cpu: 1000,
                milli: 1000,
                gpus: 2,
                models: String::new(),
                probability: 0.25,
            },
            TypicalPod {
                cpu: 1000,
                milli: 0,
                gpus: 0,
                models: String::new(),
                probability: 0.25,
            },
        ];
        // GPUs free 1000, 300: the share pod fits (300 is a fragment for it); the two-GPU pod
        // does not (all 1300 are); the CPU pod sees all 1300 as fragments.
        let amount = node_fragmentation(4000, &[1000, 300], "T4", &typical);
        assert!((amount - (0.5 * 300.0 + 0.25 * 1300.0 + 0.25 * 1300.0)).abs() < 1e-9);
        // Without CPU, nothing fits: everything free is fragmented.
        let starved = node_fragmentation(0, &[1000, 300], "T4", &typical);
        assert!((starved - 1300.0).abs() < 1e-9);
        assert_eq!(node_fragmentation(4000, &[0, 0], "T4", &typical), 0.0);
    }

    #[test]
    fn model_pressure_and_cpu_per_gpu() {
        let nodes = vec![
            Node::new("t1", 32_000, 1, 2, "T4"),
            Node::new("t2", 32_000, 1, 2, "T4"),
            Node::new("g", 96_000, 1, 8, "G2"),
        ];
        let typical = vec![
            TypicalPod {
                cpu: 4000,
                milli: 1000,
                gpus: 1,
                models: "T4".into(),
                probability: 0.5,
            },
            TypicalPod {
                cpu: 2000,
                milli: 1000,
                gpus: 1,
                models: String::new(),
                probability: 0.5,
            },
        ];
        // Half the GPU demand needs T4, which is a third of the GPUs: pressure 1.5.
        let pressure = model_pressure(&nodes, &typical);
        assert!(
            (pressure[0] - 1.5).abs() < 1e-12 && pressure[2] == 0.0,
            "{pressure:?}"
        );
        let ratio = cpu_per_gpu(&nodes, &typical);
        assert!(
            (ratio[0] - 3.0).abs() < 1e-12 && (ratio[2] - 2.0).abs() < 1e-12,
            "{ratio:?}"
        );
    }
}
