//! The maintenance controller: runs each `MaintenancePlan` (`tessera.dev/v1alpha1`) one
//! stateless step at a time. A pass reads the plan, the nodes (their GPU operator state labels
//! included), the pods, the PodDisruptionBudgets and Kueue's Workloads; the first pass runs the
//! pre-flight and records the stages in the plan's status; every pass asks
//! [`tessera_maintenance::step`] what to do and carries it out: node labels and annotations,
//! cordon and uncordon, evictions ([`crate::maintenance_evict`]: a Kueue Workload holding quota
//! is evicted through Kueue — `Evicted=True` `NodeMaintenance`, so the queue manager stops its
//! job, releases the quota and requeues it, the node waiting while its pods run — and every
//! other pod through the `pods/eviction` subresource, where a 429 leaves the node where it is,
//! to retry on the next pass; a pod is never deleted around its budget), the kind's change (a
//! driver upgrade records the installed version on the Node, which the twins read back, and
//! sets GFD's labels; a kubelet version is recorded likewise and set in `status.nodeInfo`; a
//! MIG layout is recorded on the Node with the MIG manager's `nvidia.com/mig.config` label for
//! the node's MIG manager — the twins in the lab — to apply; a rotation asks the node's
//! provider for the replacement, then deletes the old node), the
//! validator pod (the GPU operator's `nvidia-operator-validator`, tolerating the cordon), the
//! failed-validation node condition, and the plan's status.
//!
//! A plan that succeeded is left alone (a later plan over the same nodes supersedes it); two
//! plans in progress over the same nodes are not arbitrated.
//!
//! Knows no decision of its own: the state machine, the staging and the status shape are
//! `tessera-maintenance`'s. Who applies a MIG layout or adds a replacement is not known here:
//! a plan waits until the Node shows it (GFD's labels, a Ready replacement).

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tessera_maintenance::facts::{self, VALIDATOR_APP};
use tessera_maintenance::{
    Action, Change, Keys, Phase, PlanAction, REPLACEMENT_ANNOTATION, REPLACES_ANNOTATION,
    UpgradeState, VALIDATION_FAILED_CONDITION, plan_from_document, preflight, replacement_name,
    status,
};
use tessera_model::clock::Clock;
use tessera_node::node_changes::{INSTALLED_MIG_LAYOUT_ANNOTATION, MIG_CONFIG_LABEL, config_name};

use crate::maintenance_evict;
use crate::shell::{next_pass, patch_params, watched, watched_with};

/// The field manager the controller writes as.
pub const MANAGER: &str = "tessera-maintenance-controller";
/// The namespace validator pods run in (the GPU operator's own).
pub const VALIDATOR_NAMESPACE: &str = "kube-system";
/// The image the validator pods name (the GPU operator's validator).
pub const VALIDATOR_IMAGE: &str = "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.0";

/// The `MaintenancePlan` resource.
pub fn plan_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            tessera_maintenance::crd::GROUP,
            tessera_maintenance::crd::VERSION,
            tessera_maintenance::spec::KIND,
        ),
        tessera_maintenance::crd::PLURAL,
    )
}

/// Runs the controller until the task is dropped, reading the time from `clock`.
pub async fn run(client: Client, clock: Clock) {
    let resource = plan_resource();
    let (plans, plan_changes) = watched_with(
        Api::<DynamicObject>::all_with(client.clone(), &resource),
        resource.clone(),
    );
    let (nodes, node_changes) = watched(Api::<Node>::all(client.clone()));
    let (pods, pod_changes) = watched(Api::<Pod>::all(client.clone()));
    let (pdbs, pdb_changes) = watched(Api::<PodDisruptionBudget>::all(client.clone()));
    let workload_resource = maintenance_evict::workload_resource();
    let (workloads, workload_changes) = watched_with(
        Api::<DynamicObject>::all_with(client.clone(), &workload_resource),
        workload_resource,
    );
    let mut changes = futures::stream::select_all([
        plan_changes,
        node_changes,
        pod_changes,
        pdb_changes,
        workload_changes,
    ]);
    let mut resync = tokio::time::interval(Duration::from_secs(2));
    let catalog = match tessera_devices::Catalog::built_in() {
        Ok(c) => c,
        Err(error) => {
            tracing::error!(%error, "maintenance controller: no GPU catalog");
            return;
        }
    };
    while next_pass(&mut changes, &mut resync).await {
        let world = World {
            plans: crate::shell::store_values(&plans),
            nodes: crate::shell::store_values(&nodes),
            pods: crate::shell::store_values(&pods),
            pdbs: crate::shell::store_values(&pdbs),
            workloads: crate::shell::store_values(&workloads),
        };
        for plan in &world.plans {
            if let Err(error) = reconcile(&client, &resource, plan, &world, &catalog, clock()).await
            {
                tracing::warn!(%error, "maintenance controller pass failed");
            }
        }
    }
}

/// What one pass reads.
struct World {
    plans: Vec<Value>,
    nodes: Vec<Value>,
    pods: Vec<Value>,
    pdbs: Vec<Value>,
    workloads: Vec<Value>,
}

fn seconds(now: SystemTime) -> i64 {
    now.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

async fn reconcile(
    client: &Client,
    resource: &ApiResource,
    object: &Value,
    world: &World,
    catalog: &tessera_devices::Catalog,
    now: SystemTime,
) -> Result<(), kube::Error> {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let stamp = tessera_model::time::timestamp(now);
    let previous = object.get("status").cloned().unwrap_or(Value::Null);
    // A plan that succeeded is finished: a later plan may change its nodes again.
    if previous.get("phase").and_then(Value::as_str) == Some(Phase::Succeeded.name()) {
        return Ok(());
    }
    let plans: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let plan = match plan_from_document(object) {
        Ok(plan) => plan,
        Err(errors) => {
            let message = errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            let next = json!({"phase": "Invalid", "reason": message});
            return write_status(&plans, &name, &previous, next).await;
        }
    };
    let objects = facts::Objects::index(&world.nodes, &world.pods);
    let node_facts = objects.node_facts(&plan, catalog);
    let stages = match status::stages(&previous) {
        Some(stages) => stages,
        None => {
            let budgets: Vec<_> = world
                .pdbs
                .iter()
                .map(|p| facts::budget(p, &objects))
                .collect();
            let version = client.apiserver_version().await.ok().map(|v| v.git_version);
            match preflight(&plan, &node_facts, &budgets, catalog, version.as_deref()) {
                Ok(rollout) => {
                    if let Some(reason) =
                        tessera_maintenance::worker::dry_run_only(&plan.kind, &rollout)
                    {
                        let refused =
                            tessera_maintenance::Refused(vec![tessera_maintenance::Refusal::Plan(
                                reason,
                            )]);
                        let next = status::refused(&refused, &stamp);
                        return write_status(&plans, &name, &previous, next).await;
                    }
                    rollout.stages
                }
                Err(refused) => {
                    let next = status::refused(&refused, &stamp);
                    return write_status(&plans, &name, &previous, next).await;
                }
            }
        }
    };
    let step = tessera_maintenance::step(&plan, &stages, &node_facts, catalog, seconds(now));
    let keys = Keys::for_driver("gpu");
    for action in &step.actions {
        let rotation = plan.kind == tessera_maintenance::PlanKind::NodeRotation;
        if let Err(error) =
            carry_out(client, &keys, (&plan.name, rotation), action, world, now).await
        {
            tracing::warn!(plan = %name, ?action, %error, "maintenance action failed; retried on the next pass");
        }
    }
    // A node that finished drops its validator pod, so a later plan validates afresh (a
    // rotation's validator ran on the replacement).
    for progress in &step.nodes {
        if progress.state == UpgradeState::Done.label() || progress.state == "removed" {
            delete_validator(client, &progress.name).await;
            if plan.kind == tessera_maintenance::PlanKind::NodeRotation {
                delete_validator(client, &replacement_name(&progress.name)).await;
            }
        }
    }
    let mut next = status::progress(&stages, &step, &stamp);
    status::summarize(&mut next, plan.kind.name());
    if matches!(step.phase, Phase::Halted { .. }) {
        tracing::warn!(plan = %name, reason = ?step.phase, "maintenance plan halted");
    }
    write_status(&plans, &name, &previous, next).await
}

/// Writes the status `status_patch` makes of `previous` and `next`, if any.
async fn write_status(
    plans: &Api<DynamicObject>,
    name: &str,
    previous: &Value,
    next: Value,
) -> Result<(), kube::Error> {
    let Some(patch) = status_patch(previous, next) else {
        return Ok(());
    };
    plans
        .patch_status(name, &patch_params(MANAGER), &Patch::Merge(&patch))
        .await
        .map(drop)
}

/// The merge patch that turns status `previous` into `next`, `None` when they say the same. A
/// condition keeps its `lastTransitionTime` while the phase holds; keys `previous` has and `next`
/// lacks are removed (the status is replaced, not merged).
fn status_patch(previous: &Value, mut next: Value) -> Option<Value> {
    let same_phase = previous.get("phase") == next.get("phase");
    if same_phase
        && let Some(kept) = previous.pointer("/conditions/0")
        && let Some(fresh) = next.pointer("/conditions/0").cloned()
    {
        let mut c = fresh;
        if let Some(t) = kept.get("lastTransitionTime") {
            c["lastTransitionTime"] = t.clone();
        }
        next["conditions"] = json!([c]);
    }
    if previous == &next {
        return None;
    }
    let mut patch = json!({"status": next});
    if let Some(old) = previous.as_object() {
        for key in old.keys() {
            if patch["status"].get(key).is_none() {
                patch["status"][key] = Value::Null;
            }
        }
    }
    Some(patch)
}

async fn patch_node(client: &Client, node: &str, patch: Value) -> Result<(), kube::Error> {
    Api::<Node>::all(client.clone())
        .patch(node, &patch_params(MANAGER), &Patch::Merge(&patch))
        .await
        .map(drop)
}

async fn carry_out(
    client: &Client,
    keys: &Keys,
    (plan, rotation): (&str, bool),
    action: &PlanAction,
    world: &World,
    now: SystemTime,
) -> Result<(), kube::Error> {
    match action {
        PlanAction::Upgrade(action) => upgrade(client, keys, (plan, action), world, now).await,
        PlanAction::Apply {
            node,
            change: Change::Driver(version),
        } => {
            let mut labels = serde_json::Map::new();
            for (k, v) in tessera_node::accelerators::driver_labels(version) {
                labels.insert(k, json!(v));
            }
            let annotation = tessera_node::accelerators::INSTALLED_DRIVER_ANNOTATION;
            tracing::info!(%plan, %node, %version, "installed the driver");
            patch_node(
                client,
                node,
                json!({"metadata": {"labels": labels, "annotations": {annotation: version}}}),
            )
            .await
        }
        PlanAction::Apply {
            node,
            change: Change::Kubelet(version),
        } => {
            let version = format!("v{}", version.trim_start_matches('v'));
            let annotation = tessera_maintenance::INSTALLED_KUBELET_ANNOTATION;
            patch_node(
                client,
                node,
                json!({"metadata": {"annotations": {annotation: version}}}),
            )
            .await?;
            tracing::info!(%plan, %node, %version, "installed the kubelet");
            Api::<Node>::all(client.clone())
                .patch_status(
                    node,
                    &patch_params(MANAGER),
                    &Patch::Merge(json!({"status": {"nodeInfo": {"kubeletVersion": version}}})),
                )
                .await
                .map(drop)
        }
        PlanAction::Apply {
            node,
            change: Change::MigLayout(profiles),
        } => {
            let layout = profiles.join(",");
            if node_annotation(world, node, INSTALLED_MIG_LAYOUT_ANNOTATION) == Some(&layout) {
                return Ok(()); // asked for already; the MIG manager reports on the node
            }
            tracing::info!(%plan, %node, %layout, "asked for the MIG layout");
            // The MIG manager owns `nvidia.com/mig.config.state`; the operator sets the config.
            let labels = json!({MIG_CONFIG_LABEL: config_name(profiles)});
            patch_node(
                client,
                node,
                json!({"metadata": {"labels": labels,
                    "annotations": {INSTALLED_MIG_LAYOUT_ANNOTATION: layout}}}),
            )
            .await
        }
        PlanAction::AddReplacement { node, replacement } => {
            if node_annotation(world, node, REPLACEMENT_ANNOTATION) == Some(replacement) {
                return Ok(()); // asked for already; the node's provider adds it
            }
            tracing::info!(%plan, %node, %replacement, "asked for a replacement node");
            patch_node(
                client,
                node,
                json!({"metadata": {"annotations": {REPLACEMENT_ANNOTATION: replacement}}}),
            )
            .await
        }
        PlanAction::RemoveNode { node } => {
            // The replacement stops standing in for the old node: a later plan over the pool
            // takes it like any other node.
            let replacement = replacement_name(node);
            if node_annotation(world, &replacement, REPLACES_ANNOTATION).is_some() {
                patch_node(
                    client,
                    &replacement,
                    json!({"metadata": {"annotations": {REPLACES_ANNOTATION: null}}}),
                )
                .await?;
            }
            tracing::info!(%plan, %node, "removing the rotated node");
            match Api::<Node>::all(client.clone())
                .delete(node, &Default::default())
                .await
            {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                Err(error) => Err(error),
            }
        }
        // A rotation validates the replacement, not the node it replaces.
        PlanAction::RunValidator { node } if rotation => {
            run_validator(client, plan, &replacement_name(node)).await
        }
        PlanAction::RunValidator { node } => run_validator(client, plan, node).await,
        PlanAction::ValidationFailed { node, message } => {
            let stamp = tessera_model::time::timestamp(now);
            let condition = json!({"type": VALIDATION_FAILED_CONDITION, "status": "True",
                "reason": "ValidatorFailed", "message": message,
                "lastHeartbeatTime": stamp, "lastTransitionTime": stamp});
            let nodes: Api<Node> = Api::all(client.clone());
            let stored = nodes.get(node).await?;
            let mut conditions: Vec<Value> = stored
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .filter_map(|c| serde_json::to_value(c).ok())
                .filter(|c| c["type"] != VALIDATION_FAILED_CONDITION)
                .collect();
            conditions.push(condition);
            nodes
                .patch_status(
                    node,
                    &patch_params(MANAGER),
                    &Patch::Merge(json!({"status": {"conditions": conditions}})),
                )
                .await
                .map(drop)
        }
    }
}

async fn upgrade(
    client: &Client,
    keys: &Keys,
    (plan, action): (&str, &Action),
    world: &World,
    now: SystemTime,
) -> Result<(), kube::Error> {
    let set_state = |state: UpgradeState| state_patch(keys, state);
    match action {
        Action::SetState { node, state } => patch_node(client, node, set_state(*state)).await,
        Action::SetAnnotation { node, key, value } => {
            patch_node(
                client,
                node,
                json!({"metadata": {"annotations": {key: value}}}),
            )
            .await
        }
        Action::RemoveAnnotation { node, key } => {
            patch_node(
                client,
                node,
                json!({"metadata": {"annotations": {key: null}}}),
            )
            .await
        }
        Action::Cordon { node } => {
            patch_node(client, node, json!({"spec": {"unschedulable": true}})).await
        }
        Action::Uncordon { node } => {
            patch_node(client, node, json!({"spec": {"unschedulable": null}})).await
        }
        Action::DeletePods {
            node,
            pods,
            on_success,
            on_failure,
            ..
        } => {
            let targets: Vec<(String, String)> = pods
                .iter()
                .map(|p| (p.namespace.clone(), p.name.clone()))
                .collect();
            let outcomes = (*on_success, *on_failure);
            move_off(client, keys, (plan, world), (node, &targets), outcomes, now).await
        }
        Action::Drain {
            node,
            pod_selector,
            on_success,
            on_failure,
            ..
        } => {
            patch_node(client, node, json!({"spec": {"unschedulable": true}})).await?;
            let targets = drain_targets(&world.pods, node, pod_selector);
            let outcomes = (*on_success, *on_failure);
            move_off(client, keys, (plan, world), (node, &targets), outcomes, now).await
        }
        Action::RestartDriverPod { node, .. } => {
            // The rollout turns this into the kind's change; nothing to restart here.
            tracing::debug!(%node, "driver pod restart folded into the plan's change");
            Ok(())
        }
        Action::WarningEvent {
            node,
            reason,
            message,
        } => {
            tracing::warn!(%node, %reason, %message, "maintenance warning");
            let involved = json!({"apiVersion": "v1", "kind": "Node", "name": node});
            crate::shell::record_event(
                client,
                involved,
                ("Warning", reason, message),
                MANAGER,
                now,
            )
            .await;
            Ok(())
        }
    }
}

/// The pods kubectl's drain helper evicts from `node`: bound there, not finished, not
/// terminating, not a DaemonSet's or a mirror pod, matching `selector`.
fn drain_targets(pods: &[Value], node: &str, selector: &str) -> Vec<(String, String)> {
    let text = |p: &Value, path: &str| p.pointer(path).and_then(Value::as_str).map(str::to_string);
    pods.iter()
        .filter(|p| text(p, "/spec/nodeName").as_deref() == Some(node))
        .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
        .filter(|p| {
            !matches!(
                text(p, "/status/phase").as_deref(),
                Some("Succeeded" | "Failed")
            )
        })
        .filter(|p| {
            !p.pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|r| r["kind"] == "DaemonSet" && r["controller"] == true)
        })
        .filter(|p| {
            p.pointer("/metadata/annotations/kubernetes.io~1config.mirror")
                .is_none()
        })
        .filter(|p| {
            let labels: std::collections::BTreeMap<String, String> = p
                .pointer("/metadata/labels")
                .and_then(|l| serde_json::from_value(l.clone()).ok())
                .unwrap_or_default();
            selector.is_empty() || facts::matches_selector_string(selector, &labels)
        })
        .filter_map(|p| Some((text(p, "/metadata/namespace")?, text(p, "/metadata/name")?)))
        .collect()
}

/// The merge patch setting `node`'s upgrade state label (removing it for `Unknown`).
fn state_patch(keys: &Keys, state: UpgradeState) -> Value {
    let value = match state {
        UpgradeState::Unknown => Value::Null,
        s => json!(s.label()),
    };
    json!({"metadata": {"labels": {keys.state_label.clone(): value}}})
}

/// Moves `targets` off `node` ([`maintenance_evict::evict`]) and sets the node's state to the
/// outcome; a node whose pods cannot all go yet keeps its state (retried on the next pass).
async fn move_off(
    client: &Client,
    keys: &Keys,
    (plan, world): (&str, &World),
    (node, targets): (&str, &[(String, String)]),
    outcomes: (UpgradeState, UpgradeState),
    now: SystemTime,
) -> Result<(), kube::Error> {
    let cluster = maintenance_evict::Cluster {
        pods: &world.pods,
        workloads: &world.workloads,
        plan,
    };
    match maintenance_evict::evict(client, &cluster, node, targets, outcomes, now).await {
        Some(state) => patch_node(client, node, state_patch(keys, state)).await,
        None => Ok(()),
    }
}

/// Annotation `key` of `node` as the pass read it.
fn node_annotation<'w>(world: &'w World, node: &str, key: &str) -> Option<&'w str> {
    world
        .nodes
        .iter()
        .find(|n| n.pointer("/metadata/name").and_then(Value::as_str) == Some(node))
        .and_then(|n| n.pointer("/metadata/annotations"))
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

fn validator_name(node: &str) -> String {
    format!("{VALIDATOR_APP}-{node}")
}

/// Starts the validator on `node`: bound there directly (as a DaemonSet pod is), tolerating
/// every taint (the cordon's included), running once.
async fn run_validator(client: &Client, plan: &str, node: &str) -> Result<(), kube::Error> {
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": validator_name(node), "namespace": VALIDATOR_NAMESPACE,
            "labels": {"app": VALIDATOR_APP, "maintenance.tessera.dev/plan": plan},
            "annotations": {"sim.tessera.dev/duration": "1s"}},
        "spec": {"nodeName": node, "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "nvidia-operator-validator", "image": VALIDATOR_IMAGE}]}
    }))
    .map_err(kube::Error::SerdeError)?;
    let api: Api<Pod> = Api::namespaced(client.clone(), VALIDATOR_NAMESPACE);
    match api.create(&PostParams::default(), &pod).await {
        Ok(_) => {
            tracing::info!(%plan, %node, "started the validator");
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(error) => Err(error),
    }
}

async fn delete_validator(client: &Client, node: &str) {
    let api: Api<Pod> = Api::namespaced(client.clone(), VALIDATOR_NAMESPACE);
    if let Ok(Some(_)) = api.get_opt(&validator_name(node)).await {
        let _ = api.delete(&validator_name(node), &Default::default()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_is_written_only_when_it_changes() {
        let condition = |message: &str, at: &str| {
            json!({"type": "Progressing", "status": "True", "reason": "StageInProgress",
                   "message": message, "lastTransitionTime": at})
        };
        let previous = json!({"phase": "Progressing", "stage": "canary",
            "conditions": [condition("stage canary in progress", "t0")]});
        // Same phase, same words, a later clock: nothing to write.
        let same = json!({"phase": "Progressing", "stage": "canary",
            "conditions": [condition("stage canary in progress", "t1")]});
        assert_eq!(status_patch(&previous, same), None);
        // Same phase, next stage: written, the condition keeps its transition time.
        let next = json!({"phase": "Progressing", "stage": "batch-1",
            "conditions": [condition("stage batch-1 in progress", "t1")]});
        let patch = status_patch(&previous, next).expect("a change");
        assert_eq!(patch["status"]["conditions"][0]["lastTransitionTime"], "t0");
        assert_eq!(patch["status"]["stage"], "batch-1");
        // A new phase: its own transition time, and the stage the old status had is removed.
        let done =
            json!({"phase": "Succeeded", "conditions": [condition("every node is done", "t2")]});
        let patch = status_patch(&previous, done).expect("a change");
        assert_eq!(patch["status"]["conditions"][0]["lastTransitionTime"], "t2");
        assert_eq!(patch["status"]["stage"], Value::Null);
        // The first status of a plan.
        assert!(status_patch(&Value::Null, json!({"phase": "Refused"})).is_some());
    }

    #[test]
    fn drain_targets_follow_kubectl_drain() {
        let pod = |name: &str, node: &str, extra: Value| {
            let mut p = json!({"metadata": {"namespace": "ml", "name": name, "labels": {}},
                "spec": {"nodeName": node}, "status": {"phase": "Running"}});
            if let (Some(p), Some(e)) = (p.as_object_mut(), extra.as_object()) {
                for (k, v) in e {
                    if let Some(m) = p.get_mut(k).and_then(Value::as_object_mut) {
                        m.extend(v.as_object().cloned().unwrap_or_default());
                    }
                }
            }
            p
        };
        let pods = vec![
            pod("web", "a", json!({})),
            pod("elsewhere", "b", json!({})),
            pod("done", "a", json!({"status": {"phase": "Succeeded"}})),
            pod(
                "going",
                "a",
                json!({"metadata": {"deletionTimestamp": "2026-12-02T16:00:00Z"}}),
            ),
            pod(
                "ds",
                "a",
                json!({"metadata": {"ownerReferences": [{"kind": "DaemonSet", "name": "x", "controller": true}]}}),
            ),
            pod(
                "skip",
                "a",
                json!({"metadata": {"labels": {"nvidia.com/gpu-driver-upgrade-drain.skip": "true"}}}),
            ),
        ];
        let keys = Keys::for_driver("gpu");
        let got = drain_targets(&pods, "a", &keys.skip_drain_pod_selector());
        assert_eq!(got, vec![("ml".to_string(), "web".to_string())]);
        let all = drain_targets(&pods, "a", "");
        assert_eq!(all.len(), 2, "{all:?}");
    }
}
