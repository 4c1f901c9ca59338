//! DRA devices in Kueue quotas on `tessera up --queue-config`, driven by kubectl 1.33: a
//! Configuration whose `resources.deviceClassMappings` counts the `gpu.nvidia.com`
//! DeviceClass as `nvidia.com/gpu`, a ClusterQueue with 8 of them, and Jobs whose two pods
//! each claim 4 GPUs through a ResourceClaimTemplate: the first is admitted with its
//! Workload using 8 `nvidia.com/gpu`, the next waits with Kueue's message, and a Job whose
//! template names an unmapped DeviceClass is held with Kueue's Misconfigured condition. On a
//! node with dynamic MIG, a mapping with a counter source counts MIG partitions in the memory
//! slices Tessera's DRA driver publishes as counters.

use crate::support::Cluster;

const V: &str = "1.33";

const CONFIG: &str = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nresources:\n  deviceClassMappings:\n  - name: nvidia.com/gpu\n    deviceClassNames: [gpu.nvidia.com]\n";

const SETUP: &str = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: default-flavor\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: gpus\nspec:\n  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: default-flavor\n      resources:\n      - {name: nvidia.com/gpu, nominalQuota: 8}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  namespace: default\n  name: gpus\nspec:\n  clusterQueue: gpus\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: four-gpus\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpus\n        exactly: {deviceClassName: gpu.nvidia.com, count: 4}\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: one-mig\nspec:\n  spec:\n    devices:\n      requests:\n      - name: mig\n        exactly: {deviceClassName: mig.nvidia.com}\n";

/// A Job of two pods in LocalQueue `gpus`, each claiming through `template`.
fn job(name: &str, template: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  labels: {{kueue.x-k8s.io/queue-name: gpus}}\nspec:\n  parallelism: 2\n  completions: 2\n  template:\n    metadata:\n      annotations: {{sim.tessera.dev/duration: 1h}}\n    spec:\n      restartPolicy: Never\n      resourceClaims:\n      - {{name: gpus, resourceClaimTemplateName: {template}}}\n      containers:\n      - name: train\n        image: trainer:1\n        resources: {{claims: [{{name: gpus}}]}}\n"
    )
}

/// The jsonpath of a field of the status (below `.status`) of `job`'s Workload.
fn workload_path(job: &str, field: &str) -> String {
    format!(
        "jsonpath={{range .items[?(@.metadata.ownerReferences[0].name==\"{job}\")]}}{{.status{field}}}{{end}}"
    )
}

/// A field of the status of `job`'s Workload.
fn workload_field(cluster: &Cluster, job: &str, field: &str) -> String {
    cluster.ok(V, &["get", "workloads", "-o", &workload_path(job, field)])
}

const QUOTA_RESERVED: &str = ".conditions[?(@.type==\"QuotaReserved\")].message";

/// Waits until `job`'s Workload's `QuotaReserved` message is `message`.
fn wait_for_message(cluster: &Cluster, job: &str, message: &str) {
    let path = workload_path(job, QUOTA_RESERVED);
    cluster.wait_for(V, &["get", "workloads", "-o", &path], |s| s == message);
}

fn wait_until_running(cluster: &Cluster, job: &str) {
    let args = ["get", "job", job, "-o", "jsonpath={.spec.suspend}"];
    cluster.wait_for(V, &args, |s| s == "false");
}

#[test]
fn claimed_gpus_count_against_the_mapped_quota() {
    let configs = tempfile::tempdir().expect("tempdir");
    let config = configs.path().join("kueue-config.yaml");
    std::fs::write(&config, CONFIG).expect("write the configuration");
    let cluster = Cluster::start_with_args(&["--queue-config", &config.to_string_lossy()]);
    cluster.ok_stdin(V, &["apply", "-f", "-"], SETUP);

    cluster.ok_stdin(V, &["create", "-f", "-"], &job("train-a", "four-gpus"));
    wait_until_running(&cluster, "train-a");
    let usage = workload_field(
        &cluster,
        "train-a",
        ".admission.podSetAssignments[0].resourceUsage",
    );
    assert_eq!(usage, r#"{"nvidia.com/gpu":"8"}"#);

    // The quota is used up: the next one waits, as with GPUs from a device plugin.
    cluster.ok_stdin(V, &["create", "-f", "-"], &job("train-b", "four-gpus"));
    let waiting = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 8 more needed";
    wait_for_message(&cluster, "train-b", waiting);
    assert_eq!(
        cluster.ok(
            V,
            &["get", "job", "train-b", "-o", "jsonpath={.spec.suspend}"]
        ),
        "true"
    );
    let requests = workload_field(&cluster, "train-b", ".resourceRequests[0].resources");
    assert_eq!(requests, r#"{"nvidia.com/gpu":"8"}"#);

    // A DeviceClass no mapping names: Kueue's Misconfigured and Inadmissible conditions.
    cluster.ok_stdin(V, &["create", "-f", "-"], &job("mig-job", "one-mig"));
    let unmapped = "spec.podSets[0].template.spec.resourceClaims[0].resourceClaimTemplateName: Not found: \"DeviceClass mig.nvidia.com is not mapped in DRA configuration for podset main\"";
    wait_for_message(&cluster, "mig-job", unmapped);
    let reason = workload_field(
        &cluster,
        "mig-job",
        ".conditions[?(@.type==\"QuotaReserved\")].reason",
    );
    assert_eq!(reason, "Misconfigured");
    let requeued = |field: &str| {
        let path = format!(".conditions[?(@.type==\"Requeued\")].{field}");
        workload_field(&cluster, "mig-job", &path)
    };
    assert_eq!(
        (requeued("status"), requeued("reason")),
        ("False".into(), "Inadmissible".into())
    );
    // What was admitted stays admitted.
    assert_eq!(
        cluster.ok(
            V,
            &["get", "job", "train-a", "-o", "jsonpath={.spec.suspend}"]
        ),
        "false"
    );
}

const MIG_TOPOLOGY: &str = "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: cpu\n  count: 7\n  capacity: {cpu: \"16\", memory: 64Gi, pods: \"110\", ephemeral-storage: 200Gi}\n- name: h100\n  count: 1\n  server: dgx-h100\n  capacity: {ephemeral-storage: 2Ti}\n  devices: {exposure: dra, sharing: {mig: {layout: dynamic}}}\n";

const MIG_CONFIG: &str = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nresources:\n  deviceClassMappings:\n  - name: nvidia.com/mig-memory-slices\n    deviceClassNames: [mig.nvidia.com]\n    sources:\n    - counter:\n        name: memorySlice\n        driver: gpu.nvidia.com\n        deviceSelector: {cel: {expression: \"device.driver == 'gpu.nvidia.com'\"}}\n";

const MIG_SETUP: &str = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: default-flavor\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: gpus\nspec:\n  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: [nvidia.com/mig-memory-slices]\n    flavors:\n    - name: default-flavor\n      resources:\n      - {name: nvidia.com/mig-memory-slices, nominalQuota: 8}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  namespace: default\n  name: gpus\nspec:\n  clusterQueue: gpus\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: half-h100\nspec:\n  spec:\n    devices:\n      requests:\n      - name: mig\n        exactly:\n          deviceClassName: mig.nvidia.com\n          selectors:\n          - cel: {expression: \"device.attributes['gpu.nvidia.com'].profile == '3g.40gb'\"}\n";

#[test]
fn mig_partitions_count_in_memory_slices() {
    let files = tempfile::tempdir().expect("tempdir");
    let topology = files.path().join("topology.yaml");
    std::fs::write(&topology, MIG_TOPOLOGY).expect("write the topology");
    let config = files.path().join("kueue-config.yaml");
    std::fs::write(&config, MIG_CONFIG).expect("write the configuration");
    let cluster = Cluster::start_with_args(&[
        "--topology",
        &topology.to_string_lossy(),
        "--queue-config",
        &config.to_string_lossy(),
    ]);
    cluster.ok_stdin(V, &["apply", "-f", "-"], MIG_SETUP);

    // Two pods of one 3g.40gb each: 4 of an H100's 8 memory slices apiece.
    cluster.ok_stdin(V, &["create", "-f", "-"], &job("mig-a", "half-h100"));
    wait_until_running(&cluster, "mig-a");
    let usage = workload_field(
        &cluster,
        "mig-a",
        ".admission.podSetAssignments[0].resourceUsage",
    );
    assert_eq!(usage, r#"{"nvidia.com/mig-memory-slices":"8"}"#);

    cluster.ok_stdin(V, &["create", "-f", "-"], &job("mig-b", "half-h100"));
    let waiting = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/mig-memory-slices in flavor default-flavor, 8 more needed";
    wait_for_message(&cluster, "mig-b", waiting);
}
