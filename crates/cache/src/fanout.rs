//! Peer fan-out: which missing pieces a node fetches next, and from which holder.
//!
//! A node that is not a blob's seed fetches its pieces from the nodes that hold them (the seed,
//! which streams each piece onward once verified, and every other node further along). Each
//! round the shell passes the holders' piece maps; [`assign`] orders the missing pieces rarest
//! first ([`crate::pieces::Download::fetch_order`], rotated so nodes start at different places),
//! skips pieces already being fetched or held by nobody, and gives each piece a parent by
//! [`crate::placement::choose_parent`] (node > rack > zone locality, then a seeded draw weighted
//! by free upload capacity divided among the pieces already given to that holder this round, so
//! one round does not pile onto one parent), at most `per_holder` pieces in flight from any one
//! holder. A holder that just failed a piece (a CRC mismatch,
//! a truncated body, a refused range) is not asked for that piece again while the shell keeps
//! the pair in `avoid` (for a short while), even when it is the only holder: a peer serving bad
//! bytes must not be asked for them in a loop.
//! Each assignment carries the holder's CRC32 for the piece, the value the fetched bytes must
//! match.
//!
//! While the seed is still reading the origin its upload is the swarm's scarcest link, and
//! rarest-first alone sends every node to the newest piece it holds: the seed would upload one
//! piece many times over. With a [`SeedShare`], a piece only the seed holds is fetched from it
//! by one node alone (the piece's index modulo the non-seed nodes picks it, BitTorrent's
//! super-seeding); the others take it from that node once it holds it, and a piece others hold
//! too is not taken from the seed at all. Once the seed holds the whole blob the shell lifts
//! the rule, so a slow node never holds the others back for long.
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

/// Which peers to ask for their piece maps this round: the seed always, then at most `max`
/// others — half of them the closest (node > rack > zone > other, peers of equal locality
/// taken in a rotation that starts at `round`), the other half from all the rest in that
/// rotation, so that every peer is asked in turn and pieces held only in another zone are
/// found. Indexes into `peers`, ascending. Bounds a node's polling in a large cluster.
pub fn peers_to_poll(
    me: &Topology,
    peers: &[Topology],
    seed: Option<usize>,
    max: usize,
    round: u64,
) -> Vec<usize> {
    let count = u64::try_from(peers.len()).unwrap_or(u64::MAX).max(1);
    let start = round % count;
    let mut others: Vec<(crate::placement::Locality, u64, usize)> = (0..peers.len())
        .filter(|i| Some(*i) != seed)
        .map(|i| {
            let index = u64::try_from(i).unwrap_or(u64::MAX);
            let rotated = (index + count - start) % count;
            (crate::placement::locality(me, &peers[i]), rotated, i)
        })
        .collect();
    others.sort_unstable();
    let near = max.div_ceil(2);
    let mut chosen: Vec<usize> = others.iter().take(near).map(|(_, _, i)| *i).collect();
    let mut rest: Vec<(u64, usize)> = others
        .iter()
        .skip(near)
        .map(|(_, rotated, i)| (*rotated, *i))
        .collect();
    rest.sort_unstable();
    chosen.extend(rest.into_iter().take(max - near).map(|(_, i)| i));
    chosen.extend(seed.filter(|s| *s < peers.len()));
    chosen.sort_unstable();
    chosen
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
    /// Pieces being fetched now from each holder (indexed as the holders; absent: none).
    pub load: &'a [usize],
    /// The most pieces fetched at once from one holder, so that a node does not open all its
    /// streams to the one holder of new pieces (the seed) while its other peers could serve.
    pub per_holder: usize,
    /// (holder, piece) pairs that just failed.
    pub avoid: &'a BTreeSet<(usize, u64)>,
    /// The most pieces to assign.
    pub limit: usize,
    /// Spreads nodes' starting points over the file.
    pub rotation: u64,
    /// Seeds the parent draws.
    pub seed: u64,
    /// Super-seeding while the seed reads the origin (none: any piece from any holder). The
    /// shell passes a share only while the seed lacks pieces: the holders' maps may list only
    /// what this node lacks, so the core cannot tell.
    pub seed_share: Option<SeedShare>,
}

/// Which pieces a node may take from the seed while only the seed holds them: those whose
/// index modulo `slots` is `slot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedShare {
    /// The seed's index among the holders.
    pub holder: usize,
    /// This node's place among the non-seed nodes (all of them number it alike).
    pub slot: u64,
    /// How many non-seed nodes there are.
    pub slots: u64,
}

impl SeedShare {
    /// The share of `me` among `nodes` (every node of the blob, the seed among them) for
    /// `seed` at holder index `holder`: `me`'s place among the others in name order.
    pub fn of(me: &str, nodes: &[&str], seed: &str, holder: usize) -> Option<SeedShare> {
        let mut others: Vec<&str> = nodes.iter().copied().filter(|n| *n != seed).collect();
        others.sort_unstable();
        others.dedup();
        let slot = others.iter().position(|n| *n == me)?;
        Some(SeedShare {
            holder,
            slot: u64::try_from(slot).ok()?,
            slots: u64::try_from(others.len()).ok()?,
        })
    }
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
        load,
        per_holder,
        avoid,
        limit,
        rotation,
        seed,
        seed_share,
    } = *round;
    let count = download.layout().count();
    let counts = availability(count, holders);
    let share = seed_share;
    let mut given: Vec<u64> = (0..holders.len())
        .map(|h| {
            load.get(h)
                .map_or(0, |n| u64::try_from(*n).unwrap_or(u64::MAX))
        })
        .collect();
    let cap = u64::try_from(per_holder).unwrap_or(u64::MAX);
    let mut out = Vec::new();
    for piece in download.fetch_order(&counts, rotation) {
        if out.len() >= limit {
            break;
        }
        if busy.contains(&piece) {
            continue;
        }
        let holding: Vec<usize> = (0..holders.len())
            .filter(|h| holders[*h].pieces.contains_key(&piece) && given[*h] < cap)
            .collect();
        let pool: Vec<usize> = holding
            .into_iter()
            .filter(|h| !avoid.contains(&(*h, piece)))
            .collect();
        if pool.is_empty() {
            continue;
        }
        let mut pool = pool;
        if let Some(share) = share {
            if pool == [share.holder] {
                if piece % share.slots.max(1) != share.slot {
                    // Another node takes this piece from the seed; it is fetched from that node.
                    continue;
                }
            } else {
                // Held elsewhere too: the seed's upload is kept for the pieces only it holds.
                pool.retain(|h| *h != share.holder);
            }
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

/// How many poll intervals a node waits before announcing again once `idle` announcements
/// in a row handed it nothing new, in a swarm where it has `peers` peers: twice as many with
/// each such round, up to a cap, and never more than [`MAX_IDLE_INTERVALS`].
///
/// A node with pieces `in_flight` announces anyway as each arrives, so its idle polls only
/// look for more work: it waits up to one interval per eight peers. A node with nothing in
/// flight has only its polls to get work by; it waits up to one interval per 64 peers. Holders
/// stay busy while *some* asker announces about once an interval, and a large swarm as a
/// whole still asks several times an interval while its seed answers far fewer idle
/// announcements. A swarm of eight or fewer keeps polling every interval.
pub fn idle_poll_intervals(idle: u32, peers: usize, in_flight: bool) -> u32 {
    let per_interval = if in_flight { 8 } else { 64 };
    let cap = u32::try_from(peers / per_interval)
        .unwrap_or(u32::MAX)
        .clamp(1, MAX_IDLE_INTERVALS);
    1u32.checked_shl(idle).unwrap_or(u32::MAX).min(cap)
}

/// The longest wait between idle announcements, in poll intervals.
pub const MAX_IDLE_INTERVALS: u32 = 16;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pieces::Layout;
    use crate::placement::test_topology as topo;

    #[test]
    fn idle_announcements_back_off_with_the_swarm_size() {
        // (rounds in a row that handed nothing, peers, pieces in flight, intervals to wait)
        let table = [
            (0, 7, true, 1),
            (5, 7, true, 1),
            (0, 63, true, 1),
            (1, 63, true, 2),
            (2, 63, true, 4),
            (3, 63, true, 7),
            (9, 63, true, 7),
            (9, 63, false, 1),
            (4, 511, true, 16),
            (40, 511, true, 16),
            (2, 511, false, 4),
            (9, 511, false, 7),
            (40, usize::MAX, false, 16),
        ];
        for (idle, peers, in_flight, want) in table {
            assert_eq!(
                idle_poll_intervals(idle, peers, in_flight),
                want,
                "idle {idle}, peers {peers}, in flight {in_flight}"
            );
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
                "a failed holder is not asked again even when it is the only one",
                &[0, 1, 3],
                vec![zone.clone()],
                none.clone(),
                BTreeSet::from([(0, 2)]),
                8,
                vec![],
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
                load: &[],
                per_holder: 8,
                avoid: &avoid,
                limit,
                rotation: 0,
                seed: 7,
                seed_share: None,
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
            load: &[],
            per_holder: 64,
            avoid: &avoid,
            limit: 64,
            rotation: 5,
            seed: 11,
            seed_share: None,
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

    #[test]
    fn per_holder_cap_counts_pieces_in_flight() {
        let me = topo("me", "r1", "z1");
        let all: Vec<u64> = (0..8).collect();
        let seed = holder(topo("seed", "r9", "z9"), 100, &all);
        let mate = holder(topo("mate", "r1", "z1"), 100, &[5, 6]);
        let d = download(8, &[]);
        let (busy, avoid) = (BTreeSet::new(), BTreeSet::new());
        // (load from each holder, cap, want (piece, holder))
        type Case = (Vec<usize>, usize, Vec<(u64, usize)>);
        let cases: Vec<Case> = vec![
            // Rarest first: 0..4 and 7 (seed only) before 5 and 6 (both).
            (vec![], 2, vec![(0, 0), (1, 0), (5, 1), (6, 1)]),
            (vec![1, 0], 2, vec![(0, 0), (5, 1), (6, 1)]),
            (vec![2, 2], 2, vec![]),
            (vec![0, 1], 2, vec![(0, 0), (1, 0), (5, 1)]),
            (vec![], 1, vec![(0, 0), (5, 1)]),
        ];
        for (load, cap, want) in cases {
            let round = Round {
                busy: &busy,
                load: &load,
                per_holder: cap,
                avoid: &avoid,
                limit: 8,
                rotation: 0,
                seed: 3,
                seed_share: None,
            };
            let got: Vec<(u64, usize)> = assign(&d, &me, &[seed.clone(), mate.clone()], &round)
                .into_iter()
                .map(|a| (a.piece, a.holder))
                .collect();
            assert_eq!(got, want, "load {load:?} cap {cap}");
        }
    }

    #[test]
    fn peers_to_poll_table() {
        let me = topo("me", "r1", "z1");
        let peers = vec![
            topo("a", "r1", "z1"), // rack mate
            topo("b", "r2", "z1"), // zone mate
            topo("c", "r3", "z2"),
            topo("d", "r4", "z2"),
            topo("e", "r2", "z1"), // zone mate
            topo("s", "r9", "z9"), // the seed
        ];
        // (seed, max, round, want)
        for (seed, max, round, want) in [
            (Some(5), 10, 0, vec![0, 1, 2, 3, 4, 5]),
            // Two closest (a, then b), one far in rotation (c).
            (Some(5), 3, 0, vec![0, 1, 2, 5]),
            (Some(5), 2, 0, vec![0, 1, 5]),
            // Round 2 rotates the far half to c.
            (Some(5), 2, 2, vec![0, 2, 5]),
            (Some(5), 4, 0, vec![0, 1, 2, 3, 5]),
            // Round 3: a and e (the zone mate first in rotation), then d and b.
            (Some(5), 4, 3, vec![0, 1, 3, 4, 5]),
            (Some(5), 0, 0, vec![5]),
            (None, 1, 0, vec![0]),
            (Some(9), 1, 0, vec![0]),
        ] {
            assert_eq!(
                peers_to_poll(&me, &peers, seed, max, round),
                want,
                "seed {seed:?} max {max} round {round}"
            );
        }
    }

    #[test]
    fn while_the_seed_reads_the_origin_each_of_its_pieces_goes_to_one_node() {
        let me = topo("n2", "r1", "z1");
        // Holder 0 is the seed (pieces 0..6 of 8 so far); holder 1 a peer holding piece 0.
        let holders = vec![
            holder(topo("n0", "r1", "z1"), 1 << 30, &[0, 1, 2, 3, 4, 5]),
            holder(topo("n1", "r1", "z1"), 1 << 30, &[0]),
        ];
        let busy = BTreeSet::new();
        let avoid = BTreeSet::new();
        let share = SeedShare::of("n2", &["n0", "n1", "n2", "n3"], "n0", 0).unwrap();
        assert_eq!((share.slot, share.slots), (1, 3));
        let round = |share: Option<SeedShare>| Round {
            busy: &busy,
            load: &[],
            per_holder: 8,
            avoid: &avoid,
            limit: 8,
            rotation: 0,
            seed: 3,
            seed_share: share,
        };
        let pieces = |share: Option<SeedShare>, holders: &[Holder]| -> BTreeSet<u64> {
            assign(&download(8, &[]), &me, holders, &round(share))
                .into_iter()
                .map(|a| a.piece)
                .collect()
        };
        // Without sharing: everything held anywhere.
        assert_eq!(pieces(None, &holders), BTreeSet::from([0, 1, 2, 3, 4, 5]));
        // With it: the seed-only pieces of slot 1 (1 and 4), and piece 0 from the other node.
        let got = assign(&download(8, &[]), &me, &holders, &round(Some(share)));
        let got: BTreeSet<(u64, usize)> = got.into_iter().map(|a| (a.piece, a.holder)).collect();
        assert_eq!(got, BTreeSet::from([(0, 1), (1, 0), (4, 0)]));
        // Once the seed holds the whole blob, the shell passes no share: anything goes again.
        let mut complete = holders.clone();
        complete[0] = holder(topo("n0", "r1", "z1"), 1 << 30, &[0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(pieces(None, &complete).len(), 8);
        // Every non-seed node numbers the others alike; the seed itself has no share.
        let nodes = ["n3", "n0", "n2", "n1"];
        let slots: Vec<u64> = ["n1", "n2", "n3"]
            .iter()
            .map(|me| SeedShare::of(me, &nodes, "n0", 0).unwrap().slot)
            .collect();
        assert_eq!(slots, [0, 1, 2]);
        assert_eq!(SeedShare::of("n0", &nodes, "n0", 0), None);
    }
}
