// Upstream: pkg/scheduler/scheduler_test.go, TestSchedule, the cases that need the real
// preemptor (see cycle_tests.rs for the list): the same inputs, one cycle with
// `KueuePreemption`, and the same admissions, preempted Workloads with their reasons (and
// messages where upstream names the preemptor), QuotaReserved conditions and leftovers.

use super::*;
use crate::cluster_queue::{BorrowWithinCohort, FungibilityPolicy, FungibilityPreference};

fn policy(within: PreemptionPolicy, reclaim: PreemptionPolicy) -> ClusterQueuePreemption {
    ClusterQueuePreemption {
        within_cluster_queue: within,
        reclaim_within_cohort: reclaim,
        borrow_within_cohort: None,
    }
}

fn borrow_within(policy: PreemptionPolicy, threshold: Option<i32>) -> Option<BorrowWithinCohort> {
    Some(BorrowWithinCohort {
        policy,
        max_priority_threshold: threshold,
    })
}

impl Cq {
    fn preempting(mut self, preemption: ClusterQueuePreemption) -> Cq {
        self.preemption = preemption;
        self
    }

    fn when_can_preempt(mut self, policy: FungibilityPolicy) -> Cq {
        self.fungibility.when_can_preempt = policy;
        self
    }

    /// `whenCanBorrow` and `whenCanPreempt` TryNextFlavor.
    fn when_can_borrow_try_next(mut self) -> Cq {
        self.fungibility.when_can_borrow = FungibilityPolicy::TryNextFlavor;
        self.when_can_preempt(FungibilityPolicy::TryNextFlavor)
    }

    fn weight(mut self, weight: &'static str) -> Cq {
        self.weight = Some(weight);
        self
    }

    fn preference(mut self, preference: FungibilityPreference) -> Cq {
        self.fungibility.preference = Some(preference);
        self
    }
}

impl Wl {
    /// `Creation(now + seconds)`: the harness's `now` is its creation base plus 1,000,000 s.
    fn at(self, seconds: i64) -> Wl {
        self.created(1_000_000 + seconds)
    }
}

/// One PodSet `main` admitted with `value` of `resource` in `flavor`.
fn main_in(
    resource: &'static str,
    flavor: &'static str,
    value: &'static str,
) -> Vec<PodSetAdmissionDef> {
    let resources: &'static [(&str, &str, &str)] = Box::leak(Box::new([(resource, flavor, value)]));
    vec![("main", 1, resources)]
}

/// A Workload with one PodSet `main` requesting `value` of `resource`, admitted in `flavor` of
/// `cq` (`SimpleReserveQuota`).
fn admitted_in(
    namespace: &'static str,
    name: &'static str,
    (cq, flavor): (&'static str, &'static str),
    resource: &'static str,
    value: &'static str,
) -> Wl {
    wl(namespace, name, "")
        .req(resource, value)
        .admitted(cq, &main_in(resource, flavor, value))
}

fn admitted_cpu(
    namespace: &'static str,
    name: &'static str,
    cq: &'static str,
    flavor: &'static str,
    value: &'static str,
) -> Wl {
    admitted_in(namespace, name, (cq, flavor), "cpu", value)
}

/// The admission `admitted_in` makes, keyed for `want_admissions`.
fn admission_in(
    key: &'static str,
    (cq, flavor): (&'static str, &'static str),
    resource: &'static str,
    value: &'static str,
) -> (&'static str, &'static str, Vec<PodSetAdmissionDef>) {
    (key, cq, main_in(resource, flavor, value))
}

fn cpu_admission(
    key: &'static str,
    cq: &'static str,
    flavor: &'static str,
    value: &'static str,
) -> (&'static str, &'static str, Vec<PodSetAdmissionDef>) {
    admission_in(key, (cq, flavor), "cpu", value)
}

fn schedule_preemption_cases() -> Vec<Case> {
    use PreemptionPolicy::{Any, LowerPriority};
    vec![
        Case {
            name: "use second flavor when the first has no preemption candidates; WhenCanPreempt: MayStopSearch",
            cluster_queues: vec![
                cq("other-alpha", "", None, false, &[ON_DEMAND_SPOT])
                    .preempting(policy(LowerPriority, PreemptionPolicy::Never))
                    .when_can_preempt(FungibilityPolicy::MayStopSearch),
            ],
            local_queues: vec![("eng-alpha", "other", "other-alpha")],
            workloads: vec![
                admitted_cpu("eng-alpha", "admitted", "other-alpha", "on-demand", "50"),
                wl("eng-alpha", "new", "other").req("cpu", "20"),
            ],
            want_admissions: vec![
                cpu_admission("eng-alpha/admitted", "other-alpha", "on-demand", "50"),
                cpu_admission("eng-alpha/new", "other-alpha", "spot", "20"),
            ],
            ..Case::default()
        },
        Case {
            name: "preempt workloads in ClusterQueue and cohort",
            workloads: vec![
                wl("eng-beta", "preemptor", "main")
                    .uid("wl-preemptor", "job-preemptor")
                    .req("cpu", "20"),
                admitted_cpu("eng-alpha", "use-all-spot", "eng-alpha", "spot", "100"),
                admitted_cpu("eng-beta", "low-1", "eng-beta", "on-demand", "30").priority(-1),
                admitted_cpu("eng-beta", "low-2", "eng-beta", "on-demand", "10").priority(-2),
                admitted_cpu("eng-alpha", "borrower", "eng-alpha", "on-demand", "60"),
            ],
            want_admissions: vec![
                cpu_admission("eng-alpha/use-all-spot", "eng-alpha", "spot", "100"),
                cpu_admission("eng-beta/low-1", "eng-beta", "on-demand", "30"),
                cpu_admission("eng-beta/low-2", "eng-beta", "on-demand", "10"),
                cpu_admission("eng-alpha/borrower", "eng-alpha", "on-demand", "60"),
            ],
            want_left: vec![("eng-beta", vec!["eng-beta/preemptor"])],
            want_pending: vec![(
                "eng-beta/preemptor",
                WAITING_FOR_PREEMPTED_WORKLOADS,
                "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 20 more needed, insufficient unused quota for cpu in flavor spot, 20 more needed. Pending the preemption of 2 workload(s)",
            )],
            want_preempted: vec![
                ("eng-alpha/borrower", "InCohortReclamation"),
                ("eng-beta/low-2", "InClusterQueue"),
            ],
            want_preempted_messages: vec![
                (
                    "eng-alpha/borrower",
                    "Preempted to accommodate a workload (UID: wl-preemptor, JobUID: job-preemptor) due to reclamation within the cohort; preemptor path: /eng/eng-beta; preemptee path: /eng/eng-alpha",
                ),
                (
                    "eng-beta/low-2",
                    "Preempted to accommodate a workload (UID: wl-preemptor, JobUID: job-preemptor) due to prioritization in the ClusterQueue; preemptor path: /eng/eng-beta; preemptee path: /eng/eng-beta",
                ),
            ],
            ..Case::default()
        },
        Case {
            name: "multiple CQs need preemption",
            cluster_queues: vec![
                cq(
                    "other-alpha",
                    "other",
                    None,
                    false,
                    &[&[("on-demand", "cpu", "50", "50", "")]],
                ),
                cq(
                    "other-beta",
                    "other",
                    None,
                    false,
                    &[&[("on-demand", "cpu", "50", "10", "")]],
                )
                .preempting(policy(LowerPriority, Any)),
            ],
            local_queues: vec![
                ("eng-alpha", "other", "other-alpha"),
                ("eng-beta", "other", "other-beta"),
            ],
            workloads: vec![
                wl("eng-beta", "preemptor", "other")
                    .uid("wl-preemptor", "job-preemptor")
                    .priority(-1)
                    .req("cpu", "1"),
                wl("eng-alpha", "pending", "other")
                    .priority(1)
                    .req("cpu", "1"),
                admitted_cpu("eng-alpha", "use-all", "other-alpha", "on-demand", "100"),
            ],
            want_admissions: vec![cpu_admission(
                "eng-alpha/use-all",
                "other-alpha",
                "on-demand",
                "100",
            )],
            want_left: vec![("other-beta", vec!["eng-beta/preemptor"])],
            want_inadmissible: vec![("other-alpha", vec!["eng-alpha/pending"])],
            want_pending: vec![
                (
                    "eng-alpha/pending",
                    WAITING_FOR_QUOTA,
                    "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 1 more needed",
                ),
                (
                    "eng-beta/preemptor",
                    WAITING_FOR_PREEMPTED_WORKLOADS,
                    "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 1 more needed. Pending the preemption of 1 workload(s)",
                ),
            ],
            want_preempted: vec![("eng-alpha/use-all", "InCohortReclamation")],
            want_preempted_messages: vec![(
                "eng-alpha/use-all",
                "Preempted to accommodate a workload (UID: wl-preemptor, JobUID: job-preemptor) due to reclamation within the cohort; preemptor path: /other/other-beta; preemptee path: /other/other-alpha",
            )],
            ..Case::default()
        },
        Case {
            name: "no overadmission while borrowing",
            cluster_queues: vec![
                cq(
                    "eng-gamma",
                    "eng",
                    Some("eng"),
                    false,
                    &[&[
                        ("on-demand", "cpu", "50", "10", ""),
                        ("spot", "cpu", "0", "100", ""),
                    ]],
                )
                .preempting(policy(LowerPriority, Any)),
            ],
            local_queues: vec![("eng-gamma", "main", "eng-gamma")],
            workloads: vec![
                wl("eng-beta", "new", "main")
                    .at(-2)
                    .ps("one", 50, None, &[("cpu", "1")]),
                wl("eng-alpha", "new-alpha", "main")
                    .at(-1)
                    .ps("one", 1, None, &[("cpu", "1")]),
                wl("eng-gamma", "new-gamma", "main")
                    .at(0)
                    .ps("one", 50, None, &[("cpu", "1")]),
                wl("eng-gamma", "existing", "")
                    .ps("borrow-on-demand", 51, None, &[("cpu", "1")])
                    .ps("use-all-spot", 100, None, &[("cpu", "1")])
                    .admitted(
                        "eng-gamma",
                        &[
                            ("borrow-on-demand", 51, &[("cpu", "on-demand", "51")]),
                            ("use-all-spot", 100, &[("cpu", "spot", "100")]),
                        ],
                    ),
            ],
            want_admissions: vec![
                (
                    "eng-gamma/existing",
                    "eng-gamma",
                    vec![
                        ("borrow-on-demand", 51, &[("cpu", "on-demand", "51")]),
                        ("use-all-spot", 100, &[("cpu", "spot", "100")]),
                    ],
                ),
                (
                    "eng-beta/new",
                    "eng-beta",
                    vec![("one", 50, &[("cpu", "on-demand", "50")])],
                ),
                (
                    "eng-alpha/new-alpha",
                    "eng-alpha",
                    vec![("one", 1, &[("cpu", "on-demand", "1")])],
                ),
            ],
            want_inadmissible: vec![("eng-gamma", vec!["eng-gamma/new-gamma"])],
            want_pending: vec![(
                "eng-gamma/new-gamma",
                WAITING_FOR_QUOTA,
                "couldn't assign flavors to pod set one: insufficient unused quota for cpu in flavor on-demand, 41 more needed, insufficient unused quota for cpu in flavor spot, 50 more needed",
            )],
            ..Case::default()
        },
        partial_preempt(
            "partial admission single variable pod set, preempt first",
            20,
        ),
        partial_preempt(
            "partial admission single variable pod set, preempt with partial admission",
            30,
        ),
        Case {
            name: "preemption while borrowing, workload waiting for preemption should not block a borrowing workload in another CQ",
            cluster_queues: vec![
                cq(
                    "cq_shared",
                    "preemption-while-borrowing",
                    None,
                    false,
                    &[&[("default", "cpu", "4", "0", "")]],
                ),
                cq(
                    "cq_a",
                    "preemption-while-borrowing",
                    None,
                    false,
                    &[&[("default", "cpu", "0", "3", "")]],
                )
                .preempting(ClusterQueuePreemption {
                    borrow_within_cohort: borrow_within(LowerPriority, None),
                    ..policy(PreemptionPolicy::Never, LowerPriority)
                }),
                cq(
                    "cq_b",
                    "preemption-while-borrowing",
                    None,
                    false,
                    &[&[("default", "cpu", "0", "", "")]],
                )
                .preempting(ClusterQueuePreemption {
                    borrow_within_cohort: borrow_within(LowerPriority, None),
                    ..policy(PreemptionPolicy::Never, LowerPriority)
                }),
            ],
            local_queues: vec![("eng-alpha", "lq_a", "cq_a"), ("eng-beta", "lq_b", "cq_b")],
            workloads: vec![
                wl("eng-alpha", "a", "lq_a").at(1).req("cpu", "3"),
                wl("eng-beta", "b", "lq_b").at(2).req("cpu", "1"),
                admitted_cpu("eng-alpha", "admitted_a", "cq_a", "default", "2"),
            ],
            want_admissions: vec![
                cpu_admission("eng-alpha/admitted_a", "cq_a", "default", "2"),
                cpu_admission("eng-beta/b", "cq_b", "default", "1"),
            ],
            want_inadmissible: vec![("cq_a", vec!["eng-alpha/a"])],
            want_pending: vec![(
                "eng-alpha/a",
                WAITING_FOR_QUOTA,
                "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 2 more needed",
            )],
            ..Case::default()
        },
        Case {
            name: "minimal preemptions when target queue is exhausted",
            cluster_queues: vec![
                cq(
                    "other-alpha",
                    "other",
                    None,
                    false,
                    &[&[("on-demand", "cpu", "2", "", "")]],
                )
                .preempting(policy(LowerPriority, Any)),
                cq(
                    "other-beta",
                    "other",
                    None,
                    false,
                    &[&[("on-demand", "cpu", "2", "", "")]],
                ),
                cq(
                    "other-gamma",
                    "other",
                    None,
                    false,
                    &[&[("on-demand", "cpu", "2", "", "")]],
                ),
            ],
            local_queues: other_queues(),
            workloads: vec![
                admitted_cpu("eng-alpha", "a1", "other-alpha", "on-demand", "1").priority(-2),
                admitted_cpu("eng-alpha", "a2", "other-alpha", "on-demand", "1").priority(-2),
                admitted_cpu("eng-alpha", "a3", "other-alpha", "on-demand", "1").priority(-1),
                admitted_cpu("eng-beta", "b1", "other-beta", "on-demand", "1"),
                admitted_cpu("eng-beta", "b2", "other-beta", "on-demand", "1"),
                admitted_cpu("eng-beta", "b3", "other-beta", "on-demand", "1"),
                wl("eng-alpha", "incoming", "other")
                    .uid("wl-incoming", "job-incoming")
                    .req("cpu", "2"),
            ],
            want_admissions: vec![
                cpu_admission("eng-alpha/a1", "other-alpha", "on-demand", "1"),
                cpu_admission("eng-alpha/a2", "other-alpha", "on-demand", "1"),
                cpu_admission("eng-alpha/a3", "other-alpha", "on-demand", "1"),
                cpu_admission("eng-beta/b1", "other-beta", "on-demand", "1"),
                cpu_admission("eng-beta/b2", "other-beta", "on-demand", "1"),
                cpu_admission("eng-beta/b3", "other-beta", "on-demand", "1"),
            ],
            want_left: vec![("other-alpha", vec!["eng-alpha/incoming"])],
            want_pending: vec![(
                "eng-alpha/incoming",
                WAITING_FOR_PREEMPTED_WORKLOADS,
                "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 2 more needed. Pending the preemption of 2 workload(s)",
            )],
            want_preempted: vec![
                ("eng-alpha/a1", "InClusterQueue"),
                ("eng-alpha/a2", "InClusterQueue"),
            ],
            want_preempted_messages: vec![(
                "eng-alpha/a1",
                "Preempted to accommodate a workload (UID: wl-incoming, JobUID: job-incoming) due to prioritization in the ClusterQueue; preemptor path: /other/other-alpha; preemptee path: /other/other-alpha",
            )],
            ..Case::default()
        },
        Case {
            name: "A workload is only eligible to do preemptions if it fits fully within nominal quota",
            cluster_queues: vec![
                cq(
                    "other-alpha",
                    "other",
                    None,
                    false,
                    &[&[("on-demand", "cpu", "2", "", "")]],
                )
                .preempting(policy(LowerPriority, Any)),
                cq(
                    "other-beta",
                    "other",
                    None,
                    false,
                    &[&[("on-demand", "cpu", "2", "", "")]],
                ),
            ],
            local_queues: other_queues(),
            workloads: vec![
                admitted_cpu("eng-alpha", "a1", "other-alpha", "on-demand", "1").priority(-1),
                admitted_cpu("eng-beta", "b1", "other-beta", "on-demand", "1").priority(-1),
                wl("eng-alpha", "incoming", "other")
                    .priority(1)
                    .req("cpu", "3"),
            ],
            want_admissions: vec![
                cpu_admission("eng-alpha/a1", "other-alpha", "on-demand", "1"),
                cpu_admission("eng-beta/b1", "other-beta", "on-demand", "1"),
            ],
            want_inadmissible: vec![("other-alpha", vec!["eng-alpha/incoming"])],
            want_pending: vec![(
                "eng-alpha/incoming",
                WAITING_FOR_QUOTA,
                "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 1 more needed",
            )],
            ..Case::default()
        },
        Case {
            name: "multiple preemptions without borrowing",
            cluster_queues: two_default_cqs("2", "2", within_lower()),
            local_queues: other_queues(),
            workloads: vec![
                admitted_cpu("eng-alpha", "a1", "other-alpha", "default", "2"),
                admitted_cpu("eng-beta", "b1", "other-beta", "default", "2"),
                wl("eng-alpha", "preemptor", "other")
                    .uid("wl-preemptor", "job-preemptor")
                    .priority(100)
                    .req("cpu", "2"),
                wl("eng-beta", "preemptor", "other")
                    .uid("wl-preemptor", "job-preemptor")
                    .priority(100)
                    .req("cpu", "2"),
            ],
            want_admissions: vec![
                cpu_admission("eng-alpha/a1", "other-alpha", "default", "2"),
                cpu_admission("eng-beta/b1", "other-beta", "default", "2"),
            ],
            want_left: vec![
                ("other-alpha", vec!["eng-alpha/preemptor"]),
                ("other-beta", vec!["eng-beta/preemptor"]),
            ],
            want_pending: vec![
                (
                    "eng-alpha/preemptor",
                    WAITING_FOR_PREEMPTED_WORKLOADS,
                    "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 2 more needed. Pending the preemption of 1 workload(s)",
                ),
                (
                    "eng-beta/preemptor",
                    WAITING_FOR_PREEMPTED_WORKLOADS,
                    "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 2 more needed. Pending the preemption of 1 workload(s)",
                ),
            ],
            want_preempted: vec![
                ("eng-alpha/a1", "InClusterQueue"),
                ("eng-beta/b1", "InClusterQueue"),
            ],
            ..Case::default()
        },
        Case {
            name: "multiple preemptions preemption possible after earlier workload fits",
            cluster_queues: two_default_cqs("1", "2", within_lower()),
            local_queues: other_queues(),
            workloads: vec![
                admitted_cpu("eng-beta", "b1", "other-beta", "default", "2"),
                wl("eng-alpha", "fit", "other")
                    .priority(100)
                    .req("cpu", "1"),
                wl("eng-beta", "preemptor", "other")
                    .uid("wl-preemptor", "job-preemptor")
                    .priority(99)
                    .req("cpu", "2"),
            ],
            want_admissions: vec![
                cpu_admission("eng-alpha/fit", "other-alpha", "default", "1"),
                cpu_admission("eng-beta/b1", "other-beta", "default", "2"),
            ],
            want_left: vec![("other-beta", vec!["eng-beta/preemptor"])],
            want_pending: vec![(
                "eng-beta/preemptor",
                WAITING_FOR_PREEMPTED_WORKLOADS,
                "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 1 more needed. Pending the preemption of 1 workload(s)",
            )],
            want_preempted: vec![("eng-beta/b1", "InClusterQueue")],
            ..Case::default()
        },
        Case {
            name: "multiple preemptions skip preemption when shared limited resource",
            cluster_queues: {
                let borrowing = ClusterQueuePreemption {
                    borrow_within_cohort: borrow_within(LowerPriority, None),
                    ..within_lower()
                };
                let mut cqs = two_default_cqs("2", "2", borrowing);
                cqs.push(cq(
                    "resource-bank",
                    "other",
                    None,
                    false,
                    &[&[("default", "cpu", "1", "", "")]],
                ));
                cqs
            },
            local_queues: other_queues(),
            workloads: vec![
                admitted_cpu("eng-alpha", "a1", "other-alpha", "default", "2"),
                admitted_cpu("eng-beta", "b1", "other-beta", "default", "2"),
                wl("eng-alpha", "preemptor", "other")
                    .uid("wl-preemptor", "job-preemptor")
                    .priority(100)
                    .req("cpu", "3"),
                wl("eng-beta", "pretending-preemptor", "other")
                    .priority(99)
                    .req("cpu", "3"),
            ],
            want_admissions: vec![
                cpu_admission("eng-alpha/a1", "other-alpha", "default", "2"),
                cpu_admission("eng-beta/b1", "other-beta", "default", "2"),
            ],
            want_left: vec![
                ("other-alpha", vec!["eng-alpha/preemptor"]),
                ("other-beta", vec!["eng-beta/pretending-preemptor"]),
            ],
            want_pending: vec![
                (
                    "eng-alpha/preemptor",
                    WAITING_FOR_PREEMPTED_WORKLOADS,
                    "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 2 more needed. Pending the preemption of 1 workload(s)",
                ),
                (
                    "eng-beta/pretending-preemptor",
                    WAITING_FOR_QUOTA,
                    "Workload no longer fits after processing another workload",
                ),
            ],
            want_preempted: vec![("eng-alpha/a1", "InClusterQueue")],
            ..Case::default()
        },
        Case {
            name: "prefer reclamation over cq priority based preemption",
            cluster_queues: gpu_flavor_cqs(true),
            local_queues: other_queues(),
            workloads: vec![
                admitted_in("eng-alpha", "a1", ("other-alpha", "on-demand"), "gpu", "5")
                    .priority(50),
                admitted_in("eng-beta", "b1", ("other-beta", "spot"), "gpu", "5").priority(50),
                gpu_preemptor("6"),
            ],
            want_admissions: vec![
                admission_in("eng-alpha/a1", ("other-alpha", "on-demand"), "gpu", "5"),
                admission_in("eng-beta/b1", ("other-beta", "spot"), "gpu", "5"),
            ],
            want_left: vec![("other-alpha", vec!["eng-alpha/preemptor"])],
            want_pending: vec![(
                "eng-alpha/preemptor",
                WAITING_FOR_PREEMPTED_WORKLOADS,
                "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, 1 more needed, insufficient unused quota for gpu in flavor spot, 1 more needed. Pending the preemption of 1 workload(s)",
            )],
            want_preempted: vec![("eng-beta/b1", "InCohortReclamation")],
            ..Case::default()
        },
        Case {
            name: "prefer first preemption flavor when second flavor requires both reclaim and cq priority preemption",
            cluster_queues: gpu_flavor_cqs(false),
            local_queues: other_queues(),
            workloads: vec![
                admitted_in("eng-alpha", "a1", ("other-alpha", "on-demand"), "gpu", "5")
                    .priority(50),
                admitted_in("eng-alpha", "a2", ("other-alpha", "spot"), "gpu", "5").priority(50),
                admitted_in("eng-beta", "b1", ("other-beta", "spot"), "gpu", "5").priority(50),
                gpu_preemptor("6"),
            ],
            want_admissions: vec![
                admission_in("eng-alpha/a1", ("other-alpha", "on-demand"), "gpu", "5"),
                admission_in("eng-alpha/a2", ("other-alpha", "spot"), "gpu", "5"),
                admission_in("eng-beta/b1", ("other-beta", "spot"), "gpu", "5"),
            ],
            want_left: vec![("other-alpha", vec!["eng-alpha/preemptor"])],
            want_pending: vec![(
                "eng-alpha/preemptor",
                WAITING_FOR_PREEMPTED_WORKLOADS,
                "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, 1 more needed, insufficient unused quota for gpu in flavor spot, 6 more needed. Pending the preemption of 1 workload(s)",
            )],
            want_preempted: vec![("eng-alpha/a1", "InClusterQueue")],
            ..Case::default()
        },
        Case {
            name: "prefer first preemption flavor when second flavor also requires cq preemption",
            cluster_queues: gpu_flavor_cqs(false),
            local_queues: other_queues(),
            workloads: vec![
                admitted_in("eng-alpha", "a1", ("other-alpha", "on-demand"), "gpu", "6")
                    .priority(50),
                admitted_in("eng-alpha", "a2", ("other-alpha", "spot"), "gpu", "5").priority(50),
                admitted_in("eng-beta", "b1", ("other-beta", "spot"), "gpu", "5").priority(9001),
                gpu_preemptor("5"),
            ],
            want_admissions: vec![
                admission_in("eng-alpha/a1", ("other-alpha", "on-demand"), "gpu", "6"),
                admission_in("eng-alpha/a2", ("other-alpha", "spot"), "gpu", "5"),
                admission_in("eng-beta/b1", ("other-beta", "spot"), "gpu", "5"),
            ],
            want_left: vec![("other-alpha", vec!["eng-alpha/preemptor"])],
            want_pending: vec![(
                "eng-alpha/preemptor",
                WAITING_FOR_PREEMPTED_WORKLOADS,
                "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, 1 more needed, insufficient unused quota for gpu in flavor spot, 5 more needed. Pending the preemption of 1 workload(s)",
            )],
            want_preempted: vec![("eng-alpha/a1", "InClusterQueue")],
            ..Case::default()
        },
        Case {
            name: "workload requiring reclaimation prioritized over wl in another full cq",
            cluster_queues: vec![
                cq(
                    "CQ1",
                    "other",
                    None,
                    false,
                    &[&[("on-demand", "gpu", "10", "", "")]],
                ),
                cq(
                    "CQ2",
                    "other",
                    None,
                    false,
                    &[&[("on-demand", "gpu", "10", "", "")]],
                )
                .preempting(policy(PreemptionPolicy::Never, Any)),
                cq(
                    "CQ3",
                    "other",
                    None,
                    false,
                    &[&[("on-demand", "gpu", "0", "", "")]],
                ),
            ],
            local_queues: vec![
                ("eng-alpha", "lq", "CQ1"),
                ("eng-beta", "lq", "CQ2"),
                ("eng-gamma", "lq", "CQ3"),
            ],
            workloads: vec![
                admitted_in(
                    "eng-alpha",
                    "Admitted-Workload-1",
                    ("CQ1", "on-demand"),
                    "gpu",
                    "5",
                ),
                wl("eng-alpha", "WL1", "lq").at(0).req("gpu", "10"),
                wl("eng-beta", "WL2", "lq")
                    .uid("wl-WL2", "job-WL2")
                    .at(1)
                    .req("gpu", "10"),
                admitted_in(
                    "eng-gamma",
                    "Admitted-Workload-2",
                    ("CQ3", "on-demand"),
                    "gpu",
                    "5",
                ),
                admitted_in(
                    "eng-gamma",
                    "Admitted-Workload-3",
                    ("CQ3", "on-demand"),
                    "gpu",
                    "5",
                )
                .priority(1),
            ],
            want_admissions: vec![
                admission_in(
                    "eng-alpha/Admitted-Workload-1",
                    ("CQ1", "on-demand"),
                    "gpu",
                    "5",
                ),
                admission_in(
                    "eng-gamma/Admitted-Workload-2",
                    ("CQ3", "on-demand"),
                    "gpu",
                    "5",
                ),
                admission_in(
                    "eng-gamma/Admitted-Workload-3",
                    ("CQ3", "on-demand"),
                    "gpu",
                    "5",
                ),
            ],
            want_left: vec![("CQ2", vec!["eng-beta/WL2"])],
            want_inadmissible: vec![("CQ1", vec!["eng-alpha/WL1"])],
            want_pending: vec![
                (
                    "eng-alpha/WL1",
                    WAITING_FOR_QUOTA,
                    "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, 5 more needed",
                ),
                (
                    "eng-beta/WL2",
                    WAITING_FOR_PREEMPTED_WORKLOADS,
                    "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, 5 more needed. Pending the preemption of 1 workload(s)",
                ),
            ],
            want_preempted: vec![("eng-gamma/Admitted-Workload-2", "InCohortReclamation")],
            want_preempted_messages: vec![(
                "eng-gamma/Admitted-Workload-2",
                "Preempted to accommodate a workload (UID: wl-WL2, JobUID: job-WL2) due to reclamation within the cohort; preemptor path: /other/CQ2; preemptee path: /other/CQ3",
            )],
            ..Case::default()
        },
        lending_reclaim(
            "capacity not blocked when lending clusterqueue can reclaim (ReclaimWithinCohort=Any)",
            Any,
        ),
        lending_reclaim(
            "capacity blocked when lending clusterqueue not guaranteed to reclaim (ReclaimWithinCohort=LowerPriority)",
            LowerPriority,
        ),
        lending_reclaim(
            "capacity blocked when lending clusterqueue not guaranteed to reclaim (ReclaimWithinCohort=Never)",
            PreemptionPolicy::Never,
        ),
        Case {
            name: "don't assign flavor if there are no candidates for preemption",
            cluster_queues: vec![
                cq(
                    "cq1",
                    "cohort",
                    None,
                    false,
                    &[&[
                        ("on-demand", "cpu", "0", "1", ""),
                        ("spot", "cpu", "0", "1", ""),
                    ]],
                )
                .preempting(ClusterQueuePreemption {
                    borrow_within_cohort: borrow_within(LowerPriority, None),
                    ..policy(LowerPriority, Any)
                })
                .when_can_preempt(FungibilityPolicy::MayStopSearch),
                cq(
                    "cq2",
                    "cohort",
                    None,
                    false,
                    &[&[
                        ("on-demand", "cpu", "1", "", ""),
                        ("spot", "cpu", "1", "", ""),
                    ]],
                ),
            ],
            local_queues: vec![("eng-alpha", "lq1", "cq1"), ("eng-alpha", "lq2", "cq2")],
            workloads: vec![
                admitted_cpu("eng-alpha", "admitted", "cq2", "on-demand", "1").reserved(-1),
                wl("eng-alpha", "new", "lq1").priority(100).req("cpu", "1"),
            ],
            want_admissions: vec![
                cpu_admission("eng-alpha/new", "cq1", "spot", "1"),
                cpu_admission("eng-alpha/admitted", "cq2", "on-demand", "1"),
            ],
            ..Case::default()
        },
        Case {
            name: "admit to second flavor when first needs preemption; WhenCanPreempt: TryNextFlavor",
            cluster_queues: vec![
                cq(
                    "preempt-attempts-cq",
                    "",
                    None,
                    false,
                    &[&[
                        ("on-demand", "cpu", "1", "", ""),
                        ("spot", "cpu", "1", "", ""),
                    ]],
                )
                .preempting(within_lower())
                .when_can_preempt(FungibilityPolicy::TryNextFlavor),
            ],
            local_queues: vec![("eng-alpha", "preempt-attempts-lq", "preempt-attempts-cq")],
            workloads: vec![
                admitted_cpu(
                    "eng-alpha",
                    "blocker",
                    "preempt-attempts-cq",
                    "on-demand",
                    "1",
                )
                .priority(50),
                wl("eng-alpha", "test-wl", "preempt-attempts-lq")
                    .priority(100)
                    .req("cpu", "1"),
            ],
            want_admissions: vec![
                cpu_admission("eng-alpha/test-wl", "preempt-attempts-cq", "spot", "1"),
                cpu_admission("eng-alpha/blocker", "preempt-attempts-cq", "on-demand", "1"),
            ],
            ..Case::default()
        },
        Case {
            name: "preempt when workload requests zero of a resource not defined in ClusterQueue",
            cluster_queues: vec![
                cq(
                    "preempt-zero-gpu-cq",
                    "",
                    None,
                    false,
                    &[&[("default", "cpu", "4", "", "")]],
                )
                .preempting(within_lower()),
            ],
            local_queues: vec![("sales", "preempt-zero-gpu-lq", "preempt-zero-gpu-cq")],
            workloads: vec![
                wl("sales", "preemptor", "preempt-zero-gpu-lq")
                    .uid("wl-preemptor", "job-preemptor")
                    .req("cpu", "2")
                    .req("example.com/gpu", "0"),
                admitted_cpu(
                    "sales",
                    "low-priority",
                    "preempt-zero-gpu-cq",
                    "default",
                    "4",
                )
                .priority(-1),
            ],
            want_admissions: vec![cpu_admission(
                "sales/low-priority",
                "preempt-zero-gpu-cq",
                "default",
                "4",
            )],
            want_left: vec![("preempt-zero-gpu-cq", vec!["sales/preemptor"])],
            want_pending: vec![(
                "sales/preemptor",
                WAITING_FOR_PREEMPTED_WORKLOADS,
                "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 2 more needed. Pending the preemption of 1 workload(s)",
            )],
            want_preempted: vec![("sales/low-priority", "InClusterQueue")],
            ..Case::default()
        },
        Case {
            name: "PreemptionOverBorrowing preference: preempt in first flavor instead of borrowing in second",
            cluster_queues: preference_cqs("pob", FungibilityPreference::PreemptionOverBorrowing),
            local_queues: vec![("default", "pob-queue", "pob-cq")],
            workloads: vec![
                admitted_cpu("default", "low-pob", "pob-cq", "on-demand", "5").priority(-1),
                wl("default", "high-pob", "pob-queue")
                    .uid("wl-high-pob", "job-high-pob")
                    .req("cpu", "5"),
            ],
            want_admissions: vec![cpu_admission("default/low-pob", "pob-cq", "on-demand", "5")],
            want_left: vec![("pob-cq", vec!["default/high-pob"])],
            want_pending: vec![(
                "default/high-pob",
                WAITING_FOR_PREEMPTED_WORKLOADS,
                "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 5 more needed. Pending the preemption of 1 workload(s)",
            )],
            want_preempted: vec![("default/low-pob", "InClusterQueue")],
            ..Case::default()
        },
        Case {
            name: "PreemptionOverBorrowing preference: select fitting second flavor over first flavor with no preemption candidates",
            cohorts: vec![
                crate::testing::cohort(
                    "nopc-root",
                    "",
                    &[
                        ("on-demand", "cpu", "0", "", ""),
                        ("spot", "cpu", "5", "", ""),
                    ],
                ),
                crate::testing::cohort("nopc-mid", "nopc-root", &[]),
            ],
            cluster_queues: vec![
                cq(
                    "nopc-cq",
                    "nopc-mid",
                    None,
                    false,
                    &[&[
                        ("on-demand", "cpu", "5", "0", ""),
                        ("spot", "cpu", "0", "", ""),
                    ]],
                )
                .preempting(within_lower())
                .when_can_borrow_try_next()
                .preference(FungibilityPreference::PreemptionOverBorrowing),
                cq(
                    "nopc-sibling",
                    "nopc-mid",
                    None,
                    false,
                    &[&[
                        ("on-demand", "cpu", "5", "", ""),
                        ("spot", "cpu", "0", "", ""),
                    ]],
                ),
            ],
            local_queues: vec![("default", "nopc-queue", "nopc-cq")],
            workloads: vec![
                admitted_cpu("default", "admitted-nopc", "nopc-cq", "on-demand", "5"),
                wl("default", "pending-nopc", "nopc-queue").req("cpu", "5"),
            ],
            want_admissions: vec![
                cpu_admission("default/admitted-nopc", "nopc-cq", "on-demand", "5"),
                cpu_admission("default/pending-nopc", "nopc-cq", "spot", "5"),
            ],
            ..Case::default()
        },
        Case {
            name: "BorrowingOverPreemption preference: borrow in second flavor instead of preempting in first",
            cluster_queues: preference_cqs("bop", FungibilityPreference::BorrowingOverPreemption),
            local_queues: vec![("default", "bop-queue", "bop-cq")],
            workloads: vec![
                admitted_cpu("default", "low-bop", "bop-cq", "on-demand", "5").priority(-1),
                wl("default", "high-bop", "bop-queue").req("cpu", "5"),
            ],
            want_admissions: vec![
                cpu_admission("default/low-bop", "bop-cq", "on-demand", "5"),
                cpu_admission("default/high-bop", "bop-cq", "spot", "5"),
            ],
            ..Case::default()
        },
    ]
}

/// The PreemptionOverBorrowing / BorrowingOverPreemption pair: `{prefix}-cq` (5 on-demand
/// without borrowing, 0 spot borrowing up to 5; LowerPriority within; TryNextFlavor both
/// ways) and `{prefix}-lender` (5 spot) in `{prefix}-cohort`.
fn preference_cqs(prefix: &'static str, preference: FungibilityPreference) -> Vec<Cq> {
    let name =
        |suffix: &str| -> &'static str { Box::leak(format!("{prefix}-{suffix}").into_boxed_str()) };
    let cohort = name("cohort");
    vec![
        cq(
            name("cq"),
            cohort,
            None,
            false,
            &[&[
                ("on-demand", "cpu", "5", "0", ""),
                ("spot", "cpu", "0", "5", ""),
            ]],
        )
        .preempting(within_lower())
        .when_can_borrow_try_next()
        .preference(preference),
        cq(
            name("lender"),
            cohort,
            None,
            false,
            &[&[
                ("on-demand", "cpu", "0", "", ""),
                ("spot", "cpu", "5", "", ""),
            ]],
        ),
    ]
}

/// other-alpha (10 gpu of on-demand and of spot, LowerPriority within and reclaim) and
/// other-beta (none; the same policy when `beta_preempts`).
fn gpu_flavor_cqs(beta_preempts: bool) -> Vec<Cq> {
    let lower = policy(
        PreemptionPolicy::LowerPriority,
        PreemptionPolicy::LowerPriority,
    );
    let beta = cq(
        "other-beta",
        "other",
        None,
        false,
        &[&[
            ("on-demand", "gpu", "0", "", ""),
            ("spot", "gpu", "0", "", ""),
        ]],
    );
    vec![
        cq(
            "other-alpha",
            "other",
            None,
            false,
            &[&[
                ("on-demand", "gpu", "10", "", ""),
                ("spot", "gpu", "10", "", ""),
            ]],
        )
        .preempting(lower),
        if beta_preempts {
            beta.preempting(lower)
        } else {
            beta
        },
    ]
}

fn gpu_preemptor(value: &'static str) -> Wl {
    wl("eng-alpha", "preemptor", "other")
        .uid("wl-preemptor", "job-preemptor")
        .priority(100)
        .req("gpu", value)
}

/// The three "capacity ... when lending clusterqueue ..." cases: ClusterQueueA (2 gpu, one
/// used, 2 pending) lends to ClusterQueueB (none, 1 pending) only when it could reclaim.
fn lending_reclaim(name: &'static str, reclaim: PreemptionPolicy) -> Case {
    let b_admitted = reclaim == PreemptionPolicy::Any;
    let mut want_admissions = vec![admission_in(
        "eng-alpha/a1-admitted",
        ("ClusterQueueA", "on-demand"),
        "gpu",
        "1",
    )];
    let mut want_pending = vec![(
        "eng-alpha/a2-pending",
        WAITING_FOR_QUOTA,
        "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, 1 more needed",
    )];
    let mut want_left = Vec::new();
    if b_admitted {
        want_admissions.push(admission_in(
            "eng-beta/b1-pending",
            ("ClusterQueueB", "on-demand"),
            "gpu",
            "1",
        ));
    } else {
        want_left.push(("ClusterQueueB", vec!["eng-beta/b1-pending"]));
        want_pending.push((
            "eng-beta/b1-pending",
            WAITING_FOR_QUOTA,
            "Workload no longer fits after processing another workload",
        ));
    }
    Case {
        name,
        cluster_queues: vec![
            cq(
                "ClusterQueueA",
                "root",
                None,
                false,
                &[&[("on-demand", "gpu", "2", "", "")]],
            )
            .preempting(policy(PreemptionPolicy::Never, reclaim)),
            cq(
                "ClusterQueueB",
                "root",
                None,
                false,
                &[&[("on-demand", "gpu", "0", "", "")]],
            ),
        ],
        local_queues: vec![
            ("eng-alpha", "lq", "ClusterQueueA"),
            ("eng-beta", "lq", "ClusterQueueB"),
        ],
        workloads: vec![
            admitted_in(
                "eng-alpha",
                "a1-admitted",
                ("ClusterQueueA", "on-demand"),
                "gpu",
                "1",
            ),
            wl("eng-alpha", "a2-pending", "lq").req("gpu", "2"),
            wl("eng-beta", "b1-pending", "lq").at(0).req("gpu", "1"),
        ],
        want_admissions,
        want_left,
        want_inadmissible: vec![("ClusterQueueA", vec!["eng-alpha/a2-pending"])],
        want_pending,
        ..Case::default()
    }
}

/// LocalQueues `other` of eng-alpha, eng-beta and eng-gamma into other-alpha, other-beta and
/// other-gamma.
fn other_queues() -> Vec<(&'static str, &'static str, &'static str)> {
    vec![
        ("eng-alpha", "other", "other-alpha"),
        ("eng-beta", "other", "other-beta"),
        ("eng-gamma", "other", "other-gamma"),
    ]
}

fn within_lower() -> ClusterQueuePreemption {
    policy(PreemptionPolicy::LowerPriority, PreemptionPolicy::Never)
}

/// other-alpha and other-beta in Cohort `other` with `alpha` and `beta` cpu of `default`.
fn two_default_cqs(
    alpha: &'static str,
    beta: &'static str,
    preemption: ClusterQueuePreemption,
) -> Vec<Cq> {
    let quota = |value: &'static str| -> &'static [Q] {
        Box::leak(Box::new([("default", "cpu", value, "", "")]))
    };
    vec![
        cq("other-alpha", "other", None, false, &[quota(alpha)]).preempting(preemption),
        cq("other-beta", "other", None, false, &[quota(beta)]).preempting(preemption),
    ]
}

/// The two "partial admission single variable pod set, preempt ..." cases: `count` GPUs
/// (at least 10) at priority 4 in eng-beta, where 10 at priority -4 hold half of model-a.
fn partial_preempt(name: &'static str, count: i32) -> Case {
    Case {
        name,
        workloads: vec![
            wl("eng-beta", "new", "main")
                .uid("wl-new", "job-new")
                .priority(4)
                .ps("one", count, Some(10), &[("example.com/gpu", "1")]),
            wl("eng-beta", "old", "")
                .priority(-4)
                .ps("one", 10, None, &[("example.com/gpu", "1")])
                .admitted(
                    "eng-beta",
                    &[("one", 10, &[("example.com/gpu", "model-a", "10")])],
                ),
        ],
        want_admissions: vec![(
            "eng-beta/old",
            "eng-beta",
            vec![("one", 10, &[("example.com/gpu", "model-a", "10")])],
        )],
        want_left: vec![("eng-beta", vec!["eng-beta/new"])],
        want_pending: vec![(
            "eng-beta/new",
            WAITING_FOR_PREEMPTED_WORKLOADS,
            "couldn't assign flavors to pod set one: insufficient unused quota for example.com/gpu in flavor model-a, 10 more needed. Pending the preemption of 1 workload(s)",
        )],
        want_preempted: vec![("eng-beta/old", "InClusterQueue")],
        want_preempted_messages: vec![(
            "eng-beta/old",
            "Preempted to accommodate a workload (UID: wl-new, JobUID: job-new) due to prioritization in the ClusterQueue; preemptor path: /eng/eng-beta; preemptee path: /eng/eng-beta",
        )],
        ..Case::default()
    }
}

#[test]
fn schedule_with_preemption_table() {
    let cases = schedule_preemption_cases();
    assert_eq!(cases.len(), 25, "ported cases");
    for case in cases {
        run(case);
    }
}

// Upstream: pkg/scheduler/scheduler_fs_test.go, TestScheduleForFairSharing, the cases with
// preemption policies (see cycle_tests.rs for the list and the one not ported), with fair
// sharing on except the FS=false twin.
fn fair_sharing_preemption_cases() -> Vec<Case> {
    use PreemptionPolicy::LowerPriority;
    let alpha = |name: &'static str, value: &'static str| {
        admitted_cpu("eng-alpha", name, "eng-alpha", "on-demand", value).uid(name, "")
    };
    let gamma = |name: &'static str, value: &'static str| {
        admitted_cpu("eng-gamma", name, "eng-gamma", "on-demand", value).uid(name, "")
    };
    vec![
        Case {
            name: "with fair sharing: preempt workload from CQ with the highest share",
            cluster_queues: vec![cq(
                "eng-gamma",
                "eng",
                None,
                false,
                &[&[("on-demand", "cpu", "50", "0", "")]],
            )],
            workloads: vec![
                admitted_cpu("eng-alpha", "all_spot", "eng-alpha", "spot", "100"),
                alpha("alpha1", "20"),
                alpha("alpha2", "20"),
                alpha("alpha3", "20"),
                alpha("alpha4", "20"),
                gamma("gamma1", "10"),
                gamma("gamma2", "20"),
                gamma("gamma3", "20"),
                gamma("gamma4", "20"),
                wl("eng-beta", "preemptor", "main")
                    .uid("wl-preemptor", "job-preemptor")
                    .req("cpu", "30"),
            ],
            want_admissions: vec![
                cpu_admission("eng-alpha/all_spot", "eng-alpha", "spot", "100"),
                cpu_admission("eng-alpha/alpha1", "eng-alpha", "on-demand", "20"),
                cpu_admission("eng-alpha/alpha2", "eng-alpha", "on-demand", "20"),
                cpu_admission("eng-alpha/alpha3", "eng-alpha", "on-demand", "20"),
                cpu_admission("eng-alpha/alpha4", "eng-alpha", "on-demand", "20"),
                cpu_admission("eng-gamma/gamma1", "eng-gamma", "on-demand", "10"),
                cpu_admission("eng-gamma/gamma2", "eng-gamma", "on-demand", "20"),
                cpu_admission("eng-gamma/gamma3", "eng-gamma", "on-demand", "20"),
                cpu_admission("eng-gamma/gamma4", "eng-gamma", "on-demand", "20"),
            ],
            want_left: vec![("eng-beta", vec!["eng-beta/preemptor"])],
            want_pending: vec![(
                "eng-beta/preemptor",
                WAITING_FOR_PREEMPTED_WORKLOADS,
                "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 30 more needed, insufficient unused quota for cpu in flavor spot, 30 more needed. Pending the preemption of 2 workload(s)",
            )],
            want_preempted: vec![
                ("eng-alpha/alpha1", "InCohortReclamation"),
                ("eng-gamma/gamma1", "InCohortReclamation"),
            ],
            ..Case::default()
        },
        Case {
            name: "multiple preemptions skip overlapping preemption targets",
            recompute_off: true,
            cluster_queues: vec![
                own_resource_cq("other-alpha", "alpha-resource"),
                own_resource_cq("other-beta", "beta-resource"),
                own_resource_cq("other-gamma", "gamma-resource"),
                cq(
                    "resource-bank",
                    "other",
                    None,
                    false,
                    &[&[("default", "cpu", "9", "", "")]],
                ),
            ],
            local_queues: other_queues(),
            workloads: vec![
                admitted_in("eng-alpha", "a1", ("other-alpha", "default"), "alpha-resource", "1"),
                admitted_in("eng-beta", "b1", ("other-beta", "default"), "beta-resource", "1"),
                admitted_cpu("eng-gamma", "c1", "other-gamma", "default", "9")
                    .req("gamma-resource", "1"),
                wl("eng-alpha", "preemptor", "other")
                    .uid("wl-preemptor", "job-preemptor")
                    .priority(100)
                    .req("cpu", "3")
                    .req("alpha-resource", "1"),
                wl("eng-beta", "pretending-preemptor", "other")
                    .priority(99)
                    .req("cpu", "3")
                    .req("beta-resource", "1"),
            ],
            want_admissions: vec![
                admission_in("eng-alpha/a1", ("other-alpha", "default"), "alpha-resource", "1"),
                admission_in("eng-beta/b1", ("other-beta", "default"), "beta-resource", "1"),
                cpu_admission("eng-gamma/c1", "other-gamma", "default", "9"),
            ],
            want_left: vec![
                ("other-alpha", vec!["eng-alpha/preemptor"]),
                ("other-beta", vec!["eng-beta/pretending-preemptor"]),
            ],
            want_pending: vec![
                (
                    "eng-alpha/preemptor",
                    WAITING_FOR_PREEMPTED_WORKLOADS,
                    "couldn't assign flavors to pod set main: insufficient unused quota for alpha-resource in flavor default, 1 more needed, insufficient unused quota for cpu in flavor default, 3 more needed. Pending the preemption of 2 workload(s)",
                ),
                (
                    "eng-beta/pretending-preemptor",
                    WAITING_FOR_QUOTA,
                    "Workload has overlapping preemption targets with another workload",
                ),
            ],
            want_preempted: vec![
                ("eng-alpha/a1", "InClusterQueue"),
                ("eng-gamma/c1", "InCohortFairSharing"),
            ],
            ..Case::default()
        },
        Case {
            name: "with fair sharing: prefer reclamation over cq priority based preemption; with preemption while borrowing",
            cluster_queues: vec![
                cq(
                    "other-alpha",
                    "other",
                    None,
                    false,
                    &[&[("on-demand", "gpu", "7", "", ""), ("spot", "gpu", "7", "", "")]],
                )
                .preempting(policy(LowerPriority, LowerPriority)),
                cq(
                    "other-beta",
                    "other",
                    None,
                    false,
                    &[&[("on-demand", "gpu", "3", "", ""), ("spot", "gpu", "3", "", "")]],
                ),
            ],
            local_queues: other_queues(),
            workloads: vec![
                admitted_in("eng-alpha", "a1", ("other-alpha", "on-demand"), "gpu", "5").priority(50),
                admitted_in("eng-beta", "b1", ("other-beta", "spot"), "gpu", "5").priority(50),
                gpu_preemptor("8"),
            ],
            want_admissions: vec![
                admission_in("eng-alpha/a1", ("other-alpha", "on-demand"), "gpu", "5"),
                admission_in("eng-beta/b1", ("other-beta", "spot"), "gpu", "5"),
            ],
            want_left: vec![("other-alpha", vec!["eng-alpha/preemptor"])],
            want_pending: vec![(
                "eng-alpha/preemptor",
                WAITING_FOR_PREEMPTED_WORKLOADS,
                "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, 3 more needed, insufficient unused quota for gpu in flavor spot, 3 more needed. Pending the preemption of 1 workload(s)",
            )],
            want_preempted: vec![("eng-beta/b1", "InCohortFairSharing")],
            ..Case::default()
        },
        Case {
            name: "fair sharing: in-CQ preemption for CQ without cohort; repro for nil pointer panic",
            cluster_queues: vec![
                cq("no-cohort-cq", "", None, false, &[&[("default", "cpu", "4", "", "")]])
                    .preempting(within_lower()),
            ],
            local_queues: vec![("default", "no-cohort-queue", "no-cohort-cq")],
            workloads: vec![
                admitted_cpu("default", "nc-low", "no-cohort-cq", "default", "4").priority(-1),
                wl("default", "nc-high", "no-cohort-queue")
                    .uid("wl-nc-high", "job-nc-high")
                    .priority(100)
                    .req("cpu", "4"),
            ],
            want_admissions: vec![cpu_admission("default/nc-low", "no-cohort-cq", "default", "4")],
            want_left: vec![("no-cohort-cq", vec!["default/nc-high"])],
            want_pending: vec![(
                "default/nc-high",
                WAITING_FOR_PREEMPTED_WORKLOADS,
                "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 4 more needed. Pending the preemption of 1 workload(s)",
            )],
            want_preempted: vec![("default/nc-low", "InClusterQueue")],
            ..Case::default()
        },
        Case {
            name: "PreemptionOverBorrowing with fair sharing: preempt in first flavor instead of borrowing in second",
            cluster_queues: preference_cqs("fs-pob", FungibilityPreference::PreemptionOverBorrowing)
                .into_iter()
                .map(|cq| cq.weight("1"))
                .collect(),
            local_queues: vec![("default", "fs-pob-queue", "fs-pob-cq")],
            workloads: vec![
                admitted_cpu("default", "fs-low-pob", "fs-pob-cq", "on-demand", "5").priority(-1),
                wl("default", "fs-high-pob", "fs-pob-queue")
                    .uid("wl-fs-high-pob", "job-fs-high-pob")
                    .req("cpu", "5"),
            ],
            want_admissions: vec![cpu_admission("default/fs-low-pob", "fs-pob-cq", "on-demand", "5")],
            want_left: vec![("fs-pob-cq", vec!["default/fs-high-pob"])],
            want_pending: vec![(
                "default/fs-high-pob",
                WAITING_FOR_PREEMPTED_WORKLOADS,
                "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 5 more needed. Pending the preemption of 1 workload(s)",
            )],
            want_preempted: vec![("default/fs-low-pob", "InClusterQueue")],
            ..Case::default()
        },
        local_capacity("prefer flavor with most local capacity", true),
    ]
    .into_iter()
    .map(|case| Case {
        fair_sharing: true,
        ..case
    })
    .chain([local_capacity(
        "prefer flavor with most local capacity (FS=false)",
        false,
    )])
    .collect()
}

/// The "prefer flavor with most local capacity" pair: queue1 (3 gpu of on-demand and of spot,
/// TryNextFlavor both ways) in child-cohort (5 on-demand, 7 spot) under root-cohort (2
/// on-demand); 8 on-demand and 3 spot are used, and 1 more goes to spot.
fn local_capacity(name: &'static str, fair_sharing: bool) -> Case {
    Case {
        name,
        fair_sharing,
        cohorts: vec![
            crate::testing::cohort(
                "root-cohort",
                "",
                &[
                    ("on-demand", "gpu", "2", "", ""),
                    ("spot", "gpu", "0", "", ""),
                ],
            ),
            crate::testing::cohort(
                "child-cohort",
                "root-cohort",
                &[
                    ("on-demand", "gpu", "5", "", ""),
                    ("spot", "gpu", "7", "", ""),
                ],
            ),
        ],
        cluster_queues: vec![
            cq(
                "queue1",
                "child-cohort",
                None,
                false,
                &[&[
                    ("on-demand", "gpu", "3", "", ""),
                    ("spot", "gpu", "3", "", ""),
                ]],
            )
            .preempting(policy(
                PreemptionPolicy::LowerPriority,
                PreemptionPolicy::Any,
            ))
            .when_can_borrow_try_next(),
        ],
        local_queues: vec![("default", "queue1", "queue1")],
        workloads: vec![
            admitted_in("default", "a1", ("queue1", "on-demand"), "gpu", "8"),
            admitted_in("default", "a2", ("queue1", "spot"), "gpu", "3"),
            wl("default", "a3", "queue1").req("gpu", "1"),
        ],
        want_admissions: vec![
            admission_in("default/a1", ("queue1", "on-demand"), "gpu", "8"),
            admission_in("default/a2", ("queue1", "spot"), "gpu", "3"),
            admission_in("default/a3", ("queue1", "spot"), "gpu", "1"),
        ],
        ..Case::default()
    }
}

/// A ClusterQueue of Cohort `other` with no cpu and one `resource` of its own (`default`),
/// LowerPriority within, Any reclaim.
fn own_resource_cq(name: &'static str, resource: &'static str) -> Cq {
    let quotas: &'static [Q] = Box::leak(Box::new([
        ("default", "cpu", "0", "", ""),
        ("default", resource, "1", "", ""),
    ]));
    cq(name, "other", None, false, &[quotas]).preempting(policy(
        PreemptionPolicy::LowerPriority,
        PreemptionPolicy::Any,
    ))
}

#[test]
fn schedule_for_fair_sharing_with_preemption_table() {
    let cases = fair_sharing_preemption_cases();
    assert_eq!(cases.len(), 7, "ported cases");
    for case in cases {
        run(case);
    }
}
