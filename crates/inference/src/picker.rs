//! The endpoint picker: which model server of a pool gets a request.
//!
//! Upstream's scheduling profile in miniature: every candidate is scored by each configured
//! scorer (0 to 1), the weighted scores are summed, and the max-score picker takes the best,
//! breaking ties by a shuffle (seeded here). The scorers and their formulas are upstream's:
//! `queue-scorer` (min-max of the waiting queue), `kv-cache-utilization-scorer` (1 − usage),
//! `prefix-cache-scorer` (leading prompt blocks the picker's approximate index believes the
//! server holds, over the prompt's blocks) and `lora-affinity-scorer` (1 when the adapter is
//! running, 0.8 when a slot is free, 0.6 when it is queued, else 0). [`Profile::default`] is
//! the chart's default profile: queue 2, KV cache 2, prefix 3. [`RoundRobin`] is the baseline
//! a plain Service gives.
//!
//! Knows nothing of how metrics are gathered (they are handed in, as stale as the caller
//! makes them) nor of servers beyond their index.

use std::collections::HashMap;
use std::fmt;

use crate::metrics::EndpointMetrics;
use crate::prefix::{BlockHash, Lru, PICKER_LRU_BLOCKS};

/// One of upstream's scorers, by its plugin type name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scorer {
    Queue,
    KvCacheUtilization,
    PrefixCache,
    LoraAffinity,
}

impl Scorer {
    pub const ALL: [Scorer; 4] = [
        Scorer::Queue,
        Scorer::KvCacheUtilization,
        Scorer::PrefixCache,
        Scorer::LoraAffinity,
    ];

    /// The plugin type name upstream's configuration uses.
    pub fn type_name(self) -> &'static str {
        match self {
            Scorer::Queue => "queue-scorer",
            Scorer::KvCacheUtilization => "kv-cache-utilization-scorer",
            Scorer::PrefixCache => "prefix-cache-scorer",
            Scorer::LoraAffinity => "lora-affinity-scorer",
        }
    }
}

/// A request as the picker sees it.
#[derive(Debug, Clone, Copy)]
pub struct PickRequest<'a> {
    /// The model or adapter asked for (`TargetModel`).
    pub model: &'a str,
    /// The prompt's leading block hashes.
    pub blocks: &'a [BlockHash],
}

/// Weighted scorers.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub scorers: Vec<(Scorer, f64)>,
}

impl Default for Profile {
    fn default() -> Profile {
        Profile {
            scorers: vec![
                (Scorer::Queue, 2.0),
                (Scorer::KvCacheUtilization, 2.0),
                (Scorer::PrefixCache, 3.0),
            ],
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .scorers
            .iter()
            .map(|(scorer, weight)| format!("{}={weight}", scorer.type_name()))
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// A profile the parser could not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("profile {part:?}: {reason}")]
pub struct ProfileError {
    pub part: String,
    pub reason: String,
}

impl std::str::FromStr for Profile {
    type Err = ProfileError;

    /// `queue-scorer=2,kv-cache-utilization-scorer=2,prefix-cache-scorer=3`; a scorer without
    /// `=weight` weighs 1, as upstream's default weight.
    fn from_str(text: &str) -> Result<Profile, ProfileError> {
        let mut scorers = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let error = |reason: String| ProfileError {
                part: part.into(),
                reason,
            };
            let (name, weight) = match part.split_once('=') {
                Some((name, weight)) => (name.trim(), weight.trim()),
                None => (part, "1"),
            };
            let scorer = Scorer::ALL
                .into_iter()
                .find(|s| s.type_name() == name)
                .ok_or_else(|| {
                    let known: Vec<_> = Scorer::ALL.iter().map(|s| s.type_name()).collect();
                    error(format!("unknown scorer; known: {}", known.join(", ")))
                })?;
            let weight: f64 = weight
                .parse()
                .ok()
                .filter(|w: &f64| w.is_finite() && *w >= 0.0)
                .ok_or_else(|| error(format!("weight {weight:?} is not a number ≥ 0")))?;
            if scorers.iter().any(|(s, _)| *s == scorer) {
                return Err(error("the scorer appears twice".into()));
            }
            scorers.push((scorer, weight));
        }
        if scorers.is_empty() {
            return Err(ProfileError {
                part: text.into(),
                reason: "no scorer".into(),
            });
        }
        Ok(Profile { scorers })
    }
}

/// One scorer's scores for every candidate, in the candidates' order.
pub fn scores(
    scorer: Scorer,
    request: PickRequest<'_>,
    candidates: &[EndpointMetrics],
    prefix_matches: &[usize],
) -> Vec<f64> {
    match scorer {
        Scorer::Queue => {
            let min = candidates.iter().map(|m| m.waiting).min().unwrap_or(0);
            let max = candidates.iter().map(|m| m.waiting).max().unwrap_or(0);
            candidates
                .iter()
                .map(|m| {
                    if max == min {
                        1.0
                    } else {
                        f64::from(max - m.waiting) / f64::from(max - min)
                    }
                })
                .collect()
        }
        Scorer::KvCacheUtilization => candidates.iter().map(|m| 1.0 - m.kv_cache_usage).collect(),
        Scorer::PrefixCache => prefix_matches
            .iter()
            .map(|matched| {
                if request.blocks.is_empty() {
                    0.0
                } else {
                    *matched as f64 / request.blocks.len() as f64
                }
            })
            .collect(),
        Scorer::LoraAffinity => candidates
            .iter()
            .map(|m| {
                let active = m.active_adapters.contains(request.model);
                let waiting = m.waiting_adapters.contains(request.model);
                let slots = m.active_adapters.len() + m.waiting_adapters.len();
                if active {
                    1.0
                } else if slots < m.max_adapters as usize {
                    0.8
                } else if waiting {
                    0.6
                } else {
                    0.0
                }
            })
            .collect(),
    }
}

/// The picker's state: its approximate prefix index per server (by the caller's id for the
/// server, made on first sight) and its tie-break stream.
#[derive(Debug, Clone)]
pub struct Picker {
    profile: Profile,
    indexes: HashMap<u64, Lru>,
    rng: fastrand::Rng,
}

impl Picker {
    pub fn new(profile: Profile, seed: u64) -> Picker {
        Picker {
            profile,
            indexes: HashMap::new(),
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// Forgets the indexes of servers not in `alive`.
    pub fn retain(&mut self, alive: &[u64]) {
        self.indexes.retain(|id, _| alive.contains(id));
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Chooses among `candidates` (metrics per server id); None when there are none. The
    /// chosen server's index learns the request's blocks, as upstream's prefix producer
    /// records them once the request is routed.
    pub fn pick(
        &mut self,
        request: PickRequest<'_>,
        candidates: &[(u64, EndpointMetrics)],
    ) -> Option<u64> {
        if candidates.is_empty() {
            return None;
        }
        let metrics: Vec<EndpointMetrics> = candidates.iter().map(|(_, m)| m.clone()).collect();
        let matches: Vec<usize> = candidates
            .iter()
            .map(|(server, _)| {
                self.indexes
                    .get(server)
                    .map_or(0, |index| index.leading_matches(request.blocks))
            })
            .collect();
        let mut total = vec![0.0; candidates.len()];
        for (scorer, weight) in &self.profile.scorers {
            for (sum, score) in total
                .iter_mut()
                .zip(scores(*scorer, request, &metrics, &matches))
            {
                *sum += weight * score;
            }
        }
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        self.rng.shuffle(&mut order);
        order.sort_by(|a, b| total[*b].total_cmp(&total[*a]));
        let chosen = candidates[order[0]].0;
        let index = self
            .indexes
            .entry(chosen)
            .or_insert_with(|| Lru::new(PICKER_LRU_BLOCKS));
        for block in request.blocks {
            index.touch(*block);
        }
        Some(chosen)
    }
}

/// Each request to the next server in turn.
#[derive(Debug, Clone, Default)]
pub struct RoundRobin {
    next: usize,
}

impl RoundRobin {
    pub fn pick(&mut self, servers: usize) -> Option<usize> {
        if servers == 0 {
            return None;
        }
        let chosen = self.next % servers;
        self.next = (chosen + 1) % servers;
        Some(chosen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(waiting: u32, kv: f64, active: &[&str], queued: &[&str]) -> EndpointMetrics {
        EndpointMetrics {
            waiting,
            running: 0,
            kv_cache_usage: kv,
            active_adapters: active.iter().map(|a| a.to_string()).collect(),
            waiting_adapters: queued.iter().map(|a| a.to_string()).collect(),
            max_adapters: 2,
        }
    }

    const PLAIN: PickRequest<'static> = PickRequest {
        model: "sql",
        blocks: &[1, 2, 3, 4],
    };

    #[test]
    fn each_scorer_matches_upstreams_formula() {
        let servers = [
            load(0, 0.2, &["sql"], &[]),
            load(5, 0.9, &["chat"], &[]),
            load(10, 0.5, &["chat", "code"], &["sql"]),
            load(10, 0.0, &["chat", "code"], &[]),
        ];
        let matches = [4, 2, 0, 0];
        let table: [(Scorer, [f64; 4]); 4] = [
            (Scorer::Queue, [1.0, 0.5, 0.0, 0.0]),
            (Scorer::KvCacheUtilization, [0.8, 0.1, 0.5, 1.0]),
            (Scorer::PrefixCache, [1.0, 0.5, 0.0, 0.0]),
            (Scorer::LoraAffinity, [1.0, 0.8, 0.6, 0.0]),
        ];
        for (scorer, want) in table {
            let got = scores(scorer, PLAIN, &servers, &matches);
            for (g, w) in got.iter().zip(want) {
                assert!((g - w).abs() < 1e-9, "{scorer:?}: {got:?} vs {want:?}");
            }
        }
        let equal = [load(3, 0.0, &[], &[]), load(3, 0.0, &[], &[])];
        assert_eq!(scores(Scorer::Queue, PLAIN, &equal, &[0, 0]), [1.0, 1.0]);
        let no_blocks = PickRequest {
            model: "sql",
            blocks: &[],
        };
        assert_eq!(
            scores(Scorer::PrefixCache, no_blocks, &equal, &[0, 0]),
            [0.0, 0.0]
        );
    }

    #[test]
    fn the_default_profile_prefers_the_server_holding_the_prefix_until_its_queue_grows() {
        let mut picker = Picker::new(Profile::default(), 7);
        let idle = [(0, load(0, 0.1, &[], &[])), (1, load(0, 0.1, &[], &[]))];
        let first = picker.pick(PLAIN, &idle).expect("a server");
        for _ in 0..5 {
            assert_eq!(picker.pick(PLAIN, &idle), Some(first), "prefix affinity");
        }
        // Queue 2 + KV 2 outweigh prefix 3 once the holder is far busier.
        let mut busy = idle.clone();
        busy[first as usize].1 = load(20, 0.95, &[], &[]);
        assert_eq!(picker.pick(PLAIN, &busy), Some(1 - first));
    }

    #[test]
    fn ties_are_broken_by_the_seed_and_only_by_it() {
        let idle: Vec<_> = (0..8).map(|i| (i, load(0, 0.0, &[], &[]))).collect();
        let fresh = |seed| {
            let mut picker = Picker::new(Profile::default(), seed);
            let request = PickRequest {
                model: "m",
                blocks: &[],
            };
            (0..16)
                .map(|_| picker.pick(request, &idle).expect("a server"))
                .collect::<Vec<_>>()
        };
        assert_eq!(fresh(1), fresh(1));
        assert_ne!(fresh(1), fresh(2));
        let spread: std::collections::BTreeSet<_> = fresh(1).into_iter().collect();
        assert!(spread.len() > 1, "ties are not always broken the same way");
        assert_eq!(Picker::new(Profile::default(), 1).pick(PLAIN, &[]), None);
    }

    #[test]
    fn profiles_parse_from_upstream_plugin_names() {
        let profile: Profile = "queue-scorer=2, prefix-cache-scorer=3,lora-affinity-scorer"
            .parse()
            .expect("parses");
        assert_eq!(
            profile.scorers,
            [
                (Scorer::Queue, 2.0),
                (Scorer::PrefixCache, 3.0),
                (Scorer::LoraAffinity, 1.0)
            ]
        );
        assert_eq!(
            Profile::default().to_string(),
            "queue-scorer=2,kv-cache-utilization-scorer=2,prefix-cache-scorer=3"
        );
        let bad = [
            ("latency-scorer=1", "unknown scorer"),
            ("queue-scorer=-1", "not a number"),
            ("queue-scorer=x", "not a number"),
            ("queue-scorer,queue-scorer", "twice"),
            ("", "no scorer"),
        ];
        for (text, reason) in bad {
            let error = text.parse::<Profile>().expect_err(text);
            assert!(error.to_string().contains(reason), "{text}: {error}");
        }
    }

    #[test]
    fn retain_forgets_the_indexes_of_servers_gone() {
        let mut picker = Picker::new(Profile::default(), 3);
        assert_eq!(
            picker.pick(PLAIN, &[(10, load(0, 0.1, &[], &[]))]),
            Some(10)
        );
        assert_eq!(
            picker.pick(PLAIN, &[(20, load(0, 0.1, &[], &[]))]),
            Some(20)
        );
        picker.retain(&[20]);
        assert!(!picker.indexes.contains_key(&10));
        // 20 still holds the prompt's blocks: it wins over a fresh 10 on the prefix score.
        let both = [(10, load(0, 0.1, &[], &[])), (20, load(0, 0.1, &[], &[]))];
        assert_eq!(picker.pick(PLAIN, &both), Some(20));
    }

    #[test]
    fn round_robin_cycles() {
        let mut rr = RoundRobin::default();
        let picks: Vec<_> = (0..5).map(|_| rr.pick(3)).collect();
        assert_eq!(picks, [Some(0), Some(1), Some(2), Some(0), Some(1)]);
        assert_eq!(rr.pick(0), None);
    }
}
