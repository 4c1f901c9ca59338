//! Pieces of a cached file: the piece length, the byte ranges, the per-piece CRC32 check, a
//! download's state and the whole-file sha256 verdict.
//!
//! **Piece length.** Dragonfly picks `next_power_of_two(size / 500)` clamped to [4 MiB, 64 MiB]
//! (`dragonfly-client/src/resource/piece.rs`, about 500 pieces a file). Issue 21 asks for pieces
//! of 8 to 16 MiB (S3's guidance for part-aligned range GETs), so the same rule is clamped to
//! [[`MIN_PIECE_LENGTH`], [`MAX_PIECE_LENGTH`]]: files up to 4000 MiB get 8 MiB pieces, larger ones
//! 16 MiB (a 140 GB model is then about 8,300 pieces instead of Dragonfly's ~2,100 at 64 MiB,
//! the price of origin-aligned ranges and finer P2P striping).
//!
//! **Integrity.** Each piece is checked by length and CRC32 (`crc32fast`, as Dragonfly and
//! Kraken); the file becomes visible only when every piece is verified, the size matches and the
//! whole-file sha256 (the blob's identity) matches: [`Download::finish`] returns [`Verified`], the
//! only value on which the shell renames the file into place. Every failure is a [`PieceError`]
//! naming the piece and the expected and actual values.
//!
//! This module does not read bytes from anywhere, know peers or the origin, or store the record
//! of verified pieces; the shell persists [`Download::verified`] and resumes with
//! [`Download::resume`].

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::is_lower_hex;

/// One mebibyte.
pub const MIB: u64 = 1 << 20;
/// The smallest piece length the rule picks (issue 21's window; Dragonfly's is 4 MiB).
pub const MIN_PIECE_LENGTH: u64 = 8 * MIB;
/// The largest piece length the rule picks (issue 21's window; Dragonfly's is 64 MiB).
pub const MAX_PIECE_LENGTH: u64 = 16 * MIB;
/// The piece count the rule aims at (Dragonfly's `MAX_PIECE_COUNT`).
pub const TARGET_PIECE_COUNT: u64 = 500;
/// The most pieces a [`Download`] (and an explicitly cut [`Layout`]) may have: a bound on the
/// download state's memory (64 TiB at 16 MiB pieces).
pub const MAX_PIECES: u64 = 1 << 22;

/// Why a piece, a layout or a file was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PieceError {
    #[error("piece length must be positive")]
    ZeroPieceLength,
    #[error("{size} bytes in pieces of {piece_length} bytes make {count} pieces, more than {max}")]
    TooManyPieces {
        size: u64,
        piece_length: u64,
        count: u64,
        max: u64,
    },
    #[error("piece {piece} is out of range: the file has {count} pieces")]
    OutOfRange { piece: u64, count: u64 },
    #[error("piece {piece} is truncated: expected {expected} bytes, got {actual}")]
    Truncated {
        piece: u64,
        expected: u64,
        actual: u64,
    },
    #[error("piece {piece} has the wrong length: expected {expected} bytes, got {actual}")]
    Oversized {
        piece: u64,
        expected: u64,
        actual: u64,
    },
    #[error("piece {piece} digest mismatch: expected crc32:{expected:08x}, got crc32:{actual:08x}")]
    DigestMismatch {
        piece: u64,
        expected: u32,
        actual: u32,
    },
    #[error("expected sha256 {value:?} is not 64 lower-case hex digits")]
    InvalidSha256 { value: String },
    #[error("{missing} of {count} pieces are not verified yet (first missing: piece {first})")]
    Incomplete {
        missing: u64,
        count: u64,
        first: u64,
    },
    #[error("file size mismatch: expected {expected} bytes, got {actual}")]
    SizeMismatch { expected: u64, actual: u64 },
    #[error("file digest mismatch: expected sha256:{expected}, got sha256:{actual}")]
    FileDigestMismatch { expected: String, actual: String },
}

/// The piece length for a file of `size` bytes: `next_power_of_two(size / 500)` clamped to
/// [[`MIN_PIECE_LENGTH`], [`MAX_PIECE_LENGTH`]].
pub fn piece_length(size: u64) -> u64 {
    // size / 500 <= u64::MAX / 500 < 2^63, so next_power_of_two cannot overflow.
    (size / TARGET_PIECE_COUNT)
        .next_power_of_two()
        .clamp(MIN_PIECE_LENGTH, MAX_PIECE_LENGTH)
}

/// The CRC32 (IEEE) of a piece's bytes.
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// One piece: its index and byte range in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PieceRange {
    pub index: u64,
    pub offset: u64,
    pub len: u64,
}

impl PieceRange {
    /// The HTTP `Range` header value for this piece (`bytes=first-last`, inclusive).
    pub fn http_range(&self) -> String {
        format!(
            "bytes={}-{}",
            self.offset,
            self.offset + self.len.saturating_sub(1)
        )
    }
}

/// How a file of `size` bytes is cut: every piece `piece_length` long except a shorter last one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    size: u64,
    piece_length: u64,
}

impl Layout {
    /// The layout with the length [`piece_length`] picks.
    pub fn new(size: u64) -> Self {
        Self {
            size,
            piece_length: piece_length(size),
        }
    }

    /// The layout with an explicit piece length (a configured fixed length, or origin parts).
    pub fn with_piece_length(size: u64, piece_length: u64) -> Result<Self, PieceError> {
        if piece_length == 0 {
            return Err(PieceError::ZeroPieceLength);
        }
        let count = size.div_ceil(piece_length);
        if count > MAX_PIECES {
            return Err(PieceError::TooManyPieces {
                size,
                piece_length,
                count,
                max: MAX_PIECES,
            });
        }
        Ok(Self { size, piece_length })
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn piece_length(&self) -> u64 {
        self.piece_length
    }

    /// The number of pieces (0 for an empty file).
    pub fn count(&self) -> u64 {
        self.size.div_ceil(self.piece_length)
    }

    /// The range of piece `index`.
    pub fn range(&self, index: u64) -> Result<PieceRange, PieceError> {
        let count = self.count();
        if index >= count {
            return Err(PieceError::OutOfRange {
                piece: index,
                count,
            });
        }
        let offset = index * self.piece_length;
        Ok(PieceRange {
            index,
            offset,
            len: self.piece_length.min(self.size - offset),
        })
    }

    /// Every piece's range, in order; together they cover `0..size` exactly.
    pub fn ranges(&self) -> impl Iterator<Item = PieceRange> + '_ {
        (0..self.count()).filter_map(|index| self.range(index).ok())
    }

    /// Checks a piece's bytes: the length first (short is [`PieceError::Truncated`]), then the
    /// CRC32 against `expected_crc` when one is known (a parent's record). Returns the CRC32.
    pub fn check_piece(
        &self,
        index: u64,
        bytes: &[u8],
        expected_crc: Option<u32>,
    ) -> Result<u32, PieceError> {
        let range = self.range(index)?;
        let actual = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        if actual < range.len {
            return Err(PieceError::Truncated {
                piece: index,
                expected: range.len,
                actual,
            });
        }
        if actual > range.len {
            return Err(PieceError::Oversized {
                piece: index,
                expected: range.len,
                actual,
            });
        }
        let crc = crc32(bytes);
        match expected_crc {
            Some(expected) if expected != crc => Err(PieceError::DigestMismatch {
                piece: index,
                expected,
                actual: crc,
            }),
            _ => Ok(crc),
        }
    }
}

/// The verdict that lets a file become visible: all pieces verified, size and sha256 matching.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verified {
    pub size: u64,
    pub sha256: String,
}

/// A download in progress: which pieces are verified (with their CRC32, so the node can serve
/// them onward and peers can check them) and what the file must hash to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Download {
    layout: Layout,
    expected_sha256: String,
    /// Per piece: the CRC32 once verified.
    pieces: Vec<Option<u32>>,
}

impl Download {
    /// A fresh download of a file whose sha256 is `expected_sha256` (lower-case hex; a leading
    /// `sha256:` is accepted).
    pub fn new(layout: Layout, expected_sha256: &str) -> Result<Self, PieceError> {
        let digest = expected_sha256
            .strip_prefix("sha256:")
            .unwrap_or(expected_sha256);
        if !is_lower_hex(digest, 64) {
            return Err(PieceError::InvalidSha256 {
                value: expected_sha256.to_owned(),
            });
        }
        if layout.count() > MAX_PIECES {
            return Err(PieceError::TooManyPieces {
                size: layout.size,
                piece_length: layout.piece_length,
                count: layout.count(),
                max: MAX_PIECES,
            });
        }
        let count = usize::try_from(layout.count()).unwrap_or(usize::MAX);
        Ok(Self {
            layout,
            expected_sha256: digest.to_owned(),
            pieces: vec![None; count],
        })
    }

    /// A download resumed from a recorded set of verified pieces and their CRC32s (the shell
    /// re-reads nothing it recorded as verified; the final sha256 still covers every byte).
    pub fn resume(
        layout: Layout,
        expected_sha256: &str,
        verified: impl IntoIterator<Item = (u64, u32)>,
    ) -> Result<Self, PieceError> {
        let mut download = Self::new(layout, expected_sha256)?;
        for (index, crc) in verified {
            *download.slot(index)? = Some(crc);
        }
        Ok(download)
    }

    fn slot(&mut self, index: u64) -> Result<&mut Option<u32>, PieceError> {
        let count = self.layout.count();
        usize::try_from(index)
            .ok()
            .and_then(|i| self.pieces.get_mut(i))
            .ok_or(PieceError::OutOfRange {
                piece: index,
                count,
            })
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn expected_sha256(&self) -> &str {
        &self.expected_sha256
    }

    /// Records a fetched piece: checked by [`Layout::check_piece`], then marked verified.
    /// A failed check leaves the piece missing, to be fetched again (from another parent).
    pub fn record(
        &mut self,
        index: u64,
        bytes: &[u8],
        expected_crc: Option<u32>,
    ) -> Result<PieceRange, PieceError> {
        let crc = self.layout.check_piece(index, bytes, expected_crc)?;
        *self.slot(index)? = Some(crc);
        self.layout.range(index)
    }

    /// The verified pieces and their CRC32s, in order: what the shell persists for resume.
    pub fn verified(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        (0u64..)
            .zip(self.pieces.iter())
            .filter_map(|(i, crc)| crc.map(|c| (i, c)))
    }

    /// The CRC32 of a verified piece (what this node tells a child fetching it).
    pub fn piece_crc(&self, index: u64) -> Option<u32> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.pieces.get(i).copied().flatten())
    }

    /// The pieces not verified yet, in index order.
    pub fn missing(&self) -> BTreeSet<u64> {
        (0u64..)
            .zip(self.pieces.iter())
            .filter(|(_, c)| c.is_none())
            .map(|(i, _)| i)
            .collect()
    }

    pub fn is_complete(&self) -> bool {
        self.pieces.iter().all(Option::is_some)
    }

    /// The missing pieces in the order to fetch them: rarest first by `availability` (how many
    /// peers hold each piece, indexed by piece; absent entries count as 0), pieces no peer holds
    /// last (only a seed or the origin can serve them), and among equals in index order rotated
    /// to start at `rotation % count` so that nodes given different rotations spread their first
    /// requests over the file.
    pub fn fetch_order(&self, availability: &[u32], rotation: u64) -> Vec<u64> {
        let count = self.layout.count().max(1);
        let start = rotation % count;
        let mut order: Vec<(bool, u32, u64, u64)> = self
            .missing()
            .into_iter()
            .map(|index| {
                let held = usize::try_from(index)
                    .ok()
                    .and_then(|i| availability.get(i).copied())
                    .unwrap_or(0);
                let rotated = (index + count - start) % count;
                (held == 0, held, rotated, index)
            })
            .collect();
        order.sort_unstable();
        order.into_iter().map(|(_, _, _, index)| index).collect()
    }

    /// The final verdict, given the size and sha256 the shell measured over the written file.
    /// Only [`Verified`] lets the shell rename the file into place.
    pub fn finish(&self, actual_size: u64, actual_sha256: &str) -> Result<Verified, PieceError> {
        let missing = self.missing();
        if let Some(first) = missing.first() {
            return Err(PieceError::Incomplete {
                missing: u64::try_from(missing.len()).unwrap_or(u64::MAX),
                count: self.layout.count(),
                first: *first,
            });
        }
        if actual_size != self.layout.size() {
            return Err(PieceError::SizeMismatch {
                expected: self.layout.size(),
                actual: actual_size,
            });
        }
        let actual = actual_sha256
            .strip_prefix("sha256:")
            .unwrap_or(actual_sha256);
        if actual != self.expected_sha256 {
            return Err(PieceError::FileDigestMismatch {
                expected: self.expected_sha256.clone(),
                actual: actual.to_owned(),
            });
        }
        Ok(Verified {
            size: actual_size,
            sha256: self.expected_sha256.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sha256_hex;
    use proptest::prelude::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn piece_length_follows_dragonfly_rule_in_the_issue_window() {
        for (size, expected) in [
            (0, 8 * MIB),
            (1, 8 * MIB),
            (8 * MIB, 8 * MIB),
            (4000 * MIB, 8 * MIB), // size / 500 = 8 MiB exactly
            (4000 * MIB + 500, 16 * MIB),
            (8000 * MIB, 16 * MIB),
            (140 * 1_000_000_000, 16 * MIB),
            (u64::MAX, 16 * MIB),
        ] {
            assert_eq!(piece_length(size), expected, "size {size}");
        }
    }

    #[test]
    fn ranges_table() {
        let layout = Layout::with_piece_length(10, 4).unwrap();
        let ranges: Vec<_> = layout
            .ranges()
            .map(|r| (r.index, r.offset, r.len))
            .collect();
        assert_eq!(ranges, vec![(0, 0, 4), (1, 4, 4), (2, 8, 2)]);
        assert_eq!(layout.range(2).unwrap().http_range(), "bytes=8-9");
        assert_eq!(
            layout.range(3),
            Err(PieceError::OutOfRange { piece: 3, count: 3 })
        );
        assert_eq!(Layout::with_piece_length(0, 4).unwrap().count(), 0);
        assert_eq!(Layout::with_piece_length(8, 4).unwrap().count(), 2);
        assert_eq!(
            Layout::with_piece_length(8, 0),
            Err(PieceError::ZeroPieceLength)
        );
        assert!(matches!(
            Layout::with_piece_length(u64::MAX, 1),
            Err(PieceError::TooManyPieces { .. })
        ));
        assert_eq!(Layout::new(10 * GIB).count(), 640);
    }

    #[test]
    fn check_piece_table() {
        let layout = Layout::with_piece_length(10, 4).unwrap();
        let good = crc32(b"abcd");
        // (piece, bytes, expected crc, verdict)
        type Case<'a> = (u64, &'a [u8], Option<u32>, Result<u32, PieceError>);
        let cases: Vec<Case> = vec![
            (0, b"abcd", None, Ok(good)),
            (0, b"abcd", Some(good), Ok(good)),
            (
                0,
                b"abc",
                Some(good),
                Err(PieceError::Truncated {
                    piece: 0,
                    expected: 4,
                    actual: 3,
                }),
            ),
            (
                2,
                b"xyz",
                None,
                Err(PieceError::Oversized {
                    piece: 2,
                    expected: 2,
                    actual: 3,
                }),
            ),
            (
                1,
                b"abce",
                Some(good),
                Err(PieceError::DigestMismatch {
                    piece: 1,
                    expected: good,
                    actual: crc32(b"abce"),
                }),
            ),
            (
                7,
                b"",
                None,
                Err(PieceError::OutOfRange { piece: 7, count: 3 }),
            ),
        ];
        for (index, bytes, expected, want) in cases {
            assert_eq!(
                layout.check_piece(index, bytes, expected),
                want,
                "piece {index}"
            );
        }
        let message = PieceError::DigestMismatch {
            piece: 3,
            expected: 0xab,
            actual: 0xcd,
        }
        .to_string();
        assert_eq!(
            message,
            "piece 3 digest mismatch: expected crc32:000000ab, got crc32:000000cd"
        );
    }

    fn file(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| u8::try_from(i * 7 % 251).unwrap())
            .collect()
    }

    #[test]
    fn download_verifies_pieces_then_the_file() {
        let bytes = file(10);
        let sha = sha256_hex(&bytes);
        let layout = Layout::with_piece_length(10, 4).unwrap();
        let mut download = Download::new(layout, &format!("sha256:{sha}")).unwrap();
        assert_eq!(download.expected_sha256(), sha);
        assert!(matches!(
            download.finish(10, &sha),
            Err(PieceError::Incomplete {
                missing: 3,
                count: 3,
                first: 0
            })
        ));
        // A corrupt piece stays missing.
        assert!(
            download
                .record(1, b"zzzz", Some(crc32(&bytes[4..8])))
                .is_err()
        );
        assert_eq!(download.missing(), BTreeSet::from([0, 1, 2]));
        for range in layout.ranges() {
            let (start, end) = (range.offset as usize, (range.offset + range.len) as usize);
            assert_eq!(
                download
                    .record(range.index, &bytes[start..end], None)
                    .unwrap(),
                range
            );
        }
        assert!(download.is_complete());
        assert_eq!(download.piece_crc(2), Some(crc32(&bytes[8..10])));
        assert_eq!(
            download.finish(9, &sha),
            Err(PieceError::SizeMismatch {
                expected: 10,
                actual: 9
            })
        );
        let other = sha256_hex(b"other");
        assert_eq!(
            download.finish(10, &other),
            Err(PieceError::FileDigestMismatch {
                expected: sha.clone(),
                actual: other
            })
        );
        assert_eq!(
            download.finish(10, &sha),
            Ok(Verified {
                size: 10,
                sha256: sha
            })
        );
    }

    #[test]
    fn download_refuses_bad_digest_and_out_of_range_resume() {
        let layout = Layout::with_piece_length(10, 4).unwrap();
        for bad in ["", "sha256:", "ABC", &"A".repeat(64), &"0".repeat(63)] {
            assert!(
                matches!(
                    Download::new(layout, bad),
                    Err(PieceError::InvalidSha256 { .. })
                ),
                "{bad}"
            );
        }
        let sha = "0".repeat(64);
        assert!(matches!(
            Download::new(Layout::new(u64::MAX), &sha),
            Err(PieceError::TooManyPieces {
                count: 1_099_511_627_776,
                ..
            })
        ));
        assert_eq!(
            Download::resume(layout, &sha, [(0, 1), (3, 1)]),
            Err(PieceError::OutOfRange { piece: 3, count: 3 })
        );
    }

    #[test]
    fn fetch_order_is_rarest_first_rotated_with_unheld_last() {
        let layout = Layout::with_piece_length(60, 10).unwrap(); // pieces 0..6
        let download = Download::resume(layout, &"0".repeat(64), [(1, 0)]).unwrap();
        // availability: piece 0 held by 2, 2 by 1, 3 by none, 4 by 1, 5 unknown (1 is verified).
        let availability = [2, 9, 1, 0, 1];
        assert_eq!(download.fetch_order(&availability, 0), vec![2, 4, 0, 3, 5]);
        assert_eq!(download.fetch_order(&availability, 3), vec![4, 2, 0, 3, 5]);
        // Without availability, plain rotation.
        assert_eq!(download.fetch_order(&[], 4), vec![4, 5, 0, 2, 3]);
        assert_eq!(download.fetch_order(&[], 10), vec![4, 5, 0, 2, 3]);
    }

    proptest! {
        #[test]
        fn ranges_tile_the_file(size in 0u64..(8 * GIB), explicit in proptest::option::of(1u64..(64 * MIB))) {
            let layout = match explicit {
                Some(len) => match Layout::with_piece_length(size, len) {
                    Ok(layout) => layout,
                    Err(_) => return Ok(()),
                },
                None => Layout::new(size),
            };
            if explicit.is_none() {
                prop_assert!((MIN_PIECE_LENGTH..=MAX_PIECE_LENGTH).contains(&layout.piece_length()));
                prop_assert!(layout.piece_length().is_power_of_two());
            }
            let mut next = 0;
            let mut count = 0;
            for range in layout.ranges() {
                prop_assert_eq!(range.index, count);
                prop_assert_eq!(range.offset, next);
                prop_assert!(range.len > 0 && range.len <= layout.piece_length());
                if range.index + 1 < layout.count() {
                    prop_assert_eq!(range.len, layout.piece_length());
                }
                next = range.offset + range.len;
                count += 1;
            }
            prop_assert_eq!(next, size);
            prop_assert_eq!(count, layout.count());
        }

        #[test]
        fn resumed_download_fetches_exactly_the_missing_pieces(
            len in 0usize..300,
            piece in 1u64..40,
            done in proptest::collection::vec(any::<bool>(), 0..300),
            rotation in any::<u64>(),
            availability in proptest::collection::vec(0u32..4, 0..300),
        ) {
            let bytes = file(len);
            let sha = sha256_hex(&bytes);
            let layout = Layout::with_piece_length(len as u64, piece).unwrap();
            let slice = |r: PieceRange| &bytes[r.offset as usize..(r.offset + r.len) as usize];
            let recorded: Vec<(u64, u32)> = layout
                .ranges()
                .filter(|r| done.get(r.index as usize).copied().unwrap_or(false))
                .map(|r| (r.index, crc32(slice(r))))
                .collect();
            let mut download = Download::resume(layout, &sha, recorded.clone()).unwrap();
            prop_assert_eq!(download.verified().collect::<Vec<_>>(), recorded.clone());
            let order = download.fetch_order(&availability, rotation);
            let expected: BTreeSet<u64> =
                (0..layout.count()).filter(|i| !recorded.iter().any(|(r, _)| r == i)).collect();
            prop_assert_eq!(order.len(), expected.len());
            prop_assert_eq!(order.iter().copied().collect::<BTreeSet<_>>(), expected);
            for index in order {
                let range = layout.range(index).unwrap();
                // A truncated copy is refused and changes nothing.
                if range.len > 1 {
                    let short = &slice(range)[..(range.len - 1) as usize];
                    let is_truncated = matches!(
                        download.record(index, short, None),
                        Err(PieceError::Truncated { .. })
                    );
                    prop_assert!(is_truncated);
                }
                let crc = crc32(slice(range));
                download.record(index, slice(range), Some(crc)).unwrap();
            }
            prop_assert!(download.is_complete());
            prop_assert_eq!(download.finish(len as u64, &sha), Ok(Verified { size: len as u64, sha256: sha }));
        }
    }
}
