//! Upstream's `plugin/pkg/admission/runtimeclass/admission_test.go` cases as tables, plus the
//! whole plugin through [`admit`].

use super::*;

fn class(overhead: Option<Value>, scheduling: Option<Value>) -> Value {
    let mut class = json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": "foo"}, "handler": "bar"});
    if let Some(fixed) = overhead {
        class["overhead"] = json!({"podFixed": fixed});
    }
    if let Some(scheduling) = scheduling {
        class["scheduling"] = scheduling;
    }
    class
}

/// `newOverheadValidPod`: one container with `resources`, overhead 100m CPU and 1 byte of
/// memory when `overhead`.
fn overhead_pod(resources: Value, overhead: bool) -> Value {
    let mut pod = json!({"metadata": {"name": "p", "namespace": "test"},
        "spec": {"containers": [{"name": "foo-0", "image": "foo:V0", "resources": resources}]}});
    if overhead {
        pod["spec"]["overhead"] = json!({"cpu": "100m", "memory": "1"});
    }
    pod
}

fn guaranteed() -> Value {
    json!({"limits": {"cpu": "1", "memory": "10"}, "requests": {"cpu": "1", "memory": "10"}})
}

fn small() -> Value {
    json!({"cpu": "100m", "memory": "1"})
}

fn big() -> Value {
    json!({"cpu": "10", "memory": "10G"})
}

/// `newSchedulingValidPod`.
fn scheduling_pod(selector: Option<Value>, tolerations: Option<Value>) -> Value {
    let mut pod = json!({"metadata": {"name": "p", "namespace": "test"}, "spec": {}});
    if let Some(selector) = selector {
        pod["spec"]["nodeSelector"] = selector;
    }
    if let Some(tolerations) = tolerations {
        pod["spec"]["tolerations"] = tolerations;
    }
    pod
}

#[test]
fn set_overhead_as_upstream() {
    // (name, class overhead, pod, refused, the pod's overhead after)
    let cases = [
        (
            "overhead, no container requirements",
            small(),
            overhead_pod(json!({}), false),
            false,
            Some(small()),
        ),
        (
            "overhead, guaranteed pod",
            small(),
            overhead_pod(guaranteed(), false),
            false,
            Some(small()),
        ),
        (
            "overhead, pod with differing overhead already set",
            big(),
            overhead_pod(json!({}), true),
            true,
            None,
        ),
        (
            "overhead, pod with same overhead already set",
            small(),
            overhead_pod(json!({}), true),
            false,
            Some(small()),
        ),
        (
            "the same overhead written otherwise is the same",
            json!({"cpu": "0.1", "memory": "1"}),
            overhead_pod(json!({}), true),
            false,
            Some(json!({"cpu": "0.1", "memory": "1"})),
        ),
    ];
    for (name, fixed, mut pod, refused, after) in cases {
        let result = set_overhead(&mut pod, &class(Some(fixed), None));
        if refused {
            assert_eq!(result, Err(Refusal::OverheadMismatch), "{name}");
        } else {
            assert_eq!(result, Ok(()), "{name}");
            assert_eq!(pod.at("/spec/overhead"), after.as_ref(), "{name}");
        }
    }
}

#[test]
fn set_scheduling_as_upstream() {
    let toleration = |key: &str, value: &str| json!({"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"});
    // (name, class scheduling, pod, want: Err(message) or Ok(pod after))
    let cases = [
        (
            "scheduling, nil scheduling",
            None,
            scheduling_pod(Some(json!({"foo": "bar"})), Some(json!([]))),
            Ok(scheduling_pod(Some(json!({"foo": "bar"})), Some(json!([])))),
        ),
        (
            "scheduling, conflict node selector",
            Some(json!({"nodeSelector": {"foo": "conflict"}})),
            scheduling_pod(Some(json!({"foo": "bar"})), Some(json!([]))),
            Err(
                "conflict: runtimeClass.scheduling.nodeSelector[foo] = conflict; pod.spec.nodeSelector[foo] = bar",
            ),
        ),
        (
            "scheduling, nil node selector",
            Some(json!({"nodeSelector": {"foo": "bar"}})),
            scheduling_pod(None, None),
            Ok(scheduling_pod(Some(json!({"foo": "bar"})), None)),
        ),
        (
            "scheduling, node selector with the same key value",
            Some(json!({"nodeSelector": {"foo": "bar"}})),
            scheduling_pod(Some(json!({"foo": "bar"})), None),
            Ok(scheduling_pod(Some(json!({"foo": "bar"})), None)),
        ),
        (
            "scheduling, node selector with different key value",
            Some(json!({"nodeSelector": {"foo": "bar", "fizz": "buzz"}})),
            scheduling_pod(Some(json!({"foo": "bar"})), None),
            Ok(scheduling_pod(
                Some(json!({"foo": "bar", "fizz": "buzz"})),
                None,
            )),
        ),
        (
            "scheduling, multiple tolerations",
            Some(json!({"tolerations": [toleration("foo", "bar"), toleration("fizz", "buzz")]})),
            scheduling_pod(
                Some(json!({"foo": "bar"})),
                Some(json!([toleration("foo", "bar")])),
            ),
            Ok(scheduling_pod(
                Some(json!({"foo": "bar"})),
                Some(json!([
                    toleration("foo", "bar"),
                    toleration("fizz", "buzz")
                ])),
            )),
        ),
        (
            "the class's toleration wins over the pod's of the same key and effect; the pod's others follow",
            Some(json!({"tolerations": [toleration("foo", "class")]})),
            scheduling_pod(
                None,
                Some(json!([toleration("foo", "pod"), toleration("own", "x")])),
            ),
            Ok(scheduling_pod(
                None,
                Some(json!([toleration("foo", "class"), toleration("own", "x")])),
            )),
        ),
    ];
    for (name, scheduling, mut pod, want) in cases {
        let result = set_scheduling(&mut pod, &class(None, scheduling));
        match want {
            Ok(after) => {
                assert_eq!(result, Ok(()), "{name}");
                assert_eq!(pod, after, "{name}");
            }
            Err(message) => {
                let error = result.expect_err(name);
                assert_eq!(error.to_string(), message, "{name}");
            }
        }
    }
}

#[test]
fn validate_overhead_as_upstream() {
    // (name, class overhead: None = no class, Some(None) = a class without overhead, pod,
    // want)
    let cases = [
        (
            "Overhead part of RuntimeClass, no Overhead defined in pod",
            Some(Some(small())),
            overhead_pod(json!({}), false),
            Err(Refusal::OverheadMismatch),
        ),
        (
            "No Overhead in RunntimeClass, Overhead set in pod",
            Some(None),
            overhead_pod(guaranteed(), true),
            Err(Refusal::OverheadWithoutClass),
        ),
        (
            "No RunntimeClass, Overhead set in pod",
            None,
            overhead_pod(guaranteed(), true),
            Err(Refusal::OverheadWithoutClass),
        ),
        (
            "Non-matching Overheads",
            Some(Some(big())),
            overhead_pod(json!({}), true),
            Err(Refusal::OverheadMismatch),
        ),
        (
            "Matching Overheads",
            Some(Some(small())),
            overhead_pod(json!({}), true),
            Ok(()),
        ),
        (
            "No RuntimeClass, no Overhead",
            None,
            overhead_pod(json!({}), false),
            Ok(()),
        ),
    ];
    for (name, overhead, pod, want) in cases {
        let class = overhead.map(|fixed| class(fixed, None));
        assert_eq!(validate_overhead(&pod, class.as_ref()), want, "{name}");
    }
}

#[test]
fn admission_looks_the_class_up_and_applies_it() {
    let kata = json!({"metadata": {"name": "kata"}, "handler": "kata-qemu",
        "overhead": {"podFixed": {"cpu": "250m", "memory": "160Mi"}},
        "scheduling": {"nodeSelector": {"katacontainers.io/kata-runtime": "true"},
                       "tolerations": [{"key": "sandboxed", "operator": "Exists", "effect": "NoSchedule"}]}});
    let plain = json!({"metadata": {"name": "runc"}, "handler": "runc"});
    let lookup = |name: &str| match name {
        "kata" => Some(kata.clone()),
        "runc" => Some(plain.clone()),
        _ => None,
    };
    let pod = |class: Option<&str>, extra: Value| {
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
        if let Some(class) = class {
            pod["spec"]["runtimeClassName"] = json!(class);
        }
        for (key, value) in extra.as_object().into_iter().flatten() {
            pod["spec"][key] = value.clone();
        }
        pod
    };

    // TestAdmit: found, and not found.
    let mut unknown = pod(Some("gvisor"), json!({}));
    let refusal = admit(&mut unknown, lookup).expect_err("unknown class");
    assert_eq!(
        refusal.to_string(),
        "pod rejected: RuntimeClass \"gvisor\" not found"
    );

    let mut sandboxed = pod(Some("kata"), json!({"nodeSelector": {"zone": "a"}}));
    admit(&mut sandboxed, lookup).expect("admitted");
    assert_eq!(
        sandboxed["spec"]["overhead"],
        json!({"cpu": "250m", "memory": "160Mi"})
    );
    assert_eq!(
        sandboxed["spec"]["nodeSelector"],
        json!({"zone": "a", "katacontainers.io/kata-runtime": "true"})
    );
    assert_eq!(
        sandboxed["spec"]["tolerations"],
        json!([{"key": "sandboxed", "operator": "Exists", "effect": "NoSchedule"}])
    );

    // A class without overhead or scheduling changes nothing.
    let mut runc = pod(Some("runc"), json!({}));
    let before = runc.clone();
    admit(&mut runc, lookup).expect("admitted");
    assert_eq!(runc, before);

    // No class: only the overhead check.
    let mut bare = pod(None, json!({}));
    admit(&mut bare, lookup).expect("admitted");
    let mut stated = pod(None, json!({"overhead": {"cpu": "1"}}));
    assert_eq!(
        admit(&mut stated, lookup),
        Err(Refusal::OverheadWithoutClass)
    );
    let mut wrong = pod(Some("kata"), json!({"overhead": {"cpu": "1"}}));
    assert_eq!(admit(&mut wrong, lookup), Err(Refusal::OverheadMismatch));
    let mut conflict = pod(
        Some("kata"),
        json!({"nodeSelector": {"katacontainers.io/kata-runtime": "false"}}),
    );
    assert_eq!(
        admit(&mut conflict, lookup).map_err(|e| e.to_string()),
        Err("conflict: runtimeClass.scheduling.nodeSelector[katacontainers.io/kata-runtime] = true; pod.spec.nodeSelector[katacontainers.io/kata-runtime] = false".to_string())
    );
}

#[test]
fn merge_tolerations_keeps_one_per_key_and_effect() {
    let t = |key: &str, effect: &str, value: &str| json!({"key": key, "effect": effect, "operator": "Equal", "value": value});
    // (first, second, merged)
    let cases = [
        (vec![], vec![], vec![]),
        (
            vec![t("a", "NoSchedule", "1")],
            vec![],
            vec![t("a", "NoSchedule", "1")],
        ),
        (
            vec![t("a", "NoSchedule", "1")],
            vec![t("a", "NoExecute", "2")],
            vec![t("a", "NoExecute", "2"), t("a", "NoSchedule", "1")],
        ),
        (
            vec![t("a", "NoSchedule", "1"), t("a", "NoSchedule", "3")],
            vec![],
            vec![t("a", "NoSchedule", "3")],
        ),
    ];
    for (first, second, want) in cases {
        assert_eq!(
            merge_tolerations(&first, &second),
            want,
            "{first:?} + {second:?}"
        );
    }
}
