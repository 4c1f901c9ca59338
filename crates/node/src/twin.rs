//! The node twins' control loop: registration, heartbeats and the pod lifecycle.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Node, Pod};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::{Value, json};
use tessera_model::time::{micro_timestamp, parse_timestamp, timestamp};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use crate::claim_devices;
use crate::faults::{Faults, NodeFault};
use crate::gpu_assignments::{GpuAssignments, device_log_lines};
use crate::node_object::node_status;
use crate::onboarding::{ONBOARDING_LABEL, ONBOARDING_TAINT};
use crate::resource_slice::device_uuid;
use crate::runtime::Behaviour;
use crate::topology::{NodeSpec, Topology};

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
}

impl Default for TwinConfig {
    fn default() -> Self {
        TwinConfig {
            log_dir: PathBuf::from("logs"),
            lease_interval: Duration::from_secs(10),
            status_interval: Duration::from_secs(60),
            device_checkpoint: None,
        }
    }
}

/// The node twins of one topology.
pub struct NodeTwins {
    client: Client,
    config: TwinConfig,
    nodes: BTreeMap<String, NodeSpec>,
    gpus: std::sync::Mutex<GpuAssignments>,
    /// Pods waiting for their ResourceClaims, by UID: re-examined when a claim changes.
    waiting_for_claims: std::sync::Mutex<BTreeMap<String, (String, String)>>,
    /// Injected faults by node, shared with the heartbeat.
    faults: Arc<std::sync::Mutex<BTreeMap<String, Faults>>>,
}

/// A run of a pod that ends at a deadline.
#[derive(Debug)]
struct Completion {
    namespace: String,
    name: String,
    uid: String,
    run: u64,
}

/// Per-pod bookkeeping of a running pod.
struct Running {
    uid: String,
    run: u64,
    timer: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(timer) = self.timer.take() {
            timer.abort();
        }
    }
}

fn annotations_of(pod: &Pod) -> BTreeMap<String, String> {
    pod.metadata.annotations.clone().unwrap_or_default()
}

fn restart_policy(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.clone())
        .unwrap_or_else(|| "Always".into())
}

fn containers(pod: &Pod) -> Vec<(String, String)> {
    pod.spec
        .as_ref()
        .map(|s| {
            s.containers
                .iter()
                .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default()
}

fn pod_key(pod: &Pod) -> (String, String) {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

impl NodeTwins {
    /// Twins for every node of a topology, talking to the API through a client.
    pub fn new(client: Client, topology: &Topology, config: TwinConfig) -> NodeTwins {
        let gpus = load_checkpoint(config.device_checkpoint.as_deref());
        let nodes = topology
            .nodes()
            .into_iter()
            .map(|spec| (spec.name.clone(), spec))
            .collect();
        NodeTwins {
            client,
            config,
            nodes,
            gpus: std::sync::Mutex::new(gpus),
            waiting_for_claims: std::sync::Mutex::default(),
            faults: Arc::default(),
        }
    }

    /// The names of the nodes these twins run.
    pub fn node_names(&self) -> Vec<String> {
        self.nodes.keys().cloned().collect()
    }

    /// Registers the nodes, then keeps them alive and runs their pods until dropped.
    pub async fn run(self) -> Result<(), kube::Error> {
        for spec in self.nodes.values() {
            self.register(spec).await?;
        }
        self.publish_devices().await?;
        self.onboard().await?;
        for name in self.nodes.keys() {
            self.publish_numa(name).await;
        }
        tracing::info!(nodes = self.nodes.len(), "node twins registered");
        let heartbeat = tokio::spawn(heartbeat(
            self.client.clone(),
            self.nodes.values().cloned().collect(),
            self.config.clone(),
            self.faults.clone(),
        ));
        let result = self.run_pods().await;
        heartbeat.abort();
        result
    }

    async fn register(&self, spec: &NodeSpec) -> Result<(), kube::Error> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        match nodes.get_opt(&spec.name).await? {
            None => {
                let node: Node = serde_json::from_value(crate::node_object::registration(spec))
                    .map_err(kube::Error::SerdeError)?;
                nodes.create(&PostParams::default(), &node).await?;
            }
            Some(_) => {
                // Keep what users changed (cordon, extra labels); re-assert topology labels.
                let patch = json!({"metadata": {"labels": spec.labels}});
                nodes
                    .patch(&spec.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
        }
        nodes
            .patch_status(
                &spec.name,
                &PatchParams::default(),
                &Patch::Merge(&node_status(spec, &timestamp(SystemTime::now()))),
            )
            .await?;
        Ok(())
    }

    /// Acts as the DRA driver of DRA pools: installs its DeviceClasses and publishes each
    /// node's ResourceSlice (server-side apply, so a restart re-asserts the same slice).
    async fn publish_devices(&self) -> Result<(), kube::Error> {
        let slices: Vec<Value> = self
            .nodes
            .values()
            .flat_map(crate::resource_slice::resource_slices)
            .collect();
        if slices.is_empty() {
            return Ok(());
        }
        let classes = crate::resource_slice::nvidia_device_classes();
        crate::dra_publish::publish(&self.client, &classes, &slices).await
    }

    /// Validates nodes that joined for onboarding and opens those that pass.
    async fn onboard(&self) -> Result<(), kube::Error> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let slices: Api<ResourceSlice> = Api::all(self.client.clone());
        let onboarding: Vec<&NodeSpec> = self.nodes.values().filter(|s| s.onboarding).collect();
        if onboarding.is_empty() {
            return Ok(());
        }
        let published = slices.list(&Default::default()).await?.items;
        for spec in onboarding {
            let node = nodes.get(&spec.name).await?;
            let state = node
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(ONBOARDING_LABEL).cloned());
            if state.as_deref() != Some("validating") {
                continue;
            }
            let (state, kind, reason, message) =
                match crate::onboarding::validate(spec, &node, &published) {
                    Ok(message) => ("complete", "Normal", "NodeOnboarded", message),
                    Err(message) => ("failed", "Warning", "NodeOnboardingFailed", message),
                };
            let taints: Vec<Value> = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default()
                .into_iter()
                .filter(|t| state != "complete" || t.key != ONBOARDING_TAINT)
                .map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect}))
                .collect();
            // An empty list is removed (merge patch null), as a node without taints has none.
            let taints = if taints.is_empty() {
                Value::Null
            } else {
                json!(taints)
            };
            let patch = json!({"metadata": {"labels": {ONBOARDING_LABEL: state}},
                "spec": {"taints": taints}});
            nodes
                .patch(&spec.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            self.node_event(&spec.name, kind, reason, &message).await;
        }
        Ok(())
    }

    async fn node_event(&self, node: &str, kind: &str, reason: &str, message: &str) {
        let involved = json!({"kind": "Node", "name": node, "apiVersion": "v1"});
        self.record_event(
            "default",
            node,
            involved,
            kind,
            reason,
            message,
            "tessera-onboarding",
        )
        .await;
    }

    async fn run_pods(self) -> Result<(), kube::Error> {
        let pods: Api<Pod> = Api::all(self.client.clone());
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Completion>();
        let mut running: HashMap<(String, String), Running> = HashMap::new();
        let mut ips: HashMap<String, BTreeSet<u8>> = HashMap::new();
        let mut stream = watcher(pods.clone(), watcher::Config::default()).boxed();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut claim_stream = watcher(
            Api::<ResourceClaim>::all(self.client.clone()),
            watcher::Config::default(),
        )
        .boxed();
        let mut node_stream = watcher(
            Api::<Node>::all(self.client.clone()),
            watcher::Config::default(),
        )
        .boxed();
        loop {
            tokio::select! {
                Some(event) = node_stream.next() => {
                    let node = match event {
                        Ok(watcher::Event::Apply(node) | watcher::Event::InitApply(node)) => node,
                        Ok(_) => continue,
                        Err(error) => {
                            tracing::warn!(%error, "node watch failed; retrying");
                            continue;
                        }
                    };
                    let name = node.metadata.name.clone().unwrap_or_default();
                    let was_unreachable = self.unreachable(&name);
                    if let Err(error) = self.apply_faults(&node, &mut running).await {
                        tracing::warn!(node = %name, %error, "node twin could not apply faults");
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
                            self.release_ip(&mut ips, &pod);
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
                            for name in self.nodes.keys() {
                                self.publish_numa(name).await;
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

    fn release_ip(&self, ips: &mut HashMap<String, BTreeSet<u8>>, pod: &Pod) {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_ref()) else {
            return;
        };
        let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.as_ref()) else {
            return;
        };
        if let Some(octet) = ip.rsplit('.').next().and_then(|o| o.parse::<u8>().ok())
            && let Some(used) = ips.get_mut(node)
        {
            used.remove(&octet);
        }
    }

    fn allocate_ip(
        &self,
        ips: &mut HashMap<String, BTreeSet<u8>>,
        spec: &NodeSpec,
    ) -> Option<String> {
        let used = ips.entry(spec.name.clone()).or_default();
        let octet = (2..=254u8).find(|o| !used.contains(o))?;
        used.insert(octet);
        Some(spec.pod_ip(octet))
    }

    async fn reconcile(
        &self,
        pod: &Pod,
        running: &mut HashMap<(String, String), Running>,
        ips: &mut HashMap<String, BTreeSet<u8>>,
        done: &mpsc::UnboundedSender<Completion>,
    ) -> Result<(), kube::Error> {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            return Ok(());
        };
        let Some(spec) = self.nodes.get(&node) else {
            return Ok(());
        };
        if self.unreachable(&node) {
            // The kubelet is cut off: nothing happens on the node until it is back.
            return Ok(());
        }
        let key = pod_key(pod);
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        // Remember IPs of pods that already have one (after a restart).
        if let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.as_ref())
            && let Some(octet) = ip.rsplit('.').next().and_then(|o| o.parse::<u8>().ok())
        {
            ips.entry(node.clone()).or_default().insert(octet);
        }
        if pod.metadata.deletion_timestamp.is_some() {
            running.remove(&key);
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), &key.0);
            if matches!(phase.as_str(), "Running" | "Pending") {
                self.event(pod, &node, "Normal", "Killing", "Stopping container", None)
                    .await;
                // As the kubelet does: the stopped containers end the pod as Failed before
                // it is removed (pods held by finalizers show it).
                let status = finished_status(pod, "Failed", 137, "Error", SystemTime::now());
                match pods
                    .patch_status(&key.1, &PatchParams::default(), &Patch::Merge(&status))
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
                    Err(error) => return Err(error),
                }
            }
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(kube::api::Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match pods.delete(&key.1, &params).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
                Err(error) => return Err(error),
            }
            return Ok(());
        }
        if matches!(phase.as_str(), "Succeeded" | "Failed") {
            running.remove(&key);
            self.release_gpus(pod).await;
            return Ok(());
        }
        if running.get(&key).is_some_and(|r| r.uid == uid) {
            return Ok(());
        }
        let behaviour =
            match Behaviour::from_annotations(&annotations_of(pod), &restart_policy(pod)) {
                Ok(behaviour) => behaviour,
                Err(error) => {
                    self.fail_to_start(pod, &error.to_string()).await?;
                    return Ok(());
                }
            };
        if phase == "Running" {
            // Resume after a restart: the run ends relative to when the container started.
            let started = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .and_then(|c| c.state.as_ref())
                .and_then(|s| s.running.as_ref())
                .and_then(|r| r.started_at.as_ref())
                .and_then(|t| parse_timestamp(serde_json::to_value(t).ok()?.as_str()?))
                .unwrap_or_else(SystemTime::now);
            let remaining = behaviour.duration.map(|d| {
                (started + d)
                    .duration_since(SystemTime::now())
                    .unwrap_or_default()
            });
            running.insert(key.clone(), self.schedule(&key, &uid, 0, remaining, done));
            return Ok(());
        }
        // Pending: prepare the pod's claims and admit its devices, then start the containers.
        let mut claim_lines = BTreeMap::new();
        if !claim_devices::claim_names(pod).is_empty() {
            match self.prepare_claims(pod, spec).await? {
                Ok(lines) => claim_lines = lines,
                Err(not_ready) => {
                    self.waiting_for_claims
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(uid.clone(), key.clone());
                    if let claim_devices::NotReady::Failed(message) = not_ready {
                        self.event(
                            pod,
                            &node,
                            "Warning",
                            "FailedPrepareDynamicResources",
                            &message,
                            None,
                        )
                        .await;
                    }
                    return Ok(());
                }
            }
        }
        let admitted = self
            .gpus
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .admit(spec, &key, pod);
        let devices = match admitted {
            Ok(devices) => {
                if !devices.is_empty() {
                    self.save_checkpoint();
                    self.publish_numa(&node).await;
                }
                devices
            }
            Err(error) => {
                self.reject(pod, error.reason(), &error.to_string()).await?;
                return Ok(());
            }
        };
        let ip = self.allocate_ip(ips, spec).unwrap_or_default();
        for (container, image) in containers(pod) {
            self.event(
                pod,
                &node,
                "Normal",
                "Pulled",
                &format!("Container image \"{image}\" already present on machine"),
                Some(&container),
            )
            .await;
            self.event(
                pod,
                &node,
                "Normal",
                "Created",
                &format!("Created container: {container}"),
                Some(&container),
            )
            .await;
            self.event(
                pod,
                &node,
                "Normal",
                "Started",
                &format!("Started container {container}"),
                Some(&container),
            )
            .await;
            let mut lines = device_log_lines(
                &node,
                devices
                    .get(&container)
                    .map(Vec::as_slice)
                    .unwrap_or_default(),
            );
            lines.extend(claim_lines.remove(&container).unwrap_or_default());
            lines.extend(behaviour.logs.clone().unwrap_or_else(|| {
                vec![format!(
                    "tessera node twin {node}: container {container} started (image {image})"
                )]
            }));
            self.append_log(&key, &container, &lines).await;
        }
        let now = SystemTime::now();
        let status = running_status(pod, spec, &ip, now, 0, None);
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &key.0);
        pods.patch_status(&key.1, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        running.insert(
            key.clone(),
            self.schedule(&key, &uid, 0, behaviour.duration, done),
        );
        Ok(())
    }

    fn schedule(
        &self,
        key: &(String, String),
        uid: &str,
        run: u64,
        after: Option<Duration>,
        done: &mpsc::UnboundedSender<Completion>,
    ) -> Running {
        let timer = after.map(|after| {
            let done = done.clone();
            let completion = Completion {
                namespace: key.0.clone(),
                name: key.1.clone(),
                uid: uid.to_string(),
                run,
            };
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                let _ = done.send(completion);
            })
        });
        Running {
            uid: uid.to_string(),
            run,
            timer,
        }
    }

    /// A run ended: finish the pod or restart its containers, per its restart policy.
    async fn complete(
        &self,
        done: Completion,
        running: &mut HashMap<(String, String), Running>,
        done_tx: &mpsc::UnboundedSender<Completion>,
    ) -> Result<(), kube::Error> {
        let key = (done.namespace.clone(), done.name.clone());
        if !running
            .get(&key)
            .is_some_and(|r| r.uid == done.uid && r.run == done.run)
        {
            return Ok(());
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &done.namespace);
        let Some(pod) = pods.get_opt(&done.name).await? else {
            running.remove(&key);
            return Ok(());
        };
        if pod.metadata.uid.as_deref() != Some(done.uid.as_str())
            || pod.metadata.deletion_timestamp.is_some()
        {
            running.remove(&key);
            return Ok(());
        }
        let Some(spec) = self.node_of(&pod) else {
            return Ok(());
        };
        let behaviour = Behaviour::from_annotations(&annotations_of(&pod), &restart_policy(&pod))
            .unwrap_or(Behaviour {
                duration: None,
                exit_code: 0,
                logs: None,
            });
        let policy = restart_policy(&pod);
        let restart = match policy.as_str() {
            "Always" => true,
            "OnFailure" => behaviour.exit_code != 0,
            _ => false,
        };
        let now = SystemTime::now();
        let ip = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .unwrap_or_default();
        let reason = if behaviour.exit_code == 0 {
            "Completed"
        } else {
            "Error"
        };
        if !restart {
            running.remove(&key);
            let phase = if behaviour.exit_code == 0 {
                "Succeeded"
            } else {
                "Failed"
            };
            let status = finished_status(&pod, phase, behaviour.exit_code, reason, now);
            pods.patch_status(&done.name, &PatchParams::default(), &Patch::Merge(&status))
                .await?;
            return Ok(());
        }
        let restarts = done.run + 1;
        let terminated = json!({"terminated": {"exitCode": behaviour.exit_code, "reason": reason,
            "startedAt": timestamp(now), "finishedAt": timestamp(now)}});
        let status = running_status(&pod, spec, &ip, now, restarts as i32, Some(terminated));
        pods.patch_status(&done.name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        for (container, image) in containers(&pod) {
            let lines = behaviour.logs.clone().unwrap_or_else(|| {
                vec![format!(
                    "tessera node twin {}: container {container} restarted (image {image})",
                    spec.name
                )]
            });
            self.append_log(&key, &container, &lines).await;
        }
        running.insert(
            key.clone(),
            self.schedule(&key, &done.uid, restarts, behaviour.duration, done_tx),
        );
        Ok(())
    }

    /// Applies the faults annotated on one of this twin's nodes when they changed: node
    /// status (allocatable, conditions), DRA device taints, and failing the containers of
    /// GPUs that just turned unhealthy.
    async fn apply_faults(
        &self,
        node: &Node,
        running: &mut HashMap<(String, String), Running>,
    ) -> Result<(), kube::Error> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let Some(spec) = self.nodes.get(&name) else {
            return Ok(());
        };
        let (faults, problems) =
            Faults::parse(&node.metadata.annotations.clone().unwrap_or_default());
        for problem in problems {
            tracing::warn!(node = %name, %problem, "ignoring a malformed fault");
        }
        let before = {
            let mut all = self.faults.lock().unwrap_or_else(|p| p.into_inner());
            let before = all.get(&name).cloned().unwrap_or_default();
            if before == faults {
                return Ok(());
            }
            all.insert(name.clone(), faults.clone());
            before
        };
        tracing::info!(node = %name, ?faults, "faults changed");
        if faults.node != Some(NodeFault::Unreachable) {
            let status = faulted_status(spec, &faults);
            Api::<Node>::all(self.client.clone())
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await?;
        }
        let mut slices = crate::resource_slice::resource_slices(spec);
        if !slices.is_empty() {
            crate::faults::taint_slices(&mut slices, &faults);
            crate::dra_publish::publish(&self.client, &[], &slices).await?;
        }
        let newly: Vec<usize> = faults
            .unhealthy_gpus()
            .difference(&before.unhealthy_gpus())
            .copied()
            .collect();
        for gpu in newly {
            let xid = faults.gpus.get(&gpu).copied().unwrap_or_default();
            let message = format!(
                "GPU gpu-{gpu} ({}): XID {xid}: {}",
                device_uuid("GPU", &name, &format!("gpu-{gpu}")),
                crate::faults::xid_description(xid)
            );
            self.node_event(&name, "Warning", "GPUUnhealthy", &message)
                .await;
            for key in self.gpu_users(&name, gpu).await? {
                self.fail_on_device(&key, &message, running).await?;
            }
        }
        Ok(())
    }

    /// The node twin a pod is bound to, if it is one of these.
    fn node_of(&self, pod: &Pod) -> Option<&NodeSpec> {
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .and_then(|n| self.nodes.get(n))
    }

    /// Whether `node` is cut off by an injected fault.
    fn unreachable(&self, node: &str) -> bool {
        self.faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(node)
            .is_some_and(|f| f.node == Some(NodeFault::Unreachable))
    }

    /// Pods using GPU `gpu` of `node`: device-plugin holders and pods reserving a claim
    /// allocated one of its DRA devices.
    async fn gpu_users(
        &self,
        node: &str,
        gpu: usize,
    ) -> Result<Vec<(String, String)>, kube::Error> {
        let mut users: BTreeSet<(String, String)> = self
            .gpus
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .holders(node, gpu)
            .into_iter()
            .collect();
        let claims = Api::<ResourceClaim>::all(self.client.clone())
            .list(&Default::default())
            .await?;
        for claim in claims {
            let status = claim.status.as_ref();
            let on_gpu = status
                .and_then(|s| s.allocation.as_ref())
                .and_then(|a| a.devices.as_ref())
                .and_then(|d| d.results.as_ref())
                .is_some_and(|results| {
                    results.iter().any(|r| {
                        r.pool == node && crate::faults::parent_gpu(&r.device) == Some(gpu)
                    })
                });
            if on_gpu {
                let namespace = claim.metadata.namespace.clone().unwrap_or_default();
                for consumer in status
                    .and_then(|s| s.reserved_for.as_ref())
                    .into_iter()
                    .flatten()
                {
                    users.insert((namespace.clone(), consumer.name.clone()));
                }
            }
        }
        Ok(users.into_iter().collect())
    }

    /// A running pod's containers crash because its device failed: pods that restart
    /// (`Always`) record the crash and run on, others end Failed.
    async fn fail_on_device(
        &self,
        key: &(String, String),
        message: &str,
        running: &mut HashMap<(String, String), Running>,
    ) -> Result<(), kube::Error> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &key.0);
        let Some(pod) = pods.get_opt(&key.1).await? else {
            return Ok(());
        };
        if pod.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Running") {
            return Ok(());
        }
        let Some(spec) = self.node_of(&pod) else {
            return Ok(());
        };
        let now = SystemTime::now();
        for (container, _) in containers(&pod) {
            self.append_log(
                key,
                &container,
                &[format!(
                    "CUDA error: unspecified launch failure ({message})"
                )],
            )
            .await;
        }
        let status = if restart_policy(&pod) == "Always" {
            let restarts = running.get(key).map_or(0, |r| r.run) + 1;
            if let Some(entry) = running.get_mut(key) {
                entry.run = restarts;
            }
            let ip = pod
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.clone())
                .unwrap_or_default();
            let terminated = json!({"terminated": {"exitCode": 1, "reason": "Error", "message": message,
                "startedAt": timestamp(now), "finishedAt": timestamp(now)}});
            running_status(
                &pod,
                spec,
                &ip,
                now,
                i32::try_from(restarts).unwrap_or(i32::MAX),
                Some(terminated),
            )
        } else {
            running.remove(key);
            self.release_gpus(&pod).await;
            let mut status = finished_status(&pod, "Failed", 1, "Error", now);
            for container in status
                .pointer_mut("/status/containerStatuses")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                container["state"]["terminated"]["message"] = json!(message);
            }
            status
        };
        pods.patch_status(&key.1, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        Ok(())
    }

    /// Fetches the pod's claims and prepares them for its containers.
    async fn prepare_claims(
        &self,
        pod: &Pod,
        spec: &NodeSpec,
    ) -> Result<Result<BTreeMap<String, Vec<String>>, claim_devices::NotReady>, kube::Error> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &namespace);
        let mut claims = BTreeMap::new();
        for (pod_claim, name) in claim_devices::claim_names(pod) {
            let Some(name) = name else { continue };
            if let Some(claim) = api.get_opt(&name).await? {
                claims.insert(pod_claim, claim);
            }
        }
        Ok(claim_devices::container_devices(pod, spec, &claims))
    }

    async fn release_gpus(&self, pod: &Pod) {
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
    async fn publish_numa(&self, node: &str) {
        let Some(spec) = self.nodes.get(node) else {
            return;
        };
        let in_use = self
            .gpus
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .in_use(node);
        let Some(annotations) = crate::gpu_assignments::numa_annotations(spec, &in_use) else {
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

    /// Writes the devices pods hold to the checkpoint, atomically; a failure is logged.
    fn save_checkpoint(&self) {
        let Some(path) = self.config.device_checkpoint.as_deref() else {
            return;
        };
        let text = {
            let gpus = self.gpus.lock().unwrap_or_else(|p| p.into_inner());
            serde_json::to_vec(&*gpus)
        };
        let write = |text: Vec<u8>| -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let temporary = path.with_extension("tmp");
            std::fs::write(&temporary, text)?;
            std::fs::rename(&temporary, path)
        };
        if let Err(error) = text.map_err(std::io::Error::other).and_then(write) {
            tracing::warn!(path = %path.display(), %error, "cannot write the device checkpoint");
        }
    }

    /// Rejects a pod at admission, as the kubelet does: Failed, with the reason and
    /// `Pod was rejected: <message>`, and a warning event.
    async fn reject(&self, pod: &Pod, reason: &str, message: &str) -> Result<(), kube::Error> {
        let (namespace, name) = pod_key(pod);
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        self.event(pod, &node, "Warning", reason, message, None)
            .await;
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let status = json!({"status": {"phase": "Failed", "reason": reason,
            "message": format!("Pod was rejected: {message}")}});
        pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        Ok(())
    }

    async fn fail_to_start(&self, pod: &Pod, message: &str) -> Result<(), kube::Error> {
        let (namespace, name) = pod_key(pod);
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let status = json!({"status": {"phase": "Failed", "reason": "InvalidSimulation", "message": message}});
        pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        Ok(())
    }

    async fn append_log(&self, key: &(String, String), container: &str, lines: &[String]) {
        let dir = self.config.log_dir.join(&key.0).join(&key.1);
        if let Err(error) = tokio::fs::create_dir_all(&dir).await {
            tracing::warn!(dir = %dir.display(), %error, "cannot create the pod log directory");
            return;
        }
        let path = dir.join(format!("{container}.log"));
        let now = micro_timestamp(SystemTime::now());
        let text: String = lines.iter().map(|line| format!("{now} {line}\n")).collect();
        let file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .await;
        match file {
            Ok(mut file) => {
                if let Err(error) = file.write_all(text.as_bytes()).await {
                    tracing::warn!(path = %path.display(), %error, "cannot write the container log");
                }
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot open the container log")
            }
        }
    }

    async fn event(
        &self,
        pod: &Pod,
        node: &str,
        kind: &str,
        reason: &str,
        message: &str,
        container: Option<&str>,
    ) {
        let (namespace, name) = pod_key(pod);
        let mut involved = json!({"kind": "Pod", "namespace": namespace, "name": name,
            "uid": pod.metadata.uid, "apiVersion": "v1"});
        if let Some(container) = container {
            involved["fieldPath"] = json!(format!("spec.containers{{{container}}}"));
        }
        self.record_event(&namespace, node, involved, kind, reason, message, "kubelet")
            .await;
    }

    /// Records an event about `involved` as `component` on `node`; failures are only logged.
    #[allow(clippy::too_many_arguments)]
    async fn record_event(
        &self,
        namespace: &str,
        node: &str,
        involved: Value,
        kind: &str,
        reason: &str,
        message: &str,
        component: &str,
    ) {
        let events: Api<CoreEvent> = Api::namespaced(self.client.clone(), namespace);
        let now = timestamp(SystemTime::now());
        let prefix = involved
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("event")
            .to_string();
        let event = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": format!("{prefix}."), "namespace": namespace},
            "involvedObject": involved,
            "reason": reason, "message": message, "type": kind,
            "source": {"component": component, "host": node},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
            "reportingComponent": component, "reportingInstance": node,
        });
        let Ok(event) = serde_json::from_value::<CoreEvent>(event) else {
            return;
        };
        if let Err(error) = events.create(&PostParams::default(), &event).await {
            tracing::debug!(%error, "cannot record an event");
        }
    }
}

fn container_statuses(
    pod: &Pod,
    state: &Value,
    last: Option<&Value>,
    restarts: i32,
    ready: bool,
) -> Vec<Value> {
    containers(pod)
        .into_iter()
        .map(|(name, image)| {
            let mut status = json!({
                "name": name, "image": image, "imageID": format!("tessera://{image}"),
                "containerID": format!("tessera://{}-{name}", pod.metadata.uid.clone().unwrap_or_default()),
                "ready": ready, "started": ready, "restartCount": restarts, "state": state,
            });
            if let Some(last) = last {
                status["lastState"] = last.clone();
            }
            status
        })
        .collect()
}

fn conditions(ready: bool, now: &str) -> Value {
    let status = if ready { "True" } else { "False" };
    let mut list = vec![
        json!({"type": "PodReadyToStartContainers", "status": status, "lastTransitionTime": now}),
        json!({"type": "Initialized", "status": "True", "lastTransitionTime": now}),
        json!({"type": "Ready", "status": status, "lastTransitionTime": now}),
        json!({"type": "ContainersReady", "status": status, "lastTransitionTime": now}),
        json!({"type": "PodScheduled", "status": "True", "lastTransitionTime": now}),
    ];
    if !ready {
        for condition in &mut list[2..4] {
            condition["reason"] = json!("PodCompleted");
        }
    }
    json!(list)
}

fn running_status(
    pod: &Pod,
    spec: &NodeSpec,
    ip: &str,
    now: SystemTime,
    restarts: i32,
    last: Option<Value>,
) -> Value {
    let now_text = timestamp(now);
    let start_time = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .and_then(|t| serde_json::to_value(t).ok())
        .unwrap_or_else(|| json!(now_text));
    let state = json!({"running": {"startedAt": now_text}});
    json!({"status": {
        "phase": "Running",
        "conditions": conditions(true, &now_text),
        "hostIP": spec.internal_ip(),
        "hostIPs": [{"ip": spec.internal_ip()}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": start_time,
        "containerStatuses": container_statuses(pod, &state, last.as_ref(), restarts, true),
    }})
}

fn finished_status(pod: &Pod, phase: &str, exit_code: i32, reason: &str, now: SystemTime) -> Value {
    let now_text = timestamp(now);
    let started = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .and_then(|t| serde_json::to_value(t).ok())
        .unwrap_or_else(|| json!(now_text));
    let restarts = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map_or(0, |c| c.restart_count);
    let state = json!({"terminated": {"exitCode": exit_code, "reason": reason,
        "startedAt": started, "finishedAt": now_text}});
    json!({"status": {
        "phase": phase,
        "conditions": conditions(false, &now_text),
        "containerStatuses": container_statuses(pod, &state, None, restarts, false),
    }})
}

/// Renews each node's Lease and refreshes its conditions.
/// The device assignments of a previous run; an unreadable checkpoint starts empty, with a
/// warning.
fn load_checkpoint(path: Option<&std::path::Path>) -> GpuAssignments {
    let Some(path) = path else {
        return GpuAssignments::default();
    };
    match std::fs::read(path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => GpuAssignments::default(),
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "cannot read the device checkpoint");
            GpuAssignments::default()
        }
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|error| {
            tracing::warn!(path = %path.display(), %error, "ignoring an invalid device checkpoint");
            GpuAssignments::default()
        }),
    }
}

/// The status a kubelet posts for a node with faults: allocatable without unhealthy GPUs,
/// Ready per the node fault, and `NetworkInterfacesDegraded` naming NICs that are down.
fn faulted_status(spec: &NodeSpec, faults: &Faults) -> Value {
    let mut status = node_status(spec, &timestamp(SystemTime::now()));
    let allocatable: serde_json::Map<String, Value> = faults
        .allocatable(spec)
        .iter()
        .map(|(k, v)| (k.clone(), json!(v.to_canonical())))
        .collect();
    status["status"]["allocatable"] = Value::Object(allocatable);
    let now = timestamp(SystemTime::now());
    if let Some(conditions) = status["status"]["conditions"].as_array_mut() {
        if faults.node == Some(NodeFault::NotReady) {
            for condition in conditions.iter_mut() {
                if condition["type"] == "Ready" {
                    condition["status"] = json!("False");
                    condition["reason"] = json!("KubeletNotReady");
                    condition["message"] = json!("container runtime is down");
                }
            }
        }
        let (degraded, reason, message) = if faults.nics_down.is_empty() {
            (
                "False",
                "NetworkInterfacesUp",
                "all network interfaces are up".to_string(),
            )
        } else {
            let nics: Vec<&str> = faults.nics_down.iter().map(String::as_str).collect();
            (
                "True",
                "NetworkInterfaceDown",
                format!("network interfaces down: {}", nics.join(", ")),
            )
        };
        conditions.push(json!({"type": "NetworkInterfacesDegraded", "status": degraded,
            "reason": reason, "message": message, "lastHeartbeatTime": now, "lastTransitionTime": now}));
    }
    status
}

async fn heartbeat(
    client: Client,
    nodes: Vec<NodeSpec>,
    config: TwinConfig,
    faults: Arc<std::sync::Mutex<BTreeMap<String, Faults>>>,
) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let node_api: Api<Node> = Api::all(client);
    let mut last_status = tokio::time::Instant::now();
    loop {
        let current = faults.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let reachable: Vec<&NodeSpec> = nodes
            .iter()
            .filter(|n| current.get(&n.name).and_then(|f| f.node) != Some(NodeFault::Unreachable))
            .collect();
        for spec in reachable.iter().copied() {
            let lease = json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": spec.name, "namespace": "kube-node-lease",
                             "ownerReferences": []},
                "spec": {"holderIdentity": spec.name, "leaseDurationSeconds": 40,
                         "renewTime": micro_timestamp(SystemTime::now())},
            });
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
                let patch =
                    faulted_status(spec, &current.get(&spec.name).cloned().unwrap_or_default());
                let conditions = json!({"status": {"conditions": patch["status"]["conditions"]}});
                if let Err(error) = node_api
                    .patch_status(
                        &spec.name,
                        &PatchParams::default(),
                        &Patch::Merge(&conditions),
                    )
                    .await
                {
                    tracing::warn!(node = %spec.name, %error, "cannot refresh node conditions");
                }
            }
        }
        tokio::time::sleep(config.lease_interval).await;
    }
}
