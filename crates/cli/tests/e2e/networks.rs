//! Traffic separation on the networks lab (examples/lab/networks/lab.yaml) with kubectl:
//! Multus's NetworkAttachmentDefinitions, a training pod whose claim pairs a GPU with the
//! RDMA NIC on its PCIe switch and whose `network-status` names its secondary networks, and a
//! pod selecting a definition that does not exist (ContainerCreating, `NoNetworkFound`) until
//! it is created; then probes over the storage network, judged by its MultiNetworkPolicy.

use serde_json::Value;

use crate::support::Cluster;

const V: &str = "1.33";

const LAB: &str = include_str!("../../../../examples/lab/networks/lab.yaml");
const MANIFESTS: &str = include_str!("../../../../examples/lab/networks/training.yaml");
const STORAGE_POLICY: &str = include_str!("../../../../examples/lab/networks/storage-policy.yaml");

fn json(cluster: &Cluster, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    serde_json::from_str(&cluster.ok(V, &args)).expect("kubectl JSON")
}

/// A device's PCIe root as its node's slice of `driver` publishes it.
fn pcie_root(cluster: &Cluster, node: &str, driver: &str, device: &str) -> String {
    let slice = json(
        cluster,
        &["get", "resourceslice", &format!("{node}-{driver}")],
    );
    slice["spec"]["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|d| d["name"] == device)
        .and_then(|d| d["attributes"]["resource.kubernetes.io/pcieRoot"]["string"].as_str())
        .unwrap_or_else(|| panic!("{driver}/{device} on {node} has no pcieRoot: {slice}"))
        .to_string()
}

#[test]
fn a_training_pod_gets_a_gpu_and_the_nic_on_its_switch_and_its_networks() {
    let cluster = Cluster::start_with_topology(LAB, 8);
    cluster.ok_stdin(V, &["apply", "-f", "-"], MANIFESTS);
    let node = cluster.node_when_running(V, Some("ml"), "trainer");
    assert!(node.starts_with("h100-"), "{node}");

    // The claim names one GPU and one NIC, on the same PCIe root.
    let pod = json(&cluster, &["get", "pod", "-n", "ml", "trainer"]);
    let claim_name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        .as_str()
        .expect("a generated claim")
        .to_string();
    let claim = json(&cluster, &["get", "resourceclaim", "-n", "ml", &claim_name]);
    let results: Vec<(String, String, String)> =
        claim["status"]["allocation"]["devices"]["results"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                let text = |k: &str| r[k].as_str().unwrap_or_default().to_string();
                (text("request"), text("driver"), text("device"))
            })
            .collect();
    assert_eq!(results.len(), 2, "{claim}");
    let roots: Vec<String> = results
        .iter()
        .map(|(_, driver, device)| pcie_root(&cluster, &node, driver, device))
        .collect();
    assert_eq!(roots[0], roots[1], "{results:?}");
    assert_eq!(
        (results[0].1.as_str(), results[1].1.as_str()),
        ("gpu.nvidia.com", "rdma.tessera.dev")
    );

    // The network-status: the cluster network on eth0, then hpn and storage.
    let status_text = pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/network-status"]
        .as_str()
        .expect("network-status written")
        .to_string();
    let status: Vec<Value> = serde_json::from_str(&status_text).expect("JSON");
    let rows: Vec<(String, String, bool)> = status
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or_default().to_string(),
                s["interface"].as_str().unwrap_or_default().to_string(),
                s["default"] == true,
            )
        })
        .collect();
    let row = |n: &str, i: &str, d: bool| (n.to_string(), i.to_string(), d);
    assert_eq!(
        rows,
        [
            row("tessera-pod-network", "eth0", true),
            row("ml/hpn", "net1", false),
            row("ml/storage", "net2", false),
        ]
    );
    let ip = |i: usize| status[i]["ips"][0].as_str().unwrap_or_default().to_string();
    assert_eq!(ip(0), pod["status"]["podIP"].as_str().unwrap_or_default());
    assert!(ip(1).starts_with("172.30."), "{status_text}");
    assert!(ip(2).starts_with("172.17."), "{status_text}");

    // A definition that does not exist: ContainerCreating and Multus's event.
    cluster.wait_for(V, &["get", "pod", "-n", "ml", "lost"], |out| {
        out.contains("ContainerCreating")
    });
    cluster.wait_for(
        V,
        &[
            "get",
            "events",
            "-n",
            "ml",
            "--field-selector",
            "reason=NoNetworkFound",
            "-o",
            "jsonpath={.items[*].message}",
        ],
        |out| {
            out.contains("cannot find a network-attachment-definition (backup) in namespace (ml)")
        },
    );
    // Once the definition exists the pod is attached and starts, as the kubelet retries.
    cluster.ok_stdin(
        V,
        &["apply", "-f", "-"],
        "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata: {name: backup, namespace: ml}\nspec:\n  config: '{\"cniVersion\": \"0.3.1\", \"name\": \"storage\", \"type\": \"macvlan\"}'\n",
    );
    cluster.node_when_running(V, Some("ml"), "lost");
    let lost = json(&cluster, &["get", "pod", "-n", "ml", "lost"]);
    let status = lost["metadata"]["annotations"]["k8s.v1.cni.cncf.io/network-status"]
        .as_str()
        .unwrap_or_default();
    assert!(status.contains("\"ml/backup\""), "{status}");

    // Probes over the storage network: only attached pods have a route, and its
    // MultiNetworkPolicy (not the cluster network's policies) decides. Nothing listens on
    // 2049 in these containers, so a probe that gets through is refused, one dropped times out.
    cluster.ok_stdin(V, &["apply", "-f", "-"], STORAGE_POLICY);
    cluster.node_when_running(V, Some("ml"), "loader");
    let storage_ip = |pod: &str| {
        let pod = json(&cluster, &["get", "pod", "-n", "ml", pod]);
        let text = pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/network-status"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let statuses: Vec<Value> = serde_json::from_str(&text).unwrap_or_default();
        statuses
            .iter()
            .find(|s| s["name"] == "ml/storage")
            .and_then(|s| s["ips"][0].as_str())
            .unwrap_or_else(|| panic!("not on ml/storage: {text}"))
            .split('/')
            .next()
            .unwrap_or_default()
            .to_string()
    };
    let (trainer_ip, loader_ip) = (storage_ip("trainer"), storage_ip("loader"));
    let probe = |from: &str, target: String| {
        let output = cluster.kubectl(
            V,
            &[
                "exec",
                "-n",
                "ml",
                from,
                "--",
                "/agnhost",
                "connect",
                &target,
                "--timeout=1s",
            ],
        );
        String::from_utf8_lossy(&output.stderr)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    };
    for (from, target, expected) in [
        ("loader", format!("{trainer_ip}:2049"), "REFUSED"),
        ("loader", format!("{trainer_ip}:22"), "TIMEOUT"),
        // Not isolated on the storage network.
        ("trainer", format!("{loader_ip}:22"), "REFUSED"),
        // `lost` is on ml/backup, not ml/storage: no route.
        ("lost", format!("{trainer_ip}:2049"), "TIMEOUT"),
    ] {
        // The dataplane learns of the policy through its watches: probe until it agrees.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut last = probe(from, target.clone());
        while last != expected && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(300));
            last = probe(from, target.clone());
        }
        assert_eq!(last, expected, "{from} -> {target}");
    }
}
