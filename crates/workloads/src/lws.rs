//! The LeaderWorkerSet core (leaderworkerset.x-k8s.io/v1): a leader StatefulSet of
//! `replicas` groups and, per leader pod, a worker StatefulSet of `size - 1` pods (ordinals
//! from 1, owned by the leader so a group lives and dies together), with upstream's labels
//! and `LWS_*` environment, `LeaderCreated`/`LeaderReady` startup, and
//! `RecreateGroupOnPodRestart` recreating a whole group when one of its pods restarts, and
//! `leaderworkerset.sigs.k8s.io/exclusive-topology` as pod (anti-)affinity: one group per
//! domain.
//!
//! Pure: no I/O.

use std::time::SystemTime;

use crate::plan::{Resource, Writes};
use serde_json::{Value, json};
use tessera_model::conditions::pod_is_running_and_ready;
use tessera_model::json::text;
use tessera_model::time::timestamp;

/// The LeaderWorkerSet's name.
pub const NAME: &str = "leaderworkerset.sigs.k8s.io/name";
/// The group a pod belongs to.
pub const GROUP_INDEX: &str = "leaderworkerset.sigs.k8s.io/group-index";
/// The pod's index in its group (0 is the leader).
pub const WORKER_INDEX: &str = "leaderworkerset.sigs.k8s.io/worker-index";
/// A key unique to a group.
pub const GROUP_KEY: &str = "leaderworkerset.sigs.k8s.io/group-key";
/// The group size, annotated on leaders.
pub const SIZE: &str = "leaderworkerset.sigs.k8s.io/size";
/// One group per domain of this node label.
pub const EXCLUSIVE_TOPOLOGY: &str = "leaderworkerset.sigs.k8s.io/exclusive-topology";
/// The ordinal label StatefulSet pods carry.
const POD_INDEX: &str = "apps.kubernetes.io/pod-index";

/// Exclusive placement as affinity: leaders avoid each other's domains; a group's workers
/// join their leader's domain and avoid the other leaders'.
fn exclusive(template: &mut Value, name: &str, key: &str, group: Option<i64>) {
    let leaders = json!([{"key": NAME, "operator": "In", "values": [name]},
                         {"key": WORKER_INDEX, "operator": "In", "values": ["0"]}]);
    let affinity = &mut template["spec"]["affinity"];
    match group {
        None => {
            affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
                json!([{"labelSelector": {"matchExpressions": leaders}, "topologyKey": key}]);
            // Only nodes that are in some domain of the key.
            affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = json!({
                "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "Exists"}]}]
            });
        }
        Some(group) => {
            let mut own = leaders.clone();
            let mut others = leaders;
            if let (Some(own), Some(others)) = (own.as_array_mut(), others.as_array_mut()) {
                own.push(
                    json!({"key": POD_INDEX, "operator": "In", "values": [group.to_string()]}),
                );
                others.push(
                    json!({"key": POD_INDEX, "operator": "NotIn", "values": [group.to_string()]}),
                );
            }
            affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
                json!([{"labelSelector": {"matchExpressions": own}, "topologyKey": key}]);
            affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
                json!([{"labelSelector": {"matchExpressions": others}, "topologyKey": key}]);
        }
    }
}

/// What to do for a LeaderWorkerSet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LwsPlan {
    /// StatefulSets to create (the leader set, or a group's worker set).
    pub create: Vec<Value>,
    /// StatefulSets to scale: (name, replicas).
    pub scale: Vec<(String, i64)>,
    /// Leader pods to delete so their whole group is recreated.
    pub restart_leaders: Vec<String>,
    /// The headless Service giving pods DNS names.
    pub service: Option<Value>,
    /// The new status.
    pub status: Value,
}

fn label<'a>(value: &'a Value, key: &str) -> &'a str {
    text(
        value,
        &format!("/metadata/labels/{}", key.replace('/', "~1")),
    )
}

fn restarted(pod: &Value) -> bool {
    text(pod, "/status/phase") == "Failed"
        || pod
            .pointer("/status/containerStatuses")
            .and_then(Value::as_array)
            .is_some_and(|s| {
                s.iter()
                    .any(|c| c.get("restartCount").and_then(Value::as_i64).unwrap_or(0) > 0)
            })
}

fn env(pairs: Vec<Value>, template: &mut Value) {
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(containers)) = template.pointer_mut(&format!("/spec/{list}")) {
            for container in containers {
                if !container["env"].is_array() {
                    container["env"] = json!([]);
                }
                if let Some(env) = container["env"].as_array_mut() {
                    env.extend(pairs.iter().cloned());
                }
            }
        }
    }
}

fn owner(kind: &str, api_version: &str, name: &str, uid: &str) -> Value {
    json!([{"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true}])
}

impl LwsPlan {
    /// The writes that carry the plan out for `lws`: the headless Service, new StatefulSets,
    /// scalings, leader pods deleted for a group restart, the new status.
    pub fn writes(self, lws: &Value) -> Writes {
        let mut writes = Writes::default();
        writes.create(Resource::Service, self.service);
        writes.create(Resource::StatefulSet, self.create);
        writes.patch(
            Resource::StatefulSet,
            self.scale
                .into_iter()
                .map(|(name, replicas)| (name, json!({"spec": {"replicas": replicas}}))),
        );
        writes.delete(Resource::Pod, &self.restart_leaders);
        writes.status(lws, self.status);
        writes
    }
}

/// Plans a LeaderWorkerSet's next step from its StatefulSets and pods.
pub fn plan(lws: &Value, sets: &[Value], pods: &[Value], now: SystemTime) -> LwsPlan {
    let now = &timestamp(now);
    let mut plan = LwsPlan::default();
    let name = text(lws, "/metadata/name");
    let namespace = text(lws, "/metadata/namespace");
    let uid = text(lws, "/metadata/uid");
    let replicas = lws
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .max(0);
    let size = lws
        .pointer("/spec/leaderWorkerTemplate/size")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .max(1);
    let leader_ready_first = text(lws, "/spec/startupPolicy") == "LeaderReady";
    let exclusive_key = lws
        .pointer(&format!(
            "/metadata/annotations/{}",
            EXCLUSIVE_TOPOLOGY.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        .map(String::from);
    let recreate_groups = text(lws, "/spec/leaderWorkerTemplate/restartPolicy") != "None";
    let worker_template = lws
        .pointer("/spec/leaderWorkerTemplate/workerTemplate")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let leader_template = lws
        .pointer("/spec/leaderWorkerTemplate/leaderTemplate")
        .cloned()
        .unwrap_or_else(|| worker_template.clone());
    let common_env = |index_ref: Value| {
        vec![
            json!({"name": "LWS_GROUP_SIZE", "value": size.to_string()}),
            json!({"name": "LWS_WORKER_INDEX", "valueFrom": index_ref}),
        ]
    };
    plan.service = Some(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "ownerReferences": owner("LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1", name, uid)},
        "spec": {"clusterIP": "None", "selector": {NAME: name}, "publishNotReadyAddresses": true}}));

    // The leader StatefulSet.
    match sets.iter().find(|s| text(s, "/metadata/name") == name) {
        None => {
            let mut template = leader_template;
            if !template["metadata"]["labels"].is_object() {
                template["metadata"]["labels"] = json!({});
            }
            template["metadata"]["labels"][NAME] = json!(name);
            template["metadata"]["labels"][WORKER_INDEX] = json!("0");
            if !template["metadata"]["annotations"].is_object() {
                template["metadata"]["annotations"] = json!({});
            }
            template["metadata"]["annotations"][SIZE] = json!(size.to_string());
            let mut pairs = vec![
                json!({"name": "LWS_LEADER_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}),
                json!({"name": "LWS_LEADER_ADDRESS", "value": format!("$(LWS_LEADER_NAME).{name}.{namespace}")}),
            ];
            pairs.extend(common_env(
                json!({"fieldRef": {"fieldPath": format!("metadata.labels['{WORKER_INDEX}']")}}),
            ));
            env(pairs, &mut template);
            if let Some(key) = &exclusive_key {
                exclusive(&mut template, name, key, None);
            }
            plan.create.push(json!({
                "apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": name, "labels": {NAME: name}, "ownerReferences": owner("LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1", name, uid)},
                "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
                         "selector": {"matchLabels": {NAME: name, WORKER_INDEX: "0"}}, "template": template},
            }));
        }
        Some(set) if set.pointer("/spec/replicas").and_then(Value::as_i64) != Some(replicas) => {
            plan.scale.push((name.to_string(), replicas));
        }
        Some(_) => {}
    }

    // One worker StatefulSet per leader pod.
    let mut ready_groups = 0;
    for group in 0..replicas {
        let leader_name = format!("{name}-{group}");
        let Some(leader) = pods.iter().find(|p| {
            text(p, "/metadata/name") == leader_name
                && p.pointer("/metadata/deletionTimestamp").is_none()
        }) else {
            continue;
        };
        let members: Vec<&Value> = pods
            .iter()
            .filter(|p| label(p, GROUP_INDEX) == group.to_string())
            .collect();
        if recreate_groups && (restarted(leader) || members.iter().any(|p| restarted(p))) {
            plan.restart_leaders.push(leader_name.clone());
            continue;
        }
        let worker_set_name = format!("{name}-{group}");
        let worker_set = sets
            .iter()
            .find(|s| text(s, "/metadata/name") == worker_set_name);
        if size > 1
            && worker_set.is_none()
            && (!leader_ready_first || pod_is_running_and_ready(leader))
        {
            let mut template = worker_template.clone();
            if !template["metadata"]["labels"].is_object() {
                template["metadata"]["labels"] = json!({});
            }
            let group_key = format!("{namespace}-{name}-{group}");
            for (key, value) in [
                (NAME, name.to_string()),
                (GROUP_INDEX, group.to_string()),
                (GROUP_KEY, group_key),
            ] {
                template["metadata"]["labels"][key] = json!(value);
            }
            let mut pairs = vec![
                json!({"name": "LWS_LEADER_ADDRESS", "value": format!("{leader_name}.{name}.{namespace}")}),
            ];
            pairs.extend(common_env(json!({"fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}})));
            env(pairs, &mut template);
            if let Some(key) = &exclusive_key {
                exclusive(&mut template, name, key, Some(group));
            }
            plan.create.push(json!({
                "apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": worker_set_name, "labels": {NAME: name, GROUP_INDEX: group.to_string()},
                             "ownerReferences": owner("Pod", "v1", &leader_name, text(leader, "/metadata/uid"))},
                "spec": {"replicas": size - 1, "ordinals": {"start": 1}, "serviceName": name, "podManagementPolicy": "Parallel",
                         "selector": {"matchLabels": {NAME: name, GROUP_INDEX: group.to_string()}}, "template": template},
            }));
        }
        let workers_ready = worker_set.is_some_and(|s| {
            s.pointer("/status/readyReplicas")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                >= size - 1
        });
        if pod_is_running_and_ready(leader) && (size == 1 || workers_ready) {
            ready_groups += 1;
        }
    }
    let leaders = pods
        .iter()
        .filter(|p| {
            label(p, WORKER_INDEX) == "0"
                || text(p, "/metadata/name")
                    .rsplit_once('-')
                    .is_some_and(|(base, _)| base == name)
        })
        .filter(|p| label(p, GROUP_INDEX).is_empty())
        .count();
    let available = ready_groups == replicas;
    plan.status = json!({
        "replicas": leaders.min(replicas as usize),
        "readyReplicas": ready_groups,
        "updatedReplicas": leaders.min(replicas as usize),
        "hpaPodSelector": format!("{NAME}={name},{WORKER_INDEX}=0"),
        "conditions": [
            {"type": "Available", "status": if available { "True" } else { "False" },
             "reason": if available { "AllGroupsReady" } else { "GroupsNotReady" },
             "message": if available { "All replicas are ready" } else { "Not all replicas are ready" },
             "lastTransitionTime": now},
        ],
    });
    let previous = lws.pointer("/status/conditions/0");
    if previous.is_some_and(|p| p["status"] == plan.status["conditions"][0]["status"]) {
        plan.status["conditions"][0]["lastTransitionTime"] =
            previous.map_or(Value::Null, |p| p["lastTransitionTime"].clone());
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lws(startup: &str) -> Value {
        json!({"metadata": {"name": "llm", "namespace": "ml", "uid": "l"},
            "spec": {"replicas": 2, "startupPolicy": startup, "leaderWorkerTemplate": {"size": 3,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "workerTemplate": {"spec": {"containers": [{"name": "w", "image": "w"}]}}}}})
    }

    fn leader(group: i64, ready: bool) -> Value {
        json!({"metadata": {"name": format!("llm-{group}"), "uid": format!("leader-{group}"), "labels": {NAME: "llm", WORKER_INDEX: "0"}},
               "status": if ready { json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}) } else { json!({"phase": "Pending"}) }})
    }

    #[test]
    fn creates_the_leader_set_then_a_worker_set_per_leader() {
        let first = plan(&lws("LeaderCreated"), &[], &[], SystemTime::UNIX_EPOCH);
        assert_eq!(first.create.len(), 1);
        let leader_set = &first.create[0];
        assert_eq!(leader_set["metadata"]["name"], "llm");
        assert_eq!(leader_set["spec"]["replicas"], 2);
        assert_eq!(
            leader_set["spec"]["template"]["metadata"]["annotations"][SIZE],
            "3"
        );
        let sets = vec![leader_set.clone()];
        let second = plan(
            &lws("LeaderCreated"),
            &sets,
            &[leader(0, false), leader(1, false)],
            SystemTime::UNIX_EPOCH,
        );
        let names: Vec<&str> = second
            .create
            .iter()
            .map(|s| s["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["llm-0", "llm-1"]);
        let workers = &second.create[0];
        assert_eq!(workers["spec"]["replicas"], 2);
        assert_eq!(workers["spec"]["ordinals"]["start"], 1);
        assert_eq!(workers["metadata"]["ownerReferences"][0]["kind"], "Pod");
        let env = &workers["spec"]["template"]["spec"]["containers"][0]["env"];
        assert_eq!(
            env[0],
            json!({"name": "LWS_LEADER_ADDRESS", "value": "llm-0.llm.ml"})
        );
        let gated = plan(
            &lws("LeaderReady"),
            &sets,
            &[leader(0, true), leader(1, false)],
            SystemTime::UNIX_EPOCH,
        );
        assert_eq!(
            gated.create.len(),
            1,
            "only the ready leader's group starts"
        );
    }

    #[test]
    fn a_restarted_member_recreates_its_group() {
        let sets = vec![json!({"metadata": {"name": "llm"}, "spec": {"replicas": 2}})];
        let worker = json!({"metadata": {"name": "llm-0-1", "labels": {NAME: "llm", GROUP_INDEX: "0"}},
            "status": {"phase": "Running", "containerStatuses": [{"restartCount": 1}]}});
        let planned = plan(
            &lws("LeaderCreated"),
            &sets,
            &[leader(0, true), leader(1, true), worker],
            SystemTime::UNIX_EPOCH,
        );
        assert_eq!(planned.restart_leaders, ["llm-0"]);
    }

    #[test]
    fn exclusive_topology_becomes_one_group_per_domain() {
        let mut set = lws("LeaderCreated");
        set["metadata"]["annotations"] = json!({EXCLUSIVE_TOPOLOGY: "tessera.dev/rack"});
        let leaders = plan(&set, &[], &[], SystemTime::UNIX_EPOCH).create;
        let anti = &leaders[0]["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            [0];
        assert_eq!(anti["topologyKey"], "tessera.dev/rack");
        let leader_set = json!({"metadata": {"name": "llm"}, "spec": {"replicas": 2}});
        let workers = plan(
            &set,
            &[leader_set],
            &[leader(1, false)],
            SystemTime::UNIX_EPOCH,
        )
        .create;
        let affinity = &workers[0]["spec"]["template"]["spec"]["affinity"];
        let own = &affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
        assert_eq!(
            own["labelSelector"]["matchExpressions"][2]["values"][0],
            "1"
        );
        let others =
            &affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
        assert_eq!(
            others["labelSelector"]["matchExpressions"][2]["operator"],
            "NotIn"
        );
    }
}
