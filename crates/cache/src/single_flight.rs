//! Single-flight: one fetch per task id at a time, the other callers wait for its outcome.
//!
//! [`SingleFlight`] is a pure table keyed by task id. The first [`SingleFlight::join`] for a key
//! becomes the fetcher ([`Join::Fetch`]); later ones wait ([`Join::Wait`]). [`SingleFlight::complete`]
//! hands the outcome to the waiters. A failure is cached for a TTL (Kraken's
//! `dedup.RequestCache` caches errors and not-founds for 15 s, [`DEFAULT_ERROR_TTL_MS`]) so a
//! failing origin is not asked again by every caller: joins inside the TTL get
//! [`Join::Failed`] at once. [`Backoff`] spaces a fetcher's retries with capped exponential
//! backoff and full jitter (`random(0, min(cap, base · 2^attempt))`, the AWS architecture blog's
//! "Full Jitter"), drawn from a seed.
//!
//! The table does not run fetches, hold futures or read the clock: the shell passes `now_ms`
//! and wakes the waiters it is handed back. A fetcher that gives up must still `complete` (with
//! an error), or its waiters wait until the shell does.

use std::collections::BTreeMap;

use thiserror::Error;

use crate::SeededRng;

/// How long a failure is remembered: Kraken's 15 s.
pub const DEFAULT_ERROR_TTL_MS: u64 = 15_000;

/// What a caller joining a key should do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Join<E> {
    /// Fetch it, then [`SingleFlight::complete`].
    Fetch,
    /// Another caller is fetching it; wait to be handed the outcome.
    Wait,
    /// It failed recently; this is the cached failure (not retried before `retry_at_ms`).
    Failed { error: E, retry_at_ms: u64 },
}

/// Misuse of the table by the shell.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FlightError {
    #[error("no fetch of {key} is in flight")]
    NotInFlight { key: String },
}

#[derive(Debug, Clone)]
enum Entry<W, E> {
    InFlight { waiters: Vec<W> },
    Failed { error: E, until_ms: u64 },
}

/// The single-flight table: `K` task ids, `W` the shell's waiter handles, `E` its error values.
#[derive(Debug, Clone)]
pub struct SingleFlight<K, W, E> {
    entries: BTreeMap<K, Entry<W, E>>,
    error_ttl_ms: u64,
}

impl<K: Ord + Clone + std::fmt::Display, W: PartialEq, E: Clone> Default for SingleFlight<K, W, E> {
    fn default() -> Self {
        Self::new(DEFAULT_ERROR_TTL_MS)
    }
}

impl<K: Ord + Clone + std::fmt::Display, W: PartialEq, E: Clone> SingleFlight<K, W, E> {
    /// A table remembering failures for `error_ttl_ms` (0: not at all).
    pub fn new(error_ttl_ms: u64) -> Self {
        Self {
            entries: BTreeMap::new(),
            error_ttl_ms,
        }
    }

    /// A caller `waiter` asks for `key` at `now_ms`.
    pub fn join(&mut self, key: &K, waiter: W, now_ms: u64) -> Join<E> {
        match self.entries.get_mut(key) {
            Some(Entry::InFlight { waiters }) => {
                waiters.push(waiter);
                Join::Wait
            }
            Some(Entry::Failed { error, until_ms }) if now_ms < *until_ms => Join::Failed {
                error: error.clone(),
                retry_at_ms: *until_ms,
            },
            _ => {
                self.entries.insert(
                    key.clone(),
                    Entry::InFlight {
                        waiters: Vec::new(),
                    },
                );
                Join::Fetch
            }
        }
    }

    /// A waiter stops waiting (its caller went away); the fetch goes on.
    pub fn leave(&mut self, key: &K, waiter: &W) {
        if let Some(Entry::InFlight { waiters }) = self.entries.get_mut(key) {
            waiters.retain(|w| w != waiter);
        }
    }

    /// The fetcher of `key` finished at `now_ms`: returns the waiters to hand `outcome` to. A
    /// success forgets the key (the blob is in the cache now); a failure is remembered for the TTL.
    pub fn complete<O>(
        &mut self,
        key: &K,
        outcome: &Result<O, E>,
        now_ms: u64,
    ) -> Result<Vec<W>, FlightError> {
        let waiters = match self.entries.remove(key) {
            Some(Entry::InFlight { waiters }) => waiters,
            Some(failed @ Entry::Failed { .. }) => {
                self.entries.insert(key.clone(), failed);
                return Err(FlightError::NotInFlight {
                    key: key.to_string(),
                });
            }
            None => {
                return Err(FlightError::NotInFlight {
                    key: key.to_string(),
                });
            }
        };
        if let Err(error) = outcome
            && self.error_ttl_ms > 0
        {
            let until_ms = now_ms.saturating_add(self.error_ttl_ms);
            self.entries.insert(
                key.clone(),
                Entry::Failed {
                    error: error.clone(),
                    until_ms,
                },
            );
        }
        Ok(waiters)
    }

    /// Drops failures whose TTL has passed (Kraken's periodic cleanup); returns how many.
    pub fn expire(&mut self, now_ms: u64) -> usize {
        let before = self.entries.len();
        self.entries
            .retain(|_, e| !matches!(e, Entry::Failed { until_ms, .. } if now_ms >= *until_ms));
        before - self.entries.len()
    }

    /// Whether a fetch of `key` is in flight.
    pub fn in_flight(&self, key: &K) -> bool {
        matches!(self.entries.get(key), Some(Entry::InFlight { .. }))
    }

    /// How many keys the table holds (in flight or failed).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Capped exponential backoff with full jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base_ms: u64,
    pub cap_ms: u64,
    /// Retries allowed after the first attempt.
    pub max_retries: u32,
}

impl Default for Backoff {
    /// 500 ms doubling to at most 30 s, five retries (Tessera's choice; Dragonfly's backend
    /// retries once, Kraken leaves retries to the next request after the negative-cache TTL).
    fn default() -> Self {
        Self {
            base_ms: 500,
            cap_ms: 30_000,
            max_retries: 5,
        }
    }
}

impl Backoff {
    /// The largest delay before retry `retry` (0-based): `min(cap, base · 2^retry)`.
    pub fn ceiling_ms(&self, retry: u32) -> u64 {
        let factor = 1u64.checked_shl(retry).unwrap_or(u64::MAX);
        self.base_ms.saturating_mul(factor).min(self.cap_ms)
    }

    /// The delay before retry `retry`, uniform in `0..=ceiling_ms(retry)` from `seed`; `None`
    /// once the retries are spent.
    pub fn delay_ms(&self, retry: u32, seed: u64) -> Option<u64> {
        (retry < self.max_retries).then(|| SeededRng::new(seed).up_to(self.ceiling_ms(retry)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Table = SingleFlight<String, u32, String>;

    #[test]
    fn first_fetches_others_wait_and_get_the_outcome() {
        let mut table = Table::default();
        let key = "task".to_string();
        assert_eq!(table.join(&key, 1, 0), Join::Fetch);
        assert_eq!(table.join(&key, 2, 1), Join::Wait);
        assert_eq!(table.join(&key, 3, 2), Join::Wait);
        assert_eq!(table.join(&key, 4, 2), Join::Wait);
        table.leave(&key, &3);
        assert!(table.in_flight(&key));
        assert_eq!(
            table.complete(&key, &Ok::<(), String>(()), 10),
            Ok(vec![2, 4])
        );
        assert!(table.is_empty());
        // After success the next caller fetches (and finds the blob cached, in the shell).
        assert_eq!(table.join(&key, 5, 11), Join::Fetch);
        assert_eq!(
            table.complete(&"other".to_string(), &Ok::<(), String>(()), 12),
            Err(FlightError::NotInFlight {
                key: "other".into()
            })
        );
    }

    #[test]
    fn errors_are_cached_for_the_ttl() {
        let mut table = Table::default();
        let key = "task".to_string();
        assert_eq!(table.join(&key, 1, 1_000), Join::Fetch);
        assert_eq!(table.join(&key, 2, 1_001), Join::Wait);
        let failed: Result<(), String> = Err("origin 503".into());
        assert_eq!(table.complete(&key, &failed, 2_000), Ok(vec![2]));
        let cached = Join::Failed {
            error: "origin 503".to_string(),
            retry_at_ms: 17_000,
        };
        for now in [2_000, 9_000, 16_999] {
            assert_eq!(table.join(&key, 3, now), cached, "at {now}");
        }
        assert_eq!(
            table.complete(&key, &failed, 3_000),
            Err(FlightError::NotInFlight { key: key.clone() })
        );
        assert_eq!(table.expire(16_999), 0);
        assert_eq!(table.expire(17_000), 1);
        assert_eq!(table.join(&key, 4, 17_000), Join::Fetch);
        // Without expire, a join at the TTL's end fetches anew.
        let mut table = Table::default();
        table.join(&key, 1, 0);
        table.complete(&key, &failed, 0).unwrap();
        assert_eq!(table.join(&key, 2, DEFAULT_ERROR_TTL_MS), Join::Fetch);
        // TTL 0: nothing remembered.
        let mut table = Table::new(0);
        table.join(&key, 1, 0);
        table.complete(&key, &failed, 0).unwrap();
        assert!(table.is_empty());
    }

    #[test]
    fn backoff_is_capped_full_jitter() {
        let backoff = Backoff::default();
        let ceilings: Vec<u64> = (0..8).map(|r| backoff.ceiling_ms(r)).collect();
        assert_eq!(
            ceilings,
            vec![500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]
        );
        assert_eq!(backoff.ceiling_ms(200), 30_000);
        assert_eq!(backoff.delay_ms(5, 1), None);
        for retry in 0..5 {
            let delays: Vec<u64> = (0..500)
                .map(|s| backoff.delay_ms(retry, s).unwrap())
                .collect();
            let ceiling = backoff.ceiling_ms(retry);
            assert!(delays.iter().all(|d| *d <= ceiling));
            // Full jitter: draws cover the low and the high end of the range.
            assert!(delays.iter().any(|d| *d < ceiling / 4), "retry {retry}");
            assert!(delays.iter().any(|d| *d > ceiling * 3 / 4), "retry {retry}");
        }
        assert_eq!(backoff.delay_ms(2, 9), backoff.delay_ms(2, 9));
    }
}
