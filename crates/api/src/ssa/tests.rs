//! The SSA core's own cases: field sets, FieldsV1, apply and update on real schemas.

use super::*;
use serde_json::json;

fn deployment() -> Schema<'static> {
    Schema::definition("io.k8s.api.apps.v1.Deployment")
}

fn config(replicas: i64, image: &str, labels: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": labels},
           "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "app", "image": image}]}}}})
}

#[test]
fn field_sets_follow_list_keys_and_round_trip_through_fields_v1() {
    let set = fields(&config(2, "a", json!({"app": "web"})), deployment());
    let texts: Vec<String> = set.iter().map(|p| path_text(p)).collect();
    assert!(texts.contains(&".spec.replicas".to_string()));
    assert!(
        texts.contains(&".spec.template.spec.containers[name=\"app\"]".to_string()),
        "{texts:?}"
    );
    assert!(texts.contains(&".spec.template.spec.containers[name=\"app\"].image".to_string()));
    assert!(!texts.iter().any(|t| t.starts_with(".metadata.name")));
    let encoded = to_fields_v1(&set);
    assert!(
        encoded["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"app\"}"]["."]
            .is_object()
    );
    assert_eq!(from_fields_v1(&encoded), set);
}

#[test]
fn applies_merge_conflict_and_force() {
    let schema = deployment();
    let first = apply(
        &json!({}),
        &config(2, "a", json!({"app": "web"})),
        "alice",
        "apps/v1",
        "t",
        false,
        schema,
    )
    .unwrap();
    // Another manager changing replicas conflicts; the same value does not.
    let bob = config(5, "a", json!({}));
    let conflicts = apply(&first.object, &bob, "bob", "apps/v1", "t", false, schema).unwrap_err();
    assert_eq!(
        conflicts,
        vec![Conflict {
            manager: "\"alice\"".into(),
            field: ".spec.replicas".into()
        }]
    );
    let same = apply(
        &first.object,
        &config(2, "a", json!({})),
        "bob",
        "apps/v1",
        "t",
        false,
        schema,
    )
    .unwrap();
    assert_eq!(managed(&same.object).len(), 2, "shared ownership");
    let forced = apply(&first.object, &bob, "bob", "apps/v1", "t", true, schema).unwrap();
    assert_eq!(forced.object["spec"]["replicas"], 5);
    let alice = managed(&forced.object)
        .into_iter()
        .find(|m| m.manager == "alice")
        .unwrap();
    assert!(
        !alice
            .fields
            .iter()
            .any(|p| path_text(p) == ".spec.replicas")
    );
}

#[test]
fn fields_dropped_from_an_apply_are_removed() {
    let schema = deployment();
    let first = apply(
        &json!({}),
        &config(2, "a", json!({"app": "web", "tier": "gpu"})),
        "alice",
        "apps/v1",
        "t",
        false,
        schema,
    )
    .unwrap();
    let second = apply(
        &first.object,
        &config(2, "a", json!({"app": "web"})),
        "alice",
        "apps/v1",
        "t",
        false,
        schema,
    )
    .unwrap();
    assert_eq!(second.object["metadata"]["labels"], json!({"app": "web"}));
}

#[test]
fn a_create_records_what_the_field_set_records() {
    // The one-walk FieldsV1 of a create must be the path set's, byte for byte (key order
    // included): keyed lists (duplicate keys too), sets, atomic lists, empty maps,
    // server-set metadata, across schemas.
    let cases = [
        (
            "io.k8s.api.core.v1.Pod",
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ml", "uid": "u", "labels": {"b": "1", "a": "2"},
                    "finalizers": ["z.io/x", "a.io/y"], "annotations": {}},
                "spec": {"containers": [
                        {"name": "b", "image": "i", "ports": [{"containerPort": 80, "protocol": "TCP"}],
                         "env": [{"name": "X", "value": "1"}], "args": ["--a", "--b"]},
                        {"name": "a", "image": "j", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
                        {"name": "b", "command": ["sh"]}],
                    "tolerations": [{"key": "k", "operator": "Exists"}],
                    "nodeSelector": {"gpu": "true"}, "securityContext": {}},
                "status": {"phase": "Pending"}}),
        ),
        (
            "io.k8s.api.apps.v1.Deployment",
            config(3, "img", json!({"app": "web", "tier": "gpu"})),
        ),
        (
            "io.k8s.api.core.v1.Service",
            json!({"metadata": {"name": "s"}, "spec": {"ports": [
                {"port": 80, "protocol": "TCP", "name": "http"},
                {"port": 80, "protocol": "UDP", "name": "dns"}], "selector": {"app": "x"}}}),
        ),
        (
            "io.k8s.api.events.v1.Event",
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": "e", "namespace": "ml"}, "eventTime": "2026-11-30T00:00:00.000000Z",
                "reason": "Scheduled", "note": "n", "type": "Normal", "action": "Binding",
                "regarding": {"kind": "Pod", "name": "p", "namespace": "ml"},
                "reportingController": "default-scheduler", "reportingInstance": "i"}),
        ),
        (
            "io.k8s.api.core.v1.ConfigMap",
            json!({"metadata": {"name": "only-server-set"}}),
        ),
    ];
    for (definition, object) in cases {
        let schema = Schema::definition(definition);
        let expected = to_fields_v1(&fields(&object, schema));
        let built = fields_v1_of(&object, schema);
        assert_eq!(built.to_string(), expected.to_string(), "{definition}");
    }
    // Through `record_update`: the create's entry equals the general path's.
    let schema = deployment();
    let mut fast = config(2, "a", json!({"app": "web"}));
    record_update(
        &json!({}),
        &mut fast,
        "kubectl",
        "apps/v1",
        "t",
        None,
        schema,
    );
    let mut general = config(2, "a", json!({"app": "web"}));
    let changed = fields(&general, schema);
    set_managed(
        &mut general,
        &[Managed {
            manager: "kubectl".into(),
            operation: "Update".into(),
            api_version: "apps/v1".into(),
            time: "t".into(),
            subresource: None,
            fields: changed,
        }],
    );
    assert_eq!(fast.to_string(), general.to_string());
}

#[test]
fn updates_take_ownership_of_what_they_change() {
    let schema = deployment();
    let applied = apply(
        &json!({}),
        &config(2, "a", json!({})),
        "alice",
        "apps/v1",
        "t",
        false,
        schema,
    )
    .unwrap()
    .object;
    let mut scaled = applied.clone();
    scaled["spec"]["replicas"] = json!(4);
    record_update(
        &applied,
        &mut scaled,
        "kubectl-scale",
        "apps/v1",
        "t",
        Some("scale"),
        schema,
    );
    let entries = managed(&scaled);
    let scaler = entries
        .iter()
        .find(|m| m.manager == "kubectl-scale")
        .unwrap();
    assert_eq!(scaler.subresource.as_deref(), Some("scale"));
    assert_eq!(
        scaler
            .fields
            .iter()
            .map(|p| path_text(p))
            .collect::<Vec<_>>(),
        [".spec.replicas"]
    );
    let conflicts = apply(
        &scaled,
        &config(2, "a", json!({})),
        "alice",
        "apps/v1",
        "t",
        false,
        schema,
    )
    .unwrap_err();
    assert_eq!(
        conflicts[0].manager,
        "\"kubectl-scale\" with subresource \"scale\" using apps/v1"
    );
}

#[test]
fn an_update_rewrites_only_the_entries_it_takes_fields_from() {
    let schema = deployment();
    // Stored entries: alice owns the replicas, the image and a status field; bob owns the
    // labels. alice's entry is written with its keys out of the canonical order.
    let stored = json!({
        "metadata": {"name": "d", "labels": {"app": "a"}, "managedFields": [
            {"manager": "alice", "operation": "Update", "apiVersion": "apps/v1", "time": "t0",
             "fieldsType": "FieldsV1",
             "fieldsV1": {"f:spec": {"f:replicas": {}}, "f:metadata": {}}},
            {"manager": "bob", "operation": "Update", "apiVersion": "apps/v1", "time": "t0",
             "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}},
            {"manager": "gone", "operation": "Update", "apiVersion": "apps/v1", "time": "t0",
             "fieldsType": "FieldsV1", "fieldsV1": {}}
        ]},
        "spec": {"replicas": 2}
    });
    let mut next = stored.clone();
    next["metadata"]["labels"]["app"] = json!("b");
    record_update(&stored, &mut next, "carol", "apps/v1", "t1", None, schema);
    let entries = next["metadata"]["managedFields"].as_array().unwrap();
    // alice's entry is untouched (byte for byte), bob lost his only field and is gone, the
    // empty entry is dropped, and carol owns the label.
    assert_eq!(entries.len(), 2, "{entries:#?}");
    assert_eq!(entries[0], stored["metadata"]["managedFields"][0]);
    assert_eq!(
        serde_json::to_string(&entries[0]["fieldsV1"]).unwrap(),
        r#"{"f:spec":{"f:replicas":{}},"f:metadata":{}}"#
    );
    assert_eq!(entries[1]["manager"], "carol");
    assert_eq!(entries[1]["time"], "t1");
    assert_eq!(
        entries[1]["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:app": {}}}})
    );
    // A write that changes nothing adds no entry and leaves the others as stored.
    let mut same = next.clone();
    record_update(&next, &mut same, "dave", "apps/v1", "t2", None, schema);
    assert_eq!(
        same["metadata"]["managedFields"],
        next["metadata"]["managedFields"]
    );
}
