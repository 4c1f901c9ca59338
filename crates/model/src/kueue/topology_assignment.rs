//! A TopologyAssignment's domains with their pod counts (v1beta1's `domains`, Kueue's internal
//! `tas.TopologyAssignment`) and v1beta2's compressed `slices`, both ways: `tas.V1Beta2From`
//! encodes one maximally compacted slice (without the hostname-prefix feature gate), and
//! `tas.InternalSeqFrom` expands slices back into domains.
//!
//! Pure data; knows nothing about how assignments are found or where they are stored.

use serde::{Deserialize, Serialize};

use super::workload::{
    TopologyAssignment, TopologyAssignmentSlice, TopologyAssignmentSliceLevelIndividualValues,
    TopologyAssignmentSliceLevelValues, TopologyAssignmentSlicePodCounts,
};

/// One domain: the values of the assignment's levels and its pods (v1beta1's
/// `TopologyDomainAssignment`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologyDomain {
    /// One value per level.
    pub values: Vec<String>,
    /// Pods in the domain.
    pub count: i32,
}

/// The v1beta2 assignment of `levels` and `domains`.
pub fn assignment_from_domains(
    levels: &[String],
    domains: &[TopologyDomain],
) -> TopologyAssignment {
    TopologyAssignment {
        levels: levels.to_vec(),
        slices: slices_from_domains(levels.len(), domains),
    }
}

/// `domains` as slices: none for no domains, else one slice with each level's values
/// universal or as prefix + roots + suffix, and the counts universal or individual
/// (`compactSliceEncoding`).
pub fn slices_from_domains(
    levels: usize,
    domains: &[TopologyDomain],
) -> Vec<TopologyAssignmentSlice> {
    let Some(first) = domains.first() else {
        return Vec::new();
    };
    let values_per_level = (0..levels)
        .map(|level| {
            let values: Vec<&str> = domains
                .iter()
                .map(|d| d.values.get(level).map_or("", String::as_str))
                .collect();
            compact_values(&values)
        })
        .collect();
    let pod_counts = if domains.iter().all(|d| d.count == first.count) {
        TopologyAssignmentSlicePodCounts {
            universal: Some(first.count),
            individual: None,
        }
    } else {
        TopologyAssignmentSlicePodCounts {
            universal: None,
            individual: Some(domains.iter().map(|d| d.count).collect()),
        }
    };
    vec![TopologyAssignmentSlice {
        domain_count: i32::try_from(domains.len()).unwrap_or(i32::MAX),
        values_per_level,
        pod_counts,
    }]
}

/// One level's values: `universal` when all are equal, else the longest common prefix and
/// suffix (not overlapping in the shortest value) around each value's root
/// (`fillSingleCompactSliceValues`).
fn compact_values(values: &[&str]) -> TopologyAssignmentSliceLevelValues {
    let first = values.first().copied().unwrap_or_default().as_bytes();
    let mut prefix = first.len();
    let mut suffix = first.len();
    let (mut min_len, mut max_len) = (first.len(), first.len());
    for value in values.iter().skip(1) {
        let bytes = value.as_bytes();
        min_len = min_len.min(bytes.len());
        max_len = max_len.max(bytes.len());
        prefix = first[..prefix.min(bytes.len())]
            .iter()
            .zip(bytes)
            .take_while(|(a, b)| a == b)
            .count();
        suffix = first[first.len() - suffix.min(bytes.len())..]
            .iter()
            .rev()
            .zip(bytes.iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
    }
    let head = values.first().copied().unwrap_or_default();
    if prefix == max_len {
        return TopologyAssignmentSliceLevelValues {
            universal: Some(head.to_owned()),
            individual: None,
        };
    }
    if prefix + suffix > min_len {
        prefix = min_len - suffix;
    }
    let part = |text: Option<&str>| text.filter(|t| !t.is_empty()).map(str::to_owned);
    TopologyAssignmentSliceLevelValues {
        universal: None,
        individual: Some(TopologyAssignmentSliceLevelIndividualValues {
            prefix: part(head.get(..prefix)),
            suffix: part(head.get(head.len() - suffix..)),
            roots: values
                .iter()
                .map(|v| {
                    v.get(prefix..v.len() - suffix)
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect(),
        }),
    }
}

/// The domains of `assignment`'s slices, in order (`InternalSeqFrom`).
pub fn domains_of(assignment: &TopologyAssignment) -> Vec<TopologyDomain> {
    domains_from_slices(assignment.levels.len(), &assignment.slices)
}

/// Slices expanded to domains with `levels` values each.
pub fn domains_from_slices(
    levels: usize,
    slices: &[TopologyAssignmentSlice],
) -> Vec<TopologyDomain> {
    let mut domains = Vec::new();
    for slice in slices {
        let count = usize::try_from(slice.domain_count).unwrap_or_default();
        for index in 0..count {
            let values = (0..levels)
                .map(|level| {
                    slice
                        .values_per_level
                        .get(level)
                        .map_or_else(String::new, |values| value_at_index(values, index))
                })
                .collect();
            let pods = slice.pod_counts.universal.unwrap_or_else(|| {
                slice
                    .pod_counts
                    .individual
                    .as_ref()
                    .and_then(|counts| counts.get(index).copied())
                    .unwrap_or_default()
            });
            domains.push(TopologyDomain {
                values,
                count: pods,
            });
        }
    }
    domains
}

fn value_at_index(level: &TopologyAssignmentSliceLevelValues, index: usize) -> String {
    if let Some(universal) = &level.universal {
        return universal.clone();
    }
    let Some(individual) = &level.individual else {
        return String::new();
    };
    format!(
        "{}{}{}",
        individual.prefix.as_deref().unwrap_or_default(),
        individual.roots.get(index).map_or("", String::as_str),
        individual.suffix.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domain(values: &[&str], count: i32) -> TopologyDomain {
        TopologyDomain {
            values: values.iter().map(|v| (*v).to_owned()).collect(),
            count,
        }
    }

    #[test]
    fn domains_round_trip_through_compact_slices() {
        let levels = ["rack".to_owned(), "kubernetes.io/hostname".to_owned()];
        // (case, domains, wanted universal rack value, wanted prefix of hosts, universal count)
        type Case = (
            &'static str,
            Vec<TopologyDomain>,
            Option<&'static str>,
            Option<&'static str>,
            Option<i32>,
        );
        let cases: Vec<Case> = vec![
            (
                "one rack, hosts share a prefix, equal counts",
                vec![domain(&["r1", "node-1"], 4), domain(&["r1", "node-2"], 4)],
                Some("r1"),
                Some("node-"),
                Some(4),
            ),
            (
                "two racks, individual counts",
                vec![domain(&["r1", "a"], 1), domain(&["r2", "b"], 3)],
                None,
                None,
                None,
            ),
        ];
        for (name, domains, rack, host_prefix, count) in cases {
            let assignment = assignment_from_domains(&levels, &domains);
            let slice = &assignment.slices[0];
            assert_eq!(
                slice.values_per_level[0].universal.as_deref(),
                rack,
                "{name}"
            );
            assert_eq!(
                slice.values_per_level[1]
                    .individual
                    .as_ref()
                    .and_then(|i| i.prefix.as_deref()),
                host_prefix,
                "{name}"
            );
            assert_eq!(slice.pod_counts.universal, count, "{name}");
            assert_eq!(domains_of(&assignment), domains, "{name}");
        }
        assert!(assignment_from_domains(&levels, &[]).slices.is_empty());
    }
}
