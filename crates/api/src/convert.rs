//! Resources served in one form and stored in another. Today: `events.k8s.io/v1` Events are
//! stored as core `v1` Events, as upstream does, so `kubectl describe` (which reads core
//! events) shows events that controllers record through `events.k8s.io` (kube-rs's
//! `Recorder`, for one).
//!
//! Pure field mappings; knows nothing about storage or HTTP.

use serde_json::{Map, Value, json};

use crate::resource::Resource;

/// (served field, stored core field) pairs of `events.k8s.io/v1` ↔ core `v1` Events.
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// Whether a resource is stored in another resource's form: `events.k8s.io` Events, and
/// custom kinds served in a version other than their storage version (conversion `None`:
/// only `apiVersion` differs).
pub fn is_view(resource: Resource) -> bool {
    is_event_view(resource) || other_version(resource).is_some()
}

fn is_event_view(resource: Resource) -> bool {
    (resource.group(), resource.kind()) == ("events.k8s.io", "Event")
}

/// The storage version of a custom kind served in another version.
fn other_version(resource: Resource) -> Option<&'static str> {
    let custom = resource.info.custom.as_ref()?;
    (custom.storage_version != resource.info.version).then_some(custom.storage_version.as_str())
}

/// The resource whose form and keys a resource is stored under.
pub fn storage_of(resource: Resource) -> Resource {
    if is_event_view(resource) {
        Resource::find("", "v1", "events").unwrap_or(resource)
    } else {
        resource
    }
}

fn rename(object: Value, pairs: impl Iterator<Item = (&'static str, &'static str)>) -> Value {
    let Value::Object(mut map) = object else {
        return object;
    };
    let mut renamed = Map::new();
    for (from, to) in pairs {
        if let Some(value) = map.remove(from) {
            renamed.insert(to.to_string(), value);
        }
    }
    map.extend(renamed);
    Value::Object(map)
}

/// Whether the resource is stored as it is served (no conversion either way).
pub fn stored_as_served(resource: Resource) -> bool {
    other_version(resource).is_none() && !is_event_view(resource)
}

/// Converts an object from its served form to its stored form.
pub fn to_storage(resource: Resource, object: Value) -> Value {
    if let Some(storage) = other_version(resource) {
        let mut stored = object;
        stored["apiVersion"] = json!(format!("{}/{storage}", resource.group()));
        return stored;
    }
    if !is_event_view(resource) {
        return object;
    }
    let mut stored = rename(object, EVENT_FIELDS.iter().copied());
    stored["apiVersion"] = json!("v1");
    stored["kind"] = json!("Event");
    stored
}

/// Converts an object from its stored form to its served form.
pub fn from_storage(resource: Resource, object: Value) -> Value {
    if other_version(resource).is_some() {
        let mut served = object;
        served["apiVersion"] = json!(resource.info.api_version());
        return served;
    }
    if !is_event_view(resource) {
        return object;
    }
    let mut served = rename(object, EVENT_FIELDS.iter().map(|(a, b)| (*b, *a)));
    served["apiVersion"] = json!("events.k8s.io/v1");
    served["kind"] = json!("Event");
    served
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_between_forms() {
        let events = Resource::find("events.k8s.io", "v1", "events").unwrap();
        let served = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e"}, "regarding": {"kind": "Pod", "name": "p"},
            "note": "pulled", "reason": "Pulled", "reportingController": "kubelet", "type": "Normal"});
        let stored = to_storage(events, served.clone());
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(stored["involvedObject"]["name"], "p");
        assert_eq!(stored["message"], "pulled");
        assert_eq!(stored["reportingComponent"], "kubelet");
        assert!(stored.get("note").is_none());
        assert_eq!(from_storage(events, stored), served);
        assert_eq!(storage_of(events).group(), "");
        let pods = Resource::find("", "v1", "pods").unwrap();
        assert_eq!(to_storage(pods, json!({"a": 1})), json!({"a": 1}));
    }
}
