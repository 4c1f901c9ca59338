//! The EndpointSlice controller's core, after upstream's `pkg/controller/endpointslice` and
//! `staging/src/k8s.io/endpointslice`: for a Service with a selector, the endpoints its pods
//! make (addresses, ready/serving/terminating, node, zone, hostname, target reference), grouped
//! by the ports each pod resolves (named target ports per pod), packed into slices of at most
//! [`MAX_ENDPOINTS_PER_SLICE`], and diffed against the slices the controller wrote before:
//! endpoints stay in their slice, new ones fill existing slices before new slices are made,
//! emptied slices go, and a Service with no endpoints keeps one placeholder slice.
//!
//! Also the pod rules the legacy Endpoints controller shares (`crate::endpoints`). Knows
//! nothing about watches or how the writes are made; time plays no part.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use tessera_model::conditions::pod_is_ready;
use tessera_model::json::text;
use tessera_model::selector;

use crate::plan::{Resource, Writes, merge_patch_between};

/// Upstream's default `--max-endpoints-per-slice`.
pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;

/// The label naming a slice's Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label naming the controller that manages a slice.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// This controller's value of [`MANAGED_BY_LABEL`].
pub const CONTROLLER_NAME: &str = "endpointslice-controller.k8s.io";
/// The label marking a headless Service's slices and Endpoints.
pub const HEADLESS_LABEL: &str = "service.kubernetes.io/headless";
/// The node label naming its zone.
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// Whether a Service gets endpoints from the controllers: it has a selector and is not
/// ExternalName.
pub fn is_selected(service: &Value) -> bool {
    text(service, "/spec/type") != "ExternalName"
        && service
            .pointer("/spec/selector")
            .and_then(Value::as_object)
            .is_some()
}

/// The pods of the Service's namespace its selector matches.
pub fn selected_pods<'a>(service: &Value, pods: &'a [Value]) -> Vec<&'a Value> {
    let namespace = text(service, "/metadata/namespace");
    let wanted: BTreeMap<String, String> = service
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .map(|s| {
            s.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    pods.iter()
        .filter(|p| text(p, "/metadata/namespace") == namespace)
        .filter(|p| {
            let labels = selector::labels(p);
            wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
        })
        .collect()
}

/// upstream's `ShouldPodBeInEndpoints`: not terminal, has an IP, and not terminating unless
/// terminating pods are included.
pub fn should_pod_be_in_endpoints(pod: &Value, include_terminating: bool) -> bool {
    let phase = text(pod, "/status/phase");
    let terminal = phase == "Failed" || phase == "Succeeded";
    let has_ip = !text(pod, "/status/podIP").is_empty()
        || pod
            .pointer("/status/podIPs")
            .and_then(Value::as_array)
            .is_some_and(|ips| !ips.is_empty());
    let terminating = pod.pointer("/metadata/deletionTimestamp").is_some();
    !terminal && has_ip && (include_terminating || !terminating)
}

/// The pod's IPv4 address (from `podIPs`, else `podIP`).
pub fn pod_ipv4(pod: &Value) -> Option<String> {
    let listed = pod
        .pointer("/status/podIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|ip| text(ip, "/ip"));
    std::iter::once(text(pod, "/status/podIP"))
        .chain(listed)
        .find(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok())
        .map(str::to_string)
}

/// upstream's `FindPort`: the pod's port for a Service port — a numeric target port as is,
/// a named one from the containers' (and restartable init containers') ports of that name
/// and protocol.
pub fn find_port(pod: &Value, service_port: &Value) -> Option<i64> {
    let target = service_port.get("targetPort").unwrap_or(&Value::Null);
    if let Some(number) = target.as_i64() {
        return Some(number);
    }
    let Some(name) = target.as_str() else {
        return service_port["port"].as_i64();
    };
    if let Ok(number) = name.parse::<i64>() {
        return Some(number);
    }
    let protocol = service_port["protocol"].as_str().unwrap_or("TCP");
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    let sidecars = pod
        .pointer("/spec/initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| text(c, "/restartPolicy") == "Always");
    containers
        .chain(sidecars)
        .flat_map(|c| c["ports"].as_array().into_iter().flatten())
        .find(|p| text(p, "/name") == name && p["protocol"].as_str().unwrap_or("TCP") == protocol)
        .and_then(|p| p["containerPort"].as_i64())
}

/// upstream's `ShouldSetHostname`: the pod names this Service as its subdomain.
pub fn should_set_hostname(pod: &Value, service: &Value) -> bool {
    !text(pod, "/spec/hostname").is_empty()
        && text(pod, "/spec/subdomain") == text(service, "/metadata/name")
        && text(pod, "/metadata/namespace") == text(service, "/metadata/namespace")
}

/// The Service's labels for what the controllers write for it: its own, less the reserved
/// ones, with the headless label when it is headless.
pub fn derived_labels(service: &Value) -> Map<String, Value> {
    let mut labels = service
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    labels.remove(HEADLESS_LABEL);
    if text(service, "/spec/clusterIP") == "None" {
        labels.insert(HEADLESS_LABEL.into(), json!(""));
    }
    labels
}

/// The target reference of a pod.
pub fn target_ref(pod: &Value) -> Value {
    json!({
        "kind": "Pod",
        "namespace": text(pod, "/metadata/namespace"),
        "name": text(pod, "/metadata/name"),
        "uid": text(pod, "/metadata/uid"),
    })
}

/// upstream's `podToEndpoint` for the IPv4 address type.
fn endpoint(pod: &Value, service: &Value, zones: &BTreeMap<String, String>) -> Option<Value> {
    let address = pod_ipv4(pod)?;
    let serving = pod_is_ready(pod);
    let terminating = pod.pointer("/metadata/deletionTimestamp").is_some();
    let publish = service
        .pointer("/spec/publishNotReadyAddresses")
        .and_then(Value::as_bool)
        == Some(true);
    let ready = publish || (serving && !terminating);
    let mut endpoint = json!({
        "addresses": [address],
        "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
        "targetRef": target_ref(pod),
    });
    let node = text(pod, "/spec/nodeName");
    if !node.is_empty() {
        endpoint["nodeName"] = json!(node);
        if let Some(zone) = zones.get(node) {
            endpoint["zone"] = json!(zone);
        }
    }
    if should_set_hostname(pod, service) {
        endpoint["hostname"] = json!(text(pod, "/spec/hostname"));
    }
    Some(endpoint)
}

/// upstream's `getEndpointPorts`: each Service port the pod resolves.
fn endpoint_ports(service: &Value, pod: &Value) -> Vec<Value> {
    service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|port| {
            let number = find_port(pod, port)?;
            let mut out = json!({
                "name": text(port, "/name"),
                "port": number,
                "protocol": port["protocol"].as_str().unwrap_or("TCP"),
            });
            if let Some(app) = port.get("appProtocol").filter(|a| a.is_string()) {
                out["appProtocol"] = app.clone();
            }
            Some(out)
        })
        .collect()
}

/// The zone of each node that has one.
pub fn node_zones(nodes: &[Value]) -> BTreeMap<String, String> {
    nodes
        .iter()
        .filter_map(|node| {
            let zone = node
                .pointer("/metadata/labels")?
                .get(ZONE_LABEL)?
                .as_str()?;
            Some((text(node, "/metadata/name").to_string(), zone.to_string()))
        })
        .collect()
}

/// The endpoints the Service's pods make, grouped by the ports they resolve (`null` for a
/// Service without ports), each group sorted by pod name.
fn desired(
    service: &Value,
    pods: &[Value],
    zones: &BTreeMap<String, String>,
) -> BTreeMap<String, (Value, Vec<Value>)> {
    let mut groups: BTreeMap<String, (Value, Vec<Value>)> = BTreeMap::new();
    let mut selected = selected_pods(service, pods);
    selected.sort_by_key(|p| text(p, "/metadata/name"));
    for pod in selected {
        if !should_pod_be_in_endpoints(pod, true) {
            continue;
        }
        let Some(endpoint) = endpoint(pod, service, zones) else {
            continue;
        };
        let ports = endpoint_ports(service, pod);
        let ports = if ports.is_empty() {
            Value::Null
        } else {
            Value::Array(ports)
        };
        groups
            .entry(ports.to_string())
            .or_insert_with(|| (ports, Vec::new()))
            .1
            .push(endpoint);
    }
    groups
}

/// The key an endpoint keeps its slice by: its pod.
fn endpoint_key(endpoint: &Value) -> String {
    format!(
        "{}/{}",
        text(endpoint, "/targetRef/namespace"),
        text(endpoint, "/targetRef/name")
    )
}

/// The slice's metadata the controller owns: labels and the owner reference.
fn slice_metadata(service: &Value) -> Value {
    let mut labels = derived_labels(service);
    labels.insert(
        SERVICE_NAME_LABEL.into(),
        json!(text(service, "/metadata/name")),
    );
    labels.insert(MANAGED_BY_LABEL.into(), json!(CONTROLLER_NAME));
    json!({
        "labels": labels,
        "ownerReferences": [{
            "apiVersion": "v1",
            "kind": "Service",
            "name": text(service, "/metadata/name"),
            "uid": text(service, "/metadata/uid"),
            "controller": true,
            "blockOwnerDeletion": true,
        }],
    })
}

fn new_slice(service: &Value, ports: &Value, endpoints: Vec<Value>) -> Value {
    let mut metadata = slice_metadata(service);
    metadata["generateName"] = json!(format!("{}-", text(service, "/metadata/name")));
    metadata["namespace"] = json!(text(service, "/metadata/namespace"));
    let mut slice = json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": metadata,
        "addressType": "IPv4",
        "endpoints": endpoints,
    });
    if !ports.is_null() {
        slice["ports"] = ports.clone();
    }
    slice
}

/// The controller-owned parts of a slice, for comparing and patching.
fn owned_parts(slice: &Value) -> Value {
    json!({
        "metadata": {
            "labels": slice.pointer("/metadata/labels").cloned().unwrap_or(json!({})),
            "ownerReferences": slice.pointer("/metadata/ownerReferences").cloned().unwrap_or(json!([])),
        },
        "endpoints": slice.get("endpoints").cloned().unwrap_or(json!([])),
        "ports": slice.get("ports").cloned().unwrap_or(Value::Null),
    })
}

/// Whether a slice is this controller's for the Service.
pub fn is_managed_slice(slice: &Value, service: &Value) -> bool {
    let labels = slice.pointer("/metadata/labels");
    let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
    text(slice, "/metadata/namespace") == text(service, "/metadata/namespace")
        && label(SERVICE_NAME_LABEL) == Some(text(service, "/metadata/name"))
        && label(MANAGED_BY_LABEL) == Some(CONTROLLER_NAME)
}

/// An existing slice being reconciled.
struct Existing<'a> {
    slice: &'a Value,
    endpoints: Vec<Value>,
}

/// The writes that bring a Service's slices in line with its pods. `slices` are the
/// namespace's EndpointSlices (only those this controller manages for the Service count);
/// `zones` maps node names to zones; `max` is the most endpoints a slice holds.
pub fn plan(
    service: &Value,
    pods: &[Value],
    slices: &[Value],
    zones: &BTreeMap<String, String>,
    max: usize,
) -> Writes {
    let mut writes = Writes::default();
    if !is_selected(service) {
        return writes;
    }
    let max = max.max(1);
    let mut existing: Vec<&Value> = slices
        .iter()
        .filter(|s| is_managed_slice(s, service))
        .collect();
    existing.sort_by_key(|s| text(s, "/metadata/name"));
    let metadata = slice_metadata(service);
    let mut keep: Vec<(&Value, Value)> = Vec::new();
    let mut create: Vec<Value> = Vec::new();
    let desired = desired(service, pods, zones);
    let mut claimed = vec![false; existing.len()];
    for (ports, endpoints) in desired.into_values() {
        let mut wanted: BTreeMap<String, Value> = endpoints
            .into_iter()
            .map(|e| (endpoint_key(&e), e))
            .collect();
        // Endpoints stay in the slice they are in.
        let mut group: Vec<Existing> = Vec::new();
        for (index, slice) in existing.iter().enumerate() {
            let same_ports = slice.get("ports").unwrap_or(&Value::Null) == &ports
                || (ports.is_null() && slice["ports"].as_array().is_some_and(|p| p.is_empty()));
            if claimed[index] || text(slice, "/addressType") != "IPv4" || !same_ports {
                continue;
            }
            claimed[index] = true;
            let endpoints = slice["endpoints"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| wanted.remove(&endpoint_key(e)))
                .collect();
            group.push(Existing { slice, endpoints });
        }
        // New endpoints fill the slices that change anyway, then the others, then new ones.
        let mut fresh: Vec<Value> = wanted.into_values().collect();
        fresh.reverse();
        let changes = |e: &Existing| e.slice["endpoints"].as_array() != Some(&e.endpoints);
        let mut order: Vec<usize> = (0..group.len()).collect();
        order.sort_by_key(|i| !changes(&group[*i]));
        for index in order {
            let existing = &mut group[index];
            while existing.endpoints.len() < max && !existing.endpoints.is_empty() {
                let Some(endpoint) = fresh.pop() else { break };
                existing.endpoints.push(endpoint);
            }
        }
        for existing in group {
            if existing.endpoints.is_empty() {
                continue;
            }
            let mut next = existing.slice.clone();
            next["metadata"]["labels"] = metadata["labels"].clone();
            next["metadata"]["ownerReferences"] = metadata["ownerReferences"].clone();
            next["endpoints"] = Value::Array(existing.endpoints);
            keep.push((existing.slice, next));
        }
        fresh.reverse();
        for chunk in fresh.chunks(max) {
            create.push(new_slice(service, &ports, chunk.to_vec()));
        }
    }
    if keep.is_empty() && create.is_empty() {
        // No endpoints: one placeholder slice.
        create.push(new_slice(service, &Value::Null, Vec::new()));
    }
    let kept: Vec<&str> = keep
        .iter()
        .map(|(s, _)| text(s, "/metadata/name"))
        .collect();
    let mut gone: Vec<&Value> = existing
        .iter()
        .copied()
        .filter(|s| !kept.contains(&text(s, "/metadata/name")))
        .collect();
    // A placeholder-shaped slice is the first to be taken over.
    gone.sort_by_key(|s| s["endpoints"].as_array().is_none_or(Vec::is_empty));
    // upstream's `finalize`: a slice that would be deleted takes the place of one to create.
    while let Some(old) = gone.last().copied() {
        let Some(new) = create.pop() else { break };
        gone.pop();
        let mut next = old.clone();
        next["metadata"]["labels"] = new["metadata"]["labels"].clone();
        next["metadata"]["ownerReferences"] = new["metadata"]["ownerReferences"].clone();
        next["endpoints"] = new["endpoints"].clone();
        next["ports"] = new.get("ports").cloned().unwrap_or(Value::Null);
        keep.push((old, next));
    }
    let gone: Vec<String> = gone
        .iter()
        .map(|s| text(s, "/metadata/name").to_string())
        .collect();
    for (before, after) in &keep {
        let patch = merge_patch_between(&owned_parts(before), &owned_parts(after));
        if patch.as_object().is_some_and(|p| !p.is_empty()) {
            writes.patch(
                Resource::EndpointSlice,
                [(text(before, "/metadata/name").to_string(), patch)],
            );
        }
    }
    writes.create(Resource::EndpointSlice, create);
    writes.delete(Resource::EndpointSlice, &gone);
    writes
}

#[cfg(test)]
#[path = "endpointslice_tests.rs"]
mod tests;
