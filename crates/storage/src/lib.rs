//! Kubernetes volume binding as pure decisions, after kube-controller-manager's PV controller
//! and kube-scheduler's VolumeBinding plugin: which volume a claim gets ([`matching`]), what the
//! PV controller does about one claim or one volume ([`pv_controller`]), whether a pod's claims
//! fit a node and what to write when it is chosen ([`volume_binding`]), and the rows `kubectl
//! get pvc` / `kubectl get pv` print ([`printer`]); the embedded platform's simulated CSI
//! drivers ([`csi`]) and volume expansion ([`expansion`]); and the models a pod asks for, by model
//! volume or KServe's storage initializer, with the ModelLocality score ([`models`]); the
//! kubelet's mount failures ([`mount`]) and external-provisioner's obsolete capacities
//! ([`capacity`]); VolumeBinding's PreBind wait for the claims it wrote ([`prebind`]); and CSI
//! volume snapshots: the snapshot-controller, the csi-snapshotter sidecar, the bundled
//! definitions and classes ([`snapshots`]).
//!
//! A core: objects come in as JSON as the API shows them, time is an argument, and the
//! decisions come back as values. It knows nothing of clients, watches or retries; the shell
//! that feeds it (not part of this crate) writes what it decides.

pub mod capacity;
pub mod csi;
pub mod ephemeral;
pub mod expansion;
pub mod matching;
pub mod models;
pub mod mount;
pub mod objects;
pub mod prebind;
pub mod printer;
pub mod pv_controller;
pub mod snapshots;
pub mod volume_binding;

#[cfg(test)]
mod testing;

pub use matching::find_matching_volume;
