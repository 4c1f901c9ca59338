//! The EndpointSlice and Endpoints controllers' shell (kube-controller-manager's
//! `endpointslice-controller` and `endpoints-controller`): watches Services, Pods, Nodes,
//! EndpointSlices and Endpoints, asks [`tessera_workloads::endpointslice::plan`] and
//! [`tessera_workloads::endpoints::plan`] for each selected Service and carries the plans
//! out with [`crate::shell::apply`]. A removed Service's slices go with it by owner reference;
//! its Endpoints (which upstream gives no owner) are deleted here.
//!
//! Decides nothing about endpoints; knows only when to look and what the watch caches may
//! not show yet.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Endpoints, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::ApiResource;
use kube::runtime::reflector::Store;
use kube::{Api, Client};
use serde_json::Value;
use tessera_model::json::text;
use tessera_workloads::plan::{Propagation, Resource, Write, Writes};
use tessera_workloads::{endpoints, endpointslice};

use crate::shell::{ObjectKey, Owner, ReconcileError, Tolerated, apply, watched};
use crate::workqueue::Passes;

/// The field manager the controllers write as.
pub const MANAGER: &str = crate::shell::KUBE_CONTROLLER_MANAGER;

/// A 404 on a patch or deletion: gone already; a 409 on creating Endpoints: there already.
const TOLERATED: Tolerated = Tolerated {
    create: &[409],
    change: &[404],
    status: &[404],
};

/// How long a Service whose slices were just written waits for the watch to show them
/// before it is reconciled again regardless.
const WATCH_GRACE: Duration = Duration::from_secs(2);

/// The watch caches a pass reads.
struct Caches {
    services: Store<Service>,
    pods: Store<Pod>,
    nodes: Store<Node>,
    slices: Store<EndpointSlice>,
    endpoints: Store<Endpoints>,
}

/// Runs both controllers until the task is dropped, recording their passes in `metrics`
/// (queues `endpoint_slice` and `endpoint`: one pass serves both).
pub async fn run(client: Client, metrics: Option<Arc<tessera_metrics::components::Registries>>) {
    use tessera_metrics::controllers::queue_name::{ENDPOINT, ENDPOINT_SLICE};
    let mut passes = Passes::new(
        metrics.as_deref(),
        &[ENDPOINT_SLICE, ENDPOINT],
        Arc::new(std::time::SystemTime::now),
    );
    let (services, service_changes) = watched(Api::<Service>::all(client.clone()));
    let (pods, pod_changes) = watched(Api::<Pod>::all(client.clone()));
    let (nodes, node_changes) = watched(Api::<Node>::all(client.clone()));
    let (slices, slice_changes) = watched(Api::<EndpointSlice>::all(client.clone()));
    let (endpoints, endpoints_changes) = watched(Api::<Endpoints>::all(client.clone()));
    let caches = Caches {
        services,
        pods,
        nodes,
        slices,
        endpoints,
    };
    // Nothing is written before every kind is listed: a pass over an empty slice cache would
    // write slices that exist already.
    let all_listed = Arc::new(AtomicBool::new(false));
    let listing = {
        let (services, pods, nodes) = (
            caches.services.clone(),
            caches.pods.clone(),
            caches.nodes.clone(),
        );
        let (slices, endpoints) = (caches.slices.clone(), caches.endpoints.clone());
        let all_listed = all_listed.clone();
        async move {
            let listed = services.wait_until_ready().await.is_ok()
                && pods.wait_until_ready().await.is_ok()
                && nodes.wait_until_ready().await.is_ok()
                && slices.wait_until_ready().await.is_ok()
                && endpoints.wait_until_ready().await.is_ok();
            all_listed.store(listed, Ordering::Release);
        }
    };
    let mut changes = futures::stream::select_all([
        futures::stream::once(listing).boxed(),
        service_changes,
        pod_changes,
        node_changes,
        slice_changes,
        endpoints_changes,
    ]);
    let mut resync = tokio::time::interval(Duration::from_secs(30));
    let mut state = PassState::default();
    while passes.next(&mut changes, &mut resync).await {
        if !all_listed.load(Ordering::Acquire) {
            continue;
        }
        if !state.pass(&client, &caches).await {
            // The plans are made again by the next pass (at the latest, the resync's).
            passes.retry();
        }
    }
}

/// What passes remember: the Services seen, and the slice count each Service's last writes
/// left (with when), until the watch shows it.
#[derive(Default)]
struct PassState {
    known: BTreeSet<ObjectKey>,
    awaited: BTreeMap<ObjectKey, (usize, Instant)>,
}

fn to_values<K>(store: &Store<K>) -> Vec<Value>
where
    K: kube::Resource<DynamicType = ()> + serde::Serialize + Clone + 'static,
{
    store
        .state()
        .iter()
        .filter_map(|k| serde_json::to_value(k.as_ref()).ok())
        .collect()
}

/// How many slices a plan leaves: those there, plus creations, less deletions.
fn slices_after(existing: usize, writes: &Writes) -> usize {
    writes.0.iter().fold(existing, |count, write| match write {
        Write::Create(..) => count + 1,
        Write::Delete { .. } => count.saturating_sub(1),
        _ => count,
    })
}

impl PassState {
    /// One pass over every Service; false when a write failed.
    async fn pass(&mut self, client: &Client, caches: &Caches) -> bool {
        let mut written = true;
        let services = to_values(&caches.services);
        // Only the pods of namespaces with a selecting Service are read (a cluster of
        // batch pods and no Services costs nothing here).
        let namespaces: BTreeSet<&str> = services
            .iter()
            .filter(|s| endpointslice::is_selected(s))
            .map(|s| text(s, "/metadata/namespace"))
            .collect();
        let mut pods_by_namespace: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        if !namespaces.is_empty() {
            for pod in caches.pods.state() {
                let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
                if namespaces.contains(namespace)
                    && let Ok(value) = serde_json::to_value(pod.as_ref())
                {
                    pods_by_namespace
                        .entry(namespace.to_string())
                        .or_default()
                        .push(value);
                }
            }
        }
        let no_pods = Vec::new();
        let nodes = to_values(&caches.nodes);
        let slices = to_values(&caches.slices);
        let endpoints = to_values(&caches.endpoints);
        let zones = endpointslice::node_zones(&nodes);
        let resource = ApiResource::erase::<Service>(&());
        let mut seen = BTreeSet::new();
        for service in &services {
            let namespace = text(service, "/metadata/namespace").to_string();
            let name = text(service, "/metadata/name").to_string();
            let key = (namespace.clone(), name.clone());
            seen.insert(key.clone());
            if service.pointer("/metadata/deletionTimestamp").is_some() {
                continue;
            }
            let mine: Vec<Value> = slices
                .iter()
                .filter(|s| endpointslice::is_managed_slice(s, service))
                .cloned()
                .collect();
            if let Some((count, since)) = self.awaited.get(&key) {
                if mine.len() != *count && since.elapsed() < WATCH_GRACE {
                    continue;
                }
                self.awaited.remove(&key);
            }
            let pods = pods_by_namespace.get(&namespace).unwrap_or(&no_pods);
            let mut writes = endpointslice::plan(
                service,
                pods,
                &mine,
                &zones,
                endpointslice::MAX_ENDPOINTS_PER_SLICE,
            );
            let left = slices_after(mine.len(), &writes);
            let wrote_slices = !writes.0.is_empty();
            let current = endpoints.iter().find(|e| {
                text(e, "/metadata/namespace") == namespace && text(e, "/metadata/name") == name
            });
            writes.0.extend(endpoints::plan(service, pods, current).0);
            if writes.0.is_empty() {
                continue;
            }
            let owner = Owner {
                resource: &resource,
                namespace: &namespace,
                name: &name,
            };
            match apply(client, owner, writes, MANAGER, TOLERATED).await {
                Ok(()) if wrote_slices => {
                    self.awaited.insert(key, (left, Instant::now()));
                }
                Ok(()) => {}
                Err(error) => {
                    tracing::warn!(%error, namespace, name, "endpoints of a Service not written");
                    written = false;
                }
            }
        }
        for (namespace, name) in self.known.difference(&seen) {
            if let Err(error) = delete_endpoints(client, namespace, name).await {
                tracing::warn!(%error, namespace, name, "Endpoints of a removed Service not deleted");
                written = false;
            }
        }
        self.awaited.retain(|key, _| seen.contains(key));
        self.known = seen;
        written
    }
}

/// Deletes the Endpoints of a Service that is gone (upstream's endpoints controller does so
/// when it syncs a missing Service).
async fn delete_endpoints(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<(), ReconcileError> {
    let resource = ApiResource::erase::<Service>(&());
    let owner = Owner {
        resource: &resource,
        namespace,
        name,
    };
    let writes = Writes(vec![Write::Delete {
        resource: Resource::Endpoints,
        name: name.to_string(),
        propagation: Propagation::Default,
    }]);
    apply(client, owner, writes, MANAGER, TOLERATED).await
}
