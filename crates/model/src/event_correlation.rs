//! Client-go's `EventCorrelator` (tools/record/events_cache.go), as the kubelet and the
//! controllers run it before writing an event, in upstream's order:
//!
//! 1. **Aggregation** (`EventAggregator`): events that differ only in their message (same
//!    source, involved object, type, reason and reporting pair) are similar; once 10 distinct
//!    messages were seen with no gap over 10 minutes, each further one is recorded as one
//!    event with the message `(combined from similar events): <message>`, counted up as a
//!    repeat of itself.
//! 2. **Counting** (its events logger): an event equal to one recorded before (same source,
//!    involved object, type, reason and message) is not created again; the recorded one is
//!    patched with `count + 1`, the new `lastTimestamp` and the message, so `kubectl
//!    describe` shows `(x3 over 2m)`. New events are named as upstream names them
//!    (`<object>.<unix nanos in hex>`), so a later patch finds them without reading back.
//! 3. **Spam filter** (`EventSourceObjectSpamFilter`): a token bucket per source and object
//!    (and type), 25 events at once, refilled by one every 5 minutes; an event over it is
//!    dropped ([`Correlated::Skip`]).
//!
//! Each of the three remembers 4,096 keys, forgetting the least recently used.
//!
//! Pure: the events (built by [`crate::event::core_event`]) and the time come in; what to
//! write goes out. Sending is the caller's business.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

/// Keys each cache remembers (client-go's `maxLruCacheEntries`).
pub const REMEMBERED: usize = 4096;
/// Distinct similar messages within [`AGGREGATE_INTERVAL`] before they are combined
/// (`defaultAggregateMaxEvents`).
pub const AGGREGATE_MAX_EVENTS: usize = 10;
/// The gap after which similar events start a fresh count
/// (`defaultAggregateIntervalInSeconds`).
pub const AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);
/// Events a source may send about an object at once (`defaultSpamBurst`).
pub const SPAM_BURST: u32 = 25;
/// The spam filter's refill, in events per second (`defaultSpamQPS`, a Go `float32`).
pub const SPAM_QPS: f32 = 1. / 300.;
/// The prefix of a combined event's message (`EventAggregatorByReasonMessageFunc`).
pub const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// What to write for an event.
#[derive(Debug, Clone, PartialEq)]
pub enum Correlated {
    /// A new event: create it (its `metadata.name` set).
    Create(Value),
    /// A repeat of the event `name` in `namespace`: merge-patch it with `patch`; if it is gone,
    /// create `event` instead (client-go does the same on a 404).
    Patch {
        namespace: String,
        name: String,
        patch: Value,
        event: Value,
    },
    /// Over the spam filter's rate for its source and object: not written.
    Skip,
}

/// How a correlator aggregates and filters (client-go's `CorrelatorOptions`).
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Events a source may send about an object at once.
    pub burst: u32,
    /// The spam filter's refill, in events per second.
    pub qps: f32,
    /// Distinct similar messages before they are combined.
    pub max_events: usize,
    /// The gap after which similar events start a fresh count.
    pub max_interval: Duration,
    /// What the spam filter counts events by (client-go's `EventSpamKeyFunc`).
    pub spam_key: fn(&Value) -> String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            burst: SPAM_BURST,
            qps: SPAM_QPS,
            max_events: AGGREGATE_MAX_EVENTS,
            max_interval: AGGREGATE_INTERVAL,
            spam_key,
        }
    }
}

/// A map of at most [`REMEMBERED`] keys that forgets the least recently used
/// (k8s.io/utils' `lru.Cache`): a read or a write makes a key the most recently used.
type Lru<V> = hashlink::LruCache<String, V, foldhash::fast::FixedState>;

/// An empty [`Lru`], hashed with a fixed seed.
fn lru<V>() -> Lru<V> {
    hashlink::LruCache::with_hasher(REMEMBERED, foldhash::fast::FixedState::default())
}

/// A recorded event: its name, namespace, count and first timestamp (`eventLog`).
#[derive(Debug, Clone)]
struct Seen {
    namespace: String,
    name: String,
    count: u64,
    first_timestamp: Value,
}

/// Similar events seen (`aggregateRecord`): their distinct messages and when the last came.
#[derive(Debug, Clone)]
struct Similar {
    messages: BTreeSet<String>,
    last: SystemTime,
}

/// One source and object's token bucket (golang.org/x/time/rate's `Limiter`, as client-go's
/// passive token bucket uses it): full at first, refilled continuously, capped at the burst.
#[derive(Debug, Clone)]
struct Bucket {
    tokens: f64,
    last: SystemTime,
}

impl Bucket {
    /// `AllowN(now, 1)`: takes a token if there is one; a refusal changes nothing.
    fn try_accept(&mut self, now: SystemTime, options: &Options) -> bool {
        let last = self.last.min(now);
        let elapsed = now.duration_since(last).unwrap_or_default().as_secs_f64();
        let burst = f64::from(options.burst);
        let tokens = (self.tokens + elapsed * f64::from(options.qps)).min(burst);
        if tokens < 1.0 {
            return false;
        }
        self.tokens = tokens - 1.0;
        self.last = now;
        true
    }
}

/// The events one recorder has written: client-go's `EventCorrelator`.
#[derive(Debug)]
pub struct Correlator {
    options: Options,
    /// The events logger's cache, by [`key`] (or an aggregate's key).
    seen: Lru<Seen>,
    /// The aggregator's cache, by [`aggregate_key`].
    similar: Lru<Similar>,
    /// The spam filter's buckets, by the spam key.
    buckets: Lru<Bucket>,
    /// The last name suffix handed out, kept increasing so two events of one object never
    /// share a name.
    last_nanos: u128,
}

impl Default for Correlator {
    fn default() -> Self {
        Self::with_options(Options::default())
    }
}

impl Correlator {
    /// A correlator with upstream's defaults (`NewEventCorrelator`).
    pub fn new() -> Self {
        Self::default()
    }

    /// A correlator with other limits (`NewEventCorrelatorWithOptions`).
    pub fn with_options(options: Options) -> Self {
        Correlator {
            options,
            seen: lru(),
            similar: lru(),
            buckets: lru(),
            last_nanos: 0,
        }
    }

    /// Decides how to record `event` (a `core/v1` Event without a name) observed at `now`
    /// (`EventCorrelate`): aggregated, counted, then filtered.
    pub fn observe(&mut self, event: Value, now: SystemTime) -> Correlated {
        let (event, key) = self.aggregate(event, now);
        let observed = self.count(event, key, now);
        let event = match &observed {
            Correlated::Create(event) | Correlated::Patch { event, .. } => event,
            Correlated::Skip => return observed,
        };
        let spam_key = (self.options.spam_key)(event);
        let options = self.options;
        let accepted = match self.buckets.get_mut(&spam_key) {
            Some(bucket) => bucket.try_accept(now, &options),
            None => {
                let mut bucket = Bucket {
                    tokens: f64::from(options.burst),
                    last: now,
                };
                let accepted = bucket.try_accept(now, &options);
                self.buckets.insert(spam_key, bucket);
                accepted
            }
        };
        if accepted { observed } else { Correlated::Skip }
    }

    /// `EventAggregate`: the event to record and the key it is counted under — itself and
    /// [`key`], or, once similar events are too many, the combined event and its
    /// [`aggregate_key`].
    fn aggregate(&mut self, mut event: Value, now: SystemTime) -> (Value, String) {
        let event_key = joined_after("event\u{0}", &event, SPAM_KEY.iter().chain(KEY_MORE));
        let aggregate_key = joined_after(
            "aggregate\u{0}",
            &event,
            SPAM_KEY.iter().chain(AGGREGATE_MORE),
        );
        let message = text(&event, &["message"]).to_owned();
        let max_interval = self.options.max_interval;
        let fresh = |similar: &Similar| {
            now.duration_since(similar.last)
                .is_ok_and(|gap| gap > max_interval)
        };
        let similar = match self.similar.get_mut(&aggregate_key) {
            Some(similar) if !fresh(similar) => similar,
            _ => {
                self.similar.insert(
                    aggregate_key.clone(),
                    Similar {
                        messages: BTreeSet::new(),
                        last: now,
                    },
                );
                match self.similar.get_mut(&aggregate_key) {
                    Some(similar) => similar,
                    None => return (event, event_key),
                }
            }
        };
        similar.messages.insert(message.clone());
        similar.last = now;
        if similar.messages.len() < self.options.max_events {
            return (event, event_key);
        }
        // The set grows no larger than the maximum.
        similar.messages.pop_first();
        let at = crate::time::timestamp(now);
        event["message"] = json!(format!("{COMBINED_PREFIX}{message}"));
        event["count"] = json!(1);
        event["firstTimestamp"] = json!(at);
        event["lastTimestamp"] = json!(at);
        (event, aggregate_key)
    }

    /// The events logger's `eventObserve`: a repeat of a recorded event is a patch of it.
    fn count(&mut self, mut event: Value, key: String, now: SystemTime) -> Correlated {
        if let Some(seen) = self.seen.get_mut(&key) {
            seen.count += 1;
            let last = event.get("lastTimestamp").cloned().unwrap_or(Value::Null);
            let message = event.get("message").cloned().unwrap_or(Value::Null);
            set_name(&mut event, &seen.namespace, &seen.name);
            event["count"] = json!(seen.count);
            event["firstTimestamp"] = seen.first_timestamp.clone();
            return Correlated::Patch {
                namespace: seen.namespace.clone(),
                name: seen.name.clone(),
                patch: json!({"count": seen.count, "lastTimestamp": last, "message": message}),
                event,
            };
        }
        let nanos = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
            .max(self.last_nanos + 1);
        self.last_nanos = nanos;
        let object = Some(text(&event, &["involvedObject", "name"]))
            .filter(|name| !name.is_empty())
            .unwrap_or("event");
        let name = format!("{object}.{nanos:x}");
        let namespace = Some(text(&event, &["metadata", "namespace"]))
            .filter(|namespace| !namespace.is_empty())
            .unwrap_or("default")
            .to_owned();
        set_name(&mut event, &namespace, &name);
        self.seen.insert(
            key,
            Seen {
                namespace,
                name,
                count: event.get("count").and_then(Value::as_u64).unwrap_or(1),
                first_timestamp: event.get("firstTimestamp").cloned().unwrap_or(Value::Null),
            },
        );
        Correlated::Create(event)
    }
}

/// Names `event` `name` in `namespace` (in place of a `generateName`).
fn set_name(event: &mut Value, namespace: &str, name: &str) {
    event["metadata"] = json!({"name": name, "namespace": namespace});
}

/// The string at `path` (field names from the top), or `""`. Walked field by field, the
/// names given apart: a recorder reads some thirty fields an event, and neither unescaping
/// a pointer (`Value::pointer`) nor splitting one is worth its cost here.
fn text<'a>(event: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .try_fold(event, |value, field| value.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The strings at `paths`, joined by NULs after `prefix`.
fn joined_after<'p>(
    prefix: &str,
    event: &Value,
    paths: impl IntoIterator<Item = &'p &'p [&'p str]>,
) -> String {
    let mut key = String::with_capacity(128);
    key.push_str(prefix);
    for (i, path) in paths.into_iter().enumerate() {
        if i > 0 {
            key.push('\u{0}');
        }
        key.push_str(text(event, path));
    }
    key
}

fn joined(event: &Value, paths: &[&[&str]]) -> String {
    joined_after("", event, paths)
}

/// What client-go's `getSpamKey` joins: source, involved object (not its field path) and
/// type. The event key and the aggregate key join these and more (the order within a key
/// is this cache's own; only which fields make it matters).
const SPAM_KEY: &[&[&str]] = &[
    &["source", "component"],
    &["source", "host"],
    &["involvedObject", "kind"],
    &["involvedObject", "namespace"],
    &["involvedObject", "name"],
    &["involvedObject", "uid"],
    &["involvedObject", "apiVersion"],
    &["type"],
];

/// What client-go's `getEventKey` joins besides [`SPAM_KEY`]: the field path, reason and
/// message.
const KEY_MORE: &[&[&str]] = &[&["involvedObject", "fieldPath"], &["reason"], &["message"]];

/// What client-go's `EventAggregatorByReasonFunc` joins besides [`SPAM_KEY`]: the reason
/// and the reporting controller and instance (similar events differ only in their message).
const AGGREGATE_MORE: &[&[&str]] = &[&["reason"], &["reportingComponent"], &["reportingInstance"]];

/// client-go's `getEventKey`.
pub fn key(event: &Value) -> String {
    joined_after("", event, SPAM_KEY.iter().chain(KEY_MORE))
}

/// client-go's `getSpamKey`, the spam filter's default.
pub fn spam_key(event: &Value) -> String {
    joined(event, SPAM_KEY)
}

/// client-go's `EventAggregatorByReasonFunc`.
pub fn aggregate_key(event: &Value) -> String {
    joined_after("", event, SPAM_KEY.iter().chain(AGGREGATE_MORE))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Recorder, core_event};
    use std::time::Duration;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_323_045 + seconds)
    }

    fn kubelet(pod: &str, reason: &str, message: &str, now: SystemTime) -> Value {
        core_event(
            Recorder {
                component: "kubelet",
                host: Some("n1"),
            },
            json!({"kind": "Pod", "namespace": "team-a", "name": pod, "uid": "u1"}),
            "Warning",
            reason,
            message,
            now,
        )
    }

    #[test]
    fn repeats_patch_the_first_event_with_a_growing_count() {
        let mut correlator = Correlator::new();
        let first = correlator.observe(kubelet("p", "BackOff", "Back-off", at(0)), at(0));
        let Correlated::Create(created) = first else {
            panic!("{first:?}")
        };
        let name = created["metadata"]["name"].as_str().unwrap().to_owned();
        assert_eq!(name, format!("p.{:x}", 1_767_323_045u128 * 1_000_000_000));
        assert_eq!(created["metadata"]["namespace"], "team-a");
        assert!(created["metadata"].get("generateName").is_none());
        assert_eq!(created["count"], 1);

        for (n, seconds) in [(2u64, 10u64), (3, 40)] {
            let again = correlator.observe(
                kubelet("p", "BackOff", "Back-off", at(seconds)),
                at(seconds),
            );
            let Correlated::Patch {
                namespace,
                name: patched,
                patch,
                event,
            } = again
            else {
                panic!("{again:?}")
            };
            assert_eq!(
                (namespace.as_str(), patched.as_str()),
                ("team-a", name.as_str())
            );
            assert_eq!(patch["count"], n);
            assert_eq!(patch["lastTimestamp"], crate::time::timestamp(at(seconds)));
            assert_eq!(patch["message"], "Back-off");
            // What is created should the recorded event be gone.
            assert_eq!(event["metadata"]["name"], name.as_str());
            assert_eq!(event["count"], n);
            assert_eq!(event["firstTimestamp"], created["firstTimestamp"]);
        }
    }

    #[test]
    fn events_differing_in_any_key_field_are_new() {
        let mut correlator = Correlator::new();
        let base = kubelet("p", "Failed", "m", at(0));
        assert!(matches!(
            correlator.observe(base.clone(), at(0)),
            Correlated::Create(_)
        ));
        let variants: Vec<Value> = vec![
            kubelet("q", "Failed", "m", at(0)),
            kubelet("p", "BackOff", "m", at(0)),
            kubelet("p", "Failed", "other", at(0)),
            {
                let mut e = base.clone();
                e["type"] = json!("Normal");
                e
            },
            {
                let mut e = base.clone();
                e["source"]["host"] = json!("n2");
                e
            },
            {
                let mut e = base.clone();
                e["involvedObject"]["uid"] = json!("u2");
                e
            },
            {
                let mut e = base.clone();
                e["involvedObject"]["fieldPath"] = json!("spec.containers{c}");
                e
            },
        ];
        let mut names = std::collections::BTreeSet::new();
        for variant in variants {
            // All at the same instant: names still differ.
            match correlator.observe(variant, at(0)) {
                Correlated::Create(event) => {
                    assert!(names.insert(event["metadata"]["name"].as_str().unwrap().to_owned()));
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(
            correlator.observe(base, at(5)),
            Correlated::Patch { .. }
        ));
    }

    #[test]
    fn the_least_recently_seen_are_forgotten_first() {
        let mut correlator = Correlator::new();
        let event = |i: usize| kubelet(&format!("p{i}"), "Started", "m", at(0));
        correlator.observe(event(0), at(0));
        for i in 1..REMEMBERED {
            correlator.observe(event(i), at(0));
        }
        // p0 seen again: now the most recent.
        assert!(matches!(
            correlator.observe(event(0), at(1)),
            Correlated::Patch { .. }
        ));
        // One more pushes out p1, the least recently seen.
        correlator.observe(event(REMEMBERED), at(1));
        assert!(matches!(
            correlator.observe(event(1), at(2)),
            Correlated::Create(_)
        ));
        assert!(matches!(
            correlator.observe(event(0), at(2)),
            Correlated::Patch { .. }
        ));
    }

    // Ported from client-go's tools/record/events_cache_test.go.

    fn reference(kind: &str, name: &str, namespace: &str) -> Value {
        json!({"kind": kind, "name": name, "namespace": namespace, "uid": "C934D34AFB20242",
               "apiVersion": "version", "fieldPath": "spec.containers{mycontainer}"})
    }

    fn make_event(reason: &str, message: &str, involved: &Value) -> Value {
        json!({"reason": reason, "message": message, "involvedObject": involved,
               "source": {"component": "kubelet", "host": "kublet.node1"},
               "count": 1, "type": "Normal"})
    }

    fn make_events(n: usize, template: &Value) -> Vec<Value> {
        vec![template.clone(); n]
    }

    fn make_unique_events(n: usize) -> Vec<Value> {
        (0..n)
            .map(|i| {
                make_event(
                    &format!("reason-{i}"),
                    &format!("message-{i}"),
                    &reference("Pod", &format!("pod-{i}"), &format!("ns-{i}")),
                )
            })
            .collect()
    }

    fn make_similar_events(n: usize, template: &Value, prefix: &str) -> Vec<Value> {
        (0..n)
            .map(|i| {
                let mut event = template.clone();
                let message = format!("{prefix}-{i}-{}", text(template, &["message"]));
                event["message"] = json!(message);
                event
            })
            .collect()
    }

    fn stamped(mut event: Value, now: SystemTime) -> Value {
        event["firstTimestamp"] = json!(crate::time::timestamp(now));
        event["lastTimestamp"] = json!(crate::time::timestamp(now));
        event
    }

    /// upstream's `validateEvent`: the fields, the count, the name's prefix, and first and
    /// last timestamps equal exactly when the count is 1.
    fn validate(scenario: &str, actual: &Value, expected: &Value, count: u64) {
        for field in ["reason", "message", "type", "involvedObject", "source"] {
            assert_eq!(actual[field], expected[field], "{scenario}: {field}");
        }
        assert_eq!(actual["count"], count, "{scenario}");
        let prefix = format!("{}.", text(expected, &["involvedObject", "name"]));
        assert!(
            text(actual, &["metadata", "name"]).starts_with(&prefix),
            "{scenario}: {actual}"
        );
        assert_eq!(
            actual["firstTimestamp"] == actual["lastTimestamp"],
            count == 1,
            "{scenario}: {actual}"
        );
    }

    fn written(result: &Correlated) -> Option<&Value> {
        match result {
            Correlated::Create(event) | Correlated::Patch { event, .. } => Some(event),
            Correlated::Skip => None,
        }
    }

    #[test]
    fn aggregate_keys_differ_only_by_message() {
        let pod = reference("Pod", "pod1", "other");
        let event1 = make_event("end-of-world", "it was fun", &pod);
        let event2 = make_event("end-of-world", "it was awful", &pod);
        let event3 = make_event("nevermind", "it was a bug", &pod);
        assert_eq!(aggregate_key(&event1), aggregate_key(&event2));
        assert_ne!(key(&event1), key(&event2));
        assert_ne!(aggregate_key(&event1), aggregate_key(&event3));
        let mut other_container = event1.clone();
        other_container["involvedObject"]["fieldPath"] = json!("spec.containers{c2}");
        assert_eq!(aggregate_key(&event1), aggregate_key(&other_container));
        assert_ne!(key(&event1), key(&other_container));
    }

    #[test]
    fn the_correlator_counts_aggregates_and_filters_as_upstream() {
        let pod = reference("Pod", "my-pod", "my-ns");
        let first = make_event("first", "i am first", &pod);
        let duplicate = make_event("duplicate", "me again", &pod);
        let unique = make_event("unique", "snowflake", &pod);
        let mut similar = make_event("similar", "similar message", &pod);
        similar["involvedObject"]["fieldPath"] = json!("spec.containers{container1}");
        let aggregate = make_event(
            "similar",
            &format!("{COMBINED_PREFIX}similar message"),
            &similar["involvedObject"],
        );
        let mut other_container = similar.clone();
        other_container["involvedObject"]["fieldPath"] = json!("spec.containers{container2}");
        let max = AGGREGATE_MAX_EVENTS;
        let burst = SPAM_BURST as usize;
        // (scenario, previous events, new event, expected event and count (None: skipped),
        // seconds between clock readings)
        type Scenario<'a> = (
            &'a str,
            Vec<Value>,
            &'a Value,
            Option<(&'a Value, u64)>,
            u64,
        );
        let table: Vec<Scenario> = vec![
            (
                "create-a-single-event",
                vec![],
                &first,
                Some((&first, 1)),
                5,
            ),
            (
                "the-same-event-should-just-count",
                make_events(1, &duplicate),
                &duplicate,
                Some((&duplicate, 2)),
                5,
            ),
            (
                "the-same-event-should-just-count-even-if-more-than-aggregate",
                make_events(max, &duplicate),
                &duplicate,
                Some((&duplicate, max as u64 + 1)),
                30,
            ),
            (
                "the-same-event-is-spam-if-happens-too-frequently",
                make_events(burst + 1, &duplicate),
                &duplicate,
                None,
                1,
            ),
            (
                "create-many-unique-events",
                make_unique_events(30),
                &unique,
                Some((&unique, 1)),
                5,
            ),
            (
                "similar-events-should-aggregate-event",
                make_similar_events(max - 1, &similar, "similar message"),
                &similar,
                Some((&aggregate, 1)),
                5,
            ),
            (
                "similar-events-many-times-should-count-the-aggregate",
                make_similar_events(max, &similar, "similar message"),
                &similar,
                Some((&aggregate, 2)),
                5,
            ),
            (
                "events-from-different-containers-do-not-aggregate",
                make_events(1, &other_container),
                &similar,
                Some((&similar, 1)),
                5,
            ),
            (
                "similar-events-whose-interval-is-greater-than-aggregate-interval-do-not-aggregate",
                make_similar_events(max - 1, &similar, "similar message"),
                &similar,
                Some((&similar, 1)),
                AGGREGATE_INTERVAL.as_secs(),
            ),
        ];
        for (scenario, previous, new, expected, interval) in table {
            let mut correlator = Correlator::new();
            // Upstream's test clock advances on every reading, and a correlation reads it
            // twice after the test's own reading: three steps per event.
            let step = Duration::from_secs(interval * 3);
            let mut now = at(0);
            for event in previous {
                now += step;
                correlator.observe(stamped(event, now), now);
            }
            now += step;
            let result = correlator.observe(stamped(new.clone(), now), now);
            match (expected, written(&result)) {
                (None, None) => {}
                (Some((event, count)), Some(actual)) => validate(scenario, actual, event, count),
                (expected, _) => panic!("{scenario}: wanted {expected:?}, got {result:?}"),
            }
        }
    }

    #[test]
    fn the_spam_filter_counts_by_source_and_object_or_a_given_key() {
        fn by_object_and_reason(event: &Value) -> String {
            // The default key's source and involved object, with the reason for the type.
            const REASON: &[&[&str]] = &[&["reason"]];
            let source_and_object = &SPAM_KEY[..SPAM_KEY.len() - 1];
            joined_after("", event, source_and_object.iter().chain(REASON))
        }
        let pod = reference("Pod", "my-pod", "my-ns");
        let original = make_event("original", "i am first", &pod);
        let different_reason = make_event("duplicate", "me again", &pod);
        let spam = make_event("original", "me again", &pod);
        type SpamKey = Option<fn(&Value) -> String>;
        let table: Vec<(&str, &Value, bool, SpamKey)> = vec![
            (
                "reported as spam if the object reference is the same, by default",
                &different_reason,
                true,
                None,
            ),
            (
                "not spam if the reason differs, counted by object and reason",
                &different_reason,
                false,
                Some(by_object_and_reason),
            ),
            (
                "spam if object and reason are the same but the message differs",
                &spam,
                true,
                Some(by_object_and_reason),
            ),
        ];
        for (scenario, new, skipped, key) in table {
            let mut options = Options {
                burst: 1,
                ..Options::default()
            };
            if let Some(key) = key {
                options.spam_key = key;
            }
            let mut correlator = Correlator::with_options(options);
            let mut now = at(0);
            now += Duration::from_secs(3);
            assert!(written(&correlator.observe(original.clone(), now)).is_some());
            now += Duration::from_secs(3);
            let result = correlator.observe(new.clone(), now);
            match written(&result) {
                None => assert!(skipped, "{scenario}"),
                Some(actual) => {
                    assert!(!skipped, "{scenario}");
                    validate(scenario, actual, new, 1);
                }
            }
        }
    }

    #[test]
    fn a_flood_from_one_object_is_limited_to_the_burst_then_the_refill() {
        let mut correlator = Correlator::new();
        // Distinct reasons: neither counted up nor combined, only the spam filter applies.
        let flood = |correlator: &mut Correlator, from: usize, n: usize, now| {
            (from..from + n)
                .filter(|i| {
                    let event = kubelet("p", &format!("Reason{i}"), "m", now);
                    written(&correlator.observe(event, now)).is_some()
                })
                .count()
        };
        assert_eq!(flood(&mut correlator, 0, 100, at(0)), SPAM_BURST as usize);
        // Another object, and another source, have buckets of their own.
        let other = kubelet("q", "Reason0", "m", at(0));
        assert!(written(&correlator.observe(other, at(0))).is_some());
        // One event per five minutes comes back.
        assert_eq!(flood(&mut correlator, 100, 10, at(299)), 0);
        assert_eq!(flood(&mut correlator, 110, 10, at(300)), 1);
        assert_eq!(flood(&mut correlator, 120, 10, at(599)), 0);
        assert_eq!(flood(&mut correlator, 130, 10, at(600)), 1);
        // A long quiet spell refills the bucket, no further than the burst.
        assert_eq!(
            flood(&mut correlator, 200, 100, at(600 + 300 * 100)),
            SPAM_BURST as usize
        );
    }

    #[test]
    fn combined_events_are_counted_up_and_start_afresh_after_a_quiet_spell() {
        let mut correlator = Correlator::with_options(Options {
            burst: 1000,
            ..Options::default()
        });
        let failed = |i: usize, now| kubelet("p", "FailedMount", &format!("volume {i}"), now);
        for i in 0..AGGREGATE_MAX_EVENTS - 1 {
            let result = correlator.observe(failed(i, at(i as u64)), at(i as u64));
            assert!(matches!(result, Correlated::Create(_)), "{i}: {result:?}");
        }
        let tenth = correlator.observe(failed(9, at(9)), at(9));
        let Correlated::Create(combined) = tenth else {
            panic!("{tenth:?}")
        };
        assert_eq!(combined["message"], format!("{COMBINED_PREFIX}volume 9"));
        assert_eq!(combined["count"], 1);
        let name = combined["metadata"]["name"].as_str().unwrap().to_owned();
        let eleventh = correlator.observe(failed(10, at(10)), at(10));
        let Correlated::Patch {
            name: patched,
            patch,
            ..
        } = eleventh
        else {
            panic!("{eleventh:?}")
        };
        assert_eq!(patched, name);
        assert_eq!(
            patch,
            json!({"count": 2, "lastTimestamp": crate::time::timestamp(at(10)),
                   "message": format!("{COMBINED_PREFIX}volume 10")})
        );
        // Over ten minutes without one: recorded as itself again.
        let later = at(10) + AGGREGATE_INTERVAL + Duration::from_secs(1);
        let result = correlator.observe(failed(11, later), later);
        let Correlated::Create(alone) = result else {
            panic!("{result:?}")
        };
        assert_eq!(alone["message"], "volume 11");
    }
}
