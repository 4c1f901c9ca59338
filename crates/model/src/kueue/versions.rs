//! The `v1beta1` schemas of Kueue's kinds, derived from the `v1beta2` ones by the differences
//! `apis/kueue/v1beta1/*_conversion.go` and the v1beta1 types record: renamed fields
//! (ClusterQueue `cohortName` → `cohort`, LocalQueue `flavorsUsage` → `flavorUsage`,
//! Workload `accumulatedPastExecutionTimeSeconds` → `accumulatedPastExexcutionTimeSeconds`),
//! fields only one version has (Workload `priorityClassRef` ↔
//! `priorityClassName`/`priorityClassSource`, topology `slices` ↔ `domains`, ClusterQueue
//! `admissionChecks`, AdmissionCheck `retryDelayMinutes`, MultiKueueCluster `clusterSource`,
//! MultiKueueConfig `quotaManagement`, …) and the deprecated flavor
//! fungibility values `Borrow` and `Preempt`.
//!
//! Schema edits only; object conversion lives in `tessera_api::convert`.

use serde_json::{Map, Value, json};

/// The `v1beta1` schema of `kind`, given its `v1beta2` schema and the schema of an admission
/// fair sharing status (which v1beta1 ClusterQueue and Cohort statuses still carry).
pub(crate) fn v1beta1_schema(kind: &str, v1beta2: &Value, afs_status: &Value) -> Value {
    let mut schema = v1beta2.clone();
    match kind {
        "ClusterQueue" => {
            if let Some(spec) = properties(&mut schema, &["spec"]) {
                rename(spec, "cohortName", "cohort");
                spec.remove("concurrentAdmissionPolicy");
                spec.insert(
                    "admissionChecks".into(),
                    json!({"type": "array", "items": {"type": "string", "maxLength": 316},
                       "description": "admissionChecks lists the AdmissionChecks required by this ClusterQueue. Cannot be used along with AdmissionCheckStrategy."}),
                );
            }
            if let Some(rules) = schema
                .pointer_mut("/properties/spec/x-kubernetes-validations")
                .and_then(Value::as_array_mut)
            {
                for rule in rules {
                    if let Some(text) = rule.get("rule").and_then(Value::as_str) {
                        rule["rule"] = json!(text.replace("self.cohortName", "self.cohort"));
                    }
                }
            }
            for (field, deprecated) in [("whenCanBorrow", "Borrow"), ("whenCanPreempt", "Preempt")]
            {
                if let Some(Value::Array(values)) = schema.pointer_mut(&format!(
                    "/properties/spec/properties/flavorFungibility/properties/{field}/enum"
                )) {
                    values.push(json!(deprecated));
                }
            }
            if let Some(status) = properties(&mut schema, &["status"]) {
                status.insert(
                    "pendingWorkloadsStatus".into(),
                    json!({
                        "type": "object",
                        "description": "Deprecated: pendingWorkloadsStatus is not updated any more.",
                        "properties": {
                            "clusterQueuePendingWorkload": {"type": "array", "items": {
                                "type": "object",
                                "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}},
                                "required": ["name", "namespace"]}},
                            "lastChangeTime": {"type": "string", "format": "date-time"},
                        },
                        "required": ["lastChangeTime"],
                    }),
                );
            }
            add_afs_status(&mut schema, afs_status);
        }
        "Cohort" => add_afs_status(&mut schema, afs_status),
        "LocalQueue" => {
            if let Some(status) = properties(&mut schema, &["status"]) {
                rename(status, "flavorsUsage", "flavorUsage");
                status.insert(
                    "flavors".into(),
                    json!({"type": "array", "maxItems": 16,
                       "description": "Deprecated: flavors is not updated any more.",
                       "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}),
                );
            }
        }
        "Workload" => {
            if let Some(spec) = properties(&mut schema, &["spec"]) {
                spec.remove("priorityClassRef");
                spec.remove("preemptionGates");
                spec.insert(
                    "priorityClassName".into(),
                    json!({"type": "string", "description": "priorityClassName is the name of the PriorityClass or WorkloadPriorityClass the workload's priority comes from."}),
                );
                spec.insert(
                    "priorityClassSource".into(),
                    json!({"type": "string", "default": "",
                       "enum": ["kueue.x-k8s.io/workloadpriorityclass", "scheduling.k8s.io/priorityclass", ""],
                       "description": "priorityClassSource determines whether the priorityClass field refers to a pod PriorityClass or kueue.x-k8s.io/workloadpriorityclass."}),
                );
            }
            if let Some(rules) = schema.pointer_mut("/properties/spec/x-kubernetes-validations") {
                *rules = json!([{"rule": "has(self.priorityClassName) ? has(self.priority) : true",
                    "message": "priority should not be nil when priorityClassName is set"}]);
            }
            if let Some(request) =
                properties(&mut schema, &["spec", "podSets", "[]", "topologyRequest"])
            {
                request.remove("podsetSliceRequiredTopologyConstraints");
            }
            if let Some(status) = properties(&mut schema, &["status"]) {
                status.remove("preemptionGates");
                rename(
                    status,
                    "accumulatedPastExecutionTimeSeconds",
                    "accumulatedPastExexcutionTimeSeconds",
                );
            }
            if let Some(assignment) = schema.pointer_mut(
                "/properties/status/properties/admission/properties/podSetAssignments/items/properties/topologyAssignment",
            ) {
                if let Some(object) = assignment.as_object_mut() {
                    object.remove("x-kubernetes-validations");
                }
                if let Some(fields) = assignment
                    .get_mut("properties")
                    .and_then(Value::as_object_mut)
                {
                    fields.remove("slices");
                    fields.insert(
                        "domains".into(),
                        json!({"type": "array", "items": {"type": "object",
                        "properties": {
                            "count": {"type": "integer", "format": "int32", "minimum": 1},
                            "values": {"type": "array", "items": {"type": "string", "maxLength": 63},
                                       "minItems": 1, "maxItems": 16}},
                        "required": ["count", "values"]}}),
                    );
                }
            }
        }
        "AdmissionCheck" => {
            if let Some(spec) = properties(&mut schema, &["spec"]) {
                spec.insert(
                    "retryDelayMinutes".into(),
                    json!({"type": "integer", "format": "int64", "default": 15,
                       "description": "Deprecated: retryDelayMinutes is not used."}),
                );
            }
        }
        "Topology" => {
            if let Some(rules) =
                schema.pointer_mut("/properties/spec/properties/levels/x-kubernetes-validations")
            {
                *rules = super::topology::LEVELS_RULES_V1BETA1
                    .iter()
                    .map(|(rule, message)| json!({"rule": rule, "message": message}))
                    .collect();
            }
        }
        "MultiKueueConfig" => {
            if let Some(spec) = properties(&mut schema, &["spec"]) {
                spec.remove("quotaManagement");
                if let Some(Value::Object(clusters)) = spec.get_mut("clusters") {
                    clusters.remove("x-kubernetes-validations");
                }
            }
        }
        "MultiKueueCluster" => {
            // v1beta1 has the source's fields on the spec itself.
            let source = schema
                .pointer_mut("/properties/spec/properties/clusterSource/properties")
                .map(Value::take);
            if let (Some(Value::Object(source)), Some(spec)) =
                (source, properties(&mut schema, &["spec"]))
            {
                spec.remove("clusterSource");
                spec.extend(source);
            }
        }
        _ => {}
    }
    schema
}

/// The `properties` of the schema at a path of property names (`[]` steps into `items`).
fn properties<'s>(schema: &'s mut Value, path: &[&str]) -> Option<&'s mut Map<String, Value>> {
    let mut node = schema;
    for step in path {
        node = if *step == "[]" {
            node.get_mut("items")?
        } else {
            node.get_mut("properties")?.get_mut(*step)?
        };
    }
    node.get_mut("properties")?.as_object_mut()
}

fn rename(properties: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(value) = properties.remove(from) {
        properties.insert(to.to_string(), value);
    }
}

/// v1beta1 fair-sharing statuses of ClusterQueues and Cohorts carry an (unused)
/// `admissionFairSharingStatus`.
fn add_afs_status(schema: &mut Value, afs_status: &Value) {
    if let Some(fair_sharing) = properties(schema, &["status", "fairSharing"]) {
        fair_sharing.insert("admissionFairSharingStatus".into(), afs_status.clone());
    }
}
