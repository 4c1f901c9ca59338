//! `resource.k8s.io/v1beta1` ↔ `v1` (the storage version), field for field as upstream's
//! `pkg/apis/resource/v1beta1/conversion.go` (Kubernetes 1.34) converts them:
//!
//! - a v1beta1 request carries `deviceClassName`, `selectors`, `allocationMode`, `count`,
//!   `adminAccess`, `tolerations` and `capacity` itself; v1 puts them under `exactly` (made
//!   only when one of them is set, as upstream's `hasAnyMainRequestFieldsSet`);
//! - a v1beta1 device holds everything but its name under `basic`; v1 flattens it, and reading
//!   back always answers a `basic` (possibly empty), as upstream does;
//! - a v1beta1 slice's `nodeName` and `allNodes` are plain values, so `""` and `false` are the
//!   same as absent either way.
//!
//! DeviceClasses, `firstAvailable` subrequests and claim statuses have one shape in both.
//! `v1beta2` has v1's shape throughout: only `apiVersion` changes. Every field v1beta1 has
//! maps to v1 and back, so nothing needs an annotation to round-trip.
//!
//! Works on JSON values; objects that are not shaped as expected pass through unchanged (the
//! schema of the served version has already refused them on writes).

use serde_json::{Map, Value};

/// The fields a v1beta1 request holds directly and a v1 request under `exactly`, in order.
const EXACT_FIELDS: [&str; 7] = [
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
    "tolerations",
    "capacity",
];

/// The requests of a claim or template spec.
fn requests_of<'a>(kind: &str, object: &'a mut Value) -> Option<&'a mut Vec<Value>> {
    let pointer = match kind {
        "ResourceClaim" => "/spec/devices/requests",
        "ResourceClaimTemplate" => "/spec/spec/devices/requests",
        _ => return None,
    };
    object.pointer_mut(pointer)?.as_array_mut()
}

/// Converts a stored v1beta1 object to v1.
pub fn v1beta1_to_v1(kind: &str, mut object: Value) -> Value {
    if let Some(requests) = requests_of(kind, &mut object) {
        for request in requests.iter_mut().filter_map(Value::as_object_mut) {
            request_to_v1(request);
        }
    }
    if kind == "ResourceSlice" {
        slice_spec(&mut object, device_to_v1);
    }
    object
}

/// Converts a stored v1 object to v1beta1.
pub fn v1_to_v1beta1(kind: &str, mut object: Value) -> Value {
    if let Some(requests) = requests_of(kind, &mut object) {
        for request in requests.iter_mut().filter_map(Value::as_object_mut) {
            request_to_v1beta1(request);
        }
    }
    if kind == "ResourceSlice" {
        slice_spec(&mut object, device_to_v1beta1);
    }
    object
}

/// Whether Go would see a main-request field as set: a non-empty string, a non-zero count,
/// any present list or pointer (an empty `selectors: []` counts, as a non-nil slice).
fn is_set(field: &str, value: &Value) -> bool {
    match (field, value) {
        (_, Value::Null) => false,
        ("deviceClassName" | "allocationMode", Value::String(text)) => !text.is_empty(),
        ("count", count) => count.as_i64() != Some(0),
        _ => true,
    }
}

/// Whether Go's `omitempty` drops the value of a field when it writes JSON.
fn omitted(field: &str, value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty() && matches!(field, "attributes" | "capacity"),
        Value::String(text) => text.is_empty() && field == "allocationMode",
        Value::Number(n) => field == "count" && n.as_i64() == Some(0),
        Value::Bool(_) => false,
    }
}

fn request_to_v1(request: &mut Map<String, Value>) {
    let taken: Vec<(&str, Value)> = EXACT_FIELDS
        .iter()
        .filter_map(|field| request.remove(*field).map(|value| (*field, value)))
        .collect();
    if !taken.iter().any(|(field, value)| is_set(field, value)) {
        return;
    }
    let mut exactly = Map::new();
    for (field, value) in taken {
        // `deviceClassName` is required in v1 and written even when empty.
        if field == "deviceClassName" || !omitted(field, &value) {
            exactly.insert(field.to_string(), value);
        }
    }
    exactly
        .entry("deviceClassName")
        .or_insert_with(|| Value::String(String::new()));
    request.insert("exactly".into(), Value::Object(exactly));
}

fn request_to_v1beta1(request: &mut Map<String, Value>) {
    let Some(Value::Object(exactly)) = request.remove("exactly") else {
        return;
    };
    for field in EXACT_FIELDS {
        if let Some(value) = exactly.get(field)
            && !omitted(field, value)
            && !(field == "deviceClassName" && value.as_str() == Some(""))
        {
            request.insert(field.to_string(), value.clone());
        }
    }
}

/// Converts a slice's spec: `nodeName: ""` and `allNodes: false` are absent in either version,
/// and each device is converted.
fn slice_spec(object: &mut Value, device: fn(&mut Map<String, Value>)) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec.get("nodeName").and_then(Value::as_str) == Some("") {
        spec.remove("nodeName");
    }
    if spec.get("allNodes").and_then(Value::as_bool) == Some(false) {
        spec.remove("allNodes");
    }
    if let Some(devices) = spec.get_mut("devices").and_then(Value::as_array_mut) {
        for each in devices.iter_mut().filter_map(Value::as_object_mut) {
            device(each);
        }
    }
}

fn device_to_v1(device: &mut Map<String, Value>) {
    let Some(Value::Object(basic)) = device.remove("basic") else {
        return;
    };
    for (field, value) in basic {
        if !omitted(&field, &value) {
            device.insert(field, value);
        }
    }
}

fn device_to_v1beta1(device: &mut Map<String, Value>) {
    let name = device.remove("name");
    let basic: Map<String, Value> = std::mem::take(device)
        .into_iter()
        .filter(|(field, value)| !omitted(field, value))
        .collect();
    if let Some(name) = name {
        device.insert("name".into(), name);
    }
    device.insert("basic".into(), Value::Object(basic));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// (case, v1beta1 request, v1 request): each converts to the other.
    fn request_table() -> Vec<(&'static str, Value, Value)> {
        vec![
            (
                "class and count move under exactly",
                json!({"name": "gpu", "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2}),
                json!({"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2}}),
            ),
            (
                "selectors, admin access, tolerations and capacity move too",
                json!({"name": "r", "deviceClassName": "c",
                       "selectors": [{"cel": {"expression": "true"}}], "adminAccess": false,
                       "tolerations": [{"key": "k", "operator": "Exists"}],
                       "capacity": {"requests": {"memory": "1Gi"}}}),
                json!({"name": "r", "exactly": {"deviceClassName": "c",
                       "selectors": [{"cel": {"expression": "true"}}], "adminAccess": false,
                       "tolerations": [{"key": "k", "operator": "Exists"}],
                       "capacity": {"requests": {"memory": "1Gi"}}}}),
            ),
            (
                "firstAvailable alone makes no exactly",
                json!({"name": "r", "firstAvailable": [{"name": "a", "deviceClassName": "c", "count": 1}]}),
                json!({"name": "r", "firstAvailable": [{"name": "a", "deviceClassName": "c", "count": 1}]}),
            ),
            (
                "All mode without a class still makes exactly, with an empty class",
                json!({"name": "r", "allocationMode": "All"}),
                json!({"name": "r", "exactly": {"deviceClassName": "", "allocationMode": "All"}}),
            ),
        ]
    }

    #[test]
    fn requests_convert_both_ways() {
        for (case, v1beta1, v1) in request_table() {
            let claim = |request: &Value| json!({"spec": {"devices": {"requests": [request]}}});
            assert_eq!(
                v1beta1_to_v1("ResourceClaim", claim(&v1beta1)),
                claim(&v1),
                "{case}: to v1"
            );
            assert_eq!(
                v1_to_v1beta1("ResourceClaim", claim(&v1)),
                claim(&v1beta1),
                "{case}: to v1beta1"
            );
            let template =
                |request: &Value| json!({"spec": {"spec": {"devices": {"requests": [request]}}}});
            assert_eq!(
                v1beta1_to_v1("ResourceClaimTemplate", template(&v1beta1)),
                template(&v1),
                "{case}: template to v1"
            );
        }
    }

    #[test]
    fn request_fields_set_to_go_zero_values_make_no_exactly() {
        let request = json!({"spec": {"devices": {"requests": [
            {"name": "r", "deviceClassName": "", "count": 0, "firstAvailable": [{"name": "a", "deviceClassName": "c"}]}
        ]}}});
        let converted = v1beta1_to_v1("ResourceClaim", request);
        let request = &converted["spec"]["devices"]["requests"][0];
        assert!(request.get("exactly").is_none(), "{request}");
        assert!(request.get("count").is_none(), "{request}");
    }

    /// (case, v1beta1 slice spec, v1 slice spec).
    fn slice_table() -> Vec<(&'static str, Value, Value)> {
        vec![
            (
                "basic devices flatten",
                json!({"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                       "devices": [{"name": "gpu-0", "basic": {
                           "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-1"}},
                           "capacity": {"memory": {"value": "80Gi"}}}}]}),
                json!({"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                       "devices": [{"name": "gpu-0",
                           "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-1"}},
                           "capacity": {"memory": {"value": "80Gi"}}}]}),
            ),
            (
                "counters, taints, node selection and binding fields flatten",
                json!({"driver": "d", "allNodes": true, "pool": {"name": "p", "generation": 2, "resourceSliceCount": 1},
                       "devices": [{"name": "mig-0", "basic": {
                           "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "10Gi"}}}],
                           "nodeName": "n2", "allNodes": false,
                           "taints": [{"key": "k", "effect": "NoSchedule"}],
                           "bindsToNode": true, "bindingConditions": ["ready"],
                           "bindingFailureConditions": ["failed"], "allowMultipleAllocations": true}}]}),
                json!({"driver": "d", "allNodes": true, "pool": {"name": "p", "generation": 2, "resourceSliceCount": 1},
                       "devices": [{"name": "mig-0",
                           "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "10Gi"}}}],
                           "nodeName": "n2", "allNodes": false,
                           "taints": [{"key": "k", "effect": "NoSchedule"}],
                           "bindsToNode": true, "bindingConditions": ["ready"],
                           "bindingFailureConditions": ["failed"], "allowMultipleAllocations": true}]}),
            ),
            (
                "a device with nothing but a name reads back with an empty basic",
                json!({"driver": "d", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                       "devices": [{"name": "dev", "basic": {}}]}),
                json!({"driver": "d", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                       "devices": [{"name": "dev"}]}),
            ),
        ]
    }

    #[test]
    fn slices_convert_both_ways() {
        for (case, v1beta1, v1) in slice_table() {
            assert_eq!(
                v1beta1_to_v1("ResourceSlice", json!({"spec": v1beta1})),
                json!({"spec": v1}),
                "{case}: to v1"
            );
            assert_eq!(
                v1_to_v1beta1("ResourceSlice", json!({"spec": v1})),
                json!({"spec": v1beta1}),
                "{case}: to v1beta1"
            );
        }
    }

    #[test]
    fn slice_node_fields_at_go_zero_values_are_absent_in_both() {
        let v1beta1 =
            json!({"spec": {"driver": "d", "nodeName": "", "allNodes": false, "devices": []}});
        assert_eq!(
            v1beta1_to_v1("ResourceSlice", v1beta1),
            json!({"spec": {"driver": "d", "devices": []}})
        );
        let v1 = json!({"spec": {"driver": "d", "nodeName": "", "allNodes": false}});
        assert_eq!(
            v1_to_v1beta1("ResourceSlice", v1),
            json!({"spec": {"driver": "d"}})
        );
    }

    #[test]
    fn device_classes_and_statuses_pass_unchanged() {
        let class =
            json!({"spec": {"selectors": [{"cel": {"expression": "device.driver == \"d\""}}]}});
        assert_eq!(v1beta1_to_v1("DeviceClass", class.clone()), class);
        let status = json!({"spec": {"devices": {"requests": []}}, "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "d", "pool": "p", "device": "gpu-0"}]}}}});
        assert_eq!(v1_to_v1beta1("ResourceClaim", status.clone()), status);
    }
}
