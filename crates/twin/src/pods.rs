//! The pod lifecycle on the twins' nodes: admitting a bound pod (its claims prepared, its
//! secondary networks attached, its devices admitted, an IP given), starting its containers (events, logs, the Running status),
//! ending or restarting a run when its timer fires, rejecting it, deleting it.
//!
//! Knows the API calls, the timers and the order of things; the statuses, the behaviour and
//! the admission decisions come from `tessera-node`.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use tessera_node::claim_devices;
use tessera_node::gpu_assignments::device_log_lines;
use tessera_node::pod_ips::PodIps;
use tessera_node::pod_status::{
    self, containers, finished_status, pod_key, restart_policy, running_status,
};
use tessera_node::runtime::Behaviour;
use tessera_node::topology::NodeSpec;
use tokio::sync::mpsc;

use crate::twins::NodeTwins;

/// A run of a pod that ends at a deadline.
#[derive(Debug)]
pub(crate) struct Completion {
    namespace: String,
    name: String,
    uid: String,
    run: u64,
}

/// Per-pod bookkeeping of a running pod.
pub(crate) struct Running {
    uid: String,
    pub(crate) run: u64,
    timer: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(timer) = self.timer.take() {
            timer.abort();
        }
    }
}

impl NodeTwins {
    /// Brings a pod bound to one of these nodes one step on: deletes it (after stopping its
    /// containers), forgets it when it finished, resumes its run after a restart, or admits
    /// and starts it.
    pub(crate) async fn reconcile(
        &self,
        pod: &Pod,
        running: &mut HashMap<(String, String), Running>,
        ips: &mut PodIps,
        done: &mpsc::UnboundedSender<Completion>,
    ) -> Result<(), kube::Error> {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            return Ok(());
        };
        let Some(spec) = self.nodes.get(&node) else {
            return Ok(());
        };
        let spec = &*spec;
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
        ips.remember(&node, pod);
        if pod.metadata.deletion_timestamp.is_some() {
            running.remove(&key);
            self.images.forget(&uid);
            self.release_models(&uid);
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), &key.0);
            if matches!(phase.as_str(), "Running" | "Pending") {
                self.event(pod, &node, "Normal", "Killing", "Stopping container", None)
                    .await;
                // As the kubelet does: the stopped containers end the pod as Failed before
                // it is removed (pods held by finalizers show it).
                let status = finished_status(pod, "Failed", 137, "Error", (self.clock)());
                match pods
                    .patch_status(&key.1, &PatchParams::default(), &Patch::Merge(&status))
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
                    Err(error) => return Err(error),
                }
            }
            // Its containers are stopped, so its devices are free now, as the kubelet's device
            // manager frees a terminated pod's: the scheduler may already have bound a
            // preemptor to them, whose admission must not wait for the delete to be watched.
            self.release_gpus(pod).await;
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
            self.images.forget(&uid);
            self.release_models(&uid);
            self.release_gpus(pod).await;
            return Ok(());
        }
        if running.get(&key).is_some_and(|r| r.uid == uid) {
            return Ok(());
        }
        let behaviour = match pod_status::behaviour(pod) {
            Ok(behaviour) => behaviour,
            Err(error) => {
                self.fail_to_start(pod, &error.to_string()).await?;
                return Ok(());
            }
        };
        if phase == "Running" {
            // Resume after a restart: the run ends relative to when the container started.
            let remaining = pod_status::remaining_run(pod, behaviour.duration, (self.clock)());
            running.insert(key.clone(), self.schedule(&key, &uid, 0, remaining, done));
            return Ok(());
        }
        // Pending: prepare the pod's claims and admit its devices, then start the containers.
        // The kubelet mounts the pod's volumes first: its claims must be Bound.
        if !self.volumes_mounted(pod, spec).await? {
            return Ok(());
        }
        // Then the sandbox, with the handler of the pod's RuntimeClass.
        if !self.sandbox_created(pod, spec, &key, &uid).await? {
            return Ok(());
        }
        if !self.models_pulled(pod, spec, &key, &uid).await? {
            return Ok(());
        }
        // Then each container's image, per its pull policy.
        if !self.images_pulled(pod, spec, &key, &uid).await? {
            return Ok(());
        }
        let mut claim_lines = BTreeMap::new();
        if claim_devices::uses_claims(pod) {
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
        let Some(attached) = self.attach_networks(pod, spec).await? else {
            return Ok(());
        };
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
        let ip = ips.allocate(spec).unwrap_or_default();
        for (container, image) in containers(pod) {
            // The image step recorded the `Pulled` event already.
            let events = pod_status::start_events(&container, &image);
            for (reason, message) in events.into_iter().filter(|(r, _)| *r != "Pulled") {
                self.event(pod, &node, "Normal", reason, &message, Some(&container))
                    .await;
            }
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
        self.write_network_status(pod, spec, &ip, &attached).await?;
        // A component broken by `tessera fault operator` crash-loops from its first run.
        let status = if self.crash_looping(&node, pod) {
            pod_status::crash_loop_status(pod, spec, 1, (self.clock)())
        } else {
            running_status(pod, spec, &ip, (self.clock)(), 0, None)
        };
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &key.0);
        pods.patch_status(&key.1, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        running.insert(
            key.clone(),
            self.schedule(&key, &uid, 0, behaviour.duration, done),
        );
        Ok(())
    }

    /// Whether the models `pod` asks for are on the node (its pull is started when none
    /// has): a pod waits in ContainerCreating meanwhile; a request that does not read fails
    /// the pod's start with the field-named message.
    async fn models_pulled(
        &self,
        pod: &Pod,
        spec: &NodeSpec,
        key: &(String, String),
        uid: &str,
    ) -> Result<bool, kube::Error> {
        let value = serde_json::to_value(pod).map_err(kube::Error::SerdeError)?;
        let requests = match tessera_storage::models::pod_models(&value) {
            Ok(requests) => requests,
            Err(error) => {
                self.event(
                    pod,
                    &spec.name,
                    "Warning",
                    "Failed",
                    &error.to_string(),
                    None,
                )
                .await;
                self.fail_to_start(pod, &error.to_string()).await?;
                return Ok(false);
            }
        };
        if requests.is_empty() {
            return Ok(true);
        }
        let Some(models) = self.models.get() else {
            let message = "the node has no model cache (tessera up without a model store)";
            self.event(pod, &spec.name, "Warning", "Failed", message, None)
                .await;
            return Ok(false);
        };
        match models.readiness(key, uid, &spec.name, requests) {
            crate::models::Readiness::Ready => Ok(true),
            crate::models::Readiness::Waiting => Ok(false),
            crate::models::Readiness::Started => {
                let status = pod_status::creating_status(pod, spec, (self.clock)());
                Api::<Pod>::namespaced(self.client.clone(), &key.0)
                    .patch_status(&key.1, &PatchParams::default(), &Patch::Merge(&status))
                    .await?;
                Ok(false)
            }
        }
    }

    /// Unpins the models of a pod that ended or went away.
    fn release_models(&self, uid: &str) {
        if let Some(models) = self.models.get() {
            models.release(uid);
        }
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
    pub(crate) async fn complete(
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
        let spec = &*spec;
        let mut behaviour = pod_status::behaviour(&pod).unwrap_or(Behaviour {
            duration: None,
            exit_code: 0,
            logs: None,
        });
        if self.validation_fails(&pod, &spec.name).await {
            behaviour.exit_code = 1;
        }
        let restart = pod_status::restarts(&restart_policy(&pod), behaviour.exit_code);
        let now = (self.clock)();
        let ip = pod_status::pod_ip(&pod);
        let reason = pod_status::exit_reason(behaviour.exit_code);
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
        let terminated = pod_status::terminated(behaviour.exit_code, reason, None, now);
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

    /// Fetches the pod's claims and prepares them for its containers.
    async fn prepare_claims(
        &self,
        pod: &Pod,
        spec: &NodeSpec,
    ) -> Result<Result<BTreeMap<String, Vec<String>>, claim_devices::NotReady>, kube::Error> {
        let claims = fetch_claims(&self.client, pod).await?;
        Ok(claim_devices::container_devices(pod, spec, &claims))
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
        let status = pod_status::rejected_status(reason, message);
        pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        Ok(())
    }

    /// Whether `pod` is the GPU operator's validator on a node the lab marked to fail
    /// validation (`maintenance.tessera.dev/fail-validation: "true"`): its run then exits 1.
    async fn validation_fails(&self, pod: &Pod, node: &str) -> bool {
        let validator = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .is_some_and(|app| app == tessera_maintenance::facts::VALIDATOR_APP);
        if !validator {
            return false;
        }
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(self.client.clone());
        nodes.get_opt(node).await.ok().flatten().is_some_and(|n| {
            n.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(tessera_maintenance::FAIL_VALIDATION_ANNOTATION))
                .is_some_and(|v| v == "true")
        })
    }

    async fn fail_to_start(&self, pod: &Pod, message: &str) -> Result<(), kube::Error> {
        let (namespace, name) = pod_key(pod);
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let status = pod_status::invalid_simulation_status(message);
        pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        Ok(())
    }
}

/// The pod's ResourceClaims by pod claim name (the extended resources' claim under
/// `claim_devices::EXTENDED_RESOURCES`); claims not found are left out.
pub(crate) async fn fetch_claims(
    client: &kube::Client,
    pod: &Pod,
) -> Result<BTreeMap<String, ResourceClaim>, kube::Error> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &namespace);
    let mut claims = BTreeMap::new();
    let extended = claim_devices::extended_claim_name(pod).map(|name| {
        (
            claim_devices::EXTENDED_RESOURCES.to_string(),
            Some(name.to_string()),
        )
    });
    for (pod_claim, name) in claim_devices::claim_names(pod).into_iter().chain(extended) {
        let Some(name) = name else { continue };
        if let Some(claim) = api.get_opt(&name).await? {
            claims.insert(pod_claim, claim);
        }
    }
    Ok(claims)
}
