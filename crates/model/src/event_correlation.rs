//! Counting repeated events up, as client-go's `EventCorrelator` (its events logger) does for
//! the kubelet and the controllers: an event equal to one recorded before (same source,
//! involved object, type, reason and message) is not created again; the recorded one is
//! patched with `count + 1`, the new `lastTimestamp` and the message, so `kubectl describe`
//! shows `(x3 over 2m)`.
//!
//! Also names new events as upstream does (`<object>.<unix nanos in hex>`), so a later patch
//! can find them without reading the created object back. Unlike client-go, no spam filter
//! drops events and similar events with distinct messages are not combined.
//!
//! Pure: the events (built by [`crate::event::core_event`]) and the time come in; what to
//! write goes out. Sending is the caller's business.

use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

use serde_json::{Value, json};

/// Events remembered (client-go's `maxLruCacheEntries`).
pub const REMEMBERED: usize = 4096;

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
}

/// A recorded event: its name, namespace, count and first timestamp.
#[derive(Debug, Clone)]
struct Seen {
    namespace: String,
    name: String,
    count: u64,
    first_timestamp: Value,
    /// When it was last observed (the order the oldest are forgotten in).
    tick: u64,
}

/// The events one recorder has written, keyed by what makes two events the same.
#[derive(Debug, Default)]
pub struct Correlator {
    seen: HashMap<String, Seen>,
    /// tick → key, to forget the least recently observed.
    order: BTreeMap<u64, String>,
    tick: u64,
    /// The last name suffix handed out, kept increasing so two events of one object never
    /// share a name.
    last_nanos: u128,
}

impl Correlator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Decides how to record `event` (a `core/v1` Event without a name) observed at `now`.
    pub fn observe(&mut self, mut event: Value, now: SystemTime) -> Correlated {
        let key = key(&event);
        self.tick += 1;
        let tick = self.tick;
        if let Some(seen) = self.seen.get_mut(&key) {
            self.order.remove(&seen.tick);
            self.order.insert(tick, key);
            seen.tick = tick;
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
        let object = event
            .pointer("/involvedObject/name")
            .and_then(Value::as_str)
            .unwrap_or("event");
        let name = format!("{object}.{nanos:x}");
        let namespace = event
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_owned();
        set_name(&mut event, &namespace, &name);
        self.seen.insert(
            key.clone(),
            Seen {
                namespace,
                name,
                count: event.get("count").and_then(Value::as_u64).unwrap_or(1),
                first_timestamp: event.get("firstTimestamp").cloned().unwrap_or(Value::Null),
                tick,
            },
        );
        self.order.insert(tick, key);
        while self.seen.len() > REMEMBERED {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.seen.remove(&oldest);
        }
        Correlated::Create(event)
    }
}

/// Names `event` `name` in `namespace` (in place of a `generateName`).
fn set_name(event: &mut Value, namespace: &str, name: &str) {
    event["metadata"] = json!({"name": name, "namespace": namespace});
}

/// client-go's `getEventKey`: source, involved object, type, reason, message and the
/// reporting pair.
fn key(event: &Value) -> String {
    let text = |pointer: &str| event.pointer(pointer).and_then(Value::as_str).unwrap_or("");
    [
        "/source/component",
        "/source/host",
        "/involvedObject/kind",
        "/involvedObject/namespace",
        "/involvedObject/name",
        "/involvedObject/uid",
        "/involvedObject/apiVersion",
        "/involvedObject/fieldPath",
        "/type",
        "/reason",
        "/message",
        "/reportingComponent",
        "/reportingInstance",
    ]
    .iter()
    .map(|p| text(p))
    .collect::<Vec<_>>()
    .join("\u{0}")
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
}
