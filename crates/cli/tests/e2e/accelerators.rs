//! Accelerator nodes on the default lab topology, as kubectl sees them: GPU Feature Discovery
//! labels, device-plugin extended resources, and the DRA ResourceSlices and DeviceClasses
//! NVIDIA's DRA driver would publish.

use crate::support::Cluster;

#[test]
fn lab_gpu_nodes_advertise_devices_like_the_nvidia_stack() {
    let cluster = Cluster::start();
    let v = "1.33";
    let products = cluster.wait_for(
        v,
        &[
            "get",
            "nodes",
            "-l",
            "nvidia.com/gpu.present=true",
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name}={.metadata.labels.nvidia\.com/gpu\.product}/{.metadata.labels.tessera\.dev/rack}{"\n"}{end}"#,
        ],
        |out| out.lines().count() == 5,
    );
    assert_eq!(
        products.trim(),
        "h100-1=NVIDIA-H100-80GB-HBM3/r1\nh100-2=NVIDIA-H100-80GB-HBM3/r2\nh200-1=NVIDIA-H200/r3\nh200-2=NVIDIA-H200/r3\nl40s-1=NVIDIA-L40S-SHARED/"
    );
    let shared = cluster.wait_for(
        v,
        &[
            "get",
            "node",
            "l40s-1",
            "-o",
            r#"jsonpath={.status.allocatable.nvidia\.com/gpu}"#,
        ],
        |out| !out.is_empty(),
    );
    assert_eq!(shared, "16", "4 L40S x 4 time-slicing replicas");

    let slices = cluster.wait_for(
        v,
        &[
            "get",
            "resourceslices",
            "-o",
            r#"jsonpath={range .items[*]}{.spec.nodeName}:{.spec.driver}:{.spec.devices[0].name}{"\n"}{end}"#,
        ],
        |out| out.lines().count() == 4,
    );
    assert_eq!(
        slices.trim(),
        "h100-1:gpu.nvidia.com:gpu-0\nh100-2:gpu.nvidia.com:gpu-0\nh200-1:gpu.nvidia.com:gpu-0-mig-1g18gb-0\nh200-2:gpu.nvidia.com:gpu-0-mig-1g18gb-0"
    );
    let classes = cluster.ok(v, &["get", "deviceclasses", "-o", "name"]);
    assert_eq!(
        classes.trim(),
        "deviceclass.resource.k8s.io/gpu.nvidia.com\ndeviceclass.resource.k8s.io/mig.nvidia.com"
    );
}
