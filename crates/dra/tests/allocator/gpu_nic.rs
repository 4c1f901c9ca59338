//! A training pod's claim for a GPU and an RDMA NIC with `matchAttribute` on
//! `resource.kubernetes.io/pcieRoot`, against the devices a node of the networks lab
//! (examples/lab/networks/lab.yaml) publishes: the NIC picked sits behind the GPU's PCIe
//! switch, the allocator moves on to the next pair when that NIC is taken, and a claim whose
//! devices cannot share one root does not fit.

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};
use tessera_dra::{Allocator, NodeView};

const LAB: &str = include_str!("../../../../examples/lab/networks/lab.yaml");

fn node_slices(name: &str) -> Vec<ResourceSlice> {
    let topology = tessera_node::Topology::parse(LAB).expect("the networks lab");
    let spec = topology
        .nodes()
        .into_iter()
        .find(|n| n.name == name)
        .expect("a lab node");
    tessera_node::resource_slice::resource_slices(&spec)
        .into_iter()
        .chain(tessera_node::nic_devices::rdma_slices(&spec))
        .map(|s| serde_json::from_value(s).expect("slice"))
        .collect()
}

fn classes() -> Vec<DeviceClass> {
    tessera_node::resource_slice::nvidia_device_classes()
        .into_iter()
        .chain(tessera_node::nic_devices::rdma_device_classes())
        .map(|c| serde_json::from_value(c).expect("class"))
        .collect()
}

fn request(name: &str, class: &str, count: i64) -> Value {
    json!({"name": name, "exactly": {"deviceClassName": class, "count": count}})
}

fn claim(name: &str, gpus: i64, nics: i64, same_root: bool) -> ResourceClaim {
    let mut devices = json!({"requests": [
        request("gpu", "gpu.nvidia.com", gpus),
        request("nic", "rdma.tessera.dev", nics),
    ]});
    if same_root {
        devices["constraints"] = json!([{
            "requests": ["gpu", "nic"],
            "matchAttribute": "resource.kubernetes.io/pcieRoot",
        }]);
    }
    serde_json::from_value(json!({
        "metadata": {"namespace": "ml", "name": name},
        "spec": {"devices": devices},
    }))
    .expect("claim")
}

/// `claim` allocated to exactly the devices `taken` (request=device), as an earlier claim.
fn holding(name: &str, taken: &[(&str, &str, &str)]) -> ResourceClaim {
    let results: Vec<Value> = taken
        .iter()
        .map(|(request, driver, device)| {
            json!({"request": request, "driver": driver, "pool": "h100-1", "device": device})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"namespace": "ml", "name": name},
        "spec": {"devices": {"requests": []}},
        "status": {"allocation": {"devices": {"results": results}}},
    }))
    .expect("claim")
}

#[test]
fn the_nic_picked_sits_on_the_gpus_pcie_switch() {
    let slices = node_slices("h100-1");
    let classes = classes();
    let node = NodeView {
        name: "h100-1".into(),
        labels: Default::default(),
    };
    let nic0 = ("nic", "rdma.tessera.dev", "mlx5-0");
    let gpu1 = ("gpu", "gpu.nvidia.com", "gpu-1");
    // (case, earlier claims, the claim, the devices it gets or None)
    type Case = (
        &'static str,
        Vec<ResourceClaim>,
        ResourceClaim,
        Option<Vec<&'static str>>,
    );
    let cases: Vec<Case> = vec![
        (
            "a free node: GPU 0 and the NIC behind its switch",
            vec![],
            claim("a", 1, 1, true),
            Some(vec!["gpu=gpu-0", "nic=mlx5-0"]),
        ),
        (
            "GPU 0's NIC taken: the next GPU with a free NIC on its switch",
            vec![holding("x", &[nic0])],
            claim("b", 1, 1, true),
            Some(vec!["gpu=gpu-1", "nic=mlx5-1"]),
        ),
        (
            "without the constraint, any free NIC will do",
            vec![holding("x", &[nic0])],
            claim("c", 1, 1, false),
            Some(vec!["gpu=gpu-0", "nic=mlx5-1"]),
        ),
        (
            "GPU 1 taken as well: GPU 2 and NIC 2",
            vec![holding("x", &[nic0]), holding("y", &[gpu1])],
            claim("d", 1, 1, true),
            Some(vec!["gpu=gpu-2", "nic=mlx5-2"]),
        ),
        (
            "two GPUs never share one root on an HGX board",
            vec![],
            claim("e", 2, 1, true),
            None,
        ),
        (
            "one GPU and two NICs cannot share one root either",
            vec![],
            claim("f", 1, 2, true),
            None,
        ),
    ];
    for (case, earlier, claim, want) in cases {
        let allocator = Allocator::new(node.clone(), &slices, &classes, &earlier);
        let got = allocator.allocate(&[&claim]).expect("no error").map(|r| {
            r[0].devices
                .as_ref()
                .and_then(|d| d.results.clone())
                .unwrap_or_default()
                .iter()
                .map(|d| format!("{}={}", d.request, d.device))
                .collect::<Vec<_>>()
        });
        let want = want.map(|w| w.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(got, want, "{case}");
    }
}
