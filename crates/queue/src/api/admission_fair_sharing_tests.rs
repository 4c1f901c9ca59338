//! Table tests of the ledger: seeding from status, sampling and decay, entry penalties pushed,
//! settled and dropped, the ordering usage, the status, and a pass ordering two LocalQueues
//! by weighted usage (upstream: pkg/controller/core/localqueue_controller_test.go's AFS cases,
//! pkg/cache/queue/afs/*_test.go, test/integration/singlecluster/scheduler/fairsharing's
//! admission fair sharing cases).

use std::time::Duration;

use super::*;

const INTERVAL: u64 = 300;

fn config(half_life: u64) -> AdmissionFairSharing {
    AdmissionFairSharing {
        usage_half_life: Duration::from_secs(half_life),
        usage_sampling_interval: Duration::from_secs(INTERVAL),
        resource_weights: BTreeMap::new(),
    }
}

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + seconds)
}

fn usage(entries: &[(&str, f64)]) -> ResourceUsage {
    entries
        .iter()
        .map(|(name, value)| ((*name).to_owned(), *value))
        .collect()
}

fn keys(keys: &[&str]) -> BTreeSet<String> {
    keys.iter().map(|k| (*k).to_owned()).collect()
}

fn observed(persisted: Option<ResourceUsage>, admitted: ResourceUsage) -> Observed {
    Observed {
        usage_based: true,
        weight: 1.0,
        persisted,
        admitted_usage: admitted,
        ..Observed::default()
    }
}

fn one(local_queue: Observed) -> BTreeMap<String, Observed> {
    BTreeMap::from([("ns/lq".to_owned(), local_queue)])
}

fn consumed(ledger: &Ledger) -> ResourceUsage {
    ledger.entries["ns/lq"].consumed.clone()
}

fn ordering(ledger: &Ledger, config: &AdmissionFairSharing) -> f64 {
    ledger.ordering_usage(config)["ns"]["lq"]
}

#[test]
fn sampling_decays_towards_the_admitted_usage_once_an_interval_has_passed() {
    struct Case {
        name: &'static str,
        half_life: u64,
        persisted: Option<ResourceUsage>,
        admitted: ResourceUsage,
        /// Seconds after the entry was seeded that the next pass runs.
        later: u64,
        want: ResourceUsage,
        want_sampled_at: u64,
    }
    let cases = [
        Case {
            name: "within the interval nothing is sampled",
            half_life: INTERVAL,
            persisted: Some(usage(&[("cpu", 4.0)])),
            admitted: usage(&[("cpu", 2.0)]),
            later: INTERVAL - 1,
            want: usage(&[("cpu", 4.0)]),
            want_sampled_at: 0,
        },
        Case {
            name: "one half-life halves the distance",
            half_life: INTERVAL,
            persisted: Some(usage(&[("cpu", 4.0)])),
            admitted: usage(&[("cpu", 2.0)]),
            later: INTERVAL,
            want: usage(&[("cpu", 3.0)]),
            want_sampled_at: INTERVAL,
        },
        Case {
            name: "two half-lives take three quarters",
            half_life: INTERVAL,
            persisted: None,
            admitted: usage(&[("nvidia.com/gpu", 8.0)]),
            later: 2 * INTERVAL,
            want: usage(&[("nvidia.com/gpu", 6.0)]),
            want_sampled_at: 2 * INTERVAL,
        },
        Case {
            name: "a resource no longer used decays",
            half_life: INTERVAL,
            persisted: Some(usage(&[("cpu", 4.0)])),
            admitted: usage(&[]),
            later: INTERVAL,
            want: usage(&[("cpu", 2.0)]),
            want_sampled_at: INTERVAL,
        },
        Case {
            name: "a zero half-life forgets",
            half_life: 0,
            persisted: Some(usage(&[("cpu", 4.0)])),
            admitted: usage(&[("cpu", 2.0)]),
            later: INTERVAL,
            want: usage(&[("cpu", 0.0)]),
            want_sampled_at: INTERVAL,
        },
    ];
    for case in cases {
        let config = config(case.half_life);
        let mut ledger = Ledger::default();
        let local_queue = observed(case.persisted.clone(), case.admitted.clone());
        ledger.observe(&one(local_queue.clone()), &config, at(0));
        // Seeded, then sampled at zero elapsed: what was persisted, the rest at zero.
        let seeded = case.persisted.clone().unwrap_or_default();
        for (resource, value) in consumed(&ledger) {
            let want = seeded.get(&resource).copied().unwrap_or(0.0);
            if case.half_life > 0 {
                assert_eq!(value, want, "{}: seeded {resource}", case.name);
            }
        }
        ledger.observe(&one(local_queue), &config, at(case.later));
        assert_eq!(consumed(&ledger), case.want, "{}", case.name);
        let entry = &ledger.entries["ns/lq"];
        assert_eq!(entry.sampled.1, at(case.want_sampled_at), "{}", case.name);
    }
}

#[test]
fn penalties_are_pushed_settled_into_consumed_and_dropped() {
    struct Case {
        name: &'static str,
        usage_based: bool,
        /// The Workload is admitted at the next pass (else still live, else gone).
        admitted: bool,
        live: bool,
        want_ordering_after_push: f64,
        want_consumed: ResourceUsage,
        want_ordering: f64,
    }
    let cases = [
        Case {
            name: "pushed, then settled when admitted",
            usage_based: true,
            admitted: true,
            live: true,
            // cpu 4 × alpha(300 s, 300 s) = 2.
            want_ordering_after_push: 2.0,
            // Decay at zero elapsed keeps 0; the penalty folds in.
            want_consumed: usage(&[("cpu", 2.0)]),
            want_ordering: 2.0,
        },
        Case {
            name: "still reserved and not admitted: stays pending",
            usage_based: true,
            admitted: false,
            live: true,
            want_ordering_after_push: 2.0,
            want_consumed: usage(&[]),
            want_ordering: 2.0,
        },
        Case {
            name: "gone before admission: dropped, nothing folded",
            usage_based: true,
            admitted: false,
            live: false,
            want_ordering_after_push: 2.0,
            want_consumed: usage(&[]),
            want_ordering: 0.0,
        },
        Case {
            name: "not usage based: never pushed",
            usage_based: false,
            admitted: true,
            live: true,
            want_ordering_after_push: 0.0,
            want_consumed: usage(&[]),
            want_ordering: 0.0,
        },
    ];
    for case in cases {
        let config = config(INTERVAL);
        let mut ledger = Ledger::default();
        let mut local_queue = observed(None, usage(&[]));
        local_queue.usage_based = case.usage_based;
        ledger.observe(&one(local_queue.clone()), &config, at(0));
        let requests = usage(&[("cpu", 4.0)]);
        ledger.push_penalty("ns/lq", "ns/w", &requests, &config);
        // Pushing again replaces, never stacks.
        ledger.push_penalty("ns/lq", "ns/w", &requests, &config);
        let usage_based = |ledger: &Ledger| {
            ledger
                .ordering_usage(&config)
                .get("ns")
                .and_then(|lqs| lqs.get("lq"))
                .copied()
                .unwrap_or(0.0)
        };
        assert_eq!(
            usage_based(&ledger),
            case.want_ordering_after_push,
            "{}: pushed",
            case.name
        );
        if case.admitted {
            local_queue.admitted = keys(&["ns/w"]);
        }
        if case.live {
            local_queue.live = keys(&["ns/w"]);
        }
        ledger.observe(&one(local_queue), &config, at(0));
        assert_eq!(consumed(&ledger), case.want_consumed, "{}", case.name);
        assert_eq!(usage_based(&ledger), case.want_ordering, "{}", case.name);
    }
}

#[test]
fn ordering_usage_weighs_resources_and_local_queues() {
    let mut config = config(INTERVAL);
    config.resource_weights = BTreeMap::from([("nvidia.com/gpu".to_owned(), 10.0)]);
    let cases = [
        ("weight 1", 1.0, 2.0 + 10.0),
        ("weight 4", 4.0, 12.0 / 4.0),
        ("weight 0 sorts last", 0.0, f64::INFINITY),
    ];
    for (name, weight, want) in cases {
        let mut ledger = Ledger::default();
        let mut local_queue = observed(
            Some(usage(&[("cpu", 2.0), ("nvidia.com/gpu", 1.0)])),
            usage(&[]),
        );
        local_queue.weight = weight;
        ledger.observe(&one(local_queue), &config, at(0));
        assert_eq!(ordering(&ledger, &config), want, "{name}");
    }
}

#[test]
fn local_queues_gone_leave_the_ledger_and_the_status_shows_the_last_sample() {
    let config = config(INTERVAL);
    let mut ledger = Ledger::default();
    let local_queue = observed(Some(usage(&[("cpu", 1.5)])), usage(&[("cpu", 0.5)]));
    ledger.observe(&one(local_queue.clone()), &config, at(0));
    assert_eq!(
        ledger.status("ns/lq"),
        Some(json!({"weightedShare": 0, "admissionFairSharingStatus": {
            "consumedResources": {"cpu": "1500m"},
            "lastUpdate": time::timestamp(at(0))}}))
    );
    ledger.observe(&one(local_queue), &config, at(INTERVAL));
    let status = ledger.status("ns/lq").expect("sampled");
    assert_eq!(
        status["admissionFairSharingStatus"]["consumedResources"],
        json!({"cpu": "1"})
    );
    assert_eq!(ledger.status("ns/other"), None);
    ledger.observe(&BTreeMap::new(), &config, at(INTERVAL));
    assert_eq!(ledger.status("ns/lq"), None);
}

#[test]
fn quantities_are_written_in_canonical_form_rounded_down_to_nanos() {
    let cases = [
        (3.0, "3"),
        (1.5, "1500m"),
        (0.066_967_008, "66967008n"),
        (2e9, "2G"),
        (0.0, "0"),
    ];
    for (value, want) in cases {
        assert_eq!(quantity_text(value), want, "{value}");
    }
}

// Upstream: pkg/controller/core/localqueue_controller_test.go, TestLocalQueueReconcile's
// "local queue decaying usage …" cases: an entry last updated 5m ago, a sample now, the
// status's consumedResources as Kueue writes them.
#[test]
fn localqueue_controller_decaying_usage_table() {
    type Case = (
        &'static str,
        u64,
        Vec<(&'static str, f64)>,
        Vec<(&'static str, f64)>,
        Value,
    );
    let cases: Vec<Case> = vec![
        (
            "decays if there is no running workloads",
            300,
            vec![("cpu", 8.0)],
            vec![],
            json!({"cpu": "4"}),
        ),
        (
            "sums the previous state and running workloads",
            300,
            vec![("cpu", 8.0)],
            vec![("cpu", 4.0)],
            json!({"cpu": "6"}),
        ),
        (
            "sums the usage from different flavors and resources",
            300,
            vec![("cpu", 8.0), ("GPU", 16.0)],
            vec![("cpu", 4.0), ("GPU", 4.0)],
            json!({"cpu": "6", "GPU": "10"}),
        ),
        (
            "half time twice larger than sampling",
            600,
            vec![("cpu", 8.0)],
            vec![("cpu", 4.0)],
            json!({"cpu": "6828427124n"}),
        ),
        (
            "with long half time",
            24 * 3600,
            vec![("cpu", 8.0)],
            vec![],
            json!({"cpu": "7980769063n"}),
        ),
    ];
    for (name, half_life, persisted, admitted, want) in cases {
        let config = config(half_life);
        let mut ledger = Ledger::default();
        let local_queue = observed(Some(usage(&persisted)), usage(&admitted));
        ledger.observe(&one(local_queue.clone()), &config, at(0));
        ledger.observe(&one(local_queue), &config, at(INTERVAL));
        let status = ledger.status("ns/lq").expect("an entry");
        assert_eq!(
            status["admissionFairSharingStatus"]["consumedResources"], want,
            "{name}"
        );
        assert_eq!(
            status["admissionFairSharingStatus"]["lastUpdate"],
            json!(time::timestamp(at(INTERVAL))),
            "{name}"
        );
    }
}
