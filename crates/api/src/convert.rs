//! Resources served in one form and stored in another:
//!
//! - `events.k8s.io/v1` Events are stored as core `v1` Events, as upstream does, so
//!   `kubectl describe` (which reads core events) shows events that controllers record through
//!   `events.k8s.io` (kube-rs's `Recorder`, for one);
//! - built-in kinds served in several versions are stored in one: `resource.k8s.io`
//!   `v1beta1` and `v1beta2` as `v1` ([`dra`]), `autoscaling/v1` HorizontalPodAutoscalers as
//!   `autoscaling/v2` ([`hpa`]), each as upstream converts them;
//! - custom kinds served in a version other than their storage version (conversion `None`:
//!   only `apiVersion` differs), except Kueue's (`kueue.x-k8s.io`), which Tessera converts
//!   natively as Kueue's conversion webhook would ([`kueue`]), whether the CRD is Tessera's
//!   bundled one or Kueue's released manifest with `conversion.strategy: Webhook`.
//!
//! Pure field mappings; knows nothing about storage or HTTP.

mod dra;
mod hpa;
pub mod kueue;

/// The API group whose custom kinds Tessera converts between versions itself.
pub const NATIVE_CONVERSION_GROUP: &str = tessera_model::kueue::GROUP;

use std::borrow::Cow;

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

/// Whether a resource is stored in another resource's form: `events.k8s.io` Events, built-in
/// kinds served in a version other than their storage version, and custom kinds likewise.
pub fn is_view(resource: Resource) -> bool {
    is_event_view(resource) || other_version(resource).is_some()
}

fn is_event_view(resource: Resource) -> bool {
    (resource.group(), resource.kind()) == ("events.k8s.io", "Event")
}

/// The storage version of a kind served in another version.
fn other_version(resource: Resource) -> Option<&'static str> {
    match resource.info.custom.as_ref() {
        Some(custom) => (custom.storage_version != resource.info.version)
            .then_some(custom.storage_version.as_str()),
        None => builtin_storage_version(resource),
    }
}

/// The storage version of a built-in kind served in a version other than the one it is stored
/// in, as Kubernetes 1.34 stores them.
fn builtin_storage_version(resource: Resource) -> Option<&'static str> {
    match (resource.group(), resource.kind(), resource.info.version) {
        ("resource.k8s.io", _, "v1beta1" | "v1beta2") => Some("v1"),
        ("autoscaling", "HorizontalPodAutoscaler", "v1") => Some("v2"),
        _ => None,
    }
}

/// The resource whose form and keys a resource is stored under.
pub fn storage_of(resource: Resource) -> Resource {
    if is_event_view(resource) {
        return Resource::find("", "v1", "events").unwrap_or(resource);
    }
    match builtin_storage_version(resource) {
        Some(version) => {
            Resource::find(resource.group(), version, resource.plural()).unwrap_or(resource)
        }
        None => resource,
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

/// An object of a built-in kind in the form of the version it is stored in, for code that reads
/// one form of a kind served in several versions (Tables). Other objects are returned as
/// they are.
pub fn in_storage_version(resource: Resource, object: &Value) -> Cow<'_, Value> {
    if !resource.is_custom() && builtin_storage_version(resource).is_some() {
        Cow::Owned(to_storage(resource, object.clone()))
    } else {
        Cow::Borrowed(object)
    }
}

/// Converts an object from its served form to its stored form.
pub fn to_storage(resource: Resource, object: Value) -> Value {
    if let Some(storage) = other_version(resource) {
        let mut stored = match (resource.group(), resource.info.version) {
            (NATIVE_CONVERSION_GROUP, "v1beta1") if storage == "v1beta2" => {
                kueue::v1beta1_to_v1beta2(resource.kind(), object)
            }
            _ if resource.is_custom() => object,
            ("resource.k8s.io", "v1beta1") => dra::v1beta1_to_v1(resource.kind(), object),
            ("autoscaling", "v1") => hpa::v1_to_v2(object),
            _ => object,
        };
        if stored.is_object() {
            stored["apiVersion"] = json!(format!("{}/{storage}", resource.group()));
        }
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
    if let Some(storage) = other_version(resource) {
        let mut served = match (resource.group(), resource.info.version) {
            (NATIVE_CONVERSION_GROUP, "v1beta1")
                if resource.is_custom() && storage == "v1beta2" =>
            {
                kueue::v1beta2_to_v1beta1(resource.kind(), object)
            }
            _ if resource.is_custom() => object,
            ("resource.k8s.io", "v1beta1") => dra::v1_to_v1beta1(resource.kind(), object),
            ("autoscaling", "v1") => hpa::v2_to_v1(object),
            _ => object,
        };
        if served.is_object() {
            served["apiVersion"] = json!(resource.info.api_version());
        }
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
    use tessera_model::json::Pointer as _;

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

    /// NVIDIA's published v1beta1 quickstart objects, copied unchanged.
    const NVIDIA_V1BETA1: [&str; 7] = [
        include_str!(
            "../../cli/tests/fixtures/upstream/dra-driver-nvidia-gpu/v1beta1/gpu-test1.yaml"
        ),
        include_str!(
            "../../cli/tests/fixtures/upstream/dra-driver-nvidia-gpu/v1beta1/gpu-test2.yaml"
        ),
        include_str!(
            "../../cli/tests/fixtures/upstream/dra-driver-nvidia-gpu/v1beta1/gpu-test3.yaml"
        ),
        include_str!(
            "../../cli/tests/fixtures/upstream/dra-driver-nvidia-gpu/v1beta1/gpu-test4.yaml"
        ),
        include_str!(
            "../../cli/tests/fixtures/upstream/dra-driver-nvidia-gpu/v1beta1/gpu-test5.yaml"
        ),
        include_str!(
            "../../cli/tests/fixtures/upstream/dra-driver-nvidia-gpu/v1beta1/gpu-test6.yaml"
        ),
        include_str!(
            "../../cli/tests/fixtures/upstream/dra-driver-nvidia-gpu/v1beta1/gpu-test-mps.yaml"
        ),
    ];

    fn resource_objects(text: &str) -> Vec<Value> {
        text.split("\n---")
            .filter_map(|document| serde_saphyr::from_str::<Value>(document).ok())
            .filter(|object| object["apiVersion"] == "resource.k8s.io/v1beta1")
            .collect()
    }

    #[test]
    fn nvidia_v1beta1_objects_round_trip_through_v1_and_v1beta2() {
        let mut seen = 0;
        for text in NVIDIA_V1BETA1 {
            for original in resource_objects(text) {
                seen += 1;
                let kind = original["kind"].as_str().unwrap();
                let plural = format!("{}s", kind.to_ascii_lowercase());
                let v1beta1 = Resource::find("resource.k8s.io", "v1beta1", &plural).unwrap();
                let v1beta2 = Resource::find("resource.k8s.io", "v1beta2", &plural).unwrap();
                assert!(is_view(v1beta1) && is_view(v1beta2));
                assert_eq!(storage_of(v1beta1).info.version, "v1");
                assert_eq!(v1beta1.prefix(None), storage_of(v1beta2).prefix(None));

                let stored = to_storage(v1beta1, original.clone());
                assert_eq!(stored["apiVersion"], "resource.k8s.io/v1");
                let requests = stored
                    .at("/spec/devices/requests")
                    .or_else(|| stored.at("/spec/spec/devices/requests"))
                    .and_then(Value::as_array)
                    .unwrap();
                for request in requests {
                    assert!(request.get("deviceClassName").is_none(), "{request}");
                    assert!(request.at("/exactly/deviceClassName").is_some());
                }
                assert_eq!(from_storage(v1beta1, stored.clone()), original);

                let as_v1beta2 = from_storage(v1beta2, stored.clone());
                assert_eq!(as_v1beta2["apiVersion"], "resource.k8s.io/v1beta2");
                assert_eq!(as_v1beta2["spec"], stored["spec"]);
                assert_eq!(to_storage(v1beta2, as_v1beta2), stored);
            }
        }
        assert_eq!(seen, 7, "one claim or template per manifest");
    }

    #[test]
    fn hpa_v1_is_stored_as_v2() {
        let v1 = Resource::find("autoscaling", "v1", "horizontalpodautoscalers").unwrap();
        let v2 = storage_of(v1);
        assert_eq!(v2.info.version, "v2");
        assert!(is_view(v1) && !is_view(v2));
        let served = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3,
                     "targetCPUUtilizationPercentage": 80}});
        let stored = to_storage(v1, served.clone());
        assert_eq!(stored["apiVersion"], "autoscaling/v2");
        assert_eq!(
            stored["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
        assert_eq!(from_storage(v1, stored.clone()), served);
        assert_eq!(
            in_storage_version(v1, &served).into_owned(),
            stored,
            "tables read the stored form"
        );
    }
}
