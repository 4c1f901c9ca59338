//! Dominant resource shares as Kueue's fair sharing computes them
//! (`pkg/cache/scheduler/fair_sharing.go`): per node, what it borrows above its `SubtreeQuota`
//! (optionally with a workload's requests added), per resource name across flavors, over what
//! its parent could lend at most; the largest ratio (×1000) divided by the node's weight. A
//! zero weight makes a borrowing node's share infinite; such nodes compare among themselves by
//! their unweighted ratio.
//!
//! Knows nothing about queues of workloads, the fair-sharing iterator or preemption
//! strategies; they compare the [`Drs`] values it returns.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::amount::Amount;
use crate::resources::{FlavorResource, FlavorResourceQuantities};
use crate::tree::{DEFAULT_FAIR_WEIGHT, NodeId, Tree};

/// A node's dominant resource share (`DRS`).
#[derive(Debug, Clone, PartialEq)]
pub struct Drs {
    fair_weight: f64,
    unweighted_ratio: f64,
    dominant_resource: String,
    borrowing: bool,
    borrowed: Vec<FlavorResource>,
}

impl Drs {
    /// A share below every real one, the start of a search for the largest (`NegativeDRS`).
    pub fn negative() -> Drs {
        Drs {
            fair_weight: DEFAULT_FAIR_WEIGHT,
            unweighted_ratio: -1.0,
            dominant_resource: String::new(),
            borrowing: false,
            borrowed: Vec::new(),
        }
    }

    /// The share of a node that borrows nothing.
    fn zero(fair_weight: f64) -> Drs {
        Drs {
            fair_weight,
            unweighted_ratio: 0.0,
            dominant_resource: String::new(),
            borrowing: false,
            borrowed: Vec::new(),
        }
    }

    /// Whether the unweighted ratio is zero (`IsZero`).
    pub fn is_zero(&self) -> bool {
        self.unweighted_ratio == 0.0
    }

    /// Whether usage exceeds quota on any (flavor, resource) (`IsBorrowing`).
    pub fn is_borrowing(&self) -> bool {
        self.borrowing
    }

    /// Whether the node borrows on a (flavor, resource) with a positive amount in `requested`
    /// (`IsBorrowingOn`).
    pub fn is_borrowing_on(&self, requested: &FlavorResourceQuantities) -> bool {
        self.borrowed
            .iter()
            .any(|key| requested.get(key).cmp_i64(0).is_gt())
    }

    /// The resource with the largest ratio, "" when none.
    pub fn dominant_resource(&self) -> &str {
        &self.dominant_resource
    }

    /// The largest borrowed ×1000 / lendable ratio, before the weight.
    pub fn unweighted_ratio(&self) -> f64 {
        self.unweighted_ratio
    }

    fn is_weight_zero(&self) -> bool {
        self.fair_weight == 0.0
    }

    fn zero_weight_borrows(&self) -> bool {
        self.is_weight_zero() && !self.is_zero()
    }

    /// The ratio over the weight; `+inf` for a zero weight that borrows
    /// (`PreciseWeightedShare`).
    pub fn precise_weighted_share(&self) -> f64 {
        if self.is_zero() {
            return 0.0;
        }
        if self.is_weight_zero() {
            return f64::INFINITY;
        }
        self.unweighted_ratio / self.fair_weight
    }

    /// The precise share as Go's `strconv.FormatFloat(v, 'f', -1, 64)` prints it, `+Inf`
    /// included (`PreciseWeightedShareSerialized`).
    pub fn precise_weighted_share_serialized(&self) -> String {
        let share = self.precise_weighted_share();
        if share == f64::INFINITY {
            "+Inf".to_owned()
        } else if share == f64::NEG_INFINITY {
            "-Inf".to_owned()
        } else {
            share.to_string()
        }
    }

    /// The share rounded up, `i64::MAX` for a zero weight that borrows, with its dominant
    /// resource: `status.fairSharing.weightedShare` (`roundedWeightedShare`).
    pub fn rounded_weighted_share(&self) -> (i64, &str) {
        let share = if self.zero_weight_borrows() {
            i64::MAX
        } else {
            // Saturating float-to-int conversion; shares are finite here.
            self.precise_weighted_share().ceil() as i64
        };
        (share, &self.dominant_resource)
    }
}

/// Orders shares: lower is preferred for admission, higher for preemption (`CompareDRS`).
/// Zero-weight borrowers sort above every other share and among themselves by unweighted ratio.
pub fn compare_drs(a: &Drs, b: &Drs) -> Ordering {
    match (a.zero_weight_borrows(), b.zero_weight_borrows()) {
        (true, true) => go_compare(a.unweighted_ratio, b.unweighted_ratio),
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => go_compare(a.precise_weighted_share(), b.precise_weighted_share()),
    }
}

/// Go's `cmp.Compare` for floats: NaN is less than every number and equal to itself.
fn go_compare(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

impl Tree {
    /// The node's dominant resource share with `workload`'s requests added to its usage
    /// (`dominantResourceShare`); pass no quantities for the node as it is.
    pub fn dominant_resource_share(&self, id: NodeId, workload: &FlavorResourceQuantities) -> Drs {
        let mut drs = Drs::zero(self.fair_weight(id));
        let Some(parent) = self.parent(id) else {
            return drs;
        };
        let mut borrowed: BTreeMap<&str, Amount> = BTreeMap::new();
        for (key, quota) in self.subtree_quota(id).iter() {
            let above = workload.get(key) + self.usage(id).get(key) - quota;
            if above.cmp_i64(0).is_gt() {
                let total = borrowed.entry(key.resource.as_str()).or_default();
                *total = *total + above;
                drs.borrowed.push(key.clone());
            }
        }
        if borrowed.is_empty() {
            return drs;
        }
        drs.borrowing = true;
        let lendable = self.lendable(parent);
        // Resource names in order, so a tie keeps the alphabetically first, as upstream does.
        for (resource, amount) in borrowed {
            let Some(lendable) = lendable.get(resource).filter(|l| l.cmp_i64(0).is_gt()) else {
                continue;
            };
            let ratio = amount.int64() as f64 * 1000.0 / lendable.int64() as f64;
            if ratio > drs.unweighted_ratio {
                drs.unweighted_ratio = ratio;
                drs.dominant_resource = resource.to_owned();
            }
        }
        drs
    }

    /// What the node could lend at most per resource name, summed over flavors: its potential
    /// available capacity for every (flavor, resource) its tree's root knows
    /// (`calculateLendable`).
    pub fn lendable(&self, id: NodeId) -> BTreeMap<String, Amount> {
        let root = self.root(id);
        let mut lendable: BTreeMap<String, Amount> = BTreeMap::new();
        for key in self.subtree_quota(root).keys() {
            let total = lendable.entry(key.resource.clone()).or_default();
            *total = *total + self.potential_available(id, key);
        }
        lendable
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Q, amounts, cluster_queue, cohort, tree};
    use crate::tree::{ClusterQueueSpec, CohortSpec};

    /// (node name, rounded weighted share, dominant resource, borrowing).
    type Want = (&'static str, i64, &'static str, bool);

    struct DrsCase {
        name: &'static str,
        usage: &'static [(&'static str, &'static str, i64)],
        cluster_queue: ClusterQueueSpec,
        lending_cluster_queue: Option<ClusterQueueSpec>,
        cohorts: Vec<CohortSpec>,
        workload: &'static [(&'static str, &'static str, i64)],
        want: Vec<Want>,
    }

    const CPU2_GPU5: &[Q] = &[
        ("default", "cpu", "2", "", ""),
        ("default", "example.com/gpu", "5", "", ""),
    ];
    const CPU8_GPU5: &[Q] = &[
        ("default", "cpu", "8", "", ""),
        ("default", "example.com/gpu", "5", "", ""),
    ];
    const IDLE: &[Want] = &[("lending-cq", 0, "", false), ("test-cohort", 0, "", false)];

    fn weighted(mut cq: ClusterQueueSpec, weight: f64) -> ClusterQueueSpec {
        cq.fair_weight = weight;
        cq
    }

    fn in_test_cohort(name: &str, weight: f64, quotas: &[Q]) -> ClusterQueueSpec {
        weighted(cluster_queue(name, "test-cohort", quotas), weight)
    }

    fn with_lender(
        name: &'static str,
        usage: &'static [(&'static str, &'static str, i64)],
        cq: ClusterQueueSpec,
        lender: ClusterQueueSpec,
        workload: &'static [(&'static str, &'static str, i64)],
        cq_want: (i64, &'static str, bool),
    ) -> DrsCase {
        let mut want = vec![("cq", cq_want.0, cq_want.1, cq_want.2)];
        want.extend_from_slice(IDLE);
        DrsCase {
            name,
            usage,
            cluster_queue: cq,
            lending_cluster_queue: Some(lender),
            cohorts: vec![],
            workload,
            want,
        }
    }

    // Upstream: pkg/cache/scheduler/fair_sharing_test.go, TestDominantResourceShare (16 cases).
    // Each case gives one ClusterQueue's usage, an optional second ClusterQueue lending to the
    // cohort, optional Cohort objects and an optional workload's requests; every node's rounded
    // share, dominant resource and borrowing is checked.
    fn drs_cases() -> Vec<DrsCase> {
        const GPU: &str = "example.com/gpu";
        vec![
            DrsCase {
                name: "no cohort",
                usage: &[("default", "cpu", 1_000), ("default", GPU, 2)],
                cluster_queue: cluster_queue(
                    "cq",
                    "",
                    &[
                        ("default", "cpu", "2000", "", ""),
                        ("default", GPU, "5", "", ""),
                    ],
                ),
                lending_cluster_queue: None,
                cohorts: vec![],
                workload: &[],
                want: vec![("cq", 0, "", false)],
            },
            with_lender(
                "usage below nominal",
                &[("default", "cpu", 1_000), ("default", GPU, 2)],
                in_test_cohort("cq", 1.0, CPU2_GPU5),
                in_test_cohort("lending-cq", 1.0, CPU8_GPU5),
                &[],
                (0, "", false),
            ),
            with_lender(
                "usage above nominal",
                &[("default", "cpu", 3_000), ("default", GPU, 7)],
                in_test_cohort("cq", 1.0, CPU2_GPU5),
                in_test_cohort("lending-cq", 1.0, CPU8_GPU5),
                &[],
                (200, GPU, true), // (7-5)*1000/10
            ),
            with_lender(
                "usage slightly above nominal in a cohort with large quotas",
                &[("default", GPU, 501)],
                in_test_cohort("cq", 1.0, &[("default", GPU, "500", "", "")]),
                in_test_cohort("lending-cq", 300.0, &[("default", GPU, "1000", "", "")]),
                &[],
                (1, GPU, true),
            ),
            with_lender(
                "usage way above nominal in a cohort with large quotas and weights",
                &[("default", GPU, 800)],
                in_test_cohort("cq", 300.0, &[("default", GPU, "500", "", "")]),
                in_test_cohort("lending-cq", 300.0, &[("default", GPU, "1000", "", "")]),
                &[],
                (1, GPU, true),
            ),
            with_lender(
                "one resource above nominal",
                &[("default", "cpu", 3_000), ("default", GPU, 3)],
                in_test_cohort("cq", 1.0, CPU2_GPU5),
                in_test_cohort("lending-cq", 1.0, CPU8_GPU5),
                &[],
                (100, "cpu", true), // (3-2)*1000/10
            ),
            with_lender(
                "usage with workload above nominal",
                &[("default", "cpu", 1_000), ("default", GPU, 2)],
                in_test_cohort("cq", 1.0, CPU2_GPU5),
                in_test_cohort("lending-cq", 1.0, CPU8_GPU5),
                &[("default", "cpu", 4_000), ("default", GPU, 4)],
                (300, "cpu", true), // (1+4-2)*1000/10
            ),
            with_lender(
                "A resource with zero lendable",
                &[("default", "cpu", 1_000), ("default", GPU, 1)],
                in_test_cohort(
                    "cq",
                    1.0,
                    &[
                        ("default", "cpu", "2", "", ""),
                        ("default", GPU, "2", "", "0"),
                    ],
                ),
                in_test_cohort(
                    "lending-cq",
                    1.0,
                    &[
                        ("default", "cpu", "8", "", ""),
                        ("default", GPU, "64", "", "0"),
                    ],
                ),
                &[("default", "cpu", 4_000), ("default", GPU, 4)],
                (300, "cpu", true),
            ),
            with_lender(
                "multiple flavors",
                &[("on-demand", "cpu", 15_000), ("spot", "cpu", 5_000)],
                in_test_cohort(
                    "cq",
                    1.0,
                    &[
                        ("on-demand", "cpu", "20", "", ""),
                        ("spot", "cpu", "80", "", ""),
                    ],
                ),
                in_test_cohort("lending-cq", 1.0, &[("default", "cpu", "100", "", "")]),
                &[("on-demand", "cpu", 10_000)],
                (25, "cpu", true), // ((15+10-20)+0)*1000/200
            ),
            with_lender(
                "above nominal with integer weight",
                &[("default", GPU, 7)],
                in_test_cohort("cq", 2.0, &[("default", GPU, "5", "", "")]),
                in_test_cohort("lending-cq", 1.0, &[("default", GPU, "5", "", "")]),
                &[],
                (100, GPU, true), // ((7-5)*1000/10)/2
            ),
            with_lender(
                "above nominal with decimal weight",
                &[("default", GPU, 7)],
                in_test_cohort("cq", 0.5, &[("default", GPU, "5", "", "")]),
                in_test_cohort("lending-cq", 1.0, &[("default", GPU, "5", "", "")]),
                &[],
                (400, GPU, true), // ((7-5)*1000/10)/(1/2)
            ),
            with_lender(
                "above nominal with zero weight",
                &[("default", GPU, 7)],
                in_test_cohort("cq", 0.0, &[("default", GPU, "5", "", "")]),
                in_test_cohort("lending-cq", 1.0, &[("default", GPU, "10", "", "")]),
                &[],
                (i64::MAX, GPU, true),
            ),
            DrsCase {
                name: "cohort has resource share",
                usage: &[("default", GPU, 10)],
                cluster_queue: cluster_queue(
                    "cq",
                    "child-cohort",
                    &[("default", GPU, "5", "", "")],
                ),
                lending_cluster_queue: None,
                cohorts: vec![
                    CohortSpec {
                        fair_weight: 2.0,
                        ..cohort("child-cohort", "root", &[])
                    },
                    cohort("root", "", &[("default", GPU, "45", "", "")]),
                ],
                workload: &[],
                want: vec![
                    ("cq", 100, GPU, true),          // (5 / 50) * 1000
                    ("child-cohort", 50, GPU, true), // (5 / 50) * 1000 / 2
                    ("root", 0, "", false),
                ],
            },
            DrsCase {
                name: "resource share defined for resources only available at the root cohort",
                usage: &[("default", GPU, 10)],
                cluster_queue: cluster_queue(
                    "cq",
                    "child-cohort",
                    &[("default", GPU, "0", "", "")],
                ),
                lending_cluster_queue: None,
                cohorts: vec![
                    CohortSpec {
                        fair_weight: 2.0,
                        ..cohort("child-cohort", "root", &[])
                    },
                    cohort("root", "", &[("default", GPU, "50", "", "")]),
                ],
                workload: &[],
                want: vec![
                    ("cq", 200, GPU, true),           // (10 / 50) * 1000
                    ("child-cohort", 100, GPU, true), // (10 / 50) * 1000 / 2
                    ("root", 0, "", false),
                ],
            },
            DrsCase {
                name: "resource share affected by borrowing limit",
                usage: &[("default", GPU, 10)],
                cluster_queue: cluster_queue(
                    "cq",
                    "child-cohort",
                    &[("default", GPU, "0", "", "")],
                ),
                lending_cluster_queue: None,
                cohorts: vec![
                    cohort("child-cohort", "root", &[("default", GPU, "0", "10", "")]),
                    cohort("root", "", &[("default", GPU, "50", "", "")]),
                ],
                workload: &[],
                want: vec![
                    ("cq", 1000, GPU, true),          // (10 / 10) * 1000
                    ("child-cohort", 200, GPU, true), // (10 / 50) * 1000
                    ("root", 0, "", false),
                ],
            },
            // 1E CPU is Unlimited, so lendable saturates to Unlimited and the tiny positive
            // ratio rounds up to 1.
            with_lender(
                "borrowing against unlimited lendable capacity (exabyte-scale quota)",
                &[("default", "cpu", 1_000)],
                in_test_cohort("cq", 1.0, &[("default", "cpu", "0", "", "")]),
                in_test_cohort("lending-cq", 1.0, &[("default", "cpu", "1E", "", "")]),
                &[],
                (1, "cpu", true),
            ),
        ]
    }

    #[test]
    fn dominant_resource_share() {
        for case in drs_cases() {
            let mut cluster_queues = vec![case.cluster_queue];
            cluster_queues.extend(case.lending_cluster_queue);
            let mut tree = tree(case.cohorts, cluster_queues);
            let cq = tree.cluster_queue("cq").expect("cq");
            // One workload per (flavor, resource), as upstream admits them.
            for (flavor, resource, value) in case.usage {
                tree.add_usages(cq, &amounts(&[(flavor, resource, *value)]));
            }
            let workload = amounts(case.workload);
            let mut got: Vec<(String, i64, String, bool)> = tree
                .cluster_queues()
                .chain(tree.cohorts())
                .map(|(name, id)| {
                    let drs = tree.dominant_resource_share(id, &workload);
                    let (share, resource) = drs.rounded_weighted_share();
                    (
                        name.to_owned(),
                        share,
                        resource.to_owned(),
                        drs.is_borrowing(),
                    )
                })
                .collect();
            got.sort();
            let mut want: Vec<(String, i64, String, bool)> = case
                .want
                .iter()
                .map(|(name, share, resource, borrowing)| {
                    (
                        (*name).to_owned(),
                        *share,
                        (*resource).to_owned(),
                        *borrowing,
                    )
                })
                .collect();
            want.sort();
            assert_eq!(got, want, "{}", case.name);
        }
    }

    // Upstream: pkg/cache/scheduler/fair_sharing_test.go, TestIsBorrowingOn (5 cases).
    #[test]
    fn is_borrowing_on() {
        type Amounts = &'static [(&'static str, &'static str, i64)];
        let cases: &[(&str, Amounts, Option<Amounts>, bool, bool)] = &[
            (
                "borrows on requested flavor",
                &[("default", "cpu", 3_000)],
                Some(&[("default", "cpu", 1_000)]),
                true,
                true,
            ),
            (
                "borrows on unrequested flavor only",
                &[("default", "cpu", 1_000), ("default", "example.com/gpu", 7)],
                Some(&[("default", "cpu", 1_000)]),
                false,
                true,
            ),
            (
                "borrows on both, requests one",
                &[("default", "cpu", 3_000), ("default", "example.com/gpu", 7)],
                Some(&[("default", "example.com/gpu", 1)]),
                true,
                true,
            ),
            (
                "no borrowing",
                &[("default", "cpu", 1_000), ("default", "example.com/gpu", 2)],
                Some(&[("default", "cpu", 1_000)]),
                false,
                false,
            ),
            (
                "nil requestedFRs",
                &[("default", "cpu", 3_000)],
                None,
                false,
                true,
            ),
        ];
        for (name, usage, requested, want_on_requested, want_borrowing) in cases {
            let mut tree = tree(
                vec![],
                vec![
                    cluster_queue("cq", "cohort", CPU2_GPU5),
                    cluster_queue("lending-cq", "cohort", CPU8_GPU5),
                ],
            );
            let cq = tree.cluster_queue("cq").expect("cq");
            for (flavor, resource, value) in *usage {
                tree.add_usages(cq, &amounts(&[(flavor, resource, *value)]));
            }
            let drs = tree.dominant_resource_share(cq, &FlavorResourceQuantities::new());
            assert_eq!(drs.is_borrowing(), *want_borrowing, "{name}");
            let requested = requested.map(amounts).unwrap_or_default();
            assert_eq!(
                drs.is_borrowing_on(&requested),
                *want_on_requested,
                "{name}"
            );
        }
    }

    fn drs(fair_weight: f64, unweighted_ratio: f64) -> Drs {
        Drs {
            fair_weight,
            unweighted_ratio,
            ..Drs::zero(fair_weight)
        }
    }

    // Upstream: pkg/cache/scheduler/fair_sharing_test.go, TestPreciseWeightedShareSerialized
    // (4 cases).
    #[test]
    fn precise_weighted_share_serialized() {
        let cases: &[(&str, Drs, &str)] = &[
            ("zero weight returning Inf", drs(0.0, 100.0), "+Inf"),
            ("zero unweighted ratio returns 0", drs(1.0, 0.0), "0"),
            ("regular integer division", drs(2.0, 400.0), "200"),
            ("decimal division", drs(4.0, 10.0), "2.5"),
        ];
        for (name, drs, want) in cases {
            assert_eq!(drs.precise_weighted_share_serialized(), *want, "{name}");
        }
    }

    // Upstream: pkg/cache/scheduler/resource_node_test.go, TestCohortLendable (1 case).
    #[test]
    fn cohort_lendable() {
        let tree = tree(
            vec![],
            vec![
                cluster_queue(
                    "cq1",
                    "test-cohort",
                    &[
                        ("default", "cpu", "8", "", "8"),
                        ("default", "example.com/gpu", "3", "", "3"),
                    ],
                ),
                cluster_queue("cq2", "test-cohort", &[("default", "cpu", "2", "", "2")]),
            ],
        );
        let lendable = tree.lendable(tree.cohort("test-cohort").expect("cohort"));
        let want = BTreeMap::from([
            ("cpu".to_owned(), Amount::new(10_000)),
            ("example.com/gpu".to_owned(), Amount::new(3)),
        ]);
        assert_eq!(lendable, want);
    }

    // Not an upstream table: CompareDRS orders zero-weight borrowers last, among themselves by
    // unweighted ratio, and everything else by weighted share.
    #[test]
    fn compare_orders_by_weighted_share() {
        let cases: &[(&str, Drs, Drs, Ordering)] = &[
            (
                "weighted share decides",
                drs(2.0, 300.0),
                drs(1.0, 200.0),
                Ordering::Less,
            ),
            (
                "equal shares",
                drs(2.0, 400.0),
                drs(1.0, 200.0),
                Ordering::Equal,
            ),
            (
                "zero weight borrower is greater",
                drs(0.0, 1.0),
                drs(1.0, 1e9),
                Ordering::Greater,
            ),
            (
                "zero weight borrowers by ratio",
                drs(0.0, 5.0),
                drs(0.0, 7.0),
                Ordering::Less,
            ),
            (
                "zero weight without borrowing is zero",
                drs(0.0, 0.0),
                drs(1.0, 1.0),
                Ordering::Less,
            ),
            (
                "negative is below zero",
                Drs::negative(),
                drs(1.0, 0.0),
                Ordering::Less,
            ),
        ];
        for (name, a, b, want) in cases {
            assert_eq!(compare_drs(a, b), *want, "{name}");
            assert_eq!(compare_drs(b, a), want.reverse(), "{name} reversed");
        }
    }
}
