//! Placing pods one at a time on a cluster under one policy, as the artifact's scheduler does
//! with `percentageOfNodesToScore` 100: every node filtered, every feasible node scored, the
//! highest score taken, ties to the node first by name (the nodes are kept in name order, so
//! the first position wins). A pod that fits nowhere is reported and dropped.
//!
//! A node's verdict for a pod depends only on the node's state and the pod's shape, so verdicts
//! are remembered per (shape, node) and recomputed only for nodes that changed since — which
//! turns a trace of thousands of pods over a thousand nodes into mostly table lookups.
//!
//! Pure and deterministic for a seed (Random draws from a seeded generator).

use std::collections::HashMap;

use crate::cluster::{Demand, Node};
use crate::frag::{TypicalPod, of_node};
use crate::policy::{self, Context, Policy, Verdict};

/// Where a pod went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// On this node (position in name order), with these GPUs.
    Placed {
        /// The node's position.
        node: usize,
        /// GPU indices on it.
        gpus: Vec<usize>,
    },
    /// Nowhere: no node fits.
    Unschedulable,
}

/// A remembered verdict: the node version it was made for, and the verdict (`None`: the node
/// does not fit).
#[derive(Clone)]
struct Remembered {
    version: u64,
    verdict: Option<Verdict>,
}

/// The cluster under one policy.
pub struct Engine<'t> {
    nodes: Vec<Node>,
    policy: Policy,
    typical: &'t [TypicalPod],
    /// Each node's fragmentation as it is.
    fragmentation: Vec<f64>,
    /// Each node's model pressure ([`Context::pressure`]).
    pressure: Vec<f64>,
    /// Each node's CPU per GPU thousandth ([`Context::cpu_per_gpu`]).
    cpu_per_gpu: Vec<f64>,
    /// Each node's version: bumped on every placement.
    versions: Vec<u64>,
    /// Pod shapes seen, by shape.
    shapes: HashMap<Demand, usize>,
    /// Remembered verdicts by shape, then node.
    remembered: Vec<Vec<Remembered>>,
    rng: fastrand::Rng,
    /// GPU thousandths in use.
    used: i64,
}

impl<'t> Engine<'t> {
    /// An engine over `nodes` (sorted here by name).
    pub fn new(mut nodes: Vec<Node>, policy: Policy, typical: &'t [TypicalPod], seed: u64) -> Self {
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let fragmentation = nodes.iter().map(|n| of_node(n, typical)).collect();
        let used = nodes
            .iter()
            .map(|n| n.gpus.len() as i64 * crate::cluster::MILLI - n.gpu_free())
            .sum();
        let pressure = crate::frag::model_pressure(&nodes, typical);
        let cpu_per_gpu = crate::frag::cpu_per_gpu(&nodes, typical);
        Engine {
            pressure,
            cpu_per_gpu,
            versions: vec![0; nodes.len()],
            nodes,
            policy,
            typical,
            fragmentation,
            shapes: HashMap::new(),
            remembered: Vec::new(),
            rng: fastrand::Rng::with_seed(seed),
            used,
        }
    }

    /// The nodes, in name order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// GPU thousandths in use.
    pub fn used(&self) -> i64 {
        self.used
    }

    /// The cluster's fragmentation: Σ over nodes.
    pub fn fragmentation(&self) -> f64 {
        self.fragmentation.iter().sum()
    }

    fn verdict(&self, node: usize, pod: &Demand) -> Option<Verdict> {
        let node_ref = &self.nodes[node];
        if !node_ref.fits(pod) {
            return None;
        }
        let context = Context {
            typical: self.typical,
            fragmentation: self.fragmentation[node],
            pressure: self.pressure[node],
            cpu_per_gpu: self.cpu_per_gpu[node],
        };
        Some(policy::score(self.policy, node_ref, pod, &context))
    }

    /// Places one pod (or finds it unschedulable).
    pub fn schedule(&mut self, pod: &Demand) -> Placement {
        let shape = match self.shapes.get(pod) {
            Some(&shape) => shape,
            None => {
                let shape = self.remembered.len();
                self.shapes.insert(pod.clone(), shape);
                self.remembered.push(vec![
                    Remembered {
                        version: u64::MAX,
                        verdict: None,
                    };
                    self.nodes.len()
                ]);
                shape
            }
        };
        for node in 0..self.nodes.len() {
            if self.remembered[shape][node].version != self.versions[node] {
                let verdict = self.verdict(node, pod);
                self.remembered[shape][node] = Remembered {
                    version: self.versions[node],
                    verdict,
                };
            }
        }
        let remembered = &self.remembered[shape];
        let feasible: Vec<usize> = (0..self.nodes.len())
            .filter(|&n| remembered[n].verdict.is_some())
            .collect();
        let chosen = match feasible.len() {
            0 => return Placement::Unschedulable,
            // A single feasible node is taken without scoring.
            1 => feasible[0],
            n if self.policy == Policy::Random => feasible[self.rng.usize(..n)],
            _ => {
                let verdicts: Vec<&Verdict> = feasible
                    .iter()
                    .filter_map(|&n| remembered[n].verdict.as_ref())
                    .collect();
                let mut scores: Vec<i64> = verdicts.iter().map(|v| v.score).collect();
                if self.policy == Policy::BestFit {
                    policy::normalize(&mut scores);
                }
                let mut best = 0;
                for i in 1..feasible.len() {
                    let key = (scores[i], verdicts[i].tie_break);
                    if key > (scores[best], verdicts[best].tie_break) {
                        best = i;
                    }
                }
                feasible[best]
            }
        };
        let gpus = if self.policy == Policy::Random {
            self.random_gpus(chosen, pod)
        } else {
            remembered[chosen]
                .verdict
                .as_ref()
                .map(|v| v.gpus.clone())
                .unwrap_or_default()
        };
        self.place(chosen, pod, &gpus);
        Placement::Placed { node: chosen, gpus }
    }

    /// Random's GPU choice: for a share, each GPU with room replaces the choice with
    /// probability 1/count (reservoir sampling); otherwise the lowest-numbered free GPUs.
    fn random_gpus(&mut self, node: usize, pod: &Demand) -> Vec<usize> {
        let node = &self.nodes[node];
        if !pod.is_share() {
            return node.exclusive(pod);
        }
        let mut chosen = Vec::new();
        let mut count = 0;
        for (i, free) in node.gpus.iter().enumerate() {
            if *free >= pod.milli {
                count += 1;
                if self.rng.usize(..count) == 0 {
                    chosen = vec![i];
                }
            }
        }
        chosen
    }

    /// Takes a departed pod off its node.
    pub fn release(&mut self, node: usize, pod: &Demand, gpus: &[usize]) {
        let Some(state) = self.nodes.get_mut(node) else {
            return;
        };
        let before = state.gpu_free();
        state.release(pod, gpus);
        self.used -= state.gpu_free() - before;
        self.fragmentation[node] = of_node(&self.nodes[node], self.typical);
        self.versions[node] += 1;
    }

    fn place(&mut self, node: usize, pod: &Demand, gpus: &[usize]) {
        let before = self.nodes[node].gpu_free();
        self.nodes[node].place(pod, gpus);
        self.used += before - self.nodes[node].gpu_free();
        self.fragmentation[node] = of_node(&self.nodes[node], self.typical);
        self.versions[node] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(cpu: i64, gpus: u32, milli: i64) -> Demand {
        Demand {
            cpu,
            memory: 1,
            gpus,
            milli,
            models: String::new(),
        }
    }

    #[test]
    fn remembered_verdicts_equal_fresh_ones() {
        // The same pods through an engine and through fresh engines rebuilt from its state
        // after each placement must land identically.
        let typical = crate::frag::typical_pods(&[pod(1000, 1, 500), pod(2000, 1, 1000)]);
        let nodes: Vec<Node> = (0..6)
            .map(|i| Node::new(&format!("n{i}"), 8000, 1 << 20, 2 + i % 3, "T4"))
            .collect();
        let pods = [
            pod(1000, 1, 500),
            pod(1000, 1, 300),
            pod(2000, 1, 1000),
            pod(1000, 2, 1000),
            pod(500, 0, 0),
            pod(1000, 1, 700),
        ];
        for policy in Policy::ALL.into_iter().filter(|p| *p != Policy::Random) {
            let mut engine = Engine::new(nodes.clone(), policy, &typical, 1);
            for round in 0..4 {
                for p in &pods {
                    let mut fresh = Engine::new(engine.nodes().to_vec(), policy, &typical, 1);
                    let want = fresh.schedule(p);
                    assert_eq!(engine.schedule(p), want, "{policy} round {round}");
                }
            }
        }
    }

    #[test]
    fn unschedulable_pods_leave_nothing_behind() {
        let typical = crate::frag::typical_pods(&[pod(1000, 1, 500)]);
        let mut engine = Engine::new(
            vec![Node::new("a", 4000, 1024, 1, "T4")],
            Policy::Fgd,
            &typical,
            7,
        );
        assert_eq!(
            engine.schedule(&pod(1000, 2, 1000)),
            Placement::Unschedulable
        );
        assert_eq!(engine.used(), 0);
        assert!(matches!(
            engine.schedule(&pod(1000, 1, 500)),
            Placement::Placed { node: 0, .. }
        ));
        assert_eq!(engine.used(), 500);
    }
}
