//! The `MaintenancePlan` document (`tessera.dev/v1alpha1`) read into a [`Plan`]: every field
//! checked, each problem named by its path (`spec.policy.maxUnavailable`) so a shell can point at
//! the line. Exactly one of `driverUpgrade`, `migRepartition`, `kubernetesVersion`,
//! `nodeRotation` says the kind; `policy` holds the GPU operator's upgrade-policy fields.
//!
//! Works on a parsed JSON value; knows no YAML, file or API object beyond the document.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use tessera_node::hardware::MigLayout;

use crate::plan::{Plan, PlanError, PlanKind};
use crate::policy::{
    DrainSpec, IntOrPercent, PodDeletionSpec, UpgradePolicy, WaitForCompletionSpec,
};
use crate::worker::DriverScope;

/// The API version and kind a plan document carries.
pub const API_VERSION: &str = "tessera.dev/v1alpha1";
pub const KIND: &str = "MaintenancePlan";
/// The fields of `spec` (the CRD's schema declares each).
pub const SPEC_FIELDS: [&str; 9] = [
    "nodeSelector",
    "driverUpgrade",
    "migRepartition",
    "kubernetesVersion",
    "nodeRotation",
    "policy",
    "canary",
    "batchSize",
    "paused",
];

struct Reader {
    errors: Vec<PlanError>,
}

impl Reader {
    fn err(&mut self, field: &str, message: impl Into<String>) {
        self.errors.push(PlanError {
            field: field.to_string(),
            message: message.into(),
        });
    }

    fn object<'v>(
        &mut self,
        v: &'v Value,
        field: &str,
        known: &[&str],
    ) -> Option<&'v Map<String, Value>> {
        let Some(map) = v.as_object() else {
            self.err(field, "should be an object");
            return None;
        };
        for key in map.keys() {
            if !known.contains(&key.as_str()) {
                let prefix = if field.is_empty() {
                    String::new()
                } else {
                    format!("{field}.")
                };
                self.err(
                    &format!("{prefix}{key}"),
                    format!("unknown field (known: {})", known.join(", ")),
                );
            }
        }
        Some(map)
    }

    fn string(&mut self, map: &Map<String, Value>, field: &str, key: &str) -> Option<String> {
        match map.get(key)? {
            Value::String(s) => Some(s.clone()),
            _ => {
                self.err(&join(field, key), "should be a string");
                None
            }
        }
    }

    fn bool(&mut self, map: &Map<String, Value>, field: &str, key: &str, default: bool) -> bool {
        match map.get(key) {
            None => default,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                self.err(&join(field, key), "should be true or false");
                default
            }
        }
    }

    fn int(&mut self, map: &Map<String, Value>, field: &str, key: &str, default: i64) -> i64 {
        match map.get(key) {
            None => default,
            Some(v) => v.as_i64().unwrap_or_else(|| {
                self.err(&join(field, key), "should be an integer");
                default
            }),
        }
    }
}

fn join(field: &str, key: &str) -> String {
    format!("{field}.{key}")
}

/// Reads a `MaintenancePlan` document. Errors name `spec.…` paths (and `metadata.name`).
pub fn plan_from_document(doc: &Value) -> Result<Plan, Vec<PlanError>> {
    let mut r = Reader { errors: Vec::new() };
    if doc.get("apiVersion").and_then(Value::as_str) != Some(API_VERSION) {
        r.err("apiVersion", format!("should be {API_VERSION}"));
    }
    if doc.get("kind").and_then(Value::as_str) != Some(KIND) {
        r.err("kind", format!("should be {KIND}"));
    }
    let name = doc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if name.is_empty() {
        r.err("metadata.name", "is required");
    }
    let empty = Value::Object(Map::new());
    let spec_value = doc.get("spec").unwrap_or(&empty);
    let kinds = [
        "driverUpgrade",
        "migRepartition",
        "kubernetesVersion",
        "nodeRotation",
    ];
    let Some(spec) = r.object(spec_value, "spec", &SPEC_FIELDS) else {
        return Err(r.errors);
    };
    let spec = spec.clone();

    let mut selector = BTreeMap::new();
    if let Some(v) = spec.get("nodeSelector")
        && let Some(map) = v.as_object()
    {
        for (k, v) in map {
            match v.as_str() {
                Some(s) => {
                    selector.insert(k.clone(), s.to_string());
                }
                None => r.err(&format!("spec.nodeSelector.{k}"), "should be a string"),
            }
        }
    } else if spec.contains_key("nodeSelector") {
        r.err("spec.nodeSelector", "should be a map of labels");
    }

    let given: Vec<&str> = kinds
        .iter()
        .copied()
        .filter(|k| spec.contains_key(*k))
        .collect();
    let kind = match given.as_slice() {
        [one] => read_kind(&mut r, one, &spec[*one]),
        [] => {
            r.err("spec", format!("needs one of {}", kinds.join(", ")));
            None
        }
        many => {
            r.err("spec", format!("has {}; give only one", many.join(" and ")));
            None
        }
    };

    let policy = match spec.get("policy") {
        None => UpgradePolicy::default(),
        Some(v) => read_policy(&mut r, v),
    };
    let canary = r.int(&spec, "spec", "canary", 1);
    let batch = spec
        .get("batchSize")
        .map(|_| r.int(&spec, "spec", "batchSize", 1));
    let paused = r.bool(&spec, "spec", "paused", false);
    let to_count = |r: &mut Reader, f: &str, v: i64| {
        usize::try_from(v).unwrap_or_else(|_| {
            r.err(f, format!("should be greater than or equal to 0, got {v}"));
            0
        })
    };
    let canary = to_count(&mut r, "spec.canary", canary);
    let batch = batch.map(|b| to_count(&mut r, "spec.batchSize", b));
    let Some(kind) = kind else {
        return Err(r.errors);
    };
    if !r.errors.is_empty() {
        return Err(r.errors);
    }
    let mut plan = Plan::new(&name, kind, selector, policy, canary, batch)?;
    plan.paused = paused;
    Ok(plan)
}

fn read_kind(r: &mut Reader, key: &str, v: &Value) -> Option<PlanKind> {
    let field = format!("spec.{key}");
    match key {
        "driverUpgrade" | "kubernetesVersion" => {
            let known: &[&str] = if key == "driverUpgrade" {
                &["version", "scope"]
            } else {
                &["version"]
            };
            let map = r.object(v, &field, known)?;
            let Some(version) = r.string(map, &field, "version") else {
                r.err(&join(&field, "version"), "is required");
                return None;
            };
            Some(if key == "driverUpgrade" {
                let scope = match r.string(map, &field, "scope").as_deref() {
                    None | Some("host") => DriverScope::Host,
                    Some("guest") => DriverScope::Guest,
                    Some(other) => {
                        r.err(
                            &join(&field, "scope"),
                            format!("{other:?} should be host or guest"),
                        );
                        DriverScope::Host
                    }
                };
                PlanKind::DriverUpgrade { version, scope }
            } else {
                PlanKind::KubernetesVersion { version }
            })
        }
        "migRepartition" => {
            let map = r.object(v, &field, &["layout"])?;
            match map.get("layout") {
                Some(Value::String(s)) => Some(PlanKind::MigRepartition {
                    layout: MigLayout::Named(s.clone()),
                }),
                Some(Value::Array(items)) => {
                    let profiles: Option<Vec<String>> = items
                        .iter()
                        .map(|p| p.as_str().map(str::to_string))
                        .collect();
                    match profiles {
                        Some(p) => Some(PlanKind::MigRepartition {
                            layout: MigLayout::Profiles(p),
                        }),
                        None => {
                            r.err(&join(&field, "layout"), "should be a list of profile names");
                            None
                        }
                    }
                }
                _ => {
                    r.err(
                        &join(&field, "layout"),
                        "is required: all-<profile>, all-balanced or a list of profiles",
                    );
                    None
                }
            }
        }
        _ => {
            r.object(v, &field, &[])?;
            Some(PlanKind::NodeRotation)
        }
    }
}

fn read_policy(r: &mut Reader, v: &Value) -> UpgradePolicy {
    let f = "spec.policy";
    let known = [
        "maxParallelUpgrades",
        "maxUnavailable",
        "waitForCompletion",
        "podDeletion",
        "drain",
    ];
    let mut policy = UpgradePolicy::default();
    let Some(map) = r.object(v, f, &known) else {
        return policy;
    };
    policy.max_parallel_upgrades = r.int(map, f, "maxParallelUpgrades", 1);
    match map.get("maxUnavailable") {
        None => {}
        Some(Value::String(s)) => match IntOrPercent::parse_str(s) {
            Ok(v) => policy.max_unavailable = Some(v),
            Err(e) => r.err("spec.policy.maxUnavailable", e.message),
        },
        Some(v) => match v.as_i64().and_then(|i| i32::try_from(i).ok()) {
            Some(i) => policy.max_unavailable = Some(IntOrPercent::Int(i)),
            None => r.err(
                "spec.policy.maxUnavailable",
                "should be an integer or a percentage",
            ),
        },
    }
    if let Some(v) = map.get("waitForCompletion") {
        let f = "spec.policy.waitForCompletion";
        if let Some(m) = r.object(v, f, &["podSelector", "timeoutSeconds"]) {
            policy.wait_for_completion = Some(WaitForCompletionSpec {
                pod_selector: r.string(m, f, "podSelector").unwrap_or_default(),
                timeout_seconds: r.int(m, f, "timeoutSeconds", 0),
            });
        }
    }
    if let Some(v) = map.get("podDeletion") {
        let f = "spec.policy.podDeletion";
        let d = PodDeletionSpec::default();
        if let Some(m) = r.object(
            v,
            f,
            &["force", "timeoutSeconds", "deleteEmptyDir", "podSelector"],
        ) {
            policy.pod_deletion = Some(PodDeletionSpec {
                force: r.bool(m, f, "force", d.force),
                timeout_seconds: r.int(m, f, "timeoutSeconds", d.timeout_seconds),
                delete_empty_dir: r.bool(m, f, "deleteEmptyDir", d.delete_empty_dir),
                pod_selector: r.string(m, f, "podSelector").unwrap_or_default(),
            });
        }
    }
    if let Some(v) = map.get("drain") {
        let f = "spec.policy.drain";
        let d = DrainSpec::default();
        let known = [
            "enable",
            "force",
            "podSelector",
            "timeoutSeconds",
            "deleteEmptyDir",
        ];
        if let Some(m) = r.object(v, f, &known) {
            policy.drain = Some(DrainSpec {
                enable: r.bool(m, f, "enable", d.enable),
                force: r.bool(m, f, "force", d.force),
                pod_selector: r.string(m, f, "podSelector").unwrap_or_default(),
                timeout_seconds: r.int(m, f, "timeoutSeconds", d.timeout_seconds),
                delete_empty_dir: r.bool(m, f, "deleteEmptyDir", d.delete_empty_dir),
            });
        }
    }
    policy
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn doc(spec: Value) -> Value {
        json!({"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "p"}, "spec": spec})
    }

    #[test]
    fn a_full_document_reads() {
        let got = plan_from_document(&doc(json!({
            "nodeSelector": {"pool": "gpu"},
            "driverUpgrade": {"version": "580.82.07"},
            "canary": 2, "batchSize": 3, "paused": true,
            "policy": {"maxParallelUpgrades": 2, "maxUnavailable": "50%",
                       "waitForCompletion": {"podSelector": "app=train", "timeoutSeconds": 60},
                       "podDeletion": {"force": true},
                       "drain": {"enable": true, "deleteEmptyDir": true}},
        })));
        let plan = match got {
            Ok(p) => p,
            Err(e) => panic!("{e:?}"),
        };
        assert_eq!(plan.name, "p");
        assert_eq!(
            plan.kind,
            PlanKind::DriverUpgrade {
                version: "580.82.07".into(),
                scope: crate::worker::DriverScope::Host,
            }
        );
        assert_eq!(
            plan.node_selector.get("pool").map(String::as_str),
            Some("gpu")
        );
        assert_eq!(
            (plan.canary, plan.batch_size, plan.paused),
            (2, Some(3), true)
        );
        assert_eq!(plan.policy.max_parallel_upgrades, 2);
        assert_eq!(plan.policy.max_unavailable, Some(IntOrPercent::Percent(50)));
        assert_eq!(
            plan.policy.wait_for_completion,
            Some(WaitForCompletionSpec {
                pod_selector: "app=train".into(),
                timeout_seconds: 60
            })
        );
        assert_eq!(
            plan.policy
                .pod_deletion
                .as_ref()
                .map(|p| (p.force, p.timeout_seconds)),
            Some((true, 300))
        );
        assert!(plan.policy.drain_enabled());
    }

    #[test]
    fn a_driver_upgrade_reads_its_scope() {
        let table = [
            (json!({"version": "575.57.08"}), DriverScope::Host),
            (
                json!({"version": "575.57.08", "scope": "host"}),
                DriverScope::Host,
            ),
            (
                json!({"version": "575.57.08", "scope": "guest"}),
                DriverScope::Guest,
            ),
        ];
        for (upgrade, scope) in table {
            let plan =
                plan_from_document(&doc(json!({"driverUpgrade": upgrade.clone()}))).expect("reads");
            assert_eq!(
                plan.kind,
                PlanKind::DriverUpgrade {
                    version: "575.57.08".into(),
                    scope
                },
                "{upgrade}"
            );
        }
    }

    #[test]
    fn each_mistake_names_its_field() {
        let table: [(Value, &[&str]); 9] = [
            (
                json!({}),
                &[
                    "spec: needs one of driverUpgrade, migRepartition, kubernetesVersion, nodeRotation",
                ],
            ),
            (
                json!({"driverUpgrade": {"version": "1.0.0"}, "nodeRotation": {}}),
                &["spec: has driverUpgrade and nodeRotation; give only one"],
            ),
            (
                json!({"driverUpgrade": {}}),
                &["spec.driverUpgrade.version: is required"],
            ),
            (
                json!({"driverUpgrade": {"version": "575.57.08", "scope": "vm"}}),
                &["spec.driverUpgrade.scope: \"vm\" should be host or guest"],
            ),
            (
                json!({"migRepartition": {"layout": 7}}),
                &[
                    "spec.migRepartition.layout: is required: all-<profile>, all-balanced or a list of profiles",
                ],
            ),
            (
                json!({"nodeRotation": {}, "policy": {"maxUnavailable": "25"}}),
                &[
                    "spec.policy.maxUnavailable: invalid value for IntOrString: invalid type: string is not a percentage",
                ],
            ),
            (
                json!({"nodeRotation": {}, "policy": {"drain": {"enabled": true}}}),
                &[
                    "spec.policy.drain.enabled: unknown field (known: enable, force, podSelector, timeoutSeconds, deleteEmptyDir)",
                ],
            ),
            (
                json!({"nodeRotation": {}, "canary": -1, "batchSize": "2"}),
                &[
                    "spec.batchSize: should be an integer",
                    "spec.canary: should be greater than or equal to 0, got -1",
                ],
            ),
            (
                json!({"kubernetesVersion": {"version": "latest"}, "policy": {"maxParallelUpgrades": -2}}),
                &[
                    "spec.policy.maxParallelUpgrades: should be greater than or equal to 0, got -2",
                    "spec.kubernetesVersion.version: ",
                ],
            ),
        ];
        for (spec, want) in table {
            let got: Vec<String> = match plan_from_document(&doc(spec.clone())) {
                Ok(_) => Vec::new(),
                Err(errors) => errors.iter().map(ToString::to_string).collect(),
            };
            assert_eq!(got.len(), want.len(), "{spec}: {got:?}");
            for (g, w) in got.iter().zip(want) {
                assert!(g.starts_with(w), "{spec}: {g:?} does not start with {w:?}");
            }
        }
    }
}
