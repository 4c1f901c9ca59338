//! Peer fan-out: which missing pieces a node fetches next, and from which holder.
//!
//! A node that is not a blob's seed fetches its pieces from the nodes that hold them (the seed,
//! which streams each piece onward once verified, and every other node further along). Each
//! round the shell passes the holders' piece maps; [`assign`] orders the missing pieces rarest
//! first ([`crate::pieces::Download::fetch_order`], rotated so nodes start at different places),
//! skips pieces already being fetched or held by nobody, and gives each piece a parent by
//! [`crate::placement::choose_parent`] (node > rack > zone locality, then a seeded draw weighted
//! by free upload capacity divided among the pieces already given to that holder this round, so
//! one round does not pile onto one parent). A holder that just failed a piece (a CRC mismatch,
//! a truncated body, a refused range) is avoided for that piece while any other holder has it.
//! Each assignment carries the holder's CRC32 for the piece, the value the fetched bytes must
//! match.
//!
//! This module does not know addresses, HTTP or time: holders are indexes into the shell's
//! list.

use std::collections::{BTreeMap, BTreeSet};

use crate::pieces::Download;
use crate::placement::{Candidate, Topology, choose_parent};

/// A node holding some pieces of the blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub topology: Topology,
    /// Free upload capacity (bytes per second, or any unit used consistently).
    pub free_upload: u64,
    /// Verified pieces and their CRC32s.
    pub pieces: BTreeMap<u64, u32>,
}

/// One piece to fetch: from `holder` (an index into the holders given), checked against `crc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assignment {
    pub piece: u64,
    pub holder: usize,
    pub crc: u32,
}

/// How many holders have each piece, indexed by piece.
pub fn availability(count: u64, holders: &[Holder]) -> Vec<u32> {
    let len = usize::try_from(count).unwrap_or(0);
    let mut counts = vec![0u32; len];
    for holder in holders {
        for piece in holder.pieces.keys() {
            if let Some(slot) = usize::try_from(*piece).ok().and_then(|i| counts.get_mut(i)) {
                *slot = slot.saturating_add(1);
            }
        }
    }
    counts
}

/// One round's constraints.
#[derive(Debug, Clone, Copy)]
pub struct Round<'a> {
    /// Pieces being fetched now.
    pub busy: &'a BTreeSet<u64>,
    /// (holder, piece) pairs that just failed.
    pub avoid: &'a BTreeSet<(usize, u64)>,
    /// The most pieces to assign.
    pub limit: usize,
    /// Spreads nodes' starting points over the file.
    pub rotation: u64,
    /// Seeds the parent draws.
    pub seed: u64,
}

/// Up to `round.limit` pieces to fetch now, in fetch order.
pub fn assign(
    download: &Download,
    me: &Topology,
    holders: &[Holder],
    round: &Round<'_>,
) -> Vec<Assignment> {
    let Round {
        busy,
        avoid,
        limit,
        rotation,
        seed,
    } = *round;
    let counts = availability(download.layout().count(), holders);
    let mut given = vec![0u64; holders.len()];
    let mut out = Vec::new();
    for piece in download.fetch_order(&counts, rotation) {
        if out.len() >= limit {
            break;
        }
        if busy.contains(&piece) {
            continue;
        }
        let holding: Vec<usize> = (0..holders.len())
            .filter(|h| holders[*h].pieces.contains_key(&piece))
            .collect();
        let preferred: Vec<usize> = holding
            .iter()
            .copied()
            .filter(|h| !avoid.contains(&(*h, piece)))
            .collect();
        let pool = if preferred.is_empty() {
            holding
        } else {
            preferred
        };
        if pool.is_empty() {
            continue;
        }
        let candidates: Vec<Candidate> = pool
            .iter()
            .map(|h| Candidate {
                topology: holders[*h].topology.clone(),
                free_upload: holders[*h].free_upload / (1 + given[*h]),
            })
            .collect();
        let draw = seed ^ piece.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let Some(chosen) = choose_parent(me, &candidates, draw) else {
            continue;
        };
        let Some(position) = candidates.iter().position(|c| std::ptr::eq(c, chosen)) else {
            continue;
        };
        let holder = pool[position];
        let Some(crc) = holders[holder].pieces.get(&piece).copied() else {
            continue;
        };
        given[holder] += 1;
        out.push(Assignment { piece, holder, crc });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pieces::Layout;

    fn topo(node: &str, rack: &str, zone: &str) -> Topology {
        Topology {
            node: node.into(),
            rack: Some(rack.into()),
            zone: Some(zone.into()),
        }
    }

    fn holder(t: Topology, free: u64, pieces: &[u64]) -> Holder {
        Holder {
            topology: t,
            free_upload: free,
            pieces: pieces.iter().map(|p| (*p, 100 + *p as u32)).collect(),
        }
    }

    fn download(count: u64, verified: &[u64]) -> Download {
        let layout = Layout::with_piece_length(count * 10, 10).unwrap();
        Download::resume(layout, &"0".repeat(64), verified.iter().map(|p| (*p, 0))).unwrap()
    }

    #[test]
    fn availability_counts_holders() {
        let holders = vec![
            holder(topo("a", "r1", "z1"), 1, &[0, 1]),
            holder(topo("b", "r1", "z1"), 1, &[1, 2, 9]),
        ];
        assert_eq!(availability(4, &holders), vec![1, 2, 1, 0]);
    }

    #[test]
    fn assign_table() {
        let me = topo("me", "r1", "z1");
        let seed = holder(topo("seed", "r9", "z2"), 100, &[0, 1, 2, 3]);
        let rack = holder(topo("rackmate", "r1", "z1"), 100, &[1]);
        let zone = holder(topo("zonemate", "r2", "z1"), 100, &[2, 3]);
        let none = BTreeSet::new();
        // (name, verified, holders, busy, avoid, limit, want (piece, holder))
        type Case<'a> = (
            &'a str,
            &'a [u64],
            Vec<Holder>,
            BTreeSet<u64>,
            BTreeSet<(usize, u64)>,
            usize,
            Vec<(u64, usize)>,
        );
        let cases: Vec<Case> = vec![
            (
                "only the seed: index order",
                &[],
                vec![seed.clone()],
                none.clone(),
                BTreeSet::new(),
                8,
                vec![(0, 0), (1, 0), (2, 0), (3, 0)],
            ),
            (
                "rarest first, locality picks the parent",
                &[],
                vec![seed.clone(), rack.clone(), zone.clone()],
                none.clone(),
                BTreeSet::new(),
                8,
                vec![(0, 0), (1, 1), (2, 2), (3, 2)],
            ),
            (
                "verified, busy and unheld pieces skipped; limit",
                &[0],
                vec![rack.clone(), zone.clone()],
                BTreeSet::from([2]),
                BTreeSet::new(),
                1,
                vec![(1, 0)],
            ),
            (
                "a failed holder is avoided while another has the piece",
                &[0, 1, 3],
                vec![seed.clone(), zone.clone()],
                none.clone(),
                BTreeSet::from([(1, 2)]),
                8,
                vec![(2, 0)],
            ),
            (
                "a failed holder is used when it is the only one",
                &[0, 1, 3],
                vec![zone.clone()],
                none.clone(),
                BTreeSet::from([(0, 2)]),
                8,
                vec![(2, 0)],
            ),
            (
                "nothing held: nothing assigned",
                &[],
                vec![],
                none.clone(),
                BTreeSet::new(),
                8,
                vec![],
            ),
        ];
        for (name, verified, holders, busy, avoid, limit, want) in cases {
            let d = download(4, verified);
            let round = Round {
                busy: &busy,
                avoid: &avoid,
                limit,
                rotation: 0,
                seed: 7,
            };
            let got: Vec<(u64, usize)> = assign(&d, &me, &holders, &round)
                .into_iter()
                .map(|a| (a.piece, a.holder))
                .collect();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn assignments_carry_the_holders_crc_and_spread_load() {
        let me = topo("me", "r1", "z1");
        let holders: Vec<Holder> = ["a", "b", "c", "d"]
            .iter()
            .map(|n| holder(topo(n, "r1", "z1"), 1000, &(0..64).collect::<Vec<_>>()))
            .collect();
        let d = download(64, &[]);
        let (busy, avoid) = (BTreeSet::new(), BTreeSet::new());
        let round = Round {
            busy: &busy,
            avoid: &avoid,
            limit: 64,
            rotation: 5,
            seed: 11,
        };
        let got = assign(&d, &me, &holders, &round);
        assert_eq!(got.len(), 64);
        assert!(got.iter().all(|a| a.crc == 100 + a.piece as u32));
        let mut per_holder = [0usize; 4];
        for a in &got {
            per_holder[a.holder] += 1;
        }
        // Weighting by free capacity divided by pieces given keeps every holder busy.
        assert!(per_holder.iter().all(|n| *n >= 8), "{per_holder:?}");
    }
}
