//! `tessera sim`: an FGD experiment and a small grid on tiny traces, rows in the artifact's
//! layout; bad traces rejected with file, line and column, and a grid writes nothing when a
//! run fails. `tessera sim run`: a timed trace that queues, and Kubernetes manifests on the lab
//! topology placed by the scheduling core, with the event log, summary and report.

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

#[test]
fn a_timed_trace_waits_for_room_and_writes_log_summary_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = dir.path().join("nodes.csv");
    std::fs::write(
        &nodes,
        "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,1,T4\n",
    )
    .unwrap();
    // One GPU: a holds it 0–100; b arrives at 10 and waits until 100; c (no GPU) runs at once.
    let pods = dir.path().join("pods.csv");
    std::fs::write(
        &pods,
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\n\
         a,1000,1024,1,1000,0,100\nb,1000,1024,1,1000,10,60\nc,1000,1024,0,0,20,30\n",
    )
    .unwrap();
    let (events, summary, report) = (
        dir.path().join("events.jsonl"),
        dir.path().join("summary.json"),
        dir.path().join("report.html"),
    );
    let (ok, out, error) = tessera(&[
        "sim",
        "run",
        "--cluster",
        nodes.to_str().unwrap(),
        "--workload",
        pods.to_str().unwrap(),
        "--policy",
        "bestfit",
        "--events",
        events.to_str().unwrap(),
        "--summary",
        summary.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(ok, "{error}");
    assert!(
        out.contains("3 pods, 3 placed, 3 completed, 0 failed, 0 still waiting"),
        "{out}"
    );
    assert!(out.contains("makespan 2m 30s"), "{out}");
    let log = std::fs::read_to_string(&events).unwrap();
    let placed_b = log
        .lines()
        .find(|l| l.contains("\"pod\":\"b\"") && l.contains("\"event\":\"placed\""))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        placed_b.contains("\"time\":100") && placed_b.contains("\"waited\":90"),
        "{placed_b}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(summary["overall"]["completed"], 3);
    assert_eq!(summary["namespaces"]["openb"]["placed"], 3);
    assert_eq!(summary["makespan"], 150);
    let page = std::fs::read_to_string(&report).unwrap();
    assert!(
        page.contains("<svg") && !page.contains("<script src"),
        "self-contained"
    );
}

#[test]
fn manifests_run_on_a_topology_through_the_scheduling_core() {
    let dir = tempfile::tempdir().unwrap();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sim/teams.yaml");
    let summary = dir.path().join("summary.json");
    let (ok, out, error) = tessera(&[
        "sim",
        "run",
        "--workload",
        example,
        "--summary",
        summary.to_str().unwrap(),
    ]);
    assert!(ok, "{error}");
    assert!(
        out.starts_with("teams on the lab, default-scheduler"),
        "{out}"
    );
    assert!(
        out.contains("57 pods, 57 placed, 57 completed, 0 failed, 0 still waiting, 1 preempted"),
        "{out}"
    );
    // Deterministic: the same inputs give the same event log, byte for byte.
    let logs: Vec<String> = (0..2)
        .map(|i| {
            let events = dir.path().join(format!("events-{i}.jsonl"));
            let (ok, _, error) = tessera(&[
                "sim",
                "run",
                "--workload",
                example,
                "--events",
                events.to_str().unwrap(),
            ]);
            assert!(ok, "{error}");
            std::fs::read_to_string(&events).unwrap()
        })
        .collect();
    assert_eq!(logs[0], logs[1]);
    assert_eq!(logs[0].lines().count(), 178);
    // The release evaluation preempts a pre-training run, which runs again later; the
    // fine-tune gang's four workers are placed at one moment.
    assert!(
        logs[0].contains(r#""pod":"pretrain-2","event":"preempted","by":"serving/release-eval-0""#),
        "{}",
        logs[0]
    );
    let gang_times: std::collections::BTreeSet<&str> = logs[0]
        .lines()
        .filter(|l| l.contains(r#""pod":"finetune-"#) && l.contains(r#""event":"placed""#))
        .filter_map(|l| l.split(r#""time":"#).nth(1)?.split(',').next())
        .collect();
    assert_eq!(gang_times.len(), 1, "{gang_times:?}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    // Two DGX H100s for three 8-GPU runs at a time: the third waits for the first to end.
    assert_eq!(summary["namespaces"]["research"]["pods"], 50);
    assert_eq!(summary["namespaces"]["research"]["preempted"], 1);
    assert!(
        summary["namespaces"]["research"]["meanWait"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert_eq!(summary["namespaces"]["serving"]["meanWait"], 0.0);
    assert_eq!(summary["totalGpus"], 36);

    // A manifest the simulator cannot take names file, line and document; nothing is written.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: []}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
    )
    .unwrap();
    let out_file = dir.path().join("events.jsonl");
    let (ok, _, error) = tessera(&[
        "sim",
        "run",
        "--workload",
        bad.to_str().unwrap(),
        "--events",
        out_file.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        error.contains("bad.yaml:6: document 2: kind Service (v1) is not simulated"),
        "{error}"
    );
    assert!(!out_file.exists());
    // A trace needs an openb cluster.
    let (ok, _, error) = tessera(&["sim", "run", "--workload", "pods.csv"]);
    assert!(!ok);
    assert!(
        error.contains("an openb node list (.csv) takes one openb pod list"),
        "{error}"
    );
}
