//! Which maintenance each worker model allows, and how: a bare-metal node's driver is the
//! host's own (the operator's GPU-pod eviction, as today); a passthrough host's GPUs are bound
//! to vfio-pci and handed whole to VMs, which cannot live-migrate a passthrough GPU, so every
//! change drains the node (its VMs stopped and started again), a host-side update restarts the
//! VMs, and a guest driver — a full driver inside the VM, as a bare-metal node's — has no
//! host to match; a vGPU host's vGPU manager is the host driver, its update needs every guest
//! on the host stopped at once, and guest drivers must be on the manager's branch (checked
//! both ways: a manager update that would strand the guests' branch, a guest driver off the
//! manager's branch). MIG repartitioning is refused on VM hosts (their GPUs are whole GPUs for
//! VMs or time-sliced vGPUs).
//!
//! Reads the model from the node's `nvidia.com/gpu.workload.config` label (the GPU Operator's;
//! absent or `container` is bare metal) and the vGPU manager's version from
//! `nvidia.com/vgpu.host-driver-version`. Pure; knows no API object.

use tessera_node::worker_model::{HOST_DRIVER_LABEL, Machine, WORKLOAD_CONFIG_LABEL};

use crate::plan::{NodeFacts, PlanKind};

/// Which driver a driver upgrade changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DriverScope {
    /// The node's own driver: bare metal's NVIDIA driver, the host side of a passthrough host,
    /// the vGPU manager of a vGPU host.
    #[default]
    Host,
    /// The driver inside the VMs (passthrough or vGPU guests).
    Guest,
}

impl DriverScope {
    /// The spec's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DriverScope::Host => "host",
            DriverScope::Guest => "guest",
        }
    }
}

/// How the node's pods leave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evacuation {
    /// The operator's pod-deletion filter: the pods using GPUs.
    GpuPods,
    /// Every pod drained, one eviction at a time under the budgets.
    Drain,
    /// Every guest on the host stopped at once (evicted together).
    StopGuests,
}

/// What a plan does on one node of a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerPlan {
    pub machine: Machine,
    pub evacuation: Evacuation,
    /// The node's steps, in order.
    pub steps: Vec<String>,
    /// Why it goes this way (no live migration, guest compatibility), if anything needs saying.
    pub note: Option<String>,
}

/// The worker model a node's labels declare.
pub fn machine_of(node: &NodeFacts) -> Machine {
    machine_of_labels(&node.labels)
}

/// The worker model a node's labels declare.
pub fn machine_of_labels(labels: &std::collections::BTreeMap<String, String>) -> Machine {
    match labels.get(WORKLOAD_CONFIG_LABEL).map(String::as_str) {
        Some("vm-passthrough") => Machine::VmPassthrough,
        Some("vm-vgpu") => Machine::VmVgpu,
        _ => Machine::BareMetal,
    }
}

/// A driver version's branch (its major number).
fn branch(version: &str) -> &str {
    version.split('.').next().unwrap_or(version)
}

const NO_LIVE_MIGRATION: &str =
    "no live migration: a GPU bound to vfio-pci cannot move with its VM, so its VMs are drained";

/// How `kind` runs on `node`, or why its model refuses it.
pub fn worker_plan(kind: &PlanKind, node: &NodeFacts) -> Result<WorkerPlan, String> {
    let machine = machine_of(node);
    let model = machine.as_str();
    let change = match kind {
        PlanKind::DriverUpgrade { version, scope } => match (machine, scope) {
            (Machine::BareMetal, DriverScope::Guest) => {
                return Err(
                    "is bare metal: its pods use the host's driver and there is no guest driver (leave scope out)"
                        .to_string(),
                );
            }
            (Machine::BareMetal, DriverScope::Host) => format!("install driver {version}"),
            (Machine::VmPassthrough, DriverScope::Host) => {
                format!("update the host to {version}, restart the VMs")
            }
            (Machine::VmPassthrough, DriverScope::Guest) => {
                format!("restart the VMs with guest driver {version}")
            }
            (Machine::VmVgpu, _) => {
                let Some(manager) = node.labels.get(HOST_DRIVER_LABEL) else {
                    return Err(format!(
                        "is a vGPU host without a {HOST_DRIVER_LABEL} label: the guests' branch is unknown"
                    ));
                };
                if branch(version) != branch(manager) {
                    return Err(match scope {
                        DriverScope::Host => format!(
                            "vGPU manager {version} (branch {}) would strand its guests, whose drivers are on the running manager's branch {} (guest drivers must match the host manager's branch)",
                            branch(version),
                            branch(manager)
                        ),
                        DriverScope::Guest => format!(
                            "guest driver {version} (branch {}) is not compatible with the vGPU manager {manager} (branch {}): guest drivers must match the host manager's branch",
                            branch(version),
                            branch(manager)
                        ),
                    });
                }
                match scope {
                    DriverScope::Host => {
                        return Ok(WorkerPlan {
                            machine,
                            evacuation: Evacuation::StopGuests,
                            steps: vec![
                                "cordon".into(),
                                "stop every guest on the host".into(),
                                format!("update the vGPU manager to {version}"),
                                "start the guests".into(),
                                "validate".into(),
                                "uncordon".into(),
                            ],
                            note: Some(format!(
                                "a vGPU manager update needs every guest on the host stopped; guests stay on branch {}",
                                branch(manager)
                            )),
                        });
                    }
                    DriverScope::Guest => format!("restart the guests with driver {version}"),
                }
            }
        },
        PlanKind::MigRepartition { .. } if machine.is_vm() => {
            return Err(format!(
                "is a {model} host: {}; MIG layouts apply to bare-metal nodes",
                if machine == Machine::VmPassthrough {
                    "its GPUs are bound to vfio-pci and handed whole to VMs"
                } else {
                    "its GPUs are split into time-sliced vGPUs"
                }
            ));
        }
        PlanKind::MigRepartition { .. } => "repartition MIG".into(),
        PlanKind::KubernetesVersion { version } => format!("upgrade the kubelet to {version}"),
        PlanKind::NodeRotation => "replace the node".into(),
    };
    let evacuation = if machine == Machine::BareMetal && !kind.evicts_all_pods() {
        Evacuation::GpuPods
    } else {
        Evacuation::Drain
    };
    let out = match evacuation {
        Evacuation::GpuPods => "evict GPU pods",
        _ => "drain",
    };
    Ok(WorkerPlan {
        machine,
        evacuation,
        steps: vec![
            "cordon".into(),
            out.into(),
            change,
            "validate".into(),
            "uncordon".into(),
        ],
        note: (machine == Machine::VmPassthrough).then(|| NO_LIVE_MIGRATION.to_string()),
    })
}

/// Why a controller may not carry out an accepted `rollout` of `kind`: a driver upgrade on VM
/// hosts (a host side, a vGPU manager, guests' drivers) needs a hypervisor no node agent here
/// drives, so it stays a dry run (`tessera maintain plan`). `None` when it may run.
pub fn dry_run_only(kind: &PlanKind, rollout: &crate::preflight::Rollout) -> Option<String> {
    if !matches!(kind, PlanKind::DriverUpgrade { .. }) {
        return None;
    }
    let hosts: Vec<&str> = rollout
        .models
        .iter()
        .filter(|m| m.plan.machine.is_vm())
        .flat_map(|m| m.nodes.iter().map(String::as_str))
        .collect();
    (!hosts.is_empty()).then(|| {
        format!(
            "driver upgrades on VM hosts are planned only (tessera maintain plan): no node agent here drives the hypervisor of {}",
            hosts.join(", ")
        )
    })
}

/// Whether every pod of `node` must leave it for `kind` (VM hosts stop their VMs for any
/// change; a bare-metal driver upgrade moves only the GPU pods).
pub fn evicts_all_pods(kind: &PlanKind, node: &NodeFacts) -> bool {
    kind.evicts_all_pods() || machine_of(node).is_vm()
}

/// Whether a driver upgrade is in place on `node`: bare metal's driver, a vGPU host's manager;
/// a passthrough host's host side and guests' drivers are not reported, so never.
pub fn driver_applied(version: &str, scope: DriverScope, node: &NodeFacts) -> bool {
    match (machine_of(node), scope) {
        (Machine::BareMetal, DriverScope::Host) => node.driver_version.as_deref() == Some(version),
        (Machine::VmVgpu, DriverScope::Host) => {
            node.labels.get(HOST_DRIVER_LABEL).map(String::as_str) == Some(version)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(machine: Option<&str>, manager: Option<&str>) -> NodeFacts {
        let mut n = NodeFacts {
            name: "n-1".into(),
            driver_version: Some("570.172.08".into()),
            ..NodeFacts::default()
        };
        if let Some(m) = machine {
            n.labels.insert(WORKLOAD_CONFIG_LABEL.into(), m.into());
        }
        if let Some(v) = manager {
            n.labels.insert(HOST_DRIVER_LABEL.into(), v.into());
        }
        n
    }

    fn driver(version: &str, scope: DriverScope) -> PlanKind {
        PlanKind::DriverUpgrade {
            version: version.into(),
            scope,
        }
    }

    #[test]
    fn each_model_plans_or_refuses_with_its_reason() {
        use DriverScope::{Guest, Host};
        let metal = node(None, None);
        let container = node(Some("container"), None);
        let pt = node(Some("vm-passthrough"), None);
        let vgpu = node(Some("vm-vgpu"), Some("570.172.08"));
        let bare_vgpu = node(Some("vm-vgpu"), None);
        let mig = PlanKind::MigRepartition {
            layout: tessera_node::hardware::MigLayout::Named("all-1g.10gb".into()),
        };
        // (kind, node, evacuation and steps, or the refusal's start)
        type Row<'a> = (
            PlanKind,
            &'a NodeFacts,
            Result<(Evacuation, &'a str), &'a str>,
        );
        let table: Vec<Row> = vec![
            (
                driver("575.57.08", Host),
                &metal,
                Ok((
                    Evacuation::GpuPods,
                    "cordon → evict GPU pods → install driver 575.57.08 → validate → uncordon",
                )),
            ),
            (
                driver("575.57.08", Host),
                &container,
                Ok((
                    Evacuation::GpuPods,
                    "cordon → evict GPU pods → install driver 575.57.08 → validate → uncordon",
                )),
            ),
            (driver("575.57.08", Guest), &metal, Err("is bare metal")),
            (
                driver("575.57.08", Host),
                &pt,
                Ok((
                    Evacuation::Drain,
                    "cordon → drain → update the host to 575.57.08, restart the VMs → validate → uncordon",
                )),
            ),
            (
                driver("580.65.06", Guest),
                &pt,
                Ok((
                    Evacuation::Drain,
                    "cordon → drain → restart the VMs with guest driver 580.65.06 → validate → uncordon",
                )),
            ),
            (
                PlanKind::NodeRotation,
                &pt,
                Ok((
                    Evacuation::Drain,
                    "cordon → drain → replace the node → validate → uncordon",
                )),
            ),
            (
                driver("570.195.03", Host),
                &vgpu,
                Ok((
                    Evacuation::StopGuests,
                    "cordon → stop every guest on the host → update the vGPU manager to 570.195.03 → start the guests → validate → uncordon",
                )),
            ),
            (
                driver("580.65.06", Host),
                &vgpu,
                Err("vGPU manager 580.65.06 (branch 580) would strand its guests"),
            ),
            (
                driver("570.195.03", Guest),
                &vgpu,
                Ok((
                    Evacuation::Drain,
                    "cordon → drain → restart the guests with driver 570.195.03 → validate → uncordon",
                )),
            ),
            (
                driver("580.65.06", Guest),
                &vgpu,
                Err(
                    "guest driver 580.65.06 (branch 580) is not compatible with the vGPU manager 570.172.08 (branch 570)",
                ),
            ),
            (
                driver("570.195.03", Host),
                &bare_vgpu,
                Err("is a vGPU host without"),
            ),
            (
                mig.clone(),
                &pt,
                Err("is a vm-passthrough host: its GPUs are bound to vfio-pci"),
            ),
            (
                mig.clone(),
                &vgpu,
                Err("is a vm-vgpu host: its GPUs are split"),
            ),
            (
                mig,
                &metal,
                Ok((
                    Evacuation::Drain,
                    "cordon → drain → repartition MIG → validate → uncordon",
                )),
            ),
            (
                PlanKind::KubernetesVersion {
                    version: "1.33.5".into(),
                },
                &vgpu,
                Ok((
                    Evacuation::Drain,
                    "cordon → drain → upgrade the kubelet to 1.33.5 → validate → uncordon",
                )),
            ),
        ];
        for (kind, n, want) in table {
            let got = worker_plan(&kind, n).map(|p| (p.evacuation, p.steps.join(" → ")));
            match (got, want) {
                (Ok((evacuation, steps)), Ok((want_evacuation, want_steps))) => {
                    assert_eq!(
                        (evacuation, steps.as_str()),
                        (want_evacuation, want_steps),
                        "{kind:?} {:?}",
                        n.labels
                    );
                }
                (Err(e), Err(start)) => assert!(e.starts_with(start), "{kind:?}: {e}"),
                (got, want) => panic!("{kind:?} {:?}: got {got:?}, want {want:?}", n.labels),
            }
        }
    }

    #[test]
    fn passthrough_says_why_it_drains_and_vm_hosts_move_every_pod() {
        let pt = node(Some("vm-passthrough"), None);
        let plan = worker_plan(&driver("575.57.08", DriverScope::Host), &pt).expect("plan");
        assert_eq!(plan.note.as_deref(), Some(NO_LIVE_MIGRATION));
        let table = [
            (node(None, None), false),
            (pt, true),
            (node(Some("vm-vgpu"), Some("570.172.08")), true),
        ];
        for (n, all) in table {
            assert_eq!(
                evicts_all_pods(&driver("575.57.08", DriverScope::Host), &n),
                all,
                "{:?}",
                n.labels
            );
            assert!(evicts_all_pods(&PlanKind::NodeRotation, &n));
        }
    }

    #[test]
    fn applied_reads_the_driver_each_model_reports() {
        use DriverScope::{Guest, Host};
        let table = [
            (node(None, None), "570.172.08", Host, true),
            (node(None, None), "575.57.08", Host, false),
            (node(None, None), "570.172.08", Guest, false),
            (
                node(Some("vm-vgpu"), Some("570.195.03")),
                "570.195.03",
                Host,
                true,
            ),
            (
                node(Some("vm-vgpu"), Some("570.172.08")),
                "570.195.03",
                Host,
                false,
            ),
            (
                node(Some("vm-passthrough"), None),
                "570.172.08",
                Host,
                false,
            ),
        ];
        for (n, version, scope, want) in table {
            assert_eq!(
                driver_applied(version, scope, &n),
                want,
                "{version} {scope:?} {:?}",
                n.labels
            );
        }
    }

    #[test]
    fn driver_upgrades_on_vm_hosts_stay_dry_runs() {
        let rollout = |nodes: &[&NodeFacts], kind: &PlanKind| {
            let mut models: Vec<crate::preflight::ModelPlan> = Vec::new();
            for n in nodes {
                models.push(crate::preflight::ModelPlan {
                    nodes: vec![n.name.clone()],
                    plan: worker_plan(kind, n).expect("plans"),
                });
            }
            crate::preflight::Rollout {
                stages: Vec::new(),
                batch_size: 1,
                max_unavailable: 1,
                already_applied: Vec::new(),
                models,
            }
        };
        let metal = node(None, None);
        let mut pt = node(Some("vm-passthrough"), None);
        pt.name = "pt-1".into();
        let host = driver("575.57.08", DriverScope::Host);
        let table = [
            (host.clone(), vec![&metal], None),
            (
                host.clone(),
                vec![&metal, &pt],
                Some(
                    "driver upgrades on VM hosts are planned only (tessera maintain plan): no node agent here drives the hypervisor of pt-1",
                ),
            ),
            (PlanKind::NodeRotation, vec![&pt], None),
        ];
        for (kind, nodes, want) in table {
            assert_eq!(
                dry_run_only(&kind, &rollout(&nodes, &kind)).as_deref(),
                want,
                "{kind:?}"
            );
        }
    }
}
