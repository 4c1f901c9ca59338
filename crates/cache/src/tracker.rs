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
//! An asker that says how many pieces it can fetch now is handed that many instead
//! ([`Swarm::assign`]), each from one holder, and the tracker reserves the holder's upload
//! place until the asker holds the piece or stops fetching it. Offered a few holders a
//! piece, every asker wants the newest (rarest) pieces at once and asks the one node holding
//! each: in a 64-node swarm more than five requests in six were turned away busy, and the
//! holders that turned them away then sat idle while their askers backed off. Handed out
//! with their holders' room counted, the pieces spread over the swarm's uploads instead,
//! as Dragonfly's scheduler picks parents by their free upload.
//!
//! Piece sets travel as a [`Bitfield`] (BitTorrent's: piece 0 is the high bit of the first
//! byte), hex-encoded. Members that stop announcing are forgotten after `ttl_ms`.
//!
//! This module does not know addresses, HTTP or CRCs, nor what a holder is really uploading
//! (only what the tracker handed out on it); the seed's own pieces are the shell's to add
//! (the seed is not a member), and times are milliseconds passed in.

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

/// A piece the tracker handed an asker to fetch from one holder: it counts against the
/// holder's upload capacity until the asker holds the piece, stops fetching it, or
/// [`Reservations::ttl_ms`] passes.
#[derive(Debug, Clone, Copy)]
struct Reservation {
    holder: MemberId,
    at_ms: u64,
}

/// How the tracker hands out pieces to askers that say how many they can fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservations {
    /// Pieces one holder uploads at once (its upload slots).
    pub slots: usize,
    /// Pieces handed out on one holder at most: its slots and the requests it lets wait.
    pub per_holder: usize,
    /// How long a reservation counts that its asker never confirms (by listing the piece as
    /// fetching or held).
    pub ttl_ms: u64,
}

/// What an asker fetching pieces tells the tracker besides what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asking {
    /// How many more pieces it can fetch now.
    pub want: usize,
    /// The pieces it is fetching now.
    pub fetching: Bitfield,
}

/// A member's place in [`Swarm::slots`]; a forgotten member's place is reused.
type MemberId = usize;

/// One blob's swarm as its seed knows it.
///
/// Members live in numbered places with, per piece, the places holding it and, per place,
/// the reservations on it, all kept up to date as members announce: handing a node its
/// pieces looks only at each piece's holders, never at the whole swarm (at 512 nodes a scan
/// per piece was most of the seed's work).
#[derive(Debug, Clone)]
pub struct Swarm {
    count: u64,
    ttl_ms: u64,
    ids: BTreeMap<String, MemberId>,
    slots: Vec<Option<Member>>,
    free: Vec<MemberId>,
    /// The members holding each piece.
    holders: Vec<Vec<MemberId>>,
    /// By (asker, piece).
    reserved: BTreeMap<(MemberId, u64), Reservation>,
    /// Reservations on each member as a holder.
    load: Vec<usize>,
    /// When silent members were last looked for.
    swept_ms: Option<u64>,
}

/// A member's pieces that an asker lacks.
pub type Offer = BTreeMap<String, Vec<u64>>;

impl Swarm {
    /// A swarm of a blob of `count` pieces; members silent for `ttl_ms` are forgotten.
    pub fn new(count: u64, ttl_ms: u64) -> Self {
        Self {
            count,
            ttl_ms,
            ids: BTreeMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            holders: vec![Vec::new(); usize::try_from(count).unwrap_or(0)],
            reserved: BTreeMap::new(),
            load: Vec::new(),
            swept_ms: None,
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// How many members announced within the TTL of the last call's time.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    fn member(&self, id: MemberId) -> Option<&Member> {
        self.slots.get(id).and_then(Option::as_ref)
    }

    /// The members holding `piece` (none past the last piece).
    fn holders_of(&self, piece: u64) -> &[MemberId] {
        usize::try_from(piece)
            .ok()
            .and_then(|i| self.holders.get(i))
            .map_or(&[], Vec::as_slice)
    }

    fn holders_of_mut(&mut self, piece: u64) -> Option<&mut Vec<MemberId>> {
        usize::try_from(piece)
            .ok()
            .and_then(|i| self.holders.get_mut(i))
    }

    /// Records what `node` holds now (replacing what it announced before) and forgets members
    /// silent for longer than the TTL, with the reservations they asked for.
    pub fn announce(&mut self, node: Topology, pieces: Bitfield, now_ms: u64) {
        self.forget_silent(now_ms);
        if pieces.count() != self.count {
            return;
        }
        let id = match self.ids.get(&node.node) {
            Some(id) => *id,
            None => {
                let member = Member {
                    hash: draw_hash(&node.node),
                    topology: node.clone(),
                    pieces: Bitfield::new(self.count),
                    seen_ms: now_ms,
                };
                let id = match self.free.pop() {
                    Some(id) => {
                        self.slots[id] = Some(member);
                        id
                    }
                    None => {
                        self.slots.push(Some(member));
                        self.load.push(0);
                        self.slots.len() - 1
                    }
                };
                self.ids.insert(node.node.clone(), id);
                id
            }
        };
        let Some(member) = self.slots.get_mut(id).and_then(Option::as_mut) else {
            return;
        };
        // What it held before is taken out (an empty field allocates nothing); the new pieces
        // go in once the index is brought up to date from them.
        let before = std::mem::replace(&mut member.pieces, Bitfield::new(0));
        member.topology = node;
        member.seen_ms = now_ms;
        for piece in 0..self.count {
            let (was, is) = (before.contains(piece), pieces.contains(piece));
            if was == is {
                continue;
            }
            let Some(holders) = self.holders_of_mut(piece) else {
                continue;
            };
            if is {
                holders.push(id);
            } else {
                holders.retain(|h| *h != id);
            }
        }
        // The pieces it asked for and holds now are no longer reserved on their holders.
        let held: Vec<(MemberId, u64)> = self
            .reserved
            .range((id, 0)..=(id, u64::MAX))
            .map(|(key, _)| *key)
            .filter(|(_, piece)| pieces.contains(*piece))
            .collect();
        self.unreserve(held);
        if let Some(member) = self.slots.get_mut(id).and_then(Option::as_mut) {
            member.pieces = pieces;
        }
    }

    /// Forgets members silent for longer than the TTL, looking at most every quarter TTL.
    fn forget_silent(&mut self, now_ms: u64) {
        if self
            .swept_ms
            .is_some_and(|at| now_ms.saturating_sub(at) < self.ttl_ms / 4)
        {
            return;
        }
        self.swept_ms = Some(now_ms);
        let ttl = self.ttl_ms;
        let silent: Vec<String> = self
            .ids
            .iter()
            .filter(|(_, id)| {
                self.member(**id)
                    .is_some_and(|m| now_ms.saturating_sub(m.seen_ms) > ttl)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in silent {
            self.forget(&name);
        }
    }

    /// Drops `node` (it left, or failed what it announced), and the reservations it asked for.
    pub fn forget(&mut self, node: &str) {
        let Some(id) = self.ids.remove(node) else {
            return;
        };
        if let Some(member) = self.slots.get_mut(id).and_then(Option::take) {
            for piece in member.pieces.iter() {
                if let Some(holders) = self.holders_of_mut(piece) {
                    holders.retain(|h| *h != id);
                }
            }
        }
        // Its own asks go, and those on it as a holder: its place may be reused at once.
        self.release(|(asker, _), r| *asker == id || r.holder == id);
        self.free.push(id);
    }

    /// Drops the reservations `drop` picks.
    fn release(&mut self, drop: impl Fn(&(MemberId, u64), &Reservation) -> bool) {
        let gone: Vec<(MemberId, u64)> = self
            .reserved
            .iter()
            .filter(|(key, r)| drop(key, r))
            .map(|(key, _)| *key)
            .collect();
        self.unreserve(gone);
    }

    /// Drops the reservations at `keys`, freeing their holders' places.
    fn unreserve(&mut self, keys: Vec<(MemberId, u64)>) {
        for key in keys {
            if let Some(r) = self.reserved.remove(&key)
                && let Some(n) = self.load.get_mut(r.holder)
            {
                *n = n.saturating_sub(1);
            }
        }
    }

    /// Hands `me` (announced already) up to `asking.want` pieces it lacks, each from one
    /// holder, and reserves them there: the rarest first (ties in an order rotated per
    /// asker), each from a holder with room (`rules.per_holder` less what is reserved on it),
    /// preferring one with an idle upload slot, then the closest, then the least reserved,
    /// then an order drawn per asker. A piece `me` is fetching keeps its holder; a
    /// reservation `me` no longer lists as fetching, or older than the TTL, is released
    /// first. Keyed by member name, pieces ascending.
    ///
    /// This is the scheduler's answer to the herd that [`Swarm::offer`] leaves: every asker
    /// wants the newest, rarest pieces, and offered the same few holders, all of them ask
    /// the one node that has a new piece and most are turned away.
    pub fn assign(
        &mut self,
        me: &Topology,
        have: &Bitfield,
        asking: &Asking,
        rules: Reservations,
        now_ms: u64,
    ) -> Offer {
        let my_id = self.ids.get(&me.node).copied();
        self.release(|(asker, piece), r| {
            now_ms.saturating_sub(r.at_ms) > rules.ttl_ms
                || (Some(*asker) == my_id && !asking.fetching.contains(*piece))
        });
        let mut offer = Offer::new();
        if let Some(id) = my_id {
            for ((_, piece), reservation) in self.reserved.range((id, 0)..=(id, u64::MAX)) {
                if let Some(holder) = self.member(reservation.holder) {
                    offer
                        .entry(holder.topology.node.clone())
                        .or_default()
                        .push(*piece);
                }
            }
        }
        let asker = my_id
            .and_then(|id| self.member(id))
            .map_or_else(|| draw_hash(&me.node), |m| m.hash);
        let count = self.count.max(1);
        let start = asker % count;
        let mut missing: Vec<(usize, u64, u64)> = (0..self.count)
            .filter(|p| !have.contains(*p) && !asking.fetching.contains(*p))
            .filter_map(|p| {
                let held = self.holders_of(p).len();
                (held > 0).then_some((held, (p + count - start) % count, p))
            })
            .collect();
        missing.sort_unstable();
        let mut given = 0;
        for (_, _, piece) in missing {
            if given >= asking.want {
                break;
            }
            let best = self
                .holders_of(piece)
                .iter()
                .filter(|id| Some(**id) != my_id)
                .filter_map(|id| Some((*id, self.member(*id)?)))
                .map(|(id, m)| (id, self.load.get(id).copied().unwrap_or(0), m))
                .filter(|(_, reserved, _)| *reserved < rules.per_holder)
                .min_by_key(|(_, reserved, m)| {
                    (
                        *reserved >= rules.slots,
                        locality(me, &m.topology),
                        *reserved,
                        mix(m.hash ^ asker),
                        &m.topology.node,
                    )
                })
                .map(|(id, _, m)| (id, m.topology.node.clone()));
            let (Some((holder, name)), Some(asker_id)) = (best, my_id) else {
                continue;
            };
            if let Some(n) = self.load.get_mut(holder) {
                *n += 1;
            }
            offer.entry(name).or_default().push(piece);
            self.reserved.insert(
                (asker_id, piece),
                Reservation {
                    holder,
                    at_ms: now_ms,
                },
            );
            given += 1;
        }
        for pieces in offer.values_mut() {
            pieces.sort_unstable();
        }
        offer
    }

    /// For each piece `me` lacks (`have` unset), up to `per_piece` other members holding it:
    /// the closest first, equally close ones in an order drawn for the asker (the same every
    /// round). Keyed by member name, pieces ascending.
    pub fn offer(&self, me: &Topology, have: &Bitfield, per_piece: usize) -> Offer {
        let asker = draw_hash(&me.node);
        let mut ranked: Vec<(Locality, u64, &String, &Member)> = self
            .ids
            .iter()
            .filter(|(name, _)| **name != me.node)
            .filter_map(|(name, id)| Some((name, self.member(*id)?)))
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

    /// The pieces `node` announced, for tests.
    #[cfg(test)]
    fn pieces_of(&self, node: &str) -> Option<&Bitfield> {
        self.ids
            .get(node)
            .and_then(|id| self.member(*id))
            .map(|m| &m.pieces)
    }

    /// Reservations on each holder by name, for tests.
    #[cfg(test)]
    fn reserved_on(&self) -> BTreeMap<String, usize> {
        let mut load = BTreeMap::new();
        for r in self.reserved.values() {
            if let Some(m) = self.member(r.holder) {
                *load.entry(m.topology.node.clone()).or_default() += 1;
            }
        }
        load
    }
}

/// A node's stable hash for the tracker's draws.
fn draw_hash(node: &str) -> u64 {
    mix(crate::placement::rendezvous_weight("tracker", node))
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

    fn asking(count: u64, want: usize, fetching: &[u64]) -> Asking {
        Asking {
            want,
            fetching: Bitfield::of(count, fetching.iter().copied()),
        }
    }

    const RULES: Reservations = Reservations {
        slots: 1,
        per_holder: 2,
        ttl_ms: 100,
    };

    #[test]
    fn assign_table() {
        // far holds 0..4, zone holds 1 and 2, rack holds 2: piece 0 is the rarest (1 holder),
        // then 1 (2), then 2 (3); 3 is held by far alone too.
        let holders = || {
            let mut swarm = Swarm::new(4, 10_000);
            swarm.announce(topo("far", "r9", "z9"), Bitfield::of(4, [0, 1, 2, 3]), 0);
            swarm.announce(topo("zone", "r2", "z1"), Bitfield::of(4, [1, 2]), 0);
            swarm.announce(topo("rack", "r1", "z1"), Bitfield::of(4, [2]), 0);
            swarm
        };
        // (name, asker's have, want, want back)
        type Case = (&'static str, Vec<u64>, usize, Vec<(&'static str, Vec<u64>)>);
        let cases: Vec<Case> = vec![
            ("nothing wanted", vec![], 0, vec![]),
            // Pieces 0 and 3 are equally rare: the asker's rotation decides which comes first;
            // both are on far, whose one idle slot goes to the first and queue to the second.
            ("the rarest first", vec![], 2, vec![("far", vec![0, 3])]),
            // far is full (2 of 2) after two; piece 1 goes to zone, 2 to rack (closest).
            (
                "a full holder is passed over",
                vec![],
                4,
                vec![("far", vec![0, 3]), ("rack", vec![2]), ("zone", vec![1])],
            ),
            (
                "held pieces are not handed out",
                vec![0, 3],
                4,
                vec![("rack", vec![2]), ("zone", vec![1])],
            ),
            (
                "a piece nobody holds is not handed out",
                vec![0, 1, 2, 3],
                4,
                vec![],
            ),
        ];
        for (name, have, want, expected) in cases {
            let mut swarm = holders();
            let me = topo("me", "r1", "z1");
            let have = Bitfield::of(4, have);
            swarm.announce(me.clone(), have.clone(), 0);
            let got = swarm.assign(&me, &have, &asking(4, want, &[]), RULES, 0);
            let expected: Offer = expected
                .into_iter()
                .map(|(n, p)| (n.to_owned(), p))
                .collect();
            assert_eq!(got, expected, "{name}");
        }
    }

    #[test]
    fn reservations_fill_holders_and_are_released() {
        let mut swarm = Swarm::new(1, 10_000);
        swarm.announce(topo("h", "r9", "z9"), Bitfield::of(1, [0]), 0);
        let none = Bitfield::new(1);
        let ask = |swarm: &mut Swarm, asker: &str, want: usize, fetching: &[u64], now: u64| {
            let me = topo(asker, "r1", "z1");
            swarm.announce(me.clone(), none.clone(), now);
            swarm.assign(&me, &none, &asking(1, want, fetching), RULES, now)
        };
        let handed = BTreeMap::from([("h".to_owned(), vec![0])]);
        // h's slot and its one waiting place go to a and b; c is handed nothing.
        assert_eq!(ask(&mut swarm, "a", 1, &[], 0), handed);
        assert_eq!(ask(&mut swarm, "b", 1, &[], 0), handed);
        assert_eq!(ask(&mut swarm, "c", 1, &[], 0), Offer::new());
        // a, still fetching it, keeps its holder; b did not take it and wants nothing now:
        // its place goes to c.
        assert_eq!(ask(&mut swarm, "a", 0, &[0], 10), handed);
        assert_eq!(ask(&mut swarm, "b", 0, &[], 10), Offer::new());
        assert_eq!(ask(&mut swarm, "c", 1, &[], 10), handed);
        assert_eq!(ask(&mut swarm, "d", 1, &[], 10), Offer::new());
        // a holds it now: its place on h is freed, and a, a rack-mate of d's with an idle
        // slot, is the better holder.
        swarm.announce(topo("a", "r1", "z1"), Bitfield::of(1, [0]), 20);
        assert_eq!(
            ask(&mut swarm, "d", 1, &[], 20),
            BTreeMap::from([("a".to_owned(), vec![0])])
        );

        // Past the TTL, unconfirmed reservations no longer count; a forgotten asker's go
        // with it.
        let mut swarm = Swarm::new(1, 10_000);
        swarm.announce(topo("h", "r9", "z9"), Bitfield::of(1, [0]), 0);
        assert_eq!(ask(&mut swarm, "a", 1, &[], 0), handed);
        assert_eq!(ask(&mut swarm, "b", 1, &[], 50), handed);
        assert_eq!(ask(&mut swarm, "c", 1, &[], 100), Offer::new());
        assert_eq!(ask(&mut swarm, "c", 1, &[], 101), handed);
        assert_eq!(ask(&mut swarm, "d", 1, &[], 101), Offer::new());
        swarm.forget("b");
        assert_eq!(ask(&mut swarm, "d", 1, &[], 101), handed);
    }

    proptest! {
        #[test]
        fn assign_never_overfills_a_holder_nor_hands_out_what_is_not_held(
            count in 1u64..16,
            members in proptest::collection::vec(proptest::collection::btree_set(0u64..16, 0..16), 1..10),
            asks in proptest::collection::vec((0usize..10, 0usize..5, 0u64..300), 1..40),
        ) {
            let mut swarm = Swarm::new(count, 10_000);
            let name = |i: usize| format!("n{i}");
            for (i, pieces) in members.iter().enumerate() {
                swarm.announce(topo(&name(i), &format!("r{}", i % 3), "z"), Bitfield::of(count, pieces.iter().copied()), 0);
            }
            let mut now = 0;
            for (who, want, step) in asks {
                now += step;
                let who = who % members.len();
                let me = topo(&name(who), &format!("r{}", who % 3), "z");
                let have = Bitfield::of(count, members[who].iter().copied());
                swarm.announce(me.clone(), have.clone(), now);
                let offer = swarm.assign(&me, &have, &asking(count, want, &[]), RULES, now);
                let handed: usize = offer.values().map(Vec::len).sum();
                prop_assert!(handed <= want);
                for (holder, pieces) in &offer {
                    prop_assert!(holder != &me.node);
                    for piece in pieces {
                        prop_assert!(!have.contains(*piece));
                        prop_assert!(swarm.pieces_of(holder).is_some_and(|p| p.contains(*piece)));
                    }
                }
                let load = swarm.reserved_on();
                prop_assert!(load.values().all(|n| *n <= RULES.per_holder), "{load:?}");
            }
        }
    }
}
