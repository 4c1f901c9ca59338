//! From the metrics' proposal to the replica count the autoscaler sets, as upstream's
//! `horizontal.go` normalizes it: the recommendation history and its stabilization window,
//! the `behavior` policies with their scale events (or, without a `behavior`, the legacy
//! 5-minute downscale stabilization and the `max(2×current, 4)` scale-up limit), and the
//! `minReplicas`/`maxReplicas` bounds, with the `AbleToScale` and `ScalingLimited` reasons.
//!
//! Keeps one autoscaler's history as a value the shell holds between passes; knows nothing
//! about metrics or the API.

use std::time::{Duration, SystemTime};

use serde_json::Value;

/// A scaling policy's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyType {
    /// `Pods`: a number of pods per period.
    Pods,
    /// `Percent`: a percentage of the period's starting replicas.
    Percent,
}

/// `HPAScalingPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// `type`.
    pub kind: PolicyType,
    /// `value`.
    pub value: i32,
    /// `periodSeconds`.
    pub period_seconds: i32,
}

/// `selectPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Select {
    /// `Max`: the policy allowing the largest change.
    Max,
    /// `Min`: the policy allowing the smallest change.
    Min,
    /// `Disabled`: no change in this direction.
    Disabled,
}

/// `HPAScalingRules` with upstream's defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// `stabilizationWindowSeconds` (`None` on scale-down: the controller's default applies).
    pub stabilization_window_seconds: Option<i32>,
    /// `selectPolicy`.
    pub select: Select,
    /// `policies`.
    pub policies: Vec<Policy>,
}

/// `HorizontalPodAutoscalerBehavior` with upstream's defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Behavior {
    /// `scaleUp`.
    pub scale_up: Rules,
    /// `scaleDown`.
    pub scale_down: Rules,
}

impl Rules {
    /// Upstream's default scale-up rules: no stabilization, at most 4 pods or 100% per 15 s,
    /// whichever is more.
    pub fn default_scale_up() -> Rules {
        Rules {
            stabilization_window_seconds: Some(0),
            select: Select::Max,
            policies: vec![
                Policy {
                    kind: PolicyType::Pods,
                    value: 4,
                    period_seconds: 15,
                },
                Policy {
                    kind: PolicyType::Percent,
                    value: 100,
                    period_seconds: 15,
                },
            ],
        }
    }

    /// Upstream's default scale-down rules: the controller's window, 100% per 15 s.
    pub fn default_scale_down() -> Rules {
        Rules {
            stabilization_window_seconds: None,
            select: Select::Max,
            policies: vec![Policy {
                kind: PolicyType::Percent,
                value: 100,
                period_seconds: 15,
            }],
        }
    }

    /// Reads rules given as JSON, filling what is missing from `defaults`
    /// (`GenerateHPAScaleUpRules`, `GenerateHPAScaleDownRules`).
    fn from_json(value: Option<&Value>, defaults: Rules) -> Rules {
        let Some(value) = value.filter(|v| v.is_object()) else {
            return defaults;
        };
        let int = |v: Option<&Value>| {
            v.and_then(Value::as_i64)
                .and_then(|n| i32::try_from(n).ok())
        };
        let policies: Vec<Policy> = value
            .get("policies")
            .and_then(Value::as_array)
            .map(|policies| {
                policies
                    .iter()
                    .filter_map(|p| {
                        let kind = match p.get("type").and_then(Value::as_str)? {
                            "Pods" => PolicyType::Pods,
                            "Percent" => PolicyType::Percent,
                            _ => return None,
                        };
                        Some(Policy {
                            kind,
                            value: int(p.get("value"))?,
                            period_seconds: int(p.get("periodSeconds"))?,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        Rules {
            stabilization_window_seconds: int(value.get("stabilizationWindowSeconds"))
                .or(defaults.stabilization_window_seconds),
            select: match value.get("selectPolicy").and_then(Value::as_str) {
                Some("Min") => Select::Min,
                Some("Disabled") => Select::Disabled,
                Some("Max") => Select::Max,
                _ => defaults.select,
            },
            policies: if policies.is_empty() {
                defaults.policies
            } else {
                policies
            },
        }
    }

    fn longest_period(&self) -> i32 {
        self.policies
            .iter()
            .map(|p| p.period_seconds)
            .max()
            .unwrap_or(0)
    }
}

impl Behavior {
    /// Reads `spec.behavior`; `None` when the autoscaler has none (the legacy normalization
    /// applies then).
    pub fn from_spec(spec: &Value) -> Option<Behavior> {
        let behavior = spec.get("behavior").filter(|b| b.is_object())?;
        Some(Behavior {
            scale_up: Rules::from_json(behavior.get("scaleUp"), Rules::default_scale_up()),
            scale_down: Rules::from_json(behavior.get("scaleDown"), Rules::default_scale_down()),
        })
    }
}

/// A replica change the autoscaler made (upstream's `timestampedScaleEvent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScaleEvent {
    /// The number of replicas added or removed.
    pub change: i32,
    /// When.
    pub at: SystemTime,
    /// Older than the longest policy period: to be reused.
    pub outdated: bool,
}

/// One autoscaler's memory between passes: recommendations and scale events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    /// Unstabilized recommendations with their times.
    pub recommendations: Vec<(i32, SystemTime)>,
    /// Scale-ups made.
    pub scale_up_events: Vec<ScaleEvent>,
    /// Scale-downs made.
    pub scale_down_events: Vec<ScaleEvent>,
}

/// A normalization's answer: the replicas, and the `AbleToScale` and `ScalingLimited`
/// conditions' (status, reason, message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized {
    /// The replicas to set.
    pub replicas: i32,
    /// `AbleToScale` (always True here).
    pub able_to_scale: (&'static str, &'static str),
    /// `ScalingLimited`: whether limited, reason, message.
    pub limited: (bool, &'static str, &'static str),
}

/// What a normalization works on.
#[derive(Debug, Clone, Copy)]
pub struct Arguments<'a> {
    /// The autoscaler's behavior, if any.
    pub behavior: Option<&'a Behavior>,
    /// `spec.minReplicas` (1 when unset).
    pub min_replicas: i32,
    /// `spec.maxReplicas`.
    pub max_replicas: i32,
    /// The target's current replicas.
    pub current: i32,
    /// The metrics' proposal.
    pub desired: i32,
    /// `--horizontal-pod-autoscaler-downscale-stabilization` (5 m).
    pub downscale_stabilization: Duration,
}

const READY: (&str, &str) = ("ReadyForNewScale", "recommended size matches current size");
const DOWN_STABILIZED: (&str, &str) = (
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent recommendation",
);
const UP_STABILIZED: (&str, &str) = (
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
);
const SCALE_UP_LIMIT: (&str, &str) = (
    "ScaleUpLimit",
    "the desired replica count is increasing faster than the maximum scale rate",
);
const SCALE_DOWN_LIMIT: (&str, &str) = (
    "ScaleDownLimit",
    "the desired replica count is decreasing faster than the maximum scale rate",
);
const TOO_MANY: (&str, &str) = (
    "TooManyReplicas",
    "the desired replica count is more than the maximum replica count",
);
const TOO_FEW: (&str, &str) = (
    "TooFewReplicas",
    "the desired replica count is less than the minimum replica count",
);
const WITHIN_RANGE: (&str, &str) = (
    "DesiredWithinRange",
    "the desired count is within the acceptable range",
);

impl History {
    /// Upstream's `recordInitialRecommendation`: the first pass remembers the current size.
    pub fn record_initial(&mut self, current: i32, now: SystemTime) {
        if self.recommendations.is_empty() {
            self.recommendations.push((current, now));
        }
    }

    /// Normalizes a proposal, recording it (`normalizeDesiredReplicas` or
    /// `normalizeDesiredReplicasWithBehaviors`).
    pub fn normalize(&mut self, args: Arguments<'_>, now: SystemTime) -> Normalized {
        match args.behavior {
            None => self.normalize_legacy(args, now),
            Some(behavior) => self.normalize_with_behavior(behavior, args, now),
        }
    }

    fn normalize_legacy(&mut self, args: Arguments<'_>, now: SystemTime) -> Normalized {
        let stabilized = self.stabilize(args.desired, args.downscale_stabilization, now);
        let able_to_scale = if stabilized == args.desired {
            READY
        } else {
            DOWN_STABILIZED
        };
        let (replicas, (reason, message)) = legacy_rules(
            args.current,
            stabilized,
            args.min_replicas,
            args.max_replicas,
        );
        Normalized {
            replicas,
            able_to_scale,
            limited: (replicas != stabilized, reason, message),
        }
    }

    /// Upstream's `stabilizeRecommendation`: the highest recommendation within the window.
    fn stabilize(&mut self, desired: i32, window: Duration, now: SystemTime) -> i32 {
        let cutoff = now.checked_sub(window).unwrap_or(SystemTime::UNIX_EPOCH);
        let mut highest = desired;
        let mut old = None;
        for (i, (recommendation, at)) in self.recommendations.iter().enumerate() {
            if *at < cutoff {
                old = Some(i);
            } else if *recommendation > highest {
                highest = *recommendation;
            }
        }
        self.remember(old, desired, now);
        highest
    }

    fn remember(&mut self, old: Option<usize>, desired: i32, now: SystemTime) {
        match old.and_then(|i| self.recommendations.get_mut(i)) {
            Some(slot) => *slot = (desired, now),
            None => self.recommendations.push((desired, now)),
        }
    }

    fn normalize_with_behavior(
        &mut self,
        behavior: &Behavior,
        args: Arguments<'_>,
        now: SystemTime,
    ) -> Normalized {
        let down_window = behavior
            .scale_down
            .stabilization_window_seconds
            .map_or(args.downscale_stabilization, seconds);
        let up_window = seconds(behavior.scale_up.stabilization_window_seconds.unwrap_or(0));
        let (stabilized, stabilized_reason) =
            self.stabilize_with_behavior(args, up_window, down_window, now);
        let able_to_scale = if stabilized == args.desired {
            READY
        } else {
            stabilized_reason
        };
        let (replicas, (reason, message)) = self.rate_limited(
            behavior,
            Arguments {
                desired: stabilized,
                ..args
            },
            now,
        );
        Normalized {
            replicas,
            able_to_scale,
            limited: (replicas != stabilized, reason, message),
        }
    }

    /// Upstream's `stabilizeRecommendationWithBehaviors`.
    fn stabilize_with_behavior(
        &mut self,
        args: Arguments<'_>,
        up_window: Duration,
        down_window: Duration,
        now: SystemTime,
    ) -> (i32, (&'static str, &'static str)) {
        let up_cutoff = now.checked_sub(up_window).unwrap_or(SystemTime::UNIX_EPOCH);
        let down_cutoff = now
            .checked_sub(down_window)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let (mut up, mut down) = (args.desired, args.desired);
        let mut old = None;
        for (i, (recommendation, at)) in self.recommendations.iter().enumerate() {
            if *at > up_cutoff {
                up = up.min(*recommendation);
            }
            if *at > down_cutoff {
                down = down.max(*recommendation);
            }
            if *at < up_cutoff && *at < down_cutoff {
                old = Some(i);
            }
        }
        let recommendation = args.current.max(up).min(down);
        self.remember(old, args.desired, now);
        let reason = if args.desired >= args.current {
            UP_STABILIZED
        } else {
            DOWN_STABILIZED
        };
        (recommendation, reason)
    }

    /// Upstream's `convertDesiredReplicasWithBehaviorRate`.
    fn rate_limited(
        &self,
        behavior: &Behavior,
        args: Arguments<'_>,
        now: SystemTime,
    ) -> (i32, (&'static str, &'static str)) {
        if args.desired > args.current {
            let limit = scale_up_limit(
                args.current,
                &self.scale_up_events,
                &self.scale_down_events,
                &behavior.scale_up,
                now,
            )
            .max(args.current);
            let (maximum, reason) = if args.max_replicas > limit {
                (limit, SCALE_UP_LIMIT)
            } else {
                (args.max_replicas, TOO_MANY)
            };
            if args.desired > maximum {
                return (maximum, reason);
            }
        } else if args.desired < args.current {
            let limit = scale_down_limit(
                args.current,
                &self.scale_up_events,
                &self.scale_down_events,
                &behavior.scale_down,
                now,
            )
            .min(args.current);
            let (minimum, reason) = if args.min_replicas < limit {
                (limit, SCALE_DOWN_LIMIT)
            } else {
                (args.min_replicas, TOO_FEW)
            };
            if args.desired < minimum {
                return (minimum, reason);
            }
        }
        (args.desired, WITHIN_RANGE)
    }

    /// Upstream's `storeScaleEvent`: remembers a change made, reusing an outdated slot.
    pub fn store_scale_event(
        &mut self,
        behavior: Option<&Behavior>,
        previous: i32,
        new: i32,
        now: SystemTime,
    ) {
        let Some(behavior) = behavior else {
            return;
        };
        let (events, rules, change) = if new > previous {
            (
                &mut self.scale_up_events,
                &behavior.scale_up,
                new - previous,
            )
        } else {
            (
                &mut self.scale_down_events,
                &behavior.scale_down,
                previous - new,
            )
        };
        let cutoff = now
            .checked_sub(seconds(rules.longest_period()))
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let mut old = None;
        for (i, event) in events.iter_mut().enumerate() {
            if event.at < cutoff {
                event.outdated = true;
            }
            if event.outdated {
                old = Some(i);
            }
        }
        let event = ScaleEvent {
            change,
            at: now,
            outdated: false,
        };
        match old.and_then(|i| events.get_mut(i)) {
            Some(slot) => *slot = event,
            None => events.push(event),
        }
    }
}

fn seconds(seconds: i32) -> Duration {
    Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
}

/// Upstream's `convertDesiredReplicasWithRules`, for autoscalers without a behavior.
pub fn legacy_rules(
    current: i32,
    desired: i32,
    min_replicas: i32,
    max_replicas: i32,
) -> (i32, (&'static str, &'static str)) {
    // `calculateScaleUpLimit`: max(2 × current, 4).
    let scale_up_limit = current.saturating_mul(2).max(4);
    let (maximum, reason) = if max_replicas > scale_up_limit {
        (scale_up_limit, SCALE_UP_LIMIT)
    } else {
        (max_replicas, TOO_MANY)
    };
    if desired < min_replicas {
        return (min_replicas, TOO_FEW);
    }
    if desired > maximum {
        return (maximum, reason);
    }
    (desired, WITHIN_RANGE)
}

/// Upstream's `getReplicasChangePerPeriod`.
fn change_in_period(period_seconds: i32, events: &[ScaleEvent], now: SystemTime) -> i32 {
    let cutoff = now
        .checked_sub(seconds(period_seconds))
        .unwrap_or(SystemTime::UNIX_EPOCH);
    events
        .iter()
        .filter(|e| e.at > cutoff)
        .map(|e| e.change)
        .fold(0i32, i32::saturating_add)
}

fn period_start(
    current: i32,
    policy: &Policy,
    up: &[ScaleEvent],
    down: &[ScaleEvent],
    now: SystemTime,
) -> i32 {
    current - change_in_period(policy.period_seconds, up, now)
        + change_in_period(policy.period_seconds, down, now)
}

/// Upstream's `calculateScaleUpLimitWithScalingRules`.
pub fn scale_up_limit(
    current: i32,
    up: &[ScaleEvent],
    down: &[ScaleEvent],
    rules: &Rules,
    now: SystemTime,
) -> i32 {
    let (mut result, pick): (i32, fn(i32, i32) -> i32) = match rules.select {
        Select::Disabled => return current,
        Select::Min => (i32::MAX, std::cmp::min),
        Select::Max => (i32::MIN, std::cmp::max),
    };
    for policy in &rules.policies {
        let start = period_start(current, policy, up, down, now);
        let proposed = match policy.kind {
            PolicyType::Pods => start.saturating_add(policy.value),
            PolicyType::Percent => {
                (f64::from(start) * (1.0 + f64::from(policy.value) / 100.0)).ceil() as i32
            }
        };
        result = pick(result, proposed);
    }
    result
}

/// Upstream's `calculateScaleDownLimitWithBehaviors`.
pub fn scale_down_limit(
    current: i32,
    up: &[ScaleEvent],
    down: &[ScaleEvent],
    rules: &Rules,
    now: SystemTime,
) -> i32 {
    let (mut result, pick): (i32, fn(i32, i32) -> i32) = match rules.select {
        Select::Disabled => return current,
        Select::Min => (i32::MIN, std::cmp::max),
        Select::Max => (i32::MAX, std::cmp::min),
    };
    for policy in &rules.policies {
        let start = period_start(current, policy, up, down, now);
        let proposed = match policy.kind {
            PolicyType::Pods => start.saturating_sub(policy.value),
            PolicyType::Percent => {
                (f64::from(start) * (1.0 - f64::from(policy.value) / 100.0)) as i32
            }
        };
        result = pick(result, proposed);
    }
    result
}
