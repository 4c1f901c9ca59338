//! Models delivered to pods (issue 21, deliverable 4): a generated model pushed to the store,
//! pods with model volumes pulling it through their twins' node caches (origin, then peers,
//! then the cache itself, as their `Pulled` events tell), eight twins pulling one model at
//! once with the origin read about once, a missing model's warning, a bad request's failure,
//! `tessera model pull` pre-pulling onto a node and `tessera model ls --node`, the nodes'
//! `status.images`, and ModelLocality placing a replica on the node holding the model.

use std::process::{Command, Output};
use std::time::Duration;

use crate::support::{Cluster, outcome};

fn tessera(cluster: &Cluster, args: &[&str]) -> Output {
    cluster.tessera(args)
}

/// `tessera model generate` (it needs no cluster).
fn generate(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["model", "generate"])
        .args(args)
        .output()
        .expect("run tessera");
    let (ok, stdout, stderr) = outcome(output);
    assert!(ok, "tessera model generate {args:?} failed:\n{stderr}");
    stdout
}

fn tessera_ok(cluster: &Cluster, args: &[&str]) -> String {
    let (ok, stdout, stderr) = outcome(tessera(cluster, args));
    assert!(
        ok,
        "tessera {args:?} failed:\n{stderr}\n--- server log ---\n{}",
        cluster.server_log()
    );
    stdout
}

/// A pod on `node` (bound directly) with a model volume.
fn model_pod(name: &str, node: Option<&str>, model: &str, cpu: &str) -> String {
    let placement = match node {
        Some(node) => format!("  nodeName: {node}\n"),
        None => "  nodeSelector: {tessera.dev/pool: cpu}\n".to_owned(),
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n{placement}  tolerations: [{{operator: Exists}}]\n  containers:\n  - name: server\n    image: vllm/vllm-openai:v0.8.0\n    resources: {{requests: {{cpu: \"{cpu}\"}}}}\n    volumeMounts: [{{name: weights, mountPath: /models}}]\n  volumes:\n  - name: weights\n    csi:\n      driver: model.csi.tessera.dev\n      readOnly: true\n      volumeAttributes: {{model: {model}, revision: main}}\n"
    )
}

/// The pod's events of `reason`, messages one a line.
fn events(cluster: &Cluster, version: &str, pod: &str, reason: &str) -> String {
    let selector = format!("involvedObject.name={pod},reason={reason}");
    cluster.ok(
        version,
        &[
            "get",
            "events",
            "--field-selector",
            &selector,
            "-o",
            "jsonpath={range .items[*]}{.type} {.message}{\"\\n\"}{end}",
        ],
    )
}

fn wait_for_event(cluster: &Cluster, pod: &str, reason: &str) -> String {
    let selector = format!("involvedObject.name={pod},reason={reason}");
    cluster.wait_for_within(
        "1.33",
        &[
            "get",
            "events",
            "--field-selector",
            &selector,
            "-o",
            "jsonpath={range .items[*]}{.type} {.message}{\"\\n\"}{end}",
        ],
        Duration::from_secs(60),
        |out| !out.trim().is_empty(),
    )
}

/// The origin bytes `tessera model ls --node` reports for `node`.
fn origin_bytes(cluster: &Cluster, node: &str) -> u64 {
    let listing = tessera_ok(cluster, &["model", "ls", "--node", node]);
    let first = listing.lines().next().unwrap_or_default();
    // "Node X: U of C bytes used; O bytes from the origin, …"
    first
        .split("; ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no origin bytes in {listing}"))
}

#[test]
fn pods_get_models_through_the_node_caches() {
    let cluster = Cluster::start();
    let model_dir = cluster.dir.path().join("tiny");
    let generated = generate(&[
        model_dir.to_str().unwrap(),
        "--model",
        "lab/tiny",
        "--size",
        "24Mi",
        "--shard-size",
        "10Mi",
    ]);
    assert!(generated.contains("3 shards"), "{generated}");
    tessera_ok(
        &cluster,
        &[
            "model",
            "push",
            model_dir.to_str().unwrap(),
            "--model",
            "lab/tiny",
        ],
    );

    // From the origin on cpu-2.
    cluster.ok_stdin(
        "1.33",
        &["apply", "-f", "-"],
        &model_pod("first", Some("cpu-2"), "lab/tiny", "1"),
    );
    let pulling = wait_for_event(&cluster, "first", "Pulling");
    assert!(
        pulling.contains("Normal Pulling model lab/tiny@main (6 files, "),
        "{pulling}"
    );
    assert_eq!(cluster.node_when_running("1.33", None, "first"), "cpu-2");
    let pulled = events(&cluster, "1.33", "first", "Pulled");
    assert!(
        pulled.contains("Successfully pulled model lab/tiny@main in ")
            && pulled.contains("24.0 MiB from the origin, 0 B from peers, 0 B already cached"),
        "{pulled}"
    );
    // The node lists the model in status.images.
    cluster.wait_for_within(
        "1.29",
        &[
            "get",
            "node",
            "cpu-2",
            "-o",
            "jsonpath={.status.images[*].names[0]}",
        ],
        Duration::from_secs(20),
        |out| out.contains("model.tessera.dev/lab/tiny:main"),
    );
    let listing = tessera_ok(&cluster, &["model", "ls", "--node", "cpu-2"]);
    assert!(listing.contains("lab/tiny"), "{listing}");
    // The running pod pins its blobs.
    let pinned_rows = listing
        .lines()
        .filter(|l| l.starts_with("sha256:") && l.split_whitespace().nth(2) == Some("1"))
        .count();
    assert_eq!(pinned_rows, 6, "{listing}");

    // From cpu-2's cache on h100-1 (peer to peer), then from h100-1's own cache.
    cluster.ok_stdin(
        "1.29",
        &["apply", "-f", "-"],
        &model_pod("second", Some("h100-1"), "lab/tiny", "1"),
    );
    cluster.node_when_running("1.29", None, "second");
    let pulled = events(&cluster, "1.29", "second", "Pulled");
    // Nothing more from the origin: the files came from peers (or were on h100-1 already,
    // when it was a file's seed for cpu-2), and the origin served the model once in all.
    assert!(
        pulled.contains("(24.0 MiB: 0 B from the origin, "),
        "{pulled}"
    );
    let nodes = [
        "cpu-1",
        "cpu-2",
        "h100-1",
        "h100-2",
        "h200-1",
        "h200-2",
        "l40s-1",
        "control-plane-1",
    ];
    let tiny_size: u64 = std::fs::read_dir(&model_dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let origin_total: u64 = nodes.iter().map(|n| origin_bytes(&cluster, n)).sum();
    assert_eq!(origin_total, tiny_size);
    cluster.ok_stdin(
        "1.33",
        &["apply", "-f", "-"],
        &model_pod("third", Some("h100-1"), "lab/tiny", "1"),
    );
    cluster.node_when_running("1.33", None, "third");
    let pulled = events(&cluster, "1.33", "third", "Pulled");
    assert!(pulled.contains("24.0 MiB already cached"), "{pulled}");
    // The Hugging Face view holds the model's files.
    let snapshots = cluster
        .dir
        .path()
        .join("node-cache/h100-1/hf/models--lab--tiny/snapshots");
    let linked = std::fs::read_dir(&snapshots)
        .unwrap_or_else(|e| panic!("{}: {e}", snapshots.display()))
        .any(|e| e.unwrap().path().join("config.json").exists());
    assert!(linked, "no config.json under {}", snapshots.display());

    // Eight twins at once: the origin is read about once.
    let wide_dir = cluster.dir.path().join("wide");
    generate(&[
        wide_dir.to_str().unwrap(),
        "--model",
        "lab/wide",
        "--size",
        "32Mi",
        "--shard-size",
        "16Mi",
    ]);
    tessera_ok(
        &cluster,
        &[
            "model",
            "push",
            wide_dir.to_str().unwrap(),
            "--model",
            "lab/wide",
        ],
    );
    let wide_size: u64 = std::fs::read_dir(&wide_dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let before: u64 = nodes.iter().map(|n| origin_bytes(&cluster, n)).sum();
    let manifest: String = nodes
        .iter()
        .map(|node| {
            format!(
                "---\n{}",
                model_pod(&format!("wide-{node}"), Some(node), "lab/wide", "10m")
            )
        })
        .collect();
    cluster.ok_stdin("1.33", &["apply", "-f", "-"], &manifest);
    for node in nodes {
        cluster.node_when_running("1.33", None, &format!("wide-{node}"));
    }
    let after: u64 = nodes.iter().map(|n| origin_bytes(&cluster, n)).sum();
    let read = after - before;
    assert!(
        read as f64 <= 1.05 * wide_size as f64,
        "the origin served {read} bytes for a model of {wide_size}"
    );
    assert!(read >= wide_size - 1024, "{read} < {wide_size}");

    // A missing model: a clear warning, and the pod waits in ContainerCreating.
    cluster.ok_stdin(
        "1.33",
        &["apply", "-f", "-"],
        &model_pod("missing", Some("cpu-1"), "lab/nothing", "10m"),
    );
    let failed = wait_for_event(&cluster, "missing", "Failed");
    assert!(
        failed.contains("Warning Failed to pull model lab/nothing@main: model lab/nothing@main not found in the store"),
        "{failed}"
    );
    let waiting = cluster.ok(
        "1.33",
        &[
            "get",
            "pod",
            "missing",
            "-o",
            "jsonpath={.status.phase} {.status.containerStatuses[0].state.waiting.reason}",
        ],
    );
    assert_eq!(waiting, "Pending ContainerCreating");
    wait_for_event(&cluster, "missing", "BackOff");

    // A request that does not read fails the pod's start naming the field.
    cluster.ok_stdin(
        "1.33",
        &["apply", "-f", "-"],
        &model_pod("bad", Some("cpu-1"), "lab/../x", "10m"),
    );
    let message = cluster.wait_for_within(
        "1.33",
        &[
            "get",
            "pod",
            "bad",
            "-o",
            "jsonpath={.status.phase} {.status.message}",
        ],
        Duration::from_secs(20),
        |out| out.starts_with("Failed"),
    );
    assert!(
        message.contains("spec.volumes[0].csi.volumeAttributes"),
        "{message}"
    );

    // Pre-pull onto a pool, then list the node's cache.
    let pulled = tessera_ok(
        &cluster,
        &[
            "model",
            "pull",
            "lab/tiny@main",
            "-l",
            "tessera.dev/pool=h200",
        ],
    );
    assert!(pulled.contains("pulled  h200-1  config.json"), "{pulled}");
    assert!(
        pulled.contains("Pulled lab/tiny@main onto 2 node(s) (6 files, "),
        "{pulled}"
    );
    let listing = tessera_ok(&cluster, &["model", "ls", "--node", "h200-2"]);
    assert!(listing.contains("lab/tiny"), "{listing}");
    cluster.wait_for_within(
        "1.33",
        &[
            "get",
            "node",
            "h200-2",
            "-o",
            "jsonpath={.status.images[*].names[0]}",
        ],
        Duration::from_secs(20),
        |out| out.contains("model.tessera.dev/lab/tiny:main"),
    );
    let missing = outcome(tessera(
        &cluster,
        &["model", "pull", "lab/nothing", "--node", "cpu-1"],
    ));
    assert!(!missing.0);
    assert!(
        missing.2.contains("not found in the store"),
        "{}",
        missing.2
    );

    // The missing model's pod retried meanwhile: one Failed event, counted up as the kubelet's
    // event recorder does, which kubectl describe shows as "(xN over …)".
    let counts = cluster.wait_for_within(
        "1.33",
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=missing,reason=Failed",
            "-o",
            "jsonpath={.items[*].count}",
        ],
        Duration::from_secs(40),
        |out| out.trim().parse::<u64>().is_ok_and(|n| n >= 2),
    );
    assert!(!counts.trim().contains(' '), "one event: {counts}");
    let described = cluster.ok("1.27", &["describe", "pod", "missing"]);
    let line = described
        .lines()
        .find(|l| l.contains("Failed to pull model lab/nothing@main"))
        .unwrap_or_else(|| panic!("{described}"));
    assert!(line.contains(" over "), "{line}");
}

#[test]
fn model_locality_places_a_replica_where_the_model_is() {
    let cluster = Cluster::start();
    let dir = cluster.dir.path().join("m");
    generate(&[dir.to_str().unwrap(), "--model", "lab/m", "--size", "4Mi"]);
    tessera_ok(
        &cluster,
        &["model", "push", dir.to_str().unwrap(), "--model", "lab/m"],
    );
    // cpu-2 holds the model and is the busier of the two cpu nodes.
    cluster.ok_stdin(
        "1.33",
        &["apply", "-f", "-"],
        &model_pod("one", Some("cpu-2"), "lab/m", "4"),
    );
    cluster.node_when_running("1.33", None, "one");
    cluster.wait_for_within(
        "1.33",
        &[
            "get",
            "node",
            "cpu-2",
            "-o",
            "jsonpath={.status.images[*].names[0]}",
        ],
        Duration::from_secs(20),
        |out| out.contains("model.tessera.dev/lab/m:main"),
    );
    cluster.ok_stdin(
        "1.29",
        &["apply", "-f", "-"],
        &model_pod("two", None, "lab/m", "1"),
    );
    assert_eq!(cluster.node_when_running("1.29", None, "two"), "cpu-2");
    let pulled = events(&cluster, "1.29", "two", "Pulled");
    assert!(pulled.contains("already cached"), "{pulled}");

    // KServe's storage initializer asks for a model the same way.
    cluster.ok_stdin(
        "1.33",
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: kserve}\nspec:\n  nodeName: cpu-1\n  initContainers:\n  - name: storage-initializer\n    image: kserve/storage-initializer:v0.14.0\n    args: [\"hf://lab/m\", /mnt/models]\n  containers:\n  - name: kserve-container\n    image: vllm/vllm-openai:v0.8.0\n",
    );
    cluster.node_when_running("1.33", None, "kserve");
    let pulled = events(&cluster, "1.33", "kserve", "Pulled");
    assert!(
        pulled.contains("Successfully pulled model lab/m@main in "),
        "{pulled}"
    );

    // The caches outlive a restart: cpu-2 still lists the model, and holds its blobs.
    let mut cluster = cluster;
    cluster.stop();
    cluster.launch(&[]);
    cluster.wait_for_within(
        "1.33",
        &[
            "get",
            "node",
            "cpu-2",
            "-o",
            "jsonpath={.status.images[*].names[0]}",
        ],
        Duration::from_secs(30),
        |out| out.contains("model.tessera.dev/lab/m:main"),
    );
    let listing = tessera_ok(&cluster, &["model", "ls", "--node", "cpu-2"]);
    assert!(listing.contains("lab/m "), "{listing}");
}

#[test]
fn a_model_evicted_for_another_leaves_the_nodes_images() {
    // Room for one 4 MiB model at a time: one stays under the 60 % low watermark (5.4 MiB),
    // two pass the 80 % high one (7.2 MiB).
    let cluster = Cluster::start_with_args(&["--node-cache-capacity", "9Mi"]);
    let node_images = |want: &str| {
        cluster.wait_for_within(
            "1.31",
            &[
                "get",
                "node",
                "cpu-1",
                "-o",
                "jsonpath={.status.images[*].names[0]}",
            ],
            Duration::from_secs(20),
            |out| out.trim() == want,
        )
    };
    for model in ["lab/first", "lab/second"] {
        let dir = cluster.dir.path().join(model.replace('/', "-"));
        generate(&[dir.to_str().unwrap(), "--model", model, "--size", "4Mi"]);
        tessera_ok(
            &cluster,
            &["model", "push", dir.to_str().unwrap(), "--model", model],
        );
    }
    tessera_ok(&cluster, &["model", "pull", "lab/first", "--node", "cpu-1"]);
    node_images("model.tessera.dev/lab/first:main");
    // Pre-pulls pin nothing: the second model evicts the first, and the node stops listing it.
    tessera_ok(
        &cluster,
        &["model", "pull", "lab/second", "--node", "cpu-1"],
    );
    node_images("model.tessera.dev/lab/second:main");
    let listing = tessera_ok(&cluster, &["model", "ls", "--node", "cpu-1"]);
    assert!(
        listing.contains("lab/second") && !listing.contains("lab/first"),
        "{listing}"
    );
    // A model past the high watermark (8 MiB) cannot stay: its pre-pull fails, saying why —
    // the node's own eviction, or its seed's, which evicted the blob before this node had it.
    let big = cluster.dir.path().join("big");
    generate(&[big.to_str().unwrap(), "--model", "lab/big", "--size", "8Mi"]);
    tessera_ok(
        &cluster,
        &["model", "push", big.to_str().unwrap(), "--model", "lab/big"],
    );
    let (ok, _, stderr) = outcome(tessera(
        &cluster,
        &["model", "pull", "lab/big", "--node", "cpu-2"],
    ));
    assert!(!ok);
    assert!(
        stderr.contains("model lab/big@main does not fit in the node's cache")
            || stderr
                .contains("it no longer holds the blob (evicted before this node had every piece)"),
        "{stderr}"
    );
}
