//! DRA claims on the default lab with kubectl: NVIDIA's published quickstart manifests
//! (ResourceClaimTemplates, a claim shared by two pods, a claim shared by two containers),
//! a MIG claim with a CEL profile selector and a parent constraint, and a claim no node can
//! satisfy. Pods carry `nodeName` until the scheduler places them; the claim controller
//! allocates on that node and reserves, the node twin prepares and the containers print
//! their devices.

use std::collections::BTreeSet;

use crate::support::Cluster;

const V: &str = "1.33";

/// An upstream quickstart manifest with every pod bound to `node`.
fn quickstart(name: &str, node: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/upstream/dra-driver-nvidia-gpu/{name}.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).expect("fixture").replace(
        "\nspec:\n  containers:",
        &format!("\nspec:\n  nodeName: {node}\n  containers:"),
    )
}

fn running(cluster: &Cluster, namespace: &str, pod: &str) {
    cluster.wait_for(
        V,
        &[
            "get",
            "pod",
            "-n",
            namespace,
            pod,
            "-o",
            "jsonpath={.status.phase}",
        ],
        |out| out == "Running",
    );
}

/// The CDI devices a container printed.
fn devices(cluster: &Cluster, namespace: &str, pod: &str, container: &str) -> Vec<String> {
    let logs = cluster.ok(V, &["logs", "-n", namespace, pod, "-c", container]);
    logs.lines()
        .find_map(|l| l.strip_prefix("CDI devices: "))
        .unwrap_or_else(|| panic!("no CDI devices in the log of {pod}/{container}: {logs}"))
        .split(' ')
        .map(|d| {
            d.rsplit('-')
                .take(2)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("-")
        })
        .collect()
}

#[test]
fn nvidia_quickstart_claims_get_their_devices() {
    let cluster = Cluster::start();

    // gpu-test1: a template, two pods, one distinct GPU each.
    cluster.ok_stdin(V, &["apply", "-f", "-"], &quickstart("gpu-test1", "h100-1"));
    running(&cluster, "gpu-test1", "pod1");
    running(&cluster, "gpu-test1", "pod2");
    let first = devices(&cluster, "gpu-test1", "pod1", "ctr");
    let second = devices(&cluster, "gpu-test1", "pod2", "ctr");
    assert_eq!((first.len(), second.len()), (1, 1));
    assert_ne!(first, second, "each pod has its own GPU");
    let claims = cluster.ok(
        V,
        &[
            "get", "resourceclaims", "-n", "gpu-test1", "-o",
            r#"jsonpath={range .items[*]}{.metadata.annotations.resource\.kubernetes\.io/pod-claim-name} {.metadata.ownerReferences[0].name} {.status.reservedFor[0].name} {.status.allocation.devices.results[0].pool}{"\n"}{end}"#,
        ],
    );
    let claims: BTreeSet<&str> = claims.lines().collect();
    assert_eq!(
        claims,
        BTreeSet::from(["gpu pod1 pod1 h100-1", "gpu pod2 pod2 h100-1"])
    );
    let statuses = cluster.ok(
        V,
        &[
            "get",
            "pod",
            "-n",
            "gpu-test1",
            "pod1",
            "-o",
            "jsonpath={.status.resourceClaimStatuses[0].name}",
        ],
    );
    assert_eq!(statuses, "gpu");

    // gpu-test2: two containers of one pod share one GPU.
    cluster.ok_stdin(V, &["apply", "-f", "-"], &quickstart("gpu-test2", "h100-1"));
    running(&cluster, "gpu-test2", "pod");
    let shared = devices(&cluster, "gpu-test2", "pod", "ctr0");
    assert_eq!(shared, devices(&cluster, "gpu-test2", "pod", "ctr1"));
    assert!(!shared.contains(&first[0]) && !shared.contains(&second[0]));

    // gpu-test3: one claim shared by two pods.
    cluster.ok_stdin(V, &["apply", "-f", "-"], &quickstart("gpu-test3", "h100-2"));
    running(&cluster, "gpu-test3", "pod1");
    running(&cluster, "gpu-test3", "pod2");
    assert_eq!(
        devices(&cluster, "gpu-test3", "pod1", "ctr"),
        devices(&cluster, "gpu-test3", "pod2", "ctr")
    );
    let reserved = cluster.ok(
        V,
        &[
            "get",
            "resourceclaim",
            "-n",
            "gpu-test3",
            "single-gpu",
            "-o",
            "jsonpath={.status.reservedFor[*].name}|{.metadata.finalizers}",
        ],
    );
    let (pods, finalizers) = reserved.split_once('|').expect("two fields");
    assert_eq!(
        pods.split(' ').collect::<BTreeSet<_>>(),
        BTreeSet::from(["pod1", "pod2"])
    );
    assert_eq!(
        finalizers,
        r#"["resource.kubernetes.io/delete-protection"]"#
    );

    // When both pods are gone the claim is deallocated.
    cluster.ok(
        V,
        &[
            "delete",
            "pod",
            "-n",
            "gpu-test3",
            "pod1",
            "pod2",
            "--wait=false",
        ],
    );
    cluster.wait_for(
        V,
        &["get", "resourceclaim", "-n", "gpu-test3", "single-gpu", "-o", "jsonpath={.status.allocation.devices.results[0].device}|{.status.reservedFor}|{.metadata.finalizers}"],
        |out| out == "||",
    );
}

#[test]
fn mig_claims_and_unsatisfiable_claims() {
    let cluster = Cluster::start();
    // Two 1g.18gb MIG devices of one parent GPU on an H200 node.
    let mig = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: two-migs}\nspec:\n  spec:\n    devices:\n      requests:\n      - name: a\n        exactly: {deviceClassName: mig.nvidia.com, selectors: [{cel: {expression: \"device.attributes['gpu.nvidia.com'].profile == '1g.18gb'\"}}]}\n      - name: b\n        exactly: {deviceClassName: mig.nvidia.com, selectors: [{cel: {expression: \"device.attributes['gpu.nvidia.com'].profile == '1g.18gb'\"}}]}\n      constraints:\n      - {requests: [], matchAttribute: gpu.nvidia.com/parentUUID}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: mig}\nspec:\n  nodeName: h200-1\n  resourceClaims: [{name: migs, resourceClaimTemplateName: two-migs}]\n  containers:\n  - name: a\n    image: cuda:12\n    resources: {claims: [{name: migs, request: a}]}\n  - name: b\n    image: cuda:12\n    resources: {claims: [{name: migs, request: b}]}\n";
    cluster.ok_stdin(V, &["apply", "-f", "-"], mig);
    running(&cluster, "default", "mig");
    let a = devices(&cluster, "default", "mig", "a");
    let b = devices(&cluster, "default", "mig", "b");
    assert_eq!((a.len(), b.len()), (1, 1));
    assert_ne!(a, b, "each request gets its own MIG device");
    let results = cluster.ok(
        V,
        &[
            "get",
            "resourceclaims",
            "-o",
            "jsonpath={.items[0].status.allocation.devices.results[*].device}",
        ],
    );
    let parents: BTreeSet<&str> = results
        .split(' ')
        .map(|d| d.split("-mig-").next().unwrap_or_default())
        .collect();
    assert_eq!(
        parents.len(),
        1,
        "both devices on one parent GPU: {results}"
    );

    // A selector that does not compile is refused when the claim is written.
    let refused = cluster.fails(
        V,
        &["apply", "-f", "-"],
        Some("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: broken}\nspec:\n  devices:\n    requests:\n    - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com, selectors: [{cel: {expression: \"device.driver ==\"}}]}}\n"),
    );
    assert!(
        refused.contains("spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: \"device.driver ==\": compilation failed"),
        "{refused}"
    );
    // One that fails at run time (a field no device has) leaves the pod Pending and says why.
    cluster.ok_stdin(
        V,
        &["apply", "-f", "-"],
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: odd}\nspec:\n  devices:\n    requests:\n    - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com, selectors: [{cel: {expression: \"device.attributes['gpu.nvidia.com'].colour == 'blue'\"}}]}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: odd}\nspec:\n  resourceClaims: [{name: gpu, resourceClaimName: odd}]\n  containers: [{name: c, image: cuda:12, resources: {claims: [{name: gpu}]}}]\n",
    );
    let why = cluster.wait_for(
        V,
        &[
            "get",
            "pod",
            "odd",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].message}",
        ],
        |out| out.contains("CEL runtime error"),
    );
    assert!(why.starts_with("0/8 nodes are available:"), "{why}");

    // Nine GPUs on an eight-GPU node: the pod stays Pending with the reason.
    let nine = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: nine}\nspec:\n  devices:\n    requests:\n    - name: gpus\n      exactly: {deviceClassName: gpu.nvidia.com, count: 9}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: greedy}\nspec:\n  nodeName: h100-1\n  resourceClaims: [{name: gpus, resourceClaimName: nine}]\n  containers:\n  - name: train\n    image: trainer:1\n    resources: {claims: [{name: gpus}]}\n";
    cluster.ok_stdin(V, &["apply", "-f", "-"], nine);
    let events = cluster.wait_for(
        V,
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=greedy",
            "-o",
            "jsonpath={range .items[*]}{.type} {.reason}: {.message}{\"\\n\"}{end}",
        ],
        |out| out.contains("FailedScheduling"),
    );
    assert!(
        events.contains("Warning FailedScheduling: cannot allocate all claims on node h100-1"),
        "{events}"
    );
    assert_eq!(
        cluster.ok(
            V,
            &["get", "pod", "greedy", "-o", "jsonpath={.status.phase}"]
        ),
        "Pending"
    );
}

#[test]
fn dra_example_driver_manifests_apply_unchanged() {
    let cluster = Cluster::start_with_topology(
        "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: cpu\n  count: 1\n  server: cpu-worker\n",
        1,
    );
    for example in [
        "basic-resourceclaimtemplate",
        "cel-selector",
        "admin-access",
        "prioritized-alternatives",
        "partitionable-devices",
    ] {
        let path = format!(
            "{}/tests/fixtures/upstream/dra-example-driver/{example}.yaml",
            env!("CARGO_MANIFEST_DIR")
        );
        let manifest = std::fs::read_to_string(&path).expect("fixture");
        let out = cluster.ok_stdin(V, &["apply", "-f", "-"], &manifest);
        assert!(
            out.lines().all(|l| l.ends_with(" created")),
            "{example}: {out}"
        );
    }
    // The prioritized list and the CEL selector are stored as written.
    let subrequests = cluster.ok(
        V,
        &[
            "get",
            "resourceclaimtemplates",
            "-n",
            "prioritized-alternatives",
            "-o",
            "jsonpath={.items[0].spec.spec.devices.requests[0].firstAvailable[*].name}",
        ],
    );
    assert!(!subrequests.is_empty(), "firstAvailable kept");
    let selector = cluster.ok(
        V,
        &["get", "resourceclaimtemplates", "-n", "cel-selector", "-o",
          "jsonpath={.items[0].spec.spec.devices.requests[0].exactly.selectors[0].cel.expression}"],
    );
    assert!(selector.contains("device.attributes"), "{selector}");
}

#[test]
fn admin_access_sees_devices_in_use_only_where_allowed() {
    let cluster = Cluster::start();
    // A workload holds one H100 GPU.
    cluster.ok_stdin(
        V,
        &["apply", "-f", "-"],
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: one}\nspec:\n  devices:\n    requests:\n    - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: holder}\nspec:\n  nodeSelector: {kubernetes.io/hostname: h100-1}\n  resourceClaims: [{name: gpu, resourceClaimName: one}]\n  containers: [{name: c, image: cuda:12, resources: {claims: [{name: gpu}]}}]\n",
    );
    running(&cluster, "default", "holder");
    let held = cluster.ok(
        V,
        &[
            "get",
            "resourceclaim",
            "one",
            "-o",
            "jsonpath={.status.allocation.devices.results[0].device}",
        ],
    );
    let monitor = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: all-gpus}\nspec:\n  devices:\n    requests:\n    - {name: gpus, exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All, adminAccess: true}}\n";
    // Not in an ordinary namespace.
    cluster.ok(V, &["create", "namespace", "plain"]);
    let refused = cluster.fails(V, &["apply", "-n", "plain", "-f", "-"], Some(monitor));
    assert!(
        refused.contains("spec.devices.requests[0].exactly.adminAccess: Forbidden: admin access to devices requires the `resource.kubernetes.io/admin-access: true` label on the containing namespace"),
        "{refused}"
    );
    // In a labelled namespace the monitor gets every GPU of the node, the held one included.
    cluster.ok_stdin(
        V,
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: monitoring, labels: {resource.kubernetes.io/admin-access: \"true\"}}\n",
    );
    cluster.ok_stdin(V, &["apply", "-n", "monitoring", "-f", "-"], monitor);
    cluster.ok_stdin(
        V,
        &["apply", "-n", "monitoring", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: dcgm}\nspec:\n  nodeSelector: {kubernetes.io/hostname: h100-1}\n  resourceClaims: [{name: gpus, resourceClaimName: all-gpus}]\n  containers: [{name: c, image: dcgm:4, resources: {claims: [{name: gpus}]}}]\n",
    );
    running(&cluster, "monitoring", "dcgm");
    let results = cluster.ok(
        V,
        &[
            "get",
            "resourceclaim",
            "-n",
            "monitoring",
            "all-gpus",
            "-o",
            "jsonpath={range .status.allocation.devices.results[*]}{.device}:{.adminAccess} {end}",
        ],
    );
    let devices: Vec<&str> = results.split_whitespace().collect();
    assert_eq!(devices.len(), 8, "{results}");
    assert!(
        devices.contains(&format!("{held}:true").as_str()),
        "{results}"
    );
}

/// NVIDIA's `resource.k8s.io/v1beta1` quickstart (an older release's, applied unchanged): the
/// template is stored as v1, the scheduler places both pods with allocated claims, and the
/// claims read back in v1beta1 (requests holding their class themselves), v1beta2 and v1
/// (the class under `exactly`).
#[test]
fn nvidia_v1beta1_quickstart_applies_unchanged_and_reads_back_in_every_version() {
    let cluster = Cluster::start();
    let path = format!(
        "{}/tests/fixtures/upstream/dra-driver-nvidia-gpu/v1beta1/gpu-test1.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    cluster.ok(V, &["apply", "-f", &path]);
    for pod in ["pod1", "pod2"] {
        let placed = cluster.node_when_running(V, Some("gpu-test1"), pod);
        assert!(placed.starts_with("h100-"), "{placed}");
    }
    let read = |resource: &str, template: &str| {
        let lines = cluster.ok(
            V,
            &[
                "get",
                resource,
                "-n",
                "gpu-test1",
                "-o",
                &format!("jsonpath={{range .items[*]}}{template}{{\"\\n\"}}{{end}}"),
            ],
        );
        lines.lines().map(str::to_string).collect::<BTreeSet<_>>()
    };
    let v1beta1 = read(
        "resourceclaims.v1beta1.resource.k8s.io",
        "{.apiVersion} {.spec.devices.requests[0].deviceClassName} {.spec.devices.requests[0].exactly} {.status.reservedFor[0].name} {.status.allocation.devices.results[0].request}",
    );
    assert_eq!(
        v1beta1,
        BTreeSet::from([
            "resource.k8s.io/v1beta1 gpu.nvidia.com  pod1 gpu".to_string(),
            "resource.k8s.io/v1beta1 gpu.nvidia.com  pod2 gpu".to_string(),
        ])
    );
    let v1 = read(
        "resourceclaims.v1.resource.k8s.io",
        "{.apiVersion} {.spec.devices.requests[0].exactly.deviceClassName} {.spec.devices.requests[0].deviceClassName} {.status.reservedFor[0].name}",
    );
    assert_eq!(
        v1,
        BTreeSet::from([
            "resource.k8s.io/v1 gpu.nvidia.com  pod1".to_string(),
            "resource.k8s.io/v1 gpu.nvidia.com  pod2".to_string(),
        ])
    );
    let v1beta2 = read(
        "resourceclaimtemplates.v1beta2.resource.k8s.io",
        "{.apiVersion} {.spec.spec.devices.requests[0].exactly.deviceClassName}",
    );
    assert_eq!(
        v1beta2,
        BTreeSet::from(["resource.k8s.io/v1beta2 gpu.nvidia.com".to_string()])
    );
    // Tables list the beta versions with the same columns.
    let table = cluster.ok(
        V,
        &[
            "get",
            "resourceclaims.v1beta1.resource.k8s.io",
            "-n",
            "gpu-test1",
        ],
    );
    assert!(table.starts_with("NAME"), "{table}");
    assert_eq!(table.matches("allocated,reserved").count(), 2, "{table}");
    // Slices published as v1 read back in v1beta1 with their devices under `basic`.
    let slices = cluster.ok(
        V,
        &[
            "get",
            "resourceslices.v1beta1.resource.k8s.io",
            "-o",
            "jsonpath={.items[0].apiVersion} {.items[0].spec.devices[0].basic.attributes.type.string}",
        ],
    );
    assert!(slices.starts_with("resource.k8s.io/v1beta1 "), "{slices}");
    assert!(!slices.ends_with(' '), "basic attributes: {slices}");
    // Discovery serves all three versions, v1 preferred.
    let versions = cluster.ok(V, &["api-versions"]);
    for version in [
        "resource.k8s.io/v1",
        "resource.k8s.io/v1beta1",
        "resource.k8s.io/v1beta2",
    ] {
        assert!(
            versions.lines().any(|l| l == version),
            "{version}: {versions}"
        );
    }
    let group = cluster.ok(V, &["get", "--raw", "/apis/resource.k8s.io"]);
    assert!(
        group
            .contains(r#""preferredVersion":{"groupVersion":"resource.k8s.io/v1","version":"v1"}"#),
        "{group}"
    );
}

/// DRAExtendedResource: a pod asking for `nvidia.com/gpu` (which no DRA node advertises) runs
/// on a DRA node through the `gpu.nvidia.com` class's `extendedResourceName`: the scheduler
/// creates the pod's special claim (allocated, reserved, owned by the pod, annotated) and
/// names it in `status.extendedResourceClaimStatus`; the container sees its two GPUs; the
/// claim goes with the pod.
#[test]
fn extended_resource_pod_runs_on_dra_gpus() {
    let cluster = Cluster::start();
    cluster.ok(V, &["create", "namespace", "ext"]);
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: cuda, namespace: ext}\nspec:\n  containers:\n  - name: train\n    image: cuda:12\n    resources: {limits: {nvidia.com/gpu: 2}}\n";
    cluster.ok_stdin(V, &["apply", "-f", "-"], pod);
    let node = cluster.node_when_running(V, Some("ext"), "cuda");
    assert!(node.starts_with("h100-"), "placed on a DRA node: {node}");
    let status = cluster.ok(
        V,
        &[
            "get", "pod", "-n", "ext", "cuda", "-o",
            "jsonpath={.status.extendedResourceClaimStatus.resourceClaimName} {.status.extendedResourceClaimStatus.requestMappings[0].containerName} {.status.extendedResourceClaimStatus.requestMappings[0].resourceName} {.status.extendedResourceClaimStatus.requestMappings[0].requestName}",
        ],
    );
    let fields: Vec<&str> = status.split_whitespace().collect();
    let [claim, container, resource, request] = fields.as_slice() else {
        panic!("extendedResourceClaimStatus: {status}")
    };
    assert!(claim.starts_with("cuda-extended-resources-"), "{claim}");
    assert_eq!(
        (*container, *resource, *request),
        ("train", "nvidia.com/gpu", "container-0-request-0")
    );
    let shape = cluster.ok(
        V,
        &[
            "get", "resourceclaim", "-n", "ext", claim, "-o",
            r#"jsonpath={.metadata.annotations.resource\.kubernetes\.io/extended-resource-claim} {.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name} {.status.reservedFor[0].name} {.spec.devices.requests[0].exactly.deviceClassName} {.spec.devices.requests[0].exactly.count} {.status.allocation.devices.results[*].pool}"#,
        ],
    );
    assert_eq!(
        shape,
        format!("true Pod/cuda cuda gpu.nvidia.com 2 {node} {node}")
    );
    let logs = cluster.ok(V, &["logs", "-n", "ext", "cuda", "-c", "train"]);
    let visible = logs
        .lines()
        .find_map(|l| l.strip_prefix("NVIDIA_VISIBLE_DEVICES="))
        .unwrap_or_else(|| panic!("no NVIDIA_VISIBLE_DEVICES in the log: {logs}"));
    assert_eq!(visible.split(',').count(), 2, "{visible}");
    cluster.ok(V, &["delete", "pod", "-n", "ext", "cuda"]);
    cluster.wait_for(
        V,
        &["get", "resourceclaims", "-n", "ext", "-o", "name"],
        |out| out.trim().is_empty(),
    );
}
