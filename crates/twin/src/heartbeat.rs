//! The twins' heartbeat: each reachable registered node's Lease renewed every `lease_interval`, and its
//! conditions (with those its faults set) refreshed every `status_interval`.
//!
//! Knows the API calls and the timers; the Lease and the status come from `tessera-node`.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tessera_model::clock::Clock;
use tessera_node::faults::{self as node_faults, Faults, NodeFault};
use tessera_node::node_object;
use tessera_node::topology::NodeSpec;

use crate::twins::TwinConfig;

/// Renews each node's Lease and refreshes its conditions, every `lease_interval` and
/// `status_interval`; nodes cut off by a fault are skipped.
pub(crate) async fn heartbeat(
    client: Client,
    nodes: crate::specs::Specs,
    config: TwinConfig,
    faults: Arc<std::sync::Mutex<BTreeMap<String, Faults>>>,
    standby: Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
    clock: Clock,
) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let node_api: Api<Node> = Api::all(client);
    let mut last_status = tokio::time::Instant::now();
    loop {
        let current = faults.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let standing_by = standby.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let all = nodes.all();
        let reachable: Vec<&NodeSpec> = all
            .iter()
            .map(|n| n.as_ref())
            .filter(|n| current.get(&n.name).and_then(|f| f.node) != Some(NodeFault::Unreachable))
            .filter(|n| !standing_by.contains(&n.name))
            .collect();
        for spec in reachable.iter().copied() {
            let lease = node_object::lease(spec, clock());
            let result = leases
                .patch(&spec.name, &PatchParams::default(), &Patch::Merge(&lease))
                .await;
            if let Err(kube::Error::Api(status)) = &result
                && status.code == 404
                && let Ok(lease) = serde_json::from_value::<Lease>(lease)
                && let Err(error) = leases.create(&PostParams::default(), &lease).await
            {
                tracing::warn!(node = %spec.name, %error, "cannot create the node lease");
            }
        }
        if last_status.elapsed() >= config.status_interval {
            last_status = tokio::time::Instant::now();
            for spec in reachable.iter().copied() {
                let node = current.get(&spec.name).cloned().unwrap_or_default();
                let patch = node_faults::node_status(spec, &node, clock());
                let conditions = json!({"status": {"conditions": patch["status"]["conditions"]}});
                // The stored node, for the transition times its conditions keep.
                let posted = async {
                    let stored = node_api.get_opt(&spec.name).await?;
                    post_node_status(&node_api, &spec.name, conditions, stored.as_ref()).await
                };
                if let Err(error) = posted.await {
                    tracing::warn!(node = %spec.name, %error, "cannot refresh node conditions");
                }
            }
        }
        tokio::time::sleep(config.lease_interval).await;
    }
}

/// Posts a node's status as the kubelet does, from the node as the API last showed it
/// (`stored`; `None` for a node with no status yet): a condition whose status did not change
/// keeps its `lastTransitionTime`, only `lastHeartbeatTime` moves.
pub(crate) async fn post_node_status(
    nodes: &Api<Node>,
    name: &str,
    mut status: serde_json::Value,
    stored: Option<&Node>,
) -> Result<(), kube::Error> {
    let previous: Vec<serde_json::Value> = stored
        .and_then(|node| node.status.as_ref())
        .and_then(|status| status.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|condition| serde_json::to_value(condition).ok())
        .collect();
    if let Some(next) = status
        .pointer_mut("/status/conditions")
        .and_then(serde_json::Value::as_array_mut)
    {
        tessera_model::conditions::keep_transition_times(&previous, next);
        // As the kubelet's strategic merge patch does (conditions merge by type), conditions
        // other components set (a maintenance controller's, a problem detector's) stay.
        let foreign: Vec<serde_json::Value> = previous
            .iter()
            .filter(|c| !next.iter().any(|n| n.get("type") == c.get("type")))
            .cloned()
            .collect();
        next.extend(foreign);
    }
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map(drop)
}
