//! Consumable capacity of devices that allow multiple allocations (`allowMultipleAllocations`,
//! KEP-5075): what a request consumes of each capacity — its `capacity.requests`, else the
//! policy's `default`, else the whole capacity — rounded as the device's `requestPolicy`
//! demands (`validValues`: the smallest valid value at least as large; `validRange`: at least
//! `min`, at most `max`, in `step`s from `min`), and whether what is left can take it.
//!
//! Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::Device;
use tessera_model::quantity::Quantity;

/// A shareable capacity and its request policy.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityPolicy {
    /// The capacity.
    pub value: Quantity,
    /// What a request that names no amount consumes.
    pub default: Option<Quantity>,
    /// The only amounts that may be consumed, ascending.
    pub valid_values: Vec<Quantity>,
    /// Or a range: minimum, maximum, step.
    pub range: Option<(Quantity, Option<Quantity>, Option<Quantity>)>,
}

/// Capacities consumed, by name.
pub type Consumed = BTreeMap<String, Quantity>;

fn parse(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> Option<Quantity> {
    q.0.parse().ok()
}

/// The policies of a device's capacities (qualified by name as in the slice).
pub fn policies(device: &Device) -> BTreeMap<String, CapacityPolicy> {
    device
        .capacity
        .iter()
        .flatten()
        .filter_map(|(name, capacity)| {
            let policy = capacity.request_policy.as_ref();
            let mut valid_values: Vec<Quantity> = policy
                .and_then(|p| p.valid_values.as_ref())
                .into_iter()
                .flatten()
                .filter_map(parse)
                .collect();
            valid_values.sort();
            Some((
                name.clone(),
                CapacityPolicy {
                    value: parse(&capacity.value)?,
                    default: policy.and_then(|p| p.default.as_ref()).and_then(parse),
                    valid_values,
                    range: policy.and_then(|p| p.valid_range.as_ref()).and_then(|r| {
                        Some((
                            parse(&r.min)?,
                            r.max.as_ref().and_then(parse),
                            r.step.as_ref().and_then(parse),
                        ))
                    }),
                },
            ))
        })
        .collect()
}

/// The amount a request consumes of one capacity, or `None` when the policy cannot serve it.
fn amount(policy: &CapacityPolicy, requested: Option<Quantity>) -> Option<Quantity> {
    let wanted = requested.or(policy.default).unwrap_or(policy.value);
    if !policy.valid_values.is_empty() {
        return policy.valid_values.iter().find(|v| **v >= wanted).copied();
    }
    if let Some((min, max, step)) = policy.range {
        let mut amount = wanted.max(min);
        if let Some(step) = step.filter(|s| s.nanos() > 0) {
            let over = amount.nanos() - min.nanos();
            let steps = i64::try_from((over + step.nanos() - 1) / step.nanos()).ok()?;
            // min + steps × step, in min's format (so 10Gi steps print as Gi).
            amount = min.checked_add(&step.checked_mul(steps)?)?;
        }
        if max.is_some_and(|max| amount > max) {
            return None;
        }
        return Some(amount);
    }
    Some(wanted)
}

/// What a request with `requests` consumes of a device with `policies`; `None` when a policy
/// cannot serve it or it names a capacity the device lacks.
pub fn consumption(
    policies: &BTreeMap<String, CapacityPolicy>,
    requests: &BTreeMap<String, Quantity>,
) -> Option<Consumed> {
    if requests.keys().any(|name| !policies.contains_key(name)) {
        return None;
    }
    policies
        .iter()
        .map(|(name, policy)| Some((name.clone(), amount(policy, requests.get(name).copied())?)))
        .collect()
}

/// How full a shared device is with `used` consumed: thousandths of its fullest capacity.
pub fn fullness(policies: &BTreeMap<String, CapacityPolicy>, used: &Consumed) -> i64 {
    policies
        .iter()
        .map(|(name, policy)| {
            let used = used.get(name).map_or(0, Quantity::nanos);
            let total = policy.value.nanos();
            if total <= 0 {
                0
            } else {
                i64::try_from((used.saturating_mul(1000) / total).clamp(0, 1000)).unwrap_or(1000)
            }
        })
        .max()
        .unwrap_or(0)
}

/// Whether `more` fits beside `used` within the capacities.
pub fn fits(policies: &BTreeMap<String, CapacityPolicy>, used: &Consumed, more: &Consumed) -> bool {
    more.iter().all(|(name, amount)| {
        let already = used.get(name).copied().unwrap_or(Quantity::ZERO);
        let total = already.checked_add(amount);
        match (policies.get(name), total) {
            (Some(policy), Some(total)) => total <= policy.value,
            _ => false,
        }
    })
}

/// Adds `more` to `total`.
pub fn add(total: &mut Consumed, more: &Consumed) {
    for (name, amount) in more {
        let sum = total
            .get(name)
            .and_then(|have| have.checked_add(amount))
            .unwrap_or(*amount);
        total.insert(name.clone(), sum);
    }
}

/// Takes `less` off `total` (never below zero).
pub fn subtract(total: &mut Consumed, less: &Consumed) {
    for (name, amount) in less {
        if let Some(have) = total.get_mut(name) {
            *have = have
                .checked_sub(amount)
                .filter(|left| *left >= Quantity::ZERO)
                .unwrap_or(Quantity::ZERO);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str) -> Quantity {
        text.parse().expect("quantity")
    }

    #[test]
    fn requests_round_to_the_policy() {
        let plain = CapacityPolicy {
            value: q("80Gi"),
            default: None,
            valid_values: vec![],
            range: None,
        };
        let defaulted = CapacityPolicy {
            default: Some(q("10Gi")),
            ..plain.clone()
        };
        let values = CapacityPolicy {
            valid_values: vec![q("10Gi"), q("20Gi"), q("40Gi")],
            ..plain.clone()
        };
        let range = CapacityPolicy {
            range: Some((q("1Gi"), Some(q("40Gi")), Some(q("4Gi")))),
            ..plain.clone()
        };
        let table = [
            (&plain, None, Some("80Gi")),
            (&plain, Some("30Gi"), Some("30Gi")),
            (&defaulted, None, Some("10Gi")),
            (&values, Some("15Gi"), Some("20Gi")),
            (&values, Some("50Gi"), None),
            (&range, Some("512Mi"), Some("1Gi")),
            (&range, Some("6Gi"), Some("9Gi")),
            (&range, Some("41Gi"), None),
        ];
        for (i, (policy, requested, want)) in table.into_iter().enumerate() {
            assert_eq!(amount(policy, requested.map(q)), want.map(q), "case {i}");
        }
        let policies = BTreeMap::from([("memory".to_string(), plain)]);
        let half = consumption(
            &policies,
            &BTreeMap::from([("memory".to_string(), q("40Gi"))]),
        )
        .expect("fits");
        let mut used = Consumed::new();
        assert!(fits(&policies, &used, &half));
        add(&mut used, &half);
        assert!(fits(&policies, &used, &half));
        add(&mut used, &half);
        assert!(!fits(&policies, &used, &half), "80Gi are taken");
        assert_eq!(
            consumption(&policies, &BTreeMap::from([("cores".to_string(), q("1"))])),
            None
        );
    }
}
