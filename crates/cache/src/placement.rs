//! Placement: which node seeds a blob from the origin, and which parent serves a piece.
//!
//! **Seeds.** Every node ranks the candidate nodes for a task by rendezvous
//! (highest-random-weight) hashing: the weight of a node is the first 8 bytes of
//! `sha256(task_id ‖ 0x00 ‖ node_name)`, the highest weight seeds. Every node computes the same
//! answer from the same node list without talking, and removing a node moves only the tasks it
//! ranked first (a consistent hash without a ring to maintain). [`seed_nodes`] gives the top `n`
//! for a replica count.
//!
//! **Parents.** A piece comes from the closest holder: same node > same rack > same zone >
//! elsewhere ([`Locality`]). Among holders of the best locality the choice is a seeded random
//! draw weighted by free upload capacity, as Dragonfly's client `parent_selector` weights parents
//! by idle transmit bandwidth, so load spreads instead of piling onto the first-listed parent.
//!
//! This module does not know which nodes are alive, which pieces they hold or how free upload
//! capacity is measured; the shell passes those in. Topology names are the values of the
//! shell's chosen labels (for example `topology.kubernetes.io/zone`).

use sha2::{Digest, Sha256};

use crate::SeededRng;

/// The rendezvous weight of `node` for `task_id`.
pub fn rendezvous_weight(task_id: &str, node: &str) -> u64 {
    let mut hasher = Sha256::new();
    hasher.update(task_id.as_bytes());
    hasher.update([0u8]);
    hasher.update(node.as_bytes());
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The nodes ranked for `task_id`, highest weight first, at most `n` (ties by name; duplicate
/// names count once).
pub fn seed_nodes<'a, S: AsRef<str>>(task_id: &str, nodes: &'a [S], n: usize) -> Vec<&'a str> {
    let mut ranked: Vec<(u64, &str)> = nodes
        .iter()
        .map(|node| (rendezvous_weight(task_id, node.as_ref()), node.as_ref()))
        .collect();
    ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    ranked.dedup_by(|a, b| a.1 == b.1);
    ranked.into_iter().take(n).map(|(_, node)| node).collect()
}

/// The node that fetches `task_id` from the origin, if there is any node.
pub fn seed_node<'a, S: AsRef<str>>(task_id: &str, nodes: &'a [S]) -> Option<&'a str> {
    seed_nodes(task_id, nodes, 1).into_iter().next()
}

/// Where a node sits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    pub node: String,
    pub rack: Option<String>,
    pub zone: Option<String>,
}

/// A topology naming all three levels, for the crate's tests.
#[cfg(test)]
pub(crate) fn test_topology(node: &str, rack: &str, zone: &str) -> Topology {
    Topology {
        node: node.into(),
        rack: Some(rack.into()),
        zone: Some(zone.into()),
    }
}

/// How close a parent is, best first (the derived order ranks them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Locality {
    SameNode,
    SameRack,
    SameZone,
    Other,
}

/// How close `other` is to `me`. A rack counts only when both name it and the zones do not
/// differ (rack names may repeat across zones); a zone only when both name it.
pub fn locality(me: &Topology, other: &Topology) -> Locality {
    let both =
        |a: &Option<String>, b: &Option<String>| matches!((a, b), (Some(a), Some(b)) if a == b);
    let zones_differ = matches!((&me.zone, &other.zone), (Some(a), Some(b)) if a != b);
    if me.node == other.node {
        Locality::SameNode
    } else if both(&me.rack, &other.rack) && !zones_differ {
        Locality::SameRack
    } else if both(&me.zone, &other.zone) {
        Locality::SameZone
    } else {
        Locality::Other
    }
}

/// A node holding the piece, with its free upload capacity (bytes per second, or any unit the
/// shell uses consistently).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub topology: Topology,
    pub free_upload: u64,
}

/// The parent to fetch a piece from: the best locality present, then a draw seeded by `seed`
/// weighted by free upload capacity (uniform when every candidate of that locality reports
/// none). `None` when there is no candidate.
pub fn choose_parent<'a>(
    me: &Topology,
    candidates: &'a [Candidate],
    seed: u64,
) -> Option<&'a Candidate> {
    let best = candidates.iter().map(|c| locality(me, &c.topology)).min()?;
    let tier: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| locality(me, &c.topology) == best)
        .collect();
    let mut rng = SeededRng::new(seed);
    let total: u128 = tier.iter().map(|c| u128::from(c.free_upload)).sum();
    if total == 0 {
        let last = u64::try_from(tier.len() - 1).unwrap_or(0);
        return usize::try_from(rng.up_to(last))
            .ok()
            .and_then(|i| tier.get(i).copied());
    }
    // A point in 0..total, then the candidate whose share covers it.
    let point = (u128::from(rng.next_u64()) * total) >> 64;
    let mut acc = 0u128;
    for candidate in &tier {
        acc += u128::from(candidate.free_upload);
        if point < acc {
            return Some(candidate);
        }
    }
    tier.last().copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn at(node: &str, rack: Option<&str>, zone: Option<&str>) -> Topology {
        Topology {
            node: node.into(),
            rack: rack.map(Into::into),
            zone: zone.map(Into::into),
        }
    }

    #[test]
    fn every_node_agrees_on_the_seed_and_order_does_not_matter() {
        let nodes = ["gpu-a", "gpu-b", "gpu-c", "gpu-d"];
        let mut reversed = nodes;
        reversed.reverse();
        for task in ["t1", "t2", "t3"] {
            assert_eq!(seed_node(task, &nodes), seed_node(task, &reversed));
            assert_eq!(seed_nodes(task, &nodes, 4), seed_nodes(task, &reversed, 4));
        }
        assert_eq!(seed_node::<&str>("t", &[]), None);
        assert_eq!(seed_nodes("t", &["a", "a", "b"], 5).len(), 2);
        // Tasks spread over the nodes.
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for i in 0..400 {
            *counts
                .entry(seed_node(&format!("task-{i}"), &nodes).unwrap())
                .or_default() += 1;
        }
        assert_eq!(counts.len(), 4);
        assert!(counts.values().all(|c| *c > 60), "{counts:?}");
    }

    #[test]
    fn locality_table() {
        let me = at("n1", Some("r1"), Some("z1"));
        for (other, want) in [
            (at("n1", None, None), Locality::SameNode),
            (at("n2", Some("r1"), Some("z1")), Locality::SameRack),
            (at("n2", Some("r1"), None), Locality::SameRack),
            (at("n2", Some("r1"), Some("z2")), Locality::Other),
            (at("n2", Some("r2"), Some("z1")), Locality::SameZone),
            (at("n2", None, Some("z1")), Locality::SameZone),
            (at("n2", None, None), Locality::Other),
        ] {
            assert_eq!(locality(&me, &other), want, "{other:?}");
        }
        assert_eq!(
            locality(&at("n1", None, None), &at("n2", None, None)),
            Locality::Other
        );
    }

    #[test]
    fn parent_prefers_locality_then_spreads_by_free_upload() {
        let me = at("n1", Some("r1"), Some("z1"));
        let c = |node, rack, zone, free| Candidate {
            topology: at(node, rack, zone),
            free_upload: free,
        };
        let far = c("far", None, Some("z9"), 1_000_000);
        let zone = c("zone", Some("r2"), Some("z1"), 10);
        let rack_busy = c("rack-busy", Some("r1"), Some("z1"), 0);
        let rack_a = c("rack-a", Some("r1"), Some("z1"), 300);
        let rack_b = c("rack-b", Some("r1"), Some("z1"), 100);
        assert_eq!(choose_parent(&me, &[], 1), None);
        assert_eq!(
            choose_parent(&me, std::slice::from_ref(&far), 1),
            Some(&far)
        );
        let both = [far.clone(), zone.clone()];
        assert_eq!(choose_parent(&me, &both, 1), Some(&zone));
        let rack = [far, zone, rack_busy.clone(), rack_a.clone(), rack_b.clone()];
        let mut picks: BTreeMap<String, u32> = BTreeMap::new();
        for seed in 0..4000 {
            let parent = choose_parent(&me, &rack, seed).unwrap();
            *picks.entry(parent.topology.node.clone()).or_default() += 1;
        }
        assert_eq!(
            picks.get("rack-busy"),
            None,
            "a parent with no free upload is not drawn"
        );
        let (a, b) = (picks["rack-a"], picks["rack-b"]);
        assert_eq!(a + b, 4000);
        assert!((2700..3300).contains(&a), "weighted 3:1, got {a}:{b}");
        // Same seed, same choice; all-zero capacities are drawn uniformly.
        assert_eq!(choose_parent(&me, &rack, 42), choose_parent(&me, &rack, 42));
        let idle = [
            rack_busy.clone(),
            Candidate {
                free_upload: 0,
                ..rack_a
            },
        ];
        let drawn: std::collections::BTreeSet<_> = (0..64)
            .map(|s| choose_parent(&me, &idle, s).unwrap().topology.node.clone())
            .collect();
        assert_eq!(drawn.len(), 2);
    }

    proptest! {
        #[test]
        fn removing_a_node_moves_only_its_tasks(n in 2usize..12, gone in 0usize..12, tasks in 1usize..60) {
            let nodes: Vec<String> = (0..n).map(|i| format!("node-{i}")).collect();
            let gone = &nodes[gone % n];
            let rest: Vec<String> = nodes.iter().filter(|x| *x != gone).cloned().collect();
            for t in 0..tasks {
                let task = format!("task-{t}");
                let before = seed_node(&task, &nodes).unwrap();
                let after = seed_node(&task, &rest).unwrap();
                if before != gone.as_str() {
                    prop_assert_eq!(before, after);
                } else {
                    // It moves to the node ranked second before.
                    let ranked = seed_nodes(&task, &nodes, 2);
                    prop_assert_eq!(Some(&after), ranked.get(1));
                }
            }
        }
    }
}
