//! The InferencePool API (`inference.networking.k8s.io/v1`): its CustomResourceDefinition,
//! its spec read and checked, the pods it selects, and the per-parent status a Gateway
//! controller writes.
//!
//! A pool selects model-server pods of its own namespace by labels (as a Service selector
//! would) and names the ports they serve on; HTTPRoutes send traffic to it with a backendRef
//! of kind `InferencePool`. Its status has one entry per parent Gateway of such routes:
//! `Accepted` (reason `Accepted`, or `HTTPRouteNotAccepted` when the route itself was turned
//! down by that parent) and `ResolvedRefs` (`ResolvedRefs`, or `InvalidExtensionRef` when
//! `endpointPickerRef` names something that is not there or not a Service). Tessera's Gateway
//! carries the endpoint picker itself, so a pool without `endpointPickerRef` is accepted,
//! and says so in its condition's message.
//!
//! Knows nothing of storage or of how the statuses are written; objects come in as JSON.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use tessera_model::{conditions, selector};

/// The API group.
pub const GROUP: &str = "inference.networking.k8s.io";
/// The served and stored version.
pub const VERSION: &str = "v1";
pub const KIND: &str = "InferencePool";
pub const PLURAL: &str = "inferencepools";

/// What the parent status entries carry as `controllerName`.
pub const CONTROLLER_NAME: &str = "tessera.dev/gateway-controller";

fn schema() -> Value {
    let name = json!({"type": "string", "minLength": 1, "maxLength": 253});
    let port = json!({"type": "object", "required": ["number"],
        "properties": {"number": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 65535}}});
    let condition = json!({"type": "object", "required": ["lastTransitionTime", "message", "reason", "status", "type"],
        "properties": {
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "message": {"type": "string", "maxLength": 32768},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "reason": {"type": "string", "maxLength": 1024, "minLength": 1},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "type": {"type": "string", "maxLength": 316}}});
    json!({
        "description": "InferencePool is the Schema for the InferencePools API.",
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "required": ["selector", "targetPorts"],
                "properties": {
                    "selector": {"type": "object", "required": ["matchLabels"], "properties": {
                        "matchLabels": {"type": "object", "minProperties": 1, "maxProperties": 64,
                            "additionalProperties": {"type": "string", "maxLength": 63}}}},
                    "targetPorts": {"type": "array", "minItems": 1, "maxItems": 8,
                        "x-kubernetes-list-type": "atomic", "items": port.clone(),
                        "x-kubernetes-validations": [{
                            "message": "port number must be unique",
                            "rule": "self.all(p1, self.exists_one(p2, p1.number==p2.number))"}]},
                    "appProtocol": {"type": "string", "default": "http",
                        "enum": ["http", "kubernetes.io/h2c"]},
                    "endpointPickerRef": {"type": "object", "required": ["name"],
                        "properties": {
                            "group": {"type": "string", "default": "", "maxLength": 253},
                            "kind": {"type": "string", "default": "Service", "minLength": 1, "maxLength": 63},
                            "name": name,
                            "port": port,
                            "failureMode": {"type": "string", "default": "FailClose",
                                "enum": ["FailOpen", "FailClose"]}},
                        "x-kubernetes-validations": [{
                            "message": "port is required when kind is 'Service' or unspecified (defaults to 'Service')",
                            "rule": "self.kind != 'Service' || has(self.port)"}]}
                }
            },
            "status": {"type": "object", "properties": {
                "parents": {"type": "array", "maxItems": 32, "x-kubernetes-list-type": "atomic",
                    "items": {"type": "object", "required": ["parentRef"], "properties": {
                        "conditions": {"type": "array", "maxItems": 8, "items": condition,
                            "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
                        "parentRef": {"type": "object", "required": ["name"], "properties": {
                            "group": {"type": "string", "default": "gateway.networking.k8s.io"},
                            "kind": {"type": "string", "default": "Gateway"},
                            "name": {"type": "string"},
                            "namespace": {"type": "string"}}},
                        "controllerName": {"type": "string"}}}}}}
        }
    })
}

/// The CustomResourceDefinition, as upstream names and shapes it (short name `infpool`, the
/// status subresource, the same validation rules), with Tessera's bundle hash.
pub fn definition() -> Value {
    let spec = json!({
        "group": GROUP,
        "names": {"kind": KIND, "listKind": format!("{KIND}List"), "plural": PLURAL,
                  "singular": "inferencepool", "shortNames": ["infpool"]},
        "scope": "Namespaced",
        "versions": [{
            "name": VERSION,
            "served": true,
            "storage": true,
            "schema": {"openAPIV3Schema": schema()},
            "subresources": {"status": {}}
        }]
    });
    tessera_model::kueue::crd::bundled_definition(
        &format!("{PLURAL}.{GROUP}"),
        spec,
        &[(
            "api-approved.kubernetes.io",
            "https://github.com/kubernetes-sigs/gateway-api-inference-extension/pull/1173",
        )],
    )
}

/// What happens to requests when the endpoint picker does not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureMode {
    /// Forward to an endpoint of the gateway's choosing.
    FailOpen,
    /// Drop the request.
    FailClose,
}

/// The referenced endpoint picker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PickerRef {
    pub group: String,
    pub kind: String,
    pub name: String,
    pub port: Option<u16>,
    pub failure_mode: FailureMode,
}

/// A pool's spec, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    pub selector: BTreeMap<String, String>,
    pub target_ports: Vec<u16>,
    pub picker: Option<PickerRef>,
}

/// A spec field the reader refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct PoolError {
    pub field: String,
    pub reason: String,
}

fn invalid(field: &str, reason: impl Into<String>) -> PoolError {
    PoolError {
        field: field.into(),
        reason: reason.into(),
    }
}

impl PoolSpec {
    /// Reads `spec` of an InferencePool object.
    pub fn from_object(pool: &Value) -> Result<PoolSpec, PoolError> {
        let spec = &pool["spec"];
        let labels = spec["selector"]["matchLabels"]
            .as_object()
            .filter(|m| !m.is_empty())
            .ok_or_else(|| invalid("spec.selector.matchLabels", "Required value"))?;
        let mut selector = BTreeMap::new();
        for (key, value) in labels {
            let value = value.as_str().ok_or_else(|| {
                invalid(
                    &format!("spec.selector.matchLabels.{key}"),
                    "must be a string",
                )
            })?;
            selector.insert(key.clone(), value.to_string());
        }
        let ports = spec["targetPorts"]
            .as_array()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| invalid("spec.targetPorts", "Required value"))?;
        let mut target_ports = Vec::new();
        for (i, port) in ports.iter().enumerate() {
            let field = format!("spec.targetPorts[{i}].number");
            let number = port["number"]
                .as_u64()
                .filter(|n| (1..=65535).contains(n))
                .ok_or_else(|| invalid(&field, "must be a port number from 1 to 65535"))?
                as u16;
            if target_ports.contains(&number) {
                return Err(invalid("spec.targetPorts", "port number must be unique"));
            }
            target_ports.push(number);
        }
        let picker = match spec.get("endpointPickerRef") {
            None | Some(Value::Null) => None,
            Some(reference) => {
                let text = |key: &str, default: &str| {
                    reference[key].as_str().unwrap_or(default).to_string()
                };
                let name = text("name", "");
                if name.is_empty() {
                    return Err(invalid("spec.endpointPickerRef.name", "Required value"));
                }
                let kind = text("kind", "Service");
                let port = reference["port"]["number"]
                    .as_u64()
                    .filter(|n| (1..=65535).contains(n))
                    .map(|n| n as u16);
                if kind == "Service" && port.is_none() {
                    return Err(invalid(
                        "spec.endpointPickerRef",
                        "port is required when kind is 'Service' or unspecified (defaults to 'Service')",
                    ));
                }
                let failure_mode = match text("failureMode", "FailClose").as_str() {
                    "FailClose" => FailureMode::FailClose,
                    "FailOpen" => FailureMode::FailOpen,
                    other => {
                        return Err(invalid(
                            "spec.endpointPickerRef.failureMode",
                            format!(
                                "Unsupported value: {other:?}: supported values: \"FailOpen\", \"FailClose\""
                            ),
                        ));
                    }
                };
                Some(PickerRef {
                    group: text("group", ""),
                    kind,
                    name,
                    port,
                    failure_mode,
                })
            }
        };
        Ok(PoolSpec {
            selector,
            target_ports,
            picker,
        })
    }

    /// Whether a pod's labels put it in the pool.
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selector.iter().all(|(k, v)| labels.get(k) == Some(v))
    }
}

/// A model server of a pool: a selected pod that is running, ready and has an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member<'a> {
    pub pod: &'a Value,
    pub name: &'a str,
    pub address: &'a str,
}

/// The pool's members among `pods`, by pod name.
pub fn members<'a>(spec: &PoolSpec, namespace: &str, pods: &'a [Value]) -> Vec<Member<'a>> {
    let mut members: Vec<Member<'a>> = pods
        .iter()
        .filter(|pod| pod["metadata"]["namespace"].as_str() == Some(namespace))
        .filter(|pod| pod["metadata"]["deletionTimestamp"].is_null())
        .filter(|pod| conditions::pod_is_running_and_ready(pod))
        .filter(|pod| spec.selects(&selector::labels(pod)))
        .filter_map(|pod| {
            Some(Member {
                pod,
                name: pod["metadata"]["name"].as_str()?,
                address: pod["status"]["podIP"].as_str().filter(|a| !a.is_empty())?,
            })
        })
        .collect();
    members.sort_by(|a, b| a.name.cmp(b.name));
    members
}

/// One condition of a parent entry, without its transition time (the shell keeps or sets it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub kind: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

/// One parent's entry in a pool's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentEntry {
    pub gateway_namespace: String,
    pub gateway: String,
    pub conditions: Vec<Condition>,
}

/// Whether an HTTPRoute backendRef names this pool.
fn references(backend: &Value, route_namespace: &str, pool_namespace: &str, pool: &str) -> bool {
    backend["group"].as_str() == Some(GROUP)
        && backend["kind"].as_str() == Some(KIND)
        && backend["name"].as_str() == Some(pool)
        && backend["namespace"].as_str().unwrap_or(route_namespace) == pool_namespace
}

/// The status entries of a pool: one per Gateway (as written by Tessera's controller in the
/// HTTPRoutes' status) of the routes that send traffic to it. `services` are the Services of
/// the pool's namespace, to resolve `endpointPickerRef`.
pub fn parent_entries(
    pool: &Value,
    spec: &PoolSpec,
    routes: &[Value],
    services: &[Value],
) -> Vec<ParentEntry> {
    let namespace = pool["metadata"]["namespace"].as_str().unwrap_or("default");
    let name = pool["metadata"]["name"].as_str().unwrap_or_default();
    let resolved = resolve_picker(spec, services);
    let mut entries: BTreeMap<(String, String), bool> = BTreeMap::new();
    for route in routes {
        let route_namespace = route["metadata"]["namespace"].as_str().unwrap_or("default");
        let sends_here = route["spec"]["rules"].as_array().is_some_and(|rules| {
            rules.iter().any(|rule| {
                rule["backendRefs"].as_array().is_some_and(|backends| {
                    backends
                        .iter()
                        .any(|b| references(b, route_namespace, namespace, name))
                })
            })
        });
        if !sends_here {
            continue;
        }
        for parent in route["status"]["parents"].as_array().into_iter().flatten() {
            if parent["controllerName"] != CONTROLLER_NAME {
                continue;
            }
            let reference = &parent["parentRef"];
            if reference["kind"].as_str().unwrap_or("Gateway") != "Gateway" {
                continue;
            }
            let gateway = reference["name"].as_str().unwrap_or_default().to_string();
            let gateway_namespace = reference["namespace"]
                .as_str()
                .unwrap_or(route_namespace)
                .to_string();
            let accepted = parent["conditions"].as_array().is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c["type"] == "Accepted" && c["status"] == "True")
            });
            let entry = entries.entry((gateway_namespace, gateway)).or_insert(false);
            *entry |= accepted;
        }
    }
    entries
        .into_iter()
        .map(|((gateway_namespace, gateway), accepted)| {
            let accepted_condition = if accepted {
                Condition {
                    kind: "Accepted",
                    status: true,
                    reason: "Accepted",
                    message: if spec.picker.is_some() {
                        "InferencePool has been accepted by the Gateway".into()
                    } else {
                        "InferencePool has been accepted by the Gateway; no endpointPickerRef: \
                         the Gateway's built-in endpoint picker chooses the backend"
                            .into()
                    },
                }
            } else {
                Condition {
                    kind: "Accepted",
                    status: false,
                    reason: "HTTPRouteNotAccepted",
                    message:
                        "the HTTPRoute referencing this InferencePool was not accepted by the \
                              Gateway: see its status"
                            .into(),
                }
            };
            ParentEntry {
                gateway_namespace,
                gateway,
                conditions: vec![accepted_condition, resolved.clone()],
            }
        })
        .collect()
}

fn resolve_picker(spec: &PoolSpec, services: &[Value]) -> Condition {
    let Some(picker) = &spec.picker else {
        return Condition {
            kind: "ResolvedRefs",
            status: true,
            reason: "ResolvedRefs",
            message: "no endpointPickerRef to resolve".into(),
        };
    };
    let invalid = |message: String| Condition {
        kind: "ResolvedRefs",
        status: false,
        reason: "InvalidExtensionRef",
        message,
    };
    if !picker.group.is_empty() || picker.kind != "Service" {
        return invalid(format!(
            "unsupported endpointPickerRef kind {:?} in group {:?}: only Services are supported",
            picker.kind, picker.group
        ));
    }
    let service = services
        .iter()
        .find(|s| s["metadata"]["name"].as_str() == Some(picker.name.as_str()));
    let Some(service) = service else {
        return invalid(format!("Service {:?} not found", picker.name));
    };
    if service["spec"]["type"] == "ExternalName" {
        return invalid(format!(
            "Service {:?} is of type ExternalName, which an endpoint picker may not be",
            picker.name
        ));
    }
    let port = picker.port.unwrap_or_default();
    let has_port = service["spec"]["ports"].as_array().is_some_and(|ports| {
        ports
            .iter()
            .any(|p| p["port"].as_u64() == Some(u64::from(port)))
    });
    if !has_port {
        return invalid(format!("Service {:?} has no port {port}", picker.name));
    }
    Condition {
        kind: "ResolvedRefs",
        status: true,
        reason: "ResolvedRefs",
        message: "resolved the endpointPickerRef".into(),
    }
}

/// The pool's new `status`: Tessera's entries from `entries`, each condition keeping its
/// `lastTransitionTime` while its status stays what it was (else `now`, RFC 3339), every
/// other controller's entries as they were. None when nothing would change.
pub fn status(pool: &Value, entries: &[ParentEntry], now: &str) -> Option<Value> {
    let generation = pool["metadata"]["generation"].as_i64().unwrap_or(1);
    let current = pool["status"]["parents"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ours = |entry: &Value| entry["controllerName"] == CONTROLLER_NAME;
    let previous = |namespace: &str, gateway: &str| -> Vec<Value> {
        current
            .iter()
            .filter(|e| ours(e))
            .find(|e| {
                e["parentRef"]["name"] == gateway
                    && e["parentRef"]["namespace"].as_str().unwrap_or(namespace) == namespace
            })
            .and_then(|e| e["conditions"].as_array().cloned())
            .unwrap_or_default()
    };
    let mut parents: Vec<Value> = current.iter().filter(|e| !ours(e)).cloned().collect();
    for entry in entries {
        let mut conditions: Vec<Value> = entry
            .conditions
            .iter()
            .map(|condition| {
                let status = if condition.status { "True" } else { "False" };
                json!({"type": condition.kind, "status": status, "reason": condition.reason,
                       "message": condition.message, "observedGeneration": generation,
                       "lastTransitionTime": now})
            })
            .collect();
        conditions::keep_transition_times(
            &previous(&entry.gateway_namespace, &entry.gateway),
            &mut conditions,
        );
        parents.push(json!({
            "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                          "name": entry.gateway, "namespace": entry.gateway_namespace},
            "controllerName": CONTROLLER_NAME,
            "conditions": conditions
        }));
    }
    parents.truncate(32);
    let status = json!({"parents": parents});
    let unchanged = pool["status"]["parents"]
        .as_array()
        .map_or(parents.is_empty(), |p| *p == parents);
    (!unchanged).then_some(status)
}

#[cfg(test)]
mod tests;
