//! The seed's tracker: which node of a blob's swarm holds which verified pieces, as the nodes
//! announce them, and for a node that asks, which holders to fetch its missing pieces from.
//!
//! Polling every peer's piece map costs each node a request per peer per round and still finds
//! a piece held by a few far-away nodes late. Instead every downloading node announces its
//! verified pieces to the blob's seed once a round (the seed is already the one node every
//! node talks to) and gets back, for each piece it lacks, up to `per_piece` holders: the
//! closest first (node > rack > zone > other), and among equally close ones in an order drawn
//! per asker. Different askers spread over the holders; one asker keeps its order from round
//! to round, so it keeps talking to a few peers (BitTorrent's bounded peer set) instead of
//! opening connections to the whole swarm. This is Kraken's
//! tracker and Dragonfly's scheduler in their simplest form: one place that knows the swarm.
//!
//! Piece sets travel as a [`Bitfield`] (BitTorrent's: piece 0 is the high bit of the first
//! byte), hex-encoded. Members that stop announcing are forgotten after `ttl_ms`.
//!
//! This module does not know addresses, HTTP or CRCs; the seed's own pieces are the shell's to
//! add (the seed is not a member), and times are milliseconds passed in.

use std::collections::BTreeMap;

use thiserror::Error;

use crate::placement::{Locality, Topology, locality};

/// A set of piece indexes below a count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bitfield {
    count: u64,
    words: Vec<u64>,
}

/// Why a bitfield does not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BitfieldError {
    #[error("bitfield: expected {want} hex digits for {count} pieces, got {got}")]
    Length { want: usize, got: usize, count: u64 },
    #[error("bitfield: {0:?} is not a hex digit")]
    Digit(char),
    #[error("bitfield: bits set past the last piece ({count} pieces)")]
    Trailing { count: u64 },
}

impl Bitfield {
    /// No pieces of `count`.
    pub fn new(count: u64) -> Self {
        let words = usize::try_from(count.div_ceil(64)).unwrap_or(0);
        Self {
            count,
            words: vec![0; words],
        }
    }

    /// The pieces of `pieces` below `count` (others are ignored).
    pub fn of(count: u64, pieces: impl IntoIterator<Item = u64>) -> Self {
        let mut field = Self::new(count);
        for piece in pieces {
            field.insert(piece);
        }
        field
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Adds `piece`; false when it is past the last piece.
    pub fn insert(&mut self, piece: u64) -> bool {
        if piece >= self.count {
            return false;
        }
        let (word, bit) = Self::place(piece);
        if let Some(slot) = self.words.get_mut(word) {
            *slot |= 1 << bit;
        }
        true
    }

    pub fn contains(&self, piece: u64) -> bool {
        let (word, bit) = Self::place(piece);
        piece < self.count && self.words.get(word).is_some_and(|w| w & (1 << bit) != 0)
    }

    /// How many pieces are set.
    pub fn len(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// The set pieces, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.count).filter(|p| self.contains(*p))
    }

    fn place(piece: u64) -> (usize, u64) {
        (
            usize::try_from(piece / 64).unwrap_or(usize::MAX),
            piece % 64,
        )
    }

    /// Lower-case hex, piece 0 the high bit of the first byte, `ceil(count / 8)` bytes.
    pub fn to_hex(&self) -> String {
        let bytes = usize::try_from(self.count.div_ceil(8)).unwrap_or(0);
        let mut out = Vec::with_capacity(bytes);
        for byte in 0..bytes {
            let mut value = 0u8;
            for bit in 0..8u64 {
                let piece = u64::try_from(byte).unwrap_or(u64::MAX) * 8 + bit;
                if self.contains(piece) {
                    value |= 0x80 >> bit;
                }
            }
            out.push(value);
        }
        crate::hex(&out)
    }

    /// Parses [`Bitfield::to_hex`]'s form for `count` pieces.
    pub fn from_hex(count: u64, text: &str) -> Result<Self, BitfieldError> {
        let want = usize::try_from(count.div_ceil(8)).unwrap_or(usize::MAX) * 2;
        if text.len() != want {
            return Err(BitfieldError::Length {
                want,
                got: text.len(),
                count,
            });
        }
        let mut field = Self::new(count);
        for (index, digit) in text.chars().enumerate() {
            let value = digit.to_digit(16).ok_or(BitfieldError::Digit(digit))?;
            let first = u64::try_from(index).unwrap_or(u64::MAX) * 4;
            for bit in 0..4u64 {
                if value & (0x8 >> bit) != 0 && !field.insert(first + bit) {
                    return Err(BitfieldError::Trailing { count });
                }
            }
        }
        Ok(field)
    }
}

#[derive(Debug, Clone)]
struct Member {
    topology: Topology,
    pieces: Bitfield,
    seen_ms: u64,
    /// Stable per member, so draws differ between members.
    hash: u64,
}

/// One blob's swarm as its seed knows it.
#[derive(Debug, Clone)]
pub struct Swarm {
    count: u64,
    ttl_ms: u64,
    members: BTreeMap<String, Member>,
}

/// A member's pieces that an asker lacks.
pub type Offer = BTreeMap<String, Vec<u64>>;

impl Swarm {
    /// A swarm of a blob of `count` pieces; members silent for `ttl_ms` are forgotten.
    pub fn new(count: u64, ttl_ms: u64) -> Self {
        Self {
            count,
            ttl_ms,
            members: BTreeMap::new(),
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// How many members announced within the TTL of the last call's time.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Records what `node` holds now (replacing what it announced before) and forgets members
    /// silent for longer than the TTL.
    pub fn announce(&mut self, node: Topology, pieces: Bitfield, now_ms: u64) {
        let ttl = self.ttl_ms;
        self.members
            .retain(|_, m| now_ms.saturating_sub(m.seen_ms) <= ttl);
        if pieces.count() != self.count {
            return;
        }
        let hash = mix(crate::placement::rendezvous_weight("tracker", &node.node));
        self.members.insert(
            node.node.clone(),
            Member {
                topology: node,
                pieces,
                seen_ms: now_ms,
                hash,
            },
        );
    }

    /// Drops `node` (it left, or failed what it announced).
    pub fn forget(&mut self, node: &str) {
        self.members.remove(node);
    }

    /// For each piece `me` lacks (`have` unset), up to `per_piece` other members holding it:
    /// the closest first, equally close ones in an order drawn for the asker (the same every
    /// round). Keyed by member name, pieces ascending.
    pub fn offer(&self, me: &Topology, have: &Bitfield, per_piece: usize) -> Offer {
        let asker = mix(crate::placement::rendezvous_weight("tracker", &me.node));
        let mut ranked: Vec<(Locality, u64, &String, &Member)> = self
            .members
            .iter()
            .filter(|(name, _)| **name != me.node)
            .map(|(name, m)| (locality(me, &m.topology), mix(m.hash ^ asker), name, m))
            .collect();
        ranked.sort_unstable_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)));
        let mut offer = Offer::new();
        for piece in (0..self.count).filter(|p| !have.contains(*p)) {
            let holders = ranked
                .iter()
                .filter(|(_, _, _, m)| m.pieces.contains(piece))
                .take(per_piece);
            for (_, _, name, _) in holders {
                offer.entry((*name).clone()).or_default().push(piece);
            }
        }
        offer
    }
}

/// SplitMix64's finaliser: spreads a hash's bits.
fn mix(value: u64) -> u64 {
    let mut z = value.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::test_topology as topo;
    use proptest::prelude::*;

    #[test]
    fn bitfield_hex_table() {
        // (count, pieces, hex)
        for (count, pieces, hex) in [
            (0u64, vec![], ""),
            (1, vec![0], "80"),
            (8, vec![0, 7], "81"),
            (9, vec![8], "0080"),
            (12, vec![1, 2, 11], "6010"),
            (70, vec![64, 69], "000000000000000084"),
        ] {
            let field = Bitfield::of(count, pieces.iter().copied());
            assert_eq!(field.to_hex(), hex, "{count} {pieces:?}");
            assert_eq!(Bitfield::from_hex(count, hex), Ok(field.clone()));
            assert_eq!(field.iter().collect::<Vec<_>>(), pieces);
            assert_eq!(field.len(), pieces.len() as u64);
        }
    }

    #[test]
    fn bitfield_errors_name_what_is_wrong() {
        for (count, text, want) in [
            (
                8,
                "8",
                BitfieldError::Length {
                    want: 2,
                    got: 1,
                    count: 8,
                },
            ),
            (8, "8g", BitfieldError::Digit('g')),
            (4, "88", BitfieldError::Trailing { count: 4 }),
            (12, "0008", BitfieldError::Trailing { count: 12 }),
        ] {
            assert_eq!(Bitfield::from_hex(count, text), Err(want), "{text}");
        }
        assert!(!Bitfield::new(3).insert(3));
        assert!(!Bitfield::of(3, [9]).contains(9));
    }

    proptest! {
        #[test]
        fn bitfield_round_trips(count in 0u64..300, pieces in proptest::collection::btree_set(0u64..300, 0..40)) {
            let field = Bitfield::of(count, pieces.iter().copied());
            let want: Vec<u64> = pieces.into_iter().filter(|p| *p < count).collect();
            prop_assert_eq!(field.iter().collect::<Vec<_>>(), want);
            prop_assert_eq!(Bitfield::from_hex(count, &field.to_hex()), Ok(field));
        }

        #[test]
        fn from_hex_never_panics(count in 0u64..100, text in "[0-9a-zA-Z]{0,30}") {
            let _ = Bitfield::from_hex(count, &text);
        }
    }

    #[test]
    fn offer_prefers_close_holders_and_skips_what_the_asker_has() {
        let me = topo("me", "r1", "z1");
        let mut swarm = Swarm::new(4, 1_000);
        swarm.announce(topo("far", "r9", "z9"), Bitfield::of(4, [0, 1, 2]), 0);
        swarm.announce(topo("zone", "r2", "z1"), Bitfield::of(4, [1, 2]), 0);
        swarm.announce(topo("rack", "r1", "z1"), Bitfield::of(4, [2]), 0);
        swarm.announce(me.clone(), Bitfield::of(4, [3]), 0);
        // (have, per_piece, want)
        type Case = (Vec<u64>, usize, Vec<(&'static str, Vec<u64>)>);
        let cases: Vec<Case> = vec![
            (
                vec![],
                1,
                vec![("far", vec![0]), ("rack", vec![2]), ("zone", vec![1])],
            ),
            (
                vec![],
                2,
                vec![("far", vec![0, 1]), ("rack", vec![2]), ("zone", vec![1, 2])],
            ),
            (vec![0, 2], 1, vec![("zone", vec![1])]),
            (vec![0, 1, 2, 3], 3, vec![]),
        ];
        for (have, per_piece, want) in cases {
            let got = swarm.offer(&me, &Bitfield::of(4, have.clone()), per_piece);
            let want: Offer = want.into_iter().map(|(n, p)| (n.to_owned(), p)).collect();
            assert_eq!(got, want, "have {have:?} per piece {per_piece}");
        }
    }

    #[test]
    fn silent_members_are_forgotten_and_announcements_replace() {
        let me = topo("me", "r1", "z1");
        let mut swarm = Swarm::new(2, 100);
        swarm.announce(topo("a", "r2", "z1"), Bitfield::of(2, [0]), 0);
        swarm.announce(topo("b", "r2", "z1"), Bitfield::of(2, [1]), 50);
        // a's newer announcement replaces its set.
        swarm.announce(topo("a", "r2", "z1"), Bitfield::of(2, [1]), 60);
        let none = Bitfield::new(2);
        let got = swarm.offer(&me, &none, 4);
        assert_eq!(got.get("a"), Some(&vec![1]));
        // At 200, b (last seen 50) is forgotten; a (60) too at 161+.
        swarm.announce(topo("c", "r3", "z1"), Bitfield::of(2, [0]), 155);
        assert_eq!(swarm.len(), 2);
        swarm.announce(topo("c", "r3", "z1"), Bitfield::of(2, [0]), 200);
        assert_eq!(swarm.len(), 1);
        // A bitfield of another count is not recorded.
        swarm.announce(topo("d", "r3", "z1"), Bitfield::of(3, [0]), 200);
        assert_eq!(swarm.len(), 1);
        swarm.forget("c");
        assert!(swarm.is_empty());
    }

    #[test]
    fn equally_close_holders_are_spread_over_askers() {
        // 16 holders in another zone, each holding every piece; 32 askers want one piece with
        // two holders each: the picks spread instead of all landing on the same two.
        let mut swarm = Swarm::new(1, 1_000);
        for i in 0..16 {
            swarm.announce(
                topo(&format!("h{i:02}"), "r9", "z9"),
                Bitfield::of(1, [0]),
                0,
            );
        }
        let mut picked = BTreeMap::<String, u32>::new();
        for asker in 0..32 {
            let me = topo(&format!("a{asker:02}"), "r1", "z1");
            for name in swarm.offer(&me, &Bitfield::new(1), 2).keys() {
                *picked.entry(name.clone()).or_default() += 1;
            }
        }
        assert!(picked.len() >= 12, "{picked:?}");
        assert!(picked.values().all(|n| *n <= 10), "{picked:?}");
    }
}
