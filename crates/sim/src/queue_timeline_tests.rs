use super::*;
use crate::queue_scenario::{BASELINE, GeneratorConfig};

/// One Cohort of `queues` ClusterQueues (nominal, borrowing limit in CPUs; within-queue
/// LowerPriority, reclaim Any), each with the given workload sets
/// `(count, interval ms, class, runtime ms, priority, request)`.
fn config(
    queues: usize,
    nominal: u32,
    borrowing: u32,
    sets: &[(usize, u64, &str, u64, i32, u32)],
) -> String {
    let sets: Vec<String> = sets
        .iter()
        .map(|(count, interval, class, runtime, priority, request)| {
            format!(
                "{{count: {count}, creationIntervalMs: {interval}, workloads: [{{className: {class}, runtimeMs: {runtime}, priority: {priority}, request: {request}}}]}}"
            )
        })
        .collect();
    format!(
        "cohorts: [{{className: cohort, count: 1, queuesSets: [{{className: cq, count: {queues}, nominalQuota: {nominal}, borrowingLimit: {borrowing}, reclaimWithinCohort: Any, withinClusterQueue: LowerPriority, workloadsSets: [{}]}}]}}]",
        sets.join(", ")
    )
}

fn outcome(yaml: &str, options: Options) -> Outcome {
    let plan = GeneratorConfig::parse(yaml).unwrap().plan();
    run(&plan, options).unwrap()
}

#[test]
fn runs_end_as_the_runner_measures_them() {
    struct Case {
        name: &'static str,
        yaml: String,
        wall_ms: u64,
        admissions: u64,
        evictions: u64,
        /// (class, average time to admission ms)
        admission: &'static [(&'static str, f64)],
        usage_percent: f64,
    }
    let cases = [
        Case {
            // Created at 100 and 200 ms, both fit, each runs 1 s.
            name: "everything fits",
            yaml: config(1, 2, 0, &[(2, 100, "small", 1_000, 50, 1)]),
            wall_ms: 1_200,
            admissions: 2,
            evictions: 0,
            admission: &[("small", 0.0)],
            // 2 × 1 CPU × 1 s over 2 CPUs × 1.2 s.
            usage_percent: 100.0 * 2.0 / 2.4,
        },
        Case {
            // The high-priority Workload (created at 1.1 s) preempts the low one (admitted
            // at 0.1 s), which is admitted again when the high one finishes at 2.1 s.
            name: "preemption within the ClusterQueue",
            yaml: config(
                1,
                1,
                0,
                &[
                    (1, 100, "low", 5_000, 50, 1),
                    (1, 1_100, "high", 1_000, 200, 1),
                ],
            ),
            wall_ms: 7_100,
            admissions: 3,
            evictions: 1,
            // Low: created at 0 s (API seconds), last admitted at 2 s.
            admission: &[("low", 2_000.0), ("high", 0.0)],
            // Held: 1 s (low, evicted) + 1 s (high) + 5 s (low) of 1 CPU, over 7.1 s.
            usage_percent: 100.0 * 7.0 / 7.1,
        },
        Case {
            // Two ClusterQueues of 1 CPU each may borrow 1: the first 2-CPU Workload borrows,
            // the second waits for the Cohort's quota until the first finishes.
            name: "borrowing in the Cohort",
            yaml: config(2, 1, 1, &[(1, 100, "wide", 1_000, 50, 2)]),
            wall_ms: 2_100,
            admissions: 2,
            evictions: 0,
            admission: &[("wide", 500.0)],
            usage_percent: 100.0 * 4.0 / (2.0 * 2.1),
        },
    ];
    for case in cases {
        let outcome = outcome(&case.yaml, Options::default());
        assert_eq!(outcome.wall_ms, case.wall_ms, "{}", case.name);
        assert_eq!(outcome.admissions, case.admissions, "{}", case.name);
        assert_eq!(outcome.evictions, case.evictions, "{}", case.name);
        assert_eq!(outcome.unfinished, 0, "{}", case.name);
        let admission: Vec<(&str, f64)> = outcome
            .workload_classes
            .iter()
            .map(|c| (c.class.as_str(), c.average_time_to_admission_ms))
            .collect();
        assert_eq!(admission, case.admission, "{}", case.name);
        let usage = outcome.cluster_queue_classes[0].usage_percent;
        assert!(
            (usage - case.usage_percent).abs() < 1e-9,
            "{}: usage {usage}",
            case.name
        );
    }
}

#[test]
fn a_seed_decides_the_run_and_every_workload_finishes() {
    let yaml = BASELINE;
    let plan = GeneratorConfig::parse(yaml).unwrap().scaled(0.02).plan();
    let runs: Vec<Outcome> = [
        Options::default(),
        Options::default(),
        Options {
            equivalence_hashing: false,
            ..Options::default()
        },
    ]
    .into_iter()
    .map(|options| run(&plan, options).unwrap())
    .collect();
    assert_eq!(runs[0], runs[1]);
    for outcome in &runs {
        assert_eq!(outcome.workloads, plan.workloads.len());
        assert_eq!(outcome.unfinished, 0);
        assert!(outcome.admissions >= plan.workloads.len() as u64);
        assert_eq!(
            outcome.admissions,
            plan.workloads.len() as u64 + outcome.evictions
        );
        // The last Workload is created at 1.2 s (one large per ClusterQueue at this scale).
        assert!(outcome.wall_ms > 1_200, "{}", outcome.wall_ms);
        let usage = outcome.cluster_queue_classes[0].usage_percent;
        assert!(usage > 0.0 && usage <= 100.0, "{usage}");
    }
}

/// One ClusterQueue with 10 CPUs over a TAS flavor on one rack of two 2-CPU Nodes, and two
/// Workloads of three 1-CPU pods created at 100 and 200 ms that run 1 s; `pod_set` holds the
/// template's TAS fields.
fn tas_config(pod_set: &str) -> String {
    format!(
        "topology: {{name: t, levels: [{{name: rack, count: 1, nodeLabel: rack}}, {{name: node, count: 2, nodeLabel: kubernetes.io/hostname, capacity: {{cpu: 2}}}}]}}
resourceFlavor: {{name: tas-flavor, nodeLabel: tas-node-group, topologyName: t}}
cohorts: [{{className: cohort, count: 1, queuesSets: [{{className: cq, count: 1, nominalQuota: 10, reclaimWithinCohort: Any, withinClusterQueue: LowerPriority, workloadsSets: [{{count: 2, creationIntervalMs: 100, workloads: [{{className: w, runtimeMs: 1000, priority: 0, request: 1, {pod_set}}}]}}]}}]}}]"
    )
}

#[test]
fn tas_placements_hold_node_capacity_until_the_workload_finishes() {
    // (case, template's TAS fields, wall ms, average time to admission ms, admissions)
    let cases: &[(&str, &str, u64, f64, u64)] = &[
        // 3 of the rack's 4 CPUs: the second waits for the first to finish (1.1 s).
        (
            "required rack",
            "podCount: 3, tasConstraint: required, tasLevel: rack",
            2_100,
            500.0,
            2,
        ),
        (
            "preferred rack",
            "podCount: 3, tasConstraint: preferred, tasLevel: rack",
            2_100,
            500.0,
            2,
        ),
        (
            "balanced slices of 1",
            "podCount: 3, tasConstraint: balanced, tasLevel: rack, sliceSize: 1",
            2_100,
            500.0,
            2,
        ),
        // Without a level the runner makes one pod: both fit at once.
        ("no TAS level", "podCount: 3", 1_200, 0.0, 2),
    ];
    for (name, pod_set, wall_ms, admission_ms, admissions) in cases {
        let plan = GeneratorConfig::parse(&tas_config(pod_set)).unwrap().plan();
        let outcome = run(&plan, Options::default()).unwrap();
        assert_eq!(outcome.unfinished, 0, "{name}");
        assert_eq!(outcome.wall_ms, *wall_ms, "{name}");
        assert_eq!(outcome.admissions, *admissions, "{name}");
        assert_eq!(
            outcome.workload_classes[0].average_time_to_admission_ms, *admission_ms,
            "{name}"
        );
    }
}

#[test]
fn kueues_tas_configuration_runs_to_the_end_as_one_part() {
    let plan = GeneratorConfig::parse(crate::queue_scenario::TAS)
        .unwrap()
        .scaled(0.02)
        .plan();
    let outcome = run(&plan, Options::default()).unwrap();
    assert_eq!(outcome.workloads, plan.workloads.len());
    assert_eq!(outcome.unfinished, 0);
    assert_eq!(
        outcome.admissions,
        plan.workloads.len() as u64 + outcome.evictions
    );
    assert_eq!(outcome.workload_classes.len(), 9);
    let usage = outcome.cluster_queue_classes[0].usage_percent;
    assert!(usage > 0.0 && usage <= 100.0, "{usage}");
}
