//! The simulated cluster's vocabulary: what a pod asks ([`Demand`]: CPU, memory, and either
//! whole GPUs or a share of one GPU in thousandths, optionally of listed models) and what a node
//! has left ([`Node`]: CPU, memory, and the free thousandths of each of its GPUs), with the
//! artifact's feasibility rule (Open-Gpu-Share over NodeResourcesFit) and its GPU choices.
//!
//! Pure. Knows nothing of policies or of the experiment.

use std::collections::BTreeMap;

/// Thousandths of one GPU.
pub const MILLI: i64 = 1000;

/// What a pod asks of a node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Demand {
    /// CPU (milli-cores).
    pub cpu: i64,
    /// Memory (MiB).
    pub memory: i64,
    /// GPUs (0: a CPU pod).
    pub gpus: u32,
    /// Thousandths of each GPU (1000 for whole GPUs; 0 for a CPU pod).
    pub milli: i64,
    /// Allowed GPU models separated by `|` (empty: any).
    pub models: String,
}

/// A GPU pod's affinity tag (GpuClustering groups pods by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tag {
    /// A share of one GPU.
    Share,
    /// This many whole GPUs.
    Whole(u32),
}

impl Demand {
    /// Whether the pod uses GPUs at all (a GPU count with a zero share counts as a CPU pod,
    /// as in the artifact).
    pub fn uses_gpus(&self) -> bool {
        self.gpus > 0 && self.milli > 0
    }

    /// A share of one GPU.
    pub fn is_share(&self) -> bool {
        self.gpus == 1 && self.milli > 0 && self.milli < MILLI
    }

    /// GPU thousandths in all (`gpus × milli`).
    pub fn total_milli(&self) -> i64 {
        i64::from(self.gpus) * self.milli
    }

    /// The affinity tag of a GPU pod.
    pub fn tag(&self) -> Option<Tag> {
        if !self.uses_gpus() {
            None
        } else if self.is_share() {
            Some(Tag::Share)
        } else {
            Some(Tag::Whole(self.gpus))
        }
    }

    /// Whether a node with GPUs of `model` is acceptable (the artifact's
    /// `IsNodeAccessibleToPodByType`: any model when none is listed).
    pub fn accepts(&self, model: &str) -> bool {
        accepts(&self.models, model)
    }
}

impl Demand {
    /// What a trace pod asks (a pod with no GPUs asks no share and no model).
    pub fn of_trace(pod: &crate::trace::TracePod) -> Demand {
        let gpu = pod.num_gpu > 0;
        Demand {
            cpu: pod.cpu_milli,
            memory: pod.memory_mib,
            gpus: pod.num_gpu,
            milli: if gpu { pod.gpu_milli } else { 0 },
            models: if gpu {
                pod.gpu_spec.clone()
            } else {
                String::new()
            },
        }
    }
}

impl Node {
    /// An empty node of a trace, named `name`.
    pub fn of_trace(node: &crate::trace::TraceNode, name: &str) -> Node {
        Node::new(
            name,
            node.cpu_milli,
            node.memory_mib,
            node.gpus,
            &node.model,
        )
    }
}

/// Whether a `|`-separated list of models (empty: any) accepts `model`.
pub fn accepts(models: &str, model: &str) -> bool {
    let mut listed = models.split('|').filter(|m| !m.is_empty()).peekable();
    if listed.peek().is_none() {
        return true;
    }
    !model.is_empty() && listed.any(|m| m == model)
}

/// A node and what it has left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Its name (with the experiment's priority prefix).
    pub name: String,
    /// Allocatable CPU (milli-cores).
    pub cpu_capacity: i64,
    /// CPU left.
    pub cpu_left: i64,
    /// Memory left (MiB).
    pub memory_left: i64,
    /// The GPU model.
    pub model: String,
    /// Free thousandths of each GPU.
    pub gpus: Vec<i64>,
    /// Pods by affinity tag.
    pub tags: BTreeMap<Tag, u32>,
}

impl Node {
    /// An empty node.
    pub fn new(name: &str, cpu: i64, memory: i64, gpus: u32, model: &str) -> Node {
        Node {
            name: name.to_string(),
            cpu_capacity: cpu,
            cpu_left: cpu,
            memory_left: memory,
            model: model.to_string(),
            gpus: vec![MILLI; gpus as usize],
            tags: BTreeMap::new(),
        }
    }

    /// Free GPU thousandths in all.
    pub fn gpu_free(&self) -> i64 {
        self.gpus.iter().sum()
    }

    /// GPUs with nothing on them.
    pub fn fully_free(&self) -> usize {
        self.gpus.iter().filter(|f| **f == MILLI).count()
    }

    /// NodeResourcesFit (CPU, memory) and, for a GPU pod, Open-Gpu-Share: the node has GPUs of
    /// an accepted model, and one GPU with room for a share, or enough whole free GPUs.
    pub fn fits(&self, pod: &Demand) -> bool {
        if pod.cpu > self.cpu_left || pod.memory > self.memory_left {
            return false;
        }
        if !pod.uses_gpus() {
            return true;
        }
        if self.gpus.is_empty() || !pod.accepts(&self.model) {
            return false;
        }
        let room = self.gpus.iter().filter(|f| **f >= pod.milli).count();
        room >= pod.gpus as usize
    }

    /// The artifact's "best" GPU choice: for a share, the GPU with the least room that still
    /// fits (lowest index on ties); otherwise [`Node::exclusive`].
    pub fn best_fit_gpus(&self, pod: &Demand) -> Vec<usize> {
        if pod.is_share() {
            let mut best: Option<usize> = None;
            for (i, free) in self.gpus.iter().enumerate() {
                if *free >= pod.milli && best.is_none_or(|b| *free < self.gpus[b]) {
                    best = Some(i);
                }
            }
            best.into_iter().collect()
        } else {
            self.exclusive(pod)
        }
    }

    /// `AllocateExclusiveGpuId`: the lowest-numbered fully free GPUs.
    pub fn exclusive(&self, pod: &Demand) -> Vec<usize> {
        if !pod.uses_gpus() {
            return Vec::new();
        }
        self.gpus
            .iter()
            .enumerate()
            .filter(|(_, f)| **f == MILLI)
            .map(|(i, _)| i)
            .take(pod.gpus as usize)
            .collect()
    }

    /// The GPUs `NodeResource.Sub` takes: the ones with the least room that fit, in
    /// ascending order of room (stable).
    pub fn packed(&self, pod: &Demand) -> Vec<usize> {
        if !pod.uses_gpus() {
            return Vec::new();
        }
        let mut order: Vec<usize> = (0..self.gpus.len()).collect();
        order.sort_by_key(|&i| self.gpus[i]);
        order
            .into_iter()
            .filter(|&i| self.gpus[i] >= pod.milli)
            .take(pod.gpus as usize)
            .collect()
    }

    /// Books a pod onto the node with the given GPUs.
    pub fn place(&mut self, pod: &Demand, gpus: &[usize]) {
        self.cpu_left -= pod.cpu;
        self.memory_left -= pod.memory;
        if pod.uses_gpus() {
            for &i in gpus {
                self.gpus[i] -= pod.milli;
            }
        }
        if let Some(tag) = pod.tag() {
            *self.tags.entry(tag).or_insert(0) += 1;
        }
    }
}

impl Node {
    /// Takes a departed pod off the node (the GPUs it was placed with).
    pub fn release(&mut self, pod: &Demand, gpus: &[usize]) {
        self.cpu_left += pod.cpu;
        self.memory_left += pod.memory;
        if pod.uses_gpus() {
            for &i in gpus {
                if let Some(free) = self.gpus.get_mut(i) {
                    *free = (*free + pod.milli).min(MILLI);
                }
            }
        }
        if let Some(tag) = pod.tag()
            && let Some(count) = self.tags.get_mut(&tag)
        {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.tags.remove(&tag);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(cpu: i64, gpus: u32, milli: i64, models: &str) -> Demand {
        Demand {
            cpu,
            memory: 0,
            gpus,
            milli,
            models: models.into(),
        }
    }

    #[test]
    fn feasibility_and_gpu_choices_follow_the_artifact() {
        let mut node = Node::new("n", 8000, 1024, 4, "V100M16");
        node.gpus = vec![1000, 300, 600, 1000];
        let table = [
            (pod(1000, 1, 500, ""), true, vec![2], vec![2]),
            (pod(1000, 1, 300, ""), true, vec![1], vec![1]),
            (pod(1000, 1, 700, ""), true, vec![0], vec![0]),
            (pod(1000, 2, 1000, ""), true, vec![0, 3], vec![0, 3]),
            (pod(1000, 3, 1000, ""), false, vec![0, 3], vec![0, 3]),
            (pod(9000, 0, 0, ""), false, vec![], vec![]),
            (pod(1000, 1, 500, "T4|P100"), false, vec![2], vec![2]),
            (pod(1000, 1, 500, "T4|V100M16"), true, vec![2], vec![2]),
        ];
        for (i, (p, fits, best, packed)) in table.into_iter().enumerate() {
            assert_eq!(node.fits(&p), fits, "case {i}");
            assert_eq!(node.best_fit_gpus(&p), best, "case {i}");
            assert_eq!(node.packed(&p), packed, "case {i}");
        }
        node.place(&pod(1000, 1, 500, ""), &[2]);
        assert_eq!(
            (node.cpu_left, node.gpus[2], node.gpu_free()),
            (7000, 100, 2400)
        );
        assert_eq!(node.tags.get(&Tag::Share), Some(&1));
        let placed = node.clone();
        node.place(&pod(500, 1, 1000, ""), &[0]);
        node.release(&pod(500, 1, 1000, ""), &[0]);
        assert_eq!(node, placed, "release undoes place");
        assert!(accepts("", "T4") && accepts("|", "T4") && !accepts("A10", ""));
    }
}
