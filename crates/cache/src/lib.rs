//! tessera-cache: the pure core of the node model cache (issue 21, deliverable 3).
//!
//! The node cache daemon moves model files of tens to hundreds of GB to GPU nodes without
//! sending every node to the origin. This crate decides; a shell downloads, writes, renames and
//! serves. It owns:
//!
//! - [`pieces`]: how a file is cut into pieces, the per-piece CRC32 check, a download's state
//!   (verified pieces, what to fetch next, resume) and the whole-file sha256 verdict;
//! - [`key`]: request-key normalisation (presigned query parameters dropped) and task ids;
//! - [`placement`]: which node seeds a blob from the origin, and which parent serves a piece;
//! - [`single_flight`]: one fetch per task id, waiters, a negative cache and retry backoff;
//! - [`eviction`]: high/low watermark LRU eviction that never touches blobs in use;
//! - [`hf_layout`]: the Hugging Face cache's relative paths and the validation of their parts;
//! - [`modelpack`]: the model store's key layout and its ModelPack (OCI artifact) view;
//! - [`distribution`]: the OCI distribution API of the image registry: routes, names, tags,
//!   digests, error codes, manifests and the image size they give, upload chunks, tag pages;
//! - [`sigv4`]: AWS Signature Version 4 for S3 requests and presigned URLs.
//! - [`admission`]: whether a new download fits the byte budget, and what to evict first;
//! - [`fanout`]: which missing pieces to fetch next from which peer;
//! - [`tracker`]: the seed's view of a blob's swarm (who holds what) and the holders it offers;
//! - [`retry`]: which origin answers are retried with backoff and which fail at once.
//!
//! It does no I/O, reads no clock (times are `u64` milliseconds passed in) and draws no
//! randomness it was not seeded with. It knows nothing of sockets, files, Kubernetes objects
//! or the origin's protocol.

pub mod admission;
pub mod distribution;
pub mod eviction;
pub mod fanout;
pub mod hf_layout;
pub mod key;
pub mod modelpack;
pub mod pieces;
pub mod placement;
pub mod retry;
pub mod sigv4;
pub mod single_flight;
pub mod tracker;

use sha2::{Digest, Sha256};

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

/// The sha256 of `bytes` as lower-case hex, the form blobs are named by.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Whether `value` is `len` lower-case hex digits (64 for sha256, 40 for a git commit or sha1).
pub fn is_lower_hex(value: &str, len: usize) -> bool {
    value.len() == len
        && value
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A seeded SplitMix64 generator: the only randomness in this crate, reproducible from its seed.
#[derive(Debug, Clone)]
pub struct SeededRng(u64);

impl SeededRng {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..=bound` (inclusive), by multiply-shift (no modulo bias worth naming).
    pub fn up_to(&mut self, bound: u64) -> u64 {
        let span = u128::from(bound) + 1;
        // (r * span) >> 64 < span <= u64::MAX + 1, so the result fits.
        u64::try_from((u128::from(self.next_u64()) * span) >> 64).unwrap_or(bound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_and_sha256() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert!(is_lower_hex(&sha256_hex(b"x"), 64));
        for (value, len, ok) in [
            ("0123456789abcdef0123456789abcdef01234567", 40, true),
            ("0123456789ABCDEF0123456789abcdef01234567", 40, false),
            ("0123", 40, false),
            ("g123", 4, false),
        ] {
            assert_eq!(is_lower_hex(value, len), ok, "{value}");
        }
    }

    #[test]
    fn seeded_rng_is_reproducible_and_bounded() {
        let a: Vec<u64> = (0..4)
            .scan(SeededRng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..4)
            .scan(SeededRng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let c: Vec<u64> = (0..4)
            .scan(SeededRng::new(8), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut rng = SeededRng::new(1);
        let draws: Vec<u64> = (0..1000).map(|_| rng.up_to(3)).collect();
        assert!(draws.iter().all(|d| *d <= 3));
        for value in 0..=3 {
            assert!(draws.contains(&value), "{value} never drawn");
        }
        assert_eq!(SeededRng::new(5).up_to(0), 0);
    }
}
