//! Accelerator nodes on the default lab topology, as kubectl sees them: GPU Feature Discovery
//! labels, device-plugin extended resources, and the DRA ResourceSlices and DeviceClasses
//! NVIDIA's DRA driver would publish.

use crate::support::Cluster;

#[test]
fn lab_gpu_nodes_advertise_devices_like_the_nvidia_stack() {
    let cluster = Cluster::start();
    let v = "1.33";
    let products = cluster.wait_for(
        v,
        &[
            "get",
            "nodes",
            "-l",
            "nvidia.com/gpu.present=true",
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name}={.metadata.labels.nvidia\.com/gpu\.product}/{.metadata.labels.tessera\.dev/rack}{"\n"}{end}"#,
        ],
        |out| out.lines().count() == 5,
    );
    assert_eq!(
        products.trim(),
        "h100-1=NVIDIA-H100-80GB-HBM3/r1\nh100-2=NVIDIA-H100-80GB-HBM3/r2\nh200-1=NVIDIA-H200/r3\nh200-2=NVIDIA-H200/r3\nl40s-1=NVIDIA-L40S-SHARED/"
    );
    let shared = cluster.wait_for(
        v,
        &[
            "get",
            "node",
            "l40s-1",
            "-o",
            r#"jsonpath={.status.allocatable.nvidia\.com/gpu}"#,
        ],
        |out| !out.is_empty(),
    );
    assert_eq!(shared, "16", "4 L40S x 4 time-slicing replicas");

    let slices = cluster.wait_for(
        v,
        &[
            "get",
            "resourceslices",
            "-o",
            r#"jsonpath={range .items[*]}{.spec.nodeName}:{.spec.driver}:{.spec.devices[0].name}{"\n"}{end}"#,
        ],
        |out| out.lines().count() == 4,
    );
    assert_eq!(
        slices.trim(),
        "h100-1:gpu.nvidia.com:gpu-0\nh100-2:gpu.nvidia.com:gpu-0\nh200-1:gpu.nvidia.com:gpu-0-mig-1g18gb-0\nh200-2:gpu.nvidia.com:gpu-0-mig-1g18gb-0"
    );
    let classes = cluster.ok(v, &["get", "deviceclasses", "-o", "name"]);
    assert_eq!(
        classes.trim(),
        "deviceclass.resource.k8s.io/gpu.nvidia.com\ndeviceclass.resource.k8s.io/mig.nvidia.com"
    );
}

#[test]
fn device_plugin_gpus_are_admitted_with_topology_manager_semantics() {
    let topology = "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: dgx\n  count: 1\n  server: dgx-h100\n  devices: {exposure: device-plugin}\n  kubelet: {topologyManagerPolicy: single-numa-node}\n";
    let cluster = Cluster::start_with_topology(topology, 1);
    let v = "1.33";
    let pod = |name: &str, gpus: u32| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: dgx-1\n  containers:\n  - name: train\n    image: trainer:1\n    resources: {{limits: {{nvidia.com/gpu: \"{gpus}\"}}}}\n"
        )
    };
    let phase = |name: &str, want: &'static str| {
        cluster.wait_for(
            v,
            &["get", "pod", name, "-o", "jsonpath={.status.phase}"],
            move |out| out == want,
        );
    };
    // Three GPUs on each NUMA node are taken; two more fit on neither alone.
    for name in ["numa0", "numa1"] {
        cluster.ok_stdin(v, &["apply", "-f", "-"], &pod(name, 3));
        phase(name, "Running");
    }
    let logs = cluster.ok(v, &["logs", "numa0"]);
    let visible = logs
        .lines()
        .find_map(|l| l.strip_prefix("NVIDIA_VISIBLE_DEVICES="))
        .unwrap_or_else(|| panic!("no device env in {logs}"));
    assert_eq!(
        visible.split(',').filter(|u| u.starts_with("GPU-")).count(),
        3
    );
    assert!(logs.contains("CDI devices: nvidia.com/gpu=GPU-"), "{logs}");

    cluster.ok_stdin(v, &["apply", "-f", "-"], &pod("split", 2));
    phase("split", "Failed");
    let status = cluster.ok(
        v,
        &[
            "get",
            "pod",
            "split",
            "-o",
            "jsonpath={.status.reason}: {.status.message}",
        ],
    );
    assert_eq!(
        status,
        "TopologyAffinityError: Pod was rejected: Resources cannot be allocated with Topology locality"
    );
    // Freeing a NUMA node's GPUs lets the same request in.
    cluster.ok(v, &["delete", "pod", "numa1", "--wait=true"]);
    cluster.ok_stdin(v, &["apply", "-f", "-"], &pod("fits", 2));
    phase("fits", "Running");
}

#[test]
fn a_new_gpu_node_is_validated_before_it_opens() {
    let topology = "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: new\n  count: 1\n  server: hgx-h200\n  onboarding: true\n  devices: {exposure: dra}\n";
    let cluster = Cluster::start_with_topology(topology, 1);
    let v = "1.33";
    let state = cluster.wait_for(
        v,
        &[
            "get",
            "node",
            "new-1",
            "-o",
            r#"jsonpath={.metadata.labels.node\.tessera\.dev/onboarding} {.spec.taints}"#,
        ],
        |out| out.starts_with("complete"),
    );
    assert_eq!(state.trim(), "complete", "the onboarding taint is gone");
    let events = cluster.wait_for(
        v,
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=new-1",
            "-o",
            "jsonpath={.items[*].reason}: {.items[*].message}",
        ],
        |out| out.contains("NodeOnboarded"),
    );
    assert!(
        events.contains(
            "validated 8 GPU(s) (H200-SXM5-141GB): labels, 0 extended resource(s), 8 DRA device(s)"
        ),
        "{events}"
    );
}

#[test]
fn shared_and_mig_device_plugin_pods_get_devices_that_survive_a_restart() {
    let topology = "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: l40s\n  count: 1\n  server: pcie-l40s-4\n  devices: {exposure: device-plugin, sharing: {timeSlicing: {replicas: 4}}}\n- name: mig\n  count: 1\n  server: hgx-h200\n  devices: {exposure: device-plugin, sharing: {mig: {layout: all-balanced}}}\n";
    let mut cluster = Cluster::start_with_topology(topology, 2);
    let path = cluster
        .dir
        .path()
        .join("topology.yaml")
        .to_string_lossy()
        .into_owned();
    let v = "1.33";
    let pod = |name: &str, node: &str, limits: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {node}\n  containers:\n  - name: c\n    image: cuda:12\n    resources: {{limits: {{{limits}}}}}\n"
        )
    };
    let phase = |cluster: &Cluster, name: &str, want: &'static str| {
        cluster.wait_for(
            v,
            &["get", "pod", name, "-o", "jsonpath={.status.phase}"],
            move |out| out == want,
        );
    };
    cluster.ok_stdin(
        v,
        &["apply", "-f", "-"],
        &pod("shared", "l40s-1", "nvidia.com/gpu: 2"),
    );
    cluster.ok_stdin(
        v,
        &["apply", "-f", "-"],
        &pod(
            "slices",
            "mig-1",
            "nvidia.com/mig-1g.18gb: 2, nvidia.com/mig-3g.71gb: 1",
        ),
    );
    phase(&cluster, "shared", "Running");
    phase(&cluster, "slices", "Running");
    // Time-slicing replicas: NVIDIA's `<uuid>::<n>` IDs, spread over two GPUs.
    let logs = cluster.ok(v, &["logs", "shared"]);
    let cdi = logs
        .lines()
        .find_map(|l| l.strip_prefix("CDI devices: "))
        .unwrap_or_else(|| panic!("{logs}"));
    assert_eq!(
        cdi.split(' ').filter(|d| d.ends_with("::0")).count(),
        2,
        "{cdi}"
    );
    let visible = logs
        .lines()
        .find_map(|l| l.strip_prefix("NVIDIA_VISIBLE_DEVICES="))
        .unwrap_or_default();
    assert_eq!(
        visible.split(',').count(),
        2,
        "two distinct GPUs: {visible}"
    );
    // MIG devices of the requested profiles.
    let logs = cluster.ok(v, &["logs", "slices"]);
    let visible = logs
        .lines()
        .find_map(|l| l.strip_prefix("NVIDIA_VISIBLE_DEVICES="))
        .unwrap_or_else(|| panic!("{logs}"));
    assert_eq!(
        visible.split(',').filter(|d| d.starts_with("MIG-")).count(),
        3,
        "{visible}"
    );

    // After a restart the held devices are still held: 14 replicas are left, not 16.
    cluster.stop();
    cluster.launch(&["--topology", &path]);
    cluster.ok_stdin(
        v,
        &["apply", "-f", "-"],
        &pod("greedy", "l40s-1", "nvidia.com/gpu: 15"),
    );
    phase(&cluster, "greedy", "Failed");
    let status = cluster.ok(
        v,
        &[
            "get",
            "pod",
            "greedy",
            "-o",
            "jsonpath={.status.reason}: {.status.message}",
        ],
    );
    assert!(
        status.starts_with("UnexpectedAdmissionError: Pod was rejected: Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 15, Available: 14"),
        "{status}"
    );
    cluster.ok_stdin(
        v,
        &["apply", "-f", "-"],
        &pod("fits", "l40s-1", "nvidia.com/gpu: 14"),
    );
    phase(&cluster, "fits", "Running");
}
