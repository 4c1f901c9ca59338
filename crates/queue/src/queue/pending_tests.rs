//! The pending set against a plain model of it: every Workload with its flag, pops as a scan
//! of the active ones with `QueueOrdering::compare` would make them.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use proptest::prelude::*;

use super::*;
use crate::queue::EvictionCause;
use crate::workload::{PodSet, Workload, WorkloadInfo};

#[test]
fn uid_prefixes_order_as_the_strings_do() {
    let table = [
        ("", "a"),
        ("a", "ab"),
        ("ab", "ab\u{0}"),
        ("abcdefgh", "abcdefghi"),
        ("abcdefgh1", "abcdefgh2"),
        ("0f3c", "0f3d"),
        ("zz", "é"),
    ];
    for (lower, higher) in table {
        assert!(lower < higher, "{lower:?} < {higher:?}");
        assert!(
            uid_prefix(lower) <= uid_prefix(higher),
            "{lower:?} {higher:?}"
        );
    }
}

proptest! {
    #[test]
    fn a_differing_prefix_decides_as_the_strings_do(a in ".{0,12}", b in ".{0,12}") {
        match uid_prefix(&a).cmp(&uid_prefix(&b)) {
            Ordering::Equal => {}
            decided => prop_assert_eq!(decided, a.cmp(&b)),
        }
    }
}

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + seconds)
}

/// A Workload: its name's number (its namespace is that number's parity), LocalQueue,
/// priority, milli-CPU (with the priority, its shape), creation, and when it was evicted
/// by a PodsReady timeout, if it was.
#[derive(Debug, Clone)]
struct Spec {
    name: u8,
    local_queue: u8,
    priority: i32,
    cpu: i64,
    created: u64,
    evicted: Option<u64>,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        0u8..10,
        0u8..2,
        0i32..3,
        prop_oneof![Just(500i64), Just(1000)],
        0u64..4,
        proptest::option::of(0u64..6),
    )
        .prop_map(
            |(name, local_queue, priority, cpu, created, evicted)| Spec {
                name,
                local_queue,
                priority,
                cpu,
                created,
                evicted,
            },
        )
}

fn key(name: u8) -> String {
    format!("ns{}/w{name}", name % 2)
}

fn workload(spec: &Spec) -> QueuedWorkload {
    QueuedWorkload {
        info: WorkloadInfo::new(Workload {
            namespace: format!("ns{}", spec.name % 2),
            name: format!("w{}", spec.name),
            priority: spec.priority,
            pod_sets: vec![PodSet {
                name: "main".into(),
                count: 1,
                requests: [("cpu".to_owned(), spec.cpu)].into(),
                ..Default::default()
            }],
            ..Workload::default()
        }),
        // UIDs share their first bytes, so that ties reach the strings.
        uid: format!("uid-000{}", spec.name % 4),
        job_uid: None,
        generation: 1,
        local_queue: format!("lq{}", spec.local_queue),
        user: None,
        creation: at(spec.created),
        eviction: spec
            .evicted
            .map(|seconds| (EvictionCause::PodsReadyTimeout, at(seconds))),
        requeue_at: None,
        requeue_held: false,
        last_assignment_generation: 0,
    }
}

#[derive(Debug, Clone)]
enum Step {
    Insert(Spec, bool),
    Remove(u8),
    Park(u8),
    /// Parks the equivalents of a representative of this shape, all but one name.
    ParkEquivalents(Spec, Option<u8>),
    ActivateOne(u8),
    /// Activates the inadmissible Workloads of one namespace, or all.
    Activate(Option<u8>),
    /// Records that a Workload is held as a copy of one of its two sources.
    SetSource(u8, bool),
    /// Asks whether a Workload is held as a copy of one of its sources.
    HoldsCopy(u8, bool),
    /// Pops with this timestamp, LocalQueue usage (fair sharing) and sticky name.
    Pop(bool, Option<(u8, u8)>, Option<u8>),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (spec(), any::<bool>()).prop_map(|(s, inadmissible)| Step::Insert(s, inadmissible)),
        1 => (0u8..10).prop_map(Step::Remove),
        2 => (0u8..10).prop_map(Step::Park),
        2 => (spec(), proptest::option::of(0u8..10))
            .prop_map(|(s, exempt)| Step::ParkEquivalents(s, exempt)),
        1 => (0u8..10).prop_map(Step::ActivateOne),
        2 => proptest::option::of(0u8..2).prop_map(Step::Activate),
        1 => (0u8..10, any::<bool>()).prop_map(|(name, second)| Step::SetSource(name, second)),
        1 => (0u8..10, any::<bool>()).prop_map(|(name, second)| Step::HoldsCopy(name, second)),
        3 => (
            any::<bool>(),
            proptest::option::of((0u8..3, 0u8..3)),
            proptest::option::of(0u8..10),
        )
            .prop_map(|(creation, usage, sticky)| Step::Pop(creation, usage, sticky)),
    ]
}

/// Every Workload held, with whether it is inadmissible and which of its sources it was
/// copied from.
type Model = BTreeMap<String, (QueuedWorkload, bool, Option<bool>)>;

/// Two sources for each name (a Workload's states at two versions).
fn sources() -> Vec<[Source; 2]> {
    (0..10)
        .map(|name: u8| {
            [
                Arc::new((name, false)) as Source,
                Arc::new((name, true)) as Source,
            ]
        })
        .collect()
}

fn same_shape(a: &QueuedWorkload, b: &QueuedWorkload) -> bool {
    a.info.workload.priority == b.info.workload.priority
        && a.info.workload.pod_sets == b.info.workload.pod_sets
}

fn ordering(creation: bool, usage: Option<(u8, u8)>) -> QueueOrdering {
    let mut ordering = QueueOrdering {
        timestamp: if creation {
            RequeuingTimestamp::Creation
        } else {
            RequeuingTimestamp::Eviction
        },
        ..QueueOrdering::default()
    };
    if let Some(usage) = usage {
        for namespace in ["ns0", "ns1"] {
            let local_queues = ordering
                .local_queue_usage
                .entry(namespace.to_owned())
                .or_default();
            local_queues.insert("lq0".into(), f64::from(usage.0));
            local_queues.insert("lq1".into(), f64::from(usage.1));
        }
    }
    ordering
}

/// Carries `step` out on the model; answers what a pop or an activation answers.
fn model_step(model: &mut Model, step: &Step) -> Option<String> {
    match step {
        Step::Insert(spec, inadmissible) => {
            model.insert(key(spec.name), (workload(spec), *inadmissible, None));
            None
        }
        Step::Remove(name) => {
            model.remove(&key(*name));
            None
        }
        Step::Park(name) => {
            let parked = match model.get_mut(&key(*name)) {
                Some((_, inadmissible, _)) if !*inadmissible => {
                    *inadmissible = true;
                    true
                }
                _ => false,
            };
            Some(parked.to_string())
        }
        Step::ParkEquivalents(spec, exempt) => {
            let representative = workload(spec);
            let exempt = exempt.map(key);
            for (key, (workload, inadmissible, _)) in model.iter_mut() {
                if same_shape(workload, &representative) && exempt.as_ref() != Some(key) {
                    *inadmissible = true;
                }
            }
            None
        }
        Step::ActivateOne(name) => {
            if let Some((_, inadmissible, _)) = model.get_mut(&key(*name)) {
                *inadmissible = false;
            }
            None
        }
        Step::Activate(namespace) => {
            let mut moved = 0;
            for (workload, inadmissible, _) in model.values_mut() {
                let ready = namespace
                    .is_none_or(|ns| workload.info.workload.namespace == format!("ns{ns}"));
                if *inadmissible && ready {
                    *inadmissible = false;
                    moved += 1;
                }
            }
            Some(moved.to_string())
        }
        Step::SetSource(name, second) => {
            if let Some((_, _, source)) = model.get_mut(&key(*name)) {
                *source = Some(*second);
            }
            None
        }
        Step::HoldsCopy(name, second) => {
            let holds = model
                .get(&key(*name))
                .is_some_and(|(_, _, source)| *source == Some(*second));
            Some(holds.to_string())
        }
        Step::Pop(creation, usage, sticky) => {
            let ordering = ordering(*creation, *usage);
            let sticky = sticky.map(key);
            let head = model
                .values()
                .filter(|(_, inadmissible, _)| !inadmissible)
                .map(|(workload, _, _)| workload)
                .min_by(|a, b| ordering.compare(a, b, sticky.as_deref()))
                .map(QueuedWorkload::key);
            if let Some(head) = &head {
                model.remove(head);
            }
            Some(format!("{head:?}"))
        }
    }
}

/// Carries `step` out on the pending set; answers what the model's step answers.
fn pending_step(
    pending: &mut PendingWorkloads,
    sources: &[[Source; 2]],
    step: &Step,
) -> Option<String> {
    match step {
        Step::Insert(spec, inadmissible) => {
            pending.insert(key(spec.name), Box::new(workload(spec)), *inadmissible);
            None
        }
        Step::Remove(name) => {
            pending.remove(&key(*name));
            None
        }
        Step::Park(name) => Some(pending.park(&key(*name)).to_string()),
        Step::ParkEquivalents(spec, exempt) => {
            pending.park_equivalents(&workload(spec), exempt.map(key).as_deref());
            None
        }
        Step::ActivateOne(name) => {
            pending.activate_one(&key(*name));
            None
        }
        Step::Activate(namespace) => {
            let moved = pending.activate(|w| {
                namespace.is_none_or(|ns| w.info.workload.namespace == format!("ns{ns}"))
            });
            Some(moved.to_string())
        }
        Step::SetSource(name, second) => {
            pending.set_source(
                &key(*name),
                &sources[usize::from(*name)][usize::from(*second)],
            );
            None
        }
        Step::HoldsCopy(name, second) => {
            let source = &sources[usize::from(*name)][usize::from(*second)];
            Some(pending.holds_copy_of(source).to_string())
        }
        Step::Pop(creation, usage, sticky) => {
            let ordering = ordering(*creation, *usage);
            let sticky = sticky.map(key);
            let head = pending.pop(&ordering, sticky.as_deref()).map(|w| w.key());
            Some(format!("{head:?}"))
        }
    }
}

/// What the pending set keeps about its orders holds: each order counts its active
/// Workloads, every active Workload's key is in the order its slot names, every key in an
/// order names a Workload of that order, and every order is reachable by its LocalQueue and
/// shape; every copy's source is found by its address.
fn orders_hold(pending: &PendingWorkloads) -> Result<(), TestCaseError> {
    for (number, order) in pending.orders.iter() {
        prop_assert!(!order.keys.is_empty(), "order {} is empty", number);
        let mut active = 0;
        for slot in order.keys.values() {
            let held = &pending.slots[*slot];
            prop_assert_eq!(held.order, Some(number));
            active += usize::from(!held.inadmissible);
        }
        prop_assert_eq!(order.active, active, "order {}", number);
    }
    for (_, held) in pending.slots.iter() {
        prop_assert!(
            held.inadmissible || held.order.is_some(),
            "an active Workload unindexed"
        );
        if let Some(number) = held.order {
            let workload = &held.workload;
            let listed = pending
                .by_local_queue
                .get(&workload.info.workload.namespace)
                .and_then(|local_queues| local_queues.get(&workload.local_queue))
                .and_then(|shapes| shapes.get(&held.shape));
            prop_assert_eq!(listed, Some(&number));
        }
    }
    let listed = pending
        .by_local_queue
        .values()
        .flat_map(BTreeMap::values)
        .map(BTreeMap::len)
        .sum::<usize>();
    prop_assert_eq!(listed, pending.orders.len());
    for (address, slot) in &pending.by_source {
        let source = pending.slots[*slot].source.as_ref().map(address_of);
        prop_assert_eq!(source, Some(*address));
    }
    let copies = pending
        .slots
        .iter()
        .filter(|(_, p)| p.source.is_some())
        .count();
    prop_assert_eq!(copies, pending.by_source.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Inserts, removals, parks one by one and by shape, retries, pops and the sources of
    /// copies, in any order:
    /// the pending set answers every step as the model does, and holds the same Workloads
    /// with the same flags after each.
    #[test]
    fn the_pending_set_answers_as_a_scan_of_its_workloads(steps in proptest::collection::vec(step(), 1..60)) {
        let mut model = Model::new();
        let mut pending = PendingWorkloads::default();
        let sources = sources();
        for (index, step) in steps.iter().enumerate() {
            let want = model_step(&mut model, step);
            let got = pending_step(&mut pending, &sources, step);
            prop_assert_eq!(&got, &want, "step {} {:?}", index, step);
            let held: Vec<(String, bool)> = pending
                .keys()
                .map(|key| (key.clone(), pending.is_inadmissible(key)))
                .collect();
            let modelled: Vec<(String, bool)> = model
                .iter()
                .map(|(key, (_, inadmissible, _))| (key.clone(), *inadmissible))
                .collect();
            prop_assert_eq!(held, modelled, "after step {} {:?}", index, step);
            orders_hold(&pending)?;
        }
    }
}
