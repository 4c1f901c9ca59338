//! The CustomResourceDefinitions of Kueue's API that Tessera bundles, generated from the Rust
//! types in [`super::queues`] and [`super::workload`]: upstream's names, short names, scope,
//! printer columns, status subresource, defaults and CEL rules, with `v1beta2` stored and
//! `v1beta1` served (its schema derived from `v1beta2`'s by the field renames of
//! `apis/kueue/v1beta1/*_conversion.go`).
//!
//! Produces JSON only; installing the definitions is the bootstrap's business and converting
//! objects between versions is `tessera_api::convert`'s.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use super::multikueue::{MultiKueueClusterSpec, MultiKueueClusterStatus, MultiKueueConfigSpec};
use super::queues::{
    ClusterQueueSpec, ClusterQueueStatus, CohortSpec, CohortStatus,
    LocalQueueAdmissionFairSharingStatus, LocalQueueSpec, LocalQueueStatus, ResourceFlavorSpec,
};
use super::topology::TopologySpec;
use super::workload::{
    AdmissionCheckSpec, AdmissionCheckStatus, WorkloadPriorityClassFields, WorkloadSpec,
    WorkloadStatus,
};
use super::{GROUP, SERVED_VERSION, STORAGE_VERSION};

/// Annotation on a bundled CRD: a hash of its spec, so a newer Tessera knows to upgrade it.
pub const BUNDLE_HASH_ANNOTATION: &str = "tessera.dev/bundle-hash";

/// A CustomResourceDefinition Tessera bundles: `name` with `spec`, the hash of the spec in
/// its [`BUNDLE_HASH_ANNOTATION`] (beside `annotations`), labelled as managed by Tessera — so
/// the bootstrap installs what is missing and upgrades what an older Tessera installed.
pub fn bundled_definition(name: &str, spec: Value, annotations: &[(&str, &str)]) -> Value {
    let hash = crate::fnv::fnv64(spec.to_string().as_bytes());
    let mut all: serde_json::Map<String, Value> = annotations
        .iter()
        .map(|(key, value)| (key.to_string(), json!(value)))
        .collect();
    all.insert(BUNDLE_HASH_ANNOTATION.into(), json!(format!("{hash:016x}")));
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": name,
            "annotations": all,
            "labels": {"app.kubernetes.io/managed-by": "tessera"},
        },
        "spec": spec,
    })
}

const DEFINITIONS: &str = "#/components/schemas/";

/// What a bundled kind declares under `subresources`.
#[derive(Clone, Copy, PartialEq)]
enum Subresources {
    /// Nothing (no `subresources` key).
    Absent,
    /// `subresources: {}` (WorkloadPriorityClass).
    Empty,
    /// `subresources: {status: {}}`.
    Status,
}

/// A kind's top-level properties (besides apiVersion, kind and metadata) and the required ones.
type Root = (Map<String, Value>, Vec<&'static str>);

/// One bundled kind: its names and how its top-level schema is built.
struct Bundled {
    kind: &'static str,
    plural: &'static str,
    short_names: &'static [&'static str],
    namespaced: bool,
    /// The `subresources` of each version, as upstream declares them.
    subresources: Subresources,
    /// `(name, type, jsonPath, description, priority)` of `v1beta2`'s printer columns.
    columns: &'static [(&'static str, &'static str, &'static str, &'static str, i64)],
    /// Builds the top-level properties.
    root: fn(&mut SchemaGenerator) -> Root,
    /// CEL rules on the whole object, as `(rule, message)`.
    rules: &'static [(&'static str, &'static str)],
}

fn spec_status<S: JsonSchema, T: JsonSchema>(
    generator: &mut SchemaGenerator,
) -> Map<String, Value> {
    let mut properties = Map::new();
    properties.insert("spec".into(), generator.subschema_for::<S>().to_value());
    properties.insert("status".into(), generator.subschema_for::<T>().to_value());
    properties
}

const COHORT_COLUMN: (&str, &str, &str, &str, i64) = (
    "Cohort",
    "string",
    ".spec.cohortName",
    "Cohort that this ClusterQueue belongs to",
    0,
);

/// The root of a kind with a `spec` and nothing else required.
fn spec_only<T: JsonSchema>(generator: &mut SchemaGenerator) -> Root {
    let mut properties = Map::new();
    properties.insert("spec".into(), generator.subschema_for::<T>().to_value());
    (properties, vec![])
}

const BUNDLED: &[Bundled] = &[
    Bundled {
        kind: "ResourceFlavor",
        plural: "resourceflavors",
        short_names: &["flavor", "flavors", "rf"],
        namespaced: false,
        subresources: Subresources::Absent,
        columns: &[],
        root: spec_only::<ResourceFlavorSpec>,
        rules: &[],
    },
    Bundled {
        kind: "ClusterQueue",
        plural: "clusterqueues",
        short_names: &["cq"],
        namespaced: false,
        subresources: Subresources::Status,
        columns: &[
            COHORT_COLUMN,
            (
                "Strategy",
                "string",
                ".spec.queueingStrategy",
                "The queueing strategy used to prioritize workloads",
                1,
            ),
            (
                "Pending Workloads",
                "integer",
                ".status.pendingWorkloads",
                "Number of pending workloads",
                0,
            ),
            (
                "Admitted Workloads",
                "integer",
                ".status.admittedWorkloads",
                "Number of admitted workloads that haven't finished yet",
                1,
            ),
        ],
        root: |generator| {
            (
                spec_status::<ClusterQueueSpec, ClusterQueueStatus>(generator),
                vec![],
            )
        },
        rules: &[],
    },
    Bundled {
        kind: "LocalQueue",
        plural: "localqueues",
        short_names: &["queue", "queues", "lq"],
        namespaced: true,
        subresources: Subresources::Status,
        columns: &[
            (
                "ClusterQueue",
                "string",
                ".spec.clusterQueue",
                "Backing ClusterQueue",
                0,
            ),
            (
                "Pending Workloads",
                "integer",
                ".status.pendingWorkloads",
                "Number of pending workloads",
                0,
            ),
            (
                "Admitted Workloads",
                "integer",
                ".status.admittedWorkloads",
                "Number of admitted workloads that haven't finished yet.",
                0,
            ),
        ],
        root: |generator| {
            (
                spec_status::<LocalQueueSpec, LocalQueueStatus>(generator),
                vec![],
            )
        },
        rules: &[],
    },
    Bundled {
        kind: "Cohort",
        plural: "cohorts",
        short_names: &["co"],
        namespaced: false,
        subresources: Subresources::Status,
        columns: &[],
        root: |generator| (spec_status::<CohortSpec, CohortStatus>(generator), vec![]),
        rules: &[],
    },
    Bundled {
        kind: "Workload",
        plural: "workloads",
        short_names: &["kwl", "kueueworkload", "kueueworkloads"],
        namespaced: true,
        subresources: Subresources::Status,
        columns: &[
            (
                "Queue",
                "string",
                ".spec.queueName",
                "Name of the queue this workload was submitted to",
                0,
            ),
            (
                "Reserved in",
                "string",
                ".status.admission.clusterQueue",
                "Name of the ClusterQueue where the workload is reserving quota",
                0,
            ),
            (
                "Admitted",
                "string",
                ".status.conditions[?(@.type=='Admitted')].status",
                "Admission status",
                0,
            ),
            (
                "Finished",
                "string",
                ".status.conditions[?(@.type=='Finished')].status",
                "Workload finished",
                0,
            ),
            (
                "Age",
                "date",
                ".metadata.creationTimestamp",
                "Time this workload was created",
                0,
            ),
        ],
        root: |generator| {
            (
                spec_status::<WorkloadSpec, WorkloadStatus>(generator),
                vec![],
            )
        },
        rules: WORKLOAD_RULES_V1BETA2,
    },
    Bundled {
        kind: "WorkloadPriorityClass",
        plural: "workloadpriorityclasses",
        short_names: &["wpc"],
        namespaced: false,
        subresources: Subresources::Empty,
        columns: &[(
            "Value",
            "integer",
            ".value",
            "Value of workloadPriorityClass's Priority",
            0,
        )],
        root: |generator| {
            let fields = generator
                .root_schema_for::<WorkloadPriorityClassFields>()
                .to_value();
            let properties = fields
                .get("properties")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            (properties, vec!["value"])
        },
        rules: &[],
    },
    Bundled {
        kind: "AdmissionCheck",
        plural: "admissionchecks",
        short_names: &["ac"],
        namespaced: false,
        subresources: Subresources::Status,
        columns: &[],
        root: |generator| {
            (
                spec_status::<AdmissionCheckSpec, AdmissionCheckStatus>(generator),
                vec![],
            )
        },
        rules: &[],
    },
    Bundled {
        kind: "Topology",
        plural: "topologies",
        short_names: &["topo"],
        namespaced: false,
        subresources: Subresources::Absent,
        columns: &[],
        root: spec_only::<TopologySpec>,
        rules: &[],
    },
    Bundled {
        kind: "MultiKueueConfig",
        plural: "multikueueconfigs",
        short_names: &["mkconf"],
        namespaced: false,
        subresources: Subresources::Absent,
        columns: &[],
        root: spec_only::<MultiKueueConfigSpec>,
        rules: &[],
    },
    Bundled {
        kind: "MultiKueueCluster",
        plural: "multikueueclusters",
        short_names: &["mkc"],
        namespaced: false,
        subresources: Subresources::Status,
        columns: &[
            (
                "Connected",
                "string",
                ".status.conditions[?(@.type=='Active')].status",
                "MultiKueueCluster is connected",
                0,
            ),
            (
                "Age",
                "date",
                ".metadata.creationTimestamp",
                "Time this workload was created",
                0,
            ),
        ],
        root: |generator| {
            (
                spec_status::<MultiKueueClusterSpec, MultiKueueClusterStatus>(generator),
                vec![],
            )
        },
        rules: &[],
    },
];

/// The kinds whose `v1beta1` upstream serves without marking it deprecated.
const V1BETA1_NOT_DEPRECATED: &[&str] = &["MultiKueueConfig"];

const QUOTA_RESERVED_OLD: &str = "has(oldSelf.status) && has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True')";

/// The rules on a whole `v1beta2` Workload (`apis/kueue/v1beta2/workload_types.go`).
const WORKLOAD_RULES_V1BETA2: &[(&str, &str)] = &[
    (
        "has(self.status) && has(self.status.conditions) && self.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True') && has(self.status.admission) ? size(self.spec.podSets) == size(self.status.admission.podSetAssignments) : true",
        "podSetAssignments must have the same number of podSets as the spec",
    ),
    (
        "(has(oldSelf.status) && has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True')) ? (!has(oldSelf.spec.priorityClassRef) && !has(self.spec.priorityClassRef)) || (has(oldSelf.spec.priorityClassRef) && has(self.spec.priorityClassRef)) : true",
        "priorityClassRef is immutable while workload quota reserved",
    ),
    (
        "(has(oldSelf.status) && has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True') && has(oldSelf.spec.priorityClassRef) && has(self.spec.priorityClassRef)) ? oldSelf.spec.priorityClassRef.group == self.spec.priorityClassRef.group : true",
        "priorityClassRef.group is immutable while workload quota reserved",
    ),
    (
        "(has(oldSelf.status) && has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True') && has(oldSelf.spec.priorityClassRef) && has(self.spec.priorityClassRef)) ? oldSelf.spec.priorityClassRef.kind == self.spec.priorityClassRef.kind : true",
        "priorityClassRef.kind is immutable while workload quota reserved",
    ),
    (
        "(has(oldSelf.status) && has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True') && has(oldSelf.spec.priorityClassRef) && has(self.spec.priorityClassRef) && self.spec.priorityClassRef.group == 'scheduling.k8s.io' && self.spec.priorityClassRef.kind == 'PriorityClass') ? oldSelf.spec.priorityClassRef.name == self.spec.priorityClassRef.name : true",
        "priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass while workload quota reserved",
    ),
    QUEUE_NAME_RULE,
    MAXIMUM_EXECUTION_TIME_RULE,
];

const QUEUE_NAME_RULE: (&str, &str) = (
    "((has(oldSelf.status) && has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True')) && (has(self.status) && has(self.status.conditions) && self.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True'))) ? ((has(oldSelf.spec.queueName) == has(self.spec.queueName)) && (!has(oldSelf.spec.queueName) || oldSelf.spec.queueName == self.spec.queueName)) : true",
    "queueName is immutable while workload quota reserved",
);

const MAXIMUM_EXECUTION_TIME_RULE: (&str, &str) = (
    "((has(oldSelf.status) && has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'Admitted' && c.status == 'True')) && (has(self.status) && has(self.status.conditions) && self.status.conditions.exists(c, c.type == 'Admitted' && c.status == 'True')))?((has(oldSelf.spec.maximumExecutionTimeSeconds)?oldSelf.spec.maximumExecutionTimeSeconds:0) ==  (has(self.spec.maximumExecutionTimeSeconds)?self.spec.maximumExecutionTimeSeconds:0)):true",
    "maximumExecutionTimeSeconds is immutable while workload quota reserved",
);

/// The rules on a whole `v1beta1` Workload (`apis/kueue/v1beta1/workload_types.go`).
fn workload_rules_v1beta1() -> Vec<(String, &'static str)> {
    vec![
        (
            WORKLOAD_RULES_V1BETA2[0].0.to_string(),
            WORKLOAD_RULES_V1BETA2[0].1,
        ),
        (
            format!(
                "({QUOTA_RESERVED_OLD} && has(oldSelf.spec.priorityClassSource) && has(self.spec.priorityClassSource)) ? (oldSelf.spec.priorityClassSource == self.spec.priorityClassSource) : true"
            ),
            "priorityClassSource is immutable while workload quota reserved",
        ),
        (
            format!(
                "({QUOTA_RESERVED_OLD} && has(oldSelf.spec.priorityClassSource) && has(self.spec.priorityClassSource) && (self.spec.priorityClassSource != 'kueue.x-k8s.io/workloadpriorityclass') && has(oldSelf.spec.priorityClassName) && has(self.spec.priorityClassName)) ? (oldSelf.spec.priorityClassName == self.spec.priorityClassName) : true"
            ),
            "priorityClassName is immutable while workload quota reserved and priorityClassSource is not equal to kueue.x-k8s.io/workloadpriorityclass",
        ),
        (QUEUE_NAME_RULE.0.to_string(), QUEUE_NAME_RULE.1),
        (
            MAXIMUM_EXECUTION_TIME_RULE.0.to_string(),
            MAXIMUM_EXECUTION_TIME_RULE.1,
        ),
    ]
}

/// The bundled CustomResourceDefinitions, one per kind, each with `v1beta1` (served,
/// deprecated) and `v1beta2` (stored) and a [`BUNDLE_HASH_ANNOTATION`].
pub fn definitions() -> Vec<Value> {
    BUNDLED.iter().map(definition).collect()
}

fn definition(bundled: &Bundled) -> Value {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let (properties, required) = (bundled.root)(&mut generator);
    let afs_status = generator
        .subschema_for::<LocalQueueAdmissionFairSharingStatus>()
        .to_value();
    let definitions = generator.take_definitions(true);
    let inline = |value: Value| structural(value, &definitions, 0);
    let mut root = Map::new();
    root.insert("apiVersion".into(), json!({"type": "string"}));
    root.insert("kind".into(), json!({"type": "string"}));
    root.insert("metadata".into(), json!({"type": "object"}));
    for (name, schema) in properties {
        root.insert(name, inline(schema));
    }
    let mut v1beta2 = json!({
        "description": format!("{} is the Schema for the {} API.", bundled.kind, bundled.plural),
        "type": "object",
        "properties": root,
    });
    if !required.is_empty() {
        v1beta2["required"] = json!(required);
    }
    if !bundled.rules.is_empty() {
        v1beta2["x-kubernetes-validations"] = rules_json(
            bundled
                .rules
                .iter()
                .map(|(rule, message)| (rule.to_string(), *message)),
        );
    }
    let v1beta1 = super::versions::v1beta1_schema(bundled.kind, &v1beta2, &inline(afs_status));
    let v1beta1_rules = (bundled.kind == "Workload").then(workload_rules_v1beta1);
    let v1beta1 = match v1beta1_rules {
        Some(rules) => {
            let mut schema = v1beta1;
            schema["x-kubernetes-validations"] = rules_json(rules.into_iter());
            schema
        }
        None => v1beta1,
    };
    let columns = |version: &str| -> Value {
        bundled
            .columns
            .iter()
            .map(|(name, kind, path, description, priority)| {
                let path = if version == SERVED_VERSION && *path == COHORT_COLUMN.2 {
                    ".spec.cohort"
                } else {
                    path
                };
                let mut column = json!({"name": name, "type": kind, "jsonPath": path,
                    "description": description});
                if *priority != 0 {
                    column["priority"] = json!(priority);
                }
                column
            })
            .collect()
    };
    let version = |name: &str, schema: Value| {
        let mut version = json!({
            "name": name,
            "served": true,
            "storage": name == STORAGE_VERSION,
            "schema": {"openAPIV3Schema": schema},
        });
        match bundled.subresources {
            Subresources::Absent => {}
            Subresources::Empty => version["subresources"] = json!({}),
            Subresources::Status => version["subresources"] = json!({"status": {}}),
        }
        if !bundled.columns.is_empty() {
            version["additionalPrinterColumns"] = columns(name);
        }
        if name == SERVED_VERSION && !V1BETA1_NOT_DEPRECATED.contains(&bundled.kind) {
            version["deprecated"] = json!(true);
            version["deprecationWarning"] =
                json!("This version is deprecated. Use v1beta2 instead.");
        }
        version
    };
    let singular = bundled.kind.to_ascii_lowercase();
    let spec = json!({
        "group": GROUP,
        "names": {
            "kind": bundled.kind,
            "listKind": format!("{}List", bundled.kind),
            "plural": bundled.plural,
            "singular": singular,
            "shortNames": bundled.short_names,
        },
        "scope": if bundled.namespaced { "Namespaced" } else { "Cluster" },
        "versions": [version(SERVED_VERSION, v1beta1), version(STORAGE_VERSION, v1beta2)],
        "conversion": {"strategy": "None"},
    });
    bundled_definition(&format!("{}.{GROUP}", bundled.plural), spec, &[])
}

fn rules_json(rules: impl Iterator<Item = (String, &'static str)>) -> Value {
    rules
        .map(|(rule, message)| json!({"rule": rule, "message": message}))
        .collect()
}

/// A CRD schema for a quantity, as controller-gen writes it.
fn quantity() -> Value {
    json!({
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
        "x-kubernetes-int-or-string": true,
    })
}

/// Definitions a CRD schema spells out differently from their OpenAPI form.
fn replacement(name: &str) -> Option<Value> {
    match name {
        "io.k8s.apimachinery.pkg.api.resource.Quantity" => Some(quantity()),
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString" => Some(json!({
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": true,
        })),
        // Embedded object metadata: the fields a template may carry (controller-gen).
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" => Some(json!({
            "type": "object",
            "properties": {
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                "finalizers": {"type": "array", "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "name": {"type": "string"},
                "namespace": {"type": "string"},
            },
        })),
        "io.k8s.apimachinery.pkg.apis.meta.v1.Condition" => Some(condition()),
        _ => None,
    }
}

/// `metav1.Condition` with the limits its kubebuilder markers add.
fn condition() -> Value {
    json!({
        "type": "object",
        "description": "Condition contains details for one aspect of the current state of this API Resource.",
        "properties": {
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "message": {"type": "string", "maxLength": 32768},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "reason": {"type": "string", "maxLength": 1024, "minLength": 1,
                       "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "type": {"type": "string", "maxLength": 316,
                     "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"},
        },
        "required": ["lastTransitionTime", "message", "reason", "status", "type"],
    })
}

/// Deepest nesting of references followed; PodTemplateSpec is far shallower.
const MAX_DEPTH: usize = 64;

/// A structural CRD schema from a generated one: references inlined (siblings of a reference
/// override the definition's keys; CEL rules are appended), `allOf` wrappers and optional
/// (`anyOf` with a `null` alternative) wrappers merged, and the OpenAPI-only keys (`nullable`, `$schema`,
/// `title`) dropped.
fn structural(value: Value, definitions: &Map<String, Value>, depth: usize) -> Value {
    let Value::Object(mut object) = value else {
        return value;
    };
    let mut base = Map::new();
    if let Some(Value::String(reference)) = object.remove("$ref") {
        let name = reference.strip_prefix(DEFINITIONS).unwrap_or(&reference);
        let target = replacement(name).or_else(|| definitions.get(name).cloned());
        if let (Some(target), true) = (target, depth < MAX_DEPTH)
            && let Value::Object(target) = structural(target, definitions, depth + 1)
        {
            base = target;
        }
        if name == "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector" {
            // `+listType=atomic` on the selector's lists (not in the OpenAPI definition).
            let mut selector = Value::Object(std::mem::take(&mut base));
            for pointer in [
                "/properties/matchExpressions",
                "/properties/matchExpressions/items/properties/values",
            ] {
                if let Some(list) = selector.pointer_mut(pointer).and_then(Value::as_object_mut) {
                    list.insert("x-kubernetes-list-type".into(), json!("atomic"));
                }
            }
            if let Value::Object(selector) = selector {
                base = selector;
            }
        }
    }
    // `Option<T>` is `anyOf: [T, {type: null}]`: a CRD field is optional by being absent.
    if let Some(Value::Array(any)) = object.get("anyOf") {
        let mut kept: Vec<Value> = any
            .iter()
            .filter(|part| {
                part.get("type") != Some(&json!("null")) && part.get("enum") != Some(&json!([null]))
            })
            .cloned()
            .collect();
        if kept.len() == 1 {
            object.remove("anyOf");
            object.insert("allOf".into(), Value::Array(vec![kept.remove(0)]));
        }
    }
    if let Some(Value::Array(all)) = object.remove("allOf") {
        for part in all {
            if let Value::Object(part) = structural(part, definitions, depth + 1) {
                merge(&mut base, part);
            }
        }
    }
    for key in ["nullable", "$schema", "title"] {
        object.remove(key);
    }
    let mut own = Map::new();
    for (key, child) in object {
        let child = match key.as_str() {
            "properties" => match child {
                Value::Object(properties) => Value::Object(
                    properties
                        .into_iter()
                        .map(|(name, schema)| (name, structural(schema, definitions, depth)))
                        .collect(),
                ),
                other => other,
            },
            "items" | "additionalProperties" => structural(child, definitions, depth),
            "anyOf" | "oneOf" => match child {
                Value::Array(parts) => Value::Array(
                    parts
                        .into_iter()
                        .map(|part| structural(part, definitions, depth))
                        .collect(),
                ),
                other => other,
            },
            _ => child,
        };
        own.insert(key, child);
    }
    merge(&mut base, own);
    // controller-gen lists required fields alphabetically.
    if let Some(Value::Array(required)) = base.get_mut("required") {
        required.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    }
    Value::Object(base)
}

/// Lays `over` onto `base`; CEL rule lists are concatenated.
fn merge(base: &mut Map<String, Value>, over: Map<String, Value>) {
    for (key, value) in over {
        match (key.as_str(), base.get_mut(&key), value) {
            ("x-kubernetes-validations", Some(Value::Array(existing)), Value::Array(more)) => {
                existing.extend(more)
            }
            (_, _, value) => {
                base.insert(key, value);
            }
        }
    }
}
