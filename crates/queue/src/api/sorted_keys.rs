//! Membership in a sorted list of keys for a walk that meets keys in the same order (a
//! pass's walk over every Workload by key): each listed key is compared once on the way,
//! instead of every key met being looked up in a map.
//!
//! Knows nothing of what the keys name.

use std::iter::Peekable;
use std::slice::Iter;

/// Keys in ascending order, asked about in ascending order.
pub(crate) struct SortedKeys<'k> {
    keys: Peekable<Iter<'k, String>>,
}

impl<'k> SortedKeys<'k> {
    /// Over `keys`, which must be sorted (a `BTreeMap`'s or `BTreeSet`'s keys).
    pub fn new(keys: &'k [String]) -> SortedKeys<'k> {
        SortedKeys {
            keys: keys.iter().peekable(),
        }
    }

    /// Whether `key` is listed; each key asked must be greater than the one asked before.
    pub fn contains_next(&mut self, key: &str) -> bool {
        while self.keys.next_if(|listed| listed.as_str() < key).is_some() {}
        self.keys.next_if(|listed| listed.as_str() == key).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_in_key_order_finds_exactly_the_listed_keys() {
        // (listed, asked in order, which of them are listed)
        let cases: [(&[&str], &[&str], &[bool]); 5] = [
            (&[], &["a", "b"], &[false, false]),
            (
                &["b", "d"],
                &["a", "b", "c", "d", "e"],
                &[false, true, false, true, false],
            ),
            (&["a", "b"], &["b"], &[true]),
            (&["ns/a", "ns/b", "ns/c"], &["ns/a", "ns/c"], &[true, true]),
            (&["a", "c"], &["b", "d"], &[false, false]),
        ];
        for (listed, asked, expected) in cases {
            let listed: Vec<String> = listed.iter().map(|key| key.to_string()).collect();
            let mut keys = SortedKeys::new(&listed);
            let found: Vec<bool> = asked.iter().map(|key| keys.contains_next(key)).collect();
            assert_eq!(found, expected, "{listed:?} asked {asked:?}");
        }
    }
}
