//! The placement policies of the FGD artifact, scored exactly as its plugins do (integer
//! truncation included, so that ties — broken by node name — fall where they fall there), and
//! Tessera's own. Each gives a feasible node a [`Verdict`]: a score (higher is better) and the
//! GPUs the pod would take there. Random is decided by the engine (it draws a node, not a score).
//!
//! | policy | node score | GPU choice |
//! |---|---|---|
//! | Random | a uniformly drawn feasible node | a uniformly drawn GPU with room |
//! | DotProduct | `100·(1 − ½(c·cpu/128000² + F·g/8000²))` | best fit |
//! | GpuClustering | pods of one kind together, fuller nodes first | best fit |
//! | GpuPacking | shared GPUs, then used nodes, then free ones | best fit |
//! | BestFit | least CPU and GPU left afterwards, min-max normalised | best fit |
//! | FGD | `100·σ(ΔS/1000)`: the least growth of fragmentation | the GPU of that score |
//! | Tessera | FGD's, counting GPU the node's CPU cannot feed and GPU models others need | the GPU of that score |
//!
//! Pure.

use crate::cluster::{Demand, MILLI, Node};
use crate::frag::{TypicalPod, node_fragmentation};

/// The CPU one node may have at most, for normalising (the artifact's `MaxSpecCpu`).
pub const MAX_SPEC_CPU: f64 = 128_000.0;
/// The GPU thousandths one node may have at most (`MaxSpecGpu`).
pub const MAX_SPEC_GPU: f64 = 8_000.0;
/// The maximum node score.
pub const MAX_SCORE: i64 = 100;

/// A placement policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Policy {
    /// `random`.
    Random,
    /// `dotprod`.
    DotProduct,
    /// `gpuclustering`.
    GpuClustering,
    /// `gpupacking`.
    GpuPacking,
    /// `bestfit`.
    BestFit,
    /// `fgd`.
    Fgd,
    /// `tessera`.
    Tessera,
}

impl Policy {
    /// Every policy, in the artifact's order, Tessera's last.
    pub const ALL: [Policy; 7] = [
        Policy::Random,
        Policy::DotProduct,
        Policy::GpuClustering,
        Policy::GpuPacking,
        Policy::BestFit,
        Policy::Fgd,
        Policy::Tessera,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Random => "random",
            Policy::DotProduct => "dotprod",
            Policy::GpuClustering => "gpuclustering",
            Policy::GpuPacking => "gpupacking",
            Policy::BestFit => "bestfit",
            Policy::Fgd => "fgd",
            Policy::Tessera => "tessera",
        }
    }

    /// The artifact's label in its CSV output (`sc_policy`).
    pub fn label(self) -> &'static str {
        match self {
            Policy::Random => "01-Random",
            Policy::DotProduct => "02-DotProd",
            Policy::GpuClustering => "03-GpuClustering",
            Policy::GpuPacking => "04-GpuPacking",
            Policy::BestFit => "05-BestFit",
            Policy::Fgd => "06-FGD",
            Policy::Tessera => "07-Tessera",
        }
    }

    /// The policy of a command-line name.
    pub fn from_name(name: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == name)
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A feasible node's score for a pod and the GPUs the pod would take there.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Higher is better; equal scores go to the node first by name.
    pub score: i64,
    /// A second key for equal scores (higher is better), before the name.
    pub tie_break: i64,
    /// GPU indices.
    pub gpus: Vec<usize>,
}

impl Verdict {
    fn best_fit(score: i64, node: &Node, pod: &Demand) -> Verdict {
        Verdict {
            score,
            tie_break: 0,
            gpus: node.best_fit_gpus(pod),
        }
    }
}

/// What scoring needs besides the node and the pod.
pub struct Context<'a> {
    /// The workload's typical pods.
    pub typical: &'a [TypicalPod],
    /// The node's fragmentation as it is ([`crate::frag::of_node`]).
    pub fragmentation: f64,
    /// How much the workload's model-constrained pods need this node's GPU model, per unit
    /// of the cluster's supply of it (0 when nothing asks for a model;
    /// [`crate::frag::model_pressure`]).
    pub pressure: f64,
    /// CPU (milli-cores) per GPU thousandth that the typical GPU pods able to use this node's
    /// model ask for ([`crate::frag::cpu_per_gpu`]).
    pub cpu_per_gpu: f64,
}

/// The verdict of `policy` (not Random) on a node that fits `pod`.
pub fn score(policy: Policy, node: &Node, pod: &Demand, context: &Context<'_>) -> Verdict {
    match policy {
        Policy::Random => Verdict::best_fit(0, node, pod),
        Policy::DotProduct => Verdict::best_fit(dot_product(node, pod), node, pod),
        Policy::GpuClustering => Verdict::best_fit(gpu_clustering(node, pod), node, pod),
        Policy::GpuPacking => Verdict::best_fit(gpu_packing(node, pod), node, pod),
        Policy::BestFit => Verdict::best_fit(best_fit(node, pod), node, pod),
        Policy::Fgd => fgd(node, pod, context),
        Policy::Tessera => tessera(node, pod, context),
    }
}

/// `calculateDotProductScore` with dimension extension `merge` and normalisation `max`.
pub fn dot_product(node: &Node, pod: &Demand) -> i64 {
    let node_vec = [
        node.cpu_left as f64 / MAX_SPEC_CPU,
        node.gpu_free() as f64 / MAX_SPEC_GPU,
    ];
    let pod_vec = [
        pod.cpu as f64 / MAX_SPEC_CPU,
        pod.total_milli() as f64 / MAX_SPEC_GPU,
    ];
    let dot = node_vec[0] * pod_vec[0] + node_vec[1] * pod_vec[1];
    let score = 1.0 - dot / 2.0;
    (MAX_SCORE as f64 * score) as i64
}

/// `GpuClusteringScorePlugin.Score`: a GPU pod prefers nodes holding only pods of its kind,
/// then nodes holding its kind among others, then empty nodes, then the rest; within each band
/// fuller nodes first.
pub fn gpu_clustering(node: &Node, pod: &Demand) -> i64 {
    let Some(tag) = pod.tag() else {
        return 0;
    };
    let base = MAX_SCORE / 4 * (MAX_SPEC_GPU as i64 - node.gpu_free()) / MAX_SPEC_GPU as i64;
    let kinds = node.tags.values().filter(|n| **n > 0).count();
    let here = node.tags.get(&tag).is_some_and(|n| *n > 0);
    base + match (here, kinds) {
        (true, 1) => MAX_SCORE * 3 / 4,
        (true, _) => MAX_SCORE * 2 / 4,
        (false, 0) => MAX_SCORE / 4,
        (false, _) => 0,
    }
}

/// `getPackingScore`: GPUs already shared first (the fuller the better), then fully free GPUs
/// of used nodes (the fewer the better), then free nodes (the fewer GPUs the better).
pub fn gpu_packing(node: &Node, pod: &Demand) -> i64 {
    if !pod.uses_gpus() {
        return 0;
    }
    let fully_free = node.fully_free() as i64;
    if fully_free == node.gpus.len() as i64 {
        return (MAX_SCORE / 3 - fully_free).max(fully_free);
    }
    let taken = node.packed(pod);
    let whole = taken.iter().filter(|&&i| node.gpus[i] == MILLI).count() as i64;
    if whole > 0 {
        return (MAX_SCORE / 2 - whole).max(MAX_SCORE / 3);
    }
    let free_ratio: i64 = taken.iter().map(|&i| node.gpus[i] * 100 / MILLI).sum();
    (MAX_SCORE - free_ratio / 10).max(MAX_SCORE / 2)
}

/// `getBestFitScore` before normalisation: the less CPU and GPU left after placing, the
/// better.
pub fn best_fit(node: &Node, pod: &Demand) -> i64 {
    let left = [
        (node.cpu_left - pod.cpu) as f64 / MAX_SPEC_CPU * 0.5,
        (node.gpu_free() - pod.total_milli()) as f64 / MAX_SPEC_GPU * 0.5,
    ];
    let score = (1.0 - (left[0] + left[1])) * MAX_SCORE as f64;
    score as i64
}

/// The artifact's `NormalizeScore`: integer min-max scaling to 0–100 (all equal: all 0).
pub fn normalize(scores: &mut [i64]) {
    let (Some(&lowest), Some(&highest)) = (scores.iter().min(), scores.iter().max()) else {
        return;
    };
    let range = highest - lowest;
    for score in scores.iter_mut() {
        *score = if range == 0 {
            0
        } else {
            (*score - lowest) * MAX_SCORE / range
        };
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// The node's fragmentation with `pod` placed on `gpus`.
fn fragmentation_after(node: &Node, pod: &Demand, gpus: &[usize], typical: &[TypicalPod]) -> f64 {
    let mut free = node.gpus.clone();
    if pod.uses_gpus() {
        for &i in gpus {
            free[i] -= pod.milli;
        }
    }
    node_fragmentation(node.cpu_left - pod.cpu, &free, &node.model, typical)
}

/// `calculateGpuShareFragExtendScore`: `int(100·σ((S(n) − S(n′))/1000))`; for a share, the
/// best GPU (the first reaching the truncated maximum); otherwise the packed GPUs for the
/// score and the lowest-numbered free ones for the placement.
pub fn fgd(node: &Node, pod: &Demand, context: &Context<'_>) -> Verdict {
    gradient_verdict(node, pod, |gpus| {
        let after = fragmentation_after(node, pod, gpus, context.typical);
        (sigmoid((context.fragmentation - after) / 1000.0) * MAX_SCORE as f64) as i64
    })
}

/// FGD's choice of GPUs given a score of each candidate placement: for a share, the GPU with
/// room whose score first reaches the maximum; otherwise the packed GPUs for the score and the
/// lowest-numbered free ones for the placement.
fn gradient_verdict(node: &Node, pod: &Demand, score_of: impl Fn(&[usize]) -> i64) -> Verdict {
    if pod.is_share() {
        let mut best: Option<(i64, usize)> = None;
        for (i, free) in node.gpus.iter().enumerate() {
            if *free < pod.milli {
                continue;
            }
            let score = score_of(&[i]);
            if best.is_none_or(|(b, _)| score > b) {
                best = Some((score, i));
            }
        }
        let (score, gpu) = best.unwrap_or((0, 0));
        return Verdict {
            score,
            tie_break: 0,
            gpus: vec![gpu],
        };
    }
    Verdict {
        score: score_of(&node.packed(pod)),
        tie_break: 0,
        gpus: node.exclusive(pod),
    }
}

/// Tessera's policy: FGD's fragmentation gradient, extended with what FGD's per-node measure
/// cannot see. For a GPU pod the node's fragmentation also counts
///
/// - **GPU its CPU cannot feed**: free GPU thousandths beyond what the node's free CPU can
///   serve at the CPU-per-GPU ratio of the typical pods that may use its model
///   ([`Context::cpu_per_gpu`]) — FGD only sees CPU once it is already short for a typical pod;
/// - **GPU others need more**: a pod that lists no GPU model, placed on a model that the
///   workload's model-constrained pods need ([`Context::pressure`]), is charged that pressure
///   for every GPU thousandth it takes — FGD sees every model as equally available.
///
/// The score is FGD's `int(100·σ(−Δ/1000))` of the extended measure, ties to the node first by
/// name, GPUs chosen as FGD chooses them. CPU-only pods are placed exactly as FGD places them.
pub fn tessera(node: &Node, pod: &Demand, context: &Context<'_>) -> Verdict {
    if !pod.uses_gpus() {
        return fgd(node, pod, context);
    }
    let unfed = |cpu_left: i64, gpu_free: i64| -> f64 {
        if context.cpu_per_gpu <= 0.0 {
            0.0
        } else {
            (gpu_free as f64 - cpu_left as f64 / context.cpu_per_gpu).max(0.0)
        }
    };
    let any_model = pod.models.split('|').all(str::is_empty);
    let pressure = if any_model {
        context.pressure * pod.total_milli() as f64
    } else {
        0.0
    };
    let before = context.fragmentation + unfed(node.cpu_left, node.gpu_free());
    let score_of = |gpus: &[usize]| -> i64 {
        let after = fragmentation_after(node, pod, gpus, context.typical)
            + unfed(node.cpu_left - pod.cpu, node.gpu_free() - pod.total_milli())
            + pressure;
        (sigmoid((before - after) / 1000.0) * MAX_SCORE as f64) as i64
    };
    gradient_verdict(node, pod, score_of)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Tag;

    fn pod(cpu: i64, gpus: u32, milli: i64) -> Demand {
        Demand {
            cpu,
            memory: 0,
            gpus,
            milli,
            models: String::new(),
        }
    }

    fn node(cpu_left: i64, gpus: &[i64]) -> Node {
        let mut node = Node::new("n", 96_000, 1 << 20, gpus.len() as u32, "G2");
        node.cpu_left = cpu_left;
        node.gpus = gpus.to_vec();
        node
    }

    #[test]
    fn artifact_scores_by_hand() {
        // DotProduct: c=64000, F=8000; pod 8000 CPU, 1000 GPU:
        // 1 − ½(0.5·0.0625 + 1·0.125) = 0.921875 → 92.
        assert_eq!(
            dot_product(&node(64_000, &[1000; 8]), &pod(8000, 1, 1000)),
            92
        );
        // BestFit: (1 − (56000/128000·½ + 7000/8000·½))·100 = 34.375 → 34.
        assert_eq!(best_fit(&node(64_000, &[1000; 8]), &pod(8000, 1, 1000)), 34);
        let mut scores = vec![34, 50, 40];
        normalize(&mut scores);
        assert_eq!(scores, vec![0, 100, 37]);
        let mut equal = vec![7, 7];
        normalize(&mut equal);
        assert_eq!(equal, vec![0, 0]);
        // GpuPacking: a free node scores 33 − G; a used node's free GPUs 50 − n; shared
        // GPUs 100 − Σ⌊f·100/1000⌋/10.
        let share = pod(1000, 1, 300);
        assert_eq!(gpu_packing(&node(64_000, &[1000; 8]), &share), 25);
        assert_eq!(gpu_packing(&node(64_000, &[1000, 200]), &share), 49);
        assert_eq!(gpu_packing(&node(64_000, &[1000, 500]), &share), 95);
        assert_eq!(
            gpu_packing(&node(64_000, &[1000, 500]), &pod(1000, 0, 0)),
            0
        );
        // GpuClustering: base 25·(8000 − 3500)/8000 = 14 plus the band.
        let mut clustered = node(64_000, &[1000, 1000, 500, 1000]);
        assert_eq!(gpu_clustering(&clustered, &share), 14 + 25);
        clustered.tags.insert(Tag::Share, 1);
        assert_eq!(gpu_clustering(&clustered, &share), 14 + 75);
        assert_eq!(gpu_clustering(&clustered, &pod(1000, 1, 1000)), 14);
        clustered.tags.insert(Tag::Whole(1), 1);
        assert_eq!(gpu_clustering(&clustered, &share), 14 + 50);
    }

    #[test]
    fn fgd_prefers_placements_that_fragment_least() {
        // One typical pod: half a GPU. Free 1000 and 600: a 400 share on the 600 GPU leaves
        // 200 (a fragment for 500); on the 1000 GPU it leaves 600 (still usable).
        let typical = vec![TypicalPod {
            cpu: 1000,
            milli: 500,
            gpus: 1,
            models: String::new(),
            probability: 1.0,
        }];
        let n = node(64_000, &[1000, 600]);
        let context = Context {
            typical: &typical,
            fragmentation: node_fragmentation(n.cpu_left, &n.gpus, &n.model, &typical),
            pressure: 0.0,
            cpu_per_gpu: 0.0,
        };
        let verdict = fgd(&n, &pod(1000, 1, 400), &context);
        // ΔS = 0 − 0 on GPU 0 (600 left and 600 ≥ 500: no fragment) → σ(0) = 0.5 → 50;
        // GPU 1: 200 becomes a fragment → σ(−0.2)·100 = 45.
        assert_eq!((verdict.score, verdict.gpus.clone()), (50, vec![0]));
        // Tessera without model pressure and with CPU to spare is FGD.
        assert_eq!(tessera(&n, &pod(1000, 1, 400), &context), verdict);
        // Model pressure 1: a pod that lists no model pays its 400 thousandths → σ(−0.4) → 40;
        // a pod that lists the model pays nothing.
        let pressed = Context {
            pressure: 1.0,
            ..context
        };
        assert_eq!(tessera(&n, &pod(1000, 1, 400), &pressed).score, 40);
        let mut listed = pod(1000, 1, 400);
        listed.models = "G2".into();
        assert_eq!(tessera(&n, &listed, &pressed).score, 50);
        // Two CPU milli-cores per GPU thousandth: with 2000 CPU left, 600 of the 1600 free
        // thousandths cannot be fed; after the pod, 700 of 1200 → Δ +100 → σ(−0.1) → 47.
        let mut starved = n.clone();
        starved.cpu_left = 2000;
        let hungry = Context {
            pressure: 0.0,
            cpu_per_gpu: 2.0,
            fragmentation: node_fragmentation(2000, &n.gpus, &n.model, &typical),
            ..pressed
        };
        assert_eq!(tessera(&starved, &pod(1000, 1, 400), &hungry).score, 47);
    }

    #[test]
    fn names_and_labels_round_trip() {
        for policy in Policy::ALL {
            assert_eq!(Policy::from_name(policy.name()), Some(policy));
        }
        assert_eq!(Policy::Fgd.label(), "06-FGD");
        assert_eq!(Policy::from_name("worstfit"), None);
    }
}
