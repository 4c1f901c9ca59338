//! The legacy Endpoints controller's core (kube-controller-manager's `endpoints` controller,
//! which `kubectl describe service` and older clients read): one Endpoints object named as
//! the Service, its pods' addresses split into ready and not-ready, grouped into subsets by
//! the ports each pod resolves (upstream's `RepackSubsets`).
//!
//! Shares its pod rules with [`crate::endpointslice`]; knows nothing about watches or how the
//! writes are made.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use tessera_model::conditions::pod_is_ready;
use tessera_model::json::text;

use crate::endpointslice::{
    derived_labels, find_port, is_selected, pod_ipv4, selected_pods, should_pod_be_in_endpoints,
    should_set_hostname, target_ref,
};
use crate::plan::{Resource, Writes, merge_patch_between};

/// The Endpoints object's subsets for a Service and its namespace's pods.
pub fn subsets(service: &Value, pods: &[Value]) -> Vec<Value> {
    let publish = service
        .pointer("/spec/publishNotReadyAddresses")
        .and_then(Value::as_bool)
        == Some(true);
    let headless = text(service, "/spec/clusterIP") == "None";
    let service_ports: Vec<&Value> = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    // ports (as JSON text) → (ports, ready addresses, not-ready addresses)
    let mut grouped: BTreeMap<String, (Value, Vec<Value>, Vec<Value>)> = BTreeMap::new();
    for pod in selected_pods(service, pods) {
        if !should_pod_be_in_endpoints(pod, publish) {
            continue;
        }
        let Some(ip) = pod_ipv4(pod) else { continue };
        let mut address = json!({"ip": ip, "targetRef": target_ref(pod)});
        let node = text(pod, "/spec/nodeName");
        if !node.is_empty() {
            address["nodeName"] = json!(node);
        }
        if should_set_hostname(pod, service) {
            address["hostname"] = json!(text(pod, "/spec/hostname"));
        }
        let mut ports: Vec<Value> = service_ports
            .iter()
            .filter_map(|port| {
                let number = find_port(pod, port)?;
                let mut out =
                    json!({"port": number, "protocol": port["protocol"].as_str().unwrap_or("TCP")});
                if !text(port, "/name").is_empty() {
                    out["name"] = json!(text(port, "/name"));
                }
                if let Some(app) = port.get("appProtocol").filter(|a| a.is_string()) {
                    out["appProtocol"] = app.clone();
                }
                Some(out)
            })
            .collect();
        if ports.is_empty() && !(service_ports.is_empty() && headless) {
            continue;
        }
        ports.sort_by_key(|p| {
            (
                text(p, "/name").to_string(),
                p["port"].as_i64(),
                text(p, "/protocol").to_string(),
            )
        });
        let ports = Value::Array(ports);
        let entry = grouped
            .entry(ports.to_string())
            .or_insert_with(|| (ports, Vec::new(), Vec::new()));
        if publish || pod_is_ready(pod) {
            entry.1.push(address);
        } else {
            entry.2.push(address);
        }
    }
    grouped
        .into_values()
        .map(|(ports, mut ready, mut not_ready)| {
            let by_ip = |a: &Value| {
                (
                    text(a, "/ip").to_string(),
                    text(a, "/targetRef/uid").to_string(),
                )
            };
            ready.sort_by_key(by_ip);
            not_ready.sort_by_key(by_ip);
            let mut subset = json!({});
            if !ready.is_empty() {
                subset["addresses"] = json!(ready);
            }
            if !not_ready.is_empty() {
                subset["notReadyAddresses"] = json!(not_ready);
            }
            if ports.as_array().is_some_and(|p| !p.is_empty()) {
                subset["ports"] = ports;
            }
            subset
        })
        .collect()
}

/// The writes that bring the Service's Endpoints (`current`, when it exists) in line with
/// its pods.
pub fn plan(service: &Value, pods: &[Value], current: Option<&Value>) -> Writes {
    let mut writes = Writes::default();
    if !is_selected(service) {
        return writes;
    }
    let name = text(service, "/metadata/name");
    let desired = json!({
        "metadata": {"labels": derived_labels(service)},
        "subsets": subsets(service, pods),
    });
    match current {
        None => {
            let mut object = desired;
            object["apiVersion"] = json!("v1");
            object["kind"] = json!("Endpoints");
            object["metadata"]["name"] = json!(name);
            object["metadata"]["namespace"] = json!(text(service, "/metadata/namespace"));
            writes.create(Resource::Endpoints, [object]);
        }
        Some(current) => {
            let owned = json!({
                "metadata": {"labels": current.pointer("/metadata/labels").cloned().unwrap_or(json!({}))},
                "subsets": current.get("subsets").cloned().unwrap_or(json!([])),
            });
            let patch = merge_patch_between(&owned, &desired);
            if patch.as_object().is_some_and(|p| !p.is_empty()) {
                writes.patch(Resource::Endpoints, [(name.to_string(), patch)]);
            }
        }
    }
    writes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ip: &str, ready: bool, extra: Value) -> Value {
        let mut pod = json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "labels": {"app": "web"}},
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]},
            "status": {"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]},
        });
        if let (Some(pod), Some(extra)) = (pod.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                pod.insert(k.clone(), v.clone());
            }
        }
        pod
    }

    fn service(spec: Value) -> Value {
        let mut spec = spec;
        spec["selector"] = json!({"app": "web"});
        json!({"metadata": {"name": "web", "namespace": "ns", "uid": "svc-uid", "labels": {"team": "a"}}, "spec": spec})
    }

    #[test]
    fn subsets_split_ready_from_not_ready_and_resolve_ports() {
        let pods = vec![
            pod("b", "10.244.0.3", true, json!({})),
            pod("a", "10.244.0.2", false, json!({})),
            pod(
                "done",
                "10.244.0.4",
                true,
                json!({"status": {"phase": "Succeeded", "podIP": "10.244.0.4"}}),
            ),
            pod(
                "gone",
                "10.244.0.5",
                true,
                json!({"metadata": {"name": "gone", "namespace": "ns", "uid": "g", "labels": {"app": "web"}, "deletionTimestamp": "2026-01-01T00:00:00Z"}}),
            ),
        ];
        let svc = service(
            json!({"ports": [{"name": "web", "port": 80, "targetPort": "http", "protocol": "TCP"}]}),
        );
        let table: Vec<(Value, Value)> = vec![
            (
                svc.clone(),
                json!([{
                    "addresses": [{"ip": "10.244.0.3", "nodeName": "node-1", "targetRef": {"kind": "Pod", "namespace": "ns", "name": "b", "uid": "uid-b"}}],
                    "notReadyAddresses": [{"ip": "10.244.0.2", "nodeName": "node-1", "targetRef": {"kind": "Pod", "namespace": "ns", "name": "a", "uid": "uid-a"}}],
                    "ports": [{"name": "web", "port": 8080, "protocol": "TCP"}],
                }]),
            ),
            (
                // publishNotReadyAddresses: every address ready, terminating ones included.
                service(
                    json!({"publishNotReadyAddresses": true, "ports": [{"port": 80, "targetPort": 9090, "protocol": "TCP"}]}),
                ),
                json!([{
                    "addresses": [
                        {"ip": "10.244.0.2", "nodeName": "node-1", "targetRef": {"kind": "Pod", "namespace": "ns", "name": "a", "uid": "uid-a"}},
                        {"ip": "10.244.0.3", "nodeName": "node-1", "targetRef": {"kind": "Pod", "namespace": "ns", "name": "b", "uid": "uid-b"}},
                        {"ip": "10.244.0.5", "nodeName": "node-1", "targetRef": {"kind": "Pod", "namespace": "ns", "name": "gone", "uid": "g"}},
                    ],
                    "ports": [{"port": 9090, "protocol": "TCP"}],
                }]),
            ),
            (
                // A named port no pod has: no subsets.
                service(json!({"ports": [{"port": 80, "targetPort": "grpc", "protocol": "TCP"}]})),
                json!([]),
            ),
        ];
        for (svc, want) in table {
            assert_eq!(json!(subsets(&svc, &pods)), want, "{svc}");
        }
        let created = plan(&svc, &pods, None);
        let crate::plan::Write::Create(Resource::Endpoints, object) = &created.0[0] else {
            panic!("{created:?}");
        };
        assert_eq!(object["metadata"]["name"], json!("web"));
        assert_eq!(object["metadata"]["labels"], json!({"team": "a"}));
        assert!(
            plan(&svc, &pods, Some(object)).0.is_empty(),
            "in line: no writes"
        );
    }
}
