// Not upstream tables: properties of the "Beyond Kueue" options over random small cohorts.
// - Several heads per ClusterQueue: one cycle with N heads decides what N successive Kueue
//   cycles (one head each) decide when nothing else changes between them: the same decisions
//   in the same order, the same queues, admitted Workloads and usage afterwards. Within a
//   ClusterQueue no Workload is admitted before every Workload ordered ahead of it was tried
//   in the cycle (or set aside untried as the equivalent of one that failed), and under StrictFIFO the admitted ones are a prefix of the queue.
// - Determinism: listing the admitted Workloads in another order, even with equal UIDs,
//   changes no decision.
// - No flapping: with `prevent_flapping`, a fair-sharing preemption that took one Workload
//   from a ClusterQueue cannot be reversed by that Workload through fair sharing on the next
//   cycle, once the preemptor is admitted.

use proptest::prelude::*;

use super::properties::{
    QueueDef, WorkloadDef, case_of, fitting_admitted, leak, queue_def, usage_of, workload_def,
    workload_of,
};
use super::*;

/// The snapshot Kueue's next cycle reads after `decisions` when nothing else changed: the
/// admissions join the usage and the candidates (reserved at `now`), this cycle's
/// reservations are gone, the victims are evicted. Written from the decisions and the
/// Workloads' definitions, independently of the cycle's own refresh.
fn next_cycle_snapshot(
    snapshot: &mut Snapshot,
    committed: &mut Tree,
    decisions: &[Decision],
    pending: &[Wl],
    now: SystemTime,
) {
    for decision in decisions {
        match decision {
            Decision::Admit {
                workload,
                admission,
            } => {
                let usage = usage_of(admission);
                if let Some(id) = committed.cluster_queue(&admission.cluster_queue) {
                    committed.add_usages(id, &usage);
                }
                let Some(wl) = pending.iter().find(|w| &w.key() == workload) else {
                    continue;
                };
                snapshot.admitted.push(AdmittedWorkload {
                    namespace: wl.namespace.into(),
                    name: wl.name.into(),
                    uid: wl.uid.map_or_else(|| wl.key(), str::to_owned),
                    cluster_queue: admission.cluster_queue.clone(),
                    local_queue: wl.queue.into(),
                    user: None,
                    priority: i64::from(wl.priority),
                    queue_timestamp: wl.creation(),
                    quota_reserved_at: Some(now),
                    usage,
                    evicted: false,
                });
            }
            Decision::Preempt { victims, .. } => {
                for victim in victims {
                    for admitted in &mut snapshot.admitted {
                        if admitted.key() == victim.workload {
                            admitted.evicted = true;
                        }
                    }
                }
            }
            Decision::Requeue { .. } => {}
        }
    }
    snapshot.tree = committed.clone();
}

fn usage_by_cluster_queue(tree: &Tree) -> BTreeMap<String, FlavorResourceQuantities> {
    tree.cluster_queues()
        .map(|(name, id)| (name.to_owned(), tree.usage(id).clone()))
        .collect()
}

fn sorted_admitted(snapshot: &Snapshot) -> Vec<AdmittedWorkload> {
    let mut admitted = snapshot.admitted.clone();
    admitted.sort_by_key(AdmittedWorkload::key);
    admitted
}

fn with_uid(workload: Wl, same_uid: bool) -> Wl {
    if same_uid {
        workload.uid("same", "job")
    } else {
        workload
    }
}

#[allow(clippy::too_many_arguments)]
fn rounds_case(
    queues: &[QueueDef],
    cohort_quota: u8,
    admitted: &[WorkloadDef],
    pending: &[WorkloadDef],
    fair_sharing: bool,
    strict: bool,
    same_uid: bool,
    now: SystemTime,
) -> (Case, Vec<Wl>) {
    let fitting: Vec<Wl> = fitting_admitted(queues, cohort_quota, admitted, fair_sharing, now)
        .into_iter()
        .map(|w| with_uid(w, same_uid))
        .collect();
    let pending: Vec<Wl> = pending
        .iter()
        .enumerate()
        .map(|(i, def)| with_uid(workload_of("w", i, def, queues.len()), same_uid))
        .collect();
    let mut case = case_of(queues, cohort_quota, &fitting, &pending, fair_sharing);
    for queue in &mut case.cluster_queues {
        queue.strategy = if strict {
            QueueingStrategy::StrictFifo
        } else {
            QueueingStrategy::BestEffortFifo
        };
    }
    (case, pending)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    #[allow(clippy::too_many_arguments)]
    fn n_heads_decide_as_n_successive_kueue_cycles(
        queues in prop::collection::vec(queue_def(), 1..4),
        cohort_quota in 0u8..4,
        admitted in prop::collection::vec(workload_def(), 0..7),
        pending in prop::collection::vec(workload_def(), 1..9),
        fair_sharing in any::<bool>(),
        strict in any::<bool>(),
        same_uid in any::<bool>(),
        heads in 2usize..5,
    ) {
        let now = test_now();
        let (mut case, pending) = rounds_case(
            &queues, cohort_quota, &admitted, &pending, fair_sharing, strict, same_uid, now,
        );
        case.heads_per_cycle = heads;
        let (mut snapshot, mut queue_manager) = prepare(&case, now);
        let order_before = queue_manager.dump();
        let decisions = schedule(&mut snapshot, &mut queue_manager, &KueuePreemption, now);

        // The same with the admitted Workloads listed backwards.
        let (mut reversed, mut reversed_queues) = prepare(&case, now);
        reversed.admitted.reverse();
        let again = schedule(&mut reversed, &mut reversed_queues, &KueuePreemption, now);
        prop_assert_eq!(&again, &decisions, "admitted listed backwards");

        // N successive Kueue cycles.
        case.heads_per_cycle = 1;
        let (mut kueue, mut kueue_queues) = prepare(&case, now);
        let mut committed = kueue.tree.clone();
        let mut successive: Vec<Decision> = Vec::new();
        let mut last: Vec<Decision> = Vec::new();
        for cycle in 0..heads {
            if cycle > 0 {
                next_cycle_snapshot(&mut kueue, &mut committed, &last, &pending, now);
            }
            last = schedule(&mut kueue, &mut kueue_queues, &KueuePreemption, now);
            successive.extend(last.iter().cloned());
        }
        prop_assert_eq!(&decisions, &successive, "decisions");
        prop_assert_eq!(queue_manager.dump(), kueue_queues.dump(), "active");
        prop_assert_eq!(
            queue_manager.dump_inadmissible(),
            kueue_queues.dump_inadmissible(),
            "inadmissible"
        );
        prop_assert_eq!(sorted_admitted(&snapshot), sorted_admitted(&kueue), "admitted");
        prop_assert_eq!(
            usage_by_cluster_queue(&snapshot.tree),
            usage_by_cluster_queue(&kueue.tree),
            "usage"
        );

        // Queue order: nothing admitted before everything ahead of it was tried, or set
        // aside untried as the equivalent of one that was (SchedulingEquivalenceHashing).
        let bypassed: BTreeSet<WorkloadKey> = queue_manager
            .dump_inadmissible()
            .into_values()
            .flatten()
            .collect();
        let decided: BTreeSet<&WorkloadKey> = decisions
            .iter()
            .map(|decision| match decision {
                Decision::Admit { workload, .. }
                | Decision::Preempt { workload, .. }
                | Decision::Requeue { workload, .. } => workload,
            })
            .collect();
        let admitted_now: BTreeSet<&WorkloadKey> = decisions
            .iter()
            .filter_map(|decision| match decision {
                Decision::Admit { workload, .. } => Some(workload),
                _ => None,
            })
            .collect();
        for (cq, order) in &order_before {
            for (position, key) in order.iter().enumerate() {
                if !admitted_now.contains(key) {
                    continue;
                }
                for ahead in &order[..position] {
                    prop_assert!(
                        decided.contains(ahead) || bypassed.contains(ahead),
                        "{cq}: {key} admitted before {ahead} was tried"
                    );
                    if strict {
                        prop_assert!(admitted_now.contains(ahead), "{cq} (StrictFIFO): {key} admitted ahead of {ahead}");
                    }
                }
            }
        }
    }
}

/// (fs-a cpu, fs-a gpu, fs-b cpu, fs-b gpu nominal; Cohort cpu, gpu).
type PairDef = (u8, u8, u8, u8, u8, u8);

/// Pair quotas, half of them symmetric (where equal shares, and Kueue's flapping, are common).
fn pair_def() -> impl Strategy<Value = PairDef> {
    (
        any::<bool>(),
        0u8..4,
        0u8..4,
        0u8..4,
        0u8..4,
        0u8..3,
        0u8..12,
    )
        .prop_map(|(symmetric, a_cpu, a_gpu, b_cpu, b_gpu, cpu, gpu)| {
            if symmetric {
                (a_cpu, a_gpu, a_cpu, a_gpu, cpu, gpu)
            } else {
                (a_cpu, a_gpu, b_cpu, b_gpu, cpu, gpu)
            }
        })
}

/// (in fs-b, priority, cpu, gpu, reserved seconds ago).
type PairWorkloadDef = (bool, i8, u8, u8, u8);

fn pair_workload_def() -> impl Strategy<Value = PairWorkloadDef> {
    (any::<bool>(), -1i8..2, 0u8..4, 0u8..3, 1u8..60)
}

fn pair_queue(name: &'static str, cpu: u8, gpu: u8) -> Cq {
    let quotas: &'static [Q] = Box::leak(Box::new([
        ("default", "cpu", leak(cpu.to_string()), "", ""),
        ("default", "example.com/gpu", leak(gpu.to_string()), "", ""),
    ]));
    let mut queue = cq(name, "fs", None, false, &[quotas]);
    queue.preemption.reclaim_within_cohort = PreemptionPolicy::Any;
    queue
}

/// A Workload of the pair, pending or admitted with its requests.
fn pair_workload(name: String, def: &PairWorkloadDef, admitted: bool) -> Wl {
    let (in_b, priority, cpu, gpu, reserved) = *def;
    let (cq, lq) = if in_b {
        ("fs-b", "lq-b")
    } else {
        ("fs-a", "lq-a")
    };
    let (cpu, gpu) = (leak(cpu.to_string()), leak(gpu.to_string()));
    let workload = wl("default", leak(name), lq)
        .priority(i32::from(priority))
        .req("cpu", cpu)
        .req("example.com/gpu", gpu)
        .reserved(-i64::from(reserved));
    if !admitted {
        return workload;
    }
    let resources: &'static [(&str, &str, &str)] = Box::leak(Box::new([
        ("cpu", "default", cpu),
        ("example.com/gpu", "default", gpu),
    ]));
    workload.admitted(cq, &[("main", 1, resources)])
}

fn pair_case(quotas: &PairDef, workloads: Vec<Wl>) -> Case {
    let (a_cpu, a_gpu, b_cpu, b_gpu, cpu, gpu) = *quotas;
    let cohort: &'static [Q] = Box::leak(Box::new([
        ("default", "cpu", leak(cpu.to_string()), "", ""),
        ("default", "example.com/gpu", leak(gpu.to_string()), "", ""),
    ]));
    Case {
        name: "no flapping",
        fair_sharing: true,
        prevent_flapping: true,
        cluster_queues: vec![
            pair_queue("fs-a", a_cpu, a_gpu),
            pair_queue("fs-b", b_cpu, b_gpu),
        ],
        cohorts: vec![crate::testing::cohort("fs", "", cohort)],
        local_queues: vec![("default", "lq-a", "fs-a"), ("default", "lq-b", "fs-b")],
        workloads,
        ..Case::default()
    }
}

/// The workloads of `defs` that fit when admitted in order.
fn fitting_pair(quotas: &PairDef, defs: &[PairWorkloadDef], now: SystemTime) -> Vec<Wl> {
    let (empty, _) = prepare(&pair_case(quotas, Vec::new()), now);
    let mut tree = empty.tree;
    let mut fitting = Vec::new();
    for (i, def) in defs.iter().enumerate() {
        let workload = pair_workload(format!("a{i}"), def, true);
        let Some(admitted) = workload.admitted_workload(now) else {
            continue;
        };
        let Some(id) = tree.cluster_queue(&admitted.cluster_queue) else {
            continue;
        };
        if tree.fits(id, &admitted.usage) {
            tree.add_usages(id, &admitted.usage);
            fitting.push(workload);
        }
    }
    fitting
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn fair_preemption_is_not_reversed_on_the_next_cycle(
        quotas in pair_def(),
        background in 0u8..8,
        admitted in prop::collection::vec(pair_workload_def(), 1..8),
        incoming in (-1i8..2, 1u8..4, 0u8..3),
    ) {
        let now = test_now();
        // Equal gpu-only background Workloads in both (equal dominant shares are common).
        let mut defs = vec![(false, 0, 0, background, 59), (true, 0, 0, background, 59)];
        defs.extend(admitted);
        let fitting = fitting_pair(&quotas, &defs, now);
        let (priority, cpu, gpu) = incoming;
        let incoming_def = (false, priority, cpu, gpu, 0);
        let mut workloads = fitting.clone();
        workloads.push(pair_workload("x".to_owned(), &incoming_def, false));
        let (mut snapshot, mut queues) = prepare(&pair_case(&quotas, workloads), now);
        let decisions = schedule(&mut snapshot, &mut queues, &KueuePreemption, now);
        let victims: Vec<&Target> = decisions
            .iter()
            .filter_map(|decision| match decision {
                Decision::Preempt { victims, .. } => Some(victims),
                _ => None,
            })
            .flatten()
            .collect();
        let taken_from_b: Vec<&&Target> = victims
            .iter()
            .filter(|t| t.cluster_queue == "fs-b")
            .collect();
        // Only a single fair-sharing victim of fs-b is the case the guarantee covers.
        let [victim] = taken_from_b.as_slice() else {
            return Ok(());
        };
        prop_assume!(victim.reason == PreemptionReason::InCohortFairSharing);
        // Next cycle: the victims are gone, x is admitted, the victim is pending again.
        let gone: BTreeSet<&str> = victims.iter().map(|t| t.workload.as_str()).collect();
        let mut next: Vec<Wl> = fitting
            .iter()
            .filter(|w| !gone.contains(w.key().as_str()))
            .cloned()
            .collect();
        next.push(pair_workload("x".to_owned(), &incoming_def, true));
        let returning = fitting
            .iter()
            .find(|w| w.key() == victim.workload)
            .map(|w| Wl { admitted: None, ..w.clone() });
        let Some(returning) = returning else {
            return Err(TestCaseError::fail("victim was not admitted"));
        };
        next.push(returning);
        let (mut snapshot, mut queues) = prepare(&pair_case(&quotas, next), now);
        let decisions = schedule(&mut snapshot, &mut queues, &KueuePreemption, now);
        for decision in &decisions {
            if let Decision::Preempt { victims, .. } = decision {
                for target in victims {
                    prop_assert!(
                        !(target.cluster_queue == "fs-a"
                            && target.reason == PreemptionReason::InCohortFairSharing),
                        "{} took back {} by fair sharing", victim.workload, target.workload
                    );
                }
            }
        }
    }
}
