//! The twins' storage: simulated CSI drivers ([`tessera_storage::csi`]) as their sidecars and
//! node plugins would act. Each registered node gets its CSINode; external-provisioner's part
//! watches claims, volumes and classes, creates the volume the core builds for each claim
//! annotated for a simulated driver (once the scheduler picked a node, for a
//! WaitForFirstConsumer class), records `Provisioning` / `ProvisioningSucceeded` /
//! `ProvisioningFailed` (a claim whose data source is a VolumeSnapshot or a claim is restored or
//! cloned from it: [`crate::snapshots::RestoreSources`]), and keeps each node's
//! CSIStorageCapacity at the local disk its volumes and the snapshots kept there leave
//! (deleting those of classes deleted and nodes gone,
//! [`tessera_storage::capacity`]). The
//! kubelet's part ([`NodeTwins::volumes_mounted`]) holds a pod whose claims are not Bound in
//! ContainerCreating with the `FailedMount` event, and starts it once they are.
//!
//! A shell: the watches, the writes, the events. Which volume to create, whether it fits the
//! node's disk and what the capacity is are the core's; there is no storage behind a volume,
//! so a volume the PV controller deletes (reclaim Delete) frees its node's disk by being gone.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ConfigMap, Event as CoreEvent, PersistentVolume, PersistentVolumeClaim, Pod, Secret,
};
use k8s_openapi::api::storage::v1::{CSINode, CSIStorageCapacity, StorageClass};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::Value;
use tessera_controllers::shell::{listed, next_pass, store_values, watched};
use tessera_model::Quantity;
use tessera_model::clock::Clock;
use tessera_model::event::{Recorder, core_event};
use tessera_model::json::text;
use tessera_node::pod_status::{self, pod_key};
use tessera_node::topology::NodeSpec;
use tessera_storage::capacity;
use tessera_storage::csi::{self, ClaimEvent, Provisioning};
use tessera_storage::expansion::{self, Resize};
use tessera_storage::mount;

use crate::twins::NodeTwins;

/// The field manager of the drivers' writes.
const MANAGER: &str = "external-provisioner";

/// How often the provisioner looks again without a change (upstream's resync).
const RESYNC: Duration = Duration::from_secs(15);

/// A node's local disk: its `ephemeral-storage` capacity, or [`csi::DEFAULT_LOCAL_DISK`].
pub(crate) fn local_disk(spec: &NodeSpec) -> Quantity {
    spec.capacity
        .get("ephemeral-storage")
        .copied()
        .or_else(|| csi::DEFAULT_LOCAL_DISK.parse().ok())
        .unwrap_or(Quantity::ZERO)
}

/// Registers the simulated drivers on `node`: its CSINode, created or replaced.
pub(crate) async fn publish_csi_node(client: &Client, node: &str) -> Result<(), kube::Error> {
    let api: Api<CSINode> = Api::all(client.clone());
    let wanted: CSINode =
        serde_json::from_value(csi::csi_node(node)).map_err(kube::Error::SerdeError)?;
    let params = PatchParams::apply(MANAGER).force();
    api.patch(node, &params, &Patch::Apply(&wanted)).await?;
    Ok(())
}

/// external-provisioner for the simulated drivers, until the task is dropped: `nodes` gives
/// each registered node's spec (its disk), `registered` the nodes registered now.
pub(crate) async fn run_provisioner(
    client: Client,
    nodes: crate::specs::Specs,
    registered: impl Fn() -> Vec<String>,
    clock: Clock,
) {
    let (claims, claim_changes) = watched(Api::<PersistentVolumeClaim>::all(client.clone()));
    let (volumes, volume_changes) = watched(Api::<PersistentVolume>::all(client.clone()));
    let (classes, class_changes) = watched(Api::<StorageClass>::all(client.clone()));
    let (restore, restore_changes) = crate::snapshots::RestoreSources::watch(&client);
    let mut changes = futures::stream::select_all([
        claim_changes,
        volume_changes,
        class_changes,
        restore_changes,
    ]);
    let mut resync = tokio::time::interval(RESYNC);
    let mut provisioner = Provisioner {
        client,
        clock,
        failures: HashSet::new(),
        published: BTreeMap::new(),
    };
    // A pass per burst of changes and at each resync.
    while next_pass(&mut changes, &mut resync).await {
        // The stores fill only while their streams are polled (above): no waiting here.
        if !listed(&claims) || !listed(&volumes) || !listed(&classes) {
            // Look again soon rather than at the next resync.
            resync.reset_after(Duration::from_millis(100));
            continue;
        }
        let disks: BTreeMap<String, Quantity> = registered()
            .into_iter()
            .filter_map(|node| {
                let disk = local_disk(&*nodes.get(&node)?);
                Some((node, disk))
            })
            .collect();
        provisioner
            .pass(
                store_values(&claims),
                store_values(&volumes),
                store_values(&classes),
                restore.values(),
                &disks,
            )
            .await;
    }
}

struct Provisioner {
    client: Client,
    clock: Clock,
    /// Failures reported (claim UID, message): each is recorded once.
    failures: HashSet<(String, String)>,
    /// The capacity last published for each (class, node).
    published: BTreeMap<(String, String), String>,
}

impl Provisioner {
    async fn pass(
        &mut self,
        claims: Vec<Value>,
        mut volumes: Vec<Value>,
        classes: Vec<Value>,
        (snapshots, contents): (Vec<Value>, Vec<Value>),
        disks: &BTreeMap<String, Quantity>,
    ) {
        for claim in &claims {
            let sources = csi::Sources {
                claims: &claims,
                volumes: &volumes,
                snapshots: &snapshots,
                contents: &contents,
            };
            let outcome = csi::provision_from(claim, &classes, &volumes, sources, |node| {
                disks.get(node).copied()
            });
            match &outcome {
                Provisioning::Skip => continue,
                Provisioning::Create { volume, driver } => {
                    match self.create_volume(volume).await {
                        Ok(true) => {
                            tracing::info!(volume = %text(volume, "/metadata/name"), claim = %tessera_storage::objects::claim_key(claim), "provisioned a volume");
                            self.events(claim, driver, &outcome).await;
                        }
                        Ok(false) => {}
                        Err(error) => {
                            tracing::warn!(%error, "cannot create a provisioned volume; retried");
                            continue;
                        }
                    }
                    volumes.push(volume.clone());
                }
                Provisioning::Fail {
                    driver,
                    message,
                    reschedule,
                } => {
                    let seen = (
                        tessera_storage::objects::uid(claim).to_string(),
                        message.clone(),
                    );
                    if self.failures.insert(seen) {
                        self.events(claim, driver, &outcome).await;
                    }
                    if let Some(claim) = reschedule
                        && let Err(error) = self.update_claim(claim).await
                    {
                        tracing::debug!(%error, "cannot send a claim back to the scheduler; retried");
                    }
                }
            }
        }
        self.resize(&claims, &mut volumes, &contents, disks).await;
        // What is published now; objects deleted by someone else are published again.
        let existing = match self.list_capacities().await {
            Ok(existing) => existing,
            Err(error) => {
                tracing::debug!(%error, "cannot list storage capacities");
                return;
            }
        };
        let names: BTreeSet<&str> = existing.iter().map(|c| text(c, "/metadata/name")).collect();
        let local_classes = csi::local_classes(&classes);
        // A class deleted or a node gone: forgotten, so that it is published again when it
        // comes back.
        self.published.retain(|(class, node), _| {
            local_classes.contains(&class.as_str()) && disks.contains_key(node)
        });
        for class in local_classes {
            for (node, disk) in disks {
                let capacity = csi::storage_capacity(class, node, disk, &volumes, &contents);
                let left = text(&capacity, "/capacity").to_string();
                let key = (class.to_string(), node.clone());
                if self.published.get(&key) == Some(&left)
                    && names.contains(csi::capacity_name(class, node).as_str())
                {
                    continue;
                }
                match self.publish_capacity(capacity).await {
                    Ok(()) => {
                        self.published.insert(key, left);
                    }
                    Err(error) => tracing::debug!(%node, %error, "cannot publish storage capacity"),
                }
            }
        }
        // external-provisioner's capacity controller deletes the objects no (class, node)
        // wants any more.
        let nodes: Vec<&str> = disks.keys().map(String::as_str).collect();
        let api: Api<CSIStorageCapacity> =
            Api::namespaced(self.client.clone(), csi::CAPACITY_NAMESPACE);
        for name in capacity::obsolete(&existing, &classes, &nodes) {
            match api.delete(name, &Default::default()).await {
                Ok(_) => tracing::info!(capacity = %name, "deleted an obsolete storage capacity"),
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => {
                    tracing::debug!(capacity = %name, %error, "cannot delete an obsolete storage capacity; retried")
                }
            }
        }
    }

    /// The CSIStorageCapacities the local driver's provisioner published, as JSON.
    async fn list_capacities(&self) -> Result<Vec<Value>, kube::Error> {
        let api: Api<CSIStorageCapacity> =
            Api::namespaced(self.client.clone(), csi::CAPACITY_NAMESPACE);
        let selector = format!(
            "{}={},{}={}",
            capacity::DRIVER_LABEL,
            csi::LOCAL_DRIVER,
            capacity::MANAGED_BY_LABEL,
            capacity::MANAGED_BY
        );
        let listed = api
            .list(&kube::api::ListParams::default().labels(&selector))
            .await?;
        Ok(listed
            .items
            .iter()
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect())
    }

    /// external-resizer: every bound claim asking more than it has grows its volume.
    async fn resize(
        &mut self,
        claims: &[Value],
        volumes: &mut [Value],
        contents: &[Value],
        disks: &BTreeMap<String, Quantity>,
    ) {
        for claim in claims {
            let Some(at) = volumes
                .iter()
                .position(|v| text(v, "/metadata/name") == text(claim, "/spec/volumeName"))
            else {
                continue;
            };
            let volume = &volumes[at];
            let node_free = csi::local_volume_node(volume).and_then(|node| {
                let disk = disks.get(node)?;
                Some(disk.value() - csi::used_on_node(node, volumes, contents))
            });
            let driver = text(volume, "/spec/csi/driver").to_string();
            let (claim, grown, events) =
                match expansion::resize(claim, volume, node_free, (self.clock)()) {
                    Resize::Skip => continue,
                    Resize::Expand {
                        claim,
                        volume,
                        events,
                    } => (claim, Some(volume), events),
                    Resize::Fail { claim, events } => (claim, None, events),
                };
            let written = async {
                if let Some(grown) = &grown {
                    let typed: PersistentVolume =
                        serde_json::from_value(grown.clone()).map_err(kube::Error::SerdeError)?;
                    Api::<PersistentVolume>::all(self.client.clone())
                        .replace(text(grown, "/metadata/name"), &post_params(), &typed)
                        .await?;
                }
                replace_claim_status(&self.client, &claim).await
            };
            if let Err(error) = written.await {
                tracing::debug!(%error, "cannot resize a volume; retried");
                continue;
            }
            if let Some(grown) = grown {
                volumes[at] = grown;
            }
            let component = format!("external-resizer {driver}");
            self.record_claim_events(&claim, &component, events).await;
        }
    }

    /// Creates the volume; false when it exists already.
    async fn create_volume(&self, volume: &Value) -> Result<bool, kube::Error> {
        let typed: PersistentVolume =
            serde_json::from_value(volume.clone()).map_err(kube::Error::SerdeError)?;
        let params = PostParams {
            field_manager: Some(MANAGER.into()),
            ..PostParams::default()
        };
        match Api::<PersistentVolume>::all(self.client.clone())
            .create(&params, &typed)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(error) => Err(error),
        }
    }

    async fn update_claim(&self, claim: &Value) -> Result<(), kube::Error> {
        let typed: PersistentVolumeClaim =
            serde_json::from_value(claim.clone()).map_err(kube::Error::SerdeError)?;
        let params = PostParams {
            field_manager: Some(MANAGER.into()),
            ..PostParams::default()
        };
        Api::<PersistentVolumeClaim>::namespaced(
            self.client.clone(),
            text(claim, "/metadata/namespace"),
        )
        .replace(text(claim, "/metadata/name"), &params, &typed)
        .await
        .map(drop)
    }

    async fn publish_capacity(&self, capacity: Value) -> Result<(), kube::Error> {
        let typed: CSIStorageCapacity =
            serde_json::from_value(capacity.clone()).map_err(kube::Error::SerdeError)?;
        let api: Api<CSIStorageCapacity> =
            Api::namespaced(self.client.clone(), csi::CAPACITY_NAMESPACE);
        let params = PatchParams::apply(MANAGER).force();
        api.patch(
            text(&capacity, "/metadata/name"),
            &params,
            &Patch::Apply(&typed),
        )
        .await
        .map(drop)
    }

    async fn events(&self, claim: &Value, driver: &str, outcome: &Provisioning) {
        let component = csi::provisioner_component(driver);
        self.record_claim_events(claim, &component, csi::events(claim, outcome))
            .await;
    }

    /// Records the core's events about `claim` as `component`.
    async fn record_claim_events(&self, claim: &Value, component: &str, events: Vec<ClaimEvent>) {
        for event in events {
            let involved = tessera_storage::objects::reference(claim, "PersistentVolumeClaim");
            record(
                &self.client,
                &self.clock,
                component,
                involved,
                event.kind,
                event.reason,
                &event.message,
            )
            .await;
        }
    }
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(MANAGER.into()),
        ..PostParams::default()
    }
}

/// `UpdateStatus` of a claim to `claim`.
async fn replace_claim_status(client: &Client, claim: &Value) -> Result<(), kube::Error> {
    let typed: PersistentVolumeClaim =
        serde_json::from_value(claim.clone()).map_err(kube::Error::SerdeError)?;
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), text(claim, "/metadata/namespace"))
        .replace_status(text(claim, "/metadata/name"), &post_params(), &typed)
        .await
        .map(drop)
}

/// Records an event from `component`; a failure is only logged.
async fn record(
    client: &Client,
    clock: &Clock,
    component: &str,
    involved: Value,
    kind: &str,
    reason: &str,
    message: &str,
) {
    let recorder = Recorder {
        component,
        host: None,
    };
    let event = core_event(recorder, involved, kind, reason, message, clock());
    let namespace = text(&event, "/metadata/namespace").to_string();
    let Ok(event) = serde_json::from_value::<CoreEvent>(event) else {
        return;
    };
    if let Err(error) = Api::<CoreEvent>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), &event)
        .await
    {
        tracing::debug!(%error, "cannot record an event");
    }
}

/// The pod's volumes that name a claim, as (volume name, claim name).
fn claim_volumes(pod: &Pod) -> Vec<(String, String)> {
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|volume| {
            if let Some(source) = &volume.persistent_volume_claim {
                Some((volume.name.clone(), source.claim_name.clone()))
            } else {
                volume
                    .ephemeral
                    .as_ref()
                    .map(|_| (volume.name.clone(), format!("{pod_name}-{}", volume.name)))
            }
        })
        .collect()
}

impl NodeTwins {
    /// The kubelet's volume manager for `pod`: true once every claim it names is Bound, the
    /// node's injected mount fault (if any) cleared, and every Secret and ConfigMap its
    /// volumes read exists (or is optional); else the pod waits in ContainerCreating (the
    /// `FailedMount` events and the status written once per wait and messages) and is
    /// examined again when one of its namespace's claims, secrets or config maps changes.
    pub(crate) async fn volumes_mounted(
        &self,
        pod: &Pod,
        spec: &NodeSpec,
    ) -> Result<bool, kube::Error> {
        let wanted = claim_volumes(pod);
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let pod_value = serde_json::to_value(pod).map_err(kube::Error::SerdeError)?;
        let sources = mount::pod_sources(&pod_value);
        if wanted.is_empty() && sources.is_empty() {
            return Ok(true);
        }
        let (namespace, _) = pod_key(pod);
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &namespace);
        let mut unmounted = BTreeSet::new();
        let mut mounted = Vec::new();
        for (volume, claim) in &wanted {
            let claim = api.get_opt(claim).await?;
            let bound = claim.as_ref().is_some_and(|claim| {
                claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
                    && claim
                        .spec
                        .as_ref()
                        .and_then(|s| s.volume_name.as_deref())
                        .is_some_and(|v| !v.is_empty())
            });
            match claim {
                Some(claim) if bound => mounted.push(claim),
                _ => {
                    unmounted.insert(volume.clone());
                }
            }
        }
        let mut messages = Vec::new();
        if !unmounted.is_empty() {
            let names: Vec<&str> = unmounted.iter().map(String::as_str).collect();
            messages.push(format!(
                "Unable to attach or mount volumes: unmounted volumes=[{}], unattached volumes=[], failed to process volumes=[{}]: context deadline exceeded",
                names.join(" "),
                names.join(" ")
            ));
        } else if let Some(fault) = self.mount_fault(&spec.name)
            && let Some(first) = mounted.first()
        {
            // `tessera fault volume`: the CSI mount of the first claimed volume fails.
            let name = first
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.clone())
                .unwrap_or_default();
            let volume = match Api::<PersistentVolume>::all(self.client.clone())
                .get_opt(&name)
                .await
            {
                Ok(Some(volume)) => serde_json::to_value(volume).ok(),
                _ => None,
            }
            .unwrap_or_else(|| serde_json::json!({"metadata": {"name": name}}));
            messages.push(mount::failed_mount_message(
                fault,
                &mount::CsiMount::of(&volume, &uid, &namespace),
            ));
        }
        if !sources.is_empty() {
            let present = self.present_sources(&namespace, &sources).await?;
            messages.extend(mount::missing_sources(&pod_value, |source| {
                present.contains(&source)
            }));
        }
        if messages.is_empty() {
            self.waiting_for_volumes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&uid);
            for claim in &mounted {
                self.expand_on_node(pod, &spec.name, claim).await;
            }
            return Ok(true);
        }
        let said = messages.join("\n");
        let (key_namespace, key_name) = pod_key(pod);
        let previous = self
            .waiting_for_volumes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(uid, (key_namespace, key_name, said.clone()));
        // Once per wait and messages.
        if previous.is_none_or(|(_, _, before)| before != said) {
            for message in &messages {
                self.event(pod, &spec.name, "Warning", "FailedMount", message, None)
                    .await;
            }
            let status = pod_status::creating_status(pod, spec, (self.clock)());
            Api::<Pod>::namespaced(self.client.clone(), &namespace)
                .patch_status(
                    pod.metadata.name.as_deref().unwrap_or_default(),
                    &PatchParams::default(),
                    &Patch::Merge(&status),
                )
                .await?;
        }
        Ok(false)
    }

    /// Which of the Secrets and ConfigMaps the pod's volumes read exist in `namespace`.
    async fn present_sources<'a>(
        &self,
        namespace: &str,
        sources: &[(&str, mount::Source<'a>, bool)],
    ) -> Result<BTreeSet<mount::Source<'a>>, kube::Error> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let maps: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        let mut present = BTreeSet::new();
        let mut looked = BTreeSet::new();
        for (_, source, _) in sources {
            if !looked.insert(*source) {
                continue;
            }
            let exists = match source {
                mount::Source::Secret(name) => secrets.get_opt(name).await?.is_some(),
                mount::Source::ConfigMap(name) => maps.get_opt(name).await?.is_some(),
            };
            if exists {
                present.insert(*source);
            }
        }
        Ok(present)
    }

    /// The kubelet's node expansion of `claim`, mounted by `pod` on `node`, when the resizer
    /// left it pending there: the claim's new capacity and the pod's event. A failure is
    /// logged; the next look tries again.
    pub(crate) async fn expand_on_node(
        &self,
        pod: &Pod,
        node: &str,
        claim: &PersistentVolumeClaim,
    ) {
        let Ok(claim) = serde_json::to_value(claim) else {
            return;
        };
        let Some((expanded, message)) = expansion::finish_node_expansion(&claim, node) else {
            return;
        };
        if let Err(error) = replace_claim_status(&self.client, &expanded).await {
            tracing::debug!(%error, "cannot finish a volume's expansion on its node; retried");
            return;
        }
        self.event(
            pod,
            node,
            "Normal",
            "FileSystemResizeSuccessful",
            &message,
            None,
        )
        .await;
    }

    /// A claim changed: when its expansion waits for the node, the running pod of these twins
    /// that mounts it finishes it.
    pub(crate) async fn claim_changed(&self, claim: &PersistentVolumeClaim) {
        let pending = claim
            .status
            .as_ref()
            .and_then(|s| s.allocated_resource_statuses.as_ref())
            .and_then(|s| s.get("storage"))
            .is_some_and(|s| s == "NodeResizePending");
        if !pending {
            return;
        }
        let namespace = claim.metadata.namespace.clone().unwrap_or_default();
        let name = claim.metadata.name.clone().unwrap_or_default();
        let Ok(pods) = Api::<Pod>::namespaced(self.client.clone(), &namespace)
            .list(&Default::default())
            .await
        else {
            return;
        };
        let user = pods.items.into_iter().find(|pod| {
            let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
            running
                && self.node_of(pod).is_some()
                && claim_volumes(pod).iter().any(|(_, c)| *c == name)
        });
        if let Some(pod) = user
            && let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone())
        {
            self.expand_on_node(&pod, &node, claim).await;
        }
    }

    /// The pods waiting for a claim of `namespace`, or all with "" (they stay on the list
    /// until mounted).
    pub(crate) fn waiting_for_volumes_in(&self, namespace: &str) -> Vec<(String, String)> {
        self.waiting_for_volumes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|(ns, _, _)| namespace.is_empty() || ns == namespace)
            .map(|(ns, name, _)| (ns.clone(), name.clone()))
            .collect()
    }
}
