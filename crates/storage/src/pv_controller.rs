//! The decisions of kube-controller-manager's PV controller
//! (`pkg/controller/volume/persistentvolume/pv_controller.go`): [`sync_claim`] and
//! [`sync_volume`] return, in the order upstream makes them, the writes (`Update` of a claim or
//! volume, of their status, deletion of a volume), the events (with upstream's reasons and
//! texts) and the claims to sync next.
//!
//! Covers binding (pre-bound either way, the smallest match, `bind-completed` and
//! `bound-by-controller`), claim phases Pending/Bound/Lost with `status.capacity`,
//! `accessModes` and `currentVolumeAttributesClassName`, volume phases Available/Bound/Released/Failed, the retroactive default class,
//! provisioning requests to external provisioners (`volume.kubernetes.io/storage-provisioner`
//! and its beta spelling; with `WaitForFirstConsumer` only once the scheduler set
//! `volume.kubernetes.io/selected-node`), and reclaim (Retain keeps the volume Released, Delete
//! deletes it, Recycle fails as there is no recycler plugin).
//!
//! Deliberately not known: volume plugins (Tessera has no in-tree plugin, so a
//! `kubernetes.io/…` provisioner finds none and every other provisioner is external), CSI
//! migration, volume expansion, finalizers (`HonorPVReclaimPolicy`) and the controller's caches
//! and retries (a failed write is the shell's to retry by syncing again). One deliberate
//! departure: upstream leaves an externally provisioned volume's deletion to its provisioner
//! and fails a static one no in-tree plugin can delete; Tessera has no storage behind a volume,
//! so the Delete policy is carried out here by deleting the PersistentVolume object.

use std::time::SystemTime;

use serde_json::{Value, json};
use tessera_model::event::{Recorder, core_event};
use tessera_model::json::text;

use crate::find_matching_volume;
use crate::objects::{
    ANN_BETA_DEFAULT_CLASS, ANN_BETA_STORAGE_PROVISIONER, ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER, ANN_DEFAULT_CLASS, ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER,
    annotation, by_name, by_namespaced_name, check_access_modes, claim_class, claim_has_class,
    claim_key, claim_ref, has_annotation, is_deleting, is_volume_bound_to_claim, name, namespace,
    pod_claim_names, pod_is_terminated, quantity_at, reference, requested_storage, set_annotation,
    uid, volume_attributes_class, volume_capacity, volume_class, volume_mode_mismatch,
};

/// The component that records the controller's events.
pub const COMPONENT: &str = "persistentvolume-controller";

/// What the controller sees: every volume, claim, storage class and pod.
#[derive(Debug, Clone, Copy)]
pub struct Cluster<'a> {
    /// PersistentVolumes.
    pub volumes: &'a [Value],
    /// PersistentVolumeClaims, all namespaces.
    pub claims: &'a [Value],
    /// StorageClasses.
    pub classes: &'a [Value],
    /// Pods, all namespaces (who waits for a claim, who uses a volume).
    pub pods: &'a [Value],
}

/// One thing to do, in order. Objects are whole, as they should be written, and carry the
/// `resourceVersion` the sync read: a shell writing them in order carries the version each
/// write returns into the next write of the same object, as upstream goes on with the object
/// each write returns.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `Update` the claim (spec and metadata) to this object.
    UpdateClaim(Value),
    /// `UpdateStatus` of the claim to this object.
    UpdateClaimStatus(Value),
    /// `Update` the volume (spec and metadata) to this object.
    UpdateVolume(Value),
    /// `UpdateStatus` of the volume to this object.
    UpdateVolumeStatus(Value),
    /// Delete the named volume (its reclaim policy is Delete).
    DeleteVolume(String),
    /// Record this event.
    Event(Event),
    /// Sync this claim (`namespace/name`) soon: upstream enqueues it.
    SyncClaim(String),
}

/// An event about a claim or a volume.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The involved object's reference.
    pub involved: Value,
    /// `Normal` or `Warning`.
    pub kind: &'static str,
    /// Upstream's reason.
    pub reason: &'static str,
    /// Upstream's message.
    pub message: String,
}

impl Event {
    /// The `core/v1` Event as the controller records it at `now`.
    pub fn to_core_event(&self, now: SystemTime) -> Value {
        let recorder = Recorder {
            component: COMPONENT,
            host: None,
        };
        core_event(
            recorder,
            self.involved.clone(),
            self.kind,
            self.reason,
            &self.message,
            now,
        )
    }
}

/// Why a sync stops with an error (upstream returns it and retries the sync later).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    /// The claim's class has no `volumeBindingMode` (defaulting failed).
    #[error("VolumeBindingMode not set for StorageClass {0:?}")]
    BindingModeNotSet(String),
    /// A controller-bound claim names a volume claimed by another claim.
    #[error(
        "invalid binding of claim {claim:?} to volume {volume:?}: volume already claimed by {other:?}"
    )]
    AlreadyClaimed {
        /// The claim, `namespace/name`.
        claim: String,
        /// The volume it names.
        volume: String,
        /// The claim the volume names.
        other: String,
    },
    /// A volume to bind has no `spec.capacity.storage`.
    #[error("PersistentVolume {0:?} is without a storage capacity")]
    NoCapacity(String),
}

/// What upstream's `syncClaim` does about `claim`.
pub fn sync_claim(claim: &Value, cluster: Cluster<'_>) -> Result<Vec<Action>, SyncError> {
    let mut sync = Sync {
        cluster,
        actions: Vec::new(),
    };
    if has_annotation(claim, ANN_BIND_COMPLETED) {
        sync.bound_claim(claim)?;
    } else {
        sync.unbound_claim(claim)?;
    }
    Ok(sync.actions)
}

/// What upstream's `syncVolume` does about `volume`.
pub fn sync_volume(volume: &Value, cluster: Cluster<'_>) -> Result<Vec<Action>, SyncError> {
    let mut sync = Sync {
        cluster,
        actions: Vec::new(),
    };
    sync.volume(volume)?;
    Ok(sync.actions)
}

/// `IsDelayBindingMode`: the claim's class exists and binds `WaitForFirstConsumer`.
pub fn is_delay_binding_mode(claim: &Value, classes: &[Value]) -> Result<bool, SyncError> {
    let class_name = claim_class(claim);
    if class_name.is_empty() {
        return Ok(false);
    }
    let Some(class) = by_name(classes, class_name) else {
        return Ok(false);
    };
    match class.get("volumeBindingMode").and_then(Value::as_str) {
        None => Err(SyncError::BindingModeNotSet(class_name.to_string())),
        Some(mode) => Ok(mode == "WaitForFirstConsumer"),
    }
}

/// `GetDefaultClass`: of the classes marked default, the newest (ties by name).
pub fn default_class(classes: &[Value]) -> Option<&Value> {
    let mut defaults: Vec<&Value> = classes
        .iter()
        .filter(|class| {
            annotation(class, ANN_DEFAULT_CLASS) == Some("true")
                || annotation(class, ANN_BETA_DEFAULT_CLASS) == Some("true")
        })
        .collect();
    defaults.sort_by(|a, b| {
        let created = |c: &Value| {
            tessera_model::time::parse_timestamp(text(c, "/metadata/creationTimestamp"))
        };
        created(b).cmp(&created(a)).then(name(a).cmp(name(b)))
    });
    defaults.first().copied()
}

struct Sync<'a> {
    cluster: Cluster<'a>,
    actions: Vec<Action>,
}

impl Sync<'_> {
    fn event(
        &mut self,
        object: &Value,
        kind: &'static str,
        type_: &'static str,
        reason: &'static str,
        message: String,
    ) {
        self.actions.push(Action::Event(Event {
            involved: reference(object, kind),
            kind: type_,
            reason,
            message,
        }));
    }

    fn claim_event(
        &mut self,
        claim: &Value,
        type_: &'static str,
        reason: &'static str,
        message: String,
    ) {
        self.event(claim, "PersistentVolumeClaim", type_, reason, message);
    }

    fn volume_event(
        &mut self,
        volume: &Value,
        type_: &'static str,
        reason: &'static str,
        message: String,
    ) {
        self.event(volume, "PersistentVolume", type_, reason, message);
    }

    /// `syncUnboundClaim`.
    fn unbound_claim(&mut self, claim: &Value) -> Result<(), SyncError> {
        let volume_name = text(claim, "/spec/volumeName");
        if volume_name.is_empty() {
            let delay_binding = is_delay_binding_mode(claim, self.cluster.classes)?;
            if let Some(volume) =
                find_matching_volume(claim, self.cluster.volumes, None, delay_binding)
            {
                return self.bind(volume, claim);
            }
            if self.assign_default_class(claim) {
                return Ok(());
            }
            if delay_binding && !has_annotation(claim, ANN_SELECTED_NODE) {
                self.wait_for_first_consumer(claim);
            } else if !claim_class(claim).is_empty() {
                self.provision(claim);
                return Ok(());
            } else {
                self.claim_event(
                    claim,
                    "Normal",
                    "FailedBinding",
                    "no persistent volumes available for this claim and no storage class is set"
                        .into(),
                );
            }
            self.update_claim_status(claim, "Pending", None)?;
            return Ok(());
        }
        let Some(volume) = by_name(self.cluster.volumes, volume_name) else {
            // The requested volume does not exist (yet).
            self.update_claim_status(claim, "Pending", None)?;
            return Ok(());
        };
        if claim_ref(volume).is_none() {
            match check_volume_satisfies_claim(volume, claim) {
                Err(problem) => {
                    self.claim_event(
                        claim,
                        "Warning",
                        "VolumeMismatch",
                        format!(
                            "Cannot bind to requested volume {:?}: {problem}",
                            name(volume)
                        ),
                    );
                    self.update_claim_status(claim, "Pending", None)?;
                    Ok(())
                }
                Ok(()) => self.bind(volume, claim),
            }
        } else if is_volume_bound_to_claim(volume, claim) {
            self.bind(volume, claim)
        } else {
            self.claim_event(
                claim,
                "Warning",
                "FailedBinding",
                format!(
                    "volume {:?} already bound to a different claim.",
                    name(volume)
                ),
            );
            if !has_annotation(claim, ANN_BOUND_BY_CONTROLLER) {
                // The user asked for a volume claimed by someone else: retry later.
                self.update_claim_status(claim, "Pending", None)?;
                return Ok(());
            }
            let other = claim_ref(volume).unwrap_or(&Value::Null);
            Err(SyncError::AlreadyClaimed {
                claim: claim_key(claim),
                volume: volume_name.to_string(),
                other: format!("{}/{}", text(other, "/namespace"), text(other, "/name")),
            })
        }
    }

    /// `syncBoundClaim`.
    fn bound_claim(&mut self, claim: &Value) -> Result<(), SyncError> {
        let volume_name = text(claim, "/spec/volumeName");
        if volume_name.is_empty() {
            return self.claim_lost(
                claim,
                "ClaimLost",
                "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!",
            );
        }
        let Some(volume) = by_name(self.cluster.volumes, volume_name) else {
            return self.claim_lost(
                claim,
                "ClaimLost",
                "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
            );
        };
        match claim_ref(volume) {
            None => self.bind(volume, claim),
            Some(claim_ref) if text(claim_ref, "/uid") == uid(claim) => self.bind(volume, claim),
            Some(_) => self.claim_lost(
                claim,
                "ClaimMisbound",
                "Two claims are bound to the same volume, this one is bound incorrectly",
            ),
        }
    }

    /// `updateClaimStatusWithEvent(claim, Lost, nil, Warning, reason, message)`.
    fn claim_lost(
        &mut self,
        claim: &Value,
        reason: &'static str,
        message: &str,
    ) -> Result<(), SyncError> {
        if text(claim, "/status/phase") == "Lost" {
            return Ok(());
        }
        let updated = self.update_claim_status(claim, "Lost", None)?;
        self.claim_event(&updated, "Warning", reason, message.into());
        Ok(())
    }

    /// `assignDefaultStorageClass`: a claim without a class gets the default one.
    fn assign_default_class(&mut self, claim: &Value) -> bool {
        if claim_has_class(claim) {
            return false;
        }
        let Some(class) = default_class(self.cluster.classes) else {
            return false;
        };
        let mut updated = claim.clone();
        updated["spec"]["storageClassName"] = json!(name(class));
        self.actions.push(Action::UpdateClaim(updated));
        true
    }

    /// `emitEventForUnboundDelayBindingClaim`.
    fn wait_for_first_consumer(&mut self, claim: &Value) {
        let pods: Vec<&str> = self
            .cluster
            .pods
            .iter()
            .filter(|pod| {
                namespace(pod) == namespace(claim)
                    && !pod_is_terminated(pod)
                    && text(pod, "/spec/nodeName").is_empty()
                    && pod_claim_names(pod).iter().any(|c| c == name(claim))
            })
            .map(name)
            .collect();
        let (reason, message) = match pods.as_slice() {
            [] => (
                "WaitForFirstConsumer",
                "waiting for first consumer to be created before binding".to_string(),
            ),
            [pod] => (
                "WaitForPodScheduled",
                format!("waiting for pod {pod} to be scheduled"),
            ),
            pods => (
                "WaitForPodScheduled",
                format!("waiting for pods {} to be scheduled", pods.join(",")),
            ),
        };
        self.claim_event(claim, "Normal", reason, message);
    }

    /// `provisionClaim` with `findProvisionablePlugin` and
    /// `provisionClaimOperationExternal`.
    fn provision(&mut self, claim: &Value) {
        let class_name = claim_class(claim);
        let Some(class) = by_name(self.cluster.classes, class_name) else {
            self.claim_event(
                claim,
                "Warning",
                "ProvisioningFailed",
                format!("storageclass.storage.k8s.io {class_name:?} not found"),
            );
            return;
        };
        let provisioner = text(class, "/provisioner");
        if provisioner.starts_with("kubernetes.io/") {
            // An in-tree plugin's name: Tessera has none.
            self.claim_event(
                claim,
                "Warning",
                "ProvisioningFailed",
                format!("no volume plugin matched name: {provisioner}"),
            );
            return;
        }
        let mut claim = claim.clone();
        if annotation(&claim, ANN_STORAGE_PROVISIONER) != Some(provisioner) {
            set_annotation(&mut claim, ANN_BETA_STORAGE_PROVISIONER, provisioner);
            set_annotation(&mut claim, ANN_STORAGE_PROVISIONER, provisioner);
            self.actions.push(Action::UpdateClaim(claim.clone()));
        }
        self.claim_event(
            &claim,
            "Normal",
            "ExternalProvisioning",
            format!(
                "Waiting for a volume to be created either by the external provisioner '{provisioner}' \
                 or manually by the system administrator. If volume creation is delayed, please verify \
                 that the provisioner is running and correctly registered."
            ),
        );
    }

    /// `bind`: the volume's claimRef, its phase, the claim's volumeName, its status.
    fn bind(&mut self, volume: &Value, claim: &Value) -> Result<(), SyncError> {
        let volume = self.bind_volume_to_claim(volume, claim);
        let volume = self.update_volume_phase(&volume, "Bound", "");
        let claim = self.bind_claim_to_volume(claim, &volume);
        self.update_claim_status(&claim, "Bound", Some(&volume))?;
        Ok(())
    }

    /// `bindVolumeToClaim` through `GetBindVolumeToClaim`.
    fn bind_volume_to_claim(&mut self, volume: &Value, claim: &Value) -> Value {
        let (updated, dirty) = bind_volume_to_claim(volume, claim);
        if dirty {
            self.actions.push(Action::UpdateVolume(updated.clone()));
        }
        updated
    }

    /// `bindClaimToVolume`.
    fn bind_claim_to_volume(&mut self, claim: &Value, volume: &Value) -> Value {
        let mut updated = claim.clone();
        let mut dirty = false;
        let should_bind = text(claim, "/spec/volumeName") != name(volume);
        if should_bind {
            updated["spec"]["volumeName"] = json!(name(volume));
            dirty = true;
            if !has_annotation(&updated, ANN_BOUND_BY_CONTROLLER) {
                set_annotation(&mut updated, ANN_BOUND_BY_CONTROLLER, "yes");
            }
        }
        if !has_annotation(&updated, ANN_BIND_COMPLETED) {
            set_annotation(&mut updated, ANN_BIND_COMPLETED, "yes");
            dirty = true;
        }
        if dirty {
            self.actions.push(Action::UpdateClaim(updated.clone()));
        }
        updated
    }

    /// `updateClaimStatus`: the phase, and the access modes and capacity of the volume (reset
    /// without one; capacity only as the claim becomes `phase`).
    fn update_claim_status(
        &mut self,
        claim: &Value,
        phase: &str,
        volume: Option<&Value>,
    ) -> Result<Value, SyncError> {
        let mut status = claim
            .get("status")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut dirty = false;
        if text(claim, "/status/phase") != phase {
            status.insert("phase".into(), json!(phase));
            dirty = true;
        }
        match volume {
            None => {
                for field in [
                    "accessModes",
                    "capacity",
                    "currentVolumeAttributesClassName",
                ] {
                    if status.remove(field).is_some_and(|v| !v.is_null()) {
                        dirty = true;
                    }
                }
            }
            Some(volume) => {
                let modes = volume
                    .pointer("/spec/accessModes")
                    .cloned()
                    .unwrap_or(Value::Null);
                if claim.pointer("/status/accessModes").unwrap_or(&Value::Null) != &modes {
                    status.insert("accessModes".into(), modes);
                    dirty = true;
                }
                if text(claim, "/status/phase") != phase {
                    let Some(capacity) = volume
                        .pointer("/spec/capacity")
                        .filter(|c| c.get("storage").is_some())
                    else {
                        return Err(SyncError::NoCapacity(name(volume).to_string()));
                    };
                    let claim_capacity = claim.pointer("/status/capacity/storage");
                    if claim_capacity.is_none()
                        || quantity_at(claim, "/status/capacity/storage") != volume_capacity(volume)
                    {
                        status.insert("capacity".into(), capacity.clone());
                        dirty = true;
                    }
                }
                // The claim's current attributes class is the volume's, set only as it binds.
                let volume_class = volume
                    .pointer("/spec/volumeAttributesClassName")
                    .cloned()
                    .unwrap_or(Value::Null);
                if text(claim, "/status/phase") == "Pending"
                    && phase == "Bound"
                    && claim
                        .pointer("/status/currentVolumeAttributesClassName")
                        .unwrap_or(&Value::Null)
                        != &volume_class
                {
                    if volume_class.is_null() {
                        status.remove("currentVolumeAttributesClassName");
                    } else {
                        status.insert("currentVolumeAttributesClassName".into(), volume_class);
                    }
                    dirty = true;
                }
            }
        }
        if !dirty {
            return Ok(claim.clone());
        }
        let mut updated = claim.clone();
        updated["status"] = Value::Object(status);
        self.actions
            .push(Action::UpdateClaimStatus(updated.clone()));
        Ok(updated)
    }

    /// `updateVolumePhase`: nothing when the phase is already `phase`.
    fn update_volume_phase(&mut self, volume: &Value, phase: &str, message: &str) -> Value {
        if text(volume, "/status/phase") == phase {
            return volume.clone();
        }
        let mut updated = volume.clone();
        if !updated["status"].is_object() {
            updated["status"] = json!({});
        }
        updated["status"]["phase"] = json!(phase);
        if message.is_empty() {
            if let Some(status) = updated["status"].as_object_mut() {
                status.remove("message");
            }
        } else {
            updated["status"]["message"] = json!(message);
        }
        self.actions
            .push(Action::UpdateVolumeStatus(updated.clone()));
        updated
    }

    /// `updateVolumePhaseWithEvent`.
    fn volume_failed(&mut self, volume: &Value, reason: &'static str, message: &str) {
        if text(volume, "/status/phase") == "Failed" {
            return;
        }
        let updated = self.update_volume_phase(volume, "Failed", message);
        self.volume_event(&updated, "Warning", reason, message.into());
    }

    /// `syncVolume`.
    fn volume(&mut self, volume: &Value) -> Result<(), SyncError> {
        let Some(claim_ref) = claim_ref(volume) else {
            self.update_volume_phase(volume, "Available", "");
            return Ok(());
        };
        if text(claim_ref, "/uid").is_empty() {
            // Pre-bound to a claim that has not bound yet: the claim's sync binds it.
            self.update_volume_phase(volume, "Available", "");
            return Ok(());
        }
        let claim = by_namespaced_name(
            self.cluster.claims,
            text(claim_ref, "/namespace"),
            text(claim_ref, "/name"),
        )
        .filter(|claim| uid(claim) == text(claim_ref, "/uid"));
        let Some(claim) = claim else {
            // The claim was deleted (or replaced by a namesake).
            let volume = match text(volume, "/status/phase") {
                "Released" | "Failed" => volume.clone(),
                _ => self.update_volume_phase(volume, "Released", ""),
            };
            self.reclaim(&volume);
            return Ok(());
        };
        let claim_volume = text(claim, "/spec/volumeName");
        if claim_volume.is_empty() {
            if volume_mode_mismatch(claim, volume) {
                self.volume_event(
                    volume,
                    "Warning",
                    "VolumeMismatch",
                    format!(
                        "Cannot bind PersistentVolume to requested PersistentVolumeClaim {:?} due to incompatible volumeMode.",
                        name(claim)
                    ),
                );
                self.claim_event(
                    claim,
                    "Warning",
                    "VolumeMismatch",
                    format!(
                        "Cannot bind PersistentVolume {:?} to requested PersistentVolumeClaim due to incompatible volumeMode.",
                        name(volume)
                    ),
                );
                return Ok(());
            }
            // Volume bound, claim pending: the claim's sync finishes the binding.
            self.actions.push(Action::SyncClaim(claim_key(claim)));
            return Ok(());
        }
        if claim_volume == name(volume) {
            self.update_volume_phase(volume, "Bound", "");
            return Ok(());
        }
        // The claim is bound to another volume.
        let dynamically_provisioned =
            has_annotation(volume, crate::objects::ANN_DYNAMICALLY_PROVISIONED);
        if dynamically_provisioned && reclaim_policy(volume) == "Delete" {
            let volume = match text(volume, "/status/phase") {
                "Released" | "Failed" => volume.clone(),
                _ => self.update_volume_phase(volume, "Released", ""),
            };
            self.reclaim(&volume);
            return Ok(());
        }
        self.unbind_volume(volume);
        Ok(())
    }

    /// `unbindVolume`: a controller-made binding is removed, a user's pre-binding keeps its
    /// name and loses its UID; the volume is Available again.
    fn unbind_volume(&mut self, volume: &Value) {
        let mut updated = volume.clone();
        if has_annotation(volume, ANN_BOUND_BY_CONTROLLER) {
            if let Some(spec) = updated["spec"].as_object_mut() {
                spec.remove("claimRef");
            }
            if let Some(annotations) = updated["metadata"]["annotations"].as_object_mut() {
                annotations.remove(ANN_BOUND_BY_CONTROLLER);
                if annotations.is_empty()
                    && let Some(metadata) = updated["metadata"].as_object_mut()
                {
                    metadata.remove("annotations");
                }
            }
        } else if let Some(claim_ref) = updated["spec"]["claimRef"].as_object_mut() {
            claim_ref.remove("uid");
        }
        self.actions.push(Action::UpdateVolume(updated.clone()));
        self.update_volume_phase(&updated, "Available", "");
    }

    /// `reclaimVolume`.
    fn reclaim(&mut self, volume: &Value) {
        match reclaim_policy(volume) {
            "Retain" => {}
            "Delete" => self
                .actions
                .push(Action::DeleteVolume(name(volume).to_string())),
            "Recycle" => {
                // Pods still using the claim hold the volume, unless a namesake claim
                // replaced it (then the pods use the new claim's volume).
                let users = self.volume_users(volume);
                let claim_cached = claim_ref(volume).is_some_and(|r| {
                    by_namespaced_name(self.cluster.claims, text(r, "/namespace"), text(r, "/name"))
                        .is_some()
                });
                if !users.is_empty() && !claim_cached {
                    self.volume_event(
                        volume,
                        "Normal",
                        "VolumeFailedRecycle",
                        format!("Volume is used by pods: {}", users.join(",")),
                    );
                    return;
                }
                self.volume_failed(
                    volume,
                    "VolumeFailedRecycle",
                    "No recycler plugin found for the volume!",
                );
            }
            _ => self.volume_failed(
                volume,
                "VolumeUnknownReclaimPolicy",
                "Volume has unrecognized PersistentVolumeReclaimPolicy",
            ),
        }
    }

    /// `isVolumeUsed`: the pods (`namespace/name`, sorted) using the volume's claim that have
    /// not finished.
    fn volume_users(&self, volume: &Value) -> Vec<String> {
        let Some(claim_ref) = claim_ref(volume) else {
            return Vec::new();
        };
        let (claim_namespace, claim_name) =
            (text(claim_ref, "/namespace"), text(claim_ref, "/name"));
        let mut users: Vec<String> = self
            .cluster
            .pods
            .iter()
            .filter(|pod| {
                namespace(pod) == claim_namespace
                    && !pod_is_terminated(pod)
                    && pod_claim_names(pod).iter().any(|c| c == claim_name)
            })
            .map(|pod| format!("{}/{}", namespace(pod), name(pod)))
            .collect();
        users.sort();
        users.dedup();
        users
    }
}

/// A volume's `spec.persistentVolumeReclaimPolicy`.
fn reclaim_policy(volume: &Value) -> &str {
    text(volume, "/spec/persistentVolumeReclaimPolicy")
}

/// `GetBindVolumeToClaim`: the volume with its claimRef naming the claim (with UID) and
/// `bound-by-controller` when the controller made the binding; whether anything changed.
pub fn bind_volume_to_claim(volume: &Value, claim: &Value) -> (Value, bool) {
    let should_set_bound_by_controller = !is_volume_bound_to_claim(volume, claim);
    let mut updated = volume.clone();
    let mut dirty = false;
    let current = claim_ref(volume);
    let same = current.is_some_and(|r| {
        text(r, "/name") == name(claim)
            && text(r, "/namespace") == namespace(claim)
            && text(r, "/uid") == uid(claim)
    });
    if !same {
        updated["spec"]["claimRef"] = reference(claim, "PersistentVolumeClaim");
        dirty = true;
    }
    if should_set_bound_by_controller && !has_annotation(&updated, ANN_BOUND_BY_CONTROLLER) {
        set_annotation(&mut updated, ANN_BOUND_BY_CONTROLLER, "yes");
        dirty = true;
    }
    (updated, dirty)
}

/// `checkVolumeSatisfyClaim`: why a volume the claim asks for by name does not fit it.
pub fn check_volume_satisfies_claim(volume: &Value, claim: &Value) -> Result<(), String> {
    if is_deleting(volume) {
        return Err(format!(
            "the volume is marked for deletion {:?}",
            name(volume)
        ));
    }
    if volume_capacity(volume).value() < requested_storage(claim).value() {
        return Err("requested PV is too small".into());
    }
    if volume_class(volume) != claim_class(claim) {
        return Err("storageClassName does not match".into());
    }
    if volume_attributes_class(volume) != volume_attributes_class(claim) {
        return Err("volumeAttributesClassName does not match".into());
    }
    if volume_mode_mismatch(claim, volume) {
        return Err("incompatible volumeMode".into());
    }
    if !check_access_modes(claim, volume) {
        return Err("incompatible accessMode".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
