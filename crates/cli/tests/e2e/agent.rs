//! `tessera agent serve --exposure dra` on a recorded machine against the embedded platform:
//! it publishes the node's ResourceSlice and DeviceClasses through the API, registers with a
//! test kubelet's plugin watcher and prepares a claim that kubectl created and allocated,
//! answering CDI device IDs and writing the CDI spec.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tessera_plugins::proto::dra_v1;
use tessera_plugins::proto::pluginregistration::{
    InfoRequest, registration_client::RegistrationClient,
};
use tessera_plugins::socket;

use crate::support::Cluster;

struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_agent_publishes_slices_and_prepares_an_allocated_claim() {
    let topology = "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: cpu\n  count: 1\n  server: cpu-worker\n";
    let cluster = Cluster::start_with_topology(topology, 1);
    let v = "1.33";
    let kubelet = cluster.dir.path().join("kubelet");
    let arg = |p: &str| kubelet.join(p).to_string_lossy().into_owned();
    let root = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../discovery/tests/fixtures/sysfs-h100-pair"
    );
    let kubeconfig = cluster.kubeconfig().to_string_lossy().into_owned();
    let _agent = Agent(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["agent", "serve", "--exposure", "dra", "--root", root])
            .args(["--node-name", "gpu-node", "--kubeconfig", &kubeconfig])
            .args(["--plugins-registry-dir", &arg("plugins_registry")])
            .args(["--plugins-dir", &arg("plugins"), "--cdi-dir", &arg("cdi")])
            .args(["--poll-ms", "50"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the agent"),
    );

    // The slice the agent published, as kubectl lists it.
    let devices = cluster.wait_for(
        v,
        &[
            "get",
            "resourceslices",
            "--field-selector",
            "spec.nodeName=gpu-node",
            "-o",
            r#"jsonpath={.items[0].spec.driver} {.items[0].spec.devices[*].name}"#,
        ],
        |out| out.contains("gpu-1"),
    );
    assert_eq!(devices, "gpu.nvidia.com gpu-0 gpu-1");
    cluster.ok(v, &["get", "deviceclass", "gpu.nvidia.com"]);

    // A claim for both GPUs, allocated to the node (what the scheduler will do).
    cluster.ok_stdin(
        v,
        &["apply", "-f", "-"],
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: two-gpus}\nspec:\n  devices:\n    requests:\n    - name: gpus\n      exactly: {deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: 2}\n",
    );
    let allocation = r#"{"status":{"allocation":{"devices":{"results":[
        {"request":"gpus","driver":"gpu.nvidia.com","pool":"gpu-node","device":"gpu-0"},
        {"request":"gpus","driver":"gpu.nvidia.com","pool":"gpu-node","device":"gpu-1"}]}}}}"#;
    cluster.ok(
        v,
        &[
            "patch",
            "resourceclaim",
            "two-gpus",
            "--subresource=status",
            "--type=merge",
            "-p",
            allocation,
        ],
    );
    let uid = cluster.ok(
        v,
        &[
            "get",
            "resourceclaim",
            "two-gpus",
            "-o",
            "jsonpath={.metadata.uid}",
        ],
    );

    // The kubelet's side: the plugin watcher registers the driver, then prepares the claim.
    wait_for_file(&kubelet.join("plugins_registry/gpu.nvidia.com-reg.sock"));
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let prepared = runtime.block_on(async {
        let registry = kubelet.join("plugins_registry/gpu.nvidia.com-reg.sock");
        let info = RegistrationClient::new(socket::connect(&registry).await.expect("registry"))
            .get_info(InfoRequest {})
            .await
            .expect("GetInfo")
            .into_inner();
        assert_eq!(
            (info.r#type.as_str(), info.name.as_str()),
            ("DRAPlugin", "gpu.nvidia.com")
        );
        let plugin = socket::connect(Path::new(&info.endpoint))
            .await
            .expect("dra.sock");
        dra_v1::dra_plugin_client::DraPluginClient::new(plugin)
            .node_prepare_resources(dra_v1::NodePrepareResourcesRequest {
                claims: vec![dra_v1::Claim {
                    namespace: "default".into(),
                    uid: uid.clone(),
                    name: "two-gpus".into(),
                }],
            })
            .await
            .expect("NodePrepareResources")
            .into_inner()
    });
    let answer = &prepared.claims[&uid];
    assert_eq!(answer.error, "");
    let cdi_ids: Vec<&str> = answer
        .devices
        .iter()
        .flat_map(|d| d.cdi_device_ids.iter().map(String::as_str))
        .collect();
    assert_eq!(
        cdi_ids,
        [
            format!("k8s.gpu.nvidia.com/claim={uid}-gpu-0"),
            format!("k8s.gpu.nvidia.com/claim={uid}-gpu-1")
        ]
    );
    let spec =
        std::fs::read_to_string(kubelet.join(format!("cdi/k8s.gpu.nvidia.com-claim_{uid}.json")))
            .expect("CDI spec");
    assert!(spec.contains("\"NVIDIA_VISIBLE_DEVICES=1\""), "{spec}");
    assert!(spec.contains("/dev/nvidia1"), "{spec}");
}
