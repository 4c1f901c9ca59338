//! The published Kueue, JobSet and LeaderWorkerSet CRDs and examples, applied unchanged with
//! kubectl.

use crate::support::Cluster;

fn fixture(path: &str) -> String {
    format!(
        "{}/tests/fixtures/upstream/{path}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn header(table: &str) -> Vec<String> {
    table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

#[test]
fn upstream_crds_and_examples_work_unchanged() {
    let cluster = Cluster::start();
    let v = "1.33";
    // The CRDs are too large for client-side apply's annotation; upstream installs them
    // server-side, as here.
    for crds in [
        fixture("kueue"),
        fixture("jobset/crd-jobsets.yaml"),
        fixture("lws/crd-leaderworkersets.yaml"),
    ] {
        let out = cluster.kubectl(v, &["apply", "--server-side", "-f", &crds]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("serverside-applied"),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let established = cluster.ok(
        v,
        &["get", "crd", "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Established\")].status}{\"\\n\"}{end}"],
    );
    // Kueue's ten (MultiKueueConfig and MultiKueueCluster among them), JobSet,
    // LeaderWorkerSet, the bundled ProvisioningRequestConfig and ProvisioningRequest,
    // Multus's NetworkAttachmentDefinition and MultiNetworkPolicy, and network-policy-api's
    // AdminNetworkPolicy, BaselineAdminNetworkPolicy and ClusterNetworkPolicy, Tessera's
    // MaintenancePlan, and external-snapshotter's VolumeSnapshotClass, VolumeSnapshot and
    // VolumeSnapshotContent, and the Gateway API's GatewayClass, Gateway, HTTPRoute,
    // GRPCRoute and ReferenceGrant, and the inference extension's InferencePool.
    assert_eq!(established.lines().count(), 29, "{established}");
    assert!(
        established.lines().all(|l| l.ends_with("=True")),
        "{established}"
    );
    cluster.ok(
        v,
        &[
            "wait",
            "--for=condition=Established",
            "crd/clusterqueues.kueue.x-k8s.io",
            "--timeout=10s",
        ],
    );

    // Kueue: the single ClusterQueue setup, defaulted as upstream's schema says.
    cluster.ok(
        v,
        &[
            "apply",
            "-f",
            &fixture("kueue/single-clusterqueue-setup.yaml"),
        ],
    );
    let queues = cluster.ok(v, &["get", "clusterqueues"]);
    assert_eq!(header(&queues), ["NAME", "COHORT", "PENDING", "WORKLOADS"]);
    assert!(queues.contains("cluster-queue"), "{queues}");
    assert_eq!(
        cluster.ok(
            v,
            &[
                "get",
                "clusterqueue",
                "cluster-queue",
                "-o",
                "jsonpath={.spec.queueingStrategy}"
            ]
        ),
        "BestEffortFIFO"
    );
    assert_eq!(
        cluster.ok(
            v,
            &[
                "get",
                "clusterqueue",
                "cluster-queue",
                "-o",
                "jsonpath={.spec.resourceGroups[0].flavors[0].resources[1].nominalQuota}"
            ]
        ),
        "36Gi"
    );
    let local = cluster.ok(v, &["get", "localqueues", "-n", "default"]);
    assert!(
        local.contains("user-queue") && local.contains("cluster-queue"),
        "{local}"
    );
    cluster.ok(v, &["create", "-f", &fixture("kueue/sample-job.yaml")]);

    // JobSet and LeaderWorkerSet examples.
    for example in [
        "jobset/paralleljobs.yaml",
        "jobset/success-policy.yaml",
        "jobset/coordinator.yaml",
        "lws/lws.yaml",
    ] {
        cluster.ok(v, &["apply", "-f", &fixture(example)]);
    }
    let jobsets = cluster.ok(v, &["get", "jobsets"]);
    assert_eq!(
        header(&jobsets),
        [
            "NAME",
            "TERMINALSTATE",
            "RESTARTS",
            "COMPLETED",
            "SUSPENDED",
            "AGE"
        ]
    );
    assert_eq!(
        cluster.ok(
            v,
            &[
                "get",
                "jobset",
                "paralleljobs",
                "-o",
                "jsonpath={.spec.replicatedJobs[0].replicas}"
            ]
        ),
        "1"
    );
    let lws = cluster.ok(v, &["get", "leaderworkersets"]);
    assert!(lws.contains("leaderworkerset-sample"), "{lws}");
    assert_eq!(
        cluster.ok(
            v,
            &[
                "get",
                "lws",
                "leaderworkerset-sample",
                "-o",
                "jsonpath={.spec.startupPolicy}/{.spec.leaderWorkerTemplate.restartPolicy}"
            ]
        ),
        "LeaderCreated/RecreateGroupOnPodRestart"
    );
    let explained = cluster.ok(v, &["explain", "clusterqueue.spec.queueingStrategy"]);
    assert!(explained.contains("queueingStrategy"), "{explained}");

    // A schema violation is reported with its field, and nothing is stored.
    let bad = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: bad}\nspec:\n  queueingStrategy: Random\n";
    let error = cluster.fails(v, &["apply", "-f", "-"], Some(bad));
    assert!(
        error.contains("spec.queueingStrategy") && error.contains("Unsupported value: \"Random\""),
        "{error}"
    );

    // Upstream's CEL rules hold too.
    let uneven = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: uneven}\nspec:\n  resourceGroups:\n  - coveredResources: [cpu, memory]\n    flavors:\n    - name: default-flavor\n      resources: [{name: cpu, nominalQuota: 1}]\n";
    let error = cluster.fails(v, &["apply", "-f", "-"], Some(uneven));
    assert!(
        error.contains("flavors must have the same number of resources as the coveredResources"),
        "{error}"
    );

    // Deleting a CRD deletes its objects.
    cluster.ok(
        v,
        &["delete", "crd", "leaderworkersets.leaderworkerset.x-k8s.io"],
    );
    let gone = cluster.fails(v, &["get", "leaderworkersets"], None);
    // kubectl's cached discovery may still name the resource; the server no longer serves it.
    assert!(
        gone.contains("doesn't have a resource type") || gone.contains("(NotFound)"),
        "{gone}"
    );
}
