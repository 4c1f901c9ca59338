//! The kubelet-side protocols spoken over real unix sockets with the kubelet's protos: a test
//! kubelet registers and drives the device plugin and the DRA plugin, restarts, and checks
//! that the plugins register again and keep their state.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::resource::v1::ResourceClaim;
use tessera_devices::{Catalog, GpuTopology};
use tessera_plugins::cdi;
use tessera_plugins::device_plugin::{DevicePluginSpec, GpuDevicePlugin, PluginDevice};
use tessera_plugins::dra_plugin::{ClaimSource, DraDevice, DraKubeletPlugin, DraPluginSpec};
use tessera_plugins::lifecycle::{
    self, DevicePluginEndpoint, DraEndpoint, PluginError, RegistrationService,
};
use tessera_plugins::proto::deviceplugin::{
    self as dp, device_plugin_client::DevicePluginClient, registration_server,
};
use tessera_plugins::proto::pluginregistration::{
    InfoRequest, RegistrationStatus, registration_client::RegistrationClient,
};
use tessera_plugins::proto::{dra_v1, dra_v1beta1};
use tessera_plugins::socket;
use tokio::sync::{mpsc, oneshot};
use tonic::transport::Server;

const WAIT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(20);

/// The kubelet's side of device-plugin registration: records requests, or refuses them.
struct TestKubelet {
    registered: mpsc::UnboundedSender<dp::RegisterRequest>,
    refuse: Option<String>,
}

#[tonic::async_trait]
impl registration_server::Registration for TestKubelet {
    async fn register(
        &self,
        request: tonic::Request<dp::RegisterRequest>,
    ) -> Result<tonic::Response<dp::Empty>, tonic::Status> {
        if let Some(reason) = &self.refuse {
            return Err(tonic::Status::invalid_argument(reason.clone()));
        }
        let _ = self.registered.send(request.into_inner());
        Ok(tonic::Response::new(dp::Empty {}))
    }
}

/// Starts a test kubelet on `<dir>/kubelet.sock`; dropping the sender stops it.
fn start_kubelet(
    dir: &Path,
    refuse: Option<&str>,
) -> (
    oneshot::Sender<()>,
    mpsc::UnboundedReceiver<dp::RegisterRequest>,
) {
    let (registered, requests) = mpsc::unbounded_channel();
    let service = TestKubelet {
        registered,
        refuse: refuse.map(String::from),
    };
    let path = dir.join(lifecycle::KUBELET_SOCKET);
    let (listener, bound) = socket::bind(&path).expect("kubelet socket");
    let (stop, stopped) = oneshot::channel::<()>();
    let router =
        Server::builder().add_service(registration_server::RegistrationServer::new(service));
    tokio::spawn(async move {
        let _ = socket::serve(router, listener, async {
            let _ = stopped.await;
        })
        .await;
        socket::remove_if_ours(&path, bound);
    });
    (stop, requests)
}

fn l40s_plugin() -> GpuDevicePlugin {
    let catalog = Catalog::built_in().expect("catalog");
    let server = catalog.server("pcie-l40s-4").expect("server");
    let devices = server
        .gpus
        .iter()
        .enumerate()
        .map(|(index, slot)| PluginDevice {
            id: format!("GPU-{index}"),
            index,
            numa: Some(slot.numa),
            healthy: true,
        })
        .collect();
    GpuDevicePlugin::new(
        DevicePluginSpec {
            resource_name: "nvidia.com/gpu".into(),
            visible_devices_env: "NVIDIA_VISIBLE_DEVICES".into(),
            cdi_kind: "nvidia.com/gpu".into(),
            topology: GpuTopology::of_server(server),
        },
        devices,
    )
}

async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

async fn plugin_client(path: &Path) -> DevicePluginClient<tonic::transport::Channel> {
    DevicePluginClient::new(socket::connect(path).await.expect("plugin socket"))
}

fn health(response: &dp::ListAndWatchResponse) -> Vec<(String, String, i64)> {
    response
        .devices
        .iter()
        .map(|d| {
            let numa = d
                .topology
                .as_ref()
                .and_then(|t| t.nodes.first())
                .map_or(-1, |n| n.id);
            (d.id.clone(), d.health.clone(), numa)
        })
        .collect()
}

fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn device_plugin_registers_serves_and_registers_again_after_a_kubelet_restart() {
    let dir = tempfile::tempdir().expect("dir");
    let plugins = dir.path().to_path_buf();
    let (kubelet, mut requests) = start_kubelet(&plugins, None);
    let plugin = l40s_plugin();
    let (shutdown, shutting_down) = oneshot::channel::<()>();
    let running = tokio::spawn(lifecycle::run_device_plugin(
        plugin.clone(),
        DevicePluginEndpoint {
            dir: plugins.clone(),
            socket_name: "nvidia-gpu.sock".into(),
            poll: POLL,
        },
        async {
            let _ = shutting_down.await;
        },
    ));

    let request = within("Register", requests.recv()).await.expect("request");
    assert_eq!(request.version, "v1beta1");
    assert_eq!(request.endpoint, "nvidia-gpu.sock");
    assert_eq!(request.resource_name, "nvidia.com/gpu");
    let options = request.options.expect("options");
    assert!(options.get_preferred_allocation_available && !options.pre_start_required);

    let own = plugins.join("nvidia-gpu.sock");
    let mut client = plugin_client(&own).await;
    let got = client
        .get_device_plugin_options(dp::Empty {})
        .await
        .expect("options")
        .into_inner();
    assert_eq!(got, options);

    // ListAndWatch: the full list first, then the full list again on a health change.
    let mut stream = client
        .list_and_watch(dp::Empty {})
        .await
        .expect("ListAndWatch")
        .into_inner();
    let first = within("device list", stream.message())
        .await
        .expect("ok")
        .expect("list");
    let healthy = |id: &str, numa| (id.to_string(), "Healthy".to_string(), numa);
    assert_eq!(
        health(&first),
        vec![
            healthy("GPU-0", 0),
            healthy("GPU-1", 0),
            healthy("GPU-2", 1),
            healthy("GPU-3", 1)
        ]
    );
    assert!(plugin.set_health("GPU-2", false));
    assert!(!plugin.set_health("GPU-9", false));
    let second = within("health change", stream.message())
        .await
        .expect("ok")
        .expect("list");
    assert_eq!(health(&second)[2], ("GPU-2".into(), "Unhealthy".into(), 1));

    // GetPreferredAllocation: the pair behind one PCIe switch, or the best partner of a
    // device that must be included.
    let preferred =
        |available: &[&str], must: &[&str], size| dp::ContainerPreferredAllocationRequest {
            available_device_i_ds: ids(available),
            must_include_device_i_ds: ids(must),
            allocation_size: size,
        };
    let answer = client
        .get_preferred_allocation(dp::PreferredAllocationRequest {
            container_requests: vec![
                preferred(&["GPU-3", "GPU-1", "GPU-0"], &[], 2),
                preferred(&["GPU-0", "GPU-1", "GPU-3"], &["GPU-3"], 2),
            ],
        })
        .await
        .expect("preferred")
        .into_inner();
    let sets: Vec<Vec<String>> = answer
        .container_responses
        .into_iter()
        .map(|c| c.device_i_ds)
        .collect();
    assert_eq!(
        sets,
        vec![ids(&["GPU-0", "GPU-1"]), ids(&["GPU-0", "GPU-3"])]
    );
    let too_many = client
        .get_preferred_allocation(dp::PreferredAllocationRequest {
            container_requests: vec![preferred(&["GPU-0"], &[], 2)],
        })
        .await
        .expect_err("too many");
    assert_eq!(too_many.code(), tonic::Code::InvalidArgument);

    // Allocate: env and CDI names per container; unknown or unhealthy devices refused.
    let allocate = |devices: &[&str]| dp::AllocateRequest {
        container_requests: vec![dp::ContainerAllocateRequest {
            devices_ids: ids(devices),
        }],
    };
    let allocated = client
        .allocate(allocate(&["GPU-0", "GPU-1"]))
        .await
        .expect("allocate")
        .into_inner();
    let container = &allocated.container_responses[0];
    assert_eq!(
        container
            .envs
            .get("NVIDIA_VISIBLE_DEVICES")
            .map(String::as_str),
        Some("GPU-0,GPU-1")
    );
    let cdi: Vec<&str> = container
        .cdi_devices
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(cdi, ["nvidia.com/gpu=GPU-0", "nvidia.com/gpu=GPU-1"]);
    let unknown = client
        .allocate(allocate(&["GPU-7"]))
        .await
        .expect_err("unknown");
    assert_eq!(unknown.code(), tonic::Code::InvalidArgument);
    assert!(unknown.message().contains("GPU-7"), "{}", unknown.message());
    let sick = client
        .allocate(allocate(&["GPU-2"]))
        .await
        .expect_err("unhealthy");
    assert_eq!(sick.code(), tonic::Code::FailedPrecondition);

    // Kubelet restart: it stops, wipes its directory and comes back with a new socket.
    let _ = kubelet.send(());
    for entry in std::fs::read_dir(&plugins).expect("dir") {
        let _ = std::fs::remove_file(entry.expect("entry").path());
    }
    let (_kubelet, mut requests) = start_kubelet(&plugins, None);
    let again = within("Register after restart", requests.recv())
        .await
        .expect("request");
    assert_eq!(again.resource_name, "nvidia.com/gpu");
    let mut client = plugin_client(&own).await;
    let list = within(
        "device list after restart",
        client.list_and_watch(dp::Empty {}),
    )
    .await
    .expect("ListAndWatch")
    .into_inner()
    .message()
    .await
    .expect("ok")
    .expect("list");
    assert_eq!(
        health(&list)[2].1,
        "Unhealthy",
        "health survives the restart"
    );

    let _ = shutdown.send(());
    within("plugin stop", running)
        .await
        .expect("join")
        .expect("clean stop");
    assert!(!own.exists(), "the plugin removes its socket when it stops");
}

#[tokio::test]
async fn device_plugin_stops_when_the_kubelet_refuses_it() {
    let dir = tempfile::tempdir().expect("dir");
    let (_kubelet, _requests) = start_kubelet(
        dir.path(),
        Some("resource name nvidia.com/gpu is already registered"),
    );
    let result = within(
        "refusal",
        lifecycle::run_device_plugin(
            l40s_plugin(),
            DevicePluginEndpoint {
                dir: dir.path().to_path_buf(),
                socket_name: "nvidia-gpu.sock".into(),
                poll: POLL,
            },
            std::future::pending(),
        ),
    )
    .await;
    match result {
        Err(PluginError::Refused { resource, message }) => {
            assert_eq!(resource, "nvidia.com/gpu");
            assert!(message.contains("already registered"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Claims held in memory, standing in for the API server.
#[derive(Clone, Default)]
struct Claims(Arc<Mutex<HashMap<(String, String), ResourceClaim>>>);

impl Claims {
    fn put(&self, claim: serde_json::Value) {
        let claim: ResourceClaim = serde_json::from_value(claim).expect("claim");
        let key = (
            claim.metadata.namespace.clone().unwrap_or_default(),
            claim.metadata.name.clone().unwrap_or_default(),
        );
        self.0.lock().expect("lock").insert(key, claim);
    }
}

impl ClaimSource for Claims {
    async fn claim(&self, namespace: &str, name: &str) -> Result<ResourceClaim, String> {
        self.0
            .lock()
            .expect("lock")
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| format!("resourceclaims.resource.k8s.io \"{name}\" not found"))
    }
}

fn dra_spec(root: &Path) -> DraPluginSpec {
    DraPluginSpec {
        driver: "gpu.nvidia.com".into(),
        node_name: "h100-1".into(),
        cdi_dir: root.join("cdi"),
        checkpoint_path: root.join("plugins/gpu.nvidia.com/checkpoint.json"),
        devices: (0..2)
            .map(|i| DraDevice {
                name: format!("gpu-{i}"),
                edits: cdi::ContainerEdits {
                    env: vec![format!("NVIDIA_VISIBLE_DEVICES=GPU-{i}")],
                    device_nodes: vec![cdi::DeviceNode {
                        path: format!("/dev/nvidia{i}"),
                    }],
                },
            })
            .collect(),
    }
}

fn claim_ref(name: &str, uid: &str) -> dra_v1::Claim {
    dra_v1::Claim {
        namespace: "ml".into(),
        uid: uid.into(),
        name: name.into(),
    }
}

struct RunningDra {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), PluginError>>,
    registration: RegistrationService,
}

fn start_dra(
    root: &Path,
    claims: Claims,
) -> (RunningDra, DraKubeletPlugin<Claims>, Option<String>) {
    let endpoint = DraEndpoint {
        registry_dir: root.join("plugins_registry"),
        plugin_dir: root.join("plugins/gpu.nvidia.com"),
        poll: POLL,
    };
    let (_, plugin_socket) = lifecycle::dra_sockets("gpu.nvidia.com", &endpoint);
    let registration = RegistrationService::dra("gpu.nvidia.com", &plugin_socket);
    let (plugin, warning) = DraKubeletPlugin::new(dra_spec(root), claims);
    let (stop, stopped) = oneshot::channel::<()>();
    let task = {
        let plugin = plugin.clone();
        let registration = registration.clone();
        tokio::spawn(async move {
            lifecycle::run_dra_plugin(plugin, registration, "gpu.nvidia.com", endpoint, async {
                let _ = stopped.await;
            })
            .await
        })
    };
    (
        RunningDra {
            stop,
            task,
            registration,
        },
        plugin,
        warning,
    )
}

async fn wait_for_socket(path: &Path) {
    within("socket", async {
        while !path.exists() {
            tokio::time::sleep(POLL).await;
        }
    })
    .await;
}

#[tokio::test]
async fn dra_plugin_registers_prepares_claims_and_survives_restarts() {
    let root_dir = tempfile::tempdir().expect("dir");
    let root = root_dir.path();
    let claims = Claims::default();
    claims.put(serde_json::json!({
        "metadata": {"namespace": "ml", "name": "two-gpus", "uid": "uid-a"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpus", "driver": "gpu.nvidia.com", "pool": "h100-1", "device": "gpu-0"},
            {"request": "gpus", "driver": "gpu.nvidia.com", "pool": "h100-1", "device": "gpu-1"}
        ]}}}
    }));
    claims.put(serde_json::json!({
        "metadata": {"namespace": "ml", "name": "pending", "uid": "uid-b"},
        "spec": {"devices": {"requests": []}}
    }));
    let (running, plugin, warning) = start_dra(root, claims);
    assert_eq!(warning, None);

    // The kubelet's plugin watcher finds the registration socket and registers the plugin.
    let registry = root.join("plugins_registry/gpu.nvidia.com-reg.sock");
    let plugin_socket = root.join("plugins/gpu.nvidia.com/dra.sock");
    wait_for_socket(&registry).await;
    let mut watcher = RegistrationClient::new(socket::connect(&registry).await.expect("reg"));
    let info = watcher
        .get_info(InfoRequest {})
        .await
        .expect("GetInfo")
        .into_inner();
    assert_eq!(info.r#type, "DRAPlugin");
    assert_eq!(info.name, "gpu.nvidia.com");
    assert_eq!(PathBuf::from(&info.endpoint), plugin_socket);
    assert_eq!(
        info.supported_versions,
        ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
    );
    watcher
        .notify_registration_status(RegistrationStatus {
            plugin_registered: true,
            error: String::new(),
        })
        .await
        .expect("notify");
    let status = running.registration.status().borrow().clone();
    assert_eq!(status.map(|s| s.plugin_registered), Some(true));

    // NodePrepareResources over v1: devices and CDI IDs, per-claim errors in the answer.
    let mut kubelet = dra_v1::dra_plugin_client::DraPluginClient::new(
        socket::connect(&plugin_socket).await.expect("dra"),
    );
    let answer = kubelet
        .node_prepare_resources(dra_v1::NodePrepareResourcesRequest {
            claims: vec![
                claim_ref("two-gpus", "uid-a"),
                claim_ref("pending", "uid-b"),
                claim_ref("gone", "uid-c"),
            ],
        })
        .await
        .expect("prepare")
        .into_inner();
    let a = &answer.claims["uid-a"];
    assert_eq!(a.error, "");
    let devices: Vec<(&str, &str, Vec<String>, Vec<String>)> = a
        .devices
        .iter()
        .map(|d| {
            (
                d.pool_name.as_str(),
                d.device_name.as_str(),
                d.request_names.clone(),
                d.cdi_device_ids.clone(),
            )
        })
        .collect();
    assert_eq!(
        devices,
        vec![
            (
                "h100-1",
                "gpu-0",
                ids(&["gpus"]),
                ids(&["k8s.gpu.nvidia.com/claim=uid-a-gpu-0"])
            ),
            (
                "h100-1",
                "gpu-1",
                ids(&["gpus"]),
                ids(&["k8s.gpu.nvidia.com/claim=uid-a-gpu-1"])
            ),
        ]
    );
    assert_eq!(
        answer.claims["uid-b"].error,
        "claim ml/pending is not allocated"
    );
    assert!(answer.claims["uid-b"].devices.is_empty());
    assert!(answer.claims["uid-c"].error.contains("not found"));

    // The CDI spec the runtime reads.
    let spec_path = root.join("cdi/k8s.gpu.nvidia.com-claim_uid-a.json");
    let spec: cdi::Spec =
        serde_json::from_slice(&std::fs::read(&spec_path).expect("spec")).expect("parse");
    assert_eq!(spec.kind, "k8s.gpu.nvidia.com/claim");
    assert_eq!(spec.devices[1].name, "uid-a-gpu-1");
    assert_eq!(
        spec.devices[1].container_edits.env,
        ["NVIDIA_VISIBLE_DEVICES=GPU-1"]
    );
    assert_eq!(
        spec.devices[1].container_edits.device_nodes[0].path,
        "/dev/nvidia1"
    );

    // A kubelet 1.33 speaks v1beta1: the same answer, from the checkpoint.
    let mut old_kubelet = dra_v1beta1::dra_plugin_client::DraPluginClient::new(
        socket::connect(&plugin_socket).await.expect("dra"),
    );
    let again = old_kubelet
        .node_prepare_resources(dra_v1beta1::NodePrepareResourcesRequest {
            claims: vec![dra_v1beta1::Claim {
                namespace: "ml".into(),
                uid: "uid-a".into(),
                name: "two-gpus".into(),
            }],
        })
        .await
        .expect("prepare v1beta1")
        .into_inner();
    assert_eq!(again.claims["uid-a"].devices.len(), 2);
    assert_eq!(
        again.claims["uid-a"].devices[0].cdi_device_ids,
        ids(&["k8s.gpu.nvidia.com/claim=uid-a-gpu-0"])
    );
    assert_eq!(plugin.prepared().await.claims.len(), 1);

    // A restarted kubelet whose watcher removed the registration socket: served again.
    std::fs::remove_file(&registry).expect("remove");
    wait_for_socket(&registry).await;
    let mut watcher = RegistrationClient::new(socket::connect(&registry).await.expect("reg"));
    let info = within("GetInfo after restart", watcher.get_info(InfoRequest {}))
        .await
        .expect("GetInfo")
        .into_inner();
    assert_eq!(info.name, "gpu.nvidia.com");

    // The plugin restarts and the claim was deleted from the API meanwhile: the checkpoint
    // still knows what was prepared, so prepare answers and unprepare cleans up.
    let _ = running.stop.send(());
    within("DRA plugin stop", running.task)
        .await
        .expect("join")
        .expect("clean stop");
    let (running, _plugin, warning) = start_dra(root, Claims::default());
    assert_eq!(warning, None);
    wait_for_socket(&plugin_socket).await;
    let mut kubelet = dra_v1::dra_plugin_client::DraPluginClient::new(
        socket::connect(&plugin_socket).await.expect("dra"),
    );
    let answer = kubelet
        .node_prepare_resources(dra_v1::NodePrepareResourcesRequest {
            claims: vec![claim_ref("two-gpus", "uid-a")],
        })
        .await
        .expect("prepare")
        .into_inner();
    assert_eq!(answer.claims["uid-a"].devices.len(), 2);
    for _ in 0..2 {
        let gone = kubelet
            .node_unprepare_resources(dra_v1::NodeUnprepareResourcesRequest {
                claims: vec![claim_ref("two-gpus", "uid-a")],
            })
            .await
            .expect("unprepare")
            .into_inner();
        assert_eq!(gone.claims["uid-a"].error, "", "unprepare is idempotent");
    }
    assert!(!spec_path.exists(), "the CDI spec is removed");
    let _ = running.stop.send(());
    within("DRA plugin stop", running.task)
        .await
        .expect("join")
        .expect("clean stop");

    // A corrupt checkpoint is moved aside with a warning, not a crash.
    std::fs::write(
        root.join("plugins/gpu.nvidia.com/checkpoint.json"),
        b"{not json",
    )
    .expect("write");
    let (_plugin, warning) = DraKubeletPlugin::new(dra_spec(root), Claims::default());
    assert!(warning.expect("warning").contains("is not valid"));
    assert!(
        root.join("plugins/gpu.nvidia.com/checkpoint.corrupt")
            .exists()
    );
}
