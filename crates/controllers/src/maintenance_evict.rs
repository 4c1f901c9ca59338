//! The maintenance controller's evictions: moves the pods a step names off a node. Pods of a
//! Kueue Workload holding quota are not evicted one by one: their Workload gets
//! `Evicted=True` `NodeMaintenance` through its status (with the resourceVersion it was read
//! at as precondition) and the `EvictedDueToNodeMaintenance` event, so the queue manager stops
//! the job, releases the quota and requeues the Workload, as after a preemption; the node waits
//! while any such pod still runs. Every other pod goes through `pods/eviction` (its budget
//! respected; a 429 makes the node wait).
//!
//! Decides nothing itself: which pods belong to which Workload and the status to write are
//! [`tessera_queue::api::maintenance_eviction`]'s.

use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, EvictParams, Patch};
use kube::{Api, Client};
use serde_json::{Value, json};
use tessera_maintenance::UpgradeState;
use tessera_queue::api::maintenance_eviction::{self, Key, Moves};

use crate::maintenance::MANAGER;
use crate::shell::patch_params;

/// Kueue's Workload resource, as the queue manager watches it.
pub fn workload_resource() -> ApiResource {
    crate::queue::kueue_resource("Workload", "workloads")
}

/// What one pass knows of the cluster for an eviction.
pub struct Cluster<'a> {
    /// Every pod.
    pub pods: &'a [Value],
    /// Every Workload.
    pub workloads: &'a [Value],
    /// The plan the evictions are for.
    pub plan: &'a str,
}

/// Which of `targets` (namespace, name) leave `node` through their Workload, and which through
/// the Eviction API; a target missing from the watch cache goes through the API (a 404 there
/// means it is gone).
pub fn moves(
    cluster: &Cluster<'_>,
    node: &str,
    targets: &[(String, String)],
    now: SystemTime,
) -> Moves {
    let by_key: BTreeMap<(&str, &str), &Value> = cluster
        .pods
        .iter()
        .map(|p| {
            let text = |path: &str| p.pointer(path).and_then(Value::as_str).unwrap_or_default();
            ((text("/metadata/namespace"), text("/metadata/name")), p)
        })
        .collect();
    let mut known = Vec::new();
    let mut missing = Vec::new();
    for (namespace, name) in targets {
        match by_key.get(&(namespace.as_str(), name.as_str())) {
            Some(pod) => known.push(*pod),
            None => missing.push(Key {
                namespace: namespace.clone(),
                name: name.clone(),
            }),
        }
    }
    let mut moves =
        maintenance_eviction::moves(&known, cluster.workloads, (node, Some(cluster.plan)), now);
    moves.by_api.extend(missing);
    moves
}

/// Moves `targets` off `node`. `Some(on_success)` when all are gone or going, `None` when a
/// budget refused one (429), a Workload's eviction was not written, or pods of Workloads
/// holding quota still run (retried on the next pass, the node keeps its state),
/// `Some(on_failure)` on any other error of the Eviction API.
pub async fn evict(
    client: &Client,
    cluster: &Cluster<'_>,
    node: &str,
    targets: &[(String, String)],
    (on_success, on_failure): (UpgradeState, UpgradeState),
    now: SystemTime,
) -> Option<UpgradeState> {
    let moves = moves(cluster, node, targets, now);
    let mut outcome = moves.held.is_empty().then_some(on_success);
    for eviction in &moves.evictions {
        let Key { namespace, name } = &eviction.workload;
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &workload_resource());
        let patch = json!({"metadata": {"resourceVersion": eviction.resource_version},
            "status": eviction.status});
        match api
            .patch_status(name, &patch_params(MANAGER), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                tracing::info!(%namespace, workload = %name, %node, "evicted the workload through Kueue");
                let event = &eviction.event;
                crate::shell::record_event(
                    client,
                    event.involved.clone(),
                    (event.kind, &event.reason, &event.message),
                    MANAGER,
                    now,
                )
                .await;
            }
            Err(error) => {
                tracing::info!(%namespace, workload = %name, %error, "workload eviction not written; retrying");
                outcome = None;
            }
        }
    }
    for Key { namespace, name } in &moves.by_api {
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        match api.evict(name, &EvictParams::default()).await {
            Ok(_) => tracing::info!(%namespace, pod = %name, "evicted"),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(kube::Error::Api(e)) if e.code == 429 => {
                tracing::info!(%namespace, pod = %name, message = %e.message, "eviction refused by a disruption budget; retrying");
                outcome = None;
            }
            Err(error) => {
                tracing::warn!(%namespace, pod = %name, %error, "eviction failed");
                return Some(on_failure);
            }
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_missing_from_the_cache_go_through_the_api() {
        let pods = [json!({"metadata": {"namespace": "a", "name": "train-0",
                "ownerReferences": [{"uid": "job", "controller": true}]},
            "status": {"phase": "Running"}})];
        let workloads = [json!({"metadata": {"namespace": "a", "name": "w",
                "resourceVersion": "3", "ownerReferences": [{"uid": "job"}]},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}]}})];
        let cluster = Cluster {
            pods: &pods,
            workloads: &workloads,
            plan: "driver",
        };
        let targets = [("a".into(), "train-0".into()), ("a".into(), "gone".into())];
        let got = moves(&cluster, "n1", &targets, SystemTime::UNIX_EPOCH);
        let key = |name: &str| Key {
            namespace: "a".into(),
            name: name.into(),
        };
        assert_eq!(got.by_api, vec![key("gone")]);
        assert_eq!(got.held, vec![key("train-0")]);
        assert_eq!(got.evictions.len(), 1);
        assert_eq!(
            got.evictions[0].event.message,
            "The node n1 is under maintenance by the plan driver"
        );
    }
}
