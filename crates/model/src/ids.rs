//! Identifiers the API server invents — object UIDs and `generateName` suffixes — drawn from
//! a generator the caller seeds, so a shell seeds it from the host's entropy and a test fixes
//! it. Nothing here reads the host's randomness.

use std::sync::Mutex;

/// Upstream's alphabet for generated name suffixes (`k8s.io/apimachinery/pkg/util/rand`):
/// vowels and look-alike characters left out, so no words or ambiguous names appear.
pub const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Length of a `generateName` suffix, as upstream's name generator uses.
pub const SUFFIX_LENGTH: usize = 5;

/// A seeded source of UIDs and name suffixes, shared by the threads of one server.
#[derive(Debug)]
pub struct Ids {
    rng: Mutex<fastrand::Rng>,
}

impl Ids {
    /// A generator whose output is fixed by `seed`.
    pub fn seeded(seed: u64) -> Ids {
        Ids {
            rng: Mutex::new(fastrand::Rng::with_seed(seed)),
        }
    }

    fn with_rng<T>(&self, draw: impl FnOnce(&mut fastrand::Rng) -> T) -> T {
        let mut rng = self
            .rng
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        draw(&mut rng)
    }

    /// A random (version 4, RFC 4122 variant) UUID in its canonical text form.
    pub fn uid(&self) -> String {
        let mut bytes = self.with_rng(|rng| rng.u128(..)).to_be_bytes();
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut text = String::with_capacity(36);
        for (i, byte) in bytes.iter().enumerate() {
            // Dashes before the 5th, 7th, 9th and 11th bytes: 8-4-4-4-12 digits.
            if matches!(i, 4 | 6 | 8 | 10) {
                text.push('-');
            }
            text.push(char::from(HEX[usize::from(byte >> 4)]));
            text.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
        text
    }

    /// A `generateName` suffix: five characters of [`SUFFIX_ALPHABET`].
    pub fn name_suffix(&self) -> String {
        self.with_rng(|rng| {
            (0..SUFFIX_LENGTH)
                .map(|_| SUFFIX_ALPHABET[rng.usize(..SUFFIX_ALPHABET.len())] as char)
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_fixes_the_output() {
        let (a, b) = (Ids::seeded(7), Ids::seeded(7));
        assert_eq!(a.uid(), b.uid());
        assert_eq!(a.name_suffix(), b.name_suffix());
        assert_ne!(Ids::seeded(7).uid(), Ids::seeded(8).uid());
    }

    #[test]
    fn uids_are_version_4_uuids_and_suffixes_use_upstreams_alphabet() {
        let ids = Ids::seeded(1);
        for _ in 0..200 {
            let uid = ids.uid();
            let groups: Vec<&str> = uid.split('-').collect();
            let lengths: Vec<usize> = groups.iter().map(|g| g.len()).collect();
            assert_eq!(lengths, [8, 4, 4, 4, 12], "{uid}");
            assert!(
                groups.iter().all(|g| g
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))),
                "{uid}"
            );
            assert!(groups[2].starts_with('4'), "{uid}");
            assert!(matches!(&groups[3][..1], "8" | "9" | "a" | "b"), "{uid}");
            let suffix = ids.name_suffix();
            assert_eq!(suffix.len(), SUFFIX_LENGTH);
            assert!(
                suffix.bytes().all(|b| SUFFIX_ALPHABET.contains(&b)),
                "{suffix}"
            );
        }
    }
}
