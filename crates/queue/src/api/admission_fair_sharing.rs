//! Admission fair sharing across passes (KEP 4136; Kueue's `pkg/cache/queue/afs` ledger, the
//! LocalQueue controller's sampling and the workload controller's settlement): per LocalQueue,
//! the decayed consumed resources, the entry penalties of Workloads reserved but not yet
//! admitted, and the clock of the decay. A pass observes every LocalQueue (`observe`): a new
//! entry is seeded from the LocalQueue's persisted `status.fairSharing` (so a restart rebuilds
//! it), admitted Workloads settle their penalties, penalties that can no longer settle are
//! dropped, and a sample decays the consumed resources towards the admitted usage once a
//! sampling interval has passed. The scheduling cycles push a penalty per reservation
//! (`push_penalty`) and order the ClusterQueues that ask for it by the weighted usage
//! (`ordering_usage`). `status` is the LocalQueue's `status.fairSharing` as Kueue writes it.
//!
//! Differences from Kueue: a pass samples when the interval has passed (Kueue's LocalQueue
//! controller also samples on every Workload event while a penalty is pending), and a zero
//! half-life leaves the resources at zero rather than an empty list (the status is written
//! as a merge patch). Penalties pushed before a restart are lost, as in Kueue.
//! Knows nothing about objects or queues: the pass hands in what it read.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use serde_json::{Value, json};
use tessera_model::quantity::Quantity;
use tessera_model::time;

use crate::afs::{self, ResourceUsage};
use crate::config::AdmissionFairSharing;
use crate::queue::LocalQueueUsage;

/// What a pass read about one LocalQueue whose ClusterQueue exists.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    /// Its ClusterQueue's admissionMode is `UsageBasedAdmissionFairSharing`: penalties are
    /// pushed and settled, and its ClusterQueue orders by the weighted usage.
    pub usage_based: bool,
    /// `spec.fairSharing.weight` (1 when unset).
    pub weight: f64,
    /// `status.fairSharing.admissionFairSharingStatus.consumedResources`, if persisted.
    pub persisted: Option<ResourceUsage>,
    /// The usage of its admitted Workloads (`GetAdmittedUsage`).
    pub admitted_usage: ResourceUsage,
    /// Its Workloads that are admitted now: they settle their penalties.
    pub admitted: BTreeSet<String>,
    /// Its Workloads that may still settle a penalty: pending, or holding quota.
    pub live: BTreeSet<String>,
}

/// One LocalQueue's entry (`UsageLedgerEntry`).
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    usage_based: bool,
    weight: f64,
    /// The decayed consumed history.
    consumed: ResourceUsage,
    /// The entry penalty of each Workload reserved and not yet admitted.
    penalties: BTreeMap<String, ResourceUsage>,
    /// When `consumed` was last decayed, or when the entry was created.
    last_update: SystemTime,
    /// The last sample, as the status shows it: consumed resources and when.
    sampled: (ResourceUsage, SystemTime),
}

impl Entry {
    /// The sum of the pending penalties.
    fn pending_penalty(&self) -> ResourceUsage {
        let mut sum = ResourceUsage::new();
        for penalty in self.penalties.values() {
            add_into(&mut sum, penalty);
        }
        sum
    }

    /// Decays `consumed` towards `current` for the time since the last update, and moves the
    /// clock to `now` (never backwards).
    fn decay(&mut self, current: &ResourceUsage, half_life: f64, now: SystemTime) {
        let elapsed = seconds_since(self.last_update, now);
        self.consumed = if half_life == 0.0 {
            // Kueue resets to an empty list; zeros keep the resources in the merge patch
            // the status is written with, which cannot drop them.
            self.consumed.keys().map(|r| (r.clone(), 0.0)).collect()
        } else {
            afs::decayed_consumed(&self.consumed, current, elapsed, half_life)
        };
        self.last_update = self.last_update.max(now);
    }
}

/// The per-LocalQueue admission fair sharing state a pass keeps for the next
/// (`AfsUsageLedger`), by `namespace/name`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ledger {
    entries: BTreeMap<String, Entry>,
}

impl Ledger {
    /// Brings the ledger up to date with the LocalQueues a pass read at `now`: entries of
    /// LocalQueues gone are dropped, new ones seeded from their persisted status
    /// (`initializeAfsIfNeeded`), admitted Workloads settle their penalties
    /// (`updateAfsConsumedUsage`), penalties that can no longer settle are dropped, and an
    /// entry samples (`reconcileConsumedUsage`) when it is new or a sampling interval has
    /// passed since its last update.
    pub fn observe(
        &mut self,
        local_queues: &BTreeMap<String, Observed>,
        config: &AdmissionFairSharing,
        now: SystemTime,
    ) {
        let half_life = config.usage_half_life.as_secs_f64();
        let interval = config.usage_sampling_interval.as_secs_f64();
        self.entries.retain(|key, _| local_queues.contains_key(key));
        for (key, observed) in local_queues {
            let mut fresh = false;
            let entry = self.entries.entry(key.clone()).or_insert_with(|| {
                fresh = true;
                let consumed = observed.persisted.clone().unwrap_or_default();
                Entry {
                    usage_based: observed.usage_based,
                    weight: observed.weight,
                    sampled: (consumed.clone(), now),
                    consumed,
                    penalties: BTreeMap::new(),
                    last_update: now,
                }
            });
            entry.usage_based = observed.usage_based;
            entry.weight = observed.weight;
            let settling: Vec<String> = entry
                .penalties
                .keys()
                .filter(|workload| observed.admitted.contains(*workload))
                .cloned()
                .collect();
            for workload in settling {
                entry.decay(&observed.admitted_usage, half_life, now);
                if let Some(penalty) = entry.penalties.remove(&workload) {
                    add_into(&mut entry.consumed, &penalty);
                }
            }
            entry
                .penalties
                .retain(|workload, _| observed.live.contains(workload));
            let due = seconds_since(entry.last_update, now) >= interval;
            if fresh || due {
                entry.decay(&observed.admitted_usage, half_life, now);
                entry.sampled = (entry.consumed.clone(), now);
            }
        }
    }

    /// Records the entry penalty of reserving `requests` for `workload` in `local_queue`
    /// (`PushPenalty`), replacing an earlier one; nothing unless its ClusterQueue is usage
    /// based.
    pub fn push_penalty(
        &mut self,
        local_queue: &str,
        workload: &str,
        requests: &ResourceUsage,
        config: &AdmissionFairSharing,
    ) {
        let Some(entry) = self.entries.get_mut(local_queue) else {
            return;
        };
        if !entry.usage_based {
            return;
        }
        let penalty = afs::entry_penalty(
            requests,
            config.usage_sampling_interval.as_secs_f64(),
            config.usage_half_life.as_secs_f64(),
        );
        entry.penalties.insert(workload.to_owned(), penalty);
    }

    /// The weighted usage (consumed plus pending penalties, resource weights applied, divided
    /// by the LocalQueue weight) of each LocalQueue whose ClusterQueue is usage based, by
    /// namespace and name: the order of their ClusterQueues' heaps.
    pub fn ordering_usage(&self, config: &AdmissionFairSharing) -> LocalQueueUsage {
        let mut usage = LocalQueueUsage::new();
        for (key, entry) in self.entries.iter().filter(|(_, e)| e.usage_based) {
            let Some((namespace, name)) = key.split_once('/') else {
                continue;
            };
            let value = afs::local_queue_usage(
                &entry.consumed,
                &entry.pending_penalty(),
                entry.weight,
                &config.resource_weights,
            );
            usage
                .entry(namespace.to_owned())
                .or_default()
                .insert(name.to_owned(), value);
        }
        usage
    }

    /// The LocalQueue's `status.fairSharing` as Kueue's LocalQueue controller writes it:
    /// `weightedShare` 0 and the last sample's consumed resources and time.
    pub fn status(&self, local_queue: &str) -> Option<Value> {
        let entry = self.entries.get(local_queue)?;
        let (consumed, at) = &entry.sampled;
        let consumed: serde_json::Map<String, Value> = consumed
            .iter()
            .map(|(resource, value)| (resource.clone(), Value::String(quantity_text(*value))))
            .collect();
        Some(json!({
            "weightedShare": 0,
            "admissionFairSharingStatus": {
                "consumedResources": consumed,
                "lastUpdate": time::timestamp(*at),
            },
        }))
    }
}

fn add_into(sum: &mut ResourceUsage, usage: &ResourceUsage) {
    for (resource, value) in usage {
        *sum.entry(resource.clone()).or_default() += value;
    }
}

/// Seconds from `from` to `now`, 0 when `now` is earlier (Kueue clamps a negative elapsed).
fn seconds_since(from: SystemTime, now: SystemTime) -> f64 {
    now.duration_since(from).map_or(0.0, |d| d.as_secs_f64())
}

/// A usage as a quantity, rounded down to nano-units as Kueue's `MulByFloat` leaves it, in
/// canonical form (`1500m`, `66967008n`).
pub fn quantity_text(value: f64) -> String {
    // The float's shortest decimal form, as Kueue's `strconv.FormatFloat(f, 'f', -1, 64)`,
    // truncated to nine decimals.
    let text = format!("{}", value.max(0.0));
    let text = match text.split_once('.') {
        Some((whole, fraction)) => format!("{whole}.{}", &fraction[..fraction.len().min(9)]),
        None => text,
    };
    text.parse::<Quantity>()
        .map_or_else(|_| "0".to_owned(), |q| q.to_string())
}

#[cfg(test)]
#[path = "admission_fair_sharing_tests.rs"]
mod tests;
