//! Table tests of the Workloads remembered between reads: which are parsed again.

use super::*;
use serde_json::json;

fn workload(name: &str, version: Option<&str>, cpu: &str) -> Value {
    let mut object = json!({
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"queueName": "user-queue", "podSets": [{"name": "main", "count": 1,
            "template": {"spec": {"containers": [{"name": "c",
                "resources": {"requests": {"cpu": cpu}}}]}}}]}});
    if let Some(version) = version {
        object["metadata"]["resourceVersion"] = json!(version);
    }
    object
}

fn read(parsed: &mut ParsedWorkloads, workloads: Vec<Value>) -> BTreeMap<String, WorkloadState> {
    let objects = Objects {
        workloads: crate::api::objects::shared(workloads),
        ..Objects::default()
    };
    parsed
        .read(&objects)
        .into_iter()
        .map(|(key, (_, state))| (key, state.as_ref().clone()))
        .collect()
}

#[test]
fn only_workloads_at_a_new_version_are_parsed_again() {
    let first = || {
        vec![
            workload("a", Some("1"), "1"),
            workload("b", Some("2"), "1"),
            workload("c", Some("3"), "1"),
        ]
    };
    // (case, the second read's Workloads, parsed by it, remembered after it)
    let cases: Vec<(&str, Vec<Value>, usize, usize)> = vec![
        ("unchanged", first(), 0, 3),
        (
            "one at a new version",
            vec![
                workload("a", Some("1"), "1"),
                workload("b", Some("7"), "2"),
                workload("c", Some("3"), "1"),
            ],
            1,
            3,
        ),
        (
            "one gone",
            vec![workload("a", Some("1"), "1"), workload("c", Some("3"), "1")],
            0,
            2,
        ),
        (
            "one added",
            vec![
                workload("a", Some("1"), "1"),
                workload("b", Some("2"), "1"),
                workload("c", Some("3"), "1"),
                workload("d", Some("8"), "1"),
            ],
            1,
            4,
        ),
        (
            "one without a version: parsed, not remembered",
            vec![
                workload("a", Some("1"), "1"),
                workload("b", None, "1"),
                workload("c", Some("3"), "1"),
            ],
            1,
            2,
        ),
    ];
    for (case, second, parsed, remembered) in cases {
        let mut memo = ParsedWorkloads::default();
        let before = read(&mut memo, first());
        assert_eq!((memo.parsed(), memo.remembered()), (3, 3), "{case}");
        let again = read(&mut memo, second.clone());
        assert_eq!(memo.parsed(), parsed, "{case}: parsed");
        assert_eq!(memo.remembered(), remembered, "{case}: remembered");
        // What is read equals a fresh parse of the same objects.
        let fresh = read(&mut ParsedWorkloads::default(), second);
        assert_eq!(again, fresh, "{case}: read as a fresh parse");
        assert_eq!(before.len(), 3, "{case}");
    }
}

#[test]
fn an_unchanged_version_is_not_parsed_again() {
    // The version is what is compared: content changed under the same version (which a store
    // never serves) is not looked at, which shows the object was not parsed again.
    let mut memo = ParsedWorkloads::default();
    let before = read(&mut memo, vec![workload("a", Some("1"), "1")]);
    let same_version = read(&mut memo, vec![workload("a", Some("1"), "5")]);
    assert_eq!(memo.parsed(), 0);
    assert_eq!(same_version, before);
    let new_version = read(&mut memo, vec![workload("a", Some("2"), "5")]);
    assert_eq!(memo.parsed(), 1);
    assert_ne!(new_version, before);
}

#[test]
fn the_very_object_read_before_is_met_again_by_its_address() {
    // The same Arcs again: nothing parsed, the same states, the keys known without reading.
    let objects = Objects {
        workloads: crate::api::objects::shared(vec![
            workload("a", Some("1"), "1"),
            workload("b", Some("2"), "1"),
        ]),
        ..Objects::default()
    };
    let mut parsed = ParsedWorkloads::default();
    let first: Vec<String> = parsed.read(&objects).into_keys().collect();
    assert_eq!(parsed.parsed(), 2);
    let again: Vec<String> = parsed.read(&objects).into_keys().collect();
    assert_eq!((parsed.parsed(), &again), (0, &first));
    let keys: Vec<String> = objects.workloads.iter().map(|w| parsed.key_of(w)).collect();
    assert_eq!(keys, ["default/a", "default/b"]);
    // A copy at the same version is found by key and version; one dropped is forgotten.
    let copy = Objects {
        workloads: crate::api::objects::shared(vec![workload("a", Some("1"), "1")]),
        ..Objects::default()
    };
    assert_eq!(parsed.read(&copy).len(), 1);
    assert_eq!((parsed.parsed(), parsed.remembered()), (0, 1));
    // An object never read is keyed from its JSON.
    assert_eq!(parsed.key_of(&objects.workloads[1]), "default/b");
}
