//! Eviction: high/low watermark LRU, never touching data in use.
//!
//! When disk usage reaches the high watermark (Dragonfly's `disk_high_threshold_percent`,
//! default 80), blobs are deleted least recently used first until usage is at or below the low
//! watermark (`disk_low_threshold_percent`, default 60). A blob pinned by a running pod, or still
//! downloading, is never chosen. If the pinned and downloading blobs alone exceed the high
//! watermark the plan says so ([`EvictionProblem::InUseAboveHighWatermark`]) rather than evicting
//! in-use data; if usage cannot be brought to the low watermark it says that too. The shell
//! turns a problem into an Event.
//!
//! This module does not measure the disk, know which pods use which blob, or delete anything:
//! usage, blob records and the pinned set are inputs, the digests to delete the output.

use std::collections::BTreeSet;

use thiserror::Error;

/// Disk watermarks in percent of capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermarks {
    high_percent: u8,
    low_percent: u8,
}

impl Default for Watermarks {
    /// Dragonfly's 80 % / 60 %.
    fn default() -> Self {
        Self {
            high_percent: 80,
            low_percent: 60,
        }
    }
}

/// A configuration the watermarks refuse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid watermarks: low {low}% must be below high {high}%, and high at most 100%")]
pub struct WatermarkError {
    pub high: u8,
    pub low: u8,
}

impl Watermarks {
    pub fn new(high_percent: u8, low_percent: u8) -> Result<Self, WatermarkError> {
        if low_percent >= high_percent || high_percent > 100 {
            return Err(WatermarkError {
                high: high_percent,
                low: low_percent,
            });
        }
        Ok(Self {
            high_percent,
            low_percent,
        })
    }

    pub fn high_percent(&self) -> u8 {
        self.high_percent
    }

    pub fn low_percent(&self) -> u8 {
        self.low_percent
    }

    /// The byte counts of the watermarks on a disk of `capacity` bytes (rounded down).
    pub fn bytes(&self, capacity: u64) -> (u64, u64) {
        let of = |percent: u8| {
            u64::try_from(u128::from(capacity) * u128::from(percent) / 100).unwrap_or(u64::MAX)
        };
        (of(self.high_percent), of(self.low_percent))
    }
}

/// One cached blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    pub digest: String,
    pub size: u64,
    /// When it was last used (read, served or mounted), in milliseconds.
    pub last_used_ms: u64,
    /// Still being downloaded: never evicted.
    pub downloading: bool,
}

/// The disk the cache lives on (`used` counts everything on it, not only blobs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskUsage {
    pub capacity: u64,
    pub used: u64,
}

/// Why the plan cannot do what the watermarks ask.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EvictionProblem {
    #[error(
        "blobs in use or downloading take {in_use} bytes, above the high watermark of {high} bytes; nothing in use is evicted"
    )]
    InUseAboveHighWatermark { in_use: u64, high: u64 },
    #[error(
        "usage stays at {used_after} bytes after eviction, above the low watermark of {low} bytes: the rest is in use"
    )]
    AboveLowWatermark { used_after: u64, low: u64 },
}

/// What to delete, and what usage will be after.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Eviction {
    /// Digests to delete, least recently used first.
    pub delete: Vec<String>,
    pub used_after: u64,
    pub problem: Option<EvictionProblem>,
}

/// The eviction plan for `disk` holding `blobs`, with `pinned` digests in use.
pub fn plan(
    watermarks: &Watermarks,
    disk: DiskUsage,
    blobs: &[Blob],
    pinned: &BTreeSet<String>,
) -> Eviction {
    let (high, low) = watermarks.bytes(disk.capacity);
    let mut eviction = Eviction {
        used_after: disk.used,
        ..Eviction::default()
    };
    if disk.used < high {
        return eviction;
    }
    let in_use = |blob: &Blob| blob.downloading || pinned.contains(&blob.digest);
    let mut candidates: Vec<&Blob> = blobs.iter().filter(|b| !in_use(b)).collect();
    candidates.sort_by(|a, b| {
        a.last_used_ms
            .cmp(&b.last_used_ms)
            .then_with(|| a.digest.cmp(&b.digest))
    });
    let mut seen = BTreeSet::new();
    for blob in candidates {
        if eviction.used_after <= low {
            break;
        }
        if !seen.insert(blob.digest.as_str()) {
            continue;
        }
        eviction.used_after = eviction.used_after.saturating_sub(blob.size);
        eviction.delete.push(blob.digest.clone());
    }
    let in_use_bytes: u64 = blobs.iter().filter(|b| in_use(b)).map(|b| b.size).sum();
    if in_use_bytes > high {
        eviction.problem = Some(EvictionProblem::InUseAboveHighWatermark {
            in_use: in_use_bytes,
            high,
        });
    } else if eviction.used_after > low {
        eviction.problem = Some(EvictionProblem::AboveLowWatermark {
            used_after: eviction.used_after,
            low,
        });
    }
    eviction
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn blob(digest: &str, size: u64, last_used_ms: u64) -> Blob {
        Blob {
            digest: digest.into(),
            size,
            last_used_ms,
            downloading: false,
        }
    }

    #[test]
    fn watermarks_validate() {
        assert_eq!(Watermarks::default().bytes(1000), (800, 600));
        assert_eq!(
            Watermarks::new(95, 70).unwrap().bytes(u64::MAX).0,
            17_524_406_870_024_074_034
        );
        for (high, low) in [(60, 60), (60, 80), (101, 50)] {
            assert_eq!(
                Watermarks::new(high, low),
                Err(WatermarkError { high, low })
            );
        }
    }

    #[test]
    fn plan_table() {
        let w = Watermarks::default();
        let disk = |used| DiskUsage {
            capacity: 1000,
            used,
        };
        let blobs = vec![
            blob("a", 100, 30),
            blob("b", 150, 10),
            blob("c", 100, 20),
            blob("d", 200, 40),
        ];
        let none = BTreeSet::new();
        let pinned_b = BTreeSet::from(["b".to_string()]);
        // (name, used, pinned, deleted, used after, problem)
        type Case<'a> = (
            &'a str,
            u64,
            &'a BTreeSet<String>,
            Vec<&'a str>,
            u64,
            Option<EvictionProblem>,
        );
        let cases: Vec<Case> = vec![
            ("below high: nothing", 799, &none, vec![], 799, None),
            ("at high: LRU to low", 800, &none, vec!["b", "c"], 550, None),
            ("pinned skipped", 800, &pinned_b, vec!["c", "a"], 600, None),
            (
                "deep eviction",
                990,
                &none,
                vec!["b", "c", "a", "d"],
                440,
                None,
            ),
            (
                "full disk",
                1000,
                &none,
                vec!["b", "c", "a", "d"],
                450,
                None,
            ),
        ];
        for (name, used, pinned, want, after, problem) in cases {
            let got = plan(&w, disk(used), &blobs, pinned);
            assert_eq!(got.delete, want, "{name}");
            assert_eq!(got.used_after, after, "{name}");
            assert_eq!(got.problem, problem, "{name}");
        }
    }

    #[test]
    fn in_use_and_downloading_are_never_evicted_and_reported() {
        let w = Watermarks::default();
        let mut blobs = vec![blob("a", 500, 1), blob("b", 350, 2), blob("c", 100, 3)];
        blobs[1].downloading = true;
        let pinned = BTreeSet::from(["a".to_string()]);
        let got = plan(
            &w,
            DiskUsage {
                capacity: 1000,
                used: 960,
            },
            &blobs,
            &pinned,
        );
        assert_eq!(got.delete, vec!["c"]);
        assert_eq!(got.used_after, 860);
        assert_eq!(
            got.problem,
            Some(EvictionProblem::InUseAboveHighWatermark {
                in_use: 850,
                high: 800
            })
        );
        // In use below high but above low: the plan falls short of low and says so.
        let pinned = BTreeSet::from(["a".to_string()]);
        let blobs = vec![blob("a", 700, 1), blob("c", 150, 3)];
        let got = plan(
            &w,
            DiskUsage {
                capacity: 1000,
                used: 850,
            },
            &blobs,
            &pinned,
        );
        assert_eq!(got.delete, vec!["c"]);
        assert_eq!(
            got.problem,
            Some(EvictionProblem::AboveLowWatermark {
                used_after: 700,
                low: 600
            })
        );
    }

    proptest! {
        #[test]
        fn never_evicts_in_use_and_reaches_low_when_possible(
            sizes in proptest::collection::vec((1u64..300, 0u64..50, any::<bool>(), any::<bool>()), 0..30),
            other in 0u64..400,
            fill in 50u64..=100,
            high in 2u8..=100,
            gap in 1u8..50,
        ) {
            let low = high.saturating_sub(gap).max(1).min(high - 1);
            let w = Watermarks::new(high, low).unwrap();
            let blobs: Vec<Blob> = sizes
                .iter()
                .enumerate()
                .map(|(i, (size, used, downloading, _))| Blob {
                    digest: format!("d{i}"),
                    size: *size,
                    last_used_ms: *used,
                    downloading: *downloading,
                })
                .collect();
            let pinned: BTreeSet<String> =
                sizes.iter().enumerate().filter(|(_, s)| s.3).map(|(i, _)| format!("d{i}")).collect();
            let total: u64 = blobs.iter().map(|b| b.size).sum::<u64>() + other;
            let disk = DiskUsage { capacity: (total * 100 / fill).max(1), used: total };
            let (high_bytes, low_bytes) = w.bytes(disk.capacity);
            let got = plan(&w, disk, &blobs, &pinned);
            let evictable: Vec<&Blob> =
                blobs.iter().filter(|b| !b.downloading && !pinned.contains(&b.digest)).collect();
            for digest in &got.delete {
                prop_assert!(!pinned.contains(digest));
                prop_assert!(evictable.iter().any(|b| &b.digest == digest));
            }
            let freed: u64 = blobs.iter().filter(|b| got.delete.contains(&b.digest)).map(|b| b.size).sum();
            prop_assert_eq!(got.used_after, total - freed);
            if total < high_bytes {
                prop_assert!(got.delete.is_empty());
            } else {
                let possible = total - evictable.iter().map(|b| b.size).sum::<u64>();
                if possible <= low_bytes {
                    prop_assert!(got.used_after <= low_bytes);
                } else {
                    prop_assert!(got.problem.is_some());
                    prop_assert_eq!(got.delete.len(), evictable.len());
                }
                // LRU: nothing kept was used before something deleted.
                let newest_deleted = blobs.iter().filter(|b| got.delete.contains(&b.digest)).map(|b| b.last_used_ms).max();
                if let Some(newest) = newest_deleted {
                    for kept in evictable.iter().filter(|b| !got.delete.contains(&b.digest)) {
                        prop_assert!(kept.last_used_ms >= newest);
                    }
                }
            }
        }
    }
}
