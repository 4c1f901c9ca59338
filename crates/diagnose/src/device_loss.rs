//! The device-loss runbook: GPUs a node lost, found three ways — an XID the node reports
//! (`tessera_node::faults`' annotations, what the lab's `tessera fault xid` sets), a device
//! plugin's allocatable below capacity (what a real cluster shows), and DRA devices carrying a
//! `NoSchedule`/`NoExecute` taint — with the pods the lost GPU took down and NVIDIA's recovery
//! for the XID (cordon, drain, reset or reboot, validate, reopen; RMA on recurrence). Knows
//! no API client.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use tessera_devices::xid::{xid_description, xid_recovery};
use tessera_node::faults::{Faults, GpuHealth, claim_users};

use crate::read::{bound_node, cordoned, extended_requests, key, live, node_amount, node_name};
use crate::{Cluster, Report, Severity};

/// Diagnoses lost GPUs on every node, or on `target`.
pub fn device_loss(cluster: &Cluster, target: Option<&str>) -> Report {
    let mut report = Report::new("Runbook: a GPU was lost (XID, fallen off the bus, unhealthy)");
    let nodes: Vec<&Node> = cluster
        .nodes
        .iter()
        .filter(|n| target.is_none_or(|t| node_name(n) == t))
        .collect();
    if let (Some(target), true) = (target, nodes.is_empty()) {
        report.scope = format!("node {target}");
        report.found(Severity::Problem, format!("node {target}"), "not found");
        report.next("Check the name: kubectl get nodes");
        return report;
    }
    let gpus: i64 = nodes
        .iter()
        .map(|n| node_amount(n, "nvidia.com/gpu", false))
        .sum();
    let devices: usize = cluster
        .slices
        .iter()
        .filter(|s| {
            nodes
                .iter()
                .any(|n| s.spec.node_name.as_deref() == Some(node_name(n)))
        })
        .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
        .sum();
    report.scope = format!(
        "{} node(s): nvidia.com/gpu capacity {gpus} (device plugin), {devices} DRA device(s)",
        nodes.len()
    );
    for node in &nodes {
        node_losses(&mut report, cluster, node);
    }
    if report.findings.is_empty() {
        report.found(
            Severity::Ok,
            "cluster",
            format!("no lost GPU on {} node(s)", nodes.len()),
        );
    }
    report
}

fn node_losses(report: &mut Report, cluster: &Cluster, node: &Node) {
    let name = node_name(node);
    let (faults, malformed) = Faults::parse(&node.metadata.annotations.clone().unwrap_or_default());
    for problem in malformed {
        report.found(
            Severity::Info,
            format!("node {name}"),
            format!("ignored a malformed fault annotation: {problem}"),
        );
    }
    let mut lost = false;
    for (&gpu, &xid) in &faults.gpus {
        let subject = format!("GPU {gpu} of {name}");
        match faults.gpu_health(gpu) {
            GpuHealth::Down(_) => {
                lost = true;
                report.found(
                    Severity::Problem,
                    &subject,
                    format!(
                        "reported XID {xid} ({}): out of service",
                        xid_description(xid)
                    ),
                );
                let users = gpu_users(cluster, name, gpu);
                if !users.is_empty() {
                    report.found(
                        Severity::Problem,
                        &subject,
                        format!("its pods fail or must move: {}", users.join(", ")),
                    );
                }
                report.next(format!("XID {xid} on {name}: {}", xid_recovery(xid)));
            }
            GpuHealth::ApplicationError(_) => report.found(
                Severity::Info,
                &subject,
                format!(
                    "reported XID {xid} ({}), an application error: the GPU stays healthy",
                    xid_description(xid)
                ),
            ),
            GpuHealth::Healthy => {}
        }
    }
    let resources: BTreeSet<String> = node
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .into_iter()
        .flat_map(|c| c.keys())
        .filter(|r| r.starts_with("nvidia.com/"))
        .cloned()
        .collect();
    for resource in resources {
        let capacity = node_amount(node, &resource, false);
        let allocatable = node_amount(node, &resource, true);
        if allocatable < capacity {
            lost = true;
            report.found(
                Severity::Problem,
                format!("node {name}"),
                format!(
                    "{resource}: allocatable {allocatable} of capacity {capacity}: the device plugin reports {} device(s) unhealthy",
                    capacity - allocatable
                ),
            );
        }
    }
    for slice in cluster
        .slices
        .iter()
        .filter(|s| s.spec.node_name.as_deref() == Some(name))
    {
        for device in slice.spec.devices.iter().flatten() {
            for taint in device.taints.iter().flatten() {
                if taint.effect == "NoSchedule" || taint.effect == "NoExecute" {
                    lost = true;
                    report.found(
                        Severity::Problem,
                        format!("device {}/{}", slice.spec.pool.name, device.name),
                        format!(
                            "tainted {}={}:{} in ResourceSlice {}",
                            taint.key,
                            taint.value.as_deref().unwrap_or_default(),
                            taint.effect,
                            slice.metadata.name.as_deref().unwrap_or_default()
                        ),
                    );
                }
            }
        }
    }
    if !lost {
        return;
    }
    if !cordoned(node) {
        report.found(
            Severity::Problem,
            format!("node {name}"),
            "still schedulable: new GPU pods can land beside the lost device",
        );
    }
    report.next(format!("Stop new work landing: kubectl cordon {name}"));
    report.next(format!(
        "Move the running work: kubectl drain {name} --ignore-daemonsets --delete-emptydir-data (PodDisruptionBudgets are respected), or a maintenance plan (tessera maintain)"
    ));
    report.next(format!(
        "Validate the GPUs before reopening (dcgmi diag -r 2; in the lab, clear the fault: tessera fault clear {name})"
    ));
    report.next(format!(
        "Reopen: kubectl uncordon {name}; if the same GPU fails again, RMA it"
    ));
}

/// The pods using GPU `gpu` of `node`: DRA claims allocated one of its devices, or, under a
/// device plugin (which does not say which GPU a pod holds), every live pod on the node asking
/// for `nvidia.com/` resources.
fn gpu_users(cluster: &Cluster, node: &str, gpu: usize) -> Vec<String> {
    let mut users: BTreeSet<String> = claim_users(&cluster.claims, node, gpu)
        .into_iter()
        .map(|(namespace, name)| format!("{namespace}/{name}"))
        .collect();
    if users.is_empty() {
        users = cluster
            .pods
            .iter()
            .filter(|p| live(p) && bound_node(p) == Some(node))
            .filter(|p| {
                extended_requests(p)
                    .keys()
                    .any(|r| r.starts_with("nvidia.com/"))
            })
            .map(|p| key(&p.metadata))
            .collect();
    }
    users.into_iter().collect()
}
