//! Dotted version numbers as clusters report them: Kubernetes (`v1.34.2-eks-1a2b`), NVIDIA drivers
//! (`580.105.08`), CUDA (`12.8`), GPU Operator CalVer (`25.10.1`) and Kueue (`v0.14.2`).
//!
//! Owns parsing and ordering only; it does not know which component a version belongs to.

use std::cmp::Ordering;
use std::fmt;

/// A `major.minor[.patch]` version. Ordering ignores `raw`; a missing patch sorts before `.0`.
#[derive(Debug, Clone)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: Option<u32>,
    /// The text it was parsed from, kept for messages.
    pub raw: String,
}

/// Why a version string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid version {text:?}: expected MAJOR.MINOR[.PATCH], optionally with a leading v")]
pub struct VersionError {
    pub text: String,
}

impl Version {
    /// Parses `v1.34.2`, `1.34`, `580.105.08`, `v1.34.2+k3s1`, `1.30.4-eks-a737599`.
    /// A bare major (`580`) is accepted as `580.0` only by [`Version::parse_major_ok`].
    pub fn parse(text: &str) -> Result<Version, VersionError> {
        Self::parse_inner(text, false)
    }

    /// Like [`Version::parse`] but a lone major number (a driver branch, `580`) is allowed.
    pub fn parse_major_ok(text: &str) -> Result<Version, VersionError> {
        Self::parse_inner(text, true)
    }

    fn parse_inner(text: &str, major_ok: bool) -> Result<Version, VersionError> {
        let err = || VersionError {
            text: text.to_owned(),
        };
        let trimmed = text.trim();
        let body = trimmed.strip_prefix('v').unwrap_or(trimmed);
        // Drop build metadata and pre-release/distribution suffixes.
        let core = body.split(['-', '+']).next().unwrap_or_default();
        let mut parts = core.split('.');
        let number = |p: Option<&str>| -> Result<Option<u32>, VersionError> {
            match p {
                None => Ok(None),
                Some(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
                    s.parse().map(Some).map_err(|_| err())
                }
                Some(_) => Err(err()),
            }
        };
        let major = number(parts.next())?.ok_or_else(err)?;
        let minor = match number(parts.next())? {
            Some(minor) => minor,
            None if major_ok => 0,
            None => return Err(err()),
        };
        let patch = number(parts.next())?;
        if parts.next().is_some() {
            return Err(err());
        }
        Ok(Version {
            major,
            minor,
            patch,
            raw: trimmed.to_owned(),
        })
    }

    /// The `major.minor` pair, e.g. a Kubernetes minor release or a driver's CUDA version.
    pub fn minor_pair(&self) -> (u32, u32) {
        (self.major, self.minor)
    }

    /// How many minors `self` is behind `other` within the same major (negative when ahead).
    pub fn minors_behind(&self, other: &Version) -> i64 {
        if self.major != other.major {
            return (i64::from(other.major) - i64::from(self.major)) * 1000;
        }
        i64::from(other.minor) - i64::from(self.minor)
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Version {}
impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch).cmp(&(other.major, other.minor, other.patch))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl<'de> serde::Deserialize<'de> for Version {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Version::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_clusters_report() {
        type Parts = Option<(u32, u32, Option<u32>)>;
        let cases: &[(&str, Parts)] = &[
            ("v1.34.2", Some((1, 34, Some(2)))),
            ("1.30.4-eks-a737599", Some((1, 30, Some(4)))),
            ("v1.33.1+k3s1", Some((1, 33, Some(1)))),
            ("580.105.08", Some((580, 105, Some(8)))),
            ("12.8", Some((12, 8, None))),
            ("v0.14.2", Some((0, 14, Some(2)))),
            ("580", None),
            ("", None),
            ("1.x", None),
            ("1.2.3.4", None),
            ("v", None),
            ("1..2", None),
        ];
        for (text, want) in cases {
            let got = Version::parse(text)
                .ok()
                .map(|v| (v.major, v.minor, v.patch));
            assert_eq!(&got, want, "{text}");
        }
        assert_eq!(
            Version::parse_major_ok("580").ok().map(|v| v.minor_pair()),
            Some((580, 0))
        );
    }

    #[test]
    fn orders_numerically() {
        let v = |s| Version::parse(s).expect("test version");
        assert!(v("1.9") < v("1.10"));
        assert!(v("580.82.07") < v("580.105.08"));
        assert_eq!(v("v1.34.0"), v("1.34.0"));
        assert_eq!(v("1.30").minors_behind(&v("1.34")), 4);
        assert_eq!(v("1.35").minors_behind(&v("1.34")), -1);
    }
}
