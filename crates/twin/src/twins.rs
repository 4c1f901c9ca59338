//! The node twins: their settings and state, registration, DRA device publication,
//! onboarding, and the watch loop that hands node, claim and pod events to the fault
//! ([`crate::faults`]) and pod ([`crate::pods`]) handlers.
//!
//! Knows the API calls and the loop; what the objects hold and what the kubelet decides comes
//! from `tessera-node`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::{Value, json};
use tessera_model::clock::Clock;
use tessera_model::time::timestamp;
use tessera_node::faults::{Faults, NodeFault};
use tessera_node::gpu_assignments::{self, GpuAssignments};
use tessera_node::node_object::{self, node_status};
use tessera_node::pod_ips::PodIps;
use tessera_node::pod_status::pod_key;
use tessera_node::topology::{NodeSpec, Topology};
use tessera_node::{onboarding, resource_slice};
use tokio::sync::mpsc;

use crate::pods::{Completion, Running};
use crate::records::load_checkpoint;

/// Settings of the node twins.
#[derive(Debug, Clone)]
pub struct TwinConfig {
    /// Where container logs are written (`<dir>/<namespace>/<pod>/<container>.log`).
    pub log_dir: PathBuf,
    /// How often Leases are renewed.
    pub lease_interval: Duration,
    /// How often node conditions are refreshed.
    pub status_interval: Duration,
    /// Where the devices pods hold are checkpointed (none: kept in memory only).
    pub device_checkpoint: Option<PathBuf>,
    /// The node caches and the model store (none: no caches; pods asking for models wait).
    pub models: Option<crate::models::ModelConfig>,
    /// The platform's image registry (none: images naming its host pull as from any
    /// undeclared registry).
    pub registry: Option<crate::images::RegistryConfig>,
}

impl Default for TwinConfig {
    fn default() -> Self {
        TwinConfig {
            log_dir: PathBuf::from("logs"),
            lease_interval: Duration::from_secs(10),
            status_interval: Duration::from_secs(60),
            device_checkpoint: None,
            models: None,
            registry: None,
        }
    }
}

/// A pod due another look by a step that waits on a timer (a sandbox retry, a finished image
/// pull or an ended back-off).
#[derive(Debug)]
pub(crate) struct PodRetry {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) uid: String,
}

/// The node twins of one topology.
pub struct NodeTwins {
    pub(crate) client: Client,
    pub(crate) config: TwinConfig,
    pub(crate) nodes: crate::specs::Specs,
    pub(crate) gpus: Arc<std::sync::Mutex<GpuAssignments>>,
    /// Pods waiting for their ResourceClaims, by UID: re-examined when a claim changes.
    pub(crate) waiting_for_claims: std::sync::Mutex<BTreeMap<String, (String, String)>>,
    /// Pods waiting for their PersistentVolumeClaims to be Bound, by UID: re-examined when a
    /// claim of their namespace changes.
    /// With the `FailedMount` message last recorded.
    pub(crate) waiting_for_volumes: std::sync::Mutex<BTreeMap<String, (String, String, String)>>,
    /// Pods whose network attachment failed and was reported, by UID: retried when a
    /// NetworkAttachmentDefinition appears or changes.
    pub(crate) failed_attachments: std::sync::Mutex<BTreeMap<String, (String, String)>>,
    /// Injected faults by node, shared with the heartbeat.
    pub(crate) faults: Arc<std::sync::Mutex<BTreeMap<String, Faults>>>,
    /// Where the twins read the time.
    pub(crate) clock: Clock,
    /// The nodes of autoscaled pools not registered now (shared with the heartbeat and the
    /// autoscaler).
    pub(crate) standby: Arc<std::sync::Mutex<BTreeSet<String>>>,
    /// The simulated autoscaler, when a pool autoscales.
    autoscaler: Option<tessera_node::autoscaler::Autoscaler>,
    /// The node caches and the pods' model pulls, once started (shared with the
    /// containers, which answer the caches' proxy paths).
    pub(crate) models: crate::models::Slot,
    /// What the model pulls report to the loop.
    model_notices: Option<mpsc::UnboundedReceiver<crate::models::Notice>>,
    /// The kubelets' repeated events, counted up on the first one.
    pub(crate) events: std::sync::Mutex<tessera_model::event_correlation::Correlator>,
    /// Pods whose sandbox failed, waiting to be tried again.
    pub(crate) sandboxes: crate::sandbox::Sandboxes,
    /// Where the sandbox retries come due.
    sandbox_retries: Option<mpsc::UnboundedReceiver<PodRetry>>,
    /// The nodes' images, the pods' pulls and their back-offs.
    pub(crate) images: crate::images::Images,
    /// Where the image pulls' timers come due.
    image_retries: Option<mpsc::UnboundedReceiver<PodRetry>>,
}

impl NodeTwins {
    /// Twins for every node of a topology, talking to the API through a client.
    /// They read the host's clock; [`NodeTwins::with_clock`] gives them another.
    pub fn new(client: Client, topology: &Topology, config: TwinConfig) -> NodeTwins {
        let gpus = load_checkpoint(config.device_checkpoint.as_deref());
        let pools = topology.autoscaled_pools();
        let autoscaler =
            (!pools.is_empty()).then(|| tessera_node::autoscaler::Autoscaler::new(pools));
        let standby_nodes = autoscaler.as_ref().map(|a| a.standby()).unwrap_or_default();
        let standby = standby_nodes.iter().map(|n| n.name.clone()).collect();
        let nodes = crate::specs::Specs::new(topology.nodes().into_iter().chain(standby_nodes));
        let (sandboxes, sandbox_retries) = crate::sandbox::Sandboxes::new();
        let (images, image_retries) = crate::images::Images::new(topology.image_registries());
        NodeTwins {
            client,
            config,
            nodes,
            gpus: Arc::new(std::sync::Mutex::new(gpus)),
            waiting_for_claims: std::sync::Mutex::default(),
            waiting_for_volumes: std::sync::Mutex::default(),
            failed_attachments: std::sync::Mutex::default(),
            faults: Arc::default(),
            clock: Arc::new(SystemTime::now),
            standby: Arc::new(std::sync::Mutex::new(standby)),
            autoscaler,
            models: crate::models::Slot::default(),
            model_notices: None,
            events: std::sync::Mutex::default(),
            sandboxes,
            sandbox_retries: Some(sandbox_retries),
            images,
            image_retries: Some(image_retries),
        }
    }

    /// The same twins reading the time from `clock` (statuses, events, leases, log lines);
    /// the timers of pod runs and heartbeats stay tokio's.
    pub fn with_clock(mut self, clock: Clock) -> NodeTwins {
        self.clock = clock;
        self
    }

    /// The twins' containers, for `kubectl exec`; they share the twins' device bookkeeping,
    /// and start (on the current tokio runtime) the watches their network and its policy
    /// enforcement read.
    pub fn containers(&self) -> crate::containers::Containers {
        crate::containers::Containers::new(
            self.client.clone(),
            self.nodes.clone(),
            self.gpus.clone(),
        )
        .with_faults(self.faults.clone())
        .with_models(self.models.clone())
    }

    /// The names of the nodes these twins register at start (standby nodes of autoscaled
    /// pools left out).
    pub fn node_names(&self) -> Vec<String> {
        self.registered()
            .iter()
            .map(|spec| spec.name.clone())
            .collect()
    }

    /// Whether `node` is a standby node of an autoscaled pool, not registered now.
    pub(crate) fn standing_by(&self, node: &str) -> bool {
        self.standby
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(node)
    }

    /// The nodes registered now.
    fn registered(&self) -> Vec<Arc<NodeSpec>> {
        self.nodes
            .all()
            .into_iter()
            .filter(|spec| !self.standing_by(&spec.name))
            .collect()
    }

    /// Registers the nodes, then keeps them alive and runs their pods until dropped.
    pub async fn run(mut self) -> Result<(), kube::Error> {
        // Standby nodes the autoscaler had added before a restart are registered again; it
        // removes them once they are idle.
        if !self
            .standby
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
        {
            let existing: BTreeSet<String> = Api::<Node>::all(self.client.clone())
                .list(&Default::default())
                .await?
                .items
                .into_iter()
                .filter_map(|node| node.metadata.name)
                .collect();
            self.standby
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|name| !existing.contains(name));
        }
        self.adopt_stored().await?;
        for spec in self.registered() {
            register_node(&self.client, &self.clock, &spec).await?;
        }
        self.publish_devices().await?;
        for name in self.node_names() {
            if let Err(error) = crate::csi::publish_csi_node(&self.client, &name).await {
                tracing::warn!(node = %name, %error, "cannot register the CSI drivers");
            }
        }
        self.onboard().await?;
        for name in self.node_names() {
            self.publish_numa(&name).await;
        }
        if let Some(config) = self.config.models.clone() {
            match crate::models::Delivery::start(&config, &self.nodes.all()).await {
                Ok((delivery, notices)) => {
                    let _ = self.models.set(delivery);
                    self.model_notices = Some(notices);
                    for name in self.node_names() {
                        self.post_images(&name).await;
                    }
                }
                Err(error) => tracing::error!(%error, "node caches not started"),
            }
        }
        tracing::info!(nodes = self.nodes.len(), "node twins registered");
        let heartbeat = tokio::spawn(crate::heartbeat::heartbeat(
            self.client.clone(),
            self.nodes.clone(),
            self.config.clone(),
            self.faults.clone(),
            self.standby.clone(),
            self.clock.clone(),
        ));
        let autoscaler = self.autoscaler.take().map(|autoscaler| {
            let (client, clock) = (self.client.clone(), self.clock.clone());
            let register = move |spec: NodeSpec| {
                let (client, clock) = (client.clone(), clock.clone());
                async move {
                    if let Err(error) = register_node(&client, &clock, &spec).await {
                        tracing::warn!(node = %spec.name, %error, "autoscaler: node not registered");
                    }
                    if let Err(error) = crate::csi::publish_csi_node(&client, &spec.name).await {
                        tracing::warn!(node = %spec.name, %error, "autoscaler: CSI drivers not registered");
                    }
                    let slices = node_slices(&spec);
                    if !slices.is_empty()
                        && let Err(error) =
                            crate::dra_publish::publish(&client, &device_classes(&slices), &slices).await
                    {
                        tracing::warn!(node = %spec.name, %error, "autoscaler: devices not published");
                    }
                }
            };
            tokio::spawn(crate::autoscaler::run(
                self.client.clone(),
                autoscaler,
                self.standby.clone(),
                self.clock.clone(),
                register,
            ))
        });
        let provisioner = {
            let (nodes, standby) = (self.nodes.clone(), self.standby.clone());
            let registered = move || {
                let standby = standby.lock().unwrap_or_else(|p| p.into_inner()).clone();
                nodes
                    .all()
                    .into_iter()
                    .map(|spec| spec.name.clone())
                    .filter(|name| !standby.contains(name))
                    .collect()
            };
            tokio::spawn(crate::csi::run_provisioner(
                self.client.clone(),
                self.nodes.clone(),
                registered,
                self.clock.clone(),
            ))
        };
        let snapshotter = tokio::spawn(crate::snapshots::run_snapshotter(
            self.client.clone(),
            self.nodes.clone(),
            self.clock.clone(),
        ));
        let result = self.run_pods().await;
        snapshotter.abort();
        provisioner.abort();
        heartbeat.abort();
        if let Some(autoscaler) = autoscaler {
            autoscaler.abort();
        }
        result
    }
}

/// The ResourceSlices a node twin publishes as DRA drivers: GPUs, and RDMA NICs.
pub(crate) fn node_slices(spec: &NodeSpec) -> Vec<Value> {
    let mut slices = resource_slice::resource_slices(spec);
    slices.extend(tessera_node::nic_devices::rdma_slices(spec));
    slices
}

/// The DeviceClasses of the twins' DRA drivers: NVIDIA's (with its vfio class where `slices`
/// offer passthrough GPUs), and the RDMA NICs' where `slices` publish any (a driver installs
/// its classes where it is deployed).
pub(crate) fn device_classes(slices: &[Value]) -> Vec<Value> {
    let mut classes = resource_slice::nvidia_device_classes();
    if tessera_node::worker_model::offers_vfio(slices) {
        // The DRA driver runs with PassthroughSupport where GPUs are bound to vfio-pci.
        classes.push(tessera_node::worker_model::vfio_device_class());
    }
    let rdma = tessera_node::nic_devices::RDMA_DRIVER;
    if slices.iter().any(|s| s["spec"]["driver"] == rdma) {
        classes.extend(tessera_node::nic_devices::rdma_device_classes());
    }
    classes
}

/// Registers one node twin (or re-asserts its topology labels) and posts its status.
pub(crate) async fn register_node(
    client: &Client,
    clock: &Clock,
    spec: &NodeSpec,
) -> Result<(), kube::Error> {
    register_node_with(client, clock, spec, &BTreeMap::new()).await
}

/// [`register_node`], a new Node created with `annotations`.
pub(crate) async fn register_node_with(
    client: &Client,
    clock: &Clock,
    spec: &NodeSpec,
    annotations: &BTreeMap<String, String>,
) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let stored = nodes.get_opt(&spec.name).await?;
    match &stored {
        None => {
            let mut registration = node_object::registration(spec);
            if !annotations.is_empty() {
                registration["metadata"]["annotations"] = json!(annotations);
            }
            let node: Node =
                serde_json::from_value(registration).map_err(kube::Error::SerdeError)?;
            nodes.create(&PostParams::default(), &node).await?;
        }
        Some(node) => {
            // Keep what users changed (cordon, extra labels); re-assert topology labels, with
            // the driver a maintenance plan installed (recorded on the Node) over the default.
            let mut labels = spec.labels.clone();
            if let Some(version) = node
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(tessera_node::accelerators::INSTALLED_DRIVER_ANNOTATION))
                && labels.contains_key("nvidia.com/cuda.driver-version.full")
            {
                labels.extend(tessera_node::accelerators::driver_labels(version));
            }
            let patch = json!({"metadata": {"labels": labels}});
            nodes
                .patch(&spec.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
    }
    let mut status = node_status(spec, &timestamp(clock()));
    // A kubelet version a maintenance plan installed, recorded on the Node, outlives restarts.
    if let Some(version) = stored
        .as_ref()
        .and_then(|n| n.metadata.annotations.as_ref())
        .and_then(|a| a.get(tessera_maintenance::INSTALLED_KUBELET_ANNOTATION))
    {
        status["status"]["nodeInfo"]["kubeletVersion"] = json!(version);
    }
    crate::heartbeat::post_node_status(&nodes, &spec.name, status, stored.as_ref()).await
}

impl NodeTwins {
    /// Acts as the DRA driver of DRA pools: installs its DeviceClasses and publishes each
    /// node's ResourceSlice (server-side apply, so a restart re-asserts the same slice).
    async fn publish_devices(&self) -> Result<(), kube::Error> {
        let slices: Vec<Value> = self
            .registered()
            .iter()
            .flat_map(|spec| node_slices(spec))
            .collect();
        if slices.is_empty() {
            return Ok(());
        }
        crate::dra_publish::publish(&self.client, &device_classes(&slices), &slices).await
    }

    /// Validates nodes that joined for onboarding and opens those that pass.
    async fn onboard(&self) -> Result<(), kube::Error> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let slices: Api<ResourceSlice> = Api::all(self.client.clone());
        let onboarding: Vec<Arc<NodeSpec>> = self
            .registered()
            .into_iter()
            .filter(|s| s.onboarding)
            .collect();
        if onboarding.is_empty() {
            return Ok(());
        }
        let published = slices.list(&Default::default()).await?.items;
        for spec in onboarding {
            let node = nodes.get(&spec.name).await?;
            let Some(outcome) = onboarding::decide(&spec, &node, &published) else {
                continue;
            };
            nodes
                .patch(
                    &spec.name,
                    &PatchParams::default(),
                    &Patch::Merge(&outcome.patch),
                )
                .await?;
            self.node_event(&spec.name, outcome.kind, outcome.reason, &outcome.message)
                .await;
        }
        Ok(())
    }

    async fn run_pods(mut self) -> Result<(), kube::Error> {
        let pods: Api<Pod> = Api::all(self.client.clone());
        let (_idle_tx, idle_rx) = mpsc::unbounded_channel();
        let mut model_notices = self.model_notices.take().unwrap_or(idle_rx);
        let (_no_retries_tx, no_retries) = mpsc::unbounded_channel();
        let mut sandbox_retries = self.sandbox_retries.take().unwrap_or(no_retries);
        let (_no_image_retries_tx, no_image_retries) = mpsc::unbounded_channel();
        let mut image_retries = self.image_retries.take().unwrap_or(no_image_retries);
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Completion>();
        let mut running: HashMap<(String, String), Running> = HashMap::new();
        let mut ips = PodIps::default();
        let mut stream = watcher(pods.clone(), watcher::Config::default()).boxed();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut claim_stream = watcher(
            Api::<ResourceClaim>::all(self.client.clone()),
            watcher::Config::default(),
        )
        .boxed();
        let mut volume_claim_stream = watcher(
            Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::all(self.client.clone()),
            watcher::Config::default(),
        )
        .boxed();
        // The kubelet's secret and configMap volumes: a pod waiting for one looks again when
        // an object of its namespace appears.
        let mut source_stream = futures::stream::select(
            watcher(
                Api::<k8s_openapi::api::core::v1::Secret>::all(self.client.clone()),
                watcher::Config::default(),
            )
            .default_backoff()
            .applied_objects()
            .map(|s| s.ok().and_then(|s| s.metadata.namespace)),
            watcher(
                Api::<k8s_openapi::api::core::v1::ConfigMap>::all(self.client.clone()),
                watcher::Config::default(),
            )
            .default_backoff()
            .applied_objects()
            .map(|m| m.ok().and_then(|m| m.metadata.namespace)),
        )
        .boxed();
        let mut node_stream = watcher(
            Api::<Node>::all(self.client.clone()),
            watcher::Config::default(),
        )
        .boxed();
        // Where Multus's CRD is not served the watch fails; it backs off and tries again.
        let mut definition_stream = watcher(
            Api::<kube::api::DynamicObject>::all_with(
                self.client.clone(),
                &crate::attach::definitions_resource(),
            ),
            watcher::Config::default(),
        )
        .default_backoff()
        .boxed();
        loop {
            tokio::select! {
                Some(notice) = model_notices.recv() => {
                    self.model_notice(notice, &mut running, &mut ips, &done_tx).await;
                }
                Some(retry) = sandbox_retries.recv() => {
                    // The pod worker's back-off is over: the sandbox is tried again.
                    self.sandboxes.due(&retry.uid);
                    let api: Api<Pod> = Api::namespaced(self.client.clone(), &retry.namespace);
                    if let Ok(Some(pod)) = api.get_opt(&retry.name).await
                        && pod.metadata.uid.as_deref() == Some(retry.uid.as_str())
                        && let Err(error) = self.reconcile(&pod, &mut running, &mut ips, &done_tx).await
                    {
                        tracing::warn!(pod = ?pod_key(&pod), %error, "node twin could not update pod");
                    }
                }
                Some(retry) = image_retries.recv() => {
                    // A pull finished or an image's back-off ended: the image step goes on.
                    self.images.due(&retry.uid);
                    let api: Api<Pod> = Api::namespaced(self.client.clone(), &retry.namespace);
                    if let Ok(Some(pod)) = api.get_opt(&retry.name).await
                        && pod.metadata.uid.as_deref() == Some(retry.uid.as_str())
                        && let Err(error) = self.reconcile(&pod, &mut running, &mut ips, &done_tx).await
                    {
                        tracing::warn!(pod = ?pod_key(&pod), %error, "node twin could not update pod");
                    }
                }
                Some(event) = node_stream.next() => {
                    let node = match event {
                        Ok(watcher::Event::Apply(node) | watcher::Event::InitApply(node)) => node,
                        Ok(watcher::Event::Delete(node)) => {
                            self.node_deleted(&node).await;
                            continue;
                        }
                        Ok(_) => continue,
                        Err(error) => {
                            tracing::warn!(%error, "node watch failed; retrying");
                            continue;
                        }
                    };
                    let name = node.metadata.name.clone().unwrap_or_default();
                    self.apply_node_changes(&node).await;
                    self.images.set_faults(&node);
                    let was_unreachable = self.unreachable(&name);
                    let mount_fault = self.mount_fault(&name);
                    if let Err(error) = self.apply_faults(&node, &mut running).await {
                        tracing::warn!(node = %name, %error, "node twin could not apply faults");
                    }
                    if mount_fault.is_some() && self.mount_fault(&name) != mount_fault {
                        // Mounts work again, or fail otherwise: pods waiting for their volumes
                        // look again.
                        for (namespace, pod_name) in self.waiting_for_volumes_in("") {
                            let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
                            if let Ok(Some(pod)) = api.get_opt(&pod_name).await
                                && let Err(error) = self.reconcile(&pod, &mut running, &mut ips, &done_tx).await
                            {
                                tracing::warn!(pod = ?pod_key(&pod), %error, "node twin could not update pod");
                            }
                        }
                    }
                    if was_unreachable && !self.unreachable(&name) {
                        // Back in touch: catch up with what happened to the node's pods.
                        let on_node = pods
                            .list(&kube::api::ListParams::default().fields(&format!("spec.nodeName={name}")))
                            .await;
                        for pod in on_node.map(|l| l.items).unwrap_or_default() {
                            if let Err(error) = self.reconcile(&pod, &mut running, &mut ips, &done_tx).await {
                                tracing::warn!(pod = ?pod_key(&pod), %error, "node twin could not update pod");
                            }
                        }
                    }
                }
                Some(event) = definition_stream.next() => {
                    let Ok(watcher::Event::Apply(_)) = event else { continue };
                    // A definition appeared: pods that could not be attached try again.
                    let waiting: Vec<(String, String)> = std::mem::take(
                        &mut *self.failed_attachments.lock().unwrap_or_else(|p| p.into_inner()),
                    )
                    .into_values()
                    .collect();
                    for (namespace, name) in waiting {
                        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
                        if let Ok(Some(pod)) = api.get_opt(&name).await
                            && let Err(error) = self.reconcile(&pod, &mut running, &mut ips, &done_tx).await
                        {
                            tracing::warn!(pod = ?pod_key(&pod), %error, "node twin could not update pod");
                        }
                    }
                }
                Some(namespace) = source_stream.next() => {
                    let Some(namespace) = namespace else { continue };
                    for (namespace, name) in self.waiting_for_volumes_in(&namespace) {
                        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
                        if let Ok(Some(pod)) = api.get_opt(&name).await
                            && let Err(error) = self.reconcile(&pod, &mut running, &mut ips, &done_tx).await
                        {
                            tracing::warn!(pod = ?pod_key(&pod), %error, "node twin could not update pod");
                        }
                    }
                }
                Some(event) = volume_claim_stream.next() => {
                    let Ok(watcher::Event::Apply(claim)) = event else { continue };
                    // A claim changed: pods of its namespace waiting for their volumes look again.
                    self.claim_changed(&claim).await;
                    let namespace = claim.metadata.namespace.clone().unwrap_or_default();
                    for (namespace, name) in self.waiting_for_volumes_in(&namespace) {
                        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
                        if let Ok(Some(pod)) = api.get_opt(&name).await
                            && let Err(error) = self.reconcile(&pod, &mut running, &mut ips, &done_tx).await
                        {
                            tracing::warn!(pod = ?pod_key(&pod), %error, "node twin could not update pod");
                        }
                    }
                }
                Some(event) = claim_stream.next() => {
                    let Ok(watcher::Event::Apply(claim)) = event else { continue };
                    // A claim reserved for a waiting pod: its containers may start now.
                    let ready: Vec<(String, String)> = {
                        let mut waiting = self.waiting_for_claims.lock().unwrap_or_else(|p| p.into_inner());
                        claim
                            .status
                            .iter()
                            .flat_map(|s| s.reserved_for.iter().flatten())
                            .filter_map(|c| waiting.remove(&c.uid))
                            .collect()
                    };
                    for (namespace, name) in ready {
                        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
                        if let Ok(Some(pod)) = api.get_opt(&name).await
                            && let Err(error) = self.reconcile(&pod, &mut running, &mut ips, &done_tx).await
                        {
                            tracing::warn!(pod = ?pod_key(&pod), %error, "node twin could not update pod");
                        }
                    }
                }
                event = stream.next() => {
                    let Some(event) = event else { return Ok(()) };
                    let pods_seen = match event {
                        Ok(watcher::Event::InitApply(pod)) => {
                            let (namespace, name) = pod_key(&pod);
                            seen.insert(format!("{namespace}/{name}"));
                            vec![pod]
                        }
                        Ok(watcher::Event::Apply(pod)) => vec![pod],
                        Ok(watcher::Event::Delete(pod)) => {
                            let key = pod_key(&pod);
                            running.remove(&key);
                            if let Some(uid) = &pod.metadata.uid {
                                if let Some(models) = self.models.get() {
                                    models.release(uid);
                                }
                                self.waiting_for_volumes.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
                                self.sandboxes.forget(uid);
                                self.images.forget(uid);
                            }
                            ips.release(&pod);
                            self.release_gpus(&pod).await;
                            continue;
                        }
                        Ok(watcher::Event::Init) => {
                            seen.clear();
                            continue;
                        }
                        Ok(watcher::Event::InitDone) => {
                            // Devices of pods that went away while the twin was down are free.
                            self.gpus.lock().unwrap_or_else(|p| p.into_inner()).retain(&seen);
                            self.save_checkpoint();
                            for name in self.node_names() {
                                self.publish_numa(&name).await;
                            }
                            continue;
                        }
                        Err(error) => {
                            tracing::warn!(%error, "pod watch failed; retrying");
                            tokio::time::sleep(Duration::from_millis(500)).await;
                            continue;
                        }
                    };
                    for pod in pods_seen {
                        if let Err(error) = self.reconcile(&pod, &mut running, &mut ips, &done_tx).await {
                            tracing::warn!(pod = ?pod_key(&pod), %error, "node twin could not update pod");
                        }
                    }
                }
                Some(done) = done_rx.recv() => {
                    if let Err(error) = self.complete(done, &mut running, &done_tx).await {
                        tracing::warn!(%error, "node twin could not finish a pod run");
                    }
                }
            }
        }
    }

    /// The node twin a pod is bound to, if it is one of these.
    pub(crate) fn node_of(&self, pod: &Pod) -> Option<Arc<NodeSpec>> {
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .and_then(|n| self.nodes.get(n))
    }

    /// How volume mounts fail on `node` (`tessera fault volume`), if they do.
    pub(crate) fn mount_fault(&self, node: &str) -> Option<tessera_storage::mount::MountFault> {
        self.faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(node)
            .and_then(|f| f.volume)
    }

    /// Whether `node` is cut off by an injected fault.
    pub(crate) fn unreachable(&self, node: &str) -> bool {
        self.faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(node)
            .is_some_and(|f| f.node == Some(NodeFault::Unreachable))
    }

    /// Frees the device-plugin devices of a pod that ended or went away.
    pub(crate) async fn release_gpus(&self, pod: &Pod) {
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_ref()) {
            self.gpus
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .release(node, &pod_key(pod));
            self.save_checkpoint();
            self.publish_numa(node).await;
        }
    }

    /// Tells the scheduler the node's free GPUs per NUMA node (whole-GPU device-plugin nodes).
    pub(crate) async fn publish_numa(&self, node: &str) {
        let Some(spec) = self.nodes.get(node) else {
            return;
        };
        let spec = &*spec;
        let in_use = self
            .gpus
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .in_use(node);
        let Some(annotations) = gpu_assignments::numa_annotations(spec, &in_use) else {
            return;
        };
        let patch = json!({"metadata": {"annotations": annotations}});
        if let Err(error) = Api::<Node>::all(self.client.clone())
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(%node, %error, "cannot publish the node's GPU NUMA layout");
        }
    }

    /// Acts on what a model pull reported: records the pod's event, posts the node's
    /// `status.images`, reconciles the pod once the pull ended.
    async fn model_notice(
        &self,
        notice: crate::models::Notice,
        running: &mut HashMap<(String, String), Running>,
        ips: &mut PodIps,
        done_tx: &mpsc::UnboundedSender<Completion>,
    ) {
        if notice.images_changed {
            self.post_images(&notice.node).await;
        }
        if notice.name.is_empty() {
            return;
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &notice.namespace);
        let Ok(Some(pod)) = api.get_opt(&notice.name).await else {
            return;
        };
        if pod.metadata.uid.as_deref() != Some(notice.uid.as_str()) {
            return;
        }
        if let Some((kind, reason, message)) = &notice.event {
            self.event(&pod, &notice.node, kind, reason, message, None)
                .await;
        }
        if notice.reconcile
            && let Err(error) = self.reconcile(&pod, running, ips, done_tx).await
        {
            tracing::warn!(pod = ?pod_key(&pod), %error, "node twin could not update pod");
        }
    }

    /// Posts the models `node` holds and the images pulled onto it as its `status.images`.
    pub(crate) async fn post_images(&self, node: &str) {
        let pulled = self.images.node_images(node);
        let models = match self.models.get() {
            Some(models) => models.images(node),
            None if pulled.is_empty() => return,
            None => Vec::new(),
        };
        let images = tessera_node::images::merged_node_images(models, pulled);
        let patch = json!({"status": {"images": images}});
        if let Err(error) = Api::<Node>::all(self.client.clone())
            .patch_status(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(%node, %error, "cannot post the node's cached models");
        }
    }
}
