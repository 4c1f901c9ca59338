//! The node lifecycle shell: watches nodes, node Leases and pods, runs
//! [`tessera_workloads::node_lifecycle::reconcile`] every monitor period (and at the next eviction due),
//! and writes its actions: conditions set to Unknown with a `NodeNotReady` event from
//! `node-controller`, condition taints, and taint evictions (pod deletions) with a
//! `TaintManagerEviction` event from `taint-eviction-controller`.
//!
//! Records kube-controller-manager's metrics: its passes in the work queue
//! `node_lifecycle_controller` (node, Lease and pod changes are the adds), each zone's
//! health after a pass, and a written NoExecute condition taint as a node eviction.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, Patch};
use kube::{Api, Client};
use serde_json::{Value, json};
use tessera_metrics::components::Registries;
use tessera_metrics::controllers::{eviction_started, queue_name, zone_key, zones};
use tessera_model::clock::Clock;
use tessera_model::time::timestamp;

use crate::shell::{all, patch_params, record_event, watched};
use crate::workqueue::Passes;
use tessera_workloads::node_lifecycle::{Action, reconcile};

/// The field manager the controller writes as.
pub const MANAGER: &str = crate::shell::KUBE_CONTROLLER_MANAGER;

/// Settings.
#[derive(Clone)]
pub struct NodeMonitorConfig {
    /// How long a Lease may go unrenewed before the node is Unknown (`--node-monitor-grace-period`).
    pub grace_period: Duration,
    /// How often nodes are checked (`--node-monitor-period`).
    pub period: Duration,
    /// Where the controller reads the time.
    pub clock: Clock,
    /// kube-controller-manager's metrics, when the platform serves them.
    pub metrics: Option<Arc<Registries>>,
}

impl Default for NodeMonitorConfig {
    fn default() -> Self {
        NodeMonitorConfig {
            grace_period: Duration::from_secs(50),
            period: Duration::from_secs(5),
            clock: Arc::new(SystemTime::now),
            metrics: None,
        }
    }
}

impl std::fmt::Debug for NodeMonitorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeMonitorConfig")
            .field("grace_period", &self.grace_period)
            .field("period", &self.period)
            .finish_non_exhaustive()
    }
}

/// Runs the controller until the task is dropped.
pub async fn run(client: Client, config: NodeMonitorConfig) {
    let clock = config.clock;
    let metrics = config.metrics.as_deref().map(|m| &m.controller_manager);
    let mut passes = Passes::new(
        config.metrics.as_deref(),
        &[queue_name::NODE_LIFECYCLE],
        clock.clone(),
    );
    let started = clock();
    let (nodes, node_changes) = watched(Api::<Node>::all(client.clone()));
    let (leases, lease_changes) =
        watched(Api::<Lease>::namespaced(client.clone(), "kube-node-lease"));
    let (pods, pod_changes) = watched(Api::<Pod>::all(client.clone()));
    // The reflectors fill the stores as they are polled.
    let mut changes = futures::stream::select_all([node_changes, lease_changes, pod_changes]);
    let mut wake = tokio::time::Instant::now() + config.period;
    loop {
        tokio::select! {
            change = changes.next() => {
                if change.is_none() {
                    return;
                }
                passes.changed();
                continue;
            }
            () = tokio::time::sleep_until(wake) => {}
        }
        passes.start();
        let now = clock();
        let nodes = all(&nodes);
        let (actions, next) = reconcile(
            &nodes,
            &all(&leases),
            &all(&pods),
            now,
            config.grace_period,
            started,
        );
        let node_values: Vec<Value> = match metrics {
            Some(_) => nodes
                .iter()
                .filter_map(|n| serde_json::to_value(n).ok())
                .collect(),
            None => Vec::new(),
        };
        let mut failed = false;
        for action in actions {
            let eviction = metrics.and_then(|_| eviction_zone(&node_values, &action));
            match apply(&client, action, &clock).await {
                Ok(()) => {
                    if let (Some(metrics), Some(zone)) = (metrics, eviction) {
                        metrics.eviction(&zone);
                    }
                }
                Err(error) => {
                    tracing::debug!(%error, "node lifecycle action failed; retrying next period");
                    failed = true;
                }
            }
        }
        if let Some(metrics) = metrics {
            metrics.set_zones(&zones(&node_values));
        }
        if failed {
            passes.retry();
        }
        passes.finish();
        let until_next = next
            .and_then(|at| at.duration_since(clock()).ok())
            .map_or(config.period, |d| d.min(config.period));
        wake = tokio::time::Instant::now() + until_next;
    }
}

/// The zone of the node whose taint-based eviction `action` starts, if it starts one.
fn eviction_zone(nodes: &[Value], action: &Action) -> Option<String> {
    let Action::SetTaints { node, taints } = action else {
        return None;
    };
    let current = nodes
        .iter()
        .find(|n| n.pointer("/metadata/name").and_then(Value::as_str) == Some(node))?;
    let taints: Vec<Value> = taints
        .iter()
        .filter_map(|t| serde_json::to_value(t).ok())
        .collect();
    eviction_started(current, &taints).then(|| zone_key(current))
}

async fn apply(client: &Client, action: Action, clock: &Clock) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    match action {
        Action::MarkUnknown { node } => {
            let Some(current) = nodes.get_opt(&node).await? else {
                return Ok(());
            };
            let now = timestamp(clock());
            let conditions: Vec<_> = current
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .map(|c| {
                    let mut c = serde_json::to_value(c).unwrap_or_default();
                    c["status"] = json!("Unknown");
                    c["reason"] = json!("NodeStatusUnknown");
                    c["message"] = json!("Kubelet stopped posting node status.");
                    c["lastTransitionTime"] = json!(now);
                    c
                })
                .collect();
            nodes
                .patch_status(
                    &node,
                    &patch_params(MANAGER),
                    &Patch::Merge(json!({"status": {"conditions": conditions}})),
                )
                .await?;
            let involved = json!({"kind": "Node", "name": node, "uid": node});
            record_event(
                client,
                involved,
                (
                    "Normal",
                    "NodeNotReady",
                    &format!("Node {node} status is now: NodeNotReady"),
                ),
                "node-controller",
                clock(),
            )
            .await;
        }
        Action::SetTaints { node, taints } => {
            // No taints left: the field goes, as Go's omitempty renders it.
            let taints = if taints.is_empty() {
                json!(null)
            } else {
                json!(taints)
            };
            nodes
                .patch(
                    &node,
                    &patch_params(MANAGER),
                    &Patch::Merge(json!({"spec": {"taints": taints}})),
                )
                .await?;
        }
        Action::Evict { namespace, pod, .. } => {
            let involved =
                json!({"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": pod});
            record_event(
                client,
                involved,
                (
                    "Normal",
                    "TaintManagerEviction",
                    &format!("Marking for deletion Pod {namespace}/{pod}"),
                ),
                "taint-eviction-controller",
                clock(),
            )
            .await;
            match Api::<Pod>::namespaced(client.clone(), &namespace)
                .delete(&pod, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error),
            }
        }
    }
    Ok(())
}
