//! Maps keyed by the address of a shared object (`Arc::as_ptr`), as the shells and the queue
//! core keep what they derived from an object the watch cache hands out unchanged: hashed by
//! two multiplies instead of SipHash. Addresses are not chosen by users, so no hash flooding
//! can be aimed at them.
//!
//! Knows nothing of what the objects are; the holder keeps each object alive while it is a
//! key, so that no other object can take its address.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// A map by object address.
pub type AddressMap<V> = HashMap<usize, V, BuildHasherDefault<AddressHasher>>;

/// The address of a shared object, as [`AddressMap`] keys it: the data pointer alone (one
/// object's address is the same through an `Arc<T>` and the `Arc<dyn Any>` made of it).
pub fn address_of<T: ?Sized>(object: &Arc<T>) -> usize {
    Arc::as_ptr(object).cast::<()>() as usize
}

/// Forgets what a read over kept objects did not meet: unless every entry of `by_address`
/// was met (`met` of them), the entries `was_met` refuses, and the keys naming them in
/// `by_key` (each key holds the address of its entry).
pub fn sweep<K, V>(
    by_address: &mut AddressMap<V>,
    by_key: &mut HashMap<K, usize>,
    met: usize,
    was_met: impl Fn(&V) -> bool,
) {
    if sweep_unmet(by_address, met, was_met) {
        by_key.retain(|_, at| by_address.contains_key(at));
    }
}

/// [`sweep`] for a map kept by address alone: forgets the entries `was_met` refuses unless
/// every one was met (`met` of them). Whether any may have been forgotten.
pub fn sweep_unmet<V>(
    by_address: &mut AddressMap<V>,
    met: usize,
    was_met: impl Fn(&V) -> bool,
) -> bool {
    if met == by_address.len() {
        return false;
    }
    by_address.retain(|_, entry| was_met(entry));
    true
}

/// Hashes one address with SplitMix64's finalizer: aligned addresses still spread over the
/// low bits (the table's bucket index).
#[derive(Debug, Clone, Copy, Default)]
pub struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    /// Any other key: FNV-1a over its bytes.
    fn write(&mut self, bytes: &[u8]) {
        let mut fnv = crate::fnv::Fnv64::default();
        fnv.mix(&self.0.to_le_bytes());
        fnv.mix(bytes);
        self.0 = fnv.value();
    }

    fn write_usize(&mut self, address: usize) {
        // SplitMix64's finalizer.
        let mut mixed = (address as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        self.0 = mixed ^ (mixed >> 31);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn aligned_addresses_spread_over_the_low_bits() {
        let build = BuildHasherDefault::<AddressHasher>::default();
        // 1,024 addresses 64 bytes apart fill most of 1,024 buckets chosen by the low bits.
        let buckets: std::collections::BTreeSet<u64> = (0..1024usize)
            .map(|i| build.hash_one(0x7f00_0000_0000 + i * 64) & 1023)
            .collect();
        assert!(buckets.len() > 600, "{} buckets", buckets.len());
        let mut map: AddressMap<&str> = AddressMap::default();
        map.insert(0x1000, "a");
        map.insert(0x1040, "b");
        assert_eq!(
            (map.get(&0x1000), map.get(&0x1040), map.get(&0x1080)),
            (Some(&"a"), Some(&"b"), None)
        );
    }
}
