//! Kueue's `TestReconcileAdmissionCheck` and `TestReconcile`
//! (pkg/controller/admissionchecks/provisioning/*_test.go), ported as data.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::request::{attempt, request_name};
use super::*;
use crate::api::objects;

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

fn check(parameters: Value) -> Value {
    json!({"metadata": {"name": "check1", "generation": 1},
        "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request", "parameters": parameters}})
}

fn reference(group: &str, kind: &str, name: &str) -> Value {
    json!({"apiGroup": group, "kind": kind, "name": name})
}

fn config(extra: Value) -> Value {
    let mut spec = json!({"provisioningClassName": "class1", "parameters": {"p1": "v1"},
        "retryStrategy": {"backoffLimitCount": 3, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800}});
    for (key, value) in extra.as_object().into_iter().flatten() {
        spec[key] = value.clone();
    }
    json!({"metadata": {"name": "config1"}, "spec": spec})
}

#[test]
fn the_admission_check_is_active_once_its_config_exists() {
    let good = reference("kueue.x-k8s.io", CONFIG_KIND, "config1");
    type Case = (
        &'static str,
        Value,
        Vec<Value>,
        Option<(&'static str, &'static str, &'static str)>,
    );
    let cases: Vec<Case> = vec![
        (
            "unrelated check",
            json!({"metadata": {"name": "check1"}, "spec": {"controllerName": "other-controller"}}),
            vec![],
            None,
        ),
        (
            "no parameters specified",
            check(Value::Null),
            vec![],
            Some(("False", "BadParametersRef", "missing parameters reference")),
        ),
        (
            "bad ref group",
            check(reference("bad.group", CONFIG_KIND, "config1")),
            vec![],
            Some((
                "False",
                "BadParametersRef",
                "wrong group \"bad.group\", expecting \"kueue.x-k8s.io\": bad parameters reference",
            )),
        ),
        (
            "bad ref kind",
            check(reference("kueue.x-k8s.io", "BadKind", "config1")),
            vec![],
            Some((
                "False",
                "BadParametersRef",
                "wrong kind \"BadKind\", expecting \"ProvisioningRequestConfig\": bad parameters reference",
            )),
        ),
        (
            "config missing",
            check(good.clone()),
            vec![],
            Some((
                "False",
                "BadParametersRef",
                "provisioningrequestconfigs.kueue.x-k8s.io \"config1\" not found",
            )),
        ),
        (
            "config found",
            check(good.clone()),
            vec![config(json!({}))],
            Some(("True", "Active", "The admission check is active")),
        ),
    ];
    for (name, check, configs, want) in cases {
        let configs = objects::by_name(&configs);
        let got = active_status(&check, &configs, now());
        let got = got.as_ref().map(|status| {
            let condition = &status["conditions"][0];
            assert_eq!(condition["type"], "Active", "{name}");
            assert_eq!(condition["observedGeneration"], 1, "{name}");
            (
                condition["status"].as_str().unwrap_or_default(),
                condition["reason"].as_str().unwrap_or_default(),
                condition["message"].as_str().unwrap_or_default(),
            )
        });
        assert_eq!(got, want, "{name}");
    }
    // Written only when the status changes.
    let mut active = check(good);
    active["status"] = json!({"conditions": [{"type": "Active", "status": "True"}]});
    let configs = objects::by_name(&[config(json!({}))]);
    assert_eq!(active_status(&active, &configs, now()), None);
}

#[test]
fn request_names_carry_the_attempt() {
    assert_eq!(request_name("wl", "check1", 2), "wl-check1-2");
    assert_eq!(attempt("wl-check1-12", "wl", "check1"), Some(12));
    assert_eq!(attempt("wl-check1-", "wl", "check1"), None);
    assert_eq!(attempt("wl-check2-1", "wl", "check1"), None);
    assert_eq!(attempt("wl-check1-1x", "wl", "check1"), None);
    let long = "w".repeat(250);
    let name = request_name(&long, "check1", 1);
    assert_eq!(name.len(), 253);
    assert!(name.starts_with(&long[..247]));
}

fn pod_set(name: &str, count: i64, resource: &str, amount: &str) -> Value {
    json!({"name": name, "count": count, "template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {resource: amount}}}]}}})
}

fn state(name: &str, state: &str) -> Value {
    json!({"name": name, "state": state, "message": "", "lastTransitionTime": "2023-11-14T22:13:20Z"})
}

/// Kueue's `baseWorkload`: two PodSets (4 × cpu on flv1, 4 admitted as 3 × memory on flv2),
/// quota reserved, checks `check1` and `not-provisioning` Pending.
fn base_workload() -> Value {
    json!({
        "metadata": {"name": "wl", "namespace": "ns", "uid": "wl-uid"},
        "spec": {"podSets": [pod_set("ps1", 4, "cpu", "1"), pod_set("ps2", 4, "memory", "1M")]},
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            "admission": {"clusterQueue": "q1", "podSetAssignments": [
                {"name": "ps1", "flavors": {"cpu": "flv1"}, "count": 4},
                {"name": "ps2", "flavors": {"cpu": "flv2"}, "count": 3}]},
            "admissionChecks": [state("check1", "Pending"), state("not-provisioning", "Pending")],
        },
    })
}

fn base_request(attempt: i64) -> Value {
    let name = format!("wl-check1-{attempt}");
    json!({
        "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("{name}-uid"),
            "labels": {"kueue.x-k8s.io/managed": "true"},
            "ownerReferences": [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "name": "wl", "uid": "wl-uid", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"provisioningClassName": "class1", "parameters": {"p1": "v1"}, "podSets": [
            {"podTemplateRef": {"name": format!("ppt-{name}-ps1")}, "count": 4},
            {"podTemplateRef": {"name": format!("ppt-{name}-ps2")}, "count": 3}]},
    })
}

fn with_condition(mut object: Value, kind: &str, status: &str) -> Value {
    let conditions = object
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut);
    let condition = json!({"type": kind, "status": status, "message": "By test"});
    match conditions {
        Some(list) => list.push(condition),
        None => object["status"]["conditions"] = json!([condition]),
    }
    object
}

fn flavors() -> BTreeMap<String, crate::flavor::ResourceFlavorSpec> {
    [
        json!({"metadata": {"name": "flv1"}, "spec": {"nodeLabels": {"f1l1": "v1"}, "tolerations": [
            {"key": "f1t1k", "value": "f1t1v", "operator": "Equal", "effect": "NoSchedule"}]}}),
        json!({"metadata": {"name": "flv2"}, "spec": {"nodeLabels": {"f2l1": "v1"}}}),
    ]
    .iter()
    .filter_map(objects::flavor)
    .map(|f| (f.name.clone(), f))
    .collect()
}

/// A write, summed up: `create <kind> <name>`, `delete <name>`, `owners <name>`,
/// `checks <name>=<state>:<message>…`, `event <reason>: <message>`.
fn summary(write: &Write) -> String {
    match write {
        Write::Create(object) => format!(
            "create {} {}",
            object["kind"].as_str().unwrap_or_default(),
            object["metadata"]["name"].as_str().unwrap_or_default()
        ),
        Write::DeleteRequest(_, name) => format!("delete {name}"),
        Write::PodTemplateOwners(_, name, _) => format!("owners {name}"),
        Write::WorkloadChecks(states) => {
            let parts: Vec<String> = states
                .iter()
                .map(|s| {
                    format!(
                        "{}={}:{}",
                        s["name"].as_str().unwrap_or_default(),
                        s["state"].as_str().unwrap_or_default(),
                        s["message"].as_str().unwrap_or_default()
                    )
                })
                .collect();
            format!("checks {}", parts.join(" "))
        }
        Write::Event(event) => format!("event {}: {}", event.reason, event.message),
    }
}

struct Case {
    name: &'static str,
    workload: Value,
    configs: Vec<Value>,
    requests: Vec<Value>,
    templates: Vec<Value>,
    want: Vec<&'static str>,
}

fn case(name: &'static str, workload: Value, want: Vec<&'static str>) -> Case {
    Case {
        name,
        workload,
        configs: vec![config(json!({}))],
        requests: vec![],
        templates: vec![],
        want,
    }
}

fn template(name: &str, owner_uid: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "ns",
        "ownerReferences": [{"kind": "Workload", "name": "wl", "uid": owner_uid, "controller": true}]}})
}

fn run(case: &Case) -> Vec<Write> {
    let checks = objects::by_name(&[
        check(reference("kueue.x-k8s.io", CONFIG_KIND, "config1")),
        json!({"metadata": {"name": "not-provisioning"}, "spec": {"controllerName": "other"}}),
    ]);
    let configs = objects::by_name(&case.configs);
    let flavors = flavors();
    let inputs = Inputs {
        admission_checks: &checks,
        configs: &configs,
        requests: &case.requests,
        pod_templates: &case.templates,
        flavors: &flavors,
    };
    reconcile(&case.workload, &inputs, now())
}

const CREATED: [&str; 4] = [
    "create PodTemplate ppt-wl-check1-1-ps1",
    "create PodTemplate ppt-wl-check1-1-ps2",
    "create ProvisioningRequest wl-check1-1",
    "event ProvisioningRequestCreated: Created ProvisioningRequest: \"wl-check1-1\"",
];

#[test]
fn workload_reconciler_follows_kueue() {
    let mut finished = base_workload();
    if let Some(list) = finished["status"]["conditions"].as_array_mut() {
        list.push(json!({"type": "Finished", "status": "True"}));
    }
    let mut evicted = base_workload();
    evicted["status"]["conditions"] =
        json!([{"type": "Evicted", "status": "True", "reason": "Preempted"}]);
    let mut zero = base_workload();
    for i in 0..2 {
        zero["spec"]["podSets"][i]["count"] = json!(0);
        zero["status"]["admission"]["podSetAssignments"][i]["count"] = json!(0);
    }
    let mut annotated = base_workload();
    annotated["metadata"]["annotations"] = json!({"provreq.kueue.x-k8s.io/ValidUntilSeconds": "0",
        "invalid-provreq-prefix/Foo1": "Bar1"});
    let mut retried_once = base_workload();
    retried_once["status"]["admissionChecks"][0]["retryCount"] = json!(1);
    let mut admitted = base_workload();
    if let Some(list) = admitted["status"]["conditions"].as_array_mut() {
        list.push(json!({"type": "Admitted", "status": "True"}));
    }
    let mut out_of_sync = base_request(1);
    out_of_sync["spec"]["parameters"]["p1"] = json!("v0");
    let failed = with_condition(base_request(1), "Failed", "True");
    let booking_expired = with_condition(base_request(1), "BookingExpired", "True");

    let mut cases = vec![
        case(
            "unrelated workload",
            json!({"metadata": {"name": "wl", "namespace": "ns"}}),
            vec![],
        ),
        Case {
            configs: vec![],
            ..case(
                "missing config",
                base_workload(),
                vec!["checks check1=Pending:the check is not active not-provisioning=Pending:"],
            )
        },
        case("with config", base_workload(), CREATED.to_vec()),
        Case {
            requests: vec![base_request(1)],
            ..case(
                "with only zero-count PodSets",
                zero,
                vec![
                    "checks check1=Ready:the provisioning request is not needed not-provisioning=Pending:",
                    "event AdmissionCheckUpdated: Admission check check1 updated state from Pending to Ready with message: the provisioning request is not needed",
                    "delete wl-check1-1",
                ],
            )
        },
        Case {
            requests: vec![json!({"metadata": {"name": "wl-check2", "namespace": "ns",
                "ownerReferences": [{"kind": "Workload", "name": "wl"}]}})],
            ..case(
                "remove unnecessary requests",
                base_workload(),
                [&["delete wl-check2"][..], &CREATED[..]].concat(),
            )
        },
        Case {
            templates: vec![template("ppt-wl-check1-1-ps1", "wl-uid")],
            ..case(
                "one template already created",
                base_workload(),
                CREATED
                    .iter()
                    .copied()
                    .filter(|w| !w.ends_with("ps1"))
                    .collect(),
            )
        },
        Case {
            requests: vec![out_of_sync],
            ..case(
                "request out of sync",
                base_workload(),
                [&["delete wl-check1-1"][..], &CREATED[..]].concat(),
            )
        },
        Case {
            requests: vec![base_request(1)],
            ..case(
                "request removed on workload finished",
                finished,
                vec!["delete wl-check1-1"],
            )
        },
        Case {
            requests: vec![base_request(1)],
            ..case(
                "request removed on workload evicted",
                evicted,
                vec!["delete wl-check1-1"],
            )
        },
        case(
            "when retry count is preserved but provisioning request was cleaned up",
            retried_once,
            vec![
                "create PodTemplate ppt-wl-check1-2-ps1",
                "create PodTemplate ppt-wl-check1-2-ps2",
                "create ProvisioningRequest wl-check1-2",
                "event ProvisioningRequestCreated: Created ProvisioningRequest: \"wl-check1-2\"",
            ],
        ),
        Case {
            configs: vec![config(json!({"retryStrategy": {"backoffLimitCount": 2,
                "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800}}))],
            requests: vec![failed.clone()],
            ..case(
                "when request fails and is retried",
                base_workload(),
                vec![
                    "checks check1=Retry:Retrying after failure: By test not-provisioning=Pending:",
                    "event AdmissionCheckUpdated: Admission check check1 updated state from Pending to Retry with message: Retrying after failure: By test",
                ],
            )
        },
        Case {
            configs: vec![config(json!({"retryStrategy": {"backoffLimitCount": 0,
                "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800}}))],
            requests: vec![failed],
            ..case(
                "when request fails, and there is no retry",
                base_workload(),
                vec![
                    "checks check1=Rejected:By test not-provisioning=Pending:",
                    "event AdmissionCheckUpdated: Admission check check1 updated state from Pending to Rejected with message: By test",
                ],
            )
        },
        Case {
            requests: vec![with_condition(base_request(1), "Provisioned", "True")],
            ..case(
                "when request is provisioned",
                base_workload(),
                vec![
                    "checks check1=Ready:By test not-provisioning=Pending:",
                    "event AdmissionCheckUpdated: Admission check check1 updated state from Pending to Ready with message: By test",
                ],
            )
        },
        Case {
            configs: vec![config(json!({"managedResources": ["example.org/gpu"]}))],
            ..case(
                "when no request is needed",
                base_workload(),
                vec![
                    "checks check1=Ready:the provisioning request is not needed not-provisioning=Pending:",
                    "event AdmissionCheckUpdated: Admission check check1 updated state from Pending to Ready with message: the provisioning request is not needed",
                ],
            )
        },
        Case {
            configs: vec![config(json!({"managedResources": ["memory"]}))],
            ..case(
                "when request is needed for one PodSet (resource request)",
                base_workload(),
                vec![
                    "create PodTemplate ppt-wl-check1-1-ps2",
                    "create ProvisioningRequest wl-check1-1",
                    "event ProvisioningRequestCreated: Created ProvisioningRequest: \"wl-check1-1\"",
                ],
            )
        },
        Case {
            requests: vec![with_condition(base_request(1), "CapacityRevoked", "True")],
            ..case(
                "workload sets AdmissionCheck status to Rejected when it is not finished and receives the provisioning request's CapacityRevoked condition",
                admitted.clone(),
                vec![
                    "checks check1=Rejected:By test not-provisioning=Pending:",
                    "event AdmissionCheckUpdated: Admission check check1 updated state from Pending to Rejected with message: By test",
                ],
            )
        },
        Case {
            requests: vec![booking_expired.clone()],
            ..case(
                "workload does nothing when admitted and receives the provisioning request's BookingExpired condition",
                admitted,
                vec![],
            )
        },
        Case {
            requests: vec![booking_expired],
            ..case(
                "workload retries the admission check when is not admitted and receives the provisioning request's BookingExpired condition",
                base_workload(),
                vec![
                    "checks check1=Retry:Retrying after booking expired: By test not-provisioning=Pending:",
                    "event AdmissionCheckUpdated: Admission check check1 updated state from Pending to Retry with message: Retrying after booking expired: By test",
                ],
            )
        },
        Case {
            requests: vec![base_request(1)],
            templates: vec![
                template("ppt-wl-check1-1-ps1", "wl-uid"),
                template("ppt-wl-check1-1-ps2", "wl-uid"),
            ],
            ..case(
                "templates handed over to the request",
                base_workload(),
                vec!["owners ppt-wl-check1-1-ps1", "owners ppt-wl-check1-1-ps2"],
            )
        },
    ];
    // A failed request is retried with the next attempt while the check is Pending again.
    let mut pending_again = base_workload();
    pending_again["status"]["admissionChecks"][0]["retryCount"] = json!(1);
    cases.push(Case {
        configs: vec![config(json!({"retryStrategy": {"backoffLimitCount": 2,
            "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800}}))],
        requests: vec![with_condition(base_request(1), "Failed", "True")],
        ..case(
            "a failed request is retried after the eviction",
            pending_again,
            vec![
                "checks check1=Pending:Retrying after failure: By test not-provisioning=Pending:",
                "create PodTemplate ppt-wl-check1-2-ps1",
                "create PodTemplate ppt-wl-check1-2-ps2",
                "create ProvisioningRequest wl-check1-2",
                "event ProvisioningRequestCreated: Created ProvisioningRequest: \"wl-check1-2\"",
            ],
        )
    });
    for case in &cases {
        let got: Vec<String> = run(case).iter().map(summary).collect();
        assert_eq!(got, case.want, "{}", case.name);
    }
}

fn writes_of(workload: Value, configs: Vec<Value>, requests: Vec<Value>) -> Vec<Write> {
    run(&Case {
        configs,
        requests,
        ..case("", workload, vec![])
    })
}

#[test]
fn created_objects_are_kueues() {
    let mut annotated = base_workload();
    annotated["metadata"]["annotations"] = json!({"provreq.kueue.x-k8s.io/ValidUntilSeconds": "0",
        "invalid-provreq-prefix/Foo1": "Bar1"});
    let writes = writes_of(annotated, vec![config(json!({}))], vec![]);
    let created: Vec<&Value> = writes
        .iter()
        .filter_map(|w| match w {
            Write::Create(object) => Some(object),
            _ => None,
        })
        .collect();
    let [first, second, request] = created[..] else {
        panic!("three objects: {created:?}");
    };
    assert_eq!(
        first["template"]["spec"],
        json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            "nodeSelector": {"f1l1": "v1"},
            "tolerations": [{"key": "f1t1k", "value": "f1t1v", "operator": "Equal", "effect": "NoSchedule"}]})
    );
    assert_eq!(
        second["template"]["spec"]["nodeSelector"],
        json!({"f2l1": "v1"})
    );
    assert_eq!(
        first["metadata"]["labels"],
        json!({"kueue.x-k8s.io/managed": "true"})
    );
    assert_eq!(first["metadata"]["ownerReferences"][0]["uid"], "wl-uid");
    assert_eq!(
        request["spec"],
        json!({"provisioningClassName": "class1",
            "parameters": {"p1": "v1", "ValidUntilSeconds": "0"},
            "podSets": [{"podTemplateRef": {"name": "ppt-wl-check1-1-ps1"}, "count": 4},
                {"podTemplateRef": {"name": "ppt-wl-check1-1-ps2"}, "count": 3}]})
    );
    assert_eq!(
        request["metadata"]["ownerReferences"][0]["kind"],
        "Workload"
    );
}

#[test]
fn retries_back_off_and_provisioned_checks_carry_pod_set_updates() {
    let config_with_updates = config(json!({"podSetUpdates": {"nodeSelector": [
        {"key": "node-selector-key", "valueFromProvisioningClassDetail": "node-selector-value"},
        {"key": "missing", "valueFromProvisioningClassDetail": "not-there"}]}}));
    let mut provisioned = with_condition(base_request(1), "Provisioned", "True");
    provisioned["status"]["provisioningClassDetails"] = json!({"node-selector-value": "pool-a"});
    let writes = writes_of(
        base_workload(),
        vec![config_with_updates],
        vec![provisioned],
    );
    let Some(Write::WorkloadChecks(states)) = writes.first() else {
        panic!("checks written first: {writes:?}");
    };
    let annotations = json!({"autoscaling.x-k8s.io/consume-provisioning-request": "wl-check1-1",
        "autoscaling.x-k8s.io/provisioning-class-name": "class1"});
    assert_eq!(
        states[0]["podSetUpdates"],
        json!([{"name": "ps1", "annotations": annotations, "nodeSelector": {"node-selector-key": "pool-a"}},
            {"name": "ps2", "annotations": annotations, "nodeSelector": {"node-selector-key": "pool-a"}}])
    );
    // The second retry waits base × 2.
    let mut retried = base_workload();
    retried["status"]["admissionChecks"][0]["retryCount"] = json!(1);
    let failed = with_condition(base_request(2), "Failed", "True");
    let writes = writes_of(retried, vec![config(json!({}))], vec![failed]);
    let Some(Write::WorkloadChecks(states)) = writes.first() else {
        panic!("checks written first: {writes:?}");
    };
    assert_eq!(states[0]["state"], "Retry");
    assert_eq!(states[0]["requeueAfterSeconds"], 120);
}

#[test]
fn identical_pod_templates_merge_into_one_request_pod_set() {
    let mut workload = base_workload();
    workload["spec"]["podSets"] = json!([
        pod_set("ps1", 1, "cpu", "1"),
        pod_set("ps2", 2, "cpu", "1"),
        pod_set("ps3", 2, "memory", "1M")
    ]);
    workload["status"]["admission"]["podSetAssignments"] = json!([
        {"name": "ps1", "flavors": {"cpu": "flv1"}, "count": 1},
        {"name": "ps2", "flavors": {"cpu": "flv1"}, "count": 2},
        {"name": "ps3", "flavors": {"cpu": "flv2"}, "count": 2}]);
    let configs = vec![config(
        json!({"podSetMergePolicy": "IdenticalPodTemplates"}),
    )];
    let writes = writes_of(workload, configs, vec![]);
    let request = writes
        .iter()
        .find_map(|w| match w {
            Write::Create(o) if o["kind"] == "ProvisioningRequest" => Some(o),
            _ => None,
        })
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        request["spec"]["podSets"],
        json!([{"podTemplateRef": {"name": "ppt-wl-check1-1-ps1"}, "count": 3},
            {"podTemplateRef": {"name": "ppt-wl-check1-1-ps3"}, "count": 2}])
    );
}

#[test]
fn a_failed_creation_is_reported_on_its_check() {
    let workload = base_workload();
    let template = json!({"kind": "PodTemplate", "metadata": {"name": "ppt-wl-check1-1-ps1"}});
    let (states, event) = creation_failed(&workload, &template, "invalid PodTemplate error", now());
    let states = states.unwrap_or_default();
    assert_eq!(
        states[0]["message"],
        "Error creating PodTemplate \"ppt-wl-check1-1-ps1\": invalid PodTemplate error"
    );
    assert_eq!(states[0]["state"], "Pending");
    assert_eq!(states[1]["message"], "");
    assert_eq!(
        (event.kind, event.reason.as_str()),
        ("Warning", "FailedCreate")
    );
    let request = json!({"kind": "ProvisioningRequest", "metadata": {"name": "wl-check1-2"}});
    let (states, event) = creation_failed(&workload, &request, "denied", now());
    assert_eq!(
        states.unwrap_or_default()[0]["message"],
        "Error creating ProvisioningRequest \"wl-check1-2\": denied"
    );
    assert_eq!(
        event.message,
        "Error creating ProvisioningRequest \"wl-check1-2\": denied"
    );
}
