//! Admission fair sharing's arithmetic (`pkg/util/admissionfairsharing`, KEP 4136): the decay
//! factor for a half-life, consumed usage decayed towards the current usage, the entry penalty
//! a reservation adds until the next sample, and a LocalQueue's weighted usage, the key the
//! queues order LocalQueues by (lower first; a non-positive LocalQueue weight sorts last).
//!
//! Quantities are the resources' approximate floats (cores for `cpu`, bytes, devices), kept
//! exactly as `f64` where Kueue rounds to nano-units. Knows nothing about queues, the ledger's
//! sampling schedule or where the usage comes from.

use std::collections::BTreeMap;

/// Usage per resource name, in the resource's standard unit.
pub type ResourceUsage = BTreeMap<String, f64>;

/// The share of the new sample after `elapsed` seconds with `half_life` seconds
/// (`calculateAlphaRate`): `1 - 0.5^(elapsed/half_life)`, 0 for a zero half-life.
pub fn alpha(elapsed: f64, half_life: f64) -> f64 {
    if half_life == 0.0 {
        return 0.0;
    }
    1.0 - 0.5f64.powf(elapsed / half_life)
}

fn scaled(usage: &ResourceUsage, factor: f64) -> impl Iterator<Item = (&String, f64)> {
    usage
        .iter()
        .map(move |(name, value)| (name, value * factor))
}

/// `old·(1−α) + new·α` per resource (`CalculateDecayedConsumed`).
pub fn decayed_consumed(
    old: &ResourceUsage,
    current: &ResourceUsage,
    elapsed: f64,
    half_life: f64,
) -> ResourceUsage {
    let a = alpha(elapsed, half_life);
    let mut sum = ResourceUsage::new();
    for (name, value) in scaled(old, 1.0 - a).chain(scaled(current, a)) {
        *sum.entry(name.clone()).or_default() += value;
    }
    sum
}

/// What admitting `total_requests` adds to its LocalQueue's usage until the next sample:
/// the requests times the decay factor of one sampling interval (`CalculateEntryPenalty`).
pub fn entry_penalty(
    total_requests: &ResourceUsage,
    sampling: f64,
    half_life: f64,
) -> ResourceUsage {
    let a = alpha(sampling, half_life);
    scaled(total_requests, a)
        .map(|(name, value)| (name.clone(), value))
        .collect()
}

/// A LocalQueue's weighted usage (`CalculateUsage`): the sum over resources of the resource
/// weight (1 when unset) times consumed plus penalty, divided by the LocalQueue's weight;
/// `+inf` for a non-positive LocalQueue weight.
pub fn local_queue_usage(
    consumed: &ResourceUsage,
    penalty: &ResourceUsage,
    local_queue_weight: f64,
    resource_weights: &BTreeMap<String, f64>,
) -> f64 {
    let mut merged = consumed.clone();
    for (name, value) in penalty {
        *merged.entry(name.clone()).or_default() += value;
    }
    // A fold from +0: an empty `sum` of floats is -0, which would sort before +0.
    let usage = merged.iter().fold(0.0, |sum, (name, value)| {
        sum + resource_weights.get(name).copied().unwrap_or(1.0) * value
    });
    if local_queue_weight <= 0.0 {
        return f64::INFINITY;
    }
    usage / local_queue_weight
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(entries: &[(&str, f64)]) -> ResourceUsage {
        entries
            .iter()
            .map(|(name, value)| ((*name).to_owned(), *value))
            .collect()
    }

    const SAMPLING: f64 = 300.0;
    const WEEK: f64 = 168.0 * 3600.0;

    #[test]
    fn alpha_follows_the_half_life() {
        let cases = [
            (600.0, 600.0, 0.5),
            (1200.0, 600.0, 0.75),
            (0.0, 600.0, 0.0),
            (300.0, 0.0, 0.0),
        ];
        for (elapsed, half_life, want) in cases {
            assert!(
                (alpha(elapsed, half_life) - want).abs() < 1e-12,
                "{elapsed}/{half_life}"
            );
        }
    }

    // Upstream: TestCalculateDecayedConsumedConvergesToUsage and ...AccumulatesSubMilli.
    #[test]
    fn decayed_consumed_converges_to_usage() {
        let current = usage(&[("cpu", 2.0), ("nvidia.com/gpu", 1.0)]);
        let mut consumed = ResourceUsage::new();
        let mut previous = 0.0;
        for half_lives in 1..=3 {
            for _ in 0..2016 {
                consumed = decayed_consumed(&consumed, &current, SAMPLING, WEEK);
                assert!(consumed["cpu"] > previous, "grows every sample");
                previous = consumed["cpu"];
            }
            let want = 2.0 * (1.0 - 0.5f64.powi(half_lives));
            assert!((consumed["cpu"] - want).abs() < 1e-3, "{half_lives}");
            assert!(consumed["cpu"] <= 2.0);
        }
    }

    // Upstream: TestCalculateEntryPenaltyWithDRAResources / ...WithLongHalfLife.
    #[test]
    fn entry_penalty_is_positive_for_every_resource() {
        let requests = usage(&[("cpu", 4.0), ("gpu-logical", 2.0)]);
        for half_life in [600.0, WEEK] {
            let penalty = entry_penalty(&requests, SAMPLING, half_life);
            assert!(penalty["cpu"] > 0.0 && penalty["gpu-logical"] > 0.0);
        }
        let penalty = entry_penalty(&requests, SAMPLING, SAMPLING);
        assert_eq!(penalty, usage(&[("cpu", 2.0), ("gpu-logical", 1.0)]));
    }

    // Upstream: TestCalculateUsageWithDRA, TestCalculateUsageWithNonPositiveWeight.
    #[test]
    fn local_queue_usage_table() {
        type Case = (
            &'static str,
            ResourceUsage,
            ResourceUsage,
            f64,
            Vec<(&'static str, f64)>,
            f64,
        );
        let cases: Vec<Case> = vec![
            (
                "default weight",
                usage(&[("gpu-logical", 2.0)]),
                usage(&[]),
                1.0,
                vec![],
                2.0,
            ),
            (
                "explicit weight",
                usage(&[("gpu-logical", 2.0)]),
                usage(&[]),
                1.0,
                vec![("gpu-logical", 3.0)],
                6.0,
            ),
            (
                "mixed CPU and DRA resources",
                usage(&[("cpu", 4.0), ("gpu-logical", 2.0)]),
                usage(&[]),
                1.0,
                vec![("cpu", 1.0), ("gpu-logical", 5.0)],
                14.0,
            ),
            (
                "weight zero contributes nothing",
                usage(&[("gpu-logical", 10.0)]),
                usage(&[]),
                1.0,
                vec![("gpu-logical", 0.0)],
                0.0,
            ),
            (
                "penalty only",
                usage(&[]),
                usage(&[("gpu-logical", 3.0)]),
                1.0,
                vec![],
                3.0,
            ),
            (
                "consumed and penalty",
                usage(&[("gpu-logical", 2.0)]),
                usage(&[("gpu-logical", 1.0)]),
                2.0,
                vec![("gpu-logical", 4.0)],
                6.0,
            ),
            (
                "zero weight, idle",
                usage(&[]),
                usage(&[]),
                0.0,
                vec![],
                f64::INFINITY,
            ),
            (
                "zero weight, active",
                usage(&[("cpu", 4.0)]),
                usage(&[]),
                0.0,
                vec![],
                f64::INFINITY,
            ),
            (
                "negative weight",
                usage(&[("cpu", 4.0)]),
                usage(&[]),
                -1.0,
                vec![],
                f64::INFINITY,
            ),
        ];
        for (name, consumed, penalty, weight, weights, want) in cases {
            let weights = weights
                .into_iter()
                .map(|(r, w)| (r.to_owned(), w))
                .collect();
            assert_eq!(
                local_queue_usage(&consumed, &penalty, weight, &weights),
                want,
                "{name}"
            );
        }
    }
}
