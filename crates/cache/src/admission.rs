//! Space admission: whether a new download of a known size fits in the cache's byte budget,
//! and which blobs to evict first to make room.
//!
//! A download reserves its whole size when it starts. If the blobs held, the downloads in
//! flight and the new one stay under the high watermark nothing is evicted. Above it the
//! watermark plan ([`crate::eviction::plan`]) picks least recently used blobs that are neither
//! pinned nor downloading; if even after that the total exceeds the capacity the download is
//! refused with [`InsufficientSpace`] ("insufficient cache space"), so that room is never made
//! by evicting data in use.
//!
//! A node asked to seed a blob for others (it does not need it itself) is admitted only when
//! the blob fits without evicting anything ([`admit_seed`]): seeding must not cost a node its
//! own models. A node that declines is passed over for the next in the seed ranking.
//!
//! This module does not measure disks or delete files: the blob records, the pinned set and
//! the sizes are inputs, the digests to delete the output.

use std::collections::BTreeSet;

use thiserror::Error;

use crate::eviction::{self, Blob, DiskUsage, Watermarks};

/// Why a download cannot start.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "insufficient cache space: {digest} needs {need} bytes, but only {available} of the cache's {capacity} bytes can be freed or are free ({in_use} bytes are pinned by pods or downloading)"
)]
pub struct InsufficientSpace {
    pub digest: String,
    pub need: u64,
    pub capacity: u64,
    pub available: u64,
    pub in_use: u64,
}

/// What to do before a download starts: the digests to evict (least recently used first;
/// empty when it fits as things are).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Admission {
    pub evict: Vec<String>,
    /// Bytes held once the evictions are done and the new download has reserved its size.
    pub used_after: u64,
}

/// Admits a download of `incoming` bytes for `digest` into a cache of `capacity` bytes that
/// holds `blobs` (downloads in flight as blobs with `downloading: true`), `pinned` in use.
pub fn admit(
    watermarks: &Watermarks,
    capacity: u64,
    blobs: &[Blob],
    pinned: &BTreeSet<String>,
    digest: &str,
    incoming: u64,
) -> Result<Admission, InsufficientSpace> {
    let held: u64 = blobs.iter().map(|b| b.size).fold(0, u64::saturating_add);
    let in_use: u64 = blobs
        .iter()
        .filter(|b| b.downloading || pinned.contains(&b.digest))
        .map(|b| b.size)
        .fold(0, u64::saturating_add);
    let refuse = || InsufficientSpace {
        digest: digest.to_owned(),
        need: incoming,
        capacity,
        available: capacity.saturating_sub(in_use),
        in_use,
    };
    let total = held.checked_add(incoming).ok_or_else(refuse)?;
    let (high, _) = watermarks.bytes(capacity);
    if total < high {
        return Ok(Admission {
            evict: Vec::new(),
            used_after: total,
        });
    }
    let plan = eviction::plan(
        watermarks,
        DiskUsage {
            capacity,
            used: total,
        },
        blobs,
        pinned,
    );
    if plan.used_after > capacity {
        return Err(refuse());
    }
    Ok(Admission {
        evict: plan.delete,
        used_after: plan.used_after,
    })
}

/// Why a node declines to seed a blob for others.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SeedDeclined {
    #[error(
        "declined to seed {digest}: it would evict {evict} of this node's own blobs ({need} bytes needed, the high watermark leaves room for {room})"
    )]
    WouldEvict {
        digest: String,
        evict: usize,
        need: u64,
        room: u64,
    },
    #[error("declined to seed: {0}")]
    NoSpace(#[from] InsufficientSpace),
}

/// [`admit`] for a node asked to seed: admitted only when nothing is evicted.
pub fn admit_seed(
    watermarks: &Watermarks,
    capacity: u64,
    blobs: &[Blob],
    pinned: &BTreeSet<String>,
    digest: &str,
    incoming: u64,
) -> Result<Admission, SeedDeclined> {
    let admission = admit(watermarks, capacity, blobs, pinned, digest, incoming)?;
    if admission.evict.is_empty() {
        return Ok(admission);
    }
    let held: u64 = blobs.iter().map(|b| b.size).fold(0, u64::saturating_add);
    let (high, _) = watermarks.bytes(capacity);
    Err(SeedDeclined::WouldEvict {
        digest: digest.to_owned(),
        evict: admission.evict.len(),
        need: incoming,
        room: high.saturating_sub(held),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(digest: &str, size: u64, last_used_ms: u64, downloading: bool) -> Blob {
        Blob {
            digest: digest.into(),
            size,
            last_used_ms,
            downloading,
        }
    }

    #[test]
    fn admit_table() {
        let w = Watermarks::default(); // 80 % / 60 % of 1000: 800 / 600
        let blobs = vec![
            blob("a", 200, 30, false),
            blob("b", 200, 10, false),
            blob("c", 100, 20, false),
            blob("d", 100, 40, true),
        ];
        let none = BTreeSet::new();
        let pinned_ab = BTreeSet::from(["a".to_string(), "b".to_string()]);
        // (name, pinned, incoming, result: Ok((evicted, used after)) or Err(available))
        type Case<'a> = (
            &'a str,
            &'a BTreeSet<String>,
            u64,
            Result<(Vec<&'a str>, u64), u64>,
        );
        let cases: Vec<Case> = vec![
            ("fits below high", &none, 199, Ok((vec![], 799))),
            ("at high: LRU to low", &none, 200, Ok((vec!["b"], 600))),
            (
                "big: evicts every unused blob",
                &none,
                500,
                Ok((vec!["b", "c", "a"], 600)),
            ),
            (
                "exactly the capacity",
                &none,
                900,
                Ok((vec!["b", "c", "a"], 1000)),
            ),
            ("over the capacity", &none, 901, Err(900)),
            (
                "pinned kept: fits after evicting c",
                &pinned_ab,
                300,
                Ok((vec!["c"], 800)),
            ),
            ("pinned kept: does not fit", &pinned_ab, 600, Err(500)),
            ("overflow refused", &none, u64::MAX, Err(900)),
        ];
        for (name, pinned, incoming, want) in cases {
            let got = admit(&w, 1000, &blobs, pinned, "x", incoming);
            match (got, want) {
                (Ok(admission), Ok((evict, used_after))) => {
                    assert_eq!(admission.evict, evict, "{name}");
                    assert_eq!(admission.used_after, used_after, "{name}");
                }
                (Err(error), Err(available)) => {
                    assert_eq!(error.available, available, "{name}");
                    assert_eq!(error.need, incoming, "{name}");
                }
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn a_seed_declines_what_would_evict_its_own_blobs() {
        let w = Watermarks::default(); // 800 / 600 of 1000
        let blobs = vec![blob("a", 300, 10, false), blob("b", 300, 20, false)];
        let none = BTreeSet::new();
        // (incoming, want: Ok(used after) or Err(message))
        for (incoming, want) in [
            (199, Ok(799)),
            (
                200,
                Err(
                    "declined to seed x: it would evict 1 of this node's own blobs (200 bytes needed, the high watermark leaves room for 200)",
                ),
            ),
            (
                2000,
                Err(
                    "declined to seed: insufficient cache space: x needs 2000 bytes, but only 1000 of the cache's 1000 bytes can be freed or are free (0 bytes are pinned by pods or downloading)",
                ),
            ),
        ] {
            let got = admit_seed(&w, 1000, &blobs, &none, "x", incoming)
                .map(|a| a.used_after)
                .map_err(|e| e.to_string());
            assert_eq!(got, want.map_err(str::to_owned), "{incoming}");
        }
    }

    #[test]
    fn refusal_names_the_numbers() {
        let err = admit(
            &Watermarks::default(),
            100,
            &[blob("p", 60, 0, false)],
            &BTreeSet::from(["p".to_string()]),
            "sha256:ab",
            50,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "insufficient cache space: sha256:ab needs 50 bytes, but only 40 of the cache's 100 bytes can be freed or are free (60 bytes are pinned by pods or downloading)"
        );
    }
}
