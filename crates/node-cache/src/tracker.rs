//! The tracker's wire and state: `POST /blobs/sha256/<hex>/swarm` on a blob's seed.
//!
//! A downloading node announces its verified pieces ([`Announce`], a hex bitfield) and gets
//! back an [`Offer`]: the seed's verified pieces it lacks with their CRC32s (the seed read them
//! from the origin, so its CRCs are the authority), whether the seed holds the whole blob, and
//! for each lacking piece a few other nodes that hold it, or, when the node says how many
//! pieces it can fetch now (`want`) and which it is fetching, that many pieces each from one
//! holder with room ([`tessera_cache::tracker::Swarm`] decides which). [`Trackers`] keeps one swarm per blob, at most [`MAX_SWARMS`], dropping the
//! least recently announced; [`holders`] turns an offer into the fan-out core's holders.
//!
//! It decides nothing itself: the swarm's choices are the core's.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use tessera_cache::fanout::Holder;
use tessera_cache::placement::Topology;
use tessera_cache::tracker::{Asking, Bitfield, Reservations, Swarm};

/// What a downloading node sends its seed each round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Announce {
    pub node: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Its verified pieces: [`Bitfield::to_hex`].
    pub have: String,
    /// How many more pieces it can fetch now. With it the seed hands the node that many
    /// pieces, each from one holder with room ([`Swarm::assign`]), instead of a few holders
    /// for every piece it lacks ([`Swarm::offer`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub want: Option<usize>,
    /// The pieces it is fetching now ([`Bitfield::to_hex`]): what it was handed and took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetching: Option<String>,
}

/// What the seed answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offer {
    /// The seed holds every piece.
    pub complete: bool,
    /// The seed's verified pieces the asker lacks, with their CRC32s.
    pub pieces: Vec<(u64, u32)>,
    /// Other nodes holding pieces the asker lacks: node name → pieces.
    pub holders: BTreeMap<String, Vec<u64>>,
}

/// Swarms kept at once; the least recently announced one goes first.
pub const MAX_SWARMS: usize = 64;
/// Members silent this long are forgotten.
pub const MEMBER_TTL_MS: u64 = 10_000;
/// Holders offered per lacking piece.
pub const HOLDERS_PER_PIECE: usize = 4;

/// How long a piece handed to an asker counts against its holder when the asker never says
/// it took it.
pub const RESERVATION_TTL_MS: u64 = 2_000;

/// One swarm per blob this node seeds.
#[derive(Debug)]
pub struct Trackers {
    swarms: HashMap<String, (Swarm, u64)>,
    rules: Reservations,
}

impl Default for Trackers {
    /// Holders of 1 upload slot with 1 more request waiting (the cache's defaults).
    fn default() -> Self {
        Self::new(1, 2)
    }
}

impl Trackers {
    /// Trackers for a cluster whose nodes upload `slots` pieces at once and hand out at most
    /// `per_holder` (slots and waiting requests) on one holder.
    pub fn new(slots: usize, per_holder: usize) -> Self {
        Self {
            swarms: HashMap::new(),
            rules: Reservations {
                slots: slots.max(1),
                per_holder: per_holder.max(slots).max(1),
                ttl_ms: RESERVATION_TTL_MS,
            },
        }
    }

    /// Records `announce` for blob `hex` of `count` pieces (the seed holds `seed_pieces`) and
    /// answers it. A malformed bitfield is the asker's error, named.
    pub fn announce(
        &mut self,
        hex: &str,
        count: u64,
        seed_pieces: &[(u64, u32)],
        announce: Announce,
        now_ms: u64,
    ) -> Result<Offer, String> {
        let have = Bitfield::from_hex(count, &announce.have).map_err(|e| format!("have: {e}"))?;
        let asking = match (announce.want, announce.fetching) {
            (Some(want), fetching) => Some(Asking {
                want,
                fetching: match fetching {
                    Some(hex) => {
                        Bitfield::from_hex(count, &hex).map_err(|e| format!("fetching: {e}"))?
                    }
                    None => Bitfield::new(count),
                },
            }),
            (None, _) => None,
        };
        if !self.swarms.contains_key(hex) && self.swarms.len() >= MAX_SWARMS {
            let oldest = self
                .swarms
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                self.swarms.remove(&oldest);
            }
        }
        let (swarm, at) = self
            .swarms
            .entry(hex.to_owned())
            .or_insert_with(|| (Swarm::new(count, MEMBER_TTL_MS), now_ms));
        if swarm.count() != count {
            *swarm = Swarm::new(count, MEMBER_TTL_MS);
        }
        *at = now_ms;
        let me = Topology {
            node: announce.node,
            rack: announce.rack,
            zone: announce.zone,
        };
        let holders = match asking {
            Some(asking) => {
                swarm.announce(me.clone(), have.clone(), now_ms);
                swarm.assign(&me, &have, &asking, self.rules, now_ms)
            }
            None => {
                let holders = swarm.offer(&me, &have, HOLDERS_PER_PIECE);
                swarm.announce(me, have.clone(), now_ms);
                holders
            }
        };
        Ok(Offer {
            complete: u64::try_from(seed_pieces.len()).unwrap_or(u64::MAX) >= count,
            pieces: seed_pieces
                .iter()
                .filter(|(p, _)| !have.contains(*p))
                .copied()
                .collect(),
            holders,
        })
    }

    /// Forgets blob `hex`'s swarm (the blob left this node).
    pub fn forget(&mut self, hex: &str) {
        self.swarms.remove(hex);
    }
}

/// A node's configured peers: their places in order and their positions by name, made once
/// (a node of a large swarm turns every announcement's answer into holders by them).
#[derive(Debug, Clone, Default)]
pub struct Peers {
    topologies: Vec<Topology>,
    positions: HashMap<String, usize>,
}

impl Peers {
    pub fn new(topologies: Vec<Topology>) -> Self {
        let positions = topologies
            .iter()
            .enumerate()
            .map(|(i, p)| (p.node.clone(), i))
            .collect();
        Self {
            topologies,
            positions,
        }
    }

    pub fn topologies(&self) -> &[Topology] {
        &self.topologies
    }
}

/// The fan-out core's holders from an offer, indexed as `peers` (the seed at `seed`): each
/// holder's pieces carry the seed's CRC32s; names not among the peers are ignored. A peer the
/// offer names nothing on is left blank (no name, no place): nothing is fetched from it.
pub fn holders(offer: &Offer, peers: &Peers, seed: usize) -> Vec<Holder> {
    let crcs: BTreeMap<u64, u32> = offer.pieces.iter().copied().collect();
    let index = &peers.positions;
    let peers = peers.topologies();
    let mut holders: Vec<Holder> = peers
        .iter()
        .map(|_| Holder {
            topology: Topology::default(),
            free_upload: 1 << 30,
            pieces: BTreeMap::new(),
        })
        .collect();
    if let (Some(holder), Some(topology)) = (holders.get_mut(seed), peers.get(seed)) {
        holder.topology = topology.clone();
        holder.pieces = crcs.clone();
    }
    for (name, pieces) in &offer.holders {
        let Some((holder, topology)) = index
            .get(name.as_str())
            .and_then(|i| Some((holders.get_mut(*i)?, peers.get(*i)?)))
        else {
            continue;
        };
        holder.topology = topology.clone();
        holder.pieces.extend(
            pieces
                .iter()
                .filter_map(|p| crcs.get(p).map(|crc| (*p, *crc))),
        );
    }
    holders
}

#[cfg(test)]
mod tests {
    use super::*;

    fn announce(node: &str, rack: &str, count: u64, have: &[u64]) -> Announce {
        Announce {
            node: node.into(),
            rack: Some(rack.into()),
            zone: Some("z".into()),
            have: Bitfield::of(count, have.iter().copied()).to_hex(),
            want: None,
            fetching: None,
        }
    }

    fn topo(node: &str) -> Topology {
        Topology {
            node: node.into(),
            rack: None,
            zone: None,
        }
    }

    #[test]
    fn an_announce_is_answered_with_what_the_asker_lacks() {
        let mut trackers = Trackers::default();
        let seed = [(0, 10), (1, 11), (2, 12)];
        let first = trackers
            .announce("b", 4, &seed, announce("n1", "r1", 4, &[1]), 0)
            .unwrap();
        assert_eq!(
            first,
            Offer {
                complete: false,
                pieces: vec![(0, 10), (2, 12)],
                holders: BTreeMap::new(),
            }
        );
        let second = trackers
            .announce("b", 4, &seed, announce("n2", "r1", 4, &[]), 5)
            .unwrap();
        assert_eq!(second.holders, BTreeMap::from([("n1".into(), vec![1])]));
        let all = [(0, 10), (1, 11), (2, 12), (3, 13)];
        let done = trackers
            .announce("b", 4, &all, announce("n2", "r1", 4, &[0, 1, 2, 3]), 6)
            .unwrap();
        assert!(done.complete && done.pieces.is_empty() && done.holders.is_empty());
        let mut wrong = announce("n3", "r1", 16, &[]);
        let bad = trackers.announce("b", 4, &all, wrong.clone(), 7);
        assert_eq!(
            bad,
            Err("have: bitfield: expected 2 hex digits for 4 pieces, got 4".into())
        );
        wrong.have = "0z".into();
        let bad = trackers.announce("b", 4, &all, wrong, 7);
        assert_eq!(bad, Err("have: bitfield: 'z' is not a hex digit".into()));
    }

    #[test]
    fn an_announce_saying_what_it_can_fetch_is_handed_pieces_one_holder_each() {
        let mut trackers = Trackers::new(1, 2);
        let seed = [(0, 10), (1, 11), (2, 12), (3, 13)];
        for holder in ["h1", "h2"] {
            trackers
                .announce("b", 4, &seed, announce(holder, "r9", 4, &[0, 1, 2, 3]), 0)
                .unwrap();
        }
        let mut asking = announce("n1", "r1", 4, &[3]);
        asking.want = Some(2);
        asking.fetching = Some(Bitfield::of(4, [2]).to_hex());
        let offer = trackers.announce("b", 4, &seed, asking.clone(), 1).unwrap();
        // Pieces 0 and 1 (2 is being fetched, 3 held), each from one holder, an idle one each.
        let handed: Vec<(String, Vec<u64>)> = offer.holders.into_iter().collect();
        assert_eq!(handed.len(), 2, "{handed:?}");
        assert!(
            handed.iter().all(|(_, pieces)| pieces.len() == 1),
            "{handed:?}"
        );
        asking.fetching = Some("0z".into());
        assert_eq!(
            trackers.announce("b", 4, &seed, asking, 2),
            Err("fetching: bitfield: 'z' is not a hex digit".into())
        );
    }

    #[test]
    fn swarms_are_bounded_least_recent_first() {
        let mut trackers = Trackers::default();
        for i in 0..=MAX_SWARMS {
            let hex = format!("{i}");
            let now = u64::try_from(i).unwrap();
            trackers
                .announce(&hex, 1, &[], announce("n1", "r", 1, &[0]), now)
                .unwrap();
        }
        assert_eq!(trackers.swarms.len(), MAX_SWARMS);
        assert!(!trackers.swarms.contains_key("0"));
        trackers.forget("1");
        assert!(!trackers.swarms.contains_key("1"));
    }

    #[test]
    fn holders_carry_the_seeds_crcs_indexed_as_the_peers() {
        let offer = Offer {
            complete: false,
            pieces: vec![(0, 10), (1, 11)],
            holders: BTreeMap::from([("a".into(), vec![0, 1, 7]), ("stranger".into(), vec![0])]),
        };
        let peers = [topo("seed"), topo("a"), topo("b")];
        let got = holders(&offer, &Peers::new(peers.to_vec()), 0);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].pieces, BTreeMap::from([(0, 10), (1, 11)]));
        // Piece 7 has no CRC from the seed: not offered.
        assert_eq!(got[1].pieces, BTreeMap::from([(0, 10), (1, 11)]));
        assert!(got[2].pieces.is_empty());
        assert_eq!(got[0].topology, peers[0]);
        assert_eq!(got[1].topology, peers[1]);
        // Named on nothing: left blank.
        assert_eq!(got[2].topology.node, "");
    }
}
