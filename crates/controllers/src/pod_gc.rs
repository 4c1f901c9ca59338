//! The pod garbage collector's shell: watches pods and nodes, every 20 s (PodGC's
//! `gcCheckPeriod`) or after a burst of changes runs [`tessera_workloads::pod_gc::sweep`], and for
//! each pod it names writes the Failed status and deletes the pod with grace period 0, as
//! kube-controller-manager's `pod-garbage-collector` does for pods of nodes that are gone (a
//! node a maintenance rotation removed, a deleted node).
//!
//! Knows the API calls and the quarantine bookkeeping's home; what to collect is the core's.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, Patch};
use kube::{Api, Client};
use tessera_model::clock::Clock;
use tessera_workloads::pod_gc::{Collect, sweep};

use crate::shell::{next_pass, patch_params, watched};

/// The field manager the collector writes as.
pub const MANAGER: &str = crate::shell::KUBE_CONTROLLER_MANAGER;

/// Runs the collector until the task is dropped, reading the time from `clock`.
pub async fn run(client: Client, clock: Clock) {
    let (pods, pod_changes) = watched(Api::<Pod>::all(client.clone()));
    let (nodes, node_changes) = watched(Api::<Node>::all(client.clone()));
    let mut changes = futures::stream::select_all([pod_changes, node_changes]);
    let mut resync = tokio::time::interval(Duration::from_secs(20));
    let mut missing_since = BTreeMap::new();
    while next_pass(&mut changes, &mut resync).await {
        let present: BTreeSet<String> = nodes
            .state()
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let pods: Vec<serde_json::Value> = pods
            .state()
            .iter()
            .filter_map(|p| serde_json::to_value(p.as_ref()).ok())
            .collect();
        for collect in sweep(&pods, &present, &mut missing_since, clock()) {
            // A node the watch missed may exist after all: ask before deleting (as PodGC does).
            if let Some(node) = node_of(&pods, &collect)
                && Api::<Node>::all(client.clone())
                    .get_opt(&node)
                    .await
                    .ok()
                    .flatten()
                    .is_some()
            {
                continue;
            }
            if let Err(error) = carry_out(&client, &collect).await {
                tracing::debug!(pod = %collect.name, %error, "pod GC failed; retried next pass");
            }
        }
    }
}

fn node_of(pods: &[serde_json::Value], collect: &Collect) -> Option<String> {
    pods.iter()
        .find(|p| {
            p.pointer("/metadata/namespace").and_then(|v| v.as_str()) == Some(&collect.namespace)
                && p.pointer("/metadata/name").and_then(|v| v.as_str()) == Some(&collect.name)
        })
        .and_then(|p| p.pointer("/spec/nodeName"))
        .and_then(|v| v.as_str())
        .filter(|n| !n.is_empty())
        .map(str::to_string)
}

async fn carry_out(client: &Client, collect: &Collect) -> Result<(), kube::Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &collect.namespace);
    if let Some(status) = &collect.status {
        match api
            .patch_status(&collect.name, &patch_params(MANAGER), &Patch::Merge(status))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(error) => return Err(error),
        }
    }
    tracing::info!(namespace = %collect.namespace, pod = %collect.name, "found an orphaned pod; deleting");
    match api
        .delete(&collect.name, &DeleteParams::default().grace_period(0))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(error) => Err(error),
    }
}
