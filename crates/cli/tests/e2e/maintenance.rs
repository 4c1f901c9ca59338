//! `tessera maintain plan` (the dry run) against the embedded platform: a node rotation of the
//! h100 pool refused while a PodDisruptionBudget allows no disruption (naming the budget), the
//! same plan staged (canary, then a batch) once the budget has room, a MIG layout that does not
//! fit the h200 pool's GPUs refused naming node and model, and a mistyped plan file named with
//! its file, line and field.

use std::process::Command;

use crate::support::{Cluster, kubectl_binary, outcome};

const KUBECTL: &str = "1.33";

fn maintain_plan(cluster: &Cluster, plan: &str) -> (bool, String, String) {
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
const WEB: &str = "apiVersion: apps/v1
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
    cluster.ok_stdin(KUBECTL, &["apply", "-f", "-"], WEB);
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
