//! Kueue's Pod integration as objects carry it (`pkg/controller/jobs/pod/constants`,
//! `pkg/util/pod`): the scheduling gate, labels, annotations and finalizer that mark a pod
//! Kueue manages, pod groups, and the role hash naming a pod's shape ([`role_hash`]).
//!
//! Knows nothing about webhooks, Workloads or the API: `tessera-api` defaults and validates
//! pods with these, `tessera-queue` builds their Workloads.

use crate::json::Pointer as _;
use serde_json::Value;

use super::go_shape::{self, string};

use crate::quantity::Quantity;

/// The scheduling gate holding a pod until its Workload is admitted (`SchedulingGateName`).
pub const ADMISSION_GATE: &str = "kueue.x-k8s.io/admission";
/// The label marking an object Kueue manages (`ManagedByKueueLabelKey`).
pub const MANAGED_LABEL: &str = "kueue.x-k8s.io/managed";
/// Its value.
pub const MANAGED_VALUE: &str = "true";
/// The finalizer on a pod Kueue manages (`PodFinalizer`).
pub const FINALIZER: &str = "kueue.x-k8s.io/managed";
/// The label (or annotation) naming a pod's group (`GroupNameLabel`).
pub const GROUP_NAME: &str = "kueue.x-k8s.io/pod-group-name";
/// The annotation giving the number of pods in the group (`GroupTotalCountAnnotation`).
pub const GROUP_TOTAL_COUNT: &str = "kueue.x-k8s.io/pod-group-total-count";
/// The annotation naming the integration that suspends a pod for its parent
/// (`SuspendedByParentAnnotation`).
pub const SUSPENDED_BY_PARENT: &str = "kueue.x-k8s.io/pod-suspending-parent";
/// The annotation naming the pod's role in its group (`RoleHashAnnotation`).
pub const ROLE_HASH: &str = "kueue.x-k8s.io/role-hash";
/// The annotation marking a group's Workload (`IsGroupWorkloadAnnotationKey`).
pub const IS_GROUP_WORKLOAD: &str = "kueue.x-k8s.io/is-group-workload";
/// The annotation admitting a group on its first pod (`GroupFastAdmissionAnnotationKey`).
pub const FAST_ADMISSION: &str = "kueue.x-k8s.io/pod-group-fast-admission";
/// The annotation marking a serving group, which never finishes (`GroupServingAnnotationKey`).
pub const SERVING: &str = "kueue.x-k8s.io/pod-group-serving";
/// The annotation (`"false"`) making a group unretriable (`RetriableInGroupAnnotationKey`).
pub const RETRIABLE_IN_GROUP: &str = "kueue.x-k8s.io/retriable-in-group";
/// The label naming a Workload created ahead of its job (`PrebuiltWorkloadLabel`).
pub const PREBUILT_WORKLOAD: &str = "kueue.x-k8s.io/prebuilt-workload-name";

/// A label of an object, if set.
pub fn label<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .at("/metadata/labels")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
}

/// An annotation of an object, if set.
pub fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .at("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// A pod's group name (`GetPodGroupName`), if it has one.
pub fn group_name(pod: &Value) -> Option<&str> {
    label(pod, GROUP_NAME).filter(|name| !name.is_empty())
}

/// The LeaderWorkerSet's name label on its pods.
pub const LWS_NAME: &str = "leaderworkerset.sigs.k8s.io/name";
/// The LeaderWorkerSet group index label.
pub const LWS_GROUP_INDEX: &str = "leaderworkerset.sigs.k8s.io/group-index";
/// The LeaderWorkerSet worker index label (0 is the leader).
pub const LWS_WORKER_INDEX: &str = "leaderworkerset.sigs.k8s.io/worker-index";

/// A LeaderWorkerSet pod's group index: its `group-index` label or, for a leader (worker
/// index 0) created without it, its ordinal in the leader StatefulSet
/// (`apps.kubernetes.io/pod-index`), which is its group's index.
pub fn lws_group_index(pod: &Value) -> Option<&str> {
    label(pod, LWS_GROUP_INDEX).or_else(|| {
        (label(pod, LWS_WORKER_INDEX) == Some("0"))
            .then(|| label(pod, "apps.kubernetes.io/pod-index"))
            .flatten()
    })
}

/// Whether the pod carries Kueue's admission gate.
pub fn gated(pod: &Value) -> bool {
    pod.at("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|gates| gates.iter().any(|g| g["name"] == ADMISSION_GATE))
}

/// `GenerateRoleHash`: the first 8 hex digits of the SHA-256 of the pod spec's shape as Go's
/// `encoding/json` writes it (requests and ports of every container, node selector, affinity,
/// tolerations, runtime class, priority, spread constraints, overhead, claims and pod-level
/// requests). Structs are written in Go's field order ([`go_shape`]), maps with sorted keys.
pub fn role_hash(spec: &Value) -> String {
    let mut shape = String::from("{\"spec\":{");
    let mut fields: Vec<(&str, String)> = vec![
        ("affinity", go(&go_shape::AFFINITY, spec.get("affinity"))),
        ("containers", containers(spec.get("containers"))),
        ("initContainers", containers(spec.get("initContainers"))),
        ("nodeSelector", sorted(spec.get("nodeSelector"))),
        ("overhead", quantities(spec.get("overhead"))),
        ("priority", sorted(spec.get("priority"))),
        (
            "resourceClaims",
            go(&go_shape::RESOURCE_CLAIMS, spec.get("resourceClaims")),
        ),
        ("runtimeClassName", sorted(spec.get("runtimeClassName"))),
        (
            "tolerations",
            go(&go_shape::TOLERATIONS, spec.get("tolerations")),
        ),
        (
            "topologySpreadConstraints",
            go(
                &go_shape::SPREAD_CONSTRAINTS,
                spec.get("topologySpreadConstraints"),
            ),
        ),
    ];
    if let Some(resources) = spec.get("resources") {
        fields.push(("resources", quantities(resources.get("requests"))));
        fields.sort_by(|a, b| a.0.cmp(b.0));
    }
    let body: Vec<String> = fields
        .into_iter()
        .map(|(key, value)| format!("{}:{value}", string(key)))
        .collect();
    shape.push_str(&body.join(","));
    shape.push_str("}}");
    sha256_hex(shape.as_bytes())[..8].to_owned()
}

/// The SHA-256 digest of `bytes` in lower-case hex.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether a value is what Go leaves out or writes as `null` (absent, null, empty).
fn empty(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::Array(items)) => items.is_empty(),
        Some(Value::Object(map)) => map.is_empty(),
        Some(Value::String(text)) => text.is_empty(),
        _ => false,
    }
}

/// A pod-spec field of a core/v1 type as Go writes it; empty (as the API server omits it) is
/// `null`.
fn go(shape: &go_shape::Go, value: Option<&Value>) -> String {
    go_shape::encode(shape, value.filter(|v| !empty(Some(v))))
}

/// Any value with object keys sorted (Go's maps); empty is `null`.
fn sorted(value: Option<&Value>) -> String {
    match value.filter(|v| !empty(Some(v))) {
        None => "null".into(),
        Some(Value::Object(map)) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", string(k), sorted(map.get(k))))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Some(Value::Array(items)) => {
            let items: Vec<String> = items.iter().map(|i| sorted(Some(i))).collect();
            format!("[{}]", items.join(","))
        }
        Some(Value::String(text)) => string(text),
        Some(other) => other.to_string(),
    }
}

/// A resource list: sorted names, canonical quantities.
fn quantities(value: Option<&Value>) -> String {
    let Some(Value::Object(map)) = value.filter(|v| !empty(Some(v))) else {
        return "null".into();
    };
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    let fields: Vec<String> = keys
        .into_iter()
        .map(|key| {
            let raw = map.get(key).and_then(Value::as_str).unwrap_or_default();
            let canonical = raw
                .parse::<Quantity>()
                .map(|q| q.to_string())
                .unwrap_or_else(|_| raw.to_owned());
            format!("{}:{}", string(key), string(&canonical))
        })
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// `ContainersShape`: each container's requests and ports.
fn containers(value: Option<&Value>) -> String {
    let Some(Value::Array(items)) = value.filter(|v| !empty(Some(v))) else {
        return "null".into();
    };
    let written: Vec<String> = items
        .iter()
        .map(|container| {
            // containerPort is written even when zero; the rest are omitempty.
            let ports = match container.get("ports") {
                Some(Value::Array(ports)) if !ports.is_empty() => {
                    let ports: Vec<String> = ports
                        .iter()
                        .map(|port| {
                            let mut fields = Vec::new();
                            for key in ["name", "hostPort", "containerPort", "protocol", "hostIP"] {
                                let field = port.get(key);
                                let zero = field == Some(&Value::from(0));
                                if key == "containerPort" || !(empty(field) || zero) {
                                    let text = field.map_or("0".into(), |f| sorted(Some(f)));
                                    fields.push(format!("{}:{text}", string(key)));
                                }
                            }
                            format!("{{{}}}", fields.join(","))
                        })
                        .collect();
                    format!("[{}]", ports.join(","))
                }
                _ => "null".into(),
            };
            let requests = quantities(container.at("/resources/requests"));
            format!("{{\"ports\":{ports},\"resources\":{{\"requests\":{requests}}}}}")
        })
        .collect();
    format!("[{}]", written.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_role_hash_is_the_sha256_of_the_shape_kueue_writes() {
        let spec = json!({"containers": [{"name": "c", "image": "busybox",
            "resources": {"requests": {"cpu": "1000m", "memory": "1Gi"}},
            "ports": [{"containerPort": 80, "protocol": "TCP"}]}],
            "nodeSelector": {"b": "2", "a": "1"}, "priority": 0});
        let shape = concat!(
            "{\"spec\":{\"affinity\":null,\"containers\":[{\"ports\":[{\"containerPort\":80,",
            "\"protocol\":\"TCP\"}],\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"1Gi\"}}}],",
            "\"initContainers\":null,\"nodeSelector\":{\"a\":\"1\",\"b\":\"2\"},\"overhead\":null,",
            "\"priority\":0,\"resourceClaims\":null,\"runtimeClassName\":null,\"tolerations\":null,",
            "\"topologySpreadConstraints\":null}}"
        );
        assert_eq!(role_hash(&spec), super::sha256_hex(shape.as_bytes())[..8]);
        // Names, images and commands are not part of the shape; requests are.
        let renamed = json!({"containers": [{"name": "other", "image": "nginx",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
            "ports": [{"containerPort": 80, "protocol": "TCP"}]}],
            "nodeSelector": {"a": "1", "b": "2"}, "priority": 0});
        assert_eq!(role_hash(&spec), role_hash(&renamed));
        let bigger = json!({"containers": [{"resources": {"requests": {"cpu": "2"}}}]});
        assert_ne!(role_hash(&spec), role_hash(&bigger));
        assert_eq!(role_hash(&spec).len(), 8);
    }

    #[test]
    fn affinity_spread_and_claims_are_hashed_in_go_field_order() {
        // (spec, the affinity/resourceClaims/topologySpreadConstraints parts of the shape as
        // `json.Marshal` writes a corev1.PodSpec's structs).
        let cases = [
            (
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"values": ["gpu"], "operator": "In", "key": "instance-type"}]}]}}}}),
                r#"{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"instance-type","operator":"In","values":["gpu"]}]}]}}}"#,
                "null",
                "null",
            ),
            (
                json!({"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "podAffinityTerm": {"topologyKey": "zone",
                        "labelSelector": {"matchLabels": {"app": "w"}}}}]}},
                    "resourceClaims": [{"resourceClaimTemplateName": "gpu", "name": "g"}],
                    "topologySpreadConstraints": [{"whenUnsatisfiable": "ScheduleAnyway",
                        "topologyKey": "rack", "maxSkew": 1}]}),
                r#"{"podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":10,"podAffinityTerm":{"labelSelector":{"matchLabels":{"app":"w"}},"topologyKey":"zone"}}]}}"#,
                r#"[{"name":"g","resourceClaimTemplateName":"gpu"}]"#,
                r#"[{"maxSkew":1,"topologyKey":"rack","whenUnsatisfiable":"ScheduleAnyway"}]"#,
            ),
        ];
        for (spec, affinity, claims, spread) in cases {
            let shape = format!(
                "{{\"spec\":{{\"affinity\":{affinity},\"containers\":null,\"initContainers\":null,\"nodeSelector\":null,\"overhead\":null,\"priority\":null,\"resourceClaims\":{claims},\"runtimeClassName\":null,\"tolerations\":null,\"topologySpreadConstraints\":{spread}}}}}"
            );
            assert_eq!(
                role_hash(&spec),
                super::sha256_hex(shape.as_bytes())[..8],
                "{shape}"
            );
        }
    }

    #[test]
    fn a_leader_without_a_group_index_is_in_the_group_of_its_ordinal() {
        let cases = [
            (
                json!({LWS_GROUP_INDEX: "2", LWS_WORKER_INDEX: "1"}),
                Some("2"),
            ),
            (
                json!({LWS_WORKER_INDEX: "0", "apps.kubernetes.io/pod-index": "3"}),
                Some("3"),
            ),
            (
                json!({LWS_WORKER_INDEX: "1", "apps.kubernetes.io/pod-index": "3"}),
                None,
            ),
            (json!({}), None),
        ];
        for (labels, want) in cases {
            let pod = json!({"metadata": {"labels": labels}});
            assert_eq!(lws_group_index(&pod), want, "{labels}");
        }
    }

    #[test]
    fn gates_and_groups_are_read_from_the_pod() {
        let pod = json!({"metadata": {"labels": {GROUP_NAME: "g"}},
            "spec": {"schedulingGates": [{"name": "other"}, {"name": ADMISSION_GATE}]}});
        assert!(gated(&pod));
        assert_eq!(group_name(&pod), Some("g"));
        let plain = json!({"metadata": {"labels": {GROUP_NAME: ""}}, "spec": {}});
        assert!(!gated(&plain));
        assert_eq!(group_name(&plain), None);
    }
}
