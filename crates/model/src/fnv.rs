//! FNV-1a (64-bit): the small, stable, non-cryptographic hash Tessera's derived names and
//! document hashes use (upstream's `job-key`, `storageVersionHash`, OpenAPI document hashes).
//!
//! Stable across runs and platforms; knows nothing of what it hashes.

/// An FNV-1a hash being computed.
#[derive(Debug, Clone, Copy)]
pub struct Fnv64(u64);

impl Default for Fnv64 {
    fn default() -> Fnv64 {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv64 {
    /// Mixes bytes in.
    pub fn mix(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// The hash so far.
    pub fn value(self) -> u64 {
        self.0
    }
}

/// The FNV-1a hash of one byte string.
pub fn fnv64(bytes: &[u8]) -> u64 {
    let mut hash = Fnv64::default();
    hash.mix(bytes);
    hash.value()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_vectors() {
        // From the FNV reference (draft-eastlake-fnv): "" and "a", "foobar".
        assert_eq!(fnv64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv64(b"foobar"), 0x8594_4171_f739_67e8);
        let mut split = Fnv64::default();
        split.mix(b"foo");
        split.mix(b"bar");
        assert_eq!(split.value(), fnv64(b"foobar"));
    }
}
