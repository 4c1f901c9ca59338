//! Readers over PersistentVolumes, PersistentVolumeClaims, StorageClasses and Nodes as JSON,
//! named after upstream's `component-helpers/storage/volume` helpers (`GetPersistentVolumeClass`,
//! `IsVolumeBoundToClaim`, `CheckNodeAffinity`, `CheckAccessModes`, …), and the annotation keys
//! they read. Shared by every module of the crate so each rule has one home.
//!
//! Reads only; knows no decision built on what it reads.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use tessera_model::json::{strings_at, text};
use tessera_model::quantity::Quantity;

/// `pv.kubernetes.io/bind-completed`: the claim's binding has been completed once.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// `pv.kubernetes.io/bound-by-controller`: the binding was made by the controller, not a user.
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// `volume.kubernetes.io/selected-node`: the scheduler chose this node for the claim.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// `volume.kubernetes.io/storage-provisioner`: who is asked to provision the claim.
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// The deprecated beta spelling of [`ANN_STORAGE_PROVISIONER`], still written alongside it.
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// `pv.kubernetes.io/provisioned-by`: the plugin that dynamically provisioned a PV.
pub const ANN_DYNAMICALLY_PROVISIONED: &str = "pv.kubernetes.io/provisioned-by";
/// The beta storage class annotation, read before `spec.storageClassName`.
pub const ANN_BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// `storageclass.kubernetes.io/is-default-class`.
pub const ANN_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
/// The beta spelling of [`ANN_DEFAULT_CLASS`].
pub const ANN_BETA_DEFAULT_CLASS: &str = "storageclass.beta.kubernetes.io/is-default-class";
/// The provisioner name of classes that cannot provision.
pub const NOT_SUPPORTED_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// An object's `metadata.name`.
pub fn name(object: &Value) -> &str {
    text(object, "/metadata/name")
}

/// An object's `metadata.namespace`.
pub fn namespace(object: &Value) -> &str {
    text(object, "/metadata/namespace")
}

/// An object's `metadata.uid`.
pub fn uid(object: &Value) -> &str {
    text(object, "/metadata/uid")
}

/// The annotation `key` of an object, if set.
pub fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// Whether the object carries the annotation `key` (any value).
pub fn has_annotation(object: &Value, key: &str) -> bool {
    annotation(object, key).is_some()
}

/// Sets an annotation on an object, creating `metadata.annotations` when absent.
pub fn set_annotation(object: &mut Value, key: &str, value: &str) {
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    let annotations = &mut object["metadata"]["annotations"];
    if !annotations.is_object() {
        *annotations = json!({});
    }
    annotations[key] = json!(value);
}

/// Whether the object is being deleted (`metadata.deletionTimestamp` set).
pub fn is_deleting(object: &Value) -> bool {
    object
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

/// `namespace/name` of a claim, as upstream's `claimToClaimKey`.
pub fn claim_key(claim: &Value) -> String {
    format!("{}/{}", namespace(claim), name(claim))
}

/// `GetPersistentVolumeClaimClass`: the beta annotation, else `spec.storageClassName`, else "".
pub fn claim_class(claim: &Value) -> &str {
    annotation(claim, ANN_BETA_STORAGE_CLASS)
        .unwrap_or_else(|| text(claim, "/spec/storageClassName"))
}

/// `PersistentVolumeClaimHasClass`: the beta annotation or a `spec.storageClassName` (even "").
pub fn claim_has_class(claim: &Value) -> bool {
    has_annotation(claim, ANN_BETA_STORAGE_CLASS)
        || claim
            .pointer("/spec/storageClassName")
            .is_some_and(|c| !c.is_null())
}

/// `GetPersistentVolumeClass`: the beta annotation, else `spec.storageClassName`, else "".
pub fn volume_class(volume: &Value) -> &str {
    annotation(volume, ANN_BETA_STORAGE_CLASS)
        .unwrap_or_else(|| text(volume, "/spec/storageClassName"))
}

/// A quantity at a pointer; absent or unreadable is zero, as Go's zero `resource.Quantity`
/// (validation keeps stored quantities readable).
pub fn quantity_at(object: &Value, pointer: &str) -> Quantity {
    match object.pointer(pointer) {
        Some(Value::String(s)) => s.parse().unwrap_or(Quantity::ZERO),
        Some(Value::Number(n)) => n.to_string().parse().unwrap_or(Quantity::ZERO),
        _ => Quantity::ZERO,
    }
}

/// A claim's `spec.resources.requests.storage` (zero when absent).
pub fn requested_storage(claim: &Value) -> Quantity {
    quantity_at(claim, "/spec/resources/requests/storage")
}

/// Whether a claim requests storage at all.
pub fn has_storage_request(claim: &Value) -> bool {
    claim
        .pointer("/spec/resources/requests/storage")
        .is_some_and(|q| !q.is_null())
}

/// A volume's `spec.capacity.storage` (zero when absent).
pub fn volume_capacity(volume: &Value) -> Quantity {
    quantity_at(volume, "/spec/capacity/storage")
}

/// The access modes at a pointer.
pub fn access_modes(object: &Value, pointer: &str) -> Vec<String> {
    strings_at(object, pointer)
}

/// The access modes upstream knows, with their abbreviations, in `GetAccessModesAsString`'s
/// order.
pub const ACCESS_MODES: [(&str, &str); 4] = [
    ("ReadWriteOnce", "RWO"),
    ("ReadOnlyMany", "ROX"),
    ("ReadWriteMany", "RWX"),
    ("ReadWriteOncePod", "RWOP"),
];

/// `GetAccessModesAsString`: the known modes present, abbreviated, in a fixed order, comma
/// separated (duplicates and unknown modes dropped).
pub fn access_modes_string(modes: &[String]) -> String {
    ACCESS_MODES
        .iter()
        .filter(|(mode, _)| modes.iter().any(|m| m == mode))
        .map(|(_, short)| *short)
        .collect::<Vec<_>>()
        .join(",")
}

/// `CheckAccessModes`: the volume offers every mode the claim asks for.
pub fn check_access_modes(claim: &Value, volume: &Value) -> bool {
    let offered: Vec<String> = access_modes(volume, "/spec/accessModes");
    access_modes(claim, "/spec/accessModes")
        .iter()
        .all(|mode| offered.contains(mode))
}

/// `CheckVolumeModeMismatches`: an unset mode is `Filesystem` on either side.
pub fn volume_mode_mismatch(claim: &Value, volume: &Value) -> bool {
    fn mode(object: &Value) -> &str {
        match text(object, "/spec/volumeMode") {
            "" => "Filesystem",
            mode => mode,
        }
    }
    mode(claim) != mode(volume)
}

/// `spec.volumeAttributesClassName`, "" when unset (upstream's `ptr.Deref(…, "")`).
pub fn volume_attributes_class(object: &Value) -> &str {
    text(object, "/spec/volumeAttributesClassName")
}

/// `IsVolumeBoundToClaim`: the volume's claimRef names the claim (and its UID, when the
/// claimRef carries one).
pub fn is_volume_bound_to_claim(volume: &Value, claim: &Value) -> bool {
    let Some(claim_ref) = claim_ref(volume) else {
        return false;
    };
    if text(claim_ref, "/name") != name(claim) || text(claim_ref, "/namespace") != namespace(claim)
    {
        return false;
    }
    let ref_uid = text(claim_ref, "/uid");
    ref_uid.is_empty() || ref_uid == uid(claim)
}

/// A volume's `spec.claimRef`, when set.
pub fn claim_ref(volume: &Value) -> Option<&Value> {
    volume.pointer("/spec/claimRef").filter(|r| r.is_object())
}

/// The claims a pod's volumes name, each with whether it is a generic ephemeral volume's
/// (`<pod>-<volume>`) rather than a `persistentVolumeClaim.claimName`.
pub fn pod_claims(pod: &Value) -> Vec<(String, bool)> {
    pod.pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|volume| {
            if let Some(claim) = volume.pointer("/persistentVolumeClaim/claimName") {
                claim.as_str().map(|c| (c.to_string(), false))
            } else if volume.get("ephemeral").is_some_and(|e| !e.is_null()) {
                Some((format!("{}-{}", name(pod), text(volume, "/name")), true))
            } else {
                None
            }
        })
        .collect()
}

/// The names of the claims a pod's volumes name ([`pod_claims`]).
pub fn pod_claim_names(pod: &Value) -> Vec<String> {
    pod_claims(pod)
        .into_iter()
        .map(|(claim, _)| claim)
        .collect()
}

/// `IsPodTerminated`: the pod Failed or Succeeded, or is being deleted with no container
/// (init, regular or ephemeral) running.
pub fn pod_is_terminated(pod: &Value) -> bool {
    let not_running = |pointer: &str| {
        pod.pointer(pointer)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .all(|status| {
                let set = |state: &str| {
                    status
                        .pointer(&format!("/state/{state}"))
                        .is_some_and(|s| !s.is_null())
                };
                set("terminated") || set("waiting")
            })
    };
    matches!(text(pod, "/status/phase"), "Failed" | "Succeeded")
        || (is_deleting(pod)
            && not_running("/status/initContainerStatuses")
            && not_running("/status/containerStatuses")
            && not_running("/status/ephemeralContainerStatuses"))
}

/// A node's labels.
pub fn node_labels(node: &Value) -> BTreeMap<String, String> {
    tessera_model::selector::labels(node)
}

/// `CheckNodeAffinity`: a volume without `spec.nodeAffinity.required` fits every node; else
/// its terms must match a node that has only these labels (as upstream builds it, so
/// `matchFields` never match). An unreadable selector fits no node.
pub fn check_node_affinity(volume: &Value, labels: &BTreeMap<String, String>) -> bool {
    let Some(required) = volume
        .pointer("/spec/nodeAffinity/required")
        .filter(|r| !r.is_null())
    else {
        return true;
    };
    let Ok(selector) = serde_json::from_value(required.clone()) else {
        return false;
    };
    tessera_model::node_selector::matches(&selector, "", labels)
}

/// A label selector's match, where an absent selector selects everything (a claim's
/// `spec.selector`).
pub fn selector_matches(selector: Option<&Value>, labels: &BTreeMap<String, String>) -> bool {
    match selector.filter(|s| !s.is_null()) {
        None => true,
        Some(selector) => tessera_model::selector::matches(Some(selector), labels),
    }
}

/// The object named `name` (cluster-scoped) in a list.
pub fn by_name<'a>(objects: &'a [Value], wanted: &str) -> Option<&'a Value> {
    objects.iter().find(|o| name(o) == wanted)
}

/// The object named `name` in `namespace` in a list.
pub fn by_namespaced_name<'a>(
    objects: &'a [Value],
    wanted_namespace: &str,
    wanted: &str,
) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| name(o) == wanted && namespace(o) == wanted_namespace)
}

/// An object reference to `object` as `reference.GetReference` makes it (kind, namespace,
/// name, uid, apiVersion, resourceVersion).
pub fn reference(object: &Value, kind: &str) -> Value {
    let mut reference = json!({"kind": kind, "apiVersion": "v1", "name": name(object)});
    for (field, value) in [
        ("namespace", namespace(object)),
        ("uid", uid(object)),
        ("resourceVersion", text(object, "/metadata/resourceVersion")),
    ] {
        if !value.is_empty() {
            reference[field] = json!(value);
        }
    }
    reference
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_read_the_beta_annotation_first() {
        let table = [
            (json!({"spec": {}}), "", false),
            (json!({"spec": {"storageClassName": ""}}), "", true),
            (json!({"spec": {"storageClassName": "gold"}}), "gold", true),
            (
                json!({"metadata": {"annotations": {ANN_BETA_STORAGE_CLASS: "silver"}},
                       "spec": {"storageClassName": "gold"}}),
                "silver",
                true,
            ),
        ];
        for (claim, class, has) in table {
            assert_eq!(claim_class(&claim), class, "{claim}");
            assert_eq!(volume_class(&claim), class, "{claim}");
            assert_eq!(claim_has_class(&claim), has, "{claim}");
        }
    }

    #[test]
    fn volume_modes_default_to_filesystem() {
        let fs = json!({"spec": {"volumeMode": "Filesystem"}});
        let block = json!({"spec": {"volumeMode": "Block"}});
        let unset = json!({"spec": {}});
        let table = [
            (&unset, &fs, false),
            (&fs, &unset, false),
            (&unset, &unset, false),
            (&block, &unset, true),
            (&block, &block, false),
            (&fs, &block, true),
        ];
        for (claim, volume, mismatch) in table {
            assert_eq!(
                volume_mode_mismatch(claim, volume),
                mismatch,
                "{claim} {volume}"
            );
        }
    }

    #[test]
    fn bound_to_claim_compares_name_namespace_and_uid_when_set() {
        let claim = json!({"metadata": {"name": "c", "namespace": "ns", "uid": "u1"}});
        let table = [
            (json!({"spec": {}}), false),
            (
                json!({"spec": {"claimRef": {"name": "c", "namespace": "ns"}}}),
                true,
            ),
            (
                json!({"spec": {"claimRef": {"name": "c", "namespace": "ns", "uid": "u1"}}}),
                true,
            ),
            (
                json!({"spec": {"claimRef": {"name": "c", "namespace": "ns", "uid": "u2"}}}),
                false,
            ),
            (
                json!({"spec": {"claimRef": {"name": "c", "namespace": "other"}}}),
                false,
            ),
            (
                json!({"spec": {"claimRef": {"name": "d", "namespace": "ns"}}}),
                false,
            ),
        ];
        for (volume, bound) in table {
            assert_eq!(is_volume_bound_to_claim(&volume, &claim), bound, "{volume}");
        }
    }

    #[test]
    fn node_affinity_matches_labels_only() {
        let labels = BTreeMap::from([("zone".to_string(), "a".to_string())]);
        let affinity = |term: Value| json!({"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [term]}}}});
        let table = [
            (json!({"spec": {}}), true),
            (
                affinity(
                    json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}),
                ),
                true,
            ),
            (
                affinity(
                    json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}),
                ),
                false,
            ),
            (
                affinity(
                    json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}),
                ),
                false,
            ),
            (
                json!({"spec": {"nodeAffinity": {"required": "garbage"}}}),
                false,
            ),
        ];
        for (volume, fits) in table {
            assert_eq!(check_node_affinity(&volume, &labels), fits, "{volume}");
        }
    }

    #[test]
    fn access_modes_abbreviate_in_upstream_order() {
        let table: [(&[&str], &str); 5] = [
            (&[], ""),
            (&["ReadWriteOnce"], "RWO"),
            (
                &["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"],
                "RWO,RWX",
            ),
            (&["ReadWriteOncePod", "ReadOnlyMany"], "ROX,RWOP"),
            (&["Unknown", "ReadOnlyMany"], "ROX"),
        ];
        for (modes, want) in table {
            let modes: Vec<String> = modes.iter().map(|m| m.to_string()).collect();
            assert_eq!(access_modes_string(&modes), want, "{modes:?}");
        }
    }

    #[test]
    fn terminated_pods_as_upstream() {
        let deleting = |statuses: Value| {
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"},
                   "status": {"phase": "Running", "containerStatuses": statuses}})
        };
        let table = [
            (json!({"status": {"phase": "Succeeded"}}), true),
            (json!({"status": {"phase": "Failed"}}), true),
            (json!({"status": {"phase": "Running"}}), false),
            (
                deleting(json!([{"state": {"terminated": {}}}, {"state": {"waiting": {}}}])),
                true,
            ),
            (
                deleting(json!([{"state": {"terminated": {}}}, {"state": {"running": {}}}])),
                false,
            ),
            (deleting(json!([])), true),
        ];
        for (pod, terminated) in table {
            assert_eq!(pod_is_terminated(&pod), terminated, "{pod}");
        }
    }

    #[test]
    fn access_modes_must_all_be_offered() {
        let volume = json!({"spec": {"accessModes": ["ReadWriteOnce", "ReadOnlyMany"]}});
        let table = [
            (json!({"spec": {"accessModes": ["ReadWriteOnce"]}}), true),
            (
                json!({"spec": {"accessModes": ["ReadOnlyMany", "ReadWriteOnce"]}}),
                true,
            ),
            (json!({"spec": {"accessModes": ["ReadWriteMany"]}}), false),
            (
                json!({"spec": {"accessModes": ["ReadWriteOnce", "ReadWriteOncePod"]}}),
                false,
            ),
        ];
        for (claim, ok) in table {
            assert_eq!(check_access_modes(&claim, &volume), ok, "{claim}");
        }
    }
}
