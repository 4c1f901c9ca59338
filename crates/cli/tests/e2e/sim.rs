//! `tessera sim`: an FGD experiment and a small grid on tiny traces, rows in the artifact's
//! layout; bad traces rejected with file, line and column, and a grid writes nothing when a
//! run fails.

use std::process::Command;

use crate::support::outcome;

fn tessera(args: &[&str]) -> (bool, String, String) {
    outcome(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(args)
            .output()
            .expect("tessera"),
    )
}

const NODES: &str = "sn,cpu_milli,memory_mib,gpu,model\n\
    n0,64000,262144,2,T4\nn1,96000,524288,8,G2\nn2,64000,262144,4,V100M16\n";
const PODS: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n\
    p0,4000,8192,1,500,\np1,8000,16384,1,1000,\np2,16000,32768,4,1000,\np3,2000,4096,0,0,\n\
    p4,6000,12288,1,250,T4\np5,12000,24576,2,1000,G2|V100M16\n";

#[test]
fn experiments_write_the_artifacts_rows() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = dir.path().join("nodes.csv");
    let pods_dir = dir.path().join("pods");
    std::fs::create_dir(&pods_dir).unwrap();
    let pods = pods_dir.join("openb_pod_list_tiny.csv");
    std::fs::write(&nodes, NODES).unwrap();
    std::fs::write(&pods, PODS).unwrap();
    let out = dir.path().join("rows.csv");
    let (n, p, o) = (
        nodes.to_str().unwrap(),
        pods.to_str().unwrap(),
        out.to_str().unwrap(),
    );
    for policy in ["fgd", "tessera"] {
        let (ok, _, error) = tessera(&[
            "sim", "fgd", "--nodes", n, "--pods", p, "--policy", policy, "--seed", "7", "--out", o,
        ]);
        assert!(ok, "{error}");
        assert!(error.contains("openb_pod_list_tiny"), "{error}");
    }
    let rows = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = rows.lines().collect();
    assert_eq!(lines.len(), 3, "a header, then one row per run: {rows}");
    assert!(lines[0].starts_with("workload,sc_policy,tune,seed,total_gpus,0,1,2,"));
    assert!(lines[0].ends_with(",129,130"));
    assert!(
        lines[1].starts_with("openb_pod_list_tiny,06-FGD,1.3,7,14,"),
        "{}",
        lines[1]
    );
    assert!(lines[2].starts_with("openb_pod_list_tiny,07-Tessera,1.3,7,14,"));
    assert_eq!(lines[1].split(',').count(), 136);

    let grid = dir.path().join("grid.csv");
    let (ok, summary, error) = tessera(&[
        "sim",
        "fgd-grid",
        "--nodes",
        n,
        "--pods-dir",
        pods_dir.to_str().unwrap(),
        "--policies",
        "bestfit,fgd",
        "--seeds",
        "1..3",
        "--out",
        grid.to_str().unwrap(),
    ]);
    assert!(ok, "{error}");
    assert!(
        summary.contains("| workload | 05-BestFit | 06-FGD |"),
        "{summary}"
    );
    assert!(
        error.contains("6 runs (1 workloads × 2 policies × 3 seeds)"),
        "{error}"
    );
    assert_eq!(std::fs::read_to_string(&grid).unwrap().lines().count(), 7);
}

#[test]
fn bad_traces_are_named_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = dir.path().join("nodes.csv");
    std::fs::write(&nodes, NODES).unwrap();
    let bad = dir.path().join("pods.csv");
    std::fs::write(
        &bad,
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1,1,500\np1,-3,1,0,0\n",
    )
    .unwrap();
    let out = dir.path().join("rows.csv");
    let (ok, _, error) = tessera(&[
        "sim",
        "fgd",
        "--nodes",
        nodes.to_str().unwrap(),
        "--pods",
        bad.to_str().unwrap(),
        "--policy",
        "fgd",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        error.contains("pods.csv:3: cpu_milli: -3 is out of range"),
        "{error}"
    );
    assert!(!out.exists(), "nothing is written for a bad trace");

    let (ok, _, error) = tessera(&[
        "sim",
        "fgd",
        "--nodes",
        nodes.to_str().unwrap(),
        "--pods",
        bad.to_str().unwrap(),
        "--policy",
        "worstfit",
    ]);
    assert!(!ok);
    assert!(error.contains("unknown policy \"worstfit\""), "{error}");

    // A grid over a folder with one good and one bad trace writes nothing.
    let pods_dir = dir.path().join("pods");
    std::fs::create_dir(&pods_dir).unwrap();
    std::fs::write(pods_dir.join("openb_pod_list_good.csv"), PODS).unwrap();
    std::fs::write(pods_dir.join("openb_pod_list_bad.csv"), "name,cpu_milli\n").unwrap();
    let grid = dir.path().join("grid.csv");
    let (ok, _, error) = tessera(&[
        "sim",
        "fgd-grid",
        "--nodes",
        nodes.to_str().unwrap(),
        "--pods-dir",
        pods_dir.to_str().unwrap(),
        "--seeds",
        "1",
        "--out",
        grid.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        error.contains("openb_pod_list_bad.csv: missing column \"memory_mib\""),
        "{error}"
    );
    assert!(!grid.exists());
}
