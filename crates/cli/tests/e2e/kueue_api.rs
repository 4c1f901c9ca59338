//! Kueue's API as `tessera up` bundles it: the kinds listed with upstream's short names,
//! Kueue's published examples applied unchanged (no CRD installed by the test), read back in
//! v1beta1 and v1beta2, and invalid queues refused with the field named.

use crate::support::Cluster;

const V: &str = "1.33";

/// Kueue's published examples (github.com/kubernetes-sigs/kueue, see
/// tests/fixtures/upstream/README.md), copied unchanged.
const EXAMPLES: [(&str, &str); 5] = [
    // site/static/examples/getting-started/quick-start-setup.yaml
    (
        "quick-start-setup",
        include_str!("../fixtures/upstream/kueue/quick-start-setup.yaml"),
    ),
    // site/static/examples/admin/single-clusterqueue-setup.yaml
    (
        "single-clusterqueue-setup",
        include_str!("../fixtures/upstream/kueue/single-clusterqueue-setup.yaml"),
    ),
    // site/static/examples/admin/shared-quota-setup.yaml
    (
        "shared-quota-setup",
        include_str!("../fixtures/upstream/kueue/shared-quota-setup.yaml"),
    ),
    // site/static/examples/admin/resource-flavor-taints.yaml
    (
        "resource-flavor-taints",
        include_str!("../fixtures/upstream/kueue/resource-flavor-taints.yaml"),
    ),
    // site/static/examples/admin/resource-flavor-tolerations.yaml
    (
        "resource-flavor-tolerations",
        include_str!("../fixtures/upstream/kueue/resource-flavor-tolerations.yaml"),
    ),
];

fn header(table: &str) -> Vec<&str> {
    table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect()
}

#[test]
fn kueue_api_serves_published_examples_in_both_versions() {
    let cluster = Cluster::start();

    // The kinds, with upstream's short names, stored in v1beta2.
    let resources = cluster.ok(V, &["api-resources", "--api-group=kueue.x-k8s.io"]);
    for (plural, short, namespaced, kind) in [
        ("admissionchecks", "ac", "false", "AdmissionCheck"),
        ("clusterqueues", "cq", "false", "ClusterQueue"),
        ("cohorts", "co", "false", "Cohort"),
        ("localqueues", "queue,queues,lq", "true", "LocalQueue"),
        (
            "resourceflavors",
            "flavor,flavors,rf",
            "false",
            "ResourceFlavor",
        ),
        (
            "workloadpriorityclasses",
            "wpc",
            "false",
            "WorkloadPriorityClass",
        ),
        (
            "workloads",
            "kwl,kueueworkload,kueueworkloads",
            "true",
            "Workload",
        ),
    ] {
        let line = resources
            .lines()
            .find(|l| l.split_whitespace().next() == Some(plural))
            .unwrap_or_else(|| panic!("{plural} missing:\n{resources}"));
        assert_eq!(
            line.split_whitespace().collect::<Vec<_>>(),
            [plural, short, "kueue.x-k8s.io/v1beta2", namespaced, kind],
            "{resources}"
        );
    }

    for (name, manifest) in EXAMPLES {
        let out = cluster.ok_stdin(V, &["apply", "-f", "-"], manifest);
        assert!(!out.is_empty(), "{name}: {out}");
    }

    // Upstream's printer columns, and upstream's defaults filled in.
    let queues = cluster.ok(V, &["get", "cq"]);
    assert_eq!(
        header(&queues),
        ["NAME", "COHORT", "PENDING", "WORKLOADS"],
        "{queues}"
    );
    assert!(
        queues.contains("cluster-queue") && queues.contains("team-cluster-queue"),
        "{queues}"
    );
    let wide = cluster.ok(V, &["get", "clusterqueues", "-o", "wide"]);
    assert_eq!(
        header(&wide),
        [
            "NAME",
            "COHORT",
            "STRATEGY",
            "PENDING",
            "WORKLOADS",
            "ADMITTED",
            "WORKLOADS"
        ],
        "{wide}"
    );
    assert!(wide.contains("BestEffortFIFO"), "{wide}");
    let local = cluster.ok(V, &["get", "lq", "-n", "default"]);
    assert_eq!(
        header(&local),
        [
            "NAME",
            "CLUSTERQUEUE",
            "PENDING",
            "WORKLOADS",
            "ADMITTED",
            "WORKLOADS"
        ],
        "{local}"
    );
    assert!(local.contains("team-queue"), "{local}");
    let spot = cluster.ok(
        V,
        &[
            "get",
            "rf",
            "spot",
            "-o",
            "jsonpath={.spec.nodeLabels.instance-type} {.spec.tolerations[0].key}",
        ],
    );
    assert_eq!(spot, "spot spot-taint");

    // Read back in both versions: the quota is the same; the stored form is v1beta2.
    for version in ["v1beta1", "v1beta2"] {
        let quota = cluster.ok(
            V,
            &[
                "get",
                &format!("clusterqueues.{version}.kueue.x-k8s.io"),
                "team-cluster-queue",
                "-o",
                "jsonpath={.apiVersion} {.spec.resourceGroups[1].flavors[0].resources[0].name}={.spec.resourceGroups[1].flavors[0].resources[0].nominalQuota} {.spec.preemption.withinClusterQueue}",
            ],
        );
        assert_eq!(
            quota,
            format!("kueue.x-k8s.io/{version} cpu_credits=14 Never")
        );
    }

    // A v1beta1 ClusterQueue and Workload, converted as Kueue's webhook converts them.
    let v1beta1 = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: team-a}\nspec:\n  cohort: research\n  namespaceSelector: {}\n  admissionChecks: [prov]\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: default-flavor\n      resources: [{name: cpu, nominalQuota: 4, borrowingLimit: 2}]\n---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: wl, namespace: default}\nspec:\n  queueName: user-queue\n  priorityClassSource: kueue.x-k8s.io/workloadpriorityclass\n  priorityClassName: high\n  priority: 100\n  podSets:\n  - count: 2\n    template:\n      spec:\n        restartPolicy: Never\n        containers: [{name: c, image: busybox, resources: {requests: {cpu: 1}}}]\n";
    cluster.ok_stdin(V, &["apply", "-f", "-"], v1beta1);
    assert_eq!(
        cluster.ok(
            V,
            &[
                "get",
                "clusterqueues.v1beta2.kueue.x-k8s.io",
                "team-a",
                "-o",
                "jsonpath={.spec.cohortName} {.spec.admissionChecksStrategy.admissionChecks[0].name}",
            ],
        ),
        "research prov"
    );
    assert_eq!(
        cluster.ok(
            V,
            &[
                "get",
                "clusterqueues.v1beta1.kueue.x-k8s.io",
                "team-a",
                "-o",
                "jsonpath={.spec.cohort}"
            ]
        ),
        "research"
    );
    for resource in ["cq", "clusterqueues.v1beta1.kueue.x-k8s.io"] {
        let table = cluster.ok(V, &["get", resource, "team-a", "--no-headers"]);
        assert_eq!(
            table.split_whitespace().take(2).collect::<Vec<_>>(),
            ["team-a", "research"],
            "{resource}: the Cohort column reads each version's field"
        );
    }
    assert_eq!(
        cluster.ok(
            V,
            &[
                "get",
                "workloads.v1beta2.kueue.x-k8s.io",
                "wl",
                "-n",
                "default",
                "-o",
                "jsonpath={.spec.priorityClassRef.kind}/{.spec.priorityClassRef.name} {.spec.podSets[0].name} {.spec.active}",
            ],
        ),
        "WorkloadPriorityClass/high main true"
    );
    assert_eq!(
        cluster.ok(
            V,
            &[
                "get",
                "kwl",
                "wl",
                "-n",
                "default",
                "-o",
                "jsonpath={.apiVersion}"
            ]
        ),
        "kueue.x-k8s.io/v1beta2"
    );

    // Invalid queues are refused with the field named, by the CEL rule or the webhook check.
    for (manifest, wanted) in [
        (
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: lonely}\nspec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: default-flavor\n      resources: [{name: cpu, nominalQuota: 1, borrowingLimit: 1}]\n",
            "spec: Invalid value: \"object\": borrowingLimit must be nil when cohort is empty",
        ),
        (
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: lonely}\nspec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: default-flavor\n      resources: [{name: cpu, nominalQuota: 1, borrowingLimit: 1}]\n",
            "spec: Invalid value: \"object\": borrowingLimit must be nil when cohort is empty",
        ),
        (
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: generous}\nspec:\n  cohortName: research\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: default-flavor\n      resources: [{name: cpu, nominalQuota: 1, lendingLimit: 2}]\n",
            "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: \"2\": must be less than or equal to the nominalQuota",
        ),
        (
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: random}\nspec:\n  queueingStrategy: Random\n",
            "spec.queueingStrategy: Unsupported value: \"Random\"",
        ),
    ] {
        let error = cluster.fails(V, &["apply", "-f", "-"], Some(manifest));
        assert!(error.contains(wanted), "{wanted}\n{error}");
    }

    // Kueue's released ClusterQueue CRD, which names Kueue's conversion webhook
    // (config/components/crd/patches/webhook_in_clusterqueues.yaml laid over
    // config/components/crd/bases): accepted, and converted natively.
    let released = CLUSTERQUEUES_CRD.replacen(
        "\nspec:\n",
        "\nspec:\n  conversion:\n    strategy: Webhook\n    webhook:\n      clientConfig:\n        service:\n          namespace: kueue-system\n          name: kueue-webhook-service\n          path: /convert\n      conversionReviewVersions:\n      - v1\n",
        1,
    );
    cluster.ok_stdin(
        V,
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        &released,
    );
    assert_eq!(
        cluster.ok(
            V,
            &[
                "get",
                "crd",
                "clusterqueues.kueue.x-k8s.io",
                "-o",
                "jsonpath={.spec.conversion.strategy}"
            ]
        ),
        "Webhook"
    );
    assert_eq!(
        cluster.ok(
            V,
            &[
                "get",
                "clusterqueues.v1beta1.kueue.x-k8s.io",
                "team-a",
                "-o",
                "jsonpath={.spec.cohort}"
            ]
        ),
        "research"
    );
}

/// config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml, unchanged.
const CLUSTERQUEUES_CRD: &str = include_str!("../fixtures/upstream/kueue/crd-clusterqueues.yaml");

/// Kueue's kueueviz test data (cmd/kueueviz/examples, 00- to 07-), created unchanged as
/// cmd/kueueviz/INSTALL.md says (`kubectl create -f examples/`): the Jobs come before the
/// WorkloadPriorityClasses they name, so their Workloads wait for them (Kueue's
/// `WorkloadPriorityClassNotFound`) and then carry their priorities; each is admitted in
/// its ClusterQueue of the `ai-for-humanity-foundation` cohort.
#[test]
fn kueueviz_examples_create_unchanged_and_admit_their_jobs() {
    let cluster = Cluster::start();
    let examples = format!(
        "{}/tests/fixtures/upstream/kueue/kueueviz",
        env!("CARGO_MANIFEST_DIR")
    );
    let created = cluster.ok(V, &["create", "-f", &examples]);
    for object in [
        "resourceflavor.kueue.x-k8s.io/spot created",
        "clusterqueue.kueue.x-k8s.io/unused-cluster-queue created",
        "cohort.kueue.x-k8s.io/engineering created",
        "localqueue.kueue.x-k8s.io/agi-model-queue created",
        "workloadpriorityclass.kueue.x-k8s.io/long-term-research created",
    ] {
        assert!(created.contains(object), "{object}\n{created}");
    }
    assert_eq!(created.matches("job.batch/").count(), 3, "{created}");
    assert_eq!(
        cluster.ok(
            V,
            &[
                "get",
                "cohort",
                "research",
                "-o",
                "jsonpath={.spec.parentName}"
            ]
        ),
        "organization"
    );
    // (queue, WorkloadPriorityClass, priority, ClusterQueue).
    let wanted = [
        (
            "agi-model-queue",
            "long-term-research",
            "1",
            "agi-cluster-queue",
        ),
        (
            "llm-model-queue",
            "business-impacting",
            "1000",
            "llm-cluster-queue",
        ),
        (
            "emergency-queue",
            "human-critical",
            "1000000",
            "emergency-cluster-queue",
        ),
    ];
    let lines = cluster.wait_for_within(
        V,
        &[
            "get",
            "workloads",
            "-o",
            "jsonpath={range .items[*]}{.spec.queueName} {.spec.priorityClassRef.name} {.spec.priority} {.status.admission.clusterQueue}{\"\\n\"}{end}",
        ],
        std::time::Duration::from_secs(60),
        |out| out.lines().filter(|l| l.split(' ').count() == 4 && !l.ends_with(' ')).count() == 3,
    );
    let mut got: Vec<&str> = lines.lines().collect();
    got.sort();
    let mut want: Vec<String> = wanted
        .iter()
        .map(|(q, class, priority, cq)| format!("{q} {class} {priority} {cq}"))
        .collect();
    want.sort();
    assert_eq!(got, want, "{lines}");
}
