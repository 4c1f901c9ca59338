//! Maintenance state machines for accelerator nodes, as pure cores. Today: the NVIDIA GPU
//! operator's driver-upgrade controller (k8s-operator-libs `pkg/upgrade/`, in-place mode):
//! the state label values and keys ([`keys`]), the upgrade policy ([`policy`]), the cluster
//! state and slot arithmetic ([`state`]) and one reconcile step returning decisions
//! ([`apply`]). Knows no API client and no clock; a shell reads nodes and pods, calls
//! [`apply_state`] with the time, and carries out the [`Action`]s.
//! Requestor (maintenance-operator) mode is not here.
//!
//! On top of it, declared maintenance plans ([`plan`]): a driver upgrade, a MIG repartition, a
//! kubelet version or a node rotation over a pool, checked and staged before they start
//! ([`mod@preflight`]: a canary, then batches; refused when a PodDisruptionBudget or
//! `maxUnavailable` would be exceeded) and run one stateless step at a time ([`rollout`]), every
//! kind through the same per-node state machine; [`status`] records the stages in the plan's
//! status so a step needs only the object and the nodes' labels. [`spec`] reads the
//! `MaintenancePlan` document and [`facts`] the Node, Pod and PodDisruptionBudget objects a shell
//! lists (the only place a label selector is evaluated, with `tessera-model`'s matcher).
//! [`worker`] says what each worker model (bare metal, passthrough or vGPU host) allows and
//! how its nodes are evacuated.

pub mod apply;
pub mod crd;
pub mod facts;
pub mod keys;
pub mod plan;
pub mod policy;
pub mod preflight;
pub mod rollout;
pub mod spec;
pub mod state;
pub mod status;
pub mod worker;

pub use apply::{Action, Manager, VALIDATION_TIMEOUT_SECONDS, apply_state};
pub use keys::{Keys, UpgradeState};
pub use plan::{
    FAIL_VALIDATION_ANNOTATION, INSTALLED_KUBELET_ANNOTATION, NodeFacts, Plan, PlanError, PlanKind,
    REPLACEMENT_ANNOTATION, REPLACES_ANNOTATION, VALIDATION_FAILED_CONDITION, Validator,
    replacement_name,
};
pub use policy::{
    DrainSpec, IntOrPercent, PodDeletionSpec, PolicyError, UpgradePolicy, WaitForCompletionSpec,
};
pub use preflight::{Budget, ModelPlan, Refusal, Refused, Rollout, Stage, preflight};
pub use rollout::{Change, NodeProgress, Phase, PlanAction, Step, step};
pub use spec::plan_from_document;
pub use state::{
    BuildError, ClusterUpgradeState, DaemonSetCounts, DriverPod, GpuPod, NodeInput,
    NodeUpgradeState, PodOwner, PodPhase, PodRef,
};
pub use worker::{DriverScope, Evacuation, WorkerPlan, worker_plan};

#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod rollout_proptests;
#[cfg(test)]
mod tests;
