//! Quantities keyed by (flavor, resource), as Kueue keys its quota maps
//! (`pkg/resources/resource.go`: `FlavorResource`, `FlavorResourceQuantities`): a missing key
//! reads as bounded zero. Maps are ordered so that every walk over them is deterministic.
//!
//! Knows nothing about queues, cohorts or how a quantity came to be (see `amount`).

use std::collections::BTreeMap;

use crate::amount::Amount;

/// A resource in one ResourceFlavor: the key of every quota and usage map.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlavorResource {
    /// The ResourceFlavor's name.
    pub flavor: String,
    /// The resource name (`cpu`, `memory`, `nvidia.com/gpu`, …).
    pub resource: String,
}

impl FlavorResource {
    /// The key for `resource` in `flavor`.
    pub fn new(flavor: impl Into<String>, resource: impl Into<String>) -> FlavorResource {
        FlavorResource {
            flavor: flavor.into(),
            resource: resource.into(),
        }
    }
}

/// Amounts per (flavor, resource); a missing key is bounded zero.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlavorResourceQuantities(BTreeMap<FlavorResource, Amount>);

impl FlavorResourceQuantities {
    /// No entries.
    pub fn new() -> FlavorResourceQuantities {
        FlavorResourceQuantities::default()
    }

    /// The amount for `key`, zero when absent.
    pub fn get(&self, key: &FlavorResource) -> Amount {
        self.0.get(key).copied().unwrap_or_default()
    }

    /// Whether `key` has an entry (zero entries count).
    pub fn contains(&self, key: &FlavorResource) -> bool {
        self.0.contains_key(key)
    }

    /// Sets the amount for `key`.
    pub fn set(&mut self, key: FlavorResource, amount: Amount) {
        self.0.insert(key, amount);
    }

    /// Adds `amount` to the entry for `key` (creating it).
    pub fn add(&mut self, key: &FlavorResource, amount: Amount) {
        let sum = self.get(key) + amount;
        self.0.insert(key.clone(), sum);
    }

    /// The entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&FlavorResource, Amount)> {
        self.0.iter().map(|(key, amount)| (key, *amount))
    }

    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &FlavorResource> {
        self.0.keys()
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Element-wise `self - other` over `self`'s keys (`Sub`).
    #[must_use]
    pub fn sub(&self, other: &FlavorResourceQuantities) -> FlavorResourceQuantities {
        self.iter()
            .map(|(key, amount)| (key.clone(), amount - other.get(key)))
            .collect()
    }

    /// The totals per resource name across flavors (`FlattenFlavors`), saturating.
    pub fn flatten_flavors(&self) -> BTreeMap<String, i64> {
        let mut totals = BTreeMap::new();
        for (key, amount) in self.iter() {
            let total: &mut i64 = totals.entry(key.resource.clone()).or_default();
            *total = total.saturating_add(amount.int64());
        }
        totals
    }
}

impl FromIterator<(FlavorResource, Amount)> for FlavorResourceQuantities {
    fn from_iter<I: IntoIterator<Item = (FlavorResource, Amount)>>(iter: I) -> Self {
        FlavorResourceQuantities(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quantities(entries: &[(&str, &str, i64)]) -> FlavorResourceQuantities {
        entries
            .iter()
            .map(|(flavor, resource, value)| {
                (FlavorResource::new(*flavor, *resource), Amount::new(*value))
            })
            .collect()
    }

    #[test]
    fn missing_keys_read_as_zero_and_add_creates_them() {
        let mut map = FlavorResourceQuantities::new();
        let key = FlavorResource::new("default", "cpu");
        assert_eq!(map.get(&key), Amount::ZERO);
        assert!(!map.contains(&key));
        map.add(&key, Amount::new(3));
        map.add(&key, Amount::new(4));
        assert_eq!(map.get(&key), Amount::new(7));
    }

    #[test]
    fn sub_keeps_the_receivers_keys_only() {
        let left = quantities(&[("a", "cpu", 5), ("b", "cpu", 2)]);
        let right = quantities(&[("a", "cpu", 3), ("c", "cpu", 9)]);
        assert_eq!(
            left.sub(&right),
            quantities(&[("a", "cpu", 2), ("b", "cpu", 2)])
        );
    }

    #[test]
    fn flatten_flavors_sums_per_resource() {
        let map = quantities(&[("a", "cpu", 5), ("b", "cpu", 2), ("a", "memory", 7)]);
        let flat = map.flatten_flavors();
        assert_eq!(flat.get("cpu"), Some(&7));
        assert_eq!(flat.get("memory"), Some(&7));
        assert_eq!(flat.len(), 2);
    }
}
