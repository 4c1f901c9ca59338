//! `tessera check compat` against the embedded platform: its nodes as they are hold no
//! conflict; an installed GPU operator whose release lists other drivers, a Kubernetes upgrade
//! that leaves kubelets too far behind, and a driver too old for the GPUs are each named per
//! node with the rule and the matrix row's source.

use std::process::Command;

use crate::support::{Cluster, outcome};

fn check_compat(cluster: &Cluster, args: &[&str]) -> (bool, String, String) {
    outcome(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["check", "compat", "--exit-code", "--kubeconfig"])
            .arg(cluster.kubeconfig())
            .args(args)
            .output()
            .expect("run tessera check compat"),
    )
}

const GPU_NODES: [&str; 5] = ["h100-1", "h100-2", "h200-1", "h200-2", "l40s-1"];

#[test]
fn check_compat_names_each_conflict_as_it_is_and_after_a_plan() {
    let cluster = Cluster::start();
    let (ok, out, err) = check_compat(&cluster, &[]);
    assert!(ok, "{out}{err}");
    assert_eq!(out, "No compatibility conflicts found.\n");

    // (arguments, rule, nodes named, whether only after the plan)
    let cases: [(&[&str], &str, &[&str], bool); 3] = [
        (
            &["--gpu-operator", "25.10.1"],
            "(driver-not-in-operator-release)",
            &GPU_NODES,
            false,
        ),
        (
            &["--plan", "kubernetes=1.38.0"],
            "(kubelet-too-old)",
            &["control-plane-1", "cpu-1", "cpu-2", "h100-1", "l40s-1"],
            true,
        ),
        (
            &["--plan", "driver=515.65.01"],
            "(driver-too-old-for-architecture)",
            &GPU_NODES,
            true,
        ),
    ];
    for (args, rule, nodes, planned) in cases {
        let (ok, out, err) = check_compat(&cluster, args);
        assert!(!ok, "--exit-code fails on a conflict: {args:?} {out}{err}");
        for node in nodes {
            let line = out
                .lines()
                .find(|l| l.contains(&format!("node/{node}:")) && l.contains(rule))
                .unwrap_or_else(|| panic!("{args:?}: no {rule} line for {node} in\n{out}"));
            assert_eq!(
                line.starts_with("after the planned change: "),
                planned,
                "{line}"
            );
            assert!(line.contains("; source https://"), "{line}");
        }
    }
    let (ok, _, err) = check_compat(&cluster, &["--plan", "firmware=1.0"]);
    assert!(!ok);
    assert!(
        err.contains("not one of driver, kubernetes, gpu-operator, kueue"),
        "{err}"
    );
}
