//! The simulated cluster autoscaler's loop: every [`STEP`] it lists ProvisioningRequests
//! (once their CRD is served), PodTemplates, Nodes and Pods, hands them to
//! [`tessera_node::autoscaler::Autoscaler::step`] with the time from the twins' clock, and
//! carries out what it answers — standby node twins registered (and their devices and NUMA
//! layout published as at start), idle ones deleted with their Lease, request conditions
//! written. The twins' heartbeat leaves standby nodes alone.
//!
//! A shell: decides nothing itself.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, PodTemplate};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::{Api, Client};
use serde_json::{Value, json};
use tessera_model::clock::Clock;
use tessera_node::autoscaler::{Action, Autoscaler, Observed};

/// How often the autoscaler looks.
const STEP: Duration = Duration::from_secs(1);

/// The ProvisioningRequest resource.
fn requests_resource() -> ApiResource {
    let (group, version) = (
        tessera_model::provisioning::GROUP,
        tessera_model::provisioning::VERSION,
    );
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, "ProvisioningRequest"),
        "provisioningrequests",
    )
}

/// What a step needs from the cluster, or `None` when something could not be listed.
async fn observe(
    client: &Client,
) -> Option<(Vec<Value>, Vec<Value>, BTreeSet<String>, BTreeSet<String>)> {
    let params = ListParams::default();
    let requests = list_values(
        Api::<DynamicObject>::all_with(client.clone(), &requests_resource()),
        &params,
    )
    .await?;
    let templates = list_values(Api::<PodTemplate>::all(client.clone()), &params).await?;
    let nodes: BTreeSet<String> = Api::<Node>::all(client.clone())
        .list(&params)
        .await
        .ok()?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    let busy: BTreeSet<String> = Api::<Pod>::all(client.clone())
        .list(&params)
        .await
        .ok()?
        .items
        .into_iter()
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .filter_map(|p| p.spec.and_then(|s| s.node_name))
        .collect();
    Some((requests, templates, nodes, busy))
}

/// Every object `api` lists, as JSON; `None` when the list fails.
async fn list_values<K>(api: Api<K>, params: &ListParams) -> Option<Vec<Value>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let items = api.list(params).await.ok()?.items;
    Some(
        items
            .iter()
            .filter_map(|o| serde_json::to_value(o).ok())
            .collect(),
    )
}

/// Runs the autoscaler until dropped; `register` registers one node twin.
pub(crate) async fn run<R, F>(
    client: Client,
    mut autoscaler: Autoscaler,
    standby: Arc<Mutex<BTreeSet<String>>>,
    clock: Clock,
    register: R,
) where
    R: Fn(tessera_node::topology::NodeSpec) -> F,
    F: std::future::Future<Output = ()>,
{
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    loop {
        tokio::time::sleep(STEP).await;
        let Some((listed, templates, present, busy)) = observe(&client).await else {
            continue;
        };
        let observed = Observed {
            requests: &listed,
            pod_templates: &templates,
            nodes: &present,
            busy: &busy,
        };
        for action in autoscaler.step(&observed, clock()) {
            match action {
                Action::Register(spec) => {
                    let name = spec.name.clone();
                    standby
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&name);
                    register(*spec).await;
                    tracing::info!(node = %name, "autoscaler: node added");
                }
                Action::Remove(name) => {
                    standby
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(name.clone());
                    if let Err(error) = nodes.delete(&name, &DeleteParams::default()).await {
                        tracing::warn!(node = %name, %error, "autoscaler: node not removed");
                    }
                    // Gone already or never made: either way there is no Lease to keep.
                    let _ = leases.delete(&name, &DeleteParams::default()).await;
                    tracing::info!(node = %name, "autoscaler: idle node removed");
                }
                Action::RequestConditions(namespace, name, conditions) => {
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(client.clone(), &namespace, &requests_resource());
                    let patch = json!({"status": {"conditions": conditions}});
                    if let Err(error) = api
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                    {
                        tracing::warn!(request = %name, %error, "autoscaler: request status not written");
                    }
                }
            }
        }
    }
}
