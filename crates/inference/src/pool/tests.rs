use serde_json::{Value, json};

use super::*;

fn pool(spec: Value) -> Value {
    json!({"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
           "metadata": {"name": "vllm-llama3-8b", "namespace": "serve", "generation": 2},
           "spec": spec})
}

fn upstream_example() -> Value {
    // The quickstart's pool, as `config/manifests/inferencepool-resources.yaml` writes it.
    pool(json!({"targetPorts": [{"number": 8000}],
                "selector": {"matchLabels": {"app": "vllm-llama3-8b-instruct"}},
                "endpointPickerRef": {"name": "vllm-llama3-8b-instruct-epp", "port": {"number": 9002}}}))
}

#[test]
fn reads_upstreams_example_with_its_defaults() {
    let spec = PoolSpec::from_object(&upstream_example()).expect("valid");
    assert_eq!(spec.target_ports, [8000]);
    assert_eq!(spec.selector["app"], "vllm-llama3-8b-instruct");
    assert_eq!(
        spec.picker,
        Some(PickerRef {
            group: String::new(),
            kind: "Service".into(),
            name: "vllm-llama3-8b-instruct-epp".into(),
            port: Some(9002),
            failure_mode: FailureMode::FailClose,
        })
    );
    let without_picker = pool(json!({"targetPorts": [{"number": 8000}],
                                     "selector": {"matchLabels": {"app": "x"}}}));
    assert_eq!(
        PoolSpec::from_object(&without_picker)
            .expect("valid")
            .picker,
        None
    );
}

#[test]
fn bad_specs_name_their_field() {
    let selector = json!({"matchLabels": {"app": "x"}});
    let cases = [
        (
            json!({"targetPorts": [{"number": 8000}]}),
            "spec.selector.matchLabels",
        ),
        (
            json!({"targetPorts": [{"number": 8000}], "selector": {"matchLabels": {}}}),
            "spec.selector.matchLabels",
        ),
        (
            json!({"targetPorts": [{"number": 8000}], "selector": {"matchLabels": {"app": 1}}}),
            "spec.selector.matchLabels.app",
        ),
        (json!({"selector": selector}), "spec.targetPorts"),
        (
            json!({"selector": selector, "targetPorts": [{"number": 0}]}),
            "spec.targetPorts[0].number",
        ),
        (
            json!({"selector": selector, "targetPorts": [{"number": 8000}, {"number": 70000}]}),
            "spec.targetPorts[1].number",
        ),
        (
            json!({"selector": selector, "targetPorts": [{"number": 8000}, {"number": 8000}]}),
            "spec.targetPorts",
        ),
        (
            json!({"selector": selector, "targetPorts": [{"number": 8000}], "endpointPickerRef": {"port": {"number": 9002}}}),
            "spec.endpointPickerRef.name",
        ),
        (
            json!({"selector": selector, "targetPorts": [{"number": 8000}], "endpointPickerRef": {"name": "epp"}}),
            "spec.endpointPickerRef",
        ),
        (
            json!({"selector": selector, "targetPorts": [{"number": 8000}], "endpointPickerRef": {"name": "epp", "port": {"number": 9002}, "failureMode": "Maybe"}}),
            "spec.endpointPickerRef.failureMode",
        ),
    ];
    for (spec, field) in cases {
        let error = PoolSpec::from_object(&pool(spec.clone())).expect_err(&spec.to_string());
        assert_eq!(error.field, field, "{spec}: {error}");
    }
    let duplicate = PoolSpec::from_object(&pool(
        json!({"selector": selector, "targetPorts": [{"number": 8000}, {"number": 8000}]}),
    ))
    .expect_err("duplicate");
    assert_eq!(
        duplicate.reason, "port number must be unique",
        "upstream's CEL message"
    );
    let other_kind = json!({"selector": selector, "targetPorts": [{"number": 8000}],
        "endpointPickerRef": {"name": "epp", "kind": "Backend", "group": "x.io"}});
    assert!(
        PoolSpec::from_object(&pool(other_kind)).is_ok(),
        "port is optional for other kinds"
    );
}

fn pod(name: &str, namespace: &str, app: &str, phase: &str, ready: bool, ip: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
           "status": {"phase": phase, "podIP": ip,
                      "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
}

#[test]
fn members_are_the_selected_running_ready_pods_of_the_namespace() {
    let spec = PoolSpec::from_object(&upstream_example()).expect("valid");
    let app = "vllm-llama3-8b-instruct";
    let mut terminating = pod("d", "serve", app, "Running", true, "10.0.0.4");
    terminating["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let pods = [
        pod("b", "serve", app, "Running", true, "10.0.0.2"),
        pod("a", "serve", app, "Running", true, "10.0.0.1"),
        pod("c", "serve", app, "Running", false, "10.0.0.3"),
        terminating,
        pod("e", "serve", app, "Pending", false, ""),
        pod("f", "other", app, "Running", true, "10.0.0.6"),
        pod("g", "serve", "web", "Running", true, "10.0.0.7"),
    ];
    let found: Vec<(String, String)> = members(&spec, "serve", &pods)
        .into_iter()
        .map(|m| (m.name.to_string(), m.address.to_string()))
        .collect();
    assert_eq!(
        found,
        [
            ("a".to_string(), "10.0.0.1".to_string()),
            ("b".to_string(), "10.0.0.2".to_string())
        ]
    );
}

fn route(name: &str, backend: Value, parents: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": "serve"},
           "spec": {"parentRefs": [{"name": "inference-gateway"}],
                    "rules": [{"backendRefs": [backend]}]},
           "status": {"parents": parents}})
}

fn parent(gateway: &str, accepted: bool, controller: &str) -> Value {
    json!({"parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway},
           "controllerName": controller,
           "conditions": [{"type": "Accepted", "status": if accepted { "True" } else { "False" },
                           "reason": if accepted { "Accepted" } else { "NotAllowedByListeners" }}]})
}

fn to_pool() -> Value {
    json!({"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "vllm-llama3-8b"})
}

#[test]
fn parent_entries_follow_the_routes_status_and_resolve_the_picker_service() {
    let pool_object = upstream_example();
    let spec = PoolSpec::from_object(&pool_object).expect("valid");
    let routes = [
        route(
            "llm",
            to_pool(),
            json!([
                parent("inference-gateway", true, CONTROLLER_NAME),
                parent("elsewhere", true, "example.net/other")
            ]),
        ),
        route(
            "rejected",
            to_pool(),
            json!([parent("internal", false, CONTROLLER_NAME)]),
        ),
        route(
            "web",
            json!({"name": "web", "port": 80}),
            json!([parent("web-gateway", true, CONTROLLER_NAME)]),
        ),
    ];
    let epp = json!({"metadata": {"name": "vllm-llama3-8b-instruct-epp"},
                     "spec": {"ports": [{"port": 9002}]}});
    let entries = parent_entries(&pool_object, &spec, &routes, std::slice::from_ref(&epp));
    type Summary<'a> = Vec<(String, Vec<(&'a str, bool, &'a str)>)>;
    let summary: Summary = entries
        .iter()
        .map(|e| {
            (
                e.gateway.clone(),
                e.conditions
                    .iter()
                    .map(|c| (c.kind, c.status, c.reason))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "inference-gateway".to_string(),
                vec![
                    ("Accepted", true, "Accepted"),
                    ("ResolvedRefs", true, "ResolvedRefs")
                ]
            ),
            (
                "internal".to_string(),
                vec![
                    ("Accepted", false, "HTTPRouteNotAccepted"),
                    ("ResolvedRefs", true, "ResolvedRefs")
                ]
            ),
        ],
        "another controller's parent and a route to a Service give no entry"
    );

    let missing = parent_entries(&pool_object, &spec, &routes[..1], &[]);
    let resolved = &missing[0].conditions[1];
    assert_eq!(
        (resolved.status, resolved.reason),
        (false, "InvalidExtensionRef")
    );
    assert!(
        resolved
            .message
            .contains("\"vllm-llama3-8b-instruct-epp\" not found")
    );
    let wrong_port = json!({"metadata": {"name": "vllm-llama3-8b-instruct-epp"},
                            "spec": {"ports": [{"port": 9003}]}});
    let entries = parent_entries(&pool_object, &spec, &routes[..1], &[wrong_port]);
    assert!(
        entries[0].conditions[1]
            .message
            .contains("has no port 9002")
    );
}

#[test]
fn a_route_in_another_namespace_must_name_the_pools_namespace() {
    let pool_object = upstream_example();
    let spec = PoolSpec::from_object(&pool_object).expect("valid");
    let mut elsewhere = route(
        "llm",
        to_pool(),
        json!([parent("gw", true, CONTROLLER_NAME)]),
    );
    elsewhere["metadata"]["namespace"] = json!("apps");
    assert!(parent_entries(&pool_object, &spec, std::slice::from_ref(&elsewhere), &[]).is_empty());
    let mut backend = to_pool();
    backend["namespace"] = json!("serve");
    let mut across = route("llm", backend, json!([parent("gw", true, CONTROLLER_NAME)]));
    across["metadata"]["namespace"] = json!("apps");
    let entries = parent_entries(&pool_object, &spec, &[across], &[]);
    assert_eq!(entries.len(), 1);
    assert_eq!(
        entries[0].gateway_namespace, "apps",
        "the parentRef's namespace defaults to the route's"
    );
}

#[test]
fn the_definition_is_upstreams_shape() {
    let crd = definition();
    assert_eq!(
        crd["metadata"]["name"],
        "inferencepools.inference.networking.k8s.io"
    );
    assert_eq!(crd["spec"]["names"]["shortNames"], json!(["infpool"]));
    assert_eq!(crd["spec"]["versions"][0]["name"], "v1");
    assert_eq!(
        crd["spec"]["versions"][0]["subresources"],
        json!({"status": {}})
    );
    assert!(
        crd["metadata"]["annotations"][tessera_model::kueue::crd::BUNDLE_HASH_ANNOTATION]
            .is_string()
    );
}

#[test]
fn status_keeps_transition_times_and_other_controllers_entries() {
    let entry = |accepted: bool| ParentEntry {
        gateway_namespace: "serve".into(),
        gateway: "inference-gateway".into(),
        conditions: vec![
            Condition {
                kind: "Accepted",
                status: accepted,
                reason: if accepted {
                    "Accepted"
                } else {
                    "HTTPRouteNotAccepted"
                },
                message: "m".into(),
            },
            Condition {
                kind: "ResolvedRefs",
                status: true,
                reason: "ResolvedRefs",
                message: "r".into(),
            },
        ],
    };
    let mut object = upstream_example();
    let foreign = json!({"parentRef": {"name": "other"}, "controllerName": "example.net/gw",
                         "conditions": []});
    object["status"] = json!({"parents": [foreign.clone()]});
    let first = status(&object, &[entry(true)], "2026-12-03T10:00:00Z").expect("changes");
    assert_eq!(
        first["parents"][0], foreign,
        "another controller's entry stays"
    );
    let ours = &first["parents"][1];
    assert_eq!(ours["controllerName"], CONTROLLER_NAME);
    assert_eq!(ours["parentRef"]["namespace"], "serve");
    assert_eq!(ours["conditions"][0]["observedGeneration"], 2);
    assert_eq!(
        ours["conditions"][0]["lastTransitionTime"],
        "2026-12-03T10:00:00Z"
    );

    object["status"] = first.clone();
    assert_eq!(
        status(&object, &[entry(true)], "2026-12-03T11:00:00Z"),
        None,
        "no change, no write"
    );

    let flipped = status(&object, &[entry(false)], "2026-12-03T12:00:00Z").expect("changes");
    let conditions = &flipped["parents"][1]["conditions"];
    assert_eq!(
        conditions[0]["lastTransitionTime"], "2026-12-03T12:00:00Z",
        "Accepted flipped"
    );
    assert_eq!(
        conditions[1]["lastTransitionTime"], "2026-12-03T10:00:00Z",
        "ResolvedRefs did not"
    );

    object["status"] = flipped;
    let gone = status(&object, &[], "2026-12-03T13:00:00Z").expect("changes");
    assert_eq!(
        gone["parents"],
        json!([foreign]),
        "an entry no route gives any more is removed"
    );
    let fresh = upstream_example();
    assert_eq!(
        status(&fresh, &[], "2026-12-03T13:00:00Z"),
        None,
        "nothing to write on a new pool"
    );
}
