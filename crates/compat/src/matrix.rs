//! The bundled compatibility matrix (`data/matrix.yaml`): GPU Operator releases, driver branches
//! and their CUDA ceiling, CUDA minor-version compatibility, GPU architectures' minimum driver
//! branches, Kubernetes version skew, DRA API availability and Kueue releases.
//!
//! Owns the data's shape, its validation (every row cites a source) and lookups by version. It
//! does not know about clusters or rules; `check` applies the rows to cluster facts.

use std::sync::OnceLock;

use serde::Deserialize;

use crate::version::Version;

/// The matrix as shipped with this crate.
pub const BUNDLED: &str = include_str!("../data/matrix.yaml");

/// Where a row's values come from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub url: String,
    /// The day the source was read, `YYYY-MM-DD`.
    pub date: String,
    /// False when the values came from secondary notes, not checked against `url`.
    pub verified: bool,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}", self.url, self.date)?;
        if !self.verified {
            f.write_str(", unverified")?;
        }
        f.write_str(")")
    }
}

/// An inclusive range of Kubernetes minors; `max` absent means no known upper bound.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinorRange {
    pub min: Version,
    #[serde(default)]
    pub max: Option<Version>,
}

impl MinorRange {
    pub fn contains(&self, v: &Version) -> bool {
        let m = v.minor_pair();
        m >= self.min.minor_pair() && self.max.as_ref().is_none_or(|max| m <= max.minor_pair())
    }
}

impl std::fmt::Display for MinorRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.max {
            Some(max) => write!(f, "{}-{}", self.min, max),
            None => write!(f, ">={}", self.min),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorRow {
    /// A release of the `YY.MM` line this row stands for (`25.10.1` covers 25.10.x).
    pub release: Version,
    pub kubernetes: MinorRange,
    #[serde(default)]
    pub default_driver: Option<Version>,
    pub drivers: Vec<Version>,
    #[serde(default)]
    pub toolkit: Option<String>,
    #[serde(default)]
    pub device_plugin: Option<String>,
    #[serde(default)]
    pub dcgm_exporter: Option<String>,
    pub source: Source,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriverBranchRow {
    pub branch: u32,
    pub max_cuda: Version,
    pub source: Source,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinorCompatRow {
    pub cuda_major: u32,
    pub min_branch: u32,
    pub source: Source,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchitectureRow {
    pub architecture: String,
    /// `nvidia.com/gpu.family` values.
    pub families: Vec<String>,
    /// Substrings of `nvidia.com/gpu.product`.
    pub products: Vec<String>,
    pub min_branch: u32,
    /// The lowest release within `min_branch`, where known.
    #[serde(default)]
    pub min_driver: Option<Version>,
    pub source: Source,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkewRow {
    /// The kubelet version from which this row applies (the policy keys the limit on the kubelet).
    pub kubelet_since: Version,
    /// How many minors a kubelet may be older than the API server (never newer).
    pub kubelet_older: u32,
    /// How many minors kubectl may differ from the API server, either way.
    pub kubectl_skew: u32,
    pub source: Source,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DraApiRow {
    pub api_version: String,
    pub from: Version,
    #[serde(default)]
    pub until: Option<Version>,
    #[serde(default)]
    pub note: Option<String>,
    pub source: Source,
}

impl DraApiRow {
    pub fn served(&self) -> MinorRange {
        MinorRange {
            min: self.from.clone(),
            max: self.until.clone(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRow {
    /// The first minor release this row applies to; it holds until the next row.
    pub release: Version,
    pub kubernetes: MinorRange,
    pub source: Source,
}

/// The whole matrix.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    pub gpu_operator: Vec<OperatorRow>,
    pub driver_branches: Vec<DriverBranchRow>,
    pub minor_version_compatibility: Vec<MinorCompatRow>,
    pub architectures: Vec<ArchitectureRow>,
    pub skew: Vec<SkewRow>,
    pub dra_apis: Vec<DraApiRow>,
    pub kueue: Vec<ReleaseRow>,
    /// NVIDIA's DRA driver (`kubernetes-sigs/dra-driver-nvidia-gpu`) releases → Kubernetes.
    pub dra_driver: Vec<ReleaseRow>,
}

/// Why a matrix could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatrixError {
    /// YAML syntax, an unknown field, a missing field or a malformed version; the message
    /// carries the line and column.
    #[error("matrix: {0}")]
    Syntax(String),
    #[error("matrix: {section}[{index}].{field}: {message}")]
    Invalid {
        section: &'static str,
        index: usize,
        field: &'static str,
        message: String,
    },
}

impl Matrix {
    /// Parses and validates a matrix document.
    pub fn parse(text: &str) -> Result<Matrix, MatrixError> {
        let matrix: Matrix =
            serde_saphyr::from_str(text).map_err(|e| MatrixError::Syntax(e.to_string()))?;
        matrix.validate()?;
        Ok(matrix)
    }

    /// The bundled matrix, parsed once. The `tests` module proves it parses.
    #[allow(clippy::expect_used)]
    pub fn bundled() -> &'static Matrix {
        static MATRIX: OnceLock<Matrix> = OnceLock::new();
        MATRIX.get_or_init(|| Matrix::parse(BUNDLED).expect("the bundled matrix is valid"))
    }

    /// Every row's source, with the section it belongs to.
    pub fn sources(&self) -> Vec<(&'static str, usize, &Source)> {
        fn rows<'a, T>(
            section: &'static str,
            rows: &'a [T],
            source: fn(&T) -> &Source,
        ) -> impl Iterator<Item = (&'static str, usize, &'a Source)> {
            rows.iter()
                .enumerate()
                .map(move |(i, r)| (section, i, source(r)))
        }
        rows("gpu_operator", &self.gpu_operator, |r| &r.source)
            .chain(rows("driver_branches", &self.driver_branches, |r| {
                &r.source
            }))
            .chain(rows(
                "minor_version_compatibility",
                &self.minor_version_compatibility,
                |r| &r.source,
            ))
            .chain(rows("architectures", &self.architectures, |r| &r.source))
            .chain(rows("skew", &self.skew, |r| &r.source))
            .chain(rows("dra_apis", &self.dra_apis, |r| &r.source))
            .chain(rows("kueue", &self.kueue, |r| &r.source))
            .chain(rows("dra_driver", &self.dra_driver, |r| &r.source))
            .collect()
    }

    fn validate(&self) -> Result<(), MatrixError> {
        let invalid = |section, index, field, message: &str| MatrixError::Invalid {
            section,
            index,
            field,
            message: message.to_owned(),
        };
        for (section, index, source) in self.sources() {
            if !source.url.starts_with("https://") {
                return Err(invalid(
                    section,
                    index,
                    "source.url",
                    "must be an https:// URL",
                ));
            }
            if !is_date(&source.date) {
                return Err(invalid(section, index, "source.date", "must be YYYY-MM-DD"));
            }
        }
        for (index, row) in self.gpu_operator.iter().enumerate() {
            if row.drivers.is_empty() {
                return Err(invalid(
                    "gpu_operator",
                    index,
                    "drivers",
                    "must not be empty",
                ));
            }
        }
        for (index, row) in self.architectures.iter().enumerate() {
            if row.families.is_empty() && row.products.is_empty() {
                return Err(invalid(
                    "architectures",
                    index,
                    "families",
                    "families or products",
                ));
            }
        }
        Ok(())
    }

    /// The operator row for the `YY.MM` line of `release`.
    pub fn operator(&self, release: &Version) -> Option<&OperatorRow> {
        self.gpu_operator
            .iter()
            .find(|r| r.release.minor_pair() == release.minor_pair())
    }

    /// The CUDA ceiling of a driver branch: its row, or the nearest lower branch's.
    pub fn driver_branch(&self, branch: u32) -> Option<&DriverBranchRow> {
        self.driver_branches
            .iter()
            .filter(|r| r.branch <= branch)
            .max_by_key(|r| r.branch)
    }

    /// The lowest driver an architecture row accepts, for messages.
    pub fn min_driver_text(row: &ArchitectureRow) -> String {
        row.min_driver.as_ref().map_or_else(
            || format!("branch >= {}", row.min_branch),
            |d| format!(">= {d}"),
        )
    }

    pub fn minor_compat(&self, cuda_major: u32) -> Option<&MinorCompatRow> {
        self.minor_version_compatibility
            .iter()
            .find(|r| r.cuda_major == cuda_major)
    }

    /// The architecture by `nvidia.com/gpu.family`, else by the longest product substring.
    pub fn architecture(
        &self,
        family: Option<&str>,
        product: Option<&str>,
    ) -> Option<&ArchitectureRow> {
        if let Some(family) = family {
            let found = self
                .architectures
                .iter()
                .find(|r| r.families.iter().any(|f| f.eq_ignore_ascii_case(family)));
            if found.is_some() {
                return found;
            }
        }
        let product = product?.to_ascii_uppercase();
        self.architectures
            .iter()
            .flat_map(|r| r.products.iter().map(move |p| (r, p)))
            .filter(|(_, p)| product.contains(&p.to_ascii_uppercase()))
            .max_by_key(|(_, p)| p.len())
            .map(|(r, _)| r)
    }

    /// The skew row in force for a kubelet version.
    pub fn skew(&self, kubelet: &Version) -> Option<&SkewRow> {
        self.skew
            .iter()
            .filter(|r| r.kubelet_since.minor_pair() <= kubelet.minor_pair())
            .max_by_key(|r| r.kubelet_since.minor_pair())
    }

    pub fn dra_api(&self, api_version: &str) -> Option<&DraApiRow> {
        self.dra_apis.iter().find(|r| r.api_version == api_version)
    }

    /// The Kueue row for a release: the last row at or below its minor.
    pub fn kueue(&self, release: &Version) -> Option<&ReleaseRow> {
        release_row(&self.kueue, release)
    }

    /// The DRA driver row for a release: the last row at or below its minor.
    pub fn dra_driver(&self, release: &Version) -> Option<&ReleaseRow> {
        release_row(&self.dra_driver, release)
    }
}

fn release_row<'a>(rows: &'a [ReleaseRow], release: &Version) -> Option<&'a ReleaseRow> {
    rows.iter()
        .filter(|r| r.release.minor_pair() <= release.minor_pair())
        .max_by_key(|r| r.release.minor_pair())
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_matrix_parses_and_every_row_cites_a_source() {
        let m = Matrix::parse(BUNDLED).expect("bundled matrix");
        let sources = m.sources();
        let rows = m.gpu_operator.len()
            + m.driver_branches.len()
            + m.minor_version_compatibility.len()
            + m.architectures.len()
            + m.skew.len()
            + m.dra_apis.len()
            + m.kueue.len()
            + m.dra_driver.len();
        assert_eq!(sources.len(), rows);
        for (section, index, s) in sources {
            assert!(s.url.starts_with("https://"), "{section}[{index}]");
            assert!(is_date(&s.date), "{section}[{index}]");
        }
        let releases: Vec<String> = m
            .gpu_operator
            .iter()
            .map(|r| r.release.to_string())
            .collect();
        assert_eq!(
            releases,
            ["24.9.2", "25.3.3", "25.10.1", "26.3.3", "26.7.0"]
        );
    }

    #[test]
    fn lookups() {
        let m = Matrix::bundled();
        let v = |s| Version::parse(s).expect("test version");
        let max_cuda = |b| m.driver_branch(b).map(|r| r.max_cuda.to_string());
        let cases: &[(u32, Option<&str>)] = &[
            (535, Some("12.2")),
            (550, Some("12.4")),
            (560, Some("12.6")),
            (565, Some("12.7")),
            (570, Some("12.8")),
            (575, Some("12.9")),
            (580, Some("13.0")),
            (590, Some("13.1")),
            (545, Some("12.2")),
            (470, None),
        ];
        for (branch, want) in cases {
            assert_eq!(max_cuda(*branch).as_deref(), *want, "branch {branch}");
        }
        let arch = |f, p| m.architecture(f, p).map(|r| r.architecture.as_str());
        assert_eq!(arch(Some("hopper"), None), Some("Hopper"));
        assert_eq!(arch(None, Some("NVIDIA-H200")), Some("Hopper"));
        assert_eq!(arch(None, Some("NVIDIA-B200")), Some("Blackwell"));
        assert_eq!(arch(None, Some("NVIDIA-L40S")), Some("Ada Lovelace"));
        assert_eq!(arch(Some("unknown"), Some("Tesla-T4")), None);
        assert_eq!(
            m.operator(&v("25.10.0"))
                .map(|r| r.release.to_string())
                .as_deref(),
            Some("25.10.1")
        );
        assert!(m.operator(&v("24.6.0")).is_none());
        assert_eq!(m.skew(&v("1.24.17")).map(|r| r.kubelet_older), Some(2));
        assert_eq!(m.skew(&v("1.25.0")).map(|r| r.kubelet_older), Some(3));
        assert_eq!(
            m.kueue(&v("0.14.2"))
                .map(|r| r.release.to_string())
                .as_deref(),
            Some("0.9")
        );
    }

    #[test]
    fn bad_documents_are_refused_with_the_place() {
        let unknown = BUNDLED.replacen(
            "    toolkit: \"1.17.4\"",
            "    toolkit: \"1.17.4\"\n    colour: red",
            1,
        );
        let err = Matrix::parse(&unknown).expect_err("unknown field");
        assert!(err.to_string().contains("colour"), "{err}");
        assert!(err.to_string().contains("line"), "{err}");

        let bad_version = BUNDLED.replacen("\"570.86.15\"", "\"570.x\"", 1);
        let err = Matrix::parse(&bad_version).expect_err("bad version");
        assert!(err.to_string().contains("570.x"), "{err}");

        let no_https = BUNDLED.replacen(
            "url: \"https://kubernetes.io/releases/version-skew-policy/#kubelet\"",
            "url: \"kubernetes.io\"",
            1,
        );
        assert_eq!(
            Matrix::parse(&no_https).expect_err("plain url"),
            MatrixError::Invalid {
                section: "skew",
                index: 0,
                field: "source.url",
                message: "must be an https:// URL".into()
            }
        );
    }
}
