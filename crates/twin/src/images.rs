//! The kubelet's image step on the twins' nodes: before a pod's containers start, each
//! container's image is looked up in the node's image cache and pulled per its
//! `imagePullPolicy` from the topology's simulated registries (through the pool's mirror
//! first), with the pod's `imagePullSecrets` and the registry faults the node's annotations
//! record (`tessera fault registry`); a pull takes the time its size needs at the pool's
//! bandwidth (a timer), then the image is cached on the node and listed in its
//! `status.images` next to the model cache's entries. A failed pull shows `ErrImagePull`, then
//! `ImagePullBackOff` until the back-off per pod and image ends and the pull is tried again.
//!
//! Images naming the platform's registry (`registry.tessera-system.svc:5000`, when `tessera up`
//! serves one) are pulled from its real contents: the node's connection goes from its
//! InternalIP to the registry's endpoint behind the Service, judged by the NetworkPolicies of
//! the registry's namespace, then the pod's pull secrets must
//! hold the registry's credential, then the repository and tag must exist; the size is the
//! manifest's.
//!
//! Knows the API calls, the timers and the bookkeeping; references, policies, verdicts,
//! the back-off and every message are `tessera_node::images`' and `tessera_node::registry`'s,
//! the policy verdict `tessera_netpol`'s.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::Value;
use tessera_node::images::{
    self, Backoff, ImageRef, PullError, PullNeed, PullPolicy, Registries, RegistryFault,
};
use tessera_node::pod_status;
use tessera_node::registry::{self, Contents, Reach};
use tessera_node::topology::NodeSpec;
use tokio::sync::mpsc;

use crate::twins::{NodeTwins, PodRetry};

/// The platform's registry, for the pulls of images naming its host.
#[derive(Clone)]
pub struct RegistryConfig {
    /// Its files.
    pub storage: std::sync::Arc<tessera_model_store::registry::Storage>,
    /// The user name and password it accepts.
    pub credentials: tessera_model_store::Credentials,
}

impl std::fmt::Debug for RegistryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryConfig")
            .field("root", &self.storage.root())
            .finish_non_exhaustive()
    }
}

/// After a failed pull the pod is synced again this soon, and shows `ImagePullBackOff`.
const RESYNC_AFTER_FAILURE: Duration = Duration::from_secs(3);

/// A pull under way for a pod's container.
#[derive(Debug, Clone)]
struct Pulling {
    image: ImageRef,
    size: u64,
    took: Duration,
    /// Its timer fired: the image is on the node.
    finished: bool,
}

#[derive(Debug, Default)]
struct State {
    /// Each node's images: canonical reference → the image and its size.
    cache: BTreeMap<String, BTreeMap<String, (ImageRef, u64)>>,
    /// Registry faults by node (from its annotations).
    faults: BTreeMap<String, BTreeMap<String, RegistryFault>>,
    backoff: Backoff,
    /// The last pull error per back-off key.
    errors: BTreeMap<String, PullError>,
    /// Containers whose image is ready for this run, by pod UID.
    done: BTreeMap<String, BTreeSet<String>>,
    /// Pulls under way, by (pod UID, container).
    pulling: BTreeMap<(String, String), Pulling>,
    /// Pods waiting for a timer (their watch events wait too).
    armed: BTreeSet<String>,
}

/// The twins' image bookkeeping.
pub(crate) struct Images {
    registries: Registries,
    state: std::sync::Mutex<State>,
    retry: mpsc::UnboundedSender<PodRetry>,
}

impl Images {
    /// No images on any node; retries come out of the returned receiver.
    pub(crate) fn new(registries: Registries) -> (Images, mpsc::UnboundedReceiver<PodRetry>) {
        let (retry, receiver) = mpsc::unbounded_channel();
        let images = Images {
            registries,
            state: std::sync::Mutex::default(),
            retry,
        };
        (images, receiver)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A timer of pod `uid` is due: its pulls under way are finished.
    pub(crate) fn due(&self, uid: &str) {
        let mut state = self.state();
        state.armed.remove(uid);
        for ((pod, _), pulling) in state.pulling.iter_mut() {
            if pod == uid {
                pulling.finished = true;
            }
        }
    }

    /// The pod `uid` went away or ended: its pulls and back-offs are forgotten.
    pub(crate) fn forget(&self, uid: &str) {
        let mut state = self.state();
        state.armed.remove(uid);
        state.done.remove(uid);
        state.pulling.retain(|(pod, _), _| pod != uid);
        state.backoff.forget_pod(uid);
        let prefix = format!("{uid}_");
        state.errors.retain(|key, _| !key.starts_with(&prefix));
    }

    /// Records the registry faults `node`'s annotations hold; whether they changed.
    pub(crate) fn set_faults(&self, node: &Node) -> bool {
        let name = node.metadata.name.clone().unwrap_or_default();
        let annotations = node.metadata.annotations.clone().unwrap_or_default();
        let (faults, problems) = images::registry_faults(&annotations);
        for problem in problems {
            tracing::warn!(node = %name, %problem, "ignoring a malformed registry fault");
        }
        let mut state = self.state();
        let before = state.faults.insert(name, faults.clone());
        before.unwrap_or_default() != faults
    }

    /// The `status.images` entries of the images on `node`.
    pub(crate) fn node_images(&self, node: &str) -> Vec<Value> {
        self.state()
            .cache
            .get(node)
            .map(|images| {
                images
                    .values()
                    .map(|(image, size)| images::node_image(image, *size))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn arm(&self, key: &(String, String), uid: &str, after: Duration) {
        self.state().armed.insert(uid.to_string());
        let retry = PodRetry {
            namespace: key.0.clone(),
            name: key.1.clone(),
            uid: uid.to_string(),
        };
        let sender = self.retry.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let _ = sender.send(retry);
        });
    }
}

/// What one container's image step came to.
enum Step {
    Ready,
    Wait,
}

impl NodeTwins {
    /// Whether every container's image of `pod` is on `spec`'s node for this start; when one
    /// is not, its pull is started or its failure shown, and a timer armed.
    pub(crate) async fn images_pulled(
        &self,
        pod: &Pod,
        spec: &NodeSpec,
        key: &(String, String),
        uid: &str,
    ) -> Result<bool, kube::Error> {
        if self.images.state().armed.contains(uid) {
            return Ok(false);
        }
        let containers: Vec<_> = pod
            .spec
            .as_ref()
            .map(|s| s.containers.clone())
            .unwrap_or_default();
        let mut secrets: Option<Vec<Vec<u8>>> = None;
        for container in &containers {
            let done = self
                .images
                .state()
                .done
                .get(uid)
                .is_some_and(|d| d.contains(&container.name));
            if done {
                continue;
            }
            let step = self
                .image_step(pod, spec, key, uid, container, &mut secrets)
                .await?;
            if let Step::Wait = step {
                return Ok(false);
            }
        }
        Ok(true)
    }

    async fn image_step(
        &self,
        pod: &Pod,
        spec: &NodeSpec,
        key: &(String, String),
        uid: &str,
        container: &k8s_openapi::api::core::v1::Container,
        secrets: &mut Option<Vec<Vec<u8>>>,
    ) -> Result<Step, kube::Error> {
        let name = container.name.as_str();
        let written = container.image.clone().unwrap_or_default();
        let now = (self.clock)();
        let node = spec.name.as_str();
        // A pull of this container under way: done when its time is up.
        let pulling = self
            .images
            .state()
            .pulling
            .get(&(uid.to_string(), name.to_string()))
            .cloned();
        if let Some(pulling) = pulling {
            if !pulling.finished {
                return Ok(Step::Wait);
            }
            {
                let mut state = self.images.state();
                state.pulling.remove(&(uid.to_string(), name.to_string()));
                state.cache.entry(node.to_string()).or_default().insert(
                    pulling.image.canonical(),
                    (pulling.image.clone(), pulling.size),
                );
                state
                    .done
                    .entry(uid.to_string())
                    .or_default()
                    .insert(name.to_string());
                state.backoff.reset(&images::backoff_key(uid, &written));
            }
            let message =
                images::pulled_message(&written, pulling.took, pulling.took, pulling.size);
            self.event(pod, node, "Normal", "Pulled", &message, Some(name))
                .await;
            self.post_images(node).await;
            return Ok(Step::Ready);
        }
        let image = match ImageRef::parse(&written) {
            Ok(image) => image,
            Err(error) => {
                let message = format!("Failed to apply default image tag {written:?}: {error}");
                self.event(pod, node, "Warning", "InspectFailed", &message, Some(name))
                    .await;
                self.show_waiting(pod, spec, key, name, images::INVALID_IMAGE_NAME, &message)
                    .await?;
                return Ok(Step::Wait);
            }
        };
        let policy = PullPolicy::parse(container.image_pull_policy.as_deref(), &written)
            .unwrap_or_else(|_| images::default_pull_policy(&written));
        let present = self
            .images
            .state()
            .cache
            .get(node)
            .is_some_and(|c| c.contains_key(&image.canonical()));
        match images::pull_need(policy, present) {
            PullNeed::Present => {
                self.images
                    .state()
                    .done
                    .entry(uid.to_string())
                    .or_default()
                    .insert(name.to_string());
                let message = images::present_message(&written);
                self.event(pod, node, "Normal", "Pulled", &message, Some(name))
                    .await;
                return Ok(Step::Ready);
            }
            PullNeed::NeverPull => {
                let message = images::never_pull_message(&written);
                self.event(
                    pod,
                    node,
                    "Warning",
                    images::ERR_IMAGE_NEVER_PULL,
                    &message,
                    Some(name),
                )
                .await;
                self.show_waiting(pod, spec, key, name, images::ERR_IMAGE_NEVER_PULL, &message)
                    .await?;
                self.images.arm(key, uid, images::INITIAL_BACKOFF);
                return Ok(Step::Wait);
            }
            PullNeed::Pull => {}
        }
        let backoff_key = images::backoff_key(uid, &written);
        let (in_backoff, until, previous) = {
            let state = self.images.state();
            (
                state.backoff.in_backoff(&backoff_key, now),
                state.backoff.until(&backoff_key),
                state.errors.get(&backoff_key).cloned(),
            )
        };
        if in_backoff {
            self.event(
                pod,
                node,
                "Normal",
                "BackOff",
                &images::backoff_event_message(&written),
                Some(name),
            )
            .await;
            self.event(
                pod,
                node,
                "Warning",
                "Failed",
                &images::container_error_message(images::IMAGE_PULL_BACK_OFF),
                Some(name),
            )
            .await;
            let message = images::backoff_waiting_message(&written, previous.as_ref());
            self.show_waiting(pod, spec, key, name, images::IMAGE_PULL_BACK_OFF, &message)
                .await?;
            let left = until
                .and_then(|until| until.duration_since(now).ok())
                .unwrap_or_default();
            self.images.arm(key, uid, left);
            return Ok(Step::Wait);
        }
        self.event(
            pod,
            node,
            "Normal",
            "Pulling",
            &images::pulling_message(&written),
            Some(name),
        )
        .await;
        if secrets.is_none() {
            *secrets = Some(self.pull_secrets(pod).await?);
        }
        let secrets = secrets.as_deref().unwrap_or_default();
        let faults = self
            .images
            .state()
            .faults
            .get(node)
            .cloned()
            .unwrap_or_default();
        let credentials = |source: &ImageRef| images::secrets_have_credentials(secrets, source);
        let verdict = match &self.config.registry {
            Some(config)
                if registry::is_registry_image(&image) && !faults.contains_key(&image.registry) =>
            {
                self.registry_pull(config, spec, &image, secrets)
                    .await
                    .map(|size| (image.registry.clone(), size))
            }
            _ => self
                .images
                .registries
                .pull(&spec.pool, &image, &faults, &credentials),
        };
        match verdict {
            Ok((_host, size)) => {
                let took =
                    images::pull_duration(size, self.images.registries.bandwidth(&spec.pool));
                self.images.state().pulling.insert(
                    (uid.to_string(), name.to_string()),
                    Pulling {
                        image,
                        size,
                        took,
                        finished: false,
                    },
                );
                self.show_waiting_creating(pod, spec, key).await?;
                self.images.arm(key, uid, took);
                Ok(Step::Wait)
            }
            Err(error) => {
                {
                    let mut state = self.images.state();
                    state.backoff.next(&backoff_key, now);
                    state.errors.insert(backoff_key, error.clone());
                }
                self.event(
                    pod,
                    node,
                    "Warning",
                    "Failed",
                    &images::failed_message(&written, &error),
                    Some(name),
                )
                .await;
                self.event(
                    pod,
                    node,
                    "Warning",
                    "Failed",
                    &images::container_error_message(images::ERR_IMAGE_PULL),
                    Some(name),
                )
                .await;
                self.show_waiting(
                    pod,
                    spec,
                    key,
                    name,
                    images::ERR_IMAGE_PULL,
                    &error.message(),
                )
                .await?;
                self.images.arm(key, uid, RESYNC_AFTER_FAILURE);
                Ok(Step::Wait)
            }
        }
    }

    /// A pull from the platform's registry: the network's verdict on the node's connection,
    /// the credentials and the registry's contents, judged by `tessera_node::registry`.
    async fn registry_pull(
        &self,
        config: &RegistryConfig,
        spec: &NodeSpec,
        image: &ImageRef,
        secrets: &[Vec<u8>],
    ) -> Result<u64, PullError> {
        let reach = match self.registry_reach(spec).await {
            Ok(reach) => reach,
            Err(error) => {
                tracing::warn!(%error, "could not read the registry's network; the pull goes ahead");
                Reach::Connected
            }
        };
        let reference = image
            .digest
            .clone()
            .or_else(|| image.tag.clone())
            .unwrap_or_else(|| images::DEFAULT_TAG.to_string());
        let contents = match config
            .storage
            .lookup(&image.repository, &reference, "linux/amd64")
        {
            tessera_model_store::registry::Lookup::Found { size, .. } => Contents::Found(size),
            _ => Contents::Unknown,
        };
        registry::pull_verdict(
            image,
            reach,
            &images::secrets_credentials(secrets, image),
            (
                config.credentials.access_key_id.as_str(),
                config.credentials.secret_access_key.as_str(),
            ),
            contents,
        )
    }

    /// Whether the node's connection to the registry's Service gets through: the Service's
    /// address, the endpoint behind it (the registry as a pod), and the verdict of the
    /// NetworkPolicies of the registry's namespace on traffic from the node's InternalIP.
    async fn registry_reach(&self, spec: &NodeSpec) -> Result<Reach, kube::Error> {
        use k8s_openapi::api::core::v1::{Namespace, Service};
        use k8s_openapi::api::discovery::v1::EndpointSlice;
        use k8s_openapi::api::networking::v1::NetworkPolicy;
        use kube::api::ListParams;
        let Some(service) = Api::<Service>::namespaced(self.client.clone(), registry::NAMESPACE)
            .get_opt(registry::SERVICE)
            .await?
        else {
            return Ok(Reach::NoService);
        };
        let Some(address) = service
            .spec
            .as_ref()
            .and_then(|s| s.cluster_ip.as_deref())
            .and_then(|ip| ip.parse().ok())
        else {
            return Ok(Reach::NoService);
        };
        let slices: Vec<Value> =
            Api::<EndpointSlice>::namespaced(self.client.clone(), registry::NAMESPACE)
                .list(
                    &ListParams::default()
                        .labels(&format!("kubernetes.io/service-name={}", registry::SERVICE)),
                )
                .await?
                .items
                .iter()
                .filter_map(|s| serde_json::to_value(s).ok())
                .collect();
        let Some(pod) = registry::host_pods(&slices).into_iter().next() else {
            return Ok(Reach::Dropped { address });
        };
        let mut values = vec![pod];
        if let Some(namespace) = Api::<Namespace>::all(self.client.clone())
            .get_opt(registry::NAMESPACE)
            .await?
        {
            values.extend(serde_json::to_value(namespace).ok());
        }
        let policies = Api::<NetworkPolicy>::namespaced(self.client.clone(), registry::NAMESPACE)
            .list(&ListParams::default())
            .await?;
        values.extend(
            policies
                .items
                .iter()
                .filter_map(|p| serde_json::to_value(p).ok()),
        );
        let Ok(node) = spec.internal_ip().parse::<std::net::Ipv4Addr>() else {
            return Ok(Reach::Connected);
        };
        let evaluator = match tessera_netpol::Objects::from_values(values) {
            Ok(objects) => objects.evaluator(),
            Err(error) => {
                tracing::warn!(%error, "the registry's policies do not read");
                return Ok(Reach::Connected);
            }
        };
        let Some(id) = evaluator.pod_id(registry::NAMESPACE, registry::POD_NAME) else {
            return Ok(Reach::Connected);
        };
        let verdict = evaluator.verdict(
            tessera_netpol::Endpoint::Address(std::net::IpAddr::V4(node)),
            tessera_netpol::Endpoint::Pod(id),
            registry::PORT,
            tessera_netpol::Protocol::Tcp,
        );
        Ok(if verdict.allowed {
            Reach::Connected
        } else {
            Reach::Dropped { address }
        })
    }

    /// The `.dockerconfigjson` of each of the pod's `imagePullSecrets` that exists and has
    /// the type (others are skipped, as the kubelet skips them).
    async fn pull_secrets(&self, pod: &Pod) -> Result<Vec<Vec<u8>>, kube::Error> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &namespace);
        let names: Vec<String> = pod
            .spec
            .as_ref()
            .and_then(|s| s.image_pull_secrets.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.name)
            .filter(|n| !n.is_empty())
            .collect();
        let mut found = Vec::new();
        let mut missing = Vec::new();
        for name in names {
            let Some(secret) = api.get_opt(&name).await? else {
                missing.push(name);
                continue;
            };
            if secret.type_.as_deref() != Some(images::DOCKER_CONFIG_JSON_TYPE) {
                continue;
            }
            if let Some(bytes) = secret
                .data
                .as_ref()
                .and_then(|d| d.get(images::DOCKER_CONFIG_JSON_KEY))
            {
                found.push(bytes.0.clone());
            }
        }
        if !missing.is_empty() {
            let node = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default();
            self.event(
                pod,
                &node,
                "Warning",
                images::FAILED_TO_RETRIEVE_IMAGE_PULL_SECRET,
                &images::missing_secrets_message(&missing),
                None,
            )
            .await;
        }
        Ok(found)
    }

    async fn show_waiting_creating(
        &self,
        pod: &Pod,
        spec: &NodeSpec,
        key: &(String, String),
    ) -> Result<(), kube::Error> {
        let status = pod_status::creating_status(pod, spec, (self.clock)());
        self.patch_pod_status(key, &status).await
    }

    async fn show_waiting(
        &self,
        pod: &Pod,
        spec: &NodeSpec,
        key: &(String, String),
        container: &str,
        reason: &str,
        message: &str,
    ) -> Result<(), kube::Error> {
        let status = images::with_waiting(
            pod_status::creating_status(pod, spec, (self.clock)()),
            container,
            reason,
            message,
        );
        self.patch_pod_status(key, &status).await
    }

    async fn patch_pod_status(
        &self,
        key: &(String, String),
        status: &Value,
    ) -> Result<(), kube::Error> {
        match Api::<Pod>::namespaced(self.client.clone(), &key.0)
            .patch_status(&key.1, &PatchParams::default(), &Patch::Merge(status))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(error),
        }
    }
}
