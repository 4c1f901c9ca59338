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

/// The objects of a pass storing `workloads` and nothing else.
fn stored(workloads: Vec<Value>) -> Objects {
    Objects {
        workloads: crate::api::objects::shared(workloads),
        ..Objects::default()
    }
}

fn read(parsed: &mut ParsedWorkloads, workloads: Vec<Value>) -> BTreeMap<String, WorkloadState> {
    let objects = stored(workloads);
    parsed
        .read(&objects)
        .into_iter()
        .map(|(key, (_, state))| (key.to_string(), state.as_ref().clone()))
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
    // The same Arcs again: nothing parsed, the same states.
    let objects = stored(vec![
        workload("a", Some("1"), "1"),
        workload("b", Some("2"), "1"),
    ]);
    let mut parsed = ParsedWorkloads::default();
    let keys = |read: ActedOn| -> Vec<String> { read.keys().map(|k| k.to_string()).collect() };
    let first = keys(parsed.read(&objects));
    assert_eq!(parsed.parsed(), 2);
    let again = keys(parsed.read(&objects));
    assert_eq!((parsed.parsed(), &again), (0, &first));
    assert_eq!(first, ["default/a", "default/b"]);
    // A copy at the same version is found by key and version; one dropped is forgotten.
    let copy = stored(vec![workload("a", Some("1"), "1")]);
    assert_eq!(parsed.read(&copy).len(), 1);
    assert_eq!((parsed.parsed(), parsed.remembered()), (0, 1));
}

/// What a read answers, comparable: per key, the address of the object and its state.
fn answered(read: &ActedOn) -> Vec<(String, usize, WorkloadState)> {
    read.iter()
        .map(|(key, (object, state))| (key.to_string(), address_of(object), state.as_ref().clone()))
        .collect()
}

/// A step of reads: its name, the Workloads stored, the keys answered.
type Step<'a> = (&'a str, Vec<&'a Arc<Value>>, Vec<&'a str>);

#[test]
fn an_answer_handed_back_is_updated_as_a_fresh_read_answers() {
    // Each read starts from the last answer handed back; unchanged objects are the very
    // Arcs read before, as a watch cache hands them out.
    let shared = |object: Value| Arc::new(object);
    let a1 = shared(workload("a", Some("1"), "1"));
    let a2 = shared(workload("a", Some("6"), "2"));
    let b1 = shared(workload("b", Some("2"), "1"));
    let mut done = workload("b", Some("5"), "1");
    done["status"] = json!({"conditions": [{"type": "Finished", "status": "True",
        "reason": "Succeeded", "message": "", "lastTransitionTime": "2026-12-05T00:00:00Z"}]});
    let b_finished = shared(done);
    let c_unversioned = shared(workload("c", None, "1"));
    let a_unversioned = shared(workload("a", None, "3"));
    // (step, the Workloads stored, the keys answered)
    let steps: Vec<Step<'_>> = vec![
        ("first", vec![&a1, &b1, &c_unversioned], vec!["a", "b", "c"]),
        (
            "unchanged",
            vec![&a1, &b1, &c_unversioned],
            vec!["a", "b", "c"],
        ),
        (
            "b finished",
            vec![&a1, &b_finished, &c_unversioned],
            vec!["a", "c"],
        ),
        (
            "a at a new version, c gone",
            vec![&a2, &b_finished],
            vec!["a"],
        ),
        ("b gone, c back", vec![&a2, &c_unversioned], vec!["a", "c"]),
        ("c gone again", vec![&a2], vec!["a"]),
        ("b back as it was", vec![&a2, &b1], vec!["a", "b"]),
        ("b deleted while pending", vec![&a2], vec!["a"]),
        ("b back again", vec![&a2, &b1], vec!["a", "b"]),
        (
            "a without a version",
            vec![&a_unversioned, &b1],
            vec!["a", "b"],
        ),
        ("a's old version back", vec![&a1, &b1], vec!["a", "b"]),
    ];
    let mut kept = ParsedWorkloads::default();
    for (step, stored, keys) in steps {
        let objects = Objects {
            workloads: stored.into_iter().cloned().collect(),
            ..Objects::default()
        };
        let answer = kept.read(&objects);
        let fresh = ParsedWorkloads::default().read(&objects);
        assert_eq!(answered(&answer), answered(&fresh), "{step}");
        let names: Vec<String> = keys.iter().map(|k| format!("default/{k}")).collect();
        let read: Vec<String> = answer.keys().map(|k| k.to_string()).collect();
        assert_eq!(read, names, "{step}");
        kept.keep(answer);
    }
}

#[test]
fn an_answer_not_handed_back_is_read_whole_again() {
    let objects = stored(vec![
        workload("a", Some("1"), "1"),
        workload("b", Some("2"), "1"),
    ]);
    let mut parsed = ParsedWorkloads::default();
    let first = parsed.read(&objects);
    // Not kept: the next read over the very same objects still answers every Workload.
    let again = parsed.read(&objects);
    assert_eq!(answered(&again), answered(&first));
    assert_eq!(parsed.parsed(), 0);
}
