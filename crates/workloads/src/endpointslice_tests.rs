//! Cases after upstream's `reconciler_test.go` (TestReconcileEmpty, TestReconcile1Pod,
//! TestReconcile1EndpointSlice, TestReconcileManyPods, TestReconcileEndpointSlicesSomePreexisting,
//! TestReconcileEndpointSlicesReplaceDeprecated…) and `utils_test.go` (podToEndpoint).

use serde_json::{Value, json};

use super::*;
use crate::plan::Write;

fn pod(name: &str, ip: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "labels": {"app": "web"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]}]},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "conditions": [{"type": "Ready", "status": "True"}]},
    })
}

fn pods(count: usize) -> Vec<Value> {
    (0..count)
        .map(|i| {
            pod(
                &format!("pod{i:03}"),
                &format!("10.244.{}.{}", i / 250, i % 250 + 1),
            )
        })
        .collect()
}

fn service(spec: Value) -> Value {
    let mut spec = spec;
    if spec.get("selector").is_none() {
        spec["selector"] = json!({"app": "web"});
    }
    if spec.get("ports").is_none() {
        spec["ports"] = json!([{"name": "web", "port": 80, "targetPort": 8080, "protocol": "TCP"}]);
    }
    json!({"metadata": {"name": "web", "namespace": "ns", "uid": "svc-uid", "labels": {"team": "a"}}, "spec": spec})
}

fn zones() -> BTreeMap<String, String> {
    BTreeMap::from([("node-1".to_string(), "zone-a".to_string())])
}

/// The slices a plan creates (`generateName` becomes `<prefix><n>`) or patches applied to
/// `existing`; deletions removed.
fn applied(existing: &[Value], writes: &Writes) -> Vec<Value> {
    let mut slices: Vec<Value> = existing.to_vec();
    let mut created = 0;
    for write in &writes.0 {
        match write {
            Write::Create(Resource::EndpointSlice, slice) => {
                let mut slice = slice.clone();
                slice["metadata"]["name"] = json!(format!("web-new{created}"));
                created += 1;
                slices.push(slice);
            }
            Write::Patch(Resource::EndpointSlice, name, patch) => {
                let slice = slices
                    .iter_mut()
                    .find(|s| text(s, "/metadata/name") == name)
                    .expect("patched slice exists");
                json_patch::merge(slice, patch);
            }
            Write::Delete { name, .. } => slices.retain(|s| text(s, "/metadata/name") != name),
            other => panic!("unexpected write {other:?}"),
        }
    }
    slices
}

fn sizes(slices: &[Value]) -> Vec<usize> {
    slices
        .iter()
        .map(|s| s["endpoints"].as_array().map_or(0, Vec::len))
        .collect()
}

#[test]
fn an_empty_service_gets_one_placeholder_slice() {
    let svc = service(json!({}));
    let writes = plan(&svc, &[], &[], &zones(), MAX_ENDPOINTS_PER_SLICE);
    assert_eq!(writes.0.len(), 1);
    let Write::Create(Resource::EndpointSlice, slice) = &writes.0[0] else {
        panic!("{writes:?}");
    };
    assert_eq!(
        slice,
        &json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "generateName": "web-",
                "namespace": "ns",
                "labels": {"team": "a", SERVICE_NAME_LABEL: "web", MANAGED_BY_LABEL: CONTROLLER_NAME},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "web", "uid": "svc-uid", "controller": true, "blockOwnerDeletion": true}],
            },
            "addressType": "IPv4",
            "endpoints": [],
        })
    );
    // TestReconcile1EndpointSlice: an existing placeholder is kept as is.
    let existing = applied(&[], &writes);
    assert_eq!(
        plan(&svc, &[], &existing, &zones(), MAX_ENDPOINTS_PER_SLICE),
        Writes::default()
    );
}

#[test]
fn pods_become_endpoints_as_upstream_writes_them() {
    let terminating = {
        let mut p = pod("term", "10.244.0.9");
        p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        p
    };
    let not_ready = {
        let mut p = pod("slow", "10.244.0.8");
        p["status"]["conditions"][0]["status"] = json!("False");
        p
    };
    let succeeded = {
        let mut p = pod("done", "10.244.0.7");
        p["status"]["phase"] = json!("Succeeded");
        p
    };
    let no_ip = {
        let mut p = pod("new", "");
        p["status"] = json!({"phase": "Pending"});
        p
    };
    let other_namespace = {
        let mut p = pod("far", "10.244.0.6");
        p["metadata"]["namespace"] = json!("other");
        p
    };
    let subdomain = {
        let mut p = pod("web-0", "10.244.0.5");
        p["spec"]["hostname"] = json!("web-0");
        p["spec"]["subdomain"] = json!("web");
        p
    };
    let conditions = |ready, serving, terminating| json!({"ready": ready, "serving": serving, "terminating": terminating});
    // (pod, service spec, expected endpoint or none)
    let table: Vec<(Value, Value, Option<Value>)> = vec![
        (
            pod("a", "10.244.0.2"),
            json!({}),
            Some(json!({
                "addresses": ["10.244.0.2"],
                "conditions": conditions(true, true, false),
                "targetRef": {"kind": "Pod", "namespace": "ns", "name": "a", "uid": "uid-a"},
                "nodeName": "node-1",
                "zone": "zone-a",
            })),
        ),
        (
            terminating.clone(),
            json!({}),
            Some(json!(conditions(false, true, true))),
        ),
        (
            terminating,
            json!({"publishNotReadyAddresses": true}),
            Some(json!(conditions(true, true, true))),
        ),
        (
            not_ready.clone(),
            json!({}),
            Some(json!(conditions(false, false, false))),
        ),
        (
            not_ready,
            json!({"publishNotReadyAddresses": true}),
            Some(json!(conditions(true, false, false))),
        ),
        (succeeded, json!({}), None),
        (no_ip, json!({}), None),
        (other_namespace, json!({}), None),
        (
            subdomain.clone(),
            json!({"clusterIP": "None"}),
            Some(json!("web-0")),
        ),
    ];
    for (pod, spec, want) in table {
        let svc = service(spec.clone());
        let slices = applied(
            &[],
            &plan(&svc, std::slice::from_ref(&pod), &[], &zones(), 100),
        );
        let endpoint = slices[0]["endpoints"].get(0).cloned();
        match want {
            None => assert_eq!(endpoint, None, "{spec} {}", pod["metadata"]["name"]),
            Some(want) if want.get("addresses").is_some() => {
                assert_eq!(endpoint, Some(want), "{spec}")
            }
            Some(Value::String(hostname)) => {
                assert_eq!(
                    endpoint.map(|e| e["hostname"].clone()),
                    Some(json!(hostname))
                );
                assert_eq!(slices[0]["metadata"]["labels"][HEADLESS_LABEL], json!(""));
            }
            Some(want) => assert_eq!(
                endpoint.map(|e| e["conditions"].clone()),
                Some(want),
                "{spec}"
            ),
        }
    }
}

#[test]
fn named_ports_resolve_per_pod_into_slices_per_port_set() {
    let svc = service(
        json!({"ports": [{"name": "web", "port": 80, "targetPort": "http", "protocol": "TCP"}]}),
    );
    let mut other = pod("b", "10.244.0.3");
    other["spec"]["containers"][0]["ports"][0]["containerPort"] = json!(9090);
    let mut none = pod("c", "10.244.0.4");
    none["spec"]["containers"][0]["ports"] = json!([]);
    let slices = applied(
        &[],
        &plan(
            &svc,
            &[pod("a", "10.244.0.2"), other, none],
            &[],
            &zones(),
            100,
        ),
    );
    let mut ports: Vec<(Value, usize)> = slices
        .iter()
        .map(|s| {
            (
                s["ports"].clone(),
                s["endpoints"].as_array().map_or(0, Vec::len),
            )
        })
        .collect();
    ports.sort_by_key(|(p, _)| p.to_string());
    assert_eq!(
        ports,
        vec![
            (json!([{"name": "web", "port": 8080, "protocol": "TCP"}]), 1),
            (json!([{"name": "web", "port": 9090, "protocol": "TCP"}]), 1),
            // A pod that resolves no port still has an endpoint, in a slice without ports.
            (Value::Null, 1),
        ]
    );
}

#[test]
fn slices_hold_at_most_max_and_change_in_place() {
    let svc = service(json!({}));
    // TestReconcileManyPods: 250 pods → 100, 100, 50.
    let many = pods(250);
    let slices = applied(&[], &plan(&svc, &many, &[], &zones(), 100));
    assert_eq!(sizes(&slices), vec![100, 100, 50]);
    assert_eq!(
        plan(&svc, &many, &slices, &zones(), 100),
        Writes::default(),
        "in line"
    );

    // Scaling up fills the slice with room; no new slice.
    let more = pods(260);
    let writes = plan(&svc, &more, &slices, &zones(), 100);
    assert_eq!(writes.0.len(), 1, "{writes:?}");
    let grown = applied(&slices, &writes);
    assert_eq!(sizes(&grown), vec![100, 100, 60]);

    // Scaling down shrinks slices in place; an emptied slice is deleted.
    let fewer: Vec<Value> = more.iter().take(150).cloned().collect();
    let shrunk = applied(&grown, &plan(&svc, &fewer, &grown, &zones(), 100));
    assert_eq!(sizes(&shrunk), vec![100, 50]);

    // Every pod replaced: the old slice is reused for the new endpoints (finalize).
    let small = pods(2);
    let before = applied(&[], &plan(&svc, &small, &[], &zones(), 100));
    let replaced = vec![pod("x", "10.244.9.1"), pod("y", "10.244.9.2")];
    let writes = plan(&svc, &replaced, &before, &zones(), 100);
    assert!(
        matches!(&writes.0[..], [Write::Patch(Resource::EndpointSlice, ..)]),
        "{writes:?}"
    );
    let after = applied(&before, &writes);
    assert_eq!(after[0]["metadata"]["name"], before[0]["metadata"]["name"]);
    assert_eq!(after[0]["endpoints"][1]["addresses"], json!(["10.244.9.2"]));

    // All pods gone: the slice becomes the placeholder.
    let writes = plan(&svc, &[], &after, &zones(), 100);
    let emptied = applied(&after, &writes);
    assert_eq!(sizes(&emptied), vec![0]);
    assert_eq!(emptied[0].get("ports"), None);
}

#[test]
fn only_selected_services_and_their_own_slices_count() {
    let mut selectorless = service(json!({}));
    selectorless["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("selector");
    assert_eq!(
        plan(&selectorless, &pods(1), &[], &zones(), 100),
        Writes::default()
    );
    let external = service(json!({"type": "ExternalName", "externalName": "example.com"}));
    assert_eq!(
        plan(&external, &pods(1), &[], &zones(), 100),
        Writes::default()
    );
    // A user's slice for the same Service is left alone.
    let users = json!({
        "metadata": {"name": "web-custom", "namespace": "ns", "labels": {SERVICE_NAME_LABEL: "web", MANAGED_BY_LABEL: "someone-else"}},
        "addressType": "IPv4", "endpoints": [],
    });
    let writes = plan(&service(json!({})), &pods(1), &[users], &zones(), 100);
    assert!(matches!(&writes.0[..], [Write::Create(..)]), "{writes:?}");
}
