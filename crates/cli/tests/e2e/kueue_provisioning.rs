//! Kueue's ProvisioningRequest admission check on `tessera up`, driven by kubectl 1.33 with
//! Kueue's published provisioning example (`site/static/examples/provisioning/`) unchanged, on
//! a topology whose only GPU pool starts empty and autoscales: the AdmissionCheck is marked
//! Active; the sample Job waits suspended with its Workload's quota reserved and the check
//! Pending while Kueue's ProvisioningRequest (named `<workload>-sample-prov-1`, the config's
//! class, the Job's `provreq.kueue.x-k8s.io/` annotation as a parameter, a `ppt-…` PodTemplate)
//! is provisioned by the simulated autoscaler; a GPU node twin appears after the pool's delay,
//! the check turns Ready, the Workload is admitted and the Job's pods run on the new node
//! carrying the request's annotations; the finished Workload's request is deleted. Bad input:
//! an AdmissionCheck without parameters is inactive with Kueue's reason and message, the
//! ClusterQueue requiring it says so, and its Job waits while the admitted one is untouched.

use std::time::Duration;

use crate::support::Cluster;

const V: &str = "1.33";
/// How long a plain wait lasts ([`Cluster::wait_for`]'s default).
const WAIT: Duration = Duration::from_secs(20);

const SETUP: &str = include_str!("../fixtures/upstream/kueue/provisioning-setup.yaml");
const SAMPLE_JOB: &str = include_str!("../fixtures/upstream/kueue/provisioning-sample-job.yaml");

/// A CPU node, and a GPU pool that starts empty and grows for ProvisioningRequests.
const TOPOLOGY: &str = r#"apiVersion: tessera.dev/v1alpha1
kind: ClusterTopology
pools:
- name: cpu
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
- name: gpu
  count: 0
  server: pcie-l40s-4
  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
  devices: {exposure: device-plugin}
  autoscaling: {min: 0, max: 2, provisioningDelay: 4s}
"#;

const BROKEN: &str = r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata:
  name: broken-prov
spec:
  controllerName: kueue.x-k8s.io/provisioning-request
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: broken-queue
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu", "memory", "nvidia.com/gpu"]
    flavors:
    - name: "default-flavor"
      resources:
      - {name: "cpu", nominalQuota: 9}
      - {name: "memory", nominalQuota: 36Gi}
      - {name: "nvidia.com/gpu", nominalQuota: 9}
  admissionChecksStrategy:
    admissionChecks:
    - name: broken-prov
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: default
  name: broken-user-queue
spec:
  clusterQueue: broken-queue
"#;

fn jsonpath(cluster: &Cluster, kind: &str, name: &str, path: &str) -> String {
    cluster.ok(V, &["get", kind, name, "-o", &format!("jsonpath={path}")])
}

/// Waits until condition `type`'s `field` (`status` or `reason`) of `kind/name` reads `want`.
fn wait_for_condition(
    cluster: &Cluster,
    (kind, name): (&str, &str),
    (condition, field, want): (&str, &str, &str),
    within: Duration,
) {
    let path = format!("jsonpath={{.status.conditions[?(@.type==\"{condition}\")].{field}}}");
    cluster.wait_for_within(V, &["get", kind, name, "-o", &path], within, |out| {
        out == want
    });
}

fn condition(cluster: &Cluster, kind: &str, name: &str, condition: &str) -> String {
    jsonpath(
        cluster,
        kind,
        name,
        &format!(
            "{{.status.conditions[?(@.type==\"{condition}\")].status}} {{.status.conditions[?(@.type==\"{condition}\")].reason}} {{.status.conditions[?(@.type==\"{condition}\")].message}}"
        ),
    )
}

/// The Workload of the Job named `job`.
fn workload_of(cluster: &Cluster, job: &str) -> String {
    let uid = jsonpath(cluster, "job", job, "{.metadata.uid}");
    cluster.wait_for(
        V,
        &[
            "get",
            "workloads",
            "-l",
            &format!("kueue.x-k8s.io/job-uid={uid}"),
            "-o",
            "jsonpath={.items[0].metadata.name}",
        ],
        |out| !out.is_empty() && !out.contains("error"),
    )
}

fn create_job(cluster: &Cluster, manifest: &str) -> String {
    let created = cluster.ok_stdin(V, &["create", "-f", "-"], manifest);
    created
        .split_whitespace()
        .next()
        .and_then(|s| s.strip_prefix("job.batch/"))
        .expect("job name")
        .to_owned()
}

#[test]
fn provisioning_request_check_scales_up_a_pool_before_admission() {
    let mut cluster = Cluster::start_with_topology(TOPOLOGY, 1);
    cluster.ok_stdin(V, &["apply", "-f", "-"], SETUP);

    // The check's controller marks it Active once its config exists; the queue can admit.
    wait_for_condition(
        &cluster,
        ("admissioncheck", "sample-prov"),
        ("Active", "status", "True"),
        WAIT,
    );
    assert_eq!(
        condition(&cluster, "admissioncheck", "sample-prov", "Active"),
        "True Active The admission check is active"
    );
    wait_for_condition(
        &cluster,
        ("clusterqueue", "cluster-queue"),
        ("Active", "status", "True"),
        WAIT,
    );

    // The Job waits: quota reserved, the check Pending, the Job suspended, no GPU node yet.
    let job = create_job(&cluster, SAMPLE_JOB);
    let workload = workload_of(&cluster, &job);
    wait_for_condition(
        &cluster,
        ("workload", &workload),
        ("QuotaReserved", "status", "True"),
        WAIT,
    );
    let waiting = jsonpath(
        &cluster,
        "workload",
        &workload,
        "{.status.admissionChecks[0].name} {.status.admissionChecks[0].state} {.status.conditions[?(@.type==\"Admitted\")].reason}",
    );
    assert_eq!(waiting, "sample-prov Pending UnsatisfiedAdmissionChecks");
    assert_eq!(jsonpath(&cluster, "job", &job, "{.spec.suspend}"), "true");
    let nodes = cluster.ok(V, &["get", "nodes", "-o", "name"]);
    assert!(!nodes.contains("node/gpu-"), "{nodes}");

    // Kueue's ProvisioningRequest and PodTemplate.
    let request = format!("{workload}-sample-prov-1");
    let spec = cluster.wait_for(
        V,
        &["get", "provisioningrequest", &request, "-o", "jsonpath={.spec.provisioningClassName} {.spec.parameters.maxRunDurationSeconds} {.spec.podSets[0].podTemplateRef.name} {.spec.podSets[0].count} {.metadata.ownerReferences[0].kind}"],
        |out| out.starts_with("check-capacity"),
    );
    assert_eq!(
        spec,
        format!("check-capacity.autoscaling.x-k8s.io 600 ppt-{request}-main 3 Workload")
    );
    cluster.wait_for(
        V,
        &[
            "get",
            "podtemplate",
            &format!("ppt-{request}-main"),
            "-o",
            "jsonpath={.metadata.ownerReferences[0].kind}",
        ],
        |out| out == "ProvisioningRequest",
    );

    // The autoscaler adds a GPU node after the delay; the check turns Ready; admitted.
    wait_for_condition(
        &cluster,
        ("provisioningrequest", &request),
        ("Provisioned", "status", "True"),
        Duration::from_secs(30),
    );
    cluster.wait_for(V, &["get", "node", "gpu-1", "-o", "name"], |out| {
        out.trim() == "node/gpu-1"
    });
    wait_for_condition(
        &cluster,
        ("workload", &workload),
        ("Admitted", "status", "True"),
        WAIT,
    );
    assert_eq!(
        jsonpath(
            &cluster,
            "workload",
            &workload,
            "{.status.admissionChecks[0].state} {.status.admissionChecks[0].podSetUpdates[0].annotations.autoscaling\\.x-k8s\\.io/consume-provisioning-request}"
        ),
        format!("Ready {request}")
    );

    // The Job's pods run on the new node, consuming the request.
    let pods = cluster.wait_for_within(
        V,
        &["get", "pods", "-l", &format!("batch.kubernetes.io/job-name={job}"), "-o", "jsonpath={range .items[*]}{.spec.nodeName} {.metadata.annotations.autoscaling\\.x-k8s\\.io/consume-provisioning-request} {.metadata.annotations.autoscaling\\.x-k8s\\.io/provisioning-class-name}{\"\\n\"}{end}"],
        Duration::from_secs(30),
        |out| out.lines().filter(|l| !l.trim().is_empty()).count() == 3 && out.lines().all(|l| l.trim().is_empty() || l.starts_with("gpu-")),
    );
    for line in pods.lines().filter(|l| !l.trim().is_empty()) {
        assert_eq!(
            line.split_whitespace().skip(1).collect::<Vec<_>>(),
            [request.as_str(), "check-capacity.autoscaling.x-k8s.io"],
            "{pods}"
        );
    }

    // Bad input: a check without parameters is inactive, and so is its ClusterQueue.
    cluster.ok_stdin(V, &["apply", "-f", "-"], BROKEN);
    wait_for_condition(
        &cluster,
        ("admissioncheck", "broken-prov"),
        ("Active", "reason", "BadParametersRef"),
        WAIT,
    );
    assert_eq!(
        condition(&cluster, "admissioncheck", "broken-prov", "Active"),
        "False BadParametersRef missing parameters reference"
    );
    wait_for_condition(
        &cluster,
        ("clusterqueue", "broken-queue"),
        ("Active", "reason", "AdmissionCheckInactive"),
        WAIT,
    );
    assert_eq!(
        condition(&cluster, "clusterqueue", "broken-queue", "Active"),
        "False AdmissionCheckInactive Can't admit new workloads: references inactive AdmissionCheck(s): broken-prov."
    );
    let waiting_job = create_job(
        &cluster,
        &SAMPLE_JOB.replace("queue-name: user-queue", "queue-name: broken-user-queue"),
    );
    let waiting_workload = workload_of(&cluster, &waiting_job);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        jsonpath(
            &cluster,
            "workload",
            &waiting_workload,
            "{.status.conditions[?(@.type==\"QuotaReserved\")].status}"
        ),
        "False"
    );
    assert_eq!(
        jsonpath(&cluster, "job", &waiting_job, "{.spec.suspend}"),
        "true"
    );

    // Nothing admitted is lost: the first Job finishes; its request is deleted.
    wait_for_condition(
        &cluster,
        ("workload", &workload),
        ("Finished", "status", "True"),
        Duration::from_secs(60),
    );
    cluster.wait_for(V, &["get", "provisioningrequests", "-o", "name"], |out| {
        !out.contains(&request)
    });
    cluster.stop();
}
