//! A declared maintenance plan (the spec of a `MaintenancePlan`): what to change (a driver
//! upgrade, a MIG repartition, a kubelet version, a node rotation), over which pool (a node
//! selector, `matchLabels` semantics), under the operator's upgrade policy, with a staged rollout
//! (a canary stage, then batches). Also the per-node facts the planner and the rollout read, and
//! what "the kind's change is applied on this node" means for each kind.
//!
//! Owns the plan's shape, its field checks and its stable staging. Knows no API object, no YAML
//! (the shell parses and reports positions) and no clock.

use std::collections::BTreeMap;

use crate::policy::{PodDeletionSpec, UpgradePolicy};
use crate::state::{GpuPod, PodPhase};

/// The annotation a replacement node carries, naming the node it replaces (node rotation).
pub const REPLACES_ANNOTATION: &str = "maintenance.tessera.dev/replaces";
/// The annotation a rotation sets on the node it rotates out, naming the replacement it asks
/// for; whoever provides nodes (the lab's twins, a cloud's node provisioner) adds that node with
/// [`REPLACES_ANNOTATION`].
pub const REPLACEMENT_ANNOTATION: &str = "maintenance.tessera.dev/replacement";
/// The annotation the lab sets on a node to make its validator fail.
pub const FAIL_VALIDATION_ANNOTATION: &str = "maintenance.tessera.dev/fail-validation";
/// The Node annotation recording the kubelet version a plan installed (`v1.33.5`); the twins
/// report it as `status.nodeInfo.kubeletVersion` when they start.
pub const INSTALLED_KUBELET_ANNOTATION: &str = "maintenance.tessera.dev/kubelet-version";
/// The node condition a failed validation sets (status `True`).
pub const VALIDATION_FAILED_CONDITION: &str = "MaintenanceValidationFailed";

/// What a plan changes on each node of its pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanKind {
    /// A new NVIDIA driver version (the GFD `nvidia.com/cuda.driver.*` labels follow): the
    /// node's own (`scope: host`, the default) or its VMs' (`guest`; see [`crate::worker`]).
    DriverUpgrade {
        version: String,
        scope: crate::worker::DriverScope,
    },
    /// A new MIG layout for every GPU of the node: `all-<profile>`, `all-balanced` or a list.
    MigRepartition {
        layout: tessera_node::hardware::MigLayout,
    },
    /// A new kubelet version (`status.nodeInfo.kubeletVersion`).
    KubernetesVersion { version: String },
    /// Add a replacement node, validate it, drain and remove the old node.
    NodeRotation,
}

impl PlanKind {
    /// The kind's name as the spec spells it.
    pub fn name(&self) -> &'static str {
        match self {
            PlanKind::DriverUpgrade { .. } => "driver-upgrade",
            PlanKind::MigRepartition { .. } => "mig-repartition",
            PlanKind::KubernetesVersion { .. } => "kubernetes-version",
            PlanKind::NodeRotation => "node-rotation",
        }
    }

    /// Whether every pod of the node must leave it (not only the GPU pods the operator's
    /// pod-deletion filter selects): all kinds but a driver upgrade stop or remove the node's
    /// kubelet or its GPUs' partitions, and a guest driver upgrade restarts the VMs (a VM host
    /// drains for any kind: [`crate::worker::evicts_all_pods`]).
    pub fn evicts_all_pods(&self) -> bool {
        !matches!(
            self,
            PlanKind::DriverUpgrade {
                scope: crate::worker::DriverScope::Host,
                ..
            }
        )
    }
}

/// A checked plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// `metadata.name`.
    pub name: String,
    pub kind: PlanKind,
    /// The pool: nodes carrying every one of these labels (empty selects every node).
    pub node_selector: BTreeMap<String, String>,
    /// The operator's policy; [`Plan::new`] turns `autoUpgrade` on and gives `podDeletion` its
    /// defaults when absent (a plan always moves the node's pods).
    pub policy: UpgradePolicy,
    /// Nodes in the canary stage (default 1; 0 skips the canary).
    pub canary: usize,
    /// Nodes per batch after the canary; `None` derives it from the policy.
    pub batch_size: Option<usize>,
    /// `spec.paused`: nodes in progress finish, no new node starts.
    pub paused: bool,
}

/// A plan field that is wrong; `field` is its path in the document (`spec.batchSize`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PlanError {
    pub field: String,
    pub message: String,
}

impl Plan {
    /// Checks the fields and normalises the policy. Every problem is listed.
    pub fn new(
        name: &str,
        kind: PlanKind,
        node_selector: BTreeMap<String, String>,
        mut policy: UpgradePolicy,
        canary: usize,
        batch_size: Option<usize>,
    ) -> Result<Plan, Vec<PlanError>> {
        let mut errors: Vec<PlanError> = Vec::new();
        let mut err = |field: &str, message: String| {
            errors.push(PlanError {
                field: format!("spec.{field}"),
                message,
            })
        };
        if let Err(policy_errors) = policy.validate() {
            for e in policy_errors {
                err(&format!("policy.{}", e.field), e.message);
            }
        }
        match &kind {
            PlanKind::DriverUpgrade { version, .. } | PlanKind::KubernetesVersion { version } => {
                if let Err(e) = tessera_compat::Version::parse(version) {
                    err(&format!("{}.version", kind_field(&kind)), e.to_string());
                }
            }
            PlanKind::MigRepartition { layout } => {
                if let tessera_node::hardware::MigLayout::Profiles(p) = layout
                    && p.is_empty()
                {
                    err("migRepartition.layout", "should not be empty".to_string());
                }
            }
            PlanKind::NodeRotation => {}
        }
        if batch_size == Some(0) {
            err("batchSize", "should be greater than 0".to_string());
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        policy.auto_upgrade = true;
        if policy.pod_deletion.is_none() {
            policy.pod_deletion = Some(PodDeletionSpec::default());
        }
        Ok(Plan {
            name: name.to_string(),
            kind,
            node_selector,
            policy,
            canary,
            batch_size,
            paused: false,
        })
    }

    /// Whether `labels` put a node in the pool.
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        self.node_selector
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
    }
}

fn kind_field(kind: &PlanKind) -> &'static str {
    match kind {
        PlanKind::DriverUpgrade { .. } => "driverUpgrade",
        PlanKind::MigRepartition { .. } => "migRepartition",
        PlanKind::KubernetesVersion { .. } => "kubernetesVersion",
        PlanKind::NodeRotation => "nodeRotation",
    }
}

/// What the node's validator pod reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Validator {
    /// No validator pod for this node yet.
    #[default]
    Absent,
    Running,
    Succeeded,
    Failed,
}

/// Everything the planner and the rollout read about one node (the shell gathers it from the
/// Node, its pods and the validator pod).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeFacts {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub unschedulable: bool,
    pub ready: bool,
    /// The GPU's catalog model name (`H100-SXM5-80GB`), if the node has GPUs.
    pub gpu_model: Option<String>,
    /// The NVIDIA driver version the node runs.
    pub driver_version: Option<String>,
    /// The MIG profiles of each GPU (as the twin lays them out), `None` without MIG.
    pub mig_profiles: Option<Vec<String>>,
    /// `status.nodeInfo.kubeletVersion`.
    pub kubelet_version: String,
    /// Pods the plan moves off the node (the operator's GPU-pod filter for a driver upgrade, every
    /// non-DaemonSet pod for the other kinds — see [`PlanKind::evicts_all_pods`]).
    pub pods: Vec<GpuPod>,
    /// Pods matched by `waitForCompletion.podSelector`.
    pub workload_pods: Vec<PodPhase>,
    /// The validator for this node (for node rotation: on its replacement).
    pub validator: Validator,
    /// Node rotation: the replacement exists and is Ready.
    pub replacement_ready: bool,
}

impl NodeFacts {
    /// Whether this node is a replacement a rotation added (never part of a pool's stages).
    pub fn is_replacement(&self) -> bool {
        self.annotations.contains_key(REPLACES_ANNOTATION)
    }

    /// Whether the lab asked for this node's validation to fail.
    pub fn fails_validation(&self) -> bool {
        self.annotations
            .get(FAIL_VALIDATION_ANNOTATION)
            .is_some_and(|v| v == "true")
    }
}

/// The name a rotation gives `node`'s replacement.
pub fn replacement_name(node: &str) -> String {
    format!("{node}-r")
}

/// The MIG profiles `layout` gives one GPU of `model`, each profile checked against the model
/// with `tessera-devices`' planner; the error names the model and why.
pub fn mig_profiles_for(
    layout: &tessera_node::hardware::MigLayout,
    model: &tessera_devices::GpuModel,
) -> Result<Vec<String>, String> {
    let profiles = layout.profiles(model)?;
    let names: Vec<&str> = profiles.iter().map(String::as_str).collect();
    tessera_devices::plan_layout(model, &names).map_err(|e| e.to_string())?;
    Ok(profiles)
}

/// Whether the kind's change is in place on `node` (`target_mig`: the profiles the layout gives
/// this node's model, resolved by the caller).
pub fn applied(kind: &PlanKind, node: &NodeFacts, target_mig: Option<&[String]>) -> bool {
    match kind {
        PlanKind::DriverUpgrade { version, scope } => {
            crate::worker::driver_applied(version, *scope, node)
        }
        PlanKind::MigRepartition { .. } => {
            // The same profiles per GPU, in any order.
            let sorted = |p: &[String]| {
                let mut p = p.to_vec();
                p.sort();
                p
            };
            target_mig.is_some_and(|t| node.mig_profiles.as_deref().map(sorted) == Some(sorted(t)))
        }
        PlanKind::KubernetesVersion { version } => {
            node.kubelet_version.trim_start_matches('v') == version.trim_start_matches('v')
        }
        PlanKind::NodeRotation => node.replacement_ready,
    }
}
