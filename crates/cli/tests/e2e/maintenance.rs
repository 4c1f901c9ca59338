//! `tessera maintain plan` (the dry run) against the embedded platform: a node rotation of the
//! h100 pool refused while a PodDisruptionBudget allows no disruption (naming the budget), the
//! same plan staged (canary, then a batch) once the budget has room, a MIG layout that does not
//! fit the h200 pool's GPUs refused naming node and model, and a mistyped plan file named with
//! its file, line and field. `tessera maintain apply`: a driver upgrade of the h100 pool run by the
//! maintenance controller with a PDB-covered Deployment and a Kueue Job (no pod lost, the driver
//! kept across a restart): the Deployment's pods leave through `pods/eviction` (each carrying the
//! `DisruptionTarget` condition), the Job's Workload is evicted through Kueue (`Evicted`
//! `NodeMaintenance`, requeued, admitted again, the Job completing with no failed pod); a failed
//! validation halting the rollout, a restart mid-plan. An evicted Job pod whose Job ignores
//! `DisruptionTarget` failures is replaced without counting a failure.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::support::{Cluster, kubectl_binary, outcome};

const KUBECTL: &str = "1.33";

/// `tessera maintain plan -f` of `plan` against the cluster: (ok, stdout, stderr).
pub(crate) fn maintain_plan(cluster: &Cluster, plan: &str) -> (bool, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plan.yaml");
    std::fs::write(&path, plan).expect("write plan");
    outcome(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["maintain", "plan", "--kubeconfig"])
            .arg(cluster.kubeconfig())
            .arg("-f")
            .arg(&path)
            .output()
            .expect("run tessera maintain plan"),
    )
}

const ROTATION: &str = "apiVersion: tessera.dev/v1alpha1
kind: MaintenancePlan
metadata: {name: rotate-h100}
spec:
  nodeSelector: {tessera.dev/pool: h100}
  nodeRotation: {}
  canary: 1
  policy: {maxParallelUpgrades: 1, maxUnavailable: 1}
";

/// A Deployment of two pods, one on each h100 node, and a budget over them.
pub(crate) const WEB: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {sim.tessera.dev/duration: 1h}
    spec:
      nodeSelector: {tessera.dev/pool: h100}
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {app: web}}
            topologyKey: kubernetes.io/hostname
      containers: [{name: web, image: web:1}]
";

/// Applies the `web` Deployment (`manifest`) and waits until both its pods are ready.
fn deploy_web(cluster: &Cluster, manifest: &str) {
    cluster.ok_stdin(KUBECTL, &["apply", "-f", "-"], manifest);
    wait_web_ready(cluster);
}

fn wait_web_ready(cluster: &Cluster) {
    cluster.wait_for(
        KUBECTL,
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ],
        |out| out == "2",
    );
}

/// Sets the budget over `web` to `minAvailable` and waits until the disruption controller
/// allows `allowed` disruptions.
fn set_budget(cluster: &Cluster, min_available: u32, allowed: u32) {
    let pdb = format!(
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: web}}\nspec:\n  minAvailable: {min_available}\n  selector: {{matchLabels: {{app: web}}}}\n"
    );
    cluster.ok_stdin(KUBECTL, &["apply", "-f", "-"], &pdb);
    let allowed = allowed.to_string();
    cluster.wait_for(
        KUBECTL,
        &[
            "get",
            "pdb",
            "web",
            "-o",
            "jsonpath={.status.disruptionsAllowed}",
        ],
        |out| out == allowed,
    );
}

#[test]
fn maintain_plan_stages_a_pool_and_refuses_what_would_break_it() {
    let cluster = Cluster::start();
    let _ = kubectl_binary(KUBECTL);
    deploy_web(&cluster, WEB);

    // No disruption allowed: refused before anything starts, naming the budget.
    set_budget(&cluster, 2, 0);
    let (ok, out, err) = maintain_plan(&cluster, ROTATION);
    assert!(!ok, "{out}{err}");
    assert!(out.contains("pre-flight: refused"), "{out}");
    assert!(
        out.contains(
            "stage canary would evict 1 pod(s) covered by PodDisruptionBudget default/web at once (nodes h100-1), but it allows 0 disruption(s)"
        ),
        "{out}"
    );

    // Room for one disruption at a time: a canary, then the other node.
    set_budget(&cluster, 1, 1);
    let (ok, out, err) = maintain_plan(&cluster, ROTATION);
    assert!(ok, "{out}{err}");
    assert_eq!(
        out,
        "MaintenancePlan rotate-h100 (node-rotation)\n\
         2 node(s) to maintain in 2 stage(s), batches of 1, maxUnavailable 1\n\
         stage canary: h100-1\n\
         stage batch-1: h100-2\n\
         pre-flight: passed\n"
    );

    // Two nodes at once would take both pods: refused, naming the budget and the batch.
    let (ok, out, _) = maintain_plan(
        &cluster,
        &ROTATION
            .replace("canary: 1", "canary: 0\n  batchSize: 2")
            .replace("maxUnavailable: 1", "maxUnavailable: 2"),
    );
    assert!(!ok);
    assert!(
        out.contains("stage batch-1 would evict 2 pod(s) covered by PodDisruptionBudget default/web at once (nodes h100-1,h100-2), but it allows 1 disruption(s); a smaller batchSize would spread them over more stages"),
        "{out}"
    );

    // A MIG layout the H200 cannot hold.
    let mig = "apiVersion: tessera.dev/v1alpha1\nkind: MaintenancePlan\nmetadata: {name: mig}\nspec:\n  nodeSelector: {tessera.dev/pool: h200}\n  migRepartition: {layout: [7g.141gb, 1g.18gb]}\n";
    let (ok, out, _) = maintain_plan(&cluster, mig);
    assert!(!ok);
    assert!(
        out.contains(
            "node h200-1: H200-SXM5-141GB: 7g.141gb, 1g.18gb does not fit on one H200-SXM5-141GB"
        ),
        "{out}"
    );
    // One that fits.
    let (ok, out, err) =
        maintain_plan(&cluster, &mig.replace("[7g.141gb, 1g.18gb]", "all-3g.71gb"));
    assert!(ok, "{out}{err}");
    assert!(out.contains("stage canary: h200-1\n"), "{out}");

    // A mistake in the file: its path, line and field.
    let (ok, _, err) = maintain_plan(
        &cluster,
        &ROTATION.replace("maxUnavailable: 1", "maxUnavailable: \"1\""),
    );
    assert!(!ok);
    assert!(
        err.contains("plan.yaml:8: spec.policy.maxUnavailable: invalid value for IntOrString: invalid type: string is not a percentage"),
        "{err}"
    );
}

/// `tessera maintain <args>` against the cluster.
fn maintain(cluster: &Cluster, args: &[&str]) -> (bool, String, String) {
    outcome(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .arg("maintain")
            .args(args)
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig())
            .output()
            .expect("run tessera maintain"),
    )
}

/// `tessera maintain apply -f` of `plan`.
fn maintain_apply(cluster: &Cluster, plan: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plan.yaml");
    std::fs::write(&path, plan).expect("write plan");
    let path = path.to_string_lossy().into_owned();
    let (ok, out, err) = maintain(cluster, &["apply", "-f", &path]);
    assert!(ok, "{out}{err}");
    out
}

fn driver_upgrade(name: &str, version: &str) -> String {
    format!(
        "apiVersion: tessera.dev/v1alpha1\nkind: MaintenancePlan\nmetadata: {{name: {name}}}\nspec:\n  nodeSelector: {{tessera.dev/pool: h100}}\n  driverUpgrade: {{version: \"{version}\"}}\n  canary: 1\n  policy: {{maxParallelUpgrades: 1, maxUnavailable: 1}}\n"
    )
}

/// Two GPU pods of a Deployment, one per h100 node, under a budget allowing one disruption;
/// a Kueue-admitted Job pinned to h100-1.
const GPU_WORK: &str = "apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: gpus}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: memory, nominalQuota: 512Gi}
      - {name: nvidia.com/gpu, nominalQuota: 16}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: gpus}
spec: {clusterQueue: gpus}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: train
  labels: {kueue.x-k8s.io/queue-name: gpus}
spec:
  template:
    metadata:
      annotations: {sim.tessera.dev/duration: 20s}
    spec:
      restartPolicy: Never
      nodeSelector: {kubernetes.io/hostname: h100-1}
      containers:
      - name: train
        image: trainer:1
        resources:
          requests: {cpu: 1, memory: 1Gi, nvidia.com/gpu: 1}
          limits: {nvidia.com/gpu: 1}
";

/// Waits until plan `name` reaches `phase`.
fn wait_phase(cluster: &Cluster, name: &str, phase: &str) {
    cluster.wait_for(
        KUBECTL,
        &[
            "get",
            "maintenanceplan",
            name,
            "-o",
            "jsonpath={.status.phase}",
        ],
        |out| out == phase,
    );
}

/// `kubectl get KIND NAME -o jsonpath={PATH}`.
fn field(cluster: &Cluster, kind: &str, name: &str, path: &str) -> String {
    let path = format!("jsonpath={{{path}}}");
    cluster.ok(KUBECTL, &["get", kind, name, "-o", &path])
}

/// The names of the pods `selector` selects.
fn pod_names(cluster: &Cluster, selector: &str) -> String {
    cluster.ok(
        KUBECTL,
        &[
            "get",
            "pods",
            "-l",
            selector,
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ],
    )
}

fn label(cluster: &Cluster, node: &str, key: &str) -> String {
    let path = format!("jsonpath={{.metadata.labels.{}}}", key.replace('.', "\\."));
    cluster.ok(KUBECTL, &["get", "node", node, "-o", &path])
}

/// `kubectl get <args> -w -o json` in the background: every version of the objects it sees,
/// read back once stopped.
struct Watch {
    child: Child,
    path: PathBuf,
}

impl Watch {
    /// Starts the watch and waits until it printed the objects there already (`initial` of
    /// them), so no later change is missed.
    fn start(cluster: &Cluster, args: &[&str], initial: usize) -> Watch {
        let path = cluster
            .dir
            .path()
            .join(format!("watch-{}.json", args.join("-")));
        let file = std::fs::File::create(&path).expect("watch file");
        let child = Command::new(kubectl_binary(KUBECTL))
            .args(["get"])
            .args(args)
            .args(["-w", "-o", "json"])
            .env("KUBECONFIG", cluster.kubeconfig())
            .env("HOME", cluster.dir.path().join("home-watch"))
            .stdout(file)
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl get -w");
        let watch = Watch { child, path };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while watch.objects().len() < initial {
            assert!(
                std::time::Instant::now() < deadline,
                "kubectl get {args:?} -w printed nothing"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        watch
    }

    /// The complete objects printed so far.
    fn objects(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        serde_json::Deserializer::from_str(&text)
            .into_iter::<Value>()
            .map_while(Result::ok)
            .collect()
    }

    fn stop(mut self) -> Vec<Value> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.objects()
    }
}

/// The condition of type `kind` of `object`, if any.
fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

#[test]
fn maintain_apply_upgrades_the_driver_of_a_pool_without_losing_a_pod() {
    let mut cluster = Cluster::start();
    let _ = kubectl_binary(KUBECTL);
    let web = WEB.replace(
        "containers: [{name: web, image: web:1}]",
        "containers: [{name: web, image: web:1, resources: {limits: {nvidia.com/gpu: 1}}}]",
    );
    deploy_web(&cluster, &web);
    set_budget(&cluster, 1, 1);
    cluster.ok_stdin(KUBECTL, &["apply", "-f", "-"], GPU_WORK);
    cluster.wait_for(
        KUBECTL,
        &[
            "get",
            "pods",
            "-l",
            "job-name=train",
            "-o",
            "jsonpath={.items[*].status.phase}",
        ],
        |out| out == "Running",
    );
    let first_train_pod = pod_names(&cluster, "job-name=train");
    let first_web_pods = pod_names(&cluster, "app=web");
    let pod_watch = Watch::start(&cluster, &["pods"], 3);
    let workload_watch = Watch::start(&cluster, &["workloads.kueue.x-k8s.io"], 1);
    // The definition is installed with its printer columns.
    let columns = cluster.ok(
        KUBECTL,
        &[
            "get",
            "crd",
            "maintenanceplans.tessera.dev",
            "-o",
            "jsonpath={.spec.versions[0].additionalPrinterColumns[*].name}",
        ],
    );
    assert_eq!(columns, "Kind Phase Nodes Age");

    let out = maintain_apply(&cluster, &driver_upgrade("driver-575", "575.57.08"));
    assert_eq!(out, "maintenanceplan.tessera.dev/driver-575 created\n");
    wait_phase(&cluster, "driver-575", "Succeeded");
    for node in ["h100-1", "h100-2"] {
        assert_eq!(
            label(&cluster, node, "nvidia.com/gpu-driver-upgrade-state"),
            "upgrade-done"
        );
        assert_eq!(
            label(&cluster, node, "nvidia.com/cuda.driver-version.full"),
            "575.57.08"
        );
        assert_eq!(
            label(&cluster, node, "nvidia.com/cuda.driver-version.major"),
            "575"
        );
        let cordoned = cluster.ok(
            KUBECTL,
            &["get", "node", node, "-o", "jsonpath={.spec.unschedulable}"],
        );
        assert_eq!(cordoned, "", "{node} was left cordoned");
    }
    let (ok, status, err) = maintain(&cluster, &["status", "driver-575"]);
    assert!(ok, "{err}");
    assert!(
        status.starts_with(
            "MaintenancePlan driver-575 (driver-upgrade): Succeeded, 2/2 node(s) done\n"
        ),
        "{status}"
    );
    assert!(
        status.contains("  canary h100-1: upgrade-done\n"),
        "{status}"
    );
    // No pod lost: the Deployment is whole again and the Job, evicted with its node, ran again
    // and completed.
    wait_web_ready(&cluster);
    cluster.wait_for(
        KUBECTL,
        &["get", "job", "train", "-o", "jsonpath={.status.succeeded}"],
        |out| out == "1",
    );
    // Both were evicted by the plan, not left in place: new pods did the work.
    let succeeded_pod = cluster.ok(
        KUBECTL,
        &[
            "get",
            "pods",
            "-l",
            "job-name=train",
            "--field-selector=status.phase=Succeeded",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ],
    );
    assert!(
        !succeeded_pod.is_empty() && !succeeded_pod.contains(&first_train_pod),
        "{first_train_pod} -> {succeeded_pod}"
    );
    let web_pods = pod_names(&cluster, "app=web");
    for old in first_web_pods.split_whitespace() {
        assert!(!web_pods.contains(old), "{old} was not moved: {web_pods}");
    }
    // The Deployment's pods went through pods/eviction, which marked each before deleting it;
    // the Job's pod did not: its Workload was evicted through Kueue.
    let pods = pod_watch.stop();
    let evicted_by_api = |pod: &Value| {
        condition(pod, "DisruptionTarget").is_some_and(|c| {
            c["status"] == "True"
                && c["reason"] == "EvictionByEvictionAPI"
                && c["message"] == "Eviction API: evicting"
        })
    };
    for old in first_web_pods.split_whitespace() {
        assert!(
            pods.iter()
                .any(|p| p["metadata"]["name"] == old && evicted_by_api(p)),
            "{old} was not evicted through the Eviction API"
        );
    }
    assert!(
        !pods
            .iter()
            .any(|p| p["metadata"]["name"] == first_train_pod.as_str()
                && condition(p, "DisruptionTarget").is_some()),
        "{first_train_pod} went through the Eviction API"
    );
    // The Workload was evicted for the maintenance, requeued and admitted again.
    let workloads = workload_watch.stop();
    let message = "The node h100-1 is under maintenance by the plan driver-575";
    let evicted_at = workloads
        .iter()
        .position(|w| {
            condition(w, "Evicted").is_some_and(|c| {
                c["status"] == "True" && c["reason"] == "NodeMaintenance" && c["message"] == message
            })
        })
        .unwrap_or_else(|| {
            panic!("the Workload was never evicted for the maintenance: {workloads:?}")
        });
    assert!(
        workloads[evicted_at..].iter().any(|w| {
            condition(w, "Requeued")
                .is_some_and(|c| c["status"] == "True" && c["reason"] == "NodeMaintenance")
                && condition(w, "QuotaReserved").is_some_and(|c| c["status"] == "True")
        }),
        "the Workload was not requeued and admitted again: {workloads:?}"
    );
    let events = cluster.ok(
        KUBECTL,
        &[
            "get",
            "events",
            "--field-selector=reason=EvictedDueToNodeMaintenance",
            "-o",
            "jsonpath={.items[*].message}",
        ],
    );
    assert!(events.contains(message), "{events}");
    // Its pods were stopped, not failed.
    let failed = field(&cluster, "job", "train", ".status.failed");
    assert!(matches!(failed.as_str(), "" | "0"), "failed: {failed}");

    // A kubelet version change of the h200 pool.
    maintain_apply(
        &cluster,
        "apiVersion: tessera.dev/v1alpha1\nkind: MaintenancePlan\nmetadata: {name: kubelet-h200}\nspec:\n  nodeSelector: {tessera.dev/pool: h200}\n  kubernetesVersion: {version: \"1.33.5\"}\n",
    );
    wait_phase(&cluster, "kubelet-h200", "Succeeded");
    let kubelet = |cluster: &Cluster, node: &str| {
        field(cluster, "node", node, ".status.nodeInfo.kubeletVersion")
    };
    assert_eq!(kubelet(&cluster, "h200-2"), "v1.33.5");

    // The installed driver and kubelet survive a restart of the platform.
    cluster.stop();
    cluster.launch(&[]);
    assert_eq!(
        label(&cluster, "h100-1", "nvidia.com/cuda.driver-version.full"),
        "575.57.08"
    );
    assert_eq!(kubelet(&cluster, "h200-1"), "v1.33.5");

    // A failed validation halts the rollout and leaves the node cordoned with a condition; a
    // restart mid-plan resumes it from the recorded stages.
    cluster.ok(
        KUBECTL,
        &[
            "annotate",
            "node",
            "h100-2",
            "maintenance.tessera.dev/fail-validation=true",
        ],
    );
    maintain_apply(&cluster, &driver_upgrade("driver-580", "580.65.06"));
    wait_phase(&cluster, "driver-580", "Progressing");
    cluster.stop();
    cluster.launch(&[]);
    wait_phase(&cluster, "driver-580", "Halted");
    assert_eq!(
        label(&cluster, "h100-1", "nvidia.com/cuda.driver-version.full"),
        "580.65.06"
    );
    assert_eq!(
        label(&cluster, "h100-2", "nvidia.com/gpu-driver-upgrade-state"),
        "upgrade-failed"
    );
    let cordoned = field(&cluster, "node", "h100-2", ".spec.unschedulable");
    assert_eq!(cordoned, "true");
    let condition = field(
        &cluster,
        "node",
        "h100-2",
        ".status.conditions[?(@.type==\"MaintenanceValidationFailed\")].status",
    );
    assert_eq!(condition, "True");
    let (_, status, _) = maintain(&cluster, &["status", "driver-580"]);
    assert!(
        status.contains("reason: validation failed on node h100-2 in stage batch-1"),
        "{status}"
    );
    // Pause and resume set spec.paused.
    let (ok, out, _) = maintain(&cluster, &["pause", "driver-580"]);
    assert!(ok);
    assert_eq!(out, "maintenanceplan.tessera.dev/driver-580 paused\n");
    let paused = field(&cluster, "maintenanceplan", "driver-580", ".spec.paused");
    assert_eq!(paused, "true");
    let (ok, _, _) = maintain(&cluster, &["resume", "driver-580"]);
    assert!(ok);
}

/// A Job that tolerates no failure but ignores disruptions.
const GUARDED_JOB: &str = "apiVersion: batch/v1
kind: Job
metadata: {name: guarded}
spec:
  backoffLimit: 0
  podFailurePolicy:
    rules:
    - action: Ignore
      onPodConditions: [{type: DisruptionTarget, status: \"True\"}]
  template:
    metadata:
      annotations: {sim.tessera.dev/duration: 1h}
    spec:
      restartPolicy: Never
      containers: [{name: work, image: worker:1}]
";

#[test]
fn maintain_eviction_is_a_disruption_a_job_failure_policy_ignores() {
    let cluster = Cluster::start();
    let _ = kubectl_binary(KUBECTL);
    cluster.ok_stdin(KUBECTL, &["apply", "-f", "-"], GUARDED_JOB);
    let running_pods = [
        "get",
        "pods",
        "-l",
        "job-name=guarded",
        "--field-selector=status.phase=Running",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ];
    let first = cluster.wait_for(KUBECTL, &running_pods, |out| !out.trim().is_empty());
    let first = first.trim().to_string();
    let node = field(&cluster, "pod", &first, ".spec.nodeName");
    // kubectl drain evicts through pods/eviction: the pod is marked, then stopped.
    cluster.ok(
        KUBECTL,
        &[
            "drain",
            &node,
            "--pod-selector=job-name=guarded",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
        ],
    );
    // The evicted pod is gone and a replacement runs: the disruption was not a failure.
    let all_pods = [
        "get",
        "pods",
        "-l",
        "job-name=guarded",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ];
    cluster.wait_for(KUBECTL, &all_pods, |out| {
        !out.split_whitespace().any(|name| name == first)
    });
    cluster.wait_for(KUBECTL, &running_pods, |out| {
        out.split_whitespace().any(|name| name != first)
    });
    let failed = field(&cluster, "job", "guarded", ".status.failed");
    assert!(matches!(failed.as_str(), "" | "0"), "failed: {failed}");
    let conditions = field(&cluster, "job", "guarded", ".status.conditions[*].type");
    assert!(!conditions.contains("Failed"), "{conditions}");
}
