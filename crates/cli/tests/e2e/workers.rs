//! Worker models end to end (examples/lab/workers/lab.yaml: the same DGX H100 as bare metal, as
//! a passthrough host and as a vGPU host) with the bundled kubectl 1.33 and 1.27: the GPU
//! Operator's sandbox labels on each node, NVIDIA's `gpu-test-vfiopci` example applied
//! unchanged and running on the passthrough host with a vfio device, nothing asking for
//! `nvidia.com/gpu` landing there, a vGPU request running on the vGPU host, and the maintenance
//! dry run planning a drain (no live migration) on the passthrough pool, the controller leaving
//! that plan a dry run when applied (`Refused`, nothing cordoned), and a guest driver off the
//! vGPU manager's branch refused.

use std::process::Command;

use serde_json::Value;

use crate::maintenance::maintain_plan;
use crate::support::{Cluster, outcome};

const TOPOLOGY: &str = include_str!("../../../../examples/lab/workers/lab.yaml");

fn vfio_example() -> String {
    format!(
        "{}/../../examples/lab/workers/gpu-test-vfiopci.yaml",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn labels(cluster: &Cluster, version: &str, node: &str) -> Value {
    let out = cluster.ok(
        version,
        &["get", "node", node, "-o", "jsonpath={.metadata.labels}"],
    );
    serde_json::from_str(&out).expect("labels are JSON")
}

fn pod(name: &str, resource: &str, selector: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n{selector}  containers:\n  - name: c\n    image: cuda:12\n    resources: {{limits: {{{resource}: \"1\"}}}}\n"
    )
}

#[test]
fn worker_models_offer_run_and_maintain_as_their_model_allows() {
    let cluster = Cluster::start_with_topology(TOPOLOGY, 4);
    for version in ["1.33", "1.27"] {
        // The GPU Operator's labels for each workload configuration.
        let metal = labels(&cluster, version, "metal-1");
        let pt = labels(&cluster, version, "passthrough-1");
        let vgpu = labels(&cluster, version, "vgpu-1");
        assert_eq!(
            metal["nvidia.com/gpu.workload.config"], "container",
            "{metal}"
        );
        assert_eq!(metal["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
        assert_eq!(
            pt["nvidia.com/gpu.workload.config"], "vm-passthrough",
            "{pt}"
        );
        assert_eq!(pt["nvidia.com/gpu.deploy.vfio-manager"], "true", "{pt}");
        assert_eq!(pt["nvidia.com/gpu.deploy.sandbox-device-plugin"], "true");
        assert!(
            pt.get("nvidia.com/gpu.deploy.device-plugin").is_none(),
            "{pt}"
        );
        assert!(
            pt.get("nvidia.com/gpu.product").is_none(),
            "GFD on a VM host: {pt}"
        );
        assert_eq!(vgpu["nvidia.com/gpu.workload.config"], "vm-vgpu", "{vgpu}");
        assert_eq!(vgpu["nvidia.com/gpu.deploy.vgpu-manager"], "true", "{vgpu}");
        assert_eq!(vgpu["nvidia.com/vgpu.config"], "H100-10C", "{vgpu}");

        // What each offers: whole GPUs on bare metal, vGPUs on the vGPU host, neither on the
        // passthrough host, whose GPUs are DRA vfio devices under the vfio class.
        let allocatable = |node: &str, resource: &str| {
            cluster.ok(
                version,
                &[
                    "get",
                    "node",
                    node,
                    "-o",
                    &format!(
                        "jsonpath={{.status.allocatable.{}}}",
                        resource.replace('.', "\\.")
                    ),
                ],
            )
        };
        assert_eq!(allocatable("metal-1", "nvidia.com/gpu"), "8");
        assert_eq!(allocatable("passthrough-1", "nvidia.com/gpu"), "");
        assert_eq!(allocatable("vgpu-1", "nvidia.com/gpu"), "");
        assert_eq!(allocatable("vgpu-1", "nvidia.com/NVIDIA_H100-10C"), "64");
        let class = cluster.ok(
            version,
            &[
                "get",
                "deviceclass",
                "vfio.gpu.nvidia.com",
                "-o",
                "jsonpath={.spec.selectors[0].cel.expression}",
            ],
        );
        assert_eq!(
            class,
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'"
        );
        // The twin publishes its slices after it registers its Node: wait for them.
        let devices = cluster.wait_for(
            version,
            &[
                "get",
                "resourceslices",
                "--field-selector",
                "spec.nodeName=passthrough-1",
                "-o",
                "jsonpath={.items[*].spec.devices[*].name}",
            ],
            |out| !out.is_empty(),
        );
        assert_eq!(
            devices,
            (0..8)
                .map(|i| format!("gpu-vfio-{i}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }

    // NVIDIA's vfio example, unchanged: its pod lands on the passthrough host with a vfio GPU.
    let applied = cluster.ok("1.33", &["apply", "-f", &vfio_example()]);
    assert!(applied.contains("pod/pod1 created"), "{applied}");
    assert_eq!(
        cluster.node_when_running("1.33", Some("gpu-test-vfio"), "pod1"),
        "passthrough-1"
    );
    for version in ["1.33", "1.27"] {
        let logs = cluster.ok(version, &["logs", "-n", "gpu-test-vfio", "pod1"]);
        assert!(
            logs.lines()
                .any(|l| l.starts_with("CDI devices: k8s.gpu.nvidia.com/claim=")
                    && l.contains("-gpu-vfio-")),
            "{version}: {logs}"
        );
        assert!(
            logs.contains("NVIDIA_VISIBLE_DEVICES=void\n")
                && logs
                    .lines()
                    .any(|l| l.starts_with("Device nodes: /dev/vfio/")),
            "{version}: {logs}"
        );
        let allocated = cluster.ok(
            version,
            &[
                "get",
                "resourceclaims",
                "-n",
                "gpu-test-vfio",
                "-o",
                "jsonpath={.items[0].status.allocation.devices.results[0].device}",
            ],
        );
        assert!(allocated.starts_with("gpu-vfio-"), "{version}: {allocated}");
    }

    for version in ["1.33", "1.27"] {
        let v = version.replace('.', "");
        // Asking for nvidia.com/gpu lands on bare metal; pinned to the passthrough pool it
        // cannot be placed.
        let whole = format!("gpu-{v}");
        cluster.ok_stdin(
            version,
            &["apply", "-f", "-"],
            &pod(&whole, "nvidia.com/gpu", ""),
        );
        assert_eq!(cluster.node_when_running(version, None, &whole), "metal-1");
        let pinned = format!("pinned-{v}");
        cluster.ok_stdin(
            version,
            &["apply", "-f", "-"],
            &pod(
                &pinned,
                "nvidia.com/gpu",
                "  nodeSelector: {tessera.dev/pool: passthrough}\n",
            ),
        );
        let events = cluster.wait_for(
            version,
            &[
                "get",
                "events",
                "--field-selector",
                &format!("involvedObject.name={pinned},reason=FailedScheduling"),
                "-o",
                "jsonpath={.items[*].message}",
            ],
            |out| !out.is_empty(),
        );
        // The node has no nvidia.com/gpu, and its vfio devices are not of the gpu.nvidia.com
        // class that serves nvidia.com/gpu through DRA.
        assert!(
            events.contains("0/4 nodes are available: 1 cannot allocate all claims, 3 node(s) didn't match Pod's node affinity/selector."),
            "{version}: {events}"
        );
        let phase = cluster.ok(
            version,
            &["get", "pod", &pinned, "-o", "jsonpath={.status.phase}"],
        );
        assert_eq!(phase, "Pending");

        // A vGPU partition runs on the vGPU host.
        let partition = format!("vgpu-{v}");
        cluster.ok_stdin(
            version,
            &["apply", "-f", "-"],
            &pod(&partition, "nvidia.com/NVIDIA_H100-10C", ""),
        );
        assert_eq!(
            cluster.node_when_running(version, None, &partition),
            "vgpu-1"
        );
    }

    // Maintenance: a host-side update of the passthrough pool drains (no live migration).
    let (ok, out, err) = maintain_plan(
        &cluster,
        "apiVersion: tessera.dev/v1alpha1\nkind: MaintenancePlan\nmetadata: {name: host-pt}\nspec:\n  nodeSelector: {tessera.dev/pool: passthrough}\n  driverUpgrade: {version: 575.57.08, scope: host}\n  policy: {maxParallelUpgrades: 1, maxUnavailable: 1}\n",
    );
    assert!(ok, "{out}{err}");
    assert_eq!(
        out,
        "MaintenancePlan host-pt (driver-upgrade)\n\
         1 node(s) to maintain in 1 stage(s), batches of 1, maxUnavailable 1\n\
         stage canary: passthrough-1\n\
         vm-passthrough (passthrough-1): cordon → drain → update the host to 575.57.08, restart the VMs → validate → uncordon\n  \
         no live migration: a GPU bound to vfio-pci cannot move with its VM, so its VMs are drained\n\
         pre-flight: passed\n"
    );
    // Applied, the controller leaves it a dry run: no agent here drives a hypervisor.
    let plan = format!(
        "{}/../../examples/lab/workers/host-passthrough.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let applied = outcome(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["maintain", "apply", "--kubeconfig"])
            .arg(cluster.kubeconfig())
            .args(["-f", &plan])
            .output()
            .expect("run tessera maintain apply"),
    );
    assert!(applied.0, "{applied:?}");
    for version in ["1.33", "1.27"] {
        let status = cluster.wait_for(
            version,
            &[
                "get",
                "maintenanceplan",
                "host-passthrough",
                "-o",
                "jsonpath={.status.phase}: {.status.reason}",
            ],
            |out| out.starts_with("Refused"),
        );
        assert_eq!(
            status,
            "Refused: driver upgrades on VM hosts are planned only (tessera maintain plan): no node agent here drives the hypervisor of passthrough-1"
        );
    }
    let cordoned = cluster.ok(
        "1.33",
        &[
            "get",
            "node",
            "passthrough-1",
            "-o",
            "jsonpath={.spec.unschedulable}",
        ],
    );
    assert_eq!(cordoned, "", "a refused plan cordons nothing");

    // A guest driver off the vGPU manager's branch is refused with the reason.
    let (ok, out, _) = maintain_plan(
        &cluster,
        "apiVersion: tessera.dev/v1alpha1\nkind: MaintenancePlan\nmetadata: {name: guest-vgpu}\nspec:\n  nodeSelector: {tessera.dev/pool: vgpu}\n  driverUpgrade: {version: 580.65.06, scope: guest}\n",
    );
    assert!(!ok, "{out}");
    assert!(
        out.contains(
            "node vgpu-1: guest driver 580.65.06 (branch 580) is not compatible with the vGPU manager 570.172.08 (branch 570): guest drivers must match the host manager's branch"
        ),
        "{out}"
    );
}
