//! Upstream's StatefulSet claim cases (`stateful_set_utils_test.go`) as tables.

use super::*;

const DELETE: &str = "Delete";
const RETAIN: &str = "Retain";

fn set_with(name: &str, uid: &str, replicas: i64, policy: Option<(&str, &str)>) -> Value {
    let mut set = json!({"metadata": {"name": name, "uid": uid, "namespace": "ns"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "db"}},
                 "volumeClaimTemplates": [
                     {"metadata": {"name": "data", "labels": {"tier": "disk"}},
                      "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
                     {"metadata": {"name": "logs"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}});
    if let Some((when_scaled, when_deleted)) = policy {
        set["spec"]["persistentVolumeClaimRetentionPolicy"] =
            json!({"whenScaled": when_scaled, "whenDeleted": when_deleted});
    }
    set
}

fn pod_named(name: &str, uid: &str) -> Value {
    json!({"metadata": {"name": name, "uid": uid}})
}

fn reference(
    api_version: &str,
    kind: &str,
    name: &str,
    uid: &str,
    controller: Option<bool>,
) -> Value {
    let mut r = json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": uid});
    if let Some(controller) = controller {
        r["controller"] = json!(controller);
    }
    r
}

fn claim_with(refs: Vec<Value>) -> Value {
    json!({"metadata": {"name": "target-claim", "ownerReferences": refs}})
}

/// Whether the claim's references name `uid` as its controller.
fn controlled_by(refs: &[Value], uid: &str) -> bool {
    refs.iter()
        .any(|r| text(r, "/uid") == uid && is_controller(r))
}

#[test]
fn claims_are_named_per_template_and_ordinal_and_labelled_with_the_selector() {
    let set = set_with("db", "u", 3, None);
    let claims = claims_for(&set, 2);
    let names: Vec<&str> = claims.iter().map(|c| text(c, "/metadata/name")).collect();
    assert_eq!(names, ["data-db-2", "logs-db-2"]);
    assert_eq!(
        claims[0]["metadata"]["labels"],
        json!({"tier": "disk", "app": "db"})
    );
    assert_eq!(claims[1]["metadata"]["labels"], json!({"app": "db"}));
    assert_eq!(claims[0]["metadata"]["namespace"], "ns");
    assert_eq!(claims[0]["spec"]["resources"]["requests"]["storage"], "1Gi");
    assert_eq!(claims[0]["kind"], "PersistentVolumeClaim");
}

/// `TestStorageMatches` and `TestUpdateStorage`: a pod's volumes are made to cover its claims,
/// whatever it had under those names; its other volumes stay.
#[test]
fn storage_is_made_to_match_the_claims() {
    let set = set_with("db", "u", 3, None);
    let cases = [
        ("no volumes", json!(null)),
        (
            "volumes without claims",
            json!([{"name": "data", "emptyDir": {}}, {"name": "logs", "emptyDir": {}}]),
        ),
        (
            "wrong claim names",
            json!([{"name": "data", "persistentVolumeClaim": {"claimName": "foo"}}]),
        ),
        (
            "other volumes only",
            json!([{"name": "config", "configMap": {"name": "c"}}]),
        ),
    ];
    for (name, volumes) in cases {
        let mut pod = json!({"metadata": {"name": "db-1"}, "spec": {"containers": []}});
        if !volumes.is_null() {
            pod["spec"]["volumes"] = volumes.clone();
        }
        assert!(!storage_matches(&set, 1, &pod), "{name}: not yet");
        add_volumes(&set, 1, &mut pod);
        assert!(storage_matches(&set, 1, &pod), "{name}: {pod}");
        let kept = volumes
            .as_array()
            .is_some_and(|v| v.iter().any(|v| v["name"] == "config"));
        let has_config = pod["spec"]["volumes"]
            .as_array()
            .is_some_and(|v| v.iter().any(|v| v["name"] == "config"));
        assert_eq!(has_config, kept, "{name}");
        assert_eq!(
            pod["spec"]["volumes"].as_array().map(Vec::len),
            Some(2 + usize::from(kept)),
            "{name}: one volume per template"
        );
    }
    let mut pod = json!({"metadata": {"name": "plain-0"}, "spec": {}});
    add_volumes(&json!({"metadata": {"name": "plain"}}), 0, &mut pod);
    assert!(
        pod["spec"].get("volumes").is_none(),
        "no templates, no volumes"
    );
}

/// `TestIsClaimOwnerUpToDate`: for each policy, whether a claim with or without the pod's
/// and the set's controller references (and with or without unrelated owners) is in line.
#[test]
fn claim_owners_follow_the_retention_policy() {
    // (name, whenScaled, whenDeleted, needs pod ref, needs set ref, replicas, ordinal)
    let cases = [
        ("retain", RETAIN, RETAIN, false, false, 0, 0),
        ("on SS delete", RETAIN, DELETE, false, true, 0, 0),
        (
            "on scaledown only, condemned",
            DELETE,
            RETAIN,
            true,
            false,
            2,
            2,
        ),
        (
            "on scaledown only, remains",
            DELETE,
            RETAIN,
            false,
            false,
            2,
            1,
        ),
        ("on both, condemned", DELETE, DELETE, true, false, 2, 2),
        ("on both, remains", DELETE, DELETE, false, true, 2, 1),
    ];
    for (name, scaled, deleted, needs_pod, needs_set, replicas, ordinal) in cases {
        let set = set_with("stateful-set", "ss-456", replicas, Some((scaled, deleted)));
        let pod = pod_named(&format!("pod-{ordinal}"), "pod-123");
        let condemned = ordinal >= replicas;
        for others in [false, true] {
            for has_pod in [false, true] {
                for has_set in [false, true] {
                    let mut refs = Vec::new();
                    if has_pod {
                        refs.push(Owner::pod(&pod).controller_reference());
                    }
                    if has_set {
                        refs.push(Owner::set(&set).controller_reference());
                    }
                    if others {
                        refs.push(reference("v1", "Pod", "rand1", "rand1-uid", None));
                        refs.push(reference("v1", "Pod", "rand2", "rand2-uid", None));
                    }
                    let claim = claim_with(refs);
                    let in_line = has_pod == needs_pod && has_set == needs_set;
                    let due = owners_due(&claim, &set, &pod, condemned);
                    assert_eq!(
                        due.is_none(),
                        in_line,
                        "{name} pod={has_pod} set={has_set} others={others}"
                    );
                    // Once updated, the claim is in line, and unrelated owners stay.
                    if let Some(owners) = due {
                        assert_eq!(controlled_by(&owners, "pod-123"), needs_pod, "{name}");
                        assert_eq!(controlled_by(&owners, "ss-456"), needs_set, "{name}");
                        assert_eq!(
                            owners
                                .iter()
                                .filter(|r| text(r, "/name").starts_with("rand"))
                                .count(),
                            if others { 2 } else { 0 },
                            "{name}"
                        );
                        let updated = claim_with(owners);
                        assert!(
                            owners_due(&updated, &set, &pod, condemned).is_none(),
                            "{name}"
                        );
                    }
                }
            }
        }
    }
}

/// `TestClaimOwnerUpToDateEdgeCases`: non-controller references need fixing, stale ones are
/// left alone, another controller makes the set's and pod's references go.
#[test]
fn claim_owner_edge_cases() {
    let both = (DELETE, DELETE);
    let on_set_delete = (RETAIN, DELETE);
    let cases = [
        (
            "normal controller, pod",
            vec![reference("v1", "Pod", "pod-1", "pod-123", Some(true))],
            both,
            true,
        ),
        (
            "non-controller causes policy mismatch, pod",
            vec![reference("v1", "Pod", "pod-1", "pod-123", None)],
            both,
            false,
        ),
        (
            "stale controller does not affect policy, pod",
            vec![reference("v1", "Pod", "pod-1", "pod-stale", Some(true))],
            both,
            true,
        ),
        (
            "unexpected controller causes policy mismatch, pod",
            vec![
                reference("v1", "Pod", "pod-1", "pod-123", Some(true)),
                reference("v1", "Pod", "Random", "random", Some(true)),
            ],
            both,
            false,
        ),
        (
            "normal controller, set",
            vec![reference(
                "apps/v1",
                "StatefulSet",
                "stateful-set",
                "ss-456",
                Some(true),
            )],
            on_set_delete,
            true,
        ),
        (
            "non-controller causes policy mismatch, set",
            vec![reference(
                "appsv1",
                "StatefulSet",
                "stateful-set",
                "ss-456",
                None,
            )],
            on_set_delete,
            false,
        ),
        (
            "stale controller ignored, set",
            vec![reference(
                "apps/v1",
                "StatefulSet",
                "stateful-set",
                "set-stale",
                Some(true),
            )],
            on_set_delete,
            true,
        ),
        (
            "unexpected controller causes policy mismatch, set",
            vec![
                reference(
                    "apps/v1",
                    "StatefulSet",
                    "stateful-set",
                    "ss-456",
                    Some(true),
                ),
                reference("apps/v1", "StatefulSet", "Random", "random", Some(true)),
            ],
            on_set_delete,
            false,
        ),
    ];
    for (name, refs, policy, in_line) in cases {
        // Replicas 1, pod-1: the pod is scaled away.
        let set = set_with("stateful-set", "ss-456", 1, Some(policy));
        let pod = pod_named("pod-1", "pod-123");
        let due = owners_due(&claim_with(refs), &set, &pod, true);
        assert_eq!(due.is_none(), in_line, "{name}: {due:?}");
    }
}

/// `TestUpdateClaimOwnerRefForSetAndPod`: after an update the owner the policy names is the
/// claim's controller, and no other of the set and pod is; another controller keeps both off.
#[test]
fn updated_claims_have_the_policy_owner_as_controller() {
    // (name, whenScaled, whenDeleted, condemned, needs pod ref, needs set ref, unexpected)
    let cases = [
        ("retain", RETAIN, RETAIN, false, false, false, false),
        ("delete with set", RETAIN, DELETE, false, false, true, false),
        (
            "delete with scaledown, not condemned",
            DELETE,
            RETAIN,
            false,
            false,
            false,
            false,
        ),
        (
            "delete on scaledown, condemned",
            DELETE,
            RETAIN,
            true,
            true,
            false,
            false,
        ),
        (
            "delete on both, not condemned",
            DELETE,
            DELETE,
            false,
            false,
            true,
            false,
        ),
        (
            "delete on both, condemned",
            DELETE,
            DELETE,
            true,
            true,
            false,
            false,
        ),
        (
            "unexpected controller",
            DELETE,
            DELETE,
            true,
            false,
            false,
            true,
        ),
    ];
    for (name, scaled, deleted, condemned, needs_pod, needs_set, unexpected) in cases {
        for variation in 0..8 {
            let (has_pod, has_set, extra) =
                (variation & 1 != 0, variation & 2 != 0, variation & 4 != 0);
            let set = set_with("ss", "ss-123", 5, Some((scaled, deleted)));
            let pod = pod_named(if condemned { "pod-8" } else { "pod-1" }, "pod-456");
            let mut refs = Vec::new();
            if has_pod {
                refs.push(Owner::pod(&pod).controller_reference());
            }
            if has_set {
                refs.push(Owner::set(&set).controller_reference());
            }
            if extra {
                refs.push(reference("custom/v1", "random", "random", "abc", None));
            }
            if unexpected {
                refs.push(reference(
                    "custom/v1",
                    "Unknown",
                    "unknown",
                    "xyz",
                    Some(true),
                ));
            }
            let claim = claim_with(refs.clone());
            let owners = owners_due(&claim, &set, &pod, condemned).unwrap_or(refs);
            assert_eq!(
                controlled_by(&owners, "pod-456"),
                needs_pod,
                "{name} {variation}"
            );
            assert_eq!(
                controlled_by(&owners, "ss-123"),
                needs_set,
                "{name} {variation}"
            );
        }
    }
}

/// `TestUpdateClaimControllerRef`, under delete-on-both for pod `pod-0` of a one-replica set:
/// the set's reference becomes a controller, unrelated owners stay. Upstream's two stale cases
/// (a reference to `sts` without its UID) are claims its controller never updates, as here.
#[test]
fn the_sets_reference_becomes_a_controller() {
    let sts =
        |controller: Option<bool>| reference("apps/v1", "StatefulSet", "sts", "123", controller);
    let cases = [
        (
            "set correctly",
            vec![
                sts(Some(true)),
                reference("someone", "Else", "foo", "", None),
            ],
            None,
        ),
        (
            "missing controller",
            vec![sts(None)],
            Some(vec![sts(Some(true))]),
        ),
        (
            "matching name but missing",
            vec![reference("someone", "else", "sts", "456", None)],
            Some(vec![
                reference("someone", "else", "sts", "456", None),
                sts(Some(true)),
            ]),
        ),
        ("not present", vec![], Some(vec![sts(Some(true))])),
        (
            "controller, but no UID",
            vec![reference("apps/v1", "StatefulSet", "sts", "", Some(true))],
            None,
        ),
        (
            "neither controller nor UID",
            vec![reference("apps/v1", "StatefulSet", "sts", "", None)],
            None,
        ),
    ];
    for (name, refs, expected) in cases {
        let set = set_with("sts", "123", 1, Some((DELETE, DELETE)));
        let pod = pod_named("pod-0", "456");
        let due = owners_due(&claim_with(refs), &set, &pod, false).map(|owners| {
            owners
                .into_iter()
                .map(|mut r| {
                    if let Some(r) = r.as_object_mut() {
                        r.remove("blockOwnerDeletion");
                    }
                    r
                })
                .collect::<Vec<_>>()
        });
        assert_eq!(due, expected, "{name}");
    }
}

/// `TestHasUnexpectedController`: under `Retain` nothing is unexpected; otherwise another
/// controller, or the set's or pod's reference of another UID, is.
#[test]
fn unexpected_controllers() {
    let cases = [
        (
            "custom controller",
            reference(
                "chipmunks/v1",
                "CustomController",
                "simon",
                "other-uid",
                Some(true),
            ),
            None,
            true,
        ),
        (
            "custom non-controller",
            reference(
                "chipmunks/v1",
                "CustomController",
                "simon",
                "other-uid",
                Some(false),
            ),
            None,
            false,
        ),
        (
            "custom unspecified controller",
            reference(
                "chipmunks/v1",
                "CustomController",
                "simon",
                "other-uid",
                None,
            ),
            None,
            false,
        ),
        (
            "other pod controller",
            reference("v1", "Pod", "simon", "other-uid", Some(true)),
            None,
            true,
        ),
        (
            "other set controller",
            reference("apps/v1", "Set", "simon", "other-uid", Some(true)),
            None,
            true,
        ),
        (
            "own set controller",
            reference("apps/v1", "StatefulSet", "set", "set-uid", Some(true)),
            None,
            false,
        ),
        (
            "own set controller, stale uid",
            reference("apps/v1", "StatefulSet", "set", "stale-uid", Some(true)),
            None,
            true,
        ),
        (
            "own pod controller",
            reference("v1", "Pod", "pod", "pod-uid", Some(true)),
            None,
            false,
        ),
        (
            "own pod controller, stale uid",
            reference("v1", "Pod", "pod", "stale-uid", Some(true)),
            None,
            true,
        ),
        (
            "own controller and another",
            reference("v1", "Pod", "pod", "pod-uid", Some(true)),
            Some(reference(
                "chipmunks/v1",
                "CustomController",
                "simon",
                "other-uid",
                Some(true),
            )),
            true,
        ),
        (
            "own controller and a non-controller",
            reference("v1", "Pod", "pod", "pod-uid", Some(true)),
            Some(reference(
                "chipmunks/v1",
                "CustomController",
                "simon",
                "other-uid",
                Some(false),
            )),
            false,
        ),
    ];
    let set = json!({"metadata": {"name": "set", "uid": "set-uid"}});
    let pod = pod_named("pod", "pod-uid");
    for (name, first, second, expected) in cases {
        let refs: Vec<Value> = std::iter::once(first).chain(second).collect();
        let (set_owner, pod_owner) = (Owner::set(&set), Owner::pod(&pod));
        assert!(
            !unexpected_controller(&refs, &set_owner, &pod_owner, false),
            "{name}: retain"
        );
        assert_eq!(
            unexpected_controller(&refs, &set_owner, &pod_owner, true),
            expected,
            "{name}"
        );
    }
}

#[test]
fn missing_claims_are_created_with_the_owners_of_a_pod_in_range() {
    let retained = set_with("db", "u", 2, None);
    let existing = [json!({"metadata": {"name": "data-db-1"}})];
    let made = missing(&retained, 1, &existing);
    assert_eq!(made.len(), 1);
    assert_eq!(made[0]["metadata"]["name"], "logs-db-1");
    assert!(made[0]["metadata"].get("ownerReferences").is_none());
    let owned = set_with("db", "u", 2, Some((DELETE, DELETE)));
    let made = missing(&owned, 0, &[]);
    assert_eq!(
        made[0]["metadata"]["ownerReferences"],
        json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "u",
                "controller": true, "blockOwnerDeletion": true}])
    );
    let deleting =
        [json!({"metadata": {"name": "logs-db-0", "deletionTimestamp": "2024-01-01T00:00:00Z"}})];
    assert!(terminating(&owned, 0, &deleting));
    assert!(!terminating(&owned, 1, &deleting));
    assert_eq!(of_pod(&owned, 0, &deleting).len(), 1);
}
