//! Maintenance state machines for accelerator nodes, as pure cores. Today: the NVIDIA GPU
//! operator's driver-upgrade controller (k8s-operator-libs `pkg/upgrade/`, in-place mode):
//! the state label values and keys ([`keys`]), the upgrade policy ([`policy`]), the cluster
//! state and slot arithmetic ([`state`]) and one reconcile step returning decisions
//! ([`apply`]). Knows no API client, no clock and no label-selector evaluation; a shell reads
//! nodes and pods, calls [`apply_state`] with the time, and carries out the [`Action`]s.
//! Requestor (maintenance-operator) mode, MIG repartitioning, Kubernetes version updates and
//! node rotation are not here.

pub mod apply;
pub mod keys;
pub mod policy;
pub mod state;

pub use apply::{Action, Manager, VALIDATION_TIMEOUT_SECONDS, apply_state};
pub use keys::{Keys, UpgradeState};
pub use policy::{
    DrainSpec, IntOrPercent, PodDeletionSpec, PolicyError, UpgradePolicy, WaitForCompletionSpec,
};
pub use state::{
    BuildError, ClusterUpgradeState, DaemonSetCounts, DriverPod, GpuPod, NodeInput,
    NodeUpgradeState, PodOwner, PodPhase, PodRef,
};

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
