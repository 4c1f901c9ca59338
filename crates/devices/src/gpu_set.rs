//! Choosing the best-connected set of GPUs on one machine: what a device plugin's
//! `GetPreferredAllocation` answers and what the scheduler's device scoring asks. A set is
//! better when its pairs talk over faster links (NVLink/xGMI, then one PCIe switch, then one
//! NUMA node, then across sockets) and when it spans fewer NUMA nodes; ties go to the lowest
//! indexes, so the answer is deterministic.
//!
//! Pure: works on a link matrix and NUMA table given to it; knows nothing of device IDs,
//! health or Kubernetes.

use crate::server::{Link, ServerModel};

/// The GPUs of one machine as the chooser sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuTopology {
    /// `links[a][b]`: the link between GPUs `a` and `b`.
    pub links: Vec<Vec<Link>>,
    /// The NUMA node of each GPU, when known.
    pub numa: Vec<Option<u8>>,
}

/// Why no set could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuSetError {
    /// More GPUs must be included than the set may hold.
    #[error("{must} GPUs must be included but the set holds only {size}")]
    TooManyRequired {
        /// GPUs that must be included.
        must: usize,
        /// The set size asked for.
        size: usize,
    },
    /// Fewer GPUs are available than asked for.
    #[error("{size} GPUs asked for but only {available} are available")]
    NotEnoughAvailable {
        /// The set size asked for.
        size: usize,
        /// GPUs available.
        available: usize,
    },
    /// An index outside the topology.
    #[error("GPU index {0} is not on this machine")]
    UnknownGpu(usize),
}

/// Above this many candidate sets the chooser grows the set greedily instead of trying all.
const EXHAUSTIVE_LIMIT: u64 = 20_000;

impl GpuTopology {
    /// The topology of a catalog server model.
    pub fn of_server(server: &ServerModel) -> Self {
        let n = server.gpus.len();
        GpuTopology {
            links: (0..n)
                .map(|a| {
                    (0..n)
                        .map(|b| server.gpu_link(a, b).unwrap_or(Link::Sys))
                        .collect()
                })
                .collect(),
            numa: server.gpus.iter().map(|g| Some(g.numa)).collect(),
        }
    }

    /// How good a set is: the sum of its pairs' link ranks, less a penalty per extra NUMA
    /// node. Higher is better.
    pub fn score(&self, set: &[usize]) -> i64 {
        let mut score = 0i64;
        for (i, &a) in set.iter().enumerate() {
            for &b in &set[i + 1..] {
                let link = self.links.get(a).and_then(|row| row.get(b)).copied();
                score += i64::from(link.map_or(0, Link::rank));
            }
        }
        let mut nodes: Vec<u8> = set
            .iter()
            .filter_map(|&g| self.numa.get(g).copied().flatten())
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        score - 50 * i64::try_from(nodes.len().saturating_sub(1)).unwrap_or(i64::MAX / 100)
    }

    /// The best set of `size` GPUs drawn from `available` that contains every GPU of
    /// `must_include` (which count as available).
    pub fn best_set(
        &self,
        available: &[usize],
        must_include: &[usize],
        size: usize,
    ) -> Result<Vec<usize>, GpuSetError> {
        let count = self.links.len();
        if let Some(&bad) = available.iter().chain(must_include).find(|&&g| g >= count) {
            return Err(GpuSetError::UnknownGpu(bad));
        }
        let mut must: Vec<usize> = must_include.to_vec();
        must.sort_unstable();
        must.dedup();
        if must.len() > size {
            return Err(GpuSetError::TooManyRequired {
                must: must.len(),
                size,
            });
        }
        let mut pool: Vec<usize> = available
            .iter()
            .copied()
            .filter(|g| !must.contains(g))
            .collect();
        pool.sort_unstable();
        pool.dedup();
        let wanted = size - must.len();
        if pool.len() < wanted {
            return Err(GpuSetError::NotEnoughAvailable {
                size,
                available: pool.len() + must.len(),
            });
        }
        let chosen = if combinations(pool.len(), wanted) <= EXHAUSTIVE_LIMIT {
            self.exhaustive(&pool, must, wanted)
        } else {
            self.greedy(&pool, must, wanted)
        };
        let mut chosen = chosen;
        chosen.sort_unstable();
        Ok(chosen)
    }

    /// Tries every combination; the first best in lexicographic order wins ties.
    fn exhaustive(&self, pool: &[usize], must: Vec<usize>, wanted: usize) -> Vec<usize> {
        let mut best: Option<(i64, Vec<usize>)> = None;
        let mut picks: Vec<usize> = (0..wanted).collect();
        loop {
            let mut set = must.clone();
            set.extend(picks.iter().map(|&i| pool[i]));
            let score = self.score(&set);
            if best.as_ref().is_none_or(|(top, _)| score > *top) {
                best = Some((score, set));
            }
            // Next combination of `wanted` indexes out of pool.len(), in lexicographic order.
            let Some(i) = (0..wanted)
                .rev()
                .find(|&i| picks[i] < pool.len() - wanted + i)
            else {
                break;
            };
            picks[i] += 1;
            for j in i + 1..wanted {
                picks[j] = picks[j - 1] + 1;
            }
        }
        best.map_or(must, |(_, set)| set)
    }

    /// Adds, one at a time, the GPU that raises the score most.
    fn greedy(&self, pool: &[usize], mut set: Vec<usize>, wanted: usize) -> Vec<usize> {
        let mut left: Vec<usize> = pool.to_vec();
        for _ in 0..wanted {
            let mut best: Option<(i64, usize)> = None;
            for (i, &g) in left.iter().enumerate() {
                set.push(g);
                let score = self.score(&set);
                set.pop();
                if best.is_none_or(|(top, _)| score > top) {
                    best = Some((score, i));
                }
            }
            let Some((_, i)) = best else { break };
            set.push(left.remove(i));
        }
        set
    }
}

/// n choose k, saturating.
fn combinations(n: usize, k: usize) -> u64 {
    let k = k.min(n - k.min(n));
    let mut result: u64 = 1;
    for i in 0..k {
        result = result.saturating_mul((n - i) as u64) / (i as u64 + 1);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    fn topology(server: &str) -> GpuTopology {
        let catalog = Catalog::built_in().expect("catalog");
        GpuTopology::of_server(catalog.server(server).expect("server"))
    }

    #[test]
    fn chooses_the_best_connected_set() {
        // pcie-l40s-4: GPU0-1 share a PCIe switch on NUMA 0, GPU2-3 sit on NUMA 1 under
        // different roots.
        let l40s = topology("pcie-l40s-4");
        let dgx = topology("dgx-h100");
        type Case<'a> = (&'a GpuTopology, &'a [usize], &'a [usize], usize, Vec<usize>);
        let cases: [Case; 7] = [
            (&l40s, &[0, 1, 2, 3], &[], 2, vec![0, 1]),
            (&l40s, &[1, 2, 3], &[], 2, vec![2, 3]),
            (&l40s, &[0, 2, 3], &[0], 2, vec![0, 2]),
            (&l40s, &[0, 1, 2, 3], &[3], 2, vec![2, 3]),
            (&l40s, &[0, 1, 2, 3], &[], 4, vec![0, 1, 2, 3]),
            // NVSwitch: every pair is NV18, so the set stays on one NUMA node.
            (&dgx, &[0, 1, 2, 3, 4, 5, 6, 7], &[], 4, vec![0, 1, 2, 3]),
            (&dgx, &[3, 4, 5], &[], 2, vec![4, 5]),
        ];
        for (i, (topology, available, must, size, want)) in cases.into_iter().enumerate() {
            assert_eq!(
                topology.best_set(available, must, size),
                Ok(want),
                "case {i}"
            );
        }
    }

    #[test]
    fn refuses_impossible_requests() {
        let l40s = topology("pcie-l40s-4");
        assert_eq!(
            l40s.best_set(&[0, 1], &[], 3),
            Err(GpuSetError::NotEnoughAvailable {
                size: 3,
                available: 2
            })
        );
        assert_eq!(
            l40s.best_set(&[0, 1, 2], &[0, 1, 2], 2),
            Err(GpuSetError::TooManyRequired { must: 3, size: 2 })
        );
        assert_eq!(
            l40s.best_set(&[0, 9], &[], 1),
            Err(GpuSetError::UnknownGpu(9))
        );
    }

    #[test]
    fn greedy_and_exhaustive_agree_on_a_switch_fabric() {
        let dgx = topology("dgx-h100");
        let pool: Vec<usize> = (0..8).collect();
        let exhaustive = dgx.exhaustive(&pool, vec![], 4);
        let greedy = dgx.greedy(&pool, vec![], 4);
        assert_eq!(dgx.score(&exhaustive), dgx.score(&greedy));
        assert_eq!(combinations(8, 4), 70);
        assert_eq!(combinations(3, 5), 1);
    }
}
