//! Upstream's normalization tables (`horizontal_test.go`: `TestNormalizeDesiredReplicas`,
//! `TestScalingWithRules`, `TestStoreScaleEvents`, `TestNormalizeDesiredReplicasWithBehavior`),
//! with time an input instead of `time.Now()`.

use std::time::{Duration, SystemTime};

use super::normalize::{
    Arguments, Behavior, History, Policy, PolicyType, Rules, ScaleEvent, Select,
};

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn ago(seconds: u64) -> SystemTime {
    now() - Duration::from_secs(seconds)
}

fn recommendations(list: &[(i32, u64)]) -> Vec<(i32, SystemTime)> {
    list.iter().map(|&(r, seconds)| (r, ago(seconds))).collect()
}

/// Upstream's `generateScalingRules(pods, podsPeriod, percent, percentPeriod, window)`.
fn rules(pods: i32, pods_period: i32, percent: i32, percent_period: i32, window: i32) -> Rules {
    let mut policies = Vec::new();
    if pods != 0 {
        policies.push(Policy {
            kind: PolicyType::Pods,
            value: pods,
            period_seconds: pods_period,
        });
    }
    if percent != 0 {
        policies.push(Policy {
            kind: PolicyType::Percent,
            value: percent,
            period_seconds: percent_period,
        });
    }
    Rules {
        stabilization_window_seconds: Some(window),
        select: Select::Max,
        policies,
    }
}

/// Upstream's `generateEventsUniformDistribution`: events spread over the last `period`
/// seconds, each in the middle of its segment (whole seconds, as Go's conversion truncates).
fn uniform(changes: &[i32], period: u64) -> Vec<ScaleEvent> {
    let segment = period as f64 / changes.len() as f64;
    changes
        .iter()
        .enumerate()
        .map(|(i, &change)| {
            let back = (period as f64 - segment * (i as f64 + 1.0) + segment / 2.0) as u64;
            // Upstream's events are made an instant before the controller reads the clock.
            ScaleEvent {
                change,
                at: ago(back) - Duration::from_millis(1),
                outdated: false,
            }
        })
        .collect()
}

#[test]
fn normalize_desired_replicas_without_behavior() {
    // (name, recommendations (replicas, seconds ago), proposal, stabilized, log length)
    type Case = (&'static str, &'static [(i32, u64)], i32, i32, usize);
    let cases: &[Case] = &[
        ("empty log", &[], 5, 5, 1),
        ("stabilize", &[(4, 120), (5, 60)], 3, 5, 3),
        ("no stabilize", &[(1, 120), (2, 60)], 3, 3, 3),
        (
            "no stabilize - old recommendations",
            &[(10, 600), (9, 540)],
            3,
            3,
            2,
        ),
        (
            "stabilize - old recommendations",
            &[(10, 600), (4, 60), (5, 120), (9, 540)],
            3,
            5,
            4,
        ),
    ];
    for &(name, recs, proposal, expected, length) in cases {
        let mut history = History {
            recommendations: recommendations(recs),
            ..History::default()
        };
        let normalized = history.normalize(
            Arguments {
                behavior: None,
                min_replicas: 1,
                max_replicas: 100,
                current: 10,
                desired: proposal,
                downscale_stabilization: Duration::from_secs(300),
            },
            now(),
        );
        assert_eq!(normalized.replicas, expected, "{name}");
        assert_eq!(history.recommendations.len(), length, "{name}");
    }
}

#[test]
fn legacy_rules_bound_by_min_max_and_scale_up_limit() {
    use super::normalize::legacy_rules;
    // (current, desired, min, max) → (replicas, reason); the scale-up limit is max(2×, 4).
    let cases = [
        ((5, 7, 3, 8), (7, "DesiredWithinRange")),
        ((3, 1, 2, 8), (2, "TooFewReplicas")),
        ((20, 1000, 1, 10), (10, "TooManyReplicas")),
        ((3, 1000, 1, 2000), (6, "ScaleUpLimit")),
        ((1, 1000, 1, 2000), (4, "ScaleUpLimit")),
    ];
    for ((current, desired, min, max), (replicas, reason)) in cases {
        let (got, (got_reason, _)) = legacy_rules(current, desired, min, max);
        assert_eq!((got, got_reason), (replicas, reason), "{current}→{desired}");
    }
}

struct RateCase {
    name: &'static str,
    up_events: Vec<ScaleEvent>,
    down_events: Vec<ScaleEvent>,
    min: i32,
    max: i32,
    up: Option<Rules>,
    down: Option<Rules>,
    current: i32,
    desired: i32,
    expected: i32,
    condition: &'static str,
}

fn rate_case(
    name: &'static str,
    (min, max): (i32, i32),
    (current, desired): (i32, i32),
    (up, down): (Option<Rules>, Option<Rules>),
    (expected, condition): (i32, &'static str),
) -> RateCase {
    RateCase {
        name,
        up_events: Vec::new(),
        down_events: Vec::new(),
        min,
        max,
        up,
        down,
        current,
        desired,
        expected,
        condition,
    }
}

fn with_events(mut case: RateCase, up: Vec<ScaleEvent>, down: Vec<ScaleEvent>) -> RateCase {
    case.up_events = up;
    case.down_events = down;
    case
}

#[test]
fn scaling_with_rules() {
    let e = uniform;
    let cases = vec![
        rate_case(
            "prenormalized desired replicas within range",
            (3, 8),
            (5, 7),
            (None, None),
            (7, "DesiredWithinRange"),
        ),
        rate_case(
            "prenormalized desired replicas < minReplicas",
            (2, 8),
            (3, 1),
            (None, None),
            (2, "TooFewReplicas"),
        ),
        rate_case(
            "within range when minReplicas is 0",
            (0, 10),
            (1, 0),
            (None, None),
            (0, "DesiredWithinRange"),
        ),
        rate_case(
            "maxReplicas is the limit because maxReplicas < scaleUpLimit",
            (1, 10),
            (20, 1000),
            (None, None),
            (10, "TooManyReplicas"),
        ),
        rate_case(
            "desired replica count is more than the maximum replica count",
            (100, 150),
            (100, 1000),
            (None, None),
            (150, "TooManyReplicas"),
        ),
        rate_case(
            "scaleUpLimit < maxReplicas with user policies",
            (1, 2000),
            (3, 1000),
            (Some(rules(0, 0, 1, 60, 0)), None),
            (4, "ScaleUpLimit"),
        ),
        rate_case(
            "scaleDownLimit > minReplicas with user defined policies",
            (3, 2000),
            (1000, 3),
            (None, Some(rules(20, 60, 0, 0, 0))),
            (980, "ScaleDownLimit"),
        ),
        rate_case(
            "scaleUp with default behavior",
            (1, 1000),
            (10, 50),
            (None, None),
            (20, "ScaleUpLimit"),
        ),
        rate_case(
            "scaleUp with pods policy larger than percent policy",
            (1, 1000),
            (10, 500),
            (Some(rules(100, 60, 100, 60, 0)), None),
            (110, "ScaleUpLimit"),
        ),
        rate_case(
            "scaleUp with percent policy larger than pods policy",
            (1, 1000),
            (10, 500),
            (Some(rules(2, 60, 100, 60, 0)), None),
            (20, "ScaleUpLimit"),
        ),
        rate_case(
            "scaleUp with spec MaxReplicas limitation with large pod policy",
            (1, 1000),
            (10, 50),
            (Some(rules(100, 60, 0, 0, 0)), None),
            (50, "DesiredWithinRange"),
        ),
        rate_case(
            "scaleUp with spec MaxReplicas limitation with large percent policy",
            (1, 1000),
            (10, 50),
            (Some(rules(10000, 60, 0, 0, 0)), None),
            (50, "DesiredWithinRange"),
        ),
        rate_case(
            "scaleUp with pod policy limitation",
            (1, 1000),
            (10, 50),
            (Some(rules(30, 60, 0, 0, 0)), None),
            (40, "ScaleUpLimit"),
        ),
        rate_case(
            "scaleUp with percent policy limitation",
            (1, 1000),
            (10, 50),
            (Some(rules(0, 0, 200, 60, 0)), None),
            (30, "ScaleUpLimit"),
        ),
        rate_case(
            "scaleDown with percent policy larger than pod policy",
            (1, 1000),
            (100, 2),
            (None, Some(rules(20, 60, 1, 60, 300))),
            (80, "ScaleDownLimit"),
        ),
        rate_case(
            "scaleDown with pod policy larger than percent policy",
            (1, 1000),
            (100, 2),
            (None, Some(rules(2, 60, 1, 60, 300))),
            (98, "ScaleDownLimit"),
        ),
        rate_case(
            "scaleDown with spec MinReplicas=nil limitation with large pod policy",
            (1, 1000),
            (10, 0),
            (None, Some(rules(100, 60, 0, 0, 300))),
            (1, "TooFewReplicas"),
        ),
        rate_case(
            "scaleDown with spec MinReplicas limitation with large percent policy",
            (5, 1000),
            (10, 2),
            (None, Some(rules(0, 0, 100, 60, 300))),
            (5, "TooFewReplicas"),
        ),
        rate_case(
            "scaleDown with pod policy limitation",
            (1, 1000),
            (10, 2),
            (None, Some(rules(5, 60, 0, 0, 300))),
            (5, "ScaleDownLimit"),
        ),
        rate_case(
            "scaleDown with percent policy limitation",
            (1, 1000),
            (10, 5),
            (None, Some(rules(0, 0, 50, 60, 300))),
            (5, "DesiredWithinRange"),
        ),
        with_events(
            rate_case(
                "scaleUp with spec MaxReplicas limitation with large pod policy and events",
                (1, 200),
                (100, 500),
                (Some(rules(300, 60, 0, 0, 0)), None),
                (200, "TooManyReplicas"),
            ),
            e(&[1, 5, 9], 120),
            vec![],
        ),
        with_events(
            rate_case(
                "scaleUp with spec MaxReplicas limitation with large percent policy and events",
                (1, 200),
                (100, 500),
                (Some(rules(0, 0, 10000, 60, 0)), None),
                (200, "TooManyReplicas"),
            ),
            e(&[1, 5, 9], 120),
            vec![],
        ),
        with_events(
            rate_case(
                "scaleUp with currentReplicas limitation with a lot of recent scale up events",
                (1, 1000),
                (100, 500),
                (Some(rules(5, 120, 0, 0, 0)), None),
                (100, "ScaleUpLimit"),
            ),
            e(&[1, 5, 9], 120),
            vec![],
        ),
        with_events(
            rate_case(
                "scaleUp with pod policy and previous scale up events",
                (1, 1000),
                (100, 500),
                (Some(rules(150, 120, 0, 0, 0)), None),
                (235, "ScaleUpLimit"),
            ),
            e(&[1, 5, 9], 120),
            vec![],
        ),
        with_events(
            rate_case(
                "scaleUp with percent policy and previous scale up events",
                (1, 1000),
                (100, 500),
                (Some(rules(0, 0, 200, 120, 0)), None),
                (255, "ScaleUpLimit"),
            ),
            e(&[1, 5, 9], 120),
            vec![],
        ),
        with_events(
            rate_case(
                "scaleUp with percent policy and previous scale up and down events",
                (1, 1000),
                (6, 24),
                (Some(rules(0, 0, 300, 300, 0)), None),
                (16, "ScaleUpLimit"),
            ),
            e(&[4], 120),
            e(&[2], 120),
        ),
        with_events(
            rate_case(
                "scaleDown with default policy and previous events",
                (1, 1000),
                (10, 5),
                (None, None),
                (5, "DesiredWithinRange"),
            ),
            vec![],
            e(&[1, 5, 9], 120),
        ),
        with_events(
            rate_case(
                "scaleDown with spec MinReplicas=nil limitation with large pod policy and previous events",
                (1, 1000),
                (100, 0),
                (None, Some(rules(115, 120, 0, 0, 300))),
                (1, "TooFewReplicas"),
            ),
            vec![],
            e(&[1, 5, 9], 120),
        ),
        with_events(
            rate_case(
                "scaleDown with spec MinReplicas limitation with large pod policy and previous events",
                (5, 1000),
                (100, 0),
                (None, Some(rules(130, 120, 0, 0, 300))),
                (5, "TooFewReplicas"),
            ),
            vec![],
            e(&[1, 5, 9], 120),
        ),
        with_events(
            rate_case(
                "scaleDown with spec MinReplicas limitation with large percent policy and previous events",
                (5, 1000),
                (100, 2),
                (None, Some(rules(0, 0, 100, 120, 300))),
                (5, "TooFewReplicas"),
            ),
            vec![],
            e(&[1, 5, 9], 120),
        ),
        with_events(
            rate_case(
                "scaleDown with pod policy limitation and previous events",
                (1, 1000),
                (100, 2),
                (None, Some(rules(5, 120, 0, 0, 300))),
                (100, "ScaleDownLimit"),
            ),
            vec![],
            e(&[1, 5, 9], 120),
        ),
        with_events(
            rate_case(
                "scaleDown with percent policy limitation and previous events",
                (1, 1000),
                (100, 0),
                (None, Some(rules(0, 0, 50, 120, 300))),
                (56, "ScaleDownLimit"),
            ),
            vec![],
            e(&[2, 4, 6], 120),
        ),
        with_events(
            rate_case(
                "scaleDown with percent policy and previous scale up and down events",
                (1, 1000),
                (10, 1),
                (None, Some(rules(0, 0, 50, 180, 0))),
                (6, "ScaleDownLimit"),
            ),
            e(&[2], 120),
            e(&[4], 120),
        ),
        with_events(
            rate_case(
                "scaleDown with previous events preventing further scale down",
                (1, 1000),
                (100, 0),
                (None, Some(rules(0, 0, 10, 120, 300))),
                (100, "ScaleDownLimit"),
            ),
            vec![],
            e(&[10, 10, 10], 120),
        ),
        with_events(
            rate_case(
                "scaleDown with previous events still allowing more scale down",
                (1, 1000),
                (10, 5),
                (None, Some(rules(0, 0, 1000, 120, 300))),
                (5, "DesiredWithinRange"),
            ),
            vec![],
            e(&[10, 10, 10], 120),
        ),
        with_events(
            rate_case(
                "check 'outdated' flag for events for one behavior for up",
                (1, 1000),
                (100, 200),
                (Some(rules(1000, 60, 0, 0, 0)), None),
                (200, "DesiredWithinRange"),
            ),
            e(&[8, 12, 9, 11], 120),
            vec![],
        ),
        with_events(
            rate_case(
                "events not marked 'outdated' for two different policies for up",
                (1, 1000),
                (100, 200),
                (Some(rules(1000, 120, 100, 60, 0)), None),
                (200, "DesiredWithinRange"),
            ),
            e(&[8, 12, 9, 11], 120),
            vec![],
        ),
        with_events(
            rate_case(
                "events marked 'outdated' for two different policies for up",
                (1, 1000),
                (100, 200),
                (Some(rules(1000, 30, 100, 60, 0)), None),
                (200, "DesiredWithinRange"),
            ),
            e(&[8, 12, 9, 11], 120),
            vec![],
        ),
        with_events(
            rate_case(
                "check 'outdated' flag for events for one behavior for down",
                (1, 1000),
                (100, 5),
                (None, Some(rules(1000, 60, 0, 0, 300))),
                (5, "DesiredWithinRange"),
            ),
            vec![],
            e(&[8, 12, 9, 11], 120),
        ),
        with_events(
            rate_case(
                "events not marked 'outdated' for two different policies for down",
                (1, 1000),
                (100, 5),
                (None, Some(rules(1000, 120, 100, 60, 300))),
                (5, "DesiredWithinRange"),
            ),
            vec![],
            e(&[8, 12, 9, 11], 120),
        ),
        with_events(
            rate_case(
                "events marked 'outdated' for two different policies for down",
                (1, 1000),
                (100, 5),
                (None, Some(rules(1000, 30, 100, 60, 300))),
                (5, "DesiredWithinRange"),
            ),
            vec![],
            e(&[8, 12, 9, 11], 120),
        ),
    ];
    assert_eq!(cases.len(), 41);
    for case in cases {
        let behavior = Behavior {
            scale_up: fill(case.up, Rules::default_scale_up()),
            scale_down: fill(case.down, Rules::default_scale_down()),
        };
        let mut history = History {
            scale_up_events: case.up_events,
            scale_down_events: case.down_events,
            ..History::default()
        };
        // No recommendations within any window: stabilization keeps the proposal.
        let normalized = history.normalize(
            Arguments {
                behavior: Some(&behavior),
                min_replicas: case.min,
                max_replicas: case.max,
                current: case.current,
                desired: case.desired,
                downscale_stabilization: Duration::ZERO,
            },
            now(),
        );
        assert_eq!(normalized.replicas, case.expected, "{}", case.name);
        assert_eq!(normalized.limited.1, case.condition, "{}", case.name);
    }
}

/// `GenerateHPAScaleUpRules`/`GenerateHPAScaleDownRules` for test rules: a rule set
/// without policies gets the defaults'.
fn fill(rules: Option<Rules>, defaults: Rules) -> Rules {
    match rules {
        None => Rules {
            stabilization_window_seconds: Some(0),
            ..defaults
        },
        Some(rules) if rules.policies.is_empty() => Rules {
            policies: defaults.policies,
            ..rules
        },
        Some(rules) => rules,
    }
}

#[test]
fn store_scale_events() {
    // (name, previous (change, seconds ago), expected (change, outdated), rules, change in
    // the last 60 s before storing)
    type Case = (
        &'static str,
        &'static [(i32, u64)],
        &'static [(i32, bool)],
        Option<Rules>,
        i32,
    );
    let cases: Vec<Case> = vec![
        ("empty entries with default behavior", &[], &[], None, 0),
        (
            "empty entries with two-policy-behavior",
            &[],
            &[(5, false)],
            Some(rules(10, 60, 100, 60, 0)),
            0,
        ),
        (
            "one outdated entry to be kept untouched without behavior",
            &[(7, 61)],
            &[(7, false)],
            None,
            0,
        ),
        (
            "one outdated entry to be replaced with behavior",
            &[(7, 61)],
            &[(5, false)],
            Some(rules(10, 60, 100, 60, 0)),
            0,
        ),
        (
            "one actual entry to be not touched with behavior",
            &[(7, 58)],
            &[(7, false), (5, false)],
            Some(rules(10, 60, 100, 60, 0)),
            7,
        ),
        (
            "two entries, one of them to be replaced",
            &[(7, 61), (6, 59)],
            &[(5, false), (6, false)],
            Some(rules(10, 60, 0, 0, 0)),
            6,
        ),
        (
            "replace one entry, use policies with different periods",
            &[(8, 29), (6, 59), (7, 61), (9, 61)],
            &[(8, false), (6, false), (7, true), (5, false)],
            Some(rules(10, 60, 100, 30, 0)),
            14,
        ),
        (
            "two entries, both actual",
            &[(7, 58), (6, 59)],
            &[(7, false), (6, false), (5, false)],
            Some(rules(10, 120, 100, 30, 0)),
            13,
        ),
    ];
    for (name, previous, expected, rules, change) in cases {
        let events: Vec<ScaleEvent> = previous
            .iter()
            .map(|&(change, seconds)| ScaleEvent {
                change,
                at: ago(seconds),
                outdated: false,
            })
            .collect();
        for up in [true, false] {
            let behavior = rules.clone().map(|rules| Behavior {
                scale_up: if up {
                    rules.clone()
                } else {
                    Rules::default_scale_up()
                },
                scale_down: if up {
                    Rules::default_scale_down()
                } else {
                    rules
                },
            });
            let mut history = History::default();
            let new = if up {
                history.scale_up_events = events.clone();
                15
            } else {
                history.scale_down_events = events.clone();
                5
            };
            let stored = if up {
                &history.scale_up_events
            } else {
                &history.scale_down_events
            };
            let recent: i32 = stored
                .iter()
                .filter(|e| e.at > ago(60))
                .map(|e| e.change)
                .sum();
            assert_eq!(recent, change, "{name}");
            history.store_scale_event(behavior.as_ref(), 10, new, now());
            let stored = if up {
                &history.scale_up_events
            } else {
                &history.scale_down_events
            };
            let got: Vec<(i32, bool)> = stored.iter().map(|e| (e.change, e.outdated)).collect();
            assert_eq!(got, expected, "{name} (up: {up})");
        }
    }
}

#[test]
fn normalize_desired_replicas_with_behavior() {
    // (name, recommendations, current, proposal, stabilized, expected log, up window,
    // down window)
    type Case = (
        &'static str,
        &'static [(i32, u64)],
        i32,
        i32,
        i32,
        Option<&'static [i32]>,
        i32,
        i32,
    );
    let cases: Vec<Case> = vec![
        (
            "empty recommendations for scaling down",
            &[],
            100,
            5,
            5,
            Some(&[5]),
            0,
            0,
        ),
        (
            "simple scale down stabilization",
            &[(4, 120), (5, 60)],
            100,
            3,
            5,
            Some(&[4, 5, 3]),
            0,
            180,
        ),
        (
            "simple scale up stabilization",
            &[(4, 120), (5, 60)],
            1,
            7,
            4,
            Some(&[4, 5, 7]),
            300,
            0,
        ),
        (
            "no scale down stabilization",
            &[(1, 120), (2, 60)],
            100,
            3,
            3,
            Some(&[1, 2, 3]),
            300,
            0,
        ),
        (
            "no scale up stabilization",
            &[(4, 120), (5, 60)],
            1,
            3,
            3,
            Some(&[4, 5, 3]),
            0,
            300,
        ),
        (
            "no scale down stabilization, reuse recommendation element",
            &[(10, 600), (9, 540)],
            100,
            3,
            3,
            Some(&[10, 3]),
            0,
            0,
        ),
        (
            "no scale up stabilization, reuse recommendation element",
            &[(10, 600), (9, 540)],
            1,
            100,
            100,
            Some(&[10, 100]),
            0,
            0,
        ),
        (
            "scale down stabilization, reuse one of obsolete recommendation element",
            &[(10, 600), (4, 60), (5, 120), (9, 540)],
            100,
            3,
            5,
            Some(&[10, 4, 5, 3]),
            0,
            180,
        ),
        (
            "scale up stabilization, reuse one of obsolete recommendation element",
            &[(10, 6000), (6, 60), (5, 120), (9, 180)],
            1,
            100,
            5,
            Some(&[100, 6, 5, 9]),
            300,
            0,
        ),
        (
            "do not scale up when prenormalized rec goes down",
            &[(2, 6000), (3, 180)],
            2,
            1,
            2,
            None,
            300,
            300,
        ),
        (
            "do not scale down when prenormalized rec goes up",
            &[(2, 6000), (1, 180)],
            2,
            3,
            2,
            None,
            300,
            300,
        ),
    ];
    for (name, recs, current, proposal, stabilized, log, up, down) in cases {
        let behavior = Behavior {
            scale_up: Rules {
                stabilization_window_seconds: Some(up),
                select: Select::Max,
                policies: vec![Policy {
                    kind: PolicyType::Percent,
                    value: 100_000,
                    period_seconds: 15,
                }],
            },
            scale_down: Rules {
                stabilization_window_seconds: Some(down),
                select: Select::Max,
                policies: vec![Policy {
                    kind: PolicyType::Percent,
                    value: 100,
                    period_seconds: 15,
                }],
            },
        };
        let mut history = History {
            recommendations: recommendations(recs),
            ..History::default()
        };
        let normalized = history.normalize(
            Arguments {
                behavior: Some(&behavior),
                min_replicas: 1,
                max_replicas: 1_000_000,
                current,
                desired: proposal,
                downscale_stabilization: Duration::from_secs(300),
            },
            now(),
        );
        assert_eq!(normalized.replicas, stabilized, "{name}");
        if let Some(log) = log {
            let got: Vec<i32> = history.recommendations.iter().map(|r| r.0).collect();
            assert_eq!(got, log, "{name}");
        }
    }
}

#[test]
fn behavior_defaults_fill_missing_rules() {
    let spec = serde_json::json!({"behavior": {"scaleDown": {"stabilizationWindowSeconds": 60,
        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 30}]}}});
    let behavior = Behavior::from_spec(&spec).expect("a behavior");
    assert_eq!(behavior.scale_up, Rules::default_scale_up());
    assert_eq!(behavior.scale_down.stabilization_window_seconds, Some(60));
    assert_eq!(behavior.scale_down.select, Select::Max);
    assert_eq!(
        behavior.scale_down.policies,
        vec![Policy {
            kind: PolicyType::Pods,
            value: 1,
            period_seconds: 30
        }]
    );
    assert_eq!(Behavior::from_spec(&serde_json::json!({})), None);
}
