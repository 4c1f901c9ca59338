//! The Deployment core: which ReplicaSet carries the current template (named by its
//! `pod-template-hash`), how far to scale it and the old ones under the `RollingUpdate`
//! (maxSurge rounded up, maxUnavailable rounded down) or `Recreate` strategy, revision
//! numbering, history cleanup, and the status and conditions `kubectl rollout status` reads.
//!
//! Pure: no I/O.

use std::time::SystemTime;

use crate::plan::{Resource, Writes};
use serde_json::{Value, json};
use tessera_model::json::{int_or_zero, text};
use tessera_model::time::timestamp;

/// Label carrying the hash of a ReplicaSet's pod template.
pub const TEMPLATE_HASH: &str = "pod-template-hash";
/// Annotation carrying a ReplicaSet's revision.
pub const REVISION: &str = "deployment.kubernetes.io/revision";

/// What to do for a Deployment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeploymentPlan {
    /// A ReplicaSet to create for the current template.
    pub create: Option<Value>,
    /// ReplicaSets to scale: (name, replicas).
    pub scale: Vec<(String, i64)>,
    /// Old ReplicaSets to delete (beyond `revisionHistoryLimit`).
    pub delete: Vec<String>,
    /// The Deployment's new status.
    pub status: Value,
}

/// Upstream's hash alphabet (vowels and look-alikes removed).
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The `pod-template-hash` of a template: FNV-1a over its canonical JSON, encoded with
/// upstream's safe alphabet.
pub fn template_hash(template: &Value) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in canonical(template).bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash.to_string()
        .bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

/// JSON with object keys sorted, so equal templates hash equally.
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    format!(
                        "{}:{}",
                        serde_json::to_string(k).unwrap_or_default(),
                        canonical(&map[k])
                    )
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

/// An IntOrString against a total: percentages round up or down as asked.
fn resolve(value: Option<&Value>, total: i64, default: &str, round_up: bool) -> i64 {
    let value = value.cloned().unwrap_or_else(|| json!(default));
    match value {
        Value::Number(n) => n.as_i64().unwrap_or(0),
        Value::String(text) => match text
            .strip_suffix('%')
            .and_then(|p| p.trim().parse::<i64>().ok())
        {
            Some(percent) if round_up => (percent * total + 99) / 100,
            Some(percent) => percent * total / 100,
            None => text.parse().unwrap_or(0),
        },
        _ => 0,
    }
}

fn template_without_hash(rs: &Value) -> Value {
    let mut template = rs.pointer("/spec/template").cloned().unwrap_or(Value::Null);
    if let Some(labels) = template
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(TEMPLATE_HASH);
    }
    template
}

fn revision(rs: &Value) -> i64 {
    rs.pointer(&format!(
        "/metadata/annotations/{}",
        REVISION.replace('/', "~1")
    ))
    .and_then(Value::as_str)
    .and_then(|r| r.parse().ok())
    .unwrap_or(0)
}

fn condition(kind: &str, status: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "message": message,
           "lastUpdateTime": now, "lastTransitionTime": now})
}

impl DeploymentPlan {
    /// The writes that carry the plan out for `deployment`: the new ReplicaSet, scalings,
    /// deletions of old ReplicaSets, the new status.
    pub fn writes(self, deployment: &Value) -> Writes {
        let mut writes = Writes::default();
        writes.create(Resource::ReplicaSet, self.create);
        writes.patch(
            Resource::ReplicaSet,
            self.scale
                .into_iter()
                .map(|(name, replicas)| (name, json!({"spec": {"replicas": replicas}}))),
        );
        writes.delete(Resource::ReplicaSet, &self.delete);
        writes.status(deployment, self.status);
        writes
    }
}

/// Plans a Deployment's next step from the ReplicaSets it owns.
pub fn plan(deployment: &Value, replica_sets: &[Value], now: SystemTime) -> DeploymentPlan {
    let now = &timestamp(now);
    let mut plan = DeploymentPlan::default();
    let name = text(deployment, "/metadata/name");
    let replicas = deployment
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .max(0);
    let template = deployment
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null);
    let hash = template_hash(&template);
    let paused = deployment.pointer("/spec/paused").and_then(Value::as_bool) == Some(true);
    let new_rs = replica_sets
        .iter()
        .find(|rs| template_without_hash(rs) == template);
    let old: Vec<&Value> = replica_sets
        .iter()
        .filter(|rs| new_rs.is_none_or(|n| !std::ptr::eq(*rs, n)))
        .collect();
    let max_revision = replica_sets.iter().map(revision).max().unwrap_or(0);

    let new_name = match new_rs {
        Some(rs) => text(rs, "/metadata/name").to_string(),
        None => format!("{name}-{hash}"),
    };
    let new_spec_replicas = new_rs.map_or(0, |rs| int_or_zero(rs, "/spec/replicas"));
    let old_spec_total: i64 = old.iter().map(|rs| int_or_zero(rs, "/spec/replicas")).sum();
    let strategy = text(deployment, "/spec/strategy/type");

    if !paused {
        let target_new = if strategy == "Recreate" {
            // Old pods must be gone before new ones start.
            for rs in &old {
                if int_or_zero(rs, "/spec/replicas") > 0 {
                    plan.scale.push((text(rs, "/metadata/name").to_string(), 0));
                }
            }
            let old_running: i64 = old
                .iter()
                .map(|rs| int_or_zero(rs, "/status/replicas"))
                .sum();
            if old_running == 0 && old_spec_total == 0 {
                replicas
            } else {
                new_spec_replicas
            }
        } else {
            let surge = resolve(
                deployment.pointer("/spec/strategy/rollingUpdate/maxSurge"),
                replicas,
                "25%",
                true,
            );
            let mut unavailable = resolve(
                deployment.pointer("/spec/strategy/rollingUpdate/maxUnavailable"),
                replicas,
                "25%",
                false,
            );
            if surge == 0 && unavailable == 0 {
                unavailable = 1;
            }
            // Scale the new ReplicaSet up within the surge allowance.
            let total = new_spec_replicas + old_spec_total;
            let room = (replicas + surge - total).max(0);
            let target_new = if new_spec_replicas >= replicas {
                replicas
            } else {
                (new_spec_replicas + room).min(replicas)
            };
            // Scale old ones down without dropping below the availability floor.
            let min_available = replicas - unavailable;
            let available: i64 = replica_sets
                .iter()
                .map(|rs| int_or_zero(rs, "/status/availableReplicas"))
                .sum();
            let new_unavailable = (new_spec_replicas
                - new_rs.map_or(0, |rs| int_or_zero(rs, "/status/availableReplicas")))
            .max(0);
            let mut removable = (total - min_available - new_unavailable)
                .max(0)
                .min((available - min_available).max(0) + old_unavailable(&old));
            let mut olds: Vec<&&Value> = old
                .iter()
                .filter(|rs| int_or_zero(rs, "/spec/replicas") > 0)
                .collect();
            olds.sort_by_key(|rs| revision(rs));
            for rs in olds {
                if removable == 0 {
                    break;
                }
                let current = int_or_zero(rs, "/spec/replicas");
                let cut = current.min(removable);
                removable -= cut;
                plan.scale
                    .push((text(rs, "/metadata/name").to_string(), current - cut));
            }
            target_new
        };
        match new_rs {
            Some(_) if new_spec_replicas != target_new => {
                plan.scale.push((new_name.clone(), target_new))
            }
            Some(_) => {}
            None => {
                let mut rs_template = template.clone();
                if !rs_template["metadata"].is_object() {
                    rs_template["metadata"] = json!({});
                }
                if !rs_template["metadata"]["labels"].is_object() {
                    rs_template["metadata"]["labels"] = json!({});
                }
                rs_template["metadata"]["labels"][TEMPLATE_HASH] = json!(hash);
                let mut selector = deployment
                    .pointer("/spec/selector")
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                if !selector["matchLabels"].is_object() {
                    selector["matchLabels"] = json!({});
                }
                selector["matchLabels"][TEMPLATE_HASH] = json!(hash);
                let mut labels = rs_template["metadata"]["labels"].clone();
                labels[TEMPLATE_HASH] = json!(hash);
                plan.create = Some(json!({
                    "apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {
                        "name": new_name, "labels": labels,
                        "annotations": {
                            REVISION: (max_revision + 1).to_string(),
                            "deployment.kubernetes.io/desired-replicas": replicas.to_string(),
                            "deployment.kubernetes.io/max-replicas": (replicas + resolve(deployment.pointer("/spec/strategy/rollingUpdate/maxSurge"), replicas, "25%", true)).to_string(),
                        },
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                            "uid": text(deployment, "/metadata/uid"), "controller": true, "blockOwnerDeletion": true}],
                    },
                    "spec": {"replicas": target_new, "minReadySeconds": int_or_zero(deployment, "/spec/minReadySeconds"),
                             "selector": selector, "template": rs_template},
                }));
            }
        }
        // History beyond revisionHistoryLimit.
        let limit = deployment
            .pointer("/spec/revisionHistoryLimit")
            .and_then(Value::as_i64)
            .unwrap_or(10)
            .max(0) as usize;
        let mut idle: Vec<&&Value> = old
            .iter()
            .filter(|rs| {
                int_or_zero(rs, "/spec/replicas") == 0 && int_or_zero(rs, "/status/replicas") == 0
            })
            .collect();
        if idle.len() > limit {
            idle.sort_by_key(|rs| revision(rs));
            let excess = idle.len() - limit;
            plan.delete = idle
                .into_iter()
                .take(excess)
                .map(|rs| text(rs, "/metadata/name").to_string())
                .collect();
        }
    }

    // Status from the ReplicaSets' own statuses.
    let sum =
        |pointer: &str| -> i64 { replica_sets.iter().map(|rs| int_or_zero(rs, pointer)).sum() };
    let updated = new_rs.map_or(0, |rs| int_or_zero(rs, "/status/replicas"));
    let available = sum("/status/availableReplicas");
    let total = sum("/status/replicas");
    let unavailable = (replicas - available).max(0);
    let max_unavailable = if strategy == "Recreate" {
        0
    } else {
        resolve(
            deployment.pointer("/spec/strategy/rollingUpdate/maxUnavailable"),
            replicas,
            "25%",
            false,
        )
    };
    let previous: Vec<Value> = deployment
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let keep_time = |kind: &str, status: &str, fresh: Value| -> Value {
        match previous
            .iter()
            .find(|c| c["type"] == kind && c["status"] == status)
        {
            Some(old) => {
                let mut kept = fresh;
                kept["lastTransitionTime"] = old["lastTransitionTime"].clone();
                kept
            }
            None => fresh,
        }
    };
    let available_condition = if available >= replicas - max_unavailable {
        keep_time(
            "Available",
            "True",
            condition(
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
                now,
            ),
        )
    } else {
        keep_time(
            "Available",
            "False",
            condition(
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
                now,
            ),
        )
    };
    let complete =
        new_rs.is_some() && updated == replicas && total == replicas && available >= replicas;
    let progressing = if complete {
        condition(
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            &format!("ReplicaSet \"{new_name}\" has successfully progressed."),
            now,
        )
    } else if new_rs.is_none() {
        condition(
            "Progressing",
            "True",
            "NewReplicaSetCreated",
            &format!("Created new replica set \"{new_name}\""),
            now,
        )
    } else {
        condition(
            "Progressing",
            "True",
            "ReplicaSetUpdated",
            &format!("ReplicaSet \"{new_name}\" is progressing."),
            now,
        )
    };
    let progressing = keep_time("Progressing", "True", progressing);
    plan.status = json!({
        "observedGeneration": int_or_zero(deployment, "/metadata/generation"),
        "replicas": total,
        "updatedReplicas": updated,
        "readyReplicas": sum("/status/readyReplicas"),
        "availableReplicas": available,
        "unavailableReplicas": unavailable,
        "conditions": [available_condition, progressing],
    });
    plan
}

fn old_unavailable(old: &[&Value]) -> i64 {
    old.iter()
        .map(|rs| {
            (int_or_zero(rs, "/spec/replicas") - int_or_zero(rs, "/status/availableReplicas"))
                .max(0)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(replicas: i64, image: &str, strategy: Value) -> Value {
        json!({"metadata": {"name": "web", "uid": "d", "generation": 2},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, "strategy": strategy,
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": image}]}}}})
    }

    fn rs_for(deployment: &Value, spec_replicas: i64, ready: i64, revision: i64) -> Value {
        let plan = plan(deployment, &[], SystemTime::UNIX_EPOCH);
        let mut rs = plan.create.unwrap();
        rs["spec"]["replicas"] = json!(spec_replicas);
        rs["metadata"]["annotations"][REVISION] = json!(revision.to_string());
        rs["status"] =
            json!({"replicas": ready, "readyReplicas": ready, "availableReplicas": ready});
        rs
    }

    fn rolling() -> Value {
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    }

    #[test]
    fn a_new_deployment_creates_its_replica_set() {
        let d = deployment(3, "app:1", rolling());
        let plan = plan(&d, &[], SystemTime::UNIX_EPOCH);
        let rs = plan.create.unwrap();
        let hash = template_hash(&d["spec"]["template"]);
        assert_eq!(rs["metadata"]["name"], format!("web-{hash}"));
        assert_eq!(
            rs["spec"]["selector"]["matchLabels"][TEMPLATE_HASH],
            hash.as_str()
        );
        assert_eq!(rs["metadata"]["annotations"][REVISION], "1");
        assert_eq!(rs["spec"]["replicas"], 3);
        assert!(hash.bytes().all(|b| ALPHANUMS.contains(&b)));
    }

    #[test]
    fn rolling_update_surges_then_scales_old_down() {
        let v1 = deployment(3, "app:1", rolling());
        let old = rs_for(&v1, 3, 3, 1);
        let v2 = deployment(3, "app:2", rolling());
        // Step 1: create the new ReplicaSet with one surge replica; keep the old at 3.
        let step = plan(&v2, std::slice::from_ref(&old), SystemTime::UNIX_EPOCH);
        let created = step.create.clone().unwrap();
        assert_eq!(created["spec"]["replicas"], 1);
        assert_eq!(created["metadata"]["annotations"][REVISION], "2");
        assert!(step.scale.is_empty(), "{:?}", step.scale);
        // Step 2: once the new replica is available, one old replica goes.
        let mut new = created;
        new["status"] = json!({"replicas": 1, "readyReplicas": 1, "availableReplicas": 1});
        let step = plan(&v2, &[old.clone(), new.clone()], SystemTime::UNIX_EPOCH);
        assert_eq!(
            step.scale,
            vec![(old["metadata"]["name"].as_str().unwrap().to_string(), 2)]
        );
        // Finished: all new and available, no old.
        let mut old_done = old.clone();
        old_done["spec"]["replicas"] = json!(0);
        old_done["status"] = json!({"replicas": 0});
        new["spec"]["replicas"] = json!(3);
        new["status"] = json!({"replicas": 3, "readyReplicas": 3, "availableReplicas": 3});
        let done = plan(&v2, &[old_done, new], SystemTime::UNIX_EPOCH);
        assert!(done.scale.is_empty());
        assert_eq!(done.status["updatedReplicas"], 3);
        assert_eq!(
            done.status["conditions"][1]["reason"],
            "NewReplicaSetAvailable"
        );
        assert_eq!(
            done.status["conditions"][0]["reason"],
            "MinimumReplicasAvailable"
        );
    }

    #[test]
    fn recreate_stops_old_pods_first() {
        let strategy = json!({"type": "Recreate"});
        let old = rs_for(&deployment(2, "app:1", strategy.clone()), 2, 2, 1);
        let v2 = deployment(2, "app:2", strategy);
        let step = plan(&v2, std::slice::from_ref(&old), SystemTime::UNIX_EPOCH);
        assert_eq!(
            step.scale,
            vec![(old["metadata"]["name"].as_str().unwrap().to_string(), 0)]
        );
        assert_eq!(step.create.unwrap()["spec"]["replicas"], 0);
    }

    #[test]
    fn percentages_round_like_upstream() {
        assert_eq!(resolve(Some(&json!("25%")), 10, "25%", true), 3);
        assert_eq!(resolve(Some(&json!("25%")), 10, "25%", false), 2);
        assert_eq!(resolve(None, 4, "25%", true), 1);
        assert_eq!(resolve(Some(&json!(2)), 4, "25%", true), 2);
    }

    #[test]
    fn history_beyond_the_limit_is_deleted() {
        let mut d = deployment(1, "app:9", rolling());
        d["spec"]["revisionHistoryLimit"] = json!(1);
        let olds: Vec<Value> = (1..=3)
            .map(|r| {
                let mut rs = rs_for(&deployment(1, &format!("app:{r}"), rolling()), 0, 0, r);
                rs["status"] = json!({"replicas": 0});
                rs
            })
            .collect();
        let plan = plan(&d, &olds, SystemTime::UNIX_EPOCH);
        let deleted: Vec<String> = plan.delete;
        assert_eq!(deleted.len(), 2);
        assert_eq!(deleted[0], olds[0]["metadata"]["name"].as_str().unwrap());
    }
}
