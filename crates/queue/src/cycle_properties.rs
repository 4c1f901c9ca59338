// Not an upstream table: properties of one cycle with Kueue's preemption over random small
// cohorts. Up to three ClusterQueues (one flavor, cpu) in Cohort `prop` (with quota of its
// own) or alone, random quotas, limits and preemption policies, admitted Workloads that fit,
// pending Workloads of random priority and size, classic or fair sharing. After the cycle:
// - with the victims gone and the admissions added, no ClusterQueue is in debt (available
//   ≥ 0) and none uses more than its potential available quota;
// - every victim was admitted before the cycle, is named once, and its reason matches a
//   policy of the preemptor's ClusterQueue that allows it.

use proptest::prelude::*;

use super::*;
use crate::cluster_queue::BorrowWithinCohort;
use crate::preemption::satisfies_preemption_policy;

const POLICIES: [PreemptionPolicy; 4] = [
    PreemptionPolicy::Never,
    PreemptionPolicy::LowerPriority,
    PreemptionPolicy::LowerOrNewerEqualPriority,
    PreemptionPolicy::Any,
];

/// (in cohort, nominal, borrowing limit, lending limit, within, reclaim, borrow within).
pub(super) type QueueDef = (
    bool,
    u8,
    Option<u8>,
    Option<u8>,
    usize,
    usize,
    Option<(bool, Option<i8>)>,
);

/// (queue index, priority, cpu, created).
pub(super) type WorkloadDef = (usize, i8, u8, u8);

pub(super) fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

pub(super) fn queue_def() -> impl Strategy<Value = QueueDef> {
    (
        any::<bool>(),
        0u8..5,
        prop::option::of(0u8..4),
        prop::option::of(0u8..3),
        0usize..3,
        0usize..4,
        prop::option::of((any::<bool>(), prop::option::of(-1i8..2))),
    )
}

pub(super) fn workload_def() -> impl Strategy<Value = WorkloadDef> {
    (0usize..3, -2i8..3, 1u8..4, 0u8..3)
}

fn cluster_queue_of(index: usize, def: &QueueDef) -> Cq {
    let (in_cohort, nominal, borrowing, lending, within, reclaim, borrow_within) = *def;
    let limit = |value: Option<u8>| value.map_or("", |v| leak(v.to_string()));
    let lending = lending.map(|l| l.min(nominal));
    let quotas: &'static [Q] = Box::leak(Box::new([(
        "default",
        "cpu",
        leak(nominal.to_string()),
        if in_cohort { limit(borrowing) } else { "" },
        if in_cohort { limit(lending) } else { "" },
    )]));
    let cohort = if in_cohort { "prop" } else { "" };
    let mut queue = cq(leak(format!("p{index}")), cohort, None, false, &[quotas]);
    queue.preemption = ClusterQueuePreemption {
        within_cluster_queue: POLICIES[within],
        reclaim_within_cohort: POLICIES[reclaim],
        borrow_within_cohort: borrow_within.map(|(lower, threshold)| BorrowWithinCohort {
            policy: if lower {
                PreemptionPolicy::LowerPriority
            } else {
                PreemptionPolicy::Never
            },
            max_priority_threshold: threshold.map(i32::from),
        }),
    };
    queue
}

pub(super) fn workload_of(prefix: &str, index: usize, def: &WorkloadDef, queues: usize) -> Wl {
    let (queue, priority, cpu, created) = *def;
    let queue = queue % queues;
    wl(
        "default",
        leak(format!("{prefix}{index}")),
        leak(format!("lq-{queue}")),
    )
    .priority(i32::from(priority))
    .created(i64::from(created))
    .req("cpu", leak(cpu.to_string()))
}

pub(super) fn usage_of(admission: &Admission) -> FlavorResourceQuantities {
    let mut usage = FlavorResourceQuantities::new();
    for ps in &admission.pod_set_assignments {
        for (resource, flavor) in &ps.flavors {
            let key = FlavorResource::new(flavor.clone(), resource.clone());
            let sum = usage.get(&key).add_i64(ps.resource_usage[resource]);
            usage.set(key, sum);
        }
    }
    usage
}

/// Whether every ClusterQueue is out of debt and within its potential available quota.
fn within_quota(tree: &Tree) -> Result<(), String> {
    for (name, id) in tree.cluster_queues() {
        for (key, used) in tree.usage(id).iter() {
            let available = tree.available(id, key);
            let potential = tree.potential_available(id, key);
            if available < Amount::ZERO || used > potential {
                return Err(format!(
                    "{name} {key:?}: usage {used:?}, available {available:?}, potential {potential:?}"
                ));
            }
        }
    }
    Ok(())
}

/// Whether the preemptor's ClusterQueue policy allows `reason` on the victim.
fn allowed(
    policy: &ClusterQueuePreemption,
    preemptor: &PreemptingWorkload,
    victim: &AdmittedWorkload,
    reason: PreemptionReason,
) -> bool {
    let same_queue = victim.cluster_queue == preemptor.cluster_queue;
    match reason {
        PreemptionReason::InClusterQueue => {
            same_queue
                && satisfies_preemption_policy(preemptor, victim, policy.within_cluster_queue)
        }
        PreemptionReason::InCohortReclamation | PreemptionReason::InCohortFairSharing => {
            !same_queue
                && satisfies_preemption_policy(preemptor, victim, policy.reclaim_within_cohort)
        }
        PreemptionReason::InCohortReclaimWhileBorrowing => {
            !same_queue
                && policy.borrow_within_cohort.is_some_and(|borrow| {
                    satisfies_preemption_policy(preemptor, victim, borrow.policy)
                        && borrow
                            .max_priority_threshold
                            .is_none_or(|threshold| victim.priority <= i64::from(threshold))
                })
        }
    }
}

pub(super) fn case_of(
    queues: &[QueueDef],
    cohort_quota: u8,
    admitted: &[Wl],
    pending: &[Wl],
    fair_sharing: bool,
) -> Case {
    let cluster_queues: Vec<Cq> = queues
        .iter()
        .enumerate()
        .map(|(i, def)| cluster_queue_of(i, def))
        .collect();
    let cohort_quotas: &'static [Q] = Box::leak(Box::new([(
        "default",
        "cpu",
        leak(cohort_quota.to_string()),
        "",
        "",
    )]));
    Case {
        name: "property",
        fair_sharing,
        cohorts: vec![crate::testing::cohort("prop", "", cohort_quotas)],
        local_queues: cluster_queues
            .iter()
            .enumerate()
            .map(|(i, c)| ("default", leak(format!("lq-{i}")), c.name))
            .collect(),
        cluster_queues,
        workloads: admitted.iter().chain(pending).cloned().collect(),
        ..Case::default()
    }
}

/// The admitted Workloads among `admitted` that fit, in order, on an empty snapshot of the
/// queues.
pub(super) fn fitting_admitted(
    queues: &[QueueDef],
    cohort_quota: u8,
    admitted: &[WorkloadDef],
    fair_sharing: bool,
    now: SystemTime,
) -> Vec<Wl> {
    let (empty, _) = prepare(&case_of(queues, cohort_quota, &[], &[], fair_sharing), now);
    let mut tree = empty.tree;
    let mut fitting = Vec::new();
    for (i, def) in admitted.iter().enumerate() {
        let queue_index = def.0 % queues.len();
        let name = format!("p{queue_index}");
        let Some(id) = tree.cluster_queue(&name) else {
            continue;
        };
        let usage: FlavorResourceQuantities = [(
            FlavorResource::new("default", "cpu"),
            Amount::new(i64::from(def.2) * 1000),
        )]
        .into_iter()
        .collect();
        if !tree.fits(id, &usage) {
            continue;
        }
        tree.add_usages(id, &usage);
        let resources: &'static [(&str, &str, &str)] =
            Box::leak(Box::new([("cpu", "default", leak(def.2.to_string()))]));
        let workload = workload_of("a", i, def, queues.len());
        fitting.push(workload.admitted(leak(name), &[("main", 1, resources)]));
    }
    fitting
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn cycle_stays_within_quota_and_policy(
        queues in prop::collection::vec(queue_def(), 1..4),
        cohort_quota in 0u8..4,
        admitted in prop::collection::vec(workload_def(), 0..7),
        pending in prop::collection::vec(workload_def(), 1..6),
        fair_sharing in any::<bool>(),
    ) {
        let now = test_now();
        let fitting = fitting_admitted(&queues, cohort_quota, &admitted, fair_sharing, now);
        let pending: Vec<Wl> = pending
            .iter()
            .enumerate()
            .map(|(i, def)| workload_of("w", i, def, queues.len()))
            .collect();
        let case = case_of(&queues, cohort_quota, &fitting, &pending, fair_sharing);
        let (mut snapshot, mut queue_manager) = prepare(&case, now);
        prop_assert_eq!(within_quota(&snapshot.tree), Ok(()), "before the cycle");
        let before = snapshot.tree.clone();
        let admitted_before: BTreeMap<String, AdmittedWorkload> = snapshot
            .admitted
            .iter()
            .map(|w| (w.key(), w.clone()))
            .collect();
        let policies: BTreeMap<String, ClusterQueuePreemption> = snapshot
            .cluster_queues
            .iter()
            .map(|(name, cq)| (name.clone(), cq.policy.preemption))
            .collect();
        let decisions = schedule(&mut snapshot, &mut queue_manager, &KueuePreemption, now);

        let mut after = before;
        let mut victims = BTreeSet::new();
        for decision in &decisions {
            match decision {
                Decision::Admit { admission, .. } => {
                    let id = after.cluster_queue(&admission.cluster_queue);
                    prop_assert!(id.is_some(), "admitted to an unknown ClusterQueue");
                    if let Some(id) = id {
                        after.add_usages(id, &usage_of(admission));
                    }
                }
                Decision::Preempt { workload, victims: targets, .. } => {
                    let Some(wl) = pending.iter().find(|w| &w.key() == workload) else {
                        return Err(TestCaseError::fail(format!("unknown preemptor {workload}")));
                    };
                    let queue = case
                        .local_queues
                        .iter()
                        .find(|(_, lq, _)| *lq == wl.queue)
                        .map(|(_, _, cq)| (*cq).to_owned())
                        .unwrap_or_default();
                    let preemptor = PreemptingWorkload {
                        uid: wl.key(),
                        job_uid: None,
                        priority: i64::from(wl.priority),
                        queue_timestamp: wl.creation(),
                        cluster_queue: queue.clone(),
                    };
                    let policy = policies.get(&queue).copied().unwrap_or_default();
                    for target in targets {
                        prop_assert!(victims.insert(target.workload.clone()), "{} named twice", target.workload);
                        let Some(victim) = admitted_before.get(&target.workload) else {
                            return Err(TestCaseError::fail(format!("{} was not admitted", target.workload)));
                        };
                        prop_assert!(
                            allowed(&policy, &preemptor, victim, target.reason),
                            "{workload} in {queue} may not preempt {} ({:?}) for {:?} under {:?}",
                            target.workload, victim, target.reason, policy
                        );
                        if let Some(id) = after.cluster_queue(&victim.cluster_queue) {
                            after.remove_usages(id, &victim.usage);
                        }
                    }
                }
                Decision::Requeue { .. } => {}
            }
        }
        prop_assert_eq!(within_quota(&after), Ok(()), "after the cycle: {:?}", decisions);
    }
}
