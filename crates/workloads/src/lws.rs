//! The LeaderWorkerSet core (leaderworkerset.x-k8s.io/v1): a leader StatefulSet of
//! `replicas` groups and, per leader pod, a worker StatefulSet of `size - 1` pods (ordinals
//! from 1, owned by the leader so a group lives and dies together), with upstream's labels
//! and `LWS_*` environment, `LeaderCreated`/`LeaderReady` startup, and
//! `RecreateGroupOnPodRestart` recreating a whole group when one of its pods restarts,
//! `leaderworkerset.sigs.k8s.io/exclusive-topology` as pod (anti-)affinity: one group per
//! domain, and `volumeClaimTemplates` with their retention policy passed to every StatefulSet
//! (whose controller makes the claims). A changed LeaderWorkerSet (its template, or the
//! exclusive-topology annotation) gets a new revision: the leader StatefulSet's template is
//! brought in line, its controller replaces the leaders one by one, and each new leader gets
//! a new worker StatefulSet made from the current LeaderWorkerSet (the old one goes with the
//! old leader).
//!
//! Pure: no I/O.

use std::time::SystemTime;

use crate::deployment::template_hash;
use crate::plan::{Resource, Writes, merge_patch_between};
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
/// The LeaderWorkerSet revision a StatefulSet and its pods were made from.
pub const REVISION: &str = "leaderworkerset.sigs.k8s.io/template-revision-hash";
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
    /// Merge patches of StatefulSets: (name, patch) — the leader set scaled, or brought to
    /// the current revision.
    pub patch: Vec<(String, Value)>,
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

/// Sets `pairs` into the template's metadata `field` (labels or annotations).
fn set_metadata(template: &mut Value, field: &str, pairs: &[(&str, String)]) {
    if !template["metadata"][field].is_object() {
        template["metadata"][field] = json!({});
    }
    for (key, value) in pairs {
        template["metadata"][field][*key] = json!(value);
    }
}

/// The `volumeClaimTemplates` upstream gives the LeaderWorkerSet's StatefulSets
/// (`GetPVCApplyConfiguration`): each template's name in the LeaderWorkerSet's namespace, and
/// of its spec only the access modes, storage class, volume mode and resources.
pub fn claim_templates(lws: &Value) -> Vec<Value> {
    let namespace = text(lws, "/metadata/namespace");
    lws.pointer("/spec/leaderWorkerTemplate/volumeClaimTemplates")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|template| {
            let mut spec = json!({});
            if let Some(modes) = template.pointer("/spec/accessModes") {
                spec["accessModes"] = modes.clone();
            }
            for field in ["storageClassName", "volumeMode"] {
                if let Some(value) = template.pointer(&format!("/spec/{field}")) {
                    spec[field] = value.clone();
                }
            }
            for field in ["requests", "limits"] {
                if let Some(value) = template.pointer(&format!("/spec/resources/{field}")) {
                    spec["resources"][field] = value.clone();
                }
            }
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": text(template, "/metadata/name"), "namespace": namespace},
                   "spec": spec})
        })
        .collect()
}

/// Gives a StatefulSet spec the LeaderWorkerSet's claim templates and retention policy.
fn add_storage(lws: &Value, spec: &mut Value) {
    let templates = claim_templates(lws);
    if !templates.is_empty() {
        spec["volumeClaimTemplates"] = json!(templates);
    }
    if let Some(policy) =
        lws.pointer("/spec/leaderWorkerTemplate/persistentVolumeClaimRetentionPolicy")
    {
        spec["persistentVolumeClaimRetentionPolicy"] = policy.clone();
    }
}

/// The LeaderWorkerSet's revision: a hash of what its pods are made from — the
/// leaderWorkerTemplate, the network config and the exclusive-topology annotation.
pub fn revision(lws: &Value) -> String {
    template_hash(&json!({
        "leaderWorkerTemplate": lws.pointer("/spec/leaderWorkerTemplate"),
        "networkConfig": lws.pointer("/spec/networkConfig"),
        "exclusiveTopology": exclusive_key(lws),
    }))
}

fn exclusive_key(lws: &Value) -> Option<&str> {
    lws.pointer(&format!(
        "/metadata/annotations/{}",
        EXCLUSIVE_TOPOLOGY.replace('/', "~1")
    ))
    .and_then(Value::as_str)
}

/// What one LeaderWorkerSet's StatefulSets are made from.
struct Shape<'a> {
    lws: &'a Value,
    name: &'a str,
    namespace: &'a str,
    size: i64,
    revision: String,
    exclusive: Option<&'a str>,
}

impl Shape<'_> {
    fn common_env(&self, index_ref: Value) -> Vec<Value> {
        vec![
            json!({"name": "LWS_GROUP_SIZE", "value": self.size.to_string()}),
            json!({"name": "LWS_WORKER_INDEX", "valueFrom": index_ref}),
        ]
    }

    fn template(&self, pointer: &str) -> Option<Value> {
        self.lws.pointer(pointer).cloned()
    }

    /// The leader StatefulSet of `replicas` groups.
    fn leader_set(&self, replicas: i64) -> Value {
        let (name, namespace) = (self.name, self.namespace);
        let mut template = self
            .template("/spec/leaderWorkerTemplate/leaderTemplate")
            .or_else(|| self.template("/spec/leaderWorkerTemplate/workerTemplate"))
            .unwrap_or_else(|| json!({}));
        set_metadata(
            &mut template,
            "labels",
            &[
                (NAME, name.to_string()),
                (WORKER_INDEX, "0".to_string()),
                (REVISION, self.revision.clone()),
            ],
        );
        let mut annotations = vec![(SIZE, self.size.to_string())];
        annotations.extend(
            self.exclusive
                .map(|key| (EXCLUSIVE_TOPOLOGY, key.to_string())),
        );
        set_metadata(&mut template, "annotations", &annotations);
        let mut pairs = vec![
            json!({"name": "LWS_LEADER_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}),
            json!({"name": "LWS_LEADER_ADDRESS", "value": format!("$(LWS_LEADER_NAME).{name}.{namespace}")}),
        ];
        pairs.extend(self.common_env(
            json!({"fieldRef": {"fieldPath": format!("metadata.labels['{WORKER_INDEX}']")}}),
        ));
        env(pairs, &mut template);
        if let Some(key) = self.exclusive {
            exclusive(&mut template, name, key, None);
        }
        let mut set = json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "labels": {NAME: name, REVISION: self.revision},
                         "ownerReferences": owner("LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1", name, text(self.lws, "/metadata/uid"))},
            "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": {NAME: name, WORKER_INDEX: "0"}}, "template": template},
        });
        add_storage(self.lws, &mut set["spec"]);
        set
    }

    /// The worker StatefulSet of the group led by `leader`.
    fn worker_set(&self, group: i64, leader: &Value) -> Value {
        let (name, namespace) = (self.name, self.namespace);
        let leader_name = text(leader, "/metadata/name");
        let mut template = self
            .template("/spec/leaderWorkerTemplate/workerTemplate")
            .unwrap_or_else(|| json!({}));
        set_metadata(
            &mut template,
            "labels",
            &[
                (NAME, name.to_string()),
                (GROUP_INDEX, group.to_string()),
                (GROUP_KEY, format!("{namespace}-{name}-{group}")),
                (REVISION, self.revision.clone()),
            ],
        );
        if let Some(key) = self.exclusive {
            set_metadata(
                &mut template,
                "annotations",
                &[(EXCLUSIVE_TOPOLOGY, key.to_string())],
            );
        }
        let mut pairs = vec![
            json!({"name": "LWS_LEADER_ADDRESS", "value": format!("{leader_name}.{name}.{namespace}")}),
        ];
        pairs.extend(self.common_env(
            json!({"fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}}),
        ));
        env(pairs, &mut template);
        if let Some(key) = self.exclusive {
            exclusive(&mut template, name, key, Some(group));
        }
        let mut set = json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": leader_name, "labels": {NAME: name, GROUP_INDEX: group.to_string(), REVISION: self.revision},
                         "ownerReferences": owner("Pod", "v1", leader_name, text(leader, "/metadata/uid"))},
            "spec": {"replicas": self.size - 1, "ordinals": {"start": 1}, "serviceName": name, "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": {NAME: name, GROUP_INDEX: group.to_string()}}, "template": template},
        });
        add_storage(self.lws, &mut set["spec"]);
        set
    }
}

/// The merge patch that brings an existing leader StatefulSet to `desired`: its replicas, and
/// for another revision its template (what the new revision dropped, such as the
/// exclusive-placement affinity, removed), revision label and retention policy.
fn leader_patch(existing: &Value, desired: &Value, revision: &str) -> Option<Value> {
    let mut patch = json!({});
    if existing.pointer("/spec/replicas") != desired.pointer("/spec/replicas") {
        patch["spec"]["replicas"] = desired["spec"]["replicas"].clone();
    }
    if label(existing, REVISION) != revision {
        patch["metadata"]["labels"][REVISION] = json!(revision);
        patch["spec"]["template"] = merge_patch_between(
            existing.pointer("/spec/template").unwrap_or(&Value::Null),
            &desired["spec"]["template"],
        );
        if let Some(policy) = desired.pointer("/spec/persistentVolumeClaimRetentionPolicy") {
            patch["spec"]["persistentVolumeClaimRetentionPolicy"] = policy.clone();
        }
    }
    (patch != json!({})).then_some(patch)
}

impl LwsPlan {
    /// The writes that carry the plan out for `lws`: the headless Service, new StatefulSets,
    /// patches of StatefulSets, leader pods deleted for a group restart, the new status.
    pub fn writes(self, lws: &Value) -> Writes {
        let mut writes = Writes::default();
        writes.create(Resource::Service, self.service);
        writes.create(Resource::StatefulSet, self.create);
        writes.patch(Resource::StatefulSet, self.patch);
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
    let replicas = lws
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .max(0);
    let shape = Shape {
        lws,
        name,
        namespace: text(lws, "/metadata/namespace"),
        size: lws
            .pointer("/spec/leaderWorkerTemplate/size")
            .and_then(Value::as_i64)
            .unwrap_or(1)
            .max(1),
        revision: revision(lws),
        exclusive: exclusive_key(lws),
    };
    let size = shape.size;
    let leader_ready_first = text(lws, "/spec/startupPolicy") == "LeaderReady";
    let recreate_groups = text(lws, "/spec/leaderWorkerTemplate/restartPolicy") != "None";
    plan.service = Some(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "ownerReferences": owner("LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1", name, text(lws, "/metadata/uid"))},
        "spec": {"clusterIP": "None", "selector": {NAME: name}, "publishNotReadyAddresses": true}}));

    // The leader StatefulSet, at the current revision.
    let desired = shape.leader_set(replicas);
    match sets.iter().find(|s| text(s, "/metadata/name") == name) {
        None => plan.create.push(desired),
        Some(set) => plan.patch.extend(
            leader_patch(set, &desired, &shape.revision).map(|patch| (name.to_string(), patch)),
        ),
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
        let worker_set = sets
            .iter()
            .find(|s| text(s, "/metadata/name") == leader_name);
        // A worker set of an earlier leader of this name goes with it: wait for it.
        let stale = worker_set.is_some_and(|s| {
            text(s, "/metadata/ownerReferences/0/uid") != text(leader, "/metadata/uid")
        });
        if size > 1
            && worker_set.is_none()
            && (!leader_ready_first || pod_is_running_and_ready(leader))
        {
            plan.create.push(shape.worker_set(group, leader));
        }
        let workers_ready = !stale
            && worker_set.is_some_and(|s| {
                s.pointer("/status/readyReplicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                    >= size - 1
            });
        if pod_is_running_and_ready(leader) && (size == 1 || workers_ready) {
            ready_groups += 1;
        }
    }
    let leaders: Vec<&Value> = pods
        .iter()
        .filter(|p| {
            label(p, WORKER_INDEX) == "0"
                || text(p, "/metadata/name")
                    .rsplit_once('-')
                    .is_some_and(|(base, _)| base == name)
        })
        .filter(|p| label(p, GROUP_INDEX).is_empty())
        .collect();
    let updated = leaders
        .iter()
        .filter(|p| label(p, REVISION) == shape.revision)
        .count();
    let available = ready_groups == replicas;
    plan.status = json!({
        "replicas": leaders.len().min(replicas as usize),
        "readyReplicas": ready_groups,
        "updatedReplicas": updated.min(replicas as usize),
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

    /// Upstream's `TestGetPVCApplyConfiguration`: each template's name and namespace, and of
    /// its spec only access modes, storage class, volume mode and resources.
    #[test]
    fn claim_templates_as_upstream_passes_them_on() {
        let with = |templates: Value| {
            json!({"metadata": {"name": "test-sample", "namespace": "default"},
                   "spec": {"leaderWorkerTemplate": {"size": 1, "volumeClaimTemplates": templates}}})
        };
        let cases = [
            (
                "no PVC templates",
                json!({"metadata": {"name": "test-sample", "namespace": "default"}, "spec": {}}),
                json!([]),
            ),
            (
                "single PVC template with all fields",
                with(
                    json!([{"metadata": {"name": "pvc1", "labels": {"dropped": "yes"}},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard", "volumeMode": "Filesystem",
                             "selector": {"matchLabels": {"dropped": "yes"}},
                             "resources": {"requests": {"storage": "1Gi"}, "limits": {"storage": "2Gi"}}}}]),
                ),
                json!([{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "pvc1", "namespace": "default"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard", "volumeMode": "Filesystem",
                             "resources": {"requests": {"storage": "1Gi"}, "limits": {"storage": "2Gi"}}}}]),
            ),
            (
                "multiple PVC templates with partial fields",
                with(
                    json!([{"metadata": {"name": "pvc1"}, "spec": {"accessModes": ["ReadWriteOnce"]}},
                            {"metadata": {"name": "pvc2"}, "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "fast"}}]),
                ),
                json!([{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "pvc1", "namespace": "default"},
                        "spec": {"accessModes": ["ReadWriteOnce"]}},
                       {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "pvc2", "namespace": "default"},
                        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "fast"}}]),
            ),
            ("nil LeaderWorkerSet", Value::Null, json!([])),
        ];
        for (name, lws, expected) in cases {
            assert_eq!(json!(claim_templates(&lws)), expected, "{name}");
        }
    }

    /// Upstream's leader and worker StatefulSet cases "with volumeClaimTemplates and
    /// PersistentVolumeClaimRetentionPolicy configured": both sets carry the templates and the
    /// policy, so their controller makes each pod's claims.
    #[test]
    fn both_statefulsets_carry_the_claim_templates_and_policy() {
        let mut set = lws("LeaderCreated");
        set["spec"]["leaderWorkerTemplate"]["persistentVolumeClaimRetentionPolicy"] =
            json!({"whenDeleted": "Retain", "whenScaled": "Delete"});
        set["spec"]["leaderWorkerTemplate"]["volumeClaimTemplates"] = json!([{"metadata": {"name": "pvc1"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]);
        let leaders = plan(&set, &[], &[], SystemTime::UNIX_EPOCH).create;
        let workers = plan(&set, &leaders, &[leader(0, false)], SystemTime::UNIX_EPOCH).create;
        assert_eq!(workers.len(), 1);
        for made in [&leaders[0], &workers[0]] {
            assert_eq!(
                made["spec"]["volumeClaimTemplates"],
                json!([{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "pvc1", "namespace": "ml"},
                        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}])
            );
            assert_eq!(
                made["spec"]["persistentVolumeClaimRetentionPolicy"],
                json!({"whenDeleted": "Retain", "whenScaled": "Delete"})
            );
        }
        // Their pods mount the claims the StatefulSet controller makes.
        let worker_pod = crate::statefulset::pod_for(&workers[0], 1);
        assert_eq!(
            worker_pod["spec"]["volumes"],
            json!([{"name": "pvc1", "persistentVolumeClaim": {"claimName": "pvc1-llm-0-1"}}])
        );
        let plain = plan(&lws("LeaderCreated"), &[], &[], SystemTime::UNIX_EPOCH).create;
        assert!(plain[0]["spec"].get("volumeClaimTemplates").is_none());
        assert!(
            plain[0]["spec"]
                .get("persistentVolumeClaimRetentionPolicy")
                .is_none()
        );
    }

    /// Upstream's leader and worker StatefulSet cases "exclusive placement enabled/disabled":
    /// the annotation reaches both templates only when the LeaderWorkerSet has it.
    #[test]
    fn the_exclusive_annotation_reaches_both_templates() {
        for exclusive in [false, true] {
            let mut set = lws("LeaderCreated");
            if exclusive {
                set["metadata"]["annotations"] = json!({EXCLUSIVE_TOPOLOGY: "topologyKey"});
            }
            let leaders = plan(&set, &[], &[], SystemTime::UNIX_EPOCH).create;
            let workers = plan(&set, &leaders, &[leader(0, false)], SystemTime::UNIX_EPOCH).create;
            for made in [&leaders[0], &workers[0]] {
                let annotation =
                    &made["spec"]["template"]["metadata"]["annotations"][EXCLUSIVE_TOPOLOGY];
                assert_eq!(annotation.as_str(), exclusive.then_some("topologyKey"));
                assert_eq!(
                    made["spec"]["template"]["spec"]["affinity"].is_object(),
                    exclusive
                );
            }
        }
    }

    /// Removing the exclusive-topology annotation is a new revision: the leader set's template
    /// loses the affinity (so its controller replaces the leaders), a worker set of an earlier
    /// leader is waited out, and the new leader's worker set has no affinity.
    #[test]
    fn removing_exclusive_placement_rolls_the_groups_without_affinity() {
        let mut exclusive_set = lws("LeaderCreated");
        exclusive_set["metadata"]["annotations"] = json!({EXCLUSIVE_TOPOLOGY: "tessera.dev/rack"});
        let mut leader_set = plan(&exclusive_set, &[], &[], SystemTime::UNIX_EPOCH)
            .create
            .remove(0);
        let old_pod = crate::statefulset::pod_for(&leader_set, 0);
        assert!(old_pod["spec"]["affinity"].is_object());
        let unchanged = plan(
            &exclusive_set,
            &[leader_set.clone()],
            &[],
            SystemTime::UNIX_EPOCH,
        );
        assert!(
            unchanged.patch.is_empty(),
            "the same revision changes nothing"
        );

        let plain = lws("LeaderCreated");
        let planned = plan(&plain, &[leader_set.clone()], &[], SystemTime::UNIX_EPOCH);
        assert_eq!(planned.patch.len(), 1);
        let (patched, patch) = &planned.patch[0];
        assert_eq!(patched, "llm");
        assert_eq!(patch["spec"]["template"]["spec"]["affinity"], Value::Null);
        assert_eq!(
            patch["metadata"]["labels"][REVISION],
            json!(revision(&plain))
        );
        json_patch::merge(&mut leader_set, patch);
        let new_pod = crate::statefulset::pod_for(&leader_set, 0);
        assert!(new_pod["spec"].get("affinity").is_none(), "{new_pod}");
        assert!(
            new_pod["metadata"]["annotations"]
                .get(EXCLUSIVE_TOPOLOGY)
                .is_none()
        );
        assert_ne!(
            new_pod["metadata"]["labels"][crate::daemonset::REVISION_HASH],
            old_pod["metadata"]["labels"][crate::daemonset::REVISION_HASH],
            "the StatefulSet controller sees outdated leaders"
        );
        assert!(
            plan(&plain, &[leader_set.clone()], &[], SystemTime::UNIX_EPOCH)
                .patch
                .is_empty()
        );

        // The replaced leader's worker set (owned by the old leader) is still there.
        let old_workers = plan(
            &exclusive_set,
            &[leader_set.clone()],
            &[leader(0, true)],
            SystemTime::UNIX_EPOCH,
        )
        .create;
        let mut new_leader = leader(0, true);
        new_leader["metadata"]["uid"] = json!("leader-0-again");
        let mut stale = old_workers[0].clone();
        stale["status"] = json!({"readyReplicas": 2});
        let waiting = plan(
            &plain,
            &[leader_set.clone(), stale],
            &[new_leader.clone()],
            SystemTime::UNIX_EPOCH,
        );
        assert!(
            waiting.create.is_empty(),
            "waits for the old worker set to go"
        );
        assert_eq!(waiting.status["readyReplicas"], 0);
        let recreated = plan(&plain, &[leader_set], &[new_leader], SystemTime::UNIX_EPOCH).create;
        assert_eq!(recreated.len(), 1);
        assert_eq!(
            recreated[0]["metadata"]["ownerReferences"][0]["uid"],
            "leader-0-again"
        );
        assert!(
            recreated[0]["spec"]["template"]["spec"]
                .get("affinity")
                .is_none()
        );
    }
}
