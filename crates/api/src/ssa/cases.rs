//! Upstream's ownership and conflict cases (sigs.k8s.io/structured-merge-diff `merge/*_test.go`:
//! leaf, set, key, nested, multiple appliers, conflict), ported as data: a schema, a sequence
//! of applies and updates, the object and every manager's field set at the end, and the
//! exact conflicts a refused apply reports. Versions are all `v1` (no conversions here).
//! Plus the client-side → server-side apply migration on a real Deployment.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::*;

/// One write in a case.
enum Op {
    /// An apply that must succeed.
    Apply(&'static str, Value),
    /// A forced apply.
    Force(&'static str, Value),
    /// An apply refused with exactly these (manager, path) conflicts, in this order.
    Refused(&'static str, Value, &'static [(&'static str, &'static str)]),
    /// An ordinary write of the whole object.
    Update(&'static str, Value),
}

struct Case {
    name: &'static str,
    schema: Value,
    ops: Vec<Op>,
    object: Value,
    /// Every manager's fields at the end, in upstream's dotted form; `None`: not checked.
    managed: Option<&'static [(&'static str, &'static [&'static str])]>,
}

fn leaf_schema() -> Value {
    json!({"properties": {"numeric": {"type": "number"}, "string": {"type": "string"},
        "bool": {"type": "boolean"}}})
}

fn keyed_schema() -> Value {
    json!({"properties": {"list": {"type": "array", "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {"properties": {"name": {"type": "string"}, "value": {"type": "number"}}}}}})
}

fn set_schema() -> Value {
    json!({"properties": {"list": {"type": "array", "x-kubernetes-list-type": "set",
        "items": {"type": "string"}}}})
}

fn nested_schema() -> Value {
    let set =
        json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}});
    json!({"properties": {
        "listOfLists": {"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {"properties": {"name": {"type": "string"}, "value": set}}},
        "struct": {"properties": {"name": {"type": "string"}, "value": {"type": "number"}}}}})
}

fn atomic_map_schema() -> Value {
    json!({"properties": {"atomicMap": {"type": "object", "x-kubernetes-map-type": "atomic",
        "additionalProperties": {"type": "string"}}}})
}

fn cases() -> Vec<Case> {
    use Op::*;
    vec![
        // leaf_test.go
        Case {
            name: "leaf/apply_update_apply_no_conflict",
            schema: leaf_schema(),
            ops: vec![
                Apply("default", json!({"numeric": 1, "string": "string"})),
                Update(
                    "controller",
                    json!({"numeric": 1, "string": "string", "bool": true}),
                ),
                Apply("default", json!({"numeric": 2, "string": "string"})),
            ],
            object: json!({"numeric": 2, "string": "string", "bool": true}),
            managed: Some(&[
                ("default", &[".numeric", ".string"]),
                ("controller", &[".bool"]),
            ]),
        },
        Case {
            name: "leaf/apply_update_apply_with_conflict",
            schema: leaf_schema(),
            ops: vec![
                Apply("default", json!({"numeric": 1, "string": "string"})),
                Update(
                    "controller",
                    json!({"numeric": 1, "string": "controller string", "bool": true}),
                ),
                Refused(
                    "default",
                    json!({"numeric": 2, "string": "user string"}),
                    &[("\"controller\" using v1", ".string")],
                ),
                Force("default", json!({"numeric": 2, "string": "user string"})),
            ],
            object: json!({"numeric": 2, "string": "user string", "bool": true}),
            managed: Some(&[
                ("default", &[".numeric", ".string"]),
                ("controller", &[".bool"]),
            ]),
        },
        Case {
            name: "leaf/apply_twice_remove",
            schema: leaf_schema(),
            ops: vec![
                Apply(
                    "default",
                    json!({"numeric": 1, "string": "string", "bool": false}),
                ),
                Apply("default", json!({"string": "new string"})),
            ],
            object: json!({"string": "new string"}),
            managed: Some(&[("default", &[".string"])]),
        },
        Case {
            name: "leaf/update_apply_omits",
            schema: leaf_schema(),
            ops: vec![
                Apply("default", json!({"numeric": 2})),
                Update("controller", json!({"numeric": 1})),
                Apply("default", json!({})),
            ],
            object: json!({"numeric": 1}),
            managed: Some(&[("controller", &[".numeric"])]),
        },
        Case {
            name: "leaf/update_remove_empty_set",
            schema: leaf_schema(),
            ops: vec![
                Apply("default", json!({"string": "string"})),
                Update("controller", json!({"string": "new string"})),
            ],
            object: json!({"string": "new string"}),
            managed: Some(&[("controller", &[".string"])]),
        },
        Case {
            name: "leaf/apply_remove_empty_set",
            schema: leaf_schema(),
            ops: vec![
                Apply("default", json!({"string": "string"})),
                Apply("default", json!({})),
            ],
            object: json!({}),
            managed: Some(&[]),
        },
        // set_test.go
        Case {
            name: "set/apply_update_apply_with_overlap",
            schema: set_schema(),
            ops: vec![
                Apply("default", json!({"list": ["a", "c"]})),
                Update("controller", json!({"list": ["a", "b", "c", "d"]})),
                Apply("default", json!({"list": ["a", "b", "c"]})),
            ],
            object: json!({"list": ["a", "b", "c", "d"]}),
            managed: Some(&[
                (
                    "default",
                    &[".list[=\"a\"]", ".list[=\"b\"]", ".list[=\"c\"]"],
                ),
                ("controller", &[".list[=\"b\"]", ".list[=\"d\"]"]),
            ]),
        },
        Case {
            name: "set/apply_twice_remove",
            schema: set_schema(),
            ops: vec![
                Apply("default", json!({"list": ["a", "b", "c", "d"]})),
                Apply("default", json!({"list": ["a", "c"]})),
            ],
            object: json!({"list": ["a", "c"]}),
            managed: Some(&[("default", &[".list[=\"a\"]", ".list[=\"c\"]"])]),
        },
        // key_test.go
        Case {
            name: "key/removing_obsolete_applied_structs",
            schema: keyed_schema(),
            ops: vec![
                Apply("default", json!({"list": [{"name": "a", "value": 1}]})),
                Apply("default", json!({"list": [{"name": "b", "value": 2}]})),
            ],
            object: json!({"list": [{"name": "b", "value": 2}]}),
            managed: Some(&[(
                "default",
                &[
                    ".list[name=\"b\"]",
                    ".list[name=\"b\"].name",
                    ".list[name=\"b\"].value",
                ],
            )]),
        },
        // multiple_appliers_test.go: TestMultipleAppliersSet
        Case {
            name: "multiple_appliers/remove_one",
            schema: keyed_schema(),
            ops: vec![
                Apply("apply-one", json!({"list": [{"name": "a"}, {"name": "b"}]})),
                Apply("apply-two", json!({"list": [{"name": "c"}]})),
                Apply("apply-one", json!({"list": [{"name": "a"}]})),
            ],
            object: json!({"list": [{"name": "a"}, {"name": "c"}]}),
            managed: Some(&[
                (
                    "apply-one",
                    &[".list[name=\"a\"]", ".list[name=\"a\"].name"],
                ),
                (
                    "apply-two",
                    &[".list[name=\"c\"]", ".list[name=\"c\"].name"],
                ),
            ]),
        },
        Case {
            name: "multiple_appliers/same_value_no_conflict",
            schema: keyed_schema(),
            ops: vec![
                Apply("apply-one", json!({"list": [{"name": "a", "value": 0}]})),
                Apply("apply-two", json!({"list": [{"name": "a", "value": 0}]})),
            ],
            object: json!({"list": [{"name": "a", "value": 0}]}),
            managed: Some(&[
                (
                    "apply-one",
                    &[
                        ".list[name=\"a\"]",
                        ".list[name=\"a\"].name",
                        ".list[name=\"a\"].value",
                    ],
                ),
                (
                    "apply-two",
                    &[
                        ".list[name=\"a\"]",
                        ".list[name=\"a\"].name",
                        ".list[name=\"a\"].value",
                    ],
                ),
            ]),
        },
        Case {
            name: "multiple_appliers/change_value_yes_conflict",
            schema: keyed_schema(),
            ops: vec![
                Apply("apply-one", json!({"list": [{"name": "a", "value": 0}]})),
                Refused(
                    "apply-two",
                    json!({"list": [{"name": "a", "value": 1}]}),
                    &[("\"apply-one\"", ".list[name=\"a\"].value")],
                ),
            ],
            object: json!({"list": [{"name": "a", "value": 0}]}),
            managed: Some(&[(
                "apply-one",
                &[
                    ".list[name=\"a\"]",
                    ".list[name=\"a\"].name",
                    ".list[name=\"a\"].value",
                ],
            )]),
        },
        Case {
            name: "multiple_appliers/remove_one_keep_one",
            schema: keyed_schema(),
            ops: vec![
                Apply(
                    "apply-one",
                    json!({"list": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}),
                ),
                Apply("apply-two", json!({"list": [{"name": "c"}, {"name": "d"}]})),
                Apply("apply-one", json!({"list": [{"name": "a"}]})),
            ],
            object: json!({"list": [{"name": "a"}, {"name": "c"}, {"name": "d"}]}),
            managed: Some(&[
                (
                    "apply-one",
                    &[".list[name=\"a\"]", ".list[name=\"a\"].name"],
                ),
                (
                    "apply-two",
                    &[
                        ".list[name=\"c\"]",
                        ".list[name=\"c\"].name",
                        ".list[name=\"d\"]",
                        ".list[name=\"d\"].name",
                    ],
                ),
            ]),
        },
        // multiple_appliers_test.go: TestMultipleAppliersFieldUnsetting (one version)
        Case {
            name: "multiple_appliers/unset_scalar_shared_with_updater",
            schema: nested_schema(),
            ops: vec![
                Update("updater", json!({"struct": {"name": "a", "value": 1}})),
                Apply("applier", json!({"struct": {"name": "a", "value": 1}})),
                Apply("applier", json!({"struct": {"name": "a"}})),
            ],
            object: json!({"struct": {"name": "a", "value": 1}}),
            managed: Some(&[
                ("updater", &[".struct", ".struct.name", ".struct.value"]),
                ("applier", &[".struct.name"]),
            ]),
        },
        Case {
            name: "multiple_appliers/updater_claims_field",
            schema: nested_schema(),
            ops: vec![
                Apply("applier", json!({"struct": {"name": "a", "value": 1}})),
                Update("updater", json!({"struct": {"name": "a", "value": 2}})),
            ],
            object: json!({"struct": {"name": "a", "value": 2}}),
            managed: Some(&[
                ("updater", &[".struct.value"]),
                ("applier", &[".struct.name"]),
            ]),
        },
        // multiple_appliers_test.go: TestMultipleAppliersNestedType
        Case {
            name: "multiple_appliers/remove_one_keep_one_with_dangling_subitem",
            schema: nested_schema(),
            ops: vec![
                Apply(
                    "apply-one",
                    json!({"listOfLists": [{"name": "a"}, {"name": "b", "value": ["c"]}]}),
                ),
                Apply(
                    "apply-two",
                    json!({"listOfLists": [{"name": "b", "value": ["d"]}]}),
                ),
                Update(
                    "controller",
                    json!({"listOfLists": [{"name": "a"}, {"name": "b", "value": ["c", "d", "e"]}]}),
                ),
                Apply("apply-one", json!({"listOfLists": [{"name": "a"}]})),
            ],
            object: json!({"listOfLists": [{"name": "a"}, {"name": "b", "value": ["d", "e"]}]}),
            managed: Some(&[
                (
                    "apply-one",
                    &[".listOfLists[name=\"a\"]", ".listOfLists[name=\"a\"].name"],
                ),
                (
                    "apply-two",
                    &[
                        ".listOfLists[name=\"b\"]",
                        ".listOfLists[name=\"b\"].name",
                        ".listOfLists[name=\"b\"].value[=\"d\"]",
                    ],
                ),
                ("controller", &[".listOfLists[name=\"b\"].value[=\"e\"]"]),
            ]),
        },
        Case {
            // The dropped item goes with what an updater added inside it: nobody owns the
            // item itself.
            name: "multiple_appliers/remove_one_with_dangling_subitem_keep_one",
            schema: nested_schema(),
            ops: vec![
                Apply(
                    "apply-one",
                    json!({"listOfLists": [{"name": "a"}, {"name": "b", "value": ["c"]}]}),
                ),
                Apply(
                    "apply-two",
                    json!({"listOfLists": [{"name": "a", "value": ["b"]}]}),
                ),
                Update(
                    "controller",
                    json!({"listOfLists": [{"name": "a", "value": ["b"]}, {"name": "b", "value": ["c", "d"]}]}),
                ),
                Apply("apply-one", json!({"listOfLists": [{"name": "a"}]})),
            ],
            object: json!({"listOfLists": [{"name": "a", "value": ["b"]}]}),
            managed: Some(&[
                (
                    "apply-one",
                    &[".listOfLists[name=\"a\"]", ".listOfLists[name=\"a\"].name"],
                ),
                (
                    "apply-two",
                    &[
                        ".listOfLists[name=\"a\"]",
                        ".listOfLists[name=\"a\"].name",
                        ".listOfLists[name=\"a\"].value[=\"b\"]",
                    ],
                ),
            ]),
        },
        Case {
            name: "multiple_appliers/remove_one_keep_one_with_sub_item",
            schema: nested_schema(),
            ops: vec![
                Apply(
                    "apply-one",
                    json!({"listOfLists": [{"name": "a"}, {"name": "b", "value": ["c"]}]}),
                ),
                Apply(
                    "apply-two",
                    json!({"listOfLists": [{"name": "b", "value": ["d"]}]}),
                ),
                Apply("apply-one", json!({"listOfLists": [{"name": "a"}]})),
            ],
            object: json!({"listOfLists": [{"name": "a"}, {"name": "b", "value": ["d"]}]}),
            managed: Some(&[
                (
                    "apply-one",
                    &[".listOfLists[name=\"a\"]", ".listOfLists[name=\"a\"].name"],
                ),
                (
                    "apply-two",
                    &[
                        ".listOfLists[name=\"b\"]",
                        ".listOfLists[name=\"b\"].name",
                        ".listOfLists[name=\"b\"].value[=\"d\"]",
                    ],
                ),
            ]),
        },
        // nested_test.go
        Case {
            name: "nested/struct_apply_remove_all",
            schema: nested_schema(),
            ops: vec![
                Apply("default", json!({"struct": {"name": "a", "value": 1}})),
                Apply("default", json!({})),
            ],
            object: json!({}),
            managed: Some(&[]),
        },
        Case {
            // Upstream leaves `struct: null`; a map emptied by pruning goes here, as the
            // typed round trip of a Kubernetes object drops that null.
            name: "nested/struct_apply_remove_dangling",
            schema: nested_schema(),
            ops: vec![
                Apply("default", json!({"struct": {"name": "a"}})),
                Apply("default", json!({"struct": null})),
            ],
            object: json!({}),
            managed: Some(&[("default", &[".struct"])]),
        },
        Case {
            name: "nested/struct_apply_update_remove_all",
            schema: nested_schema(),
            ops: vec![
                Apply("default", json!({"struct": {"name": "a"}})),
                Update("controller", json!({"struct": {"name": "a", "value": 1}})),
                Apply("default", json!({})),
            ],
            object: json!({"struct": {"value": 1}}),
            managed: None,
        },
        Case {
            name: "nested/struct_apply_update_dict_dangling",
            schema: nested_schema(),
            ops: vec![
                Apply("default", json!({"struct": {"name": "a"}})),
                Update("controller", json!({"struct": {"name": "a", "value": 1}})),
                Apply("default", json!({"struct": {}})),
            ],
            object: json!({"struct": {"value": 1}}),
            managed: None,
        },
        Case {
            name: "nested/struct_apply_update_dict_null",
            schema: nested_schema(),
            ops: vec![
                Apply("default", json!({"struct": {"name": "a"}})),
                Update("controller", json!({"struct": {"name": "a", "value": 1}})),
                Apply("default", json!({"struct": null})),
            ],
            object: json!({"struct": {"value": 1}}),
            managed: None,
        },
        Case {
            name: "nested/struct_apply_update_took_over",
            schema: nested_schema(),
            ops: vec![
                Apply("default", json!({"struct": {"name": "a"}})),
                Update("controller", json!({"struct": {"name": "b", "value": 1}})),
                Apply("default", json!({"struct": null})),
            ],
            object: json!({"struct": {"name": "b", "value": 1}}),
            managed: None,
        },
        // multiple_appliers_test.go: TestMultipleApplierAtomicMaps
        Case {
            name: "atomic_maps/force",
            schema: atomic_map_schema(),
            ops: vec![
                Apply("default", json!({"atomicMap": {"a": "x"}})),
                Refused(
                    "other",
                    json!({"atomicMap": {"b": "y"}}),
                    &[("\"default\"", ".atomicMap")],
                ),
                Force("other", json!({"atomicMap": {"b": "y"}})),
            ],
            object: json!({"atomicMap": {"b": "y"}}),
            managed: Some(&[("other", &[".atomicMap"])]),
        },
        // Conflicts with several managers: grouped by manager, members before deeper paths.
        Case {
            name: "conflicts/several_managers_in_upstream_order",
            schema: json!({"properties": {"key": {"type": "string"}, "value": {"type": "string"},
                "list": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["key", "id"],
                    "items": {"properties": {"key": {"type": "string"}, "id": {"type": "integer"},
                        "value": {"type": "string"}}}}}}),
            ops: vec![
                Apply(
                    "Bob",
                    json!({"key": "k", "list": [{"id": 2, "key": "a", "value": "b"}]}),
                ),
                Apply(
                    "Alice",
                    json!({"value": "v", "list": [{"key": "a", "id": 2, "value": "b"}]}),
                ),
                Refused(
                    "Carol",
                    json!({"key": "K", "value": "V", "list": [{"key": "a", "id": 2, "value": "c"}]}),
                    &[
                        ("\"Alice\"", ".value"),
                        ("\"Alice\"", ".list[id=2,key=\"a\"].value"),
                        ("\"Bob\"", ".key"),
                        ("\"Bob\"", ".list[id=2,key=\"a\"].value"),
                    ],
                ),
            ],
            object: json!({"key": "k", "value": "v", "list": [{"id": 2, "key": "a", "value": "b"}]}),
            managed: None,
        },
    ]
}

/// Every manager's fields, in dotted form.
fn owners(object: &Value) -> BTreeMap<String, BTreeSet<String>> {
    managed(object)
        .into_iter()
        .map(|entry| {
            let fields = entry.fields.iter().map(|path| path_text(path)).collect();
            (entry.manager, fields)
        })
        .collect()
}

fn run(case: &Case) {
    let schema = Schema::of(&case.schema);
    let name = case.name;
    let mut live = json!({"metadata": {}});
    for (step, op) in case.ops.iter().enumerate() {
        match op {
            Op::Apply(manager, config) | Op::Force(manager, config) => {
                let force = matches!(op, Op::Force(..));
                live = apply(&live, config, manager, "v1", "t", force, schema)
                    .unwrap_or_else(|c| panic!("{name}, step {step}: conflicts {c:?}"))
                    .object;
            }
            Op::Refused(manager, config, expected) => {
                let conflicts = apply(&live, config, manager, "v1", "t", false, schema)
                    .err()
                    .unwrap_or_else(|| panic!("{name}, step {step}: applied"));
                let got: Vec<(&str, &str)> = conflicts
                    .iter()
                    .map(|c| (c.manager.as_str(), c.field.as_str()))
                    .collect();
                assert_eq!(got, *expected, "{name}, step {step}");
            }
            Op::Update(manager, object) => {
                let mut next = object.clone();
                next["metadata"] = live["metadata"].clone();
                record_update(&live, &mut next, manager, "v1", "t", None, schema);
                live = next;
            }
        }
    }
    let mut object = live.clone();
    if let Some(map) = object.as_object_mut() {
        map.remove("metadata");
    }
    assert_eq!(object, case.object, "{name}: object");
    if let Some(expected) = case.managed {
        let expected: BTreeMap<String, BTreeSet<String>> = expected
            .iter()
            .map(|(manager, paths)| {
                let paths = paths.iter().map(|p| p.to_string()).collect();
                (manager.to_string(), paths)
            })
            .collect();
        assert_eq!(owners(&live), expected, "{name}: managed fields");
    }
}

#[test]
fn upstream_ownership_and_conflict_cases() {
    for case in cases() {
        run(&case);
    }
}

#[test]
fn conflict_messages_read_like_upstream() {
    let one = [Conflict {
        manager: "\"kubectl\"".into(),
        field: ".spec.template.spec.containers[name=\"c\"].image".into(),
    }];
    assert_eq!(
        conflict_message(&one),
        "Apply failed with 1 conflict: conflict with \"kubectl\": .spec.template.spec.containers[name=\"c\"].image"
    );
    let several = [
        Conflict {
            manager: "\"Alice\"".into(),
            field: ".value".into(),
        },
        Conflict {
            manager: "\"Alice\"".into(),
            field: ".list[id=2,key=\"a\"].key".into(),
        },
        Conflict {
            manager: "\"Bob\" using v1".into(),
            field: ".key".into(),
        },
    ];
    assert_eq!(
        conflict_message(&several),
        "Apply failed with 3 conflicts: conflicts with \"Alice\":\n- .value\n- .list[id=2,key=\"a\"].key\nconflicts with \"Bob\" using v1:\n- .key"
    );
}

/// `kubectl apply` then `kubectl apply --server-side` of the same Deployment: the client-side
/// applier (an updater that owns everything it created) does not conflict, the appliers
/// share equal values, and a changed image conflicts on the image alone.
#[test]
fn client_side_then_server_side_apply_of_a_deployment() {
    let schema = Schema::definition("io.k8s.api.apps.v1.Deployment");
    let deploy = |image: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": image}]}}}})
    };
    // The stored object carries what defaulting added to the container.
    let mut created = deploy("app:1");
    created["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
    created["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"] =
        json!("/dev/termination-log");
    record_update(
        &json!({}),
        &mut created,
        "kubectl-client-side-apply",
        "apps/v1",
        "t",
        None,
        schema,
    );
    let applied = apply(
        &created,
        &deploy("app:1"),
        "kubectl",
        "apps/v1",
        "t",
        false,
        schema,
    )
    .unwrap_or_else(|c| panic!("{c:?}"))
    .object;
    assert_eq!(applied["spec"], created["spec"], "nothing changed");
    let shared = apply(
        &applied,
        &deploy("app:1"),
        "other",
        "apps/v1",
        "t",
        false,
        schema,
    )
    .unwrap_or_else(|c| panic!("{c:?}"))
    .object;
    let owners = owners(&shared);
    let image = ".spec.template.spec.containers[name=\"c\"].image";
    for manager in ["kubectl-client-side-apply", "kubectl", "other"] {
        assert!(owners[manager].contains(image), "{manager}: {owners:?}");
    }
    let conflicts = apply(
        &shared,
        &deploy("app:2"),
        "other",
        "apps/v1",
        "t",
        false,
        schema,
    )
    .err()
    .unwrap_or_default();
    assert_eq!(
        conflicts,
        [
            Conflict {
                manager: "\"kubectl\"".into(),
                field: image.into()
            },
            Conflict {
                manager: "\"kubectl-client-side-apply\" using apps/v1".into(),
                field: image.into()
            },
        ]
    );
    // kubectl then hands the client-side applier's fields to its own entry by writing
    // managedFields: an update that carries them keeps them as written.
    let mut migrated = shared.clone();
    let mut entries = managed(&shared);
    entries.retain(|e| e.manager != "kubectl-client-side-apply");
    set_managed(&mut migrated, &entries);
    record_update(
        &shared,
        &mut migrated,
        "kubectl",
        "apps/v1",
        "t",
        None,
        schema,
    );
    let migrated_owners: Vec<String> = managed(&migrated).into_iter().map(|e| e.manager).collect();
    assert_eq!(migrated_owners, ["kubectl", "other"]);
}
