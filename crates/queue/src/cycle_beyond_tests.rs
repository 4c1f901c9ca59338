// Not upstream tables: the "Beyond Kueue" options of the cycle (issue 16, item 6), each run
// through the same harness as TestSchedule's cases: several heads per ClusterQueue per cycle,
// the total tie-break, S2-a flapping and `prevent_flapping`, the minimum runtime before
// preemption from another ClusterQueue, and per-user limits inside a LocalQueue.

use super::properties::leak;
use super::*;
use crate::cluster_queue::PreemptionPolicy::{self, Any, LowerPriority, Never};
use crate::user_limits::USER_LIMIT_REACHED;

/// (namespace, LocalQueue, ClusterQueue).
type LocalQueueDef = (&'static str, &'static str, &'static str);

type Admitted = (&'static str, &'static str, Vec<PodSetAdmissionDef>);

/// An admission of one pod with `cpu` of the default flavor in `cq`.
fn cpu_admission(key: &'static str, cq: &'static str, cpu: &'static str) -> Admitted {
    let resources: &'static [(&str, &str, &str)] = Box::leak(Box::new([("cpu", "default", cpu)]));
    (key, cq, vec![("main", 1, resources)])
}

/// A ClusterQueue "solo" (StrictFIFO or not) without a cohort: 4 cpu of the default flavor,
/// fed by LocalQueue default/solo-lq.
fn solo(strict: bool) -> (Cq, (&'static str, &'static str, &'static str)) {
    (
        cq(
            "solo",
            "",
            None,
            strict,
            &[&[("default", "cpu", "4", "", "")]],
        ),
        ("default", "solo-lq", "solo"),
    )
}

fn pending(name: &'static str, cpu: &'static str, created: i64) -> Wl {
    wl("default", name, "solo-lq")
        .req("cpu", cpu)
        .created(created)
}

#[test]
fn heads_per_cycle_table() {
    // (name, StrictFIFO, heads per cycle, admitted, left active, left inadmissible)
    type Row = (
        &'static str,
        bool,
        usize,
        &'static [&'static str],
        &'static [&'static str],
        &'static [&'static str],
    );
    let fitting: &[Row] = &[
        (
            "one head, Kueue's default",
            false,
            1,
            &["w1"],
            &["w2", "w3"],
            &[],
        ),
        (
            "two heads admit the first two in order",
            false,
            2,
            &["w1", "w2"],
            &["w3"],
            &[],
        ),
        (
            "three heads admit all three",
            false,
            3,
            &["w1", "w2", "w3"],
            &[],
            &[],
        ),
        (
            "more heads than workloads",
            false,
            5,
            &["w1", "w2", "w3"],
            &[],
            &[],
        ),
    ];
    let blocked: &[Row] = &[
        (
            "BestEffortFIFO, one head: the big head steps aside",
            false,
            1,
            &[],
            &["w1", "w2"],
            &["big"],
        ),
        (
            "BestEffortFIFO, three heads: the next ones are admitted",
            false,
            3,
            &["w1", "w2"],
            &[],
            &["big"],
        ),
        (
            "StrictFIFO, three heads: the big head blocks every round",
            true,
            3,
            &[],
            &["big", "w1", "w2"],
            &[],
        ),
    ];
    let qualified = |names: &[&str]| -> Vec<&'static str> {
        names.iter().map(|n| leak(format!("default/{n}"))).collect()
    };
    for (rows, with_big) in [(fitting, false), (blocked, true)] {
        for (name, strict, heads, admitted, left, inadmissible) in rows {
            let (queue, local_queue) = solo(*strict);
            let mut workloads = vec![
                pending("w1", "1", 1),
                pending("w2", "1", 2),
                pending("w3", "1", 3),
            ];
            if with_big {
                workloads.pop();
                workloads.push(pending("big", "5", 0));
            }
            let list = |names: &[&str]| -> Vec<(&'static str, Vec<&'static str>)> {
                if names.is_empty() {
                    Vec::new()
                } else {
                    vec![("solo", qualified(names))]
                }
            };
            run(Case {
                name,
                heads_per_cycle: *heads,
                cluster_queues: vec![queue],
                local_queues: vec![local_queue],
                workloads,
                want_admissions: qualified(admitted)
                    .into_iter()
                    .map(|key| cpu_admission(key, "solo", "1"))
                    .collect(),
                want_left: list(left),
                want_inadmissible: list(inadmissible),
                ..Case::default()
            });
        }
    }
}

/// Two ClusterQueues of Cohort "tie" without quota of their own, 2 cpu in the Cohort, and one
/// Workload each that would take all of it: equal borrowing, priority and creation, so only
/// the tie-break decides. `tie-b`'s Workload has the lower UID.
fn tie_case(name: &'static str, fair_sharing: bool) -> Case {
    let queue = |name: &'static str| {
        cq(
            name,
            "tie",
            None,
            false,
            &[&[("default", "cpu", "0", "", "")]],
        )
    };
    Case {
        name,
        fair_sharing,
        cluster_queues: vec![queue("tie-a"), queue("tie-b")],
        cohorts: vec![crate::testing::cohort(
            "tie",
            "",
            &[("default", "cpu", "2", "", "")],
        )],
        local_queues: vec![("default", "lq-a", "tie-a"), ("default", "lq-b", "tie-b")],
        workloads: vec![
            wl("default", "a", "lq-a")
                .req("cpu", "2")
                .uid("uid-2", "job-2"),
            wl("default", "b", "lq-b")
                .req("cpu", "2")
                .uid("uid-1", "job-1"),
        ],
        want_admissions: vec![cpu_admission("default/b", "tie-b", "2")],
        want_left: vec![("tie-a", vec!["default/a"])],
        want_pending: vec![(
            "default/a",
            WAITING_FOR_QUOTA,
            "Workload no longer fits after processing another workload",
        )],
        ..Case::default()
    }
}

#[test]
fn equal_entries_are_ordered_by_uid_not_by_cluster_queue_name() {
    run(tie_case("classic iterator: lower UID first", false));
    run(tie_case("fair-sharing tournament: lower UID first", true));
}

/// Cohort "fs" (0 cpu and 10 gpu of its own) over ClusterQueues fs-a and fs-b (2 cpu, 2 gpu
/// each, reclaim Any). Both borrow 4 gpu (their dominant share, 4000/14); cpu is contested.
fn fair_pair() -> (Vec<Cq>, Vec<CohortSpec>, Vec<LocalQueueDef>) {
    let queue = |name: &'static str| {
        let mut queue = cq(
            name,
            "fs",
            None,
            false,
            &[&[
                ("default", "cpu", "2", "", ""),
                ("default", "example.com/gpu", "2", "", ""),
            ]],
        );
        queue.preemption.reclaim_within_cohort = Any;
        queue
    };
    (
        vec![queue("fs-a"), queue("fs-b")],
        vec![crate::testing::cohort(
            "fs",
            "",
            &[
                ("default", "cpu", "0", "", ""),
                ("default", "example.com/gpu", "10", "", ""),
            ],
        )],
        vec![("default", "lq-a", "fs-a"), ("default", "lq-b", "fs-b")],
    )
}

fn admitted_in(
    name: &'static str,
    cq: &'static str,
    resource: &'static str,
    value: &'static str,
    reserved: i64,
) -> Wl {
    let resources: &'static [(&str, &str, &str)] =
        Box::leak(Box::new([(resource, "default", value)]));
    wl("default", name, "unused")
        .req(resource, value)
        .admitted(cq, &[("main", 1, resources)])
        .reserved(reserved)
}

/// `cq` holding `key` when `holds` (a preemptor stays active; one without targets steps
/// aside into the inadmissible set).
fn waiting(
    cq: &'static str,
    key: &'static str,
    holds: bool,
) -> Vec<(&'static str, Vec<&'static str>)> {
    if holds {
        vec![(cq, vec![key])]
    } else {
        Vec::new()
    }
}

fn gpu_admission(key: &'static str, cq: &'static str) -> Admitted {
    (
        key,
        cq,
        vec![("main", 1, &[("example.com/gpu", "default", "6")])],
    )
}

#[test]
fn s2a_at_equal_shares_flaps_unless_prevented() {
    let (cluster_queues, cohorts, local_queues) = fair_pair();
    let gpus = || {
        vec![
            admitted_in("ga", "fs-a", "example.com/gpu", "6", -100),
            admitted_in("gb", "fs-b", "example.com/gpu", "6", -100),
        ]
    };
    // Cycle 1: x (2 cpu) in fs-a; fs-b borrows 1 cpu with b1 (2) and w (1).
    let first = |name, prevent_flapping, preempted: Vec<(&'static str, &'static str)>| {
        let mut workloads = gpus();
        workloads.extend([
            admitted_in("a1", "fs-a", "cpu", "1", -30),
            admitted_in("b1", "fs-b", "cpu", "2", -20),
            admitted_in("w", "fs-b", "cpu", "1", -10),
            wl("default", "x", "lq-a").req("cpu", "2"),
        ]);
        Case {
            name,
            fair_sharing: true,
            prevent_flapping,
            cluster_queues: cluster_queues.clone(),
            cohorts: cohorts.clone(),
            local_queues: local_queues.clone(),
            workloads,
            want_admissions: vec![
                gpu_admission("default/ga", "fs-a"),
                gpu_admission("default/gb", "fs-b"),
                cpu_admission("default/a1", "fs-a", "1"),
                cpu_admission("default/b1", "fs-b", "2"),
                cpu_admission("default/w", "fs-b", "1"),
            ],
            want_left: waiting("fs-a", "default/x", !preempted.is_empty()),
            want_inadmissible: waiting("fs-a", "default/x", preempted.is_empty()),
            want_preempted: preempted,
            ..Case::default()
        }
    };
    // Cycle 2 after b1 left and x was admitted: b1 comes back to fs-b.
    let second = |name, prevent_flapping, preempted: Vec<(&'static str, &'static str)>| {
        let mut workloads = gpus();
        workloads.extend([
            admitted_in("a1", "fs-a", "cpu", "1", -30),
            admitted_in("x", "fs-a", "cpu", "2", -1),
            admitted_in("w", "fs-b", "cpu", "1", -10),
            wl("default", "b1", "lq-b").req("cpu", "2"),
        ]);
        Case {
            name,
            fair_sharing: true,
            prevent_flapping,
            cluster_queues: cluster_queues.clone(),
            cohorts: cohorts.clone(),
            local_queues: local_queues.clone(),
            workloads,
            want_admissions: vec![
                gpu_admission("default/ga", "fs-a"),
                gpu_admission("default/gb", "fs-b"),
                cpu_admission("default/a1", "fs-a", "1"),
                cpu_admission("default/x", "fs-a", "2"),
                cpu_admission("default/w", "fs-b", "1"),
            ],
            want_left: waiting("fs-b", "default/b1", !preempted.is_empty()),
            want_inadmissible: waiting("fs-b", "default/b1", preempted.is_empty()),
            want_preempted: preempted,
            ..Case::default()
        }
    };
    // Kueue: S2-a passes at equal shares both ways, so the quota goes back and forth.
    run(first(
        "Kueue: fs-a takes b1",
        false,
        vec![("default/b1", "InCohortFairSharing")],
    ));
    run(second(
        "Kueue: fs-b takes it back",
        false,
        vec![("default/x", "InCohortFairSharing")],
    ));
    // prevent_flapping: equal shares are no reason to preempt, in either direction.
    run(first("prevent_flapping: fs-a waits", true, Vec::new()));
    run(second("prevent_flapping: fs-b waits", true, Vec::new()));
}

#[test]
fn min_runtime_before_preemption_table() {
    // Cohort "rt": "lender" (4 cpu, reclaims Any, preempts LowerPriority inside) and
    // "borrower" (no quota) borrowing all of it with `young` (reserved 30 s ago).
    let mut lender = cq(
        "lender",
        "rt",
        None,
        false,
        &[&[("default", "cpu", "4", "", "")]],
    );
    lender.preemption.reclaim_within_cohort = Any;
    lender.preemption.within_cluster_queue = LowerPriority;
    let borrower = cq(
        "borrower",
        "rt",
        None,
        false,
        &[&[("default", "cpu", "0", "", "")]],
    );
    let reclaim = |name, min_runtime: Option<u64>, preempted: Vec<(&'static str, &'static str)>| {
        run(Case {
            name,
            min_runtime: min_runtime.map(Duration::from_secs),
            cluster_queues: vec![lender.clone(), borrower.clone()],
            local_queues: vec![("default", "lq-lender", "lender")],
            workloads: vec![
                admitted_in("young", "borrower", "cpu", "4", -30),
                wl("default", "claim", "lq-lender").req("cpu", "2"),
            ],
            want_admissions: vec![cpu_admission("default/young", "borrower", "4")],
            want_left: waiting("lender", "default/claim", !preempted.is_empty()),
            want_inadmissible: waiting("lender", "default/claim", preempted.is_empty()),
            want_preempted: preempted,
            ..Case::default()
        });
    };
    reclaim(
        "no minimum runtime: reclaimed",
        None,
        vec![("default/young", "InCohortReclamation")],
    );
    reclaim(
        "ran 30 s of 10 s: reclaimed",
        Some(10),
        vec![("default/young", "InCohortReclamation")],
    );
    reclaim("ran 30 s of 60 s: protected", Some(60), Vec::new());
    // Inside its own ClusterQueue a young Workload still yields to a higher priority.
    run(Case {
        name: "InClusterQueue ignores the minimum runtime",
        min_runtime: Some(Duration::from_secs(60)),
        cluster_queues: vec![lender.clone(), borrower.clone()],
        local_queues: vec![("default", "lq-lender", "lender")],
        workloads: vec![
            admitted_in("low", "lender", "cpu", "4", -1),
            wl("default", "high", "lq-lender")
                .req("cpu", "2")
                .priority(10),
        ],
        want_admissions: vec![cpu_admission("default/low", "lender", "4")],
        want_left: vec![("lender", vec!["default/high"])],
        want_preempted: vec![("default/low", "InClusterQueue")],
        ..Case::default()
    });
}

#[test]
fn user_limits_table() {
    let (queue, local_queue) = solo(false);
    let count_limit = UserLimits {
        max_admitted_per_user: Some(1),
        ..UserLimits::default()
    };
    // Three rounds: alice's first, then her second is refused, then bob's; the Workload
    // without a user waits for the next cycle.
    run(Case {
        name: "one admitted workload per user, counted across rounds",
        heads_per_cycle: 3,
        cluster_queues: vec![queue.clone()],
        local_queues: vec![local_queue],
        user_limits: vec![("default", "solo-lq", count_limit.clone())],
        workloads: vec![
            pending("a1", "1", 1).user("alice"),
            pending("a2", "1", 2).user("alice"),
            pending("b1", "1", 3).user("bob"),
            pending("n1", "1", 4),
        ],
        want_admissions: vec![
            cpu_admission("default/a1", "solo", "1"),
            cpu_admission("default/b1", "solo", "1"),
        ],
        want_left: vec![("solo", vec!["default/n1"])],
        want_inadmissible: vec![("solo", vec!["default/a2"])],
        want_pending: vec![(
            "default/a2",
            USER_LIMIT_REACHED,
            "user \"alice\" has 1 admitted workload(s) in LocalQueue solo-lq, the limit per user is 1",
        )],
        ..Case::default()
    });
    // Admitted Workloads of another LocalQueue do not count.
    run(Case {
        name: "another LocalQueue's workloads do not count",
        cluster_queues: vec![queue.clone()],
        local_queues: vec![local_queue, ("default", "other-lq", "solo")],
        user_limits: vec![("default", "solo-lq", count_limit)],
        workloads: vec![
            Wl {
                queue: "other-lq",
                ..admitted_in("elsewhere", "solo", "cpu", "1", -1)
            }
            .user("alice"),
            pending("a1", "1", 1).user("alice"),
        ],
        want_admissions: vec![
            cpu_admission("default/elsewhere", "solo", "1"),
            cpu_admission("default/a1", "solo", "1"),
        ],
        ..Case::default()
    });
    let requests_limit = UserLimits {
        max_requests_per_user: BTreeMap::from([("cpu".to_owned(), 2000)]),
        ..UserLimits::default()
    };
    run(Case {
        name: "requests per user",
        heads_per_cycle: 2,
        cluster_queues: vec![queue],
        local_queues: vec![local_queue],
        user_limits: vec![("default", "solo-lq", requests_limit)],
        workloads: vec![
            Wl {
                queue: "solo-lq",
                ..admitted_in("a0", "solo", "cpu", "1", -1)
            }
            .user("alice"),
            pending("a1", "2", 1).user("alice"),
            pending("b1", "2", 2).user("bob"),
        ],
        want_admissions: vec![
            cpu_admission("default/a0", "solo", "1"),
            cpu_admission("default/b1", "solo", "2"),
        ],
        want_inadmissible: vec![("solo", vec!["default/a1"])],
        want_pending: vec![(
            "default/a1",
            USER_LIMIT_REACHED,
            "user \"alice\" would request 3000 of cpu in LocalQueue solo-lq, the limit per user is 2000",
        )],
        ..Case::default()
    });
}

// Topology-aware preemption (`PreemptionConfig::topology_aware`, issue 17 item 2): racks r1
// (x1, x2), r2 (x3, x4) and r3 (x5, x6) of 8-GPU hosts form the topology of flavor
// "tas-gpu"; ClusterQueue "team-a" (16 GPUs, reclaims LowerPriority in its cohort and
// preempts LowerPriority inside) and "team-b" (48 GPUs, within its nominal quota, so Kueue
// never reclaims from it) share cohort "gpus". The preemptor "train" asks for 2 pods of 8
// GPUs in one rack at priority 100.

const GPU: &str = "nvidia.com/gpu";
const RACK: &str = "cloud.com/topology-rack";
const TAS_FLAVOR: &str = "tas-gpu";
const RACKS: [(&str, &str); 6] = [
    ("r1", "x1"),
    ("r1", "x2"),
    ("r2", "x3"),
    ("r2", "x4"),
    ("r3", "x5"),
    ("r3", "x6"),
];

/// (name, priority, ClusterQueue, host, GPUs): an admitted Workload of one pod on `host`.
type Holder = (&'static str, i32, &'static str, &'static str, &'static str);

/// The racks with every holder's pod placed, those named in `non_tas` as pods that do not
/// use TAS (counted in the node's free capacity) but belong to their Workload.
fn gpu_racks(holders: &[Holder], non_tas: &[&str]) -> TasFlavors {
    use crate::tas::{TasSnapshot, TopologyDomainAssignment, TopologyNode};
    let nodes: Vec<TopologyNode> = RACKS
        .iter()
        .map(|(rack, host)| TopologyNode {
            name: (*host).to_owned(),
            labels: BTreeMap::from([
                (RACK.to_owned(), (*rack).to_owned()),
                (crate::tas::HOSTNAME_LABEL.to_owned(), (*host).to_owned()),
            ]),
            allocatable: BTreeMap::from([(GPU.to_owned(), 8), ("pods".to_owned(), 110)]),
            taints: Vec::new(),
            schedulable_and_ready: true,
        })
        .collect();
    let levels = [RACK.to_owned(), crate::tas::HOSTNAME_LABEL.to_owned()];
    let mut snapshot = TasSnapshot::new("default", &levels, &BTreeMap::new(), &[], &nodes);
    for (name, _, _, host, gpus) in holders {
        let placement = TopologyAssignment {
            levels: vec![crate::tas::HOSTNAME_LABEL.to_owned()],
            domains: vec![TopologyDomainAssignment {
                values: vec![(*host).to_owned()],
                count: 1,
            }],
        };
        let requests = BTreeMap::from([(GPU.to_owned(), quantity(GPU, gpus))]);
        let holder = format!("default/{name}");
        if non_tas.contains(name) {
            snapshot.add_held_non_tas_pod(&holder, host, &requests);
        } else {
            snapshot.add_held_assignment(&holder, &placement, &requests);
        }
    }
    TasFlavors {
        topologies: BTreeMap::from([(TAS_FLAVOR.to_owned(), "default".to_owned())]),
        snapshots: BTreeMap::from([(TAS_FLAVOR.to_owned(), snapshot)]),
    }
}

fn gpu_teams((within, reclaim): (PreemptionPolicy, PreemptionPolicy)) -> Vec<Cq> {
    let mut team_a = cq(
        "team-a",
        "gpus",
        None,
        false,
        &[&[(TAS_FLAVOR, GPU, "16", "", "")]],
    );
    team_a.preemption.within_cluster_queue = within;
    team_a.preemption.reclaim_within_cohort = reclaim;
    let team_b = cq(
        "team-b",
        "gpus",
        None,
        false,
        &[&[(TAS_FLAVOR, GPU, "48", "", "")]],
    );
    let team_c = cq(
        "team-c",
        "",
        None,
        false,
        &[&[(TAS_FLAVOR, GPU, "48", "", "")]],
    );
    vec![team_a, team_b, team_c]
}

fn train() -> Wl {
    wl("default", "train", "lq-a")
        .ps("main", 2, None, &[(GPU, "8")])
        .required_topology(RACK)
        .priority(100)
}

/// How one cycle over the racks runs besides its holders.
#[derive(Clone, Copy)]
struct GpuSetup {
    topology_aware: bool,
    /// Holders already being evicted.
    evicted: &'static [&'static str],
    /// Holders whose pod runs outside TAS.
    non_tas: &'static [&'static str],
    /// team-a's `withinClusterQueue` and `reclaimWithinCohort`.
    policy: (PreemptionPolicy, PreemptionPolicy),
}

/// The option on, nobody evicted, every pod a TAS pod, team-a preempting LowerPriority.
const ON: GpuSetup = GpuSetup {
    topology_aware: true,
    evicted: &[],
    non_tas: &[],
    policy: (LowerPriority, LowerPriority),
};

/// One cycle over the holders and "train", with the option on or off.
fn gpu_cycle(topology_aware: bool, holders: &[Holder]) -> Decision {
    let setup = GpuSetup {
        topology_aware,
        ..ON
    };
    gpu_cycle_with(setup, holders)
}

/// One cycle over the holders and "train" as `setup` says.
fn gpu_cycle_with(setup: GpuSetup, holders: &[Holder]) -> Decision {
    let mut workloads: Vec<Wl> = holders
        .iter()
        .map(|(name, priority, cq, _, gpus)| {
            let resources: &'static [(&str, &str, &str)] =
                Box::leak(Box::new([(GPU, TAS_FLAVOR, *gpus)]));
            wl("default", name, "unused")
                .req(GPU, gpus)
                .priority(*priority)
                .admitted(cq, &[("main", 1, resources)])
        })
        .collect();
    workloads.push(train());
    let case = Case {
        name: "topology-aware preemption",
        topology_aware: setup.topology_aware,
        tas: gpu_racks(holders, setup.non_tas),
        cluster_queues: gpu_teams(setup.policy),
        local_queues: vec![("default", "lq-a", "team-a")],
        workloads,
        ..Case::default()
    };
    let now = test_now();
    let (mut snapshot, mut queues) = prepare(&case, now);
    for workload in &mut snapshot.admitted {
        workload.evicted = setup.evicted.contains(&workload.name.as_str());
    }
    let decisions = schedule(&mut snapshot, &mut queues, &KueuePreemption, now);
    let mut train_decisions = decisions.into_iter().filter(|decision| {
        matches!(decision,
            Decision::Admit { workload, .. }
            | Decision::Preempt { workload, .. }
            | Decision::Requeue { workload, .. } if workload == "default/train")
    });
    let decision = train_decisions.next().expect("a decision for train");
    assert!(train_decisions.next().is_none(), "one decision for train");
    decision
}

/// What a decision says in short: `admit r2: x3*1 x4*1`, `preempt a:InClusterQueue ...`,
/// `pending Reason: message`.
fn summary(decision: &Decision) -> String {
    match decision {
        Decision::Admit { admission, .. } => {
            let hosts: Vec<String> = admission
                .pod_set_assignments
                .iter()
                .filter_map(|ps| ps.topology_assignment.as_ref())
                .flat_map(|placement| &placement.domains)
                .map(|domain| format!("{}*{}", domain.values.join("/"), domain.count))
                .collect();
            let rack = hosts.first().and_then(|first| {
                let host = first.split('*').next()?;
                RACKS
                    .iter()
                    .find(|(_, h)| *h == host)
                    .map(|(rack, _)| *rack)
            });
            format!("admit {}: {}", rack.unwrap_or("?"), hosts.join(" "))
        }
        Decision::Preempt { victims, .. } => {
            let mut victims: Vec<String> = victims
                .iter()
                .map(|victim| format!("{}:{}", victim.workload, victim.reason.as_str()))
                .collect();
            victims.sort();
            format!("preempt {}", victims.join(" "))
        }
        Decision::Requeue { pending, .. } => {
            format!("pending {}: {}", pending.reason, pending.message)
        }
    }
}

/// Kueue's pending message when no rack has room now (it would fit an empty topology).
const NO_RACK_NOW: &str = "couldn't assign flavors to pod set main: topology \"default\" allows to fit only 1 out of 2 pod(s). Total nodes: 6; excluded: resource \"nvidia.com/gpu\": 5";

#[test]
fn topology_aware_preemption_table() {
    // Every rack partly used by priority-0 Workloads of team-b: r2 is cleared by preempting
    // one Workload, r1 and r3 take two each.
    let partly_used: Vec<Holder> = vec![
        ("a1", 0, "team-b", "x1", "4"),
        ("a2", 0, "team-b", "x2", "4"),
        ("b1", 0, "team-b", "x3", "2"),
        ("c1", 0, "team-b", "x5", "4"),
        ("c2", 0, "team-b", "x6", "2"),
    ];
    let with_priority = |holders: &[Holder], changes: &[(&str, i32)]| -> Vec<Holder> {
        holders
            .iter()
            .map(|holder| {
                let priority = changes
                    .iter()
                    .find(|(name, _)| *name == holder.0)
                    .map_or(holder.1, |(_, priority)| *priority);
                (holder.0, priority, holder.2, holder.3, holder.4)
            })
            .collect()
    };
    let in_team_a = |holders: &[Holder]| -> Vec<Holder> {
        holders
            .iter()
            .map(|(name, priority, _, host, gpus)| (*name, *priority, "team-a", *host, *gpus))
            .collect()
    };
    let pending = format!("pending {WAITING_FOR_QUOTA}: {NO_RACK_NOW}");
    // (case, option on, holders, want)
    let cases: Vec<(&str, bool, Vec<Holder>, String)> = vec![
        (
            "off: Kueue finds no candidate and the Workload waits",
            false,
            partly_used.clone(),
            pending.clone(),
        ),
        (
            "on: the cheapest rack's only occupant is preempted",
            true,
            partly_used.clone(),
            "preempt default/b1:InCohortReclamation".to_owned(),
        ),
        (
            "on: an occupant of equal priority protects r2, one of higher priority r3",
            true,
            with_priority(&partly_used, &[("b1", 100), ("c2", 200)]),
            "preempt default/a1:InCohortReclamation default/a2:InCohortReclamation".to_owned(),
        ),
        (
            "on: occupants in the preemptor's own ClusterQueue go InClusterQueue",
            true,
            in_team_a(&partly_used),
            "preempt default/b1:InClusterQueue".to_owned(),
        ),
        (
            "on: no rack can be cleared, nothing is preempted",
            true,
            with_priority(&partly_used, &[("a1", 100), ("b1", 100), ("c2", 100)]),
            pending.clone(),
        ),
        (
            "on: a rack with room needs no preemption",
            true,
            partly_used[..2].to_vec(),
            "admit r2: x3*1 x4*1".to_owned(),
        ),
        (
            "on, after the victim is gone: admitted into the cleared rack",
            true,
            partly_used
                .iter()
                .filter(|holder| holder.0 != "b1")
                .copied()
                .collect(),
            "admit r2: x3*1 x4*1".to_owned(),
        ),
    ];
    for (name, on, holders, want) in cases {
        assert_eq!(summary(&gpu_cycle(on, &holders)), want, "{name}");
    }
    let outside: Vec<Holder> = partly_used
        .iter()
        .map(|(name, priority, _, host, gpus)| (*name, *priority, "team-c", *host, *gpus))
        .collect();
    assert_eq!(
        summary(&gpu_cycle(true, &outside)),
        pending,
        "on: Workloads of a ClusterQueue outside the cohort are never chosen"
    );
    assert_eq!(
        summary(&gpu_cycle_with(
            GpuSetup {
                non_tas: &["b1"],
                ..ON
            },
            &partly_used
        )),
        "preempt default/b1:InCohortReclamation",
        "on: a pod outside TAS counts as its Workload's: r2 is still cleared by preempting b1"
    );
    // As Kueue lists evicted candidates again: the preemptor waits for b1, nothing new goes.
    assert_eq!(
        summary(&gpu_cycle_with(
            GpuSetup {
                evicted: &["b1"],
                ..ON
            },
            &partly_used
        )),
        "preempt default/b1:InCohortReclamation",
        "on: r2's occupant is already being evicted: it is the only target"
    );
    assert_eq!(
        summary(&gpu_cycle_with(
            GpuSetup {
                evicted: &["a1", "b1"],
                ..ON
            },
            &partly_used
        )),
        "preempt default/b1:InCohortReclamation",
        "on: an evicted Workload outside the rack the placement takes is not waited for"
    );
    let never_within = GpuSetup {
        policy: (Never, LowerPriority),
        ..ON
    };
    assert_eq!(
        summary(&gpu_cycle_with(never_within, &in_team_a(&partly_used))),
        pending,
        "on: withinClusterQueue Never keeps the ClusterQueue's own Workloads"
    );
    let never_reclaim = GpuSetup {
        policy: (LowerPriority, Never),
        ..ON
    };
    assert_eq!(
        summary(&gpu_cycle_with(never_reclaim, &partly_used)),
        pending,
        "on: reclaimWithinCohort Never keeps the cohort's other Workloads"
    );
}

/// Which rack a host is in.
fn rack_of(host: &str) -> &'static str {
    RACKS
        .iter()
        .find(|(_, h)| *h == host)
        .map_or("?", |(rack, _)| *rack)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Random holders of team-b, at most one per host (priority 0, 50, 100 or 150; 1 to 8
    /// GPUs), and "train" (2 pods of 8 GPUs in one rack, priority 100) with the option on:
    /// it is admitted only when a rack is empty; otherwise it preempts only Workloads of
    /// lower priority, all in one rack, as few as any clearable rack needs, and once they
    /// are gone it is admitted into that rack; it preempts nothing only when no rack can be
    /// cleared.
    #[test]
    fn topology_aware_preemption_clears_one_rack_of_lower_priority(
        slots in proptest::collection::vec(
            proptest::option::of((0usize..4, 1u8..=8)),
            RACKS.len(),
        ),
    ) {
        let holders: Vec<Holder> = slots
            .iter()
            .zip(RACKS)
            .enumerate()
            .filter_map(|(index, (slot, (_, host)))| {
                let (level, gpus) = (*slot)?;
                let priority = [0, 50, 100, 150][level];
                Some((leak(format!("h{index}")), priority, "team-b", host, leak(gpus.to_string())))
            })
            .collect();
        let in_rack = |rack: &str| -> Vec<&Holder> {
            holders.iter().filter(|holder| rack_of(holder.3) == rack).collect()
        };
        let racks = ["r1", "r2", "r3"];
        let empty = racks.iter().any(|rack| in_rack(rack).is_empty());
        let clearable: Vec<usize> = racks
            .iter()
            .map(|rack| in_rack(rack))
            .filter(|held| held.iter().all(|holder| holder.1 < 100))
            .map(|held| held.len())
            .collect();
        match gpu_cycle(true, &holders) {
            Decision::Admit { .. } => proptest::prop_assert!(empty),
            Decision::Requeue { .. } => proptest::prop_assert!(!empty && clearable.is_empty()),
            Decision::Preempt { victims, .. } => {
                proptest::prop_assert!(!empty);
                let chosen: Vec<&Holder> = victims
                    .iter()
                    .filter_map(|victim| {
                        holders.iter().find(|holder| format!("default/{}", holder.0) == victim.workload)
                    })
                    .collect();
                proptest::prop_assert_eq!(chosen.len(), victims.len());
                proptest::prop_assert!(chosen.iter().all(|holder| holder.1 < 100));
                let rack = rack_of(chosen[0].3);
                proptest::prop_assert!(chosen.iter().all(|holder| rack_of(holder.3) == rack));
                proptest::prop_assert_eq!(Some(&victims.len()), clearable.iter().min());
                let rest: Vec<Holder> = holders
                    .iter()
                    .filter(|holder| !chosen.contains(holder))
                    .copied()
                    .collect();
                let after = summary(&gpu_cycle(true, &rest));
                proptest::prop_assert!(after.starts_with(&format!("admit {rack}:")), "{}", after);
            }
        }
    }
}

#[test]
fn topology_aware_preemption_message_names_the_preemptor_and_both_paths() {
    let holders: [Holder; 3] = [
        ("a1", 0, "team-b", "x1", "4"),
        ("b1", 0, "team-b", "x3", "2"),
        ("c1", 0, "team-b", "x5", "4"),
    ];
    let decision = gpu_cycle(true, &holders);
    let Decision::Preempt {
        victims, pending, ..
    } = decision
    else {
        panic!("no preemption: {decision:?}");
    };
    assert_eq!(
        victims
            .iter()
            .map(|v| v.message.as_str())
            .collect::<Vec<_>>(),
        [
            "Preempted to accommodate a workload (UID: default/train, JobUID: UNKNOWN) due to reclamation within the cohort; preemptor path: /gpus/team-a; preemptee path: /gpus/team-b"
        ]
    );
    assert_eq!(pending.reason, WAITING_FOR_PREEMPTED_WORKLOADS);
}
