//! The world the simulated containers' network sees, kept by watches instead of listed on
//! every exec: Pods, Services, EndpointSlices and Nodes (as the JSON the dataplane reads),
//! and the network policy index (Namespaces, NetworkPolicies and, where their resources are
//! served, the network-policy-api's cluster-wide kinds and Multus's MultiNetworkPolicies),
//! and the Gateway API's objects (decided once per snapshot by `tessera-gateway`, so a
//! request to a Gateway's address is routed as its controller reports).
//! An exec takes one shared [`View`] (the [`Cluster`] and the secondary networks' policies),
//! rebuilt only after something changed.
//!
//! A shell: the watches and the locks. What a probe does is `tessera-exec`'s, what policy
//! decides `tessera-netpol`'s (through [`PolicyIndex`]).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tessera_exec::Cluster;
use tessera_model::multus;
use tessera_netpol::{Policy, PolicyKind, PolicyRef};
use tessera_node::network::Networking;

use crate::netpol::PolicyIndex;
use crate::secondary_policy::SecondaryNetworks;

/// The kinds whose first listing an exec waits for: the four the dataplane reads, and the
/// namespaces and NetworkPolicies every cluster serves.
const AWAITED_KINDS: usize = 6;

/// How long the first execs wait for the first listings before they run on what arrived
/// (once it has run out, no exec waits again: a watch the identity may not make, say).
const FIRST_SYNC: Duration = Duration::from_secs(10);

/// An object's (namespace, name).
type Key = (String, String);

#[derive(Default)]
struct Objects {
    pods: BTreeMap<Key, Value>,
    services: BTreeMap<Key, Value>,
    slices: BTreeMap<Key, Value>,
    nodes: BTreeMap<Key, Value>,
    namespaces: BTreeMap<Key, Value>,
    multi_policies: BTreeMap<Key, Value>,
    /// The Gateway API's objects, by kind (`tessera_controllers::gateway::KINDS` order).
    gateway_api: [BTreeMap<Key, Value>; 5],
    /// InferencePools, backends the Gateways route to.
    inference_pools: BTreeMap<Key, Value>,
    /// The snapshot of the objects above, until one of them changes.
    snapshot: Option<Snapshot>,
}

struct Snapshot {
    domain: String,
    nameserver: Ipv4Addr,
    view: View,
}

/// What one exec sees: the cluster network and the secondary networks' policies.
#[derive(Clone)]
pub struct View {
    /// The cluster as the dataplane reads it.
    pub cluster: Arc<Cluster>,
    /// The MultiNetworkPolicies of the secondary networks.
    pub networks: Arc<SecondaryNetworks>,
}

struct Shared {
    objects: Mutex<Objects>,
    policy: Arc<PolicyIndex>,
    /// How many of the awaited kinds have been listed once.
    synced: tokio::sync::watch::Sender<usize>,
    /// Whether an exec waited [`FIRST_SYNC`] in vain.
    gave_up: AtomicBool,
}

/// The watched world; its watches stop when it is dropped.
pub struct World {
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::AbortHandle>,
}

impl Drop for World {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Which map of [`Objects`] a kind fills.
#[derive(Clone, Copy)]
enum Table {
    Pods,
    Services,
    Slices,
    Nodes,
    Namespaces,
    MultiPolicies,
    /// A Gateway API kind (its index in `tessera_controllers::gateway::KINDS`).
    GatewayApi(usize),
    InferencePools,
}

impl Table {
    /// Whether an exec waits for its first listing (see [`AWAITED_KINDS`]).
    fn awaited(self) -> bool {
        !matches!(
            self,
            Table::MultiPolicies | Table::GatewayApi(_) | Table::InferencePools
        )
    }
}

impl Objects {
    fn table(&mut self, table: Table) -> &mut BTreeMap<Key, Value> {
        self.snapshot = None;
        match table {
            Table::Pods => &mut self.pods,
            Table::Services => &mut self.services,
            Table::Slices => &mut self.slices,
            Table::Nodes => &mut self.nodes,
            Table::Namespaces => &mut self.namespaces,
            Table::MultiPolicies => &mut self.multi_policies,
            Table::GatewayApi(i) => &mut self.gateway_api[i % 5],
            Table::InferencePools => &mut self.inference_pools,
        }
    }
}

/// One change of a watched kind, relists reconciled into deletions.
enum Change<K> {
    Upsert(K),
    Delete(Key),
    /// The first complete listing arrived.
    Listed,
}

impl World {
    /// Starts the watches (on the current tokio runtime).
    pub fn watch(client: Client) -> World {
        let (synced, _) = tokio::sync::watch::channel(0);
        let shared = Arc::new(Shared {
            objects: Mutex::default(),
            policy: Arc::new(PolicyIndex::new()),
            synced,
            gave_up: AtomicBool::new(false),
        });
        let mut tasks = Vec::new();
        let mut spawn = |task: futures::future::BoxFuture<'static, ()>| {
            tasks.push(tokio::spawn(task).abort_handle());
        };
        spawn(Box::pin(follow(
            Api::<Pod>::all(client.clone()),
            on_objects(
                &shared,
                Table::Pods,
                |policy, change: &Change<Pod>| match change {
                    Change::Upsert(pod) => policy.apply_pod(pod),
                    Change::Delete((namespace, name)) => policy.remove_pod(namespace, name),
                    Change::Listed => {}
                },
            ),
        )));
        spawn(Box::pin(follow(
            Api::<Service>::all(client.clone()),
            on_objects(&shared, Table::Services, |_, _: &Change<Service>| {}),
        )));
        spawn(Box::pin(follow(
            Api::<EndpointSlice>::all(client.clone()),
            on_objects(&shared, Table::Slices, |_, _: &Change<EndpointSlice>| {}),
        )));
        spawn(Box::pin(follow(
            Api::<Node>::all(client.clone()),
            on_objects(&shared, Table::Nodes, |_, _: &Change<Node>| {}),
        )));
        spawn(Box::pin(follow(
            Api::<Namespace>::all(client.clone()),
            on_objects(
                &shared,
                Table::Namespaces,
                |policy, change: &Change<Namespace>| match change {
                    Change::Upsert(namespace) => policy.apply_namespace(namespace),
                    Change::Delete((_, name)) => policy.remove_namespace(name),
                    Change::Listed => {}
                },
            ),
        )));
        // Not awaited: a cluster without Multus does not serve them.
        let gvk = GroupVersionKind::gvk(multus::GROUP, "v1beta1", "MultiNetworkPolicy");
        spawn(Box::pin(follow(
            Api::<DynamicObject>::all_with(
                client.clone(),
                &ApiResource::from_gvk_with_plural(&gvk, "multi-networkpolicies"),
            ),
            on_objects(
                &shared,
                Table::MultiPolicies,
                |_, _: &Change<DynamicObject>| {},
            ),
        )));
        // Not awaited: a cluster without the Gateway API does not serve them.
        for (i, (version, kind, plural)) in tessera_controllers::gateway::KINDS.iter().enumerate() {
            let resource = tessera_controllers::gateway::resource(version, kind, plural);
            spawn(Box::pin(follow(
                Api::<DynamicObject>::all_with(client.clone(), &resource),
                on_objects(
                    &shared,
                    Table::GatewayApi(i),
                    |_, _: &Change<DynamicObject>| {},
                ),
            )));
        }
        // Not awaited either: the inference extension's pools.
        let pools = tessera_controllers::inference_pools::pool_resource();
        spawn(Box::pin(follow(
            Api::<DynamicObject>::all_with(client.clone(), &pools),
            on_objects(
                &shared,
                Table::InferencePools,
                |_, _: &Change<DynamicObject>| {},
            ),
        )));
        let policies = shared.clone();
        spawn(Box::pin(follow(
            Api::<NetworkPolicy>::all(client.clone()),
            move |change: Change<NetworkPolicy>| match change {
                Change::Upsert(policy) => policies
                    .policy
                    .apply_policy(Policy::from_network_policy(&policy)),
                Change::Delete((namespace, name)) => policies.policy.remove_policy(&PolicyRef {
                    kind: PolicyKind::NetworkPolicy,
                    namespace: Some(namespace),
                    name,
                }),
                Change::Listed => policies.listed(),
            },
        )));
        for (version, kind, plural) in tessera_model::network_policy_api::KINDS {
            let gvk =
                GroupVersionKind::gvk(tessera_model::network_policy_api::GROUP, version, kind);
            let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
            let api = Api::<DynamicObject>::all_with(client.clone(), &resource);
            let policies = shared.clone();
            spawn(Box::pin(follow(
                api,
                move |change: Change<DynamicObject>| {
                    cluster_policy(&policies.policy, &resource, change);
                },
            )));
        }
        World { shared, tasks }
    }

    /// The network policy index the watches keep.
    pub fn policy(&self) -> Arc<PolicyIndex> {
        self.shared.policy.clone()
    }

    /// The world as the dataplane sees it now, with `networking`'s DNS settings; waits (a
    /// while) for the first listings.
    pub async fn view(&self, networking: &Networking) -> View {
        let mut synced = self.shared.synced.subscribe();
        if !self.shared.gave_up.load(Ordering::Relaxed)
            && tokio::time::timeout(
                FIRST_SYNC,
                synced.wait_for(|listed| *listed >= AWAITED_KINDS),
            )
            .await
            .is_err()
        {
            self.shared.gave_up.store(true, Ordering::Relaxed);
            tracing::warn!(
                "the containers' watches have not listed everything within {FIRST_SYNC:?}; \
                 execs run on what arrived"
            );
        }
        // kubeadm's cluster DNS address: the tenth of the service range.
        let nameserver = networking.service_cidr.address(10);
        let domain = &networking.cluster_domain;
        let mut objects = self.shared.lock();
        if let Some(snapshot) = &objects.snapshot
            && snapshot.domain == *domain
            && snapshot.nameserver == nameserver
        {
            return snapshot.view.clone();
        }
        let values = |map: &BTreeMap<Key, Value>| map.values().cloned().collect::<Vec<_>>();
        let services = values(&objects.services);
        let slices = values(&objects.slices);
        let gateways = tessera_gateway::Model::build(&tessera_gateway::Inputs {
            classes: values(&objects.gateway_api[0]),
            gateways: values(&objects.gateway_api[1]),
            http_routes: values(&objects.gateway_api[2]),
            grpc_routes: values(&objects.gateway_api[3]),
            reference_grants: values(&objects.gateway_api[4]),
            services: services.clone(),
            namespaces: values(&objects.namespaces),
            extra_backends: vec![tessera_controllers::gateway::inference_pool_backends(
                objects.inference_pools.keys().cloned(),
            )],
            ..tessera_gateway::Inputs::default()
        });
        let cluster = Arc::new(Cluster {
            resolver: tessera_dns::Resolver::new(domain, &services, &slices),
            nameserver,
            // The platform's registry stands behind its Service as a pod would.
            pods: values(&objects.pods)
                .into_iter()
                .chain(tessera_node::registry::host_pods(&slices))
                .collect(),
            services,
            slices,
            nodes: values(&objects.nodes),
            gateways,
            inference_pools: values(&objects.inference_pools),
        });
        let typed = |map: &BTreeMap<Key, Value>, api_version: &str, kind: &str| {
            map.values()
                .map(|value| {
                    let mut value = value.clone();
                    value["apiVersion"] = Value::from(api_version);
                    value["kind"] = Value::from(kind);
                    value
                })
                .collect::<Vec<_>>()
        };
        // The pods are the cluster's: read from it only when a secondary network is probed.
        let mut network_values = typed(&objects.namespaces, "v1", "Namespace");
        network_values.extend(typed(
            &objects.multi_policies,
            &format!("{}/v1beta1", multus::GROUP),
            "MultiNetworkPolicy",
        ));
        let view = View {
            networks: Arc::new(SecondaryNetworks::new(cluster.clone(), network_values)),
            cluster,
        };
        objects.snapshot = Some(Snapshot {
            domain: domain.clone(),
            nameserver,
            view: view.clone(),
        });
        view
    }
}

impl Shared {
    fn listed(&self) {
        self.synced.send_modify(|listed| *listed += 1);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Objects> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What a kind the dataplane reads does with a change: its table, and `also` (the policy
/// index's share).
fn on_objects<K: serde::Serialize + ResourceExt>(
    shared: &Arc<Shared>,
    table: Table,
    also: impl Fn(&PolicyIndex, &Change<K>) + Send + 'static,
) -> impl FnMut(Change<K>) + Send + 'static {
    let shared = shared.clone();
    move |change| {
        also(&shared.policy, &change);
        match change {
            Change::Upsert(object) => {
                let key = key_of(&object);
                if let Ok(value) = serde_json::to_value(&object) {
                    shared.lock().table(table).insert(key, value);
                }
            }
            Change::Delete(key) => {
                shared.lock().table(table).remove(&key);
            }
            Change::Listed if table.awaited() => shared.listed(),
            Change::Listed => {}
        }
    }
}

/// A cluster-wide policy's change, compiled by the policy core's object reader.
fn cluster_policy(index: &PolicyIndex, resource: &ApiResource, change: Change<DynamicObject>) {
    match change {
        Change::Upsert(object) => {
            let Ok(mut value) = serde_json::to_value(&object) else {
                return;
            };
            value["apiVersion"] = Value::from(resource.api_version.clone());
            value["kind"] = Value::from(resource.kind.clone());
            let mut read = tessera_netpol::Objects::default();
            match read.add(value) {
                Ok(()) => read
                    .policies
                    .into_iter()
                    .for_each(|p| index.apply_policy(p)),
                Err(error) => tracing::warn!(%error, "a cluster-wide policy cannot be read"),
            }
        }
        Change::Delete((_, name)) => {
            let kind = match resource.kind.as_str() {
                "AdminNetworkPolicy" => PolicyKind::AdminNetworkPolicy,
                "BaselineAdminNetworkPolicy" => PolicyKind::BaselineAdminNetworkPolicy,
                _ => PolicyKind::ClusterNetworkPolicy,
            };
            index.remove_policy(&PolicyRef {
                kind,
                namespace: None,
                name,
            });
        }
        Change::Listed => {}
    }
}

fn key_of<K: ResourceExt>(object: &K) -> Key {
    (object.namespace().unwrap_or_default(), object.name_any())
}

/// Follows one kind's watch for ever, handing `apply` its changes; a relist's missing
/// objects become deletions. Failures back off and retry (a kind whose resource is not
/// served keeps retrying quietly).
async fn follow<K>(api: Api<K>, mut apply: impl FnMut(Change<K>))
where
    K: kube::Resource + ResourceExt + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut known: BTreeSet<Key> = BTreeSet::new();
    let mut relisted: BTreeSet<Key> = BTreeSet::new();
    let mut listed_once = false;
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => relisted.clear(),
            Ok(watcher::Event::InitApply(object)) => {
                relisted.insert(key_of(&object));
                apply(Change::Upsert(object));
            }
            Ok(watcher::Event::InitDone) => {
                for gone in known.difference(&relisted) {
                    apply(Change::Delete(gone.clone()));
                }
                known = std::mem::take(&mut relisted);
                if !listed_once {
                    listed_once = true;
                    apply(Change::Listed);
                }
            }
            Ok(watcher::Event::Apply(object)) => {
                known.insert(key_of(&object));
                apply(Change::Upsert(object));
            }
            Ok(watcher::Event::Delete(object)) => {
                let key = key_of(&object);
                known.remove(&key);
                apply(Change::Delete(key));
            }
            Err(error) => tracing::debug!(%error, "a containers' watch failed; retrying"),
        }
    }
}
