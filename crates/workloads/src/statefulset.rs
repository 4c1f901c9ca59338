//! The StatefulSet core: pods with stable names `<set>-<ordinal>`, started in order and
//! stopped in reverse (`OrderedReady`) or all at once (`Parallel`), failed pods recreated under
//! the same name, and rolling updates from the highest ordinal down (honouring `partition`);
//! each pod's claims from `volumeClaimTemplates` created before it, their owners kept in line
//! with the retention policy ([`claims`]).
//!
//! Pure: no I/O.

pub mod claims;

use crate::plan::{Resource, Writes};
use serde_json::{Value, json};

use crate::daemonset::REVISION_HASH;
use crate::deployment::template_hash;
use tessera_model::conditions::pod_is_running_and_ready;
use tessera_model::json::text;

/// What to do for a StatefulSet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatefulSetPlan {
    /// Ordinals to create.
    pub create: Vec<i64>,
    /// Names of pods to delete.
    pub delete: Vec<String>,
    /// Claims to create (before the pods that use them).
    pub create_claims: Vec<Value>,
    /// Claims whose owners change under the retention policy: (name, ownerReferences).
    pub claim_owners: Vec<(String, Vec<Value>)>,
    /// The new status.
    pub status: Value,
}

fn ordinal(set_name: &str, pod: &Value) -> Option<i64> {
    text(pod, "/metadata/name")
        .strip_prefix(&format!("{set_name}-"))?
        .parse()
        .ok()
}

/// Plans a StatefulSet's next step from the pods it owns and the claims of its
/// `volumeClaimTemplates` that exist (those labelled with its selector).
pub fn plan(set: &Value, pods: &[Value], existing_claims: &[Value]) -> StatefulSetPlan {
    let name = text(set, "/metadata/name");
    let replicas = set
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .max(0);
    let parallel = text(set, "/spec/podManagementPolicy") == "Parallel";
    // `spec.ordinals.start` shifts the ordinal range (LeaderWorkerSet workers start at 1).
    let start = set
        .pointer("/spec/ordinals/start")
        .and_then(Value::as_i64)
        .unwrap_or(0)
        .max(0);
    let end = start + replicas;
    let revision = template_hash(set.pointer("/spec/template").unwrap_or(&Value::Null));
    let mut plan = StatefulSetPlan::default();
    let mut by_ordinal: Vec<(i64, &Value)> = pods
        .iter()
        .filter_map(|p| ordinal(name, p).map(|o| (o, p)))
        .collect();
    by_ordinal.sort_by_key(|(o, _)| *o);
    let deleting = |p: &Value| p.pointer("/metadata/deletionTimestamp").is_some();

    // Failed pods are removed, to come back under the same name.
    for (_, pod) in &by_ordinal {
        if text(pod, "/status/phase") == "Failed" && !deleting(pod) {
            plan.delete.push(text(pod, "/metadata/name").to_string());
        }
    }
    let live: Vec<(i64, &Value)> = by_ordinal
        .iter()
        .filter(|(_, p)| text(p, "/status/phase") != "Failed")
        .map(|(o, p)| (*o, *p))
        .collect();
    let present = |o: i64| live.iter().any(|(x, _)| *x == o);
    let all_ready_below = |o: i64| {
        live.iter()
            .filter(|(x, _)| *x < o)
            .all(|(_, p)| pod_is_running_and_ready(p) && !deleting(p))
    };

    // Scale up: lowest missing ordinal first; in order unless Parallel.
    for o in start..end {
        if present(o) {
            continue;
        }
        if parallel || (all_ready_below(o) && (start..o).all(present)) {
            plan.create.push(o);
            if !parallel {
                break;
            }
        } else {
            break;
        }
    }
    // Scale down: highest ordinal first; one at a time unless Parallel.
    let mut extra: Vec<&(i64, &Value)> = live
        .iter()
        .filter(|(o, _)| *o >= end || *o < start)
        .collect();
    extra.sort_by_key(|(o, _)| std::cmp::Reverse(*o));
    let in_flight = live.iter().any(|(_, p)| deleting(p));
    if parallel {
        plan.delete.extend(
            extra
                .iter()
                .filter(|(_, p)| !deleting(p))
                .map(|(_, p)| text(p, "/metadata/name").to_string()),
        );
    } else if let Some((_, pod)) = extra.first()
        && !in_flight
        && live
            .iter()
            .filter(|(o, _)| *o < end)
            .all(|(_, p)| pod_is_running_and_ready(p))
    {
        plan.delete.push(text(pod, "/metadata/name").to_string());
    }
    // Rolling update: outdated pods at or above the partition, highest first, one at a time.
    let partition = set
        .pointer("/spec/updateStrategy/rollingUpdate/partition")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let rolling = text(set, "/spec/updateStrategy/type") != "OnDelete";
    let settled = plan.create.is_empty()
        && plan.delete.is_empty()
        && !in_flight
        && live.iter().all(|(_, p)| pod_is_running_and_ready(p));
    if rolling && settled {
        let outdated = live.iter().rev().find(|(o, p)| {
            *o >= start + partition
                && *o < end
                && text(p, &format!("/metadata/labels/{REVISION_HASH}")) != revision
        });
        if let Some((_, pod)) = outdated {
            plan.delete.push(text(pod, "/metadata/name").to_string());
        }
    }
    plan_claims(set, &live, (start, end), existing_claims, &mut plan);
    let current: Vec<&Value> = live
        .iter()
        .filter(|(o, _)| *o >= start && *o < end)
        .map(|(_, p)| *p)
        .collect();
    let ready = current
        .iter()
        .filter(|p| pod_is_running_and_ready(p))
        .count();
    let updated = current
        .iter()
        .filter(|p| text(p, &format!("/metadata/labels/{REVISION_HASH}")) == revision)
        .count();
    plan.status = json!({
        "observedGeneration": set.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0),
        "replicas": current.len(),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "currentReplicas": updated,
        "updatedReplicas": updated,
        "currentRevision": format!("{name}-{revision}"),
        "updateRevision": format!("{name}-{revision}"),
    });
    plan
}

/// The claims side of a plan, as upstream's controller keeps it: a pod to create waits while
/// one of its claims is being deleted, and its missing claims are created; a pending pod's
/// missing claims are created again; the claims of every live pod get the owners the
/// retention policy gives them (a pod scaled away hands its claims to itself under
/// `whenScaled: Delete`, before it is deleted).
fn plan_claims(
    set: &Value,
    live: &[(i64, &Value)],
    (start, end): (i64, i64),
    existing: &[Value],
    plan: &mut StatefulSetPlan,
) {
    plan.create
        .retain(|ordinal| !claims::terminating(set, *ordinal, existing));
    let pending = live
        .iter()
        .filter(|(_, p)| text(p, "/status/phase") == "Pending")
        .map(|(o, _)| *o);
    let mut wanted: Vec<i64> = plan.create.iter().copied().chain(pending).collect();
    wanted.sort_unstable();
    wanted.dedup();
    for ordinal in wanted {
        plan.create_claims
            .extend(claims::missing(set, ordinal, existing));
    }
    for (ordinal, pod) in live {
        if pod.pointer("/metadata/deletionTimestamp").is_some() {
            continue;
        }
        let condemned = *ordinal < start || *ordinal >= end;
        for claim in claims::of_pod(set, *ordinal, existing) {
            if let Some(owners) = claims::owners_due(claim, set, pod, condemned) {
                plan.claim_owners
                    .push((text(claim, "/metadata/name").to_string(), owners));
            }
        }
    }
}

impl StatefulSetPlan {
    /// The writes that carry the plan out for `set`: claims' new owners, deletions, missing
    /// claims, a pod per ordinal, the new status.
    pub fn writes(self, set: &Value) -> Writes {
        let mut writes = Writes::default();
        writes.patch(
            Resource::PersistentVolumeClaim,
            self.claim_owners
                .into_iter()
                .map(|(name, owners)| (name, json!({"metadata": {"ownerReferences": owners}}))),
        );
        writes.delete(Resource::Pod, &self.delete);
        writes.create(Resource::PersistentVolumeClaim, self.create_claims);
        writes.create(
            Resource::Pod,
            self.create.iter().map(|ordinal| pod_for(set, *ordinal)),
        );
        writes.status(set, self.status);
        writes
    }
}

/// The pod of an ordinal.
pub fn pod_for(set: &Value, ordinal: i64) -> Value {
    let name = text(set, "/metadata/name");
    let pod_name = format!("{name}-{ordinal}");
    let mut pod = crate::replicaset::pod_from_template(set, "apps/v1", "StatefulSet", "");
    if let Some(metadata) = pod["metadata"].as_object_mut() {
        metadata.remove("generateName");
    }
    pod["metadata"]["name"] = json!(pod_name);
    if !pod["metadata"]["labels"].is_object() {
        pod["metadata"]["labels"] = json!({});
    }
    let revision = template_hash(set.pointer("/spec/template").unwrap_or(&Value::Null));
    pod["metadata"]["labels"][REVISION_HASH] = json!(revision);
    pod["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] = json!(pod_name);
    pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] = json!(ordinal.to_string());
    pod["spec"]["hostname"] = json!(pod_name);
    if let Some(service) = set
        .pointer("/spec/serviceName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        pod["spec"]["subdomain"] = json!(service);
    }
    claims::add_volumes(set, ordinal, &mut pod);
    pod
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Write;

    fn set(replicas: i64, policy: &str) -> Value {
        json!({"metadata": {"name": "db", "uid": "u", "generation": 1},
               "spec": {"replicas": replicas, "podManagementPolicy": policy, "serviceName": "db",
                        "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    }

    fn plan_of(set: &Value, pods: &[Value]) -> StatefulSetPlan {
        plan(set, pods, &[])
    }

    fn pod(set_value: &Value, ordinal: i64, ready: bool) -> Value {
        let mut pod = pod_for(set_value, ordinal);
        pod["status"] = if ready {
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
        } else {
            json!({"phase": "Pending"})
        };
        pod
    }

    #[test]
    fn ordered_start_waits_for_each_ordinal() {
        let s = set(3, "OrderedReady");
        assert_eq!(plan_of(&s, &[]).create, [0]);
        assert_eq!(plan_of(&s, &[pod(&s, 0, false)]).create, Vec::<i64>::new());
        assert_eq!(plan_of(&s, &[pod(&s, 0, true)]).create, [1]);
        let parallel = set(3, "Parallel");
        assert_eq!(plan_of(&parallel, &[]).create, [0, 1, 2]);
        let p = pod_for(&s, 2);
        assert_eq!(
            (
                p["metadata"]["name"].as_str(),
                p["spec"]["hostname"].as_str(),
                p["spec"]["subdomain"].as_str()
            ),
            (Some("db-2"), Some("db-2"), Some("db"))
        );
    }

    #[test]
    fn pods_get_a_claim_volume_per_claim_template() {
        let mut s = set(1, "OrderedReady");
        s["spec"]["template"]["spec"]["volumes"] = json!([
            {"name": "data", "emptyDir": {}},
            {"name": "cache", "emptyDir": {}}
        ]);
        let cases = [
            (
                json!(null),
                json!([{"name": "data", "emptyDir": {}}, {"name": "cache", "emptyDir": {}}]),
            ),
            (
                json!([{"metadata": {"name": "data"}}, {"metadata": {"name": "logs"}}]),
                json!([
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-3"}},
                    {"name": "logs", "persistentVolumeClaim": {"claimName": "logs-db-3"}},
                    {"name": "cache", "emptyDir": {}}
                ]),
            ),
        ];
        for (templates, volumes) in cases {
            s["spec"]["volumeClaimTemplates"] = templates;
            assert_eq!(pod_for(&s, 3)["spec"]["volumes"], volumes);
        }
    }

    #[test]
    fn scale_down_highest_first_and_failed_pods_return() {
        let s = set(1, "OrderedReady");
        let pods = [pod(&s, 0, true), pod(&s, 1, true), pod(&s, 2, true)];
        assert_eq!(plan_of(&s, &pods).delete, ["db-2"]);
        let mut failed = pod(&s, 0, true);
        failed["status"]["phase"] = json!("Failed");
        let planned = plan_of(&s, &[failed]);
        assert_eq!(planned.delete, ["db-0"]);
    }

    #[test]
    fn claims_come_before_their_pods_and_follow_the_retention_policy() {
        let mut s = set(2, "Parallel");
        s["metadata"]["namespace"] = json!("ns");
        s["spec"]["selector"] = json!({"matchLabels": {"app": "db"}});
        s["spec"]["volumeClaimTemplates"] =
            json!([{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]);
        s["spec"]["persistentVolumeClaimRetentionPolicy"] =
            json!({"whenDeleted": "Retain", "whenScaled": "Delete"});
        let first = plan(&s, &[], &[]);
        let writes = first.clone().writes(&s);
        let order: Vec<String> = writes
            .0
            .iter()
            .filter_map(|w| match w {
                Write::Create(resource, object) => {
                    Some(format!("{resource:?} {}", text(object, "/metadata/name")))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            order,
            [
                "PersistentVolumeClaim data-db-0",
                "PersistentVolumeClaim data-db-1",
                "Pod db-0",
                "Pod db-1"
            ]
        );
        let volumes = &pod_for(&s, 1)["spec"]["volumes"];
        assert_eq!(
            volumes,
            &json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-1"}}])
        );
        // Created claims exist now: none twice; a pending pod whose claim went gets it back.
        let existing: Vec<Value> = first.create_claims.clone();
        let mut pods = vec![pod(&s, 0, true), pod(&s, 1, false)];
        pods[0]["metadata"]["uid"] = json!("p0");
        pods[1]["metadata"]["uid"] = json!("p1");
        assert!(plan(&s, &pods, &existing).create_claims.is_empty());
        let again = plan(&s, &pods, &existing[..1]).create_claims;
        assert_eq!(again.len(), 1);
        assert_eq!(again[0]["metadata"]["name"], "data-db-1");
        // Scaled down to one: pod db-1's claim is handed to the pod before it goes.
        let mut smaller = s.clone();
        smaller["spec"]["replicas"] = json!(1);
        let down = plan(&smaller, &pods, &existing);
        assert_eq!(down.delete, ["db-1"]);
        assert_eq!(down.claim_owners.len(), 1);
        let (claim, owners) = &down.claim_owners[0];
        assert_eq!(claim, "data-db-1");
        assert_eq!(owners[0]["kind"], "Pod");
        assert_eq!(owners[0]["uid"], "p1");
        // A pod waits while its claim is being deleted.
        let mut going = existing.clone();
        going[0]["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        assert_eq!(plan(&s, &[], &going).create, [1]);
    }

    #[test]
    fn rolling_updates_go_from_the_top_and_respect_the_partition() {
        let old = set(3, "OrderedReady");
        let pods: Vec<Value> = (0..3).map(|o| pod(&old, o, true)).collect();
        let mut new = set(3, "OrderedReady");
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("v2");
        assert_eq!(plan_of(&new, &pods).delete, ["db-2"]);
        new["spec"]["updateStrategy"] =
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 3}});
        assert!(plan_of(&new, &pods).delete.is_empty());
    }
}
