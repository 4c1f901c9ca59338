//! The disruption controller: keeps every PodDisruptionBudget's status current from the pods
//! it selects, so the eviction API can honour it. Decisions are made by
//! [`tessera_workloads::disruption::budget`]; this module watches, computes and patches.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use tessera_model::clock::Clock;
use tessera_model::selector;

use crate::shell::watched;
use crate::workqueue::Passes;
use tessera_workloads::disruption;

/// The field manager the controller writes status as.
pub const MANAGER: &str = crate::shell::KUBE_CONTROLLER_MANAGER;

/// Runs the disruption controller until the task is dropped, reading the time from `clock`
/// and recording its passes in `metrics` (queue `disruption`).
pub async fn run(
    client: Client,
    clock: Clock,
    metrics: Option<std::sync::Arc<tessera_metrics::components::Registries>>,
) {
    let mut passes = Passes::new(
        metrics.as_deref(),
        &[tessera_metrics::controllers::queue_name::DISRUPTION],
        clock.clone(),
    );
    let (pdb_store, pdb_changes) = watched(Api::<PodDisruptionBudget>::all(client.clone()));
    let (pod_store, pod_changes) = watched(Api::<Pod>::all(client.clone()));
    let mut changes = futures::stream::select_all([pdb_changes, pod_changes]);
    let mut resync = tokio::time::interval(Duration::from_secs(15));
    while passes.next(&mut changes, &mut resync).await {
        if let Err(error) = reconcile_all(&client, &pdb_store, &pod_store, clock()).await {
            tracing::warn!(%error, "disruption controller pass failed");
            // The resync tick runs the next pass regardless of changes.
            passes.retry();
        }
    }
}

async fn reconcile_all(
    client: &Client,
    pdbs: &Store<PodDisruptionBudget>,
    pods: &Store<Pod>,
    now: SystemTime,
) -> Result<(), kube::Error> {
    let pods: Vec<Value> = pods
        .state()
        .iter()
        .filter_map(|p| serde_json::to_value(p.as_ref()).ok())
        .collect();
    for pdb in pdbs.state() {
        let namespace = pdb.namespace().unwrap_or_default();
        let Ok(pdb_value) = serde_json::to_value(pdb.as_ref()) else {
            continue;
        };
        let selector_value = pdb_value.pointer("/spec/selector");
        let selected: Vec<&Value> = pods
            .iter()
            .filter(|p| {
                p.pointer("/metadata/namespace").and_then(Value::as_str) == Some(namespace.as_str())
            })
            .filter(|p| selector::matches(selector_value, &selector::labels(p)))
            .collect();
        let expected = expected_replicas(client, &namespace, &selected).await;
        let status = disruption::budget(&pdb_value, &selected, expected, now);
        if pdb_value.get("status") == Some(&status) {
            continue;
        }
        let api: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &namespace);
        // A merge patch would leave stale disruptedPods entries behind; replace that map.
        let mut patch = json!({"status": status});
        if patch["status"].get("disruptedPods").is_none() {
            patch["status"]["disruptedPods"] = Value::Null;
        }
        let params = PatchParams {
            field_manager: Some(MANAGER.into()),
            ..PatchParams::default()
        };
        api.patch_status(&pdb.name_any(), &params, &Patch::Merge(&patch))
            .await?;
    }
    Ok(())
}

/// The replicas the selected pods' controllers want, summed over distinct controllers; `None`
/// when some pod has no scalable controller (the pod count is used then).
async fn expected_replicas(client: &Client, namespace: &str, pods: &[&Value]) -> Option<i64> {
    let mut controllers = BTreeSet::new();
    for pod in pods {
        let owner = pod
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .and_then(|refs| {
                refs.iter()
                    .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
            })?;
        let kind = owner.get("kind").and_then(Value::as_str)?.to_string();
        let name = owner.get("name").and_then(Value::as_str)?.to_string();
        controllers.insert((kind, name));
    }
    if controllers.is_empty() {
        return None;
    }
    let mut scales: BTreeMap<(String, String), i64> = BTreeMap::new();
    for (kind, name) in controllers {
        let (kind, name, replicas) = match kind.as_str() {
            "ReplicaSet" => {
                let rs = Api::<ReplicaSet>::namespaced(client.clone(), namespace)
                    .get(&name)
                    .await
                    .ok()?;
                let deployment = rs
                    .owner_references()
                    .iter()
                    .find(|r| r.kind == "Deployment" && r.controller == Some(true))
                    .map(|r| r.name.clone());
                match deployment {
                    Some(deployment) => {
                        let d = Api::<Deployment>::namespaced(client.clone(), namespace)
                            .get(&deployment)
                            .await
                            .ok()?;
                        (
                            "Deployment".to_string(),
                            deployment,
                            d.spec.and_then(|s| s.replicas).unwrap_or(1),
                        )
                    }
                    None => (kind, name, rs.spec.and_then(|s| s.replicas).unwrap_or(1)),
                }
            }
            "StatefulSet" => {
                let set = Api::<StatefulSet>::namespaced(client.clone(), namespace)
                    .get(&name)
                    .await
                    .ok()?;
                (kind, name, set.spec.and_then(|s| s.replicas).unwrap_or(1))
            }
            _ => return None,
        };
        scales.insert((kind, name), i64::from(replicas));
    }
    Some(scales.values().sum())
}
