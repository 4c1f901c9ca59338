//! Table tests of the usage model and its three renderings, and a property test of the
//! limits.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proptest::prelude::*;
use serde_json::{Value, json};
use tessera_node::faults::Faults;
use tessera_node::gpu_assignments::Unit;
use tessera_node::topology::{NodeSpec, Topology};

use crate::load::{self, Declared};
use crate::usage::{self, Holder};
use crate::{dcgm, metrics_api, resource};

const TOPOLOGY: &str = r#"apiVersion: tessera.dev/v1alpha1
kind: ClusterTopology
pools:
- name: h100
  count: 1
  server: dgx-h100
  devices: {exposure: device-plugin}
- name: h200
  count: 1
  server: hgx-h200
  devices: {exposure: device-plugin, sharing: {mig: {layout: all-1g.18gb}}}
- name: cpu
  count: 1
  capacity: {cpu: "4", memory: 8Gi, pods: "110"}
"#;

fn node(name: &str) -> NodeSpec {
    let nodes = Topology::parse(TOPOLOGY).expect("test topology").nodes();
    nodes
        .into_iter()
        .find(|n| n.name == name)
        .expect("node in the test topology")
}

/// A Node object of `spec`, registered at `boot`.
fn node_object(spec: &NodeSpec, boot: u64) -> Value {
    let capacity: BTreeMap<&String, String> = spec
        .capacity
        .iter()
        .map(|(k, v)| (k, v.to_canonical()))
        .collect();
    json!({
        "metadata": {"name": spec.name, "labels": {"pool": spec.pool},
                     "creationTimestamp": tessera_model::time::timestamp(at(boot))},
        "status": {"capacity": capacity},
    })
}

fn at(seconds: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(seconds)
}

const START: u64 = 1_800_000_000;

fn pod(name: &str, annotations: Value, resources: Value) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "team-a", "uid": format!("uid-{name}"),
                     "labels": {"app": name}, "annotations": annotations},
        "spec": {"nodeName": "h100-1", "containers": [{"name": "main", "resources": resources}]},
        "status": {"phase": "Running", "startTime": "2027-01-15T08:00:00Z",
                   "containerStatuses": [{"name": "main",
                       "state": {"running": {"startedAt": tessera_model::time::timestamp(at(START))}}}]},
    })
}

#[test]
fn declared_load_table() {
    let cases: [(Value, Declared, usize); 4] = [
        (json!({}), Declared::default(), 0),
        (
            json!({load::CPU_USAGE: "900m", load::MEMORY_USAGE: "1Gi",
                   load::GPU_UTILIZATION: "85", load::GPU_MEMORY: "30Gi"}),
            Declared {
                cpu_nanocores: Some(900_000_000),
                memory_bytes: Some(1 << 30),
                gpu_utilization: Some(85.0),
                gpu_memory_bytes: Some(30 << 30),
            },
            0,
        ),
        (
            json!({load::GPU_UTILIZATION: "120", load::CPU_USAGE: "lots"}),
            Declared::default(),
            2,
        ),
        (
            json!({load::MEMORY_USAGE: "-1Gi", load::GPU_UTILIZATION: "12.5%"}),
            Declared {
                gpu_utilization: Some(12.5),
                ..Declared::default()
            },
            1,
        ),
    ];
    for (annotations, want, problems) in cases {
        let p = pod("p", annotations.clone(), json!({}));
        assert_eq!(Declared::of(&p), want, "{annotations}");
        assert_eq!(
            load::problems(&p).len(),
            problems,
            "{annotations}: {:?}",
            load::problems(&p)
        );
    }
}

/// (annotations, resources, CPU nanocores range, memory range, CPU seconds).
type UsageCase = (Value, Value, (u64, u64), (u64, u64), f64);

#[test]
fn container_usage_table() {
    let now = at(START + 100);
    // (annotations, resources, cpu nanocores range, memory range, cpu seconds)
    let cases: [UsageCase; 4] = [
        (
            json!({load::CPU_USAGE: "900m", load::MEMORY_USAGE: "1Gi"}),
            json!({}),
            (900_000_000, 900_000_000),
            (1 << 30, 1 << 30),
            90.0,
        ),
        (
            json!({}),
            json!({"requests": {"cpu": "2", "memory": "1000Mi"}}),
            (950_000_000, 1_050_000_000),
            (582 << 20, 618 << 20),
            100.0,
        ),
        (
            json!({}),
            json!({}),
            (9_500_000, 10_500_000),
            (31 << 20, 33 << 20),
            1.0,
        ),
        // Declared load beyond the limit is capped by it.
        (
            json!({load::CPU_USAGE: "3", load::MEMORY_USAGE: "4Gi"}),
            json!({"limits": {"cpu": "1", "memory": "2Gi"}}),
            (1_000_000_000, 1_000_000_000),
            (2 << 30, 2 << 30),
            100.0,
        ),
    ];
    for (annotations, resources, cpu, memory, seconds) in cases {
        let p = pod("p", annotations.clone(), resources);
        let usage = usage::pod_usage(&p, now).expect("running");
        let c = &usage.containers[0];
        assert!(
            (cpu.0..=cpu.1).contains(&c.cpu_nanocores),
            "{annotations}: cpu {}",
            c.cpu_nanocores
        );
        assert!(
            (memory.0..=memory.1).contains(&c.memory_bytes),
            "{annotations}: memory {}",
            c.memory_bytes
        );
        assert!(
            (c.cpu_seconds - seconds).abs() < 1e-6,
            "{annotations}: seconds {}",
            c.cpu_seconds
        );
    }
    let mut pending = pod("p", json!({}), json!({}));
    pending["status"]["phase"] = json!("Pending");
    assert_eq!(usage::pod_usage(&pending, now), None);
}

#[test]
fn variation_is_seeded_and_small() {
    let p = pod("p", json!({}), json!({"requests": {"cpu": "1"}}));
    let a = usage::pod_usage(&p, at(START + 5)).expect("running");
    let b = usage::pod_usage(&p, at(START + 6)).expect("running");
    assert_eq!(
        a.cpu_nanocores(),
        b.cpu_nanocores(),
        "same bucket, same value"
    );
    let values: std::collections::BTreeSet<u64> = (0..20)
        .map(|i| {
            usage::pod_usage(&p, at(START + i * 30))
                .expect("running")
                .cpu_nanocores()
        })
        .collect();
    assert!(values.len() > 1, "varies between buckets");
    assert!(
        values
            .iter()
            .all(|v| (475_000_000..=525_000_000).contains(v))
    );
}

#[test]
fn node_usage_adds_system_and_caps_at_capacity() {
    let spec = node("cpu-1");
    let p = pod(
        "p",
        json!({load::CPU_USAGE: "1500m", load::MEMORY_USAGE: "2Gi"}),
        json!({}),
    );
    let pods = vec![usage::pod_usage(&p, at(START + 10)).expect("running")];
    let node = usage::node_usage(&node_object(&spec, START), &pods, at(START + 10));
    assert_eq!(node.cpu_nanocores, 1_750_000_000);
    assert_eq!(node.memory_bytes, 3 << 30);
    assert!((node.cpu_seconds - (2.5 + 15.0)).abs() < 1e-6);
    let big = pod(
        "big",
        json!({load::CPU_USAGE: "64", load::MEMORY_USAGE: "1Ti"}),
        json!({}),
    );
    let pods = vec![usage::pod_usage(&big, at(START)).expect("running")];
    let node = usage::node_usage(&node_object(&spec, START), &pods, at(START));
    assert_eq!(node.cpu_nanocores, 4_000_000_000);
    assert_eq!(node.memory_bytes, 8 << 30);
}

fn holder(p: &Value, unit: Unit, now: SystemTime) -> Holder {
    Holder::new(p, "main", unit, now)
}

/// The sample of `name` whose labels contain every `wanted` pair.
fn sample(text: &str, name: &str, wanted: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .find(|l| {
            wanted
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// (metric, labels, value; `None`: no such sample).
type SampleCase<'a> = (&'a str, &'a [(&'a str, &'a str)], Option<f64>);

#[test]
fn dcgm_text_table() {
    let spec = node("h100-1");
    let now = at(START + 3600);
    let busy = pod(
        "train",
        json!({load::GPU_UTILIZATION: "85", load::GPU_MEMORY: "30Gi"}),
        json!({}),
    );
    let idle = pod("idle", json!({}), json!({}));
    let holders = vec![
        holder(&busy, Unit::Gpu(0), now),
        holder(&idle, Unit::Gpu(1), now),
    ];
    let mut faults = Faults::default();
    faults.gpus.insert(2, 48);
    faults.gpus.insert(3, 79);
    let gpus = usage::gpu_usage(&spec, &faults, &holders, at(START), now);
    assert_eq!(gpus.len(), 7, "GPU 3 fell off the bus");
    let text = dcgm::render("h100-1", &gpus);
    // (metric, labels, value)
    let cases: &[SampleCase] = &[
        (
            "DCGM_FI_DEV_GPU_UTIL",
            &[
                ("gpu", "0"),
                ("pod", "train"),
                ("namespace", "team-a"),
                ("container", "main"),
            ],
            Some(85.0),
        ),
        (
            "DCGM_FI_DEV_FB_USED",
            &[("gpu", "0"), ("pod", "train")],
            Some(30720.0),
        ),
        (
            "DCGM_FI_DEV_FB_FREE",
            &[("gpu", "0"), ("pod", "train")],
            Some(81559.0 - 30720.0),
        ),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", &[("gpu", "0")], Some(0.85)),
        (
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
            &[("gpu", "0")],
            Some(0.51),
        ),
        (
            "DCGM_FI_DEV_GPU_UTIL",
            &[("gpu", "4"), ("pod", "")],
            Some(0.0),
        ),
        ("DCGM_FI_DEV_FB_USED", &[("gpu", "4")], Some(0.0)),
        ("DCGM_FI_DEV_SM_CLOCK", &[("gpu", "4")], Some(345.0)),
        ("DCGM_FI_DEV_SM_CLOCK", &[("gpu", "0")], Some(1980.0)),
        ("DCGM_FI_DEV_XID_ERRORS", &[("gpu", "2")], Some(48.0)),
        ("DCGM_FI_DEV_XID_ERRORS", &[("gpu", "0")], Some(0.0)),
        ("DCGM_FI_DEV_XID_ERRORS", &[("gpu", "3")], None),
        (
            "DCGM_FI_DEV_GPU_UTIL",
            &[("gpu", "1"), ("pod", "idle")],
            Some(50.0),
        ),
        (
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
            &[("gpu", "5")],
            Some(0.0),
        ),
    ];
    for (name, labels, want) in cases {
        let got = sample(&text, name, labels);
        match want {
            Some(w) if name.ends_with("UTIL") && labels.contains(&("pod", "idle")) => {
                let g = got.unwrap_or(-1.0);
                assert!((w * 0.9..=w * 1.1).contains(&g), "{name} {labels:?}: {g}");
            }
            Some(w) => assert_eq!(got, Some(*w), "{name} {labels:?}\n{text}"),
            None => assert_eq!(got, None, "{name} {labels:?}"),
        }
    }
    for (name, kind, help) in [
        ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
        (
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "counter",
            "Total energy consumption since boot (in mJ).",
        ),
        (
            "DCGM_FI_DEV_XID_ERRORS",
            "gauge",
            "Value of the last XID error encountered.",
        ),
        (
            "DCGM_FI_DEV_FB_FREE",
            "gauge",
            "Framebuffer memory free (in MiB).",
        ),
    ] {
        assert!(
            text.contains(&format!("# HELP {name} {help}\n")),
            "{name} help"
        );
        assert!(
            text.contains(&format!("# TYPE {name} {kind}\n")),
            "{name} type"
        );
    }
    let line = text
        .lines()
        .find(|l| l.starts_with("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\""))
        .expect("GPU 0's utilisation");
    let uuid = Unit::Gpu(0).device_id("h100-1");
    assert!(
        line.starts_with(&format!(
            "DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",UUID=\"{uuid}\",pci_bus_id=\"0000"
        )),
        "{line}"
    );
    assert!(line.contains(",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"h100-1\",DCGM_FI_DRIVER_VERSION=\"570.172.08\",container=\"main\",namespace=\"team-a\",pod=\"train\"}"), "{line}");
}

#[test]
fn dcgm_mig_instances() {
    let spec = node("h200-1");
    let now = at(START + 60);
    let p = pod(
        "mig",
        json!({load::GPU_UTILIZATION: "40", load::GPU_MEMORY: "100Gi"}),
        json!({}),
    );
    let unit = Unit::Mig {
        gpu: 1,
        name: "gpu-1-mig-1g18gb-2".into(),
    };
    let gpus = usage::gpu_usage(
        &spec,
        &Faults::default(),
        &[holder(&p, unit, now)],
        at(START),
        now,
    );
    assert_eq!(gpus[1].mig.len(), 7);
    let text = dcgm::render("h200-1", &gpus);
    let held = [
        ("gpu", "1"),
        ("GPU_I_PROFILE", "1g.18gb"),
        ("GPU_I_ID", "2"),
        ("pod", "mig"),
    ];
    assert_eq!(
        sample(&text, "DCGM_FI_DEV_FB_USED", &held),
        Some(18432.0),
        "capped by the instance"
    );
    assert_eq!(sample(&text, "DCGM_FI_DEV_FB_FREE", &held), Some(0.0));
    assert_eq!(
        sample(&text, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", &held),
        Some(0.4)
    );
    let free = [("gpu", "1"), ("GPU_I_ID", "3"), ("pod", "")];
    assert_eq!(sample(&text, "DCGM_FI_DEV_FB_FREE", &free), Some(18432.0));
    // Device-wide fields stay on the GPU, without instance labels.
    let util = text
        .lines()
        .find(|l| l.starts_with("DCGM_FI_DEV_GPU_UTIL{gpu=\"1\""))
        .expect("GPU 1's utilisation");
    assert!(!util.contains("GPU_I_ID"), "{util}");
}

#[test]
fn resource_metrics_text() {
    let spec = node("cpu-1");
    let now = at(START + 100);
    let p = pod(
        "web",
        json!({load::CPU_USAGE: "500m", load::MEMORY_USAGE: "256Mi"}),
        json!({}),
    );
    let pods = vec![usage::pod_usage(&p, now).expect("running")];
    let node = usage::node_usage(&node_object(&spec, START - 900), &pods, now);
    let text = resource::render(&node, &pods, now);
    let ms = (START + 100) * 1000;
    let want = [
        "# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds".to_string(),
        "# TYPE container_cpu_usage_seconds_total counter".to_string(),
        format!("container_cpu_usage_seconds_total{{container=\"main\",namespace=\"team-a\",pod=\"web\"}} 50 {ms}"),
        format!("container_memory_working_set_bytes{{container=\"main\",namespace=\"team-a\",pod=\"web\"}} 268435456 {ms}"),
        format!("container_start_time_seconds{{container=\"main\",namespace=\"team-a\",pod=\"web\"}} {START}"),
        format!("node_cpu_usage_seconds_total 300 {ms}"),
        format!("node_memory_working_set_bytes 1342177280 {ms}"),
        format!("pod_cpu_usage_seconds_total{{namespace=\"team-a\",pod=\"web\"}} 50 {ms}"),
        format!("pod_memory_working_set_bytes{{namespace=\"team-a\",pod=\"web\"}} 268435456 {ms}"),
        "# TYPE scrape_error gauge".to_string(),
        "scrape_error 0".to_string(),
        "resource_scrape_error 0".to_string(),
    ];
    for line in want {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
}

#[test]
fn metrics_api_objects() {
    let spec = node("cpu-1");
    let now = at(START + 100);
    let p = pod(
        "web",
        json!({load::CPU_USAGE: "500m", load::MEMORY_USAGE: "256Mi"}),
        json!({}),
    );
    let pod_usage = usage::pod_usage(&p, now).expect("running");
    let node_usage = usage::node_usage(
        &node_object(&spec, START),
        std::slice::from_ref(&pod_usage),
        now,
    );
    let stamp = tessera_model::time::timestamp(now);
    assert_eq!(
        metrics_api::pod_metrics(&pod_usage, now),
        json!({
            "kind": "PodMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
            "metadata": {"name": "web", "creationTimestamp": stamp, "namespace": "team-a",
                         "labels": {"app": "web"}},
            "timestamp": stamp, "window": "10s",
            "containers": [{"name": "main", "usage": {"cpu": "500000000n", "memory": "262144Ki"}}],
        })
    );
    let node = metrics_api::node_metrics(&node_usage, now);
    assert_eq!(
        node["usage"],
        json!({"cpu": "750000000n", "memory": "1310720Ki"})
    );
    assert_eq!(node["kind"], "NodeMetrics");
    let list = metrics_api::list("NodeMetricsList", vec![node]);
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1));
}

#[test]
fn nvml_bus_ids() {
    for (input, want) in [
        ("0000:1b:00.0", "00000000:1B:00.0"),
        ("0000:c3:00.0", "00000000:C3:00.0"),
    ] {
        assert_eq!(usage::nvml_bus_id(input), want);
    }
}

proptest! {
    /// Whatever pods declare and however many share a device, utilisation stays within
    /// 0–100, framebuffer used within the device and free + used equal to its size, and
    /// power within the board limit.
    #[test]
    fn usage_stays_within_the_hardware(
        loads in proptest::collection::vec((0u32..=100, 0u64..400, 0usize..8, 0u32..4), 0..24),
        seconds in 0u64..10_000_000,
        mig in any::<bool>(),
    ) {
        let spec = node(if mig { "h200-1" } else { "h100-1" });
        let now = at(START + seconds);
        let pods: Vec<Value> = loads
            .iter()
            .enumerate()
            .map(|(i, (util, gib, _, _))| {
                let annotations: BTreeMap<&str, String> = [
                    (load::GPU_UTILIZATION, util.to_string()),
                    (load::GPU_MEMORY, format!("{gib}Gi")),
                ]
                .into_iter()
                .collect();
                pod(&format!("p{i}"), json!(annotations), json!({}))
            })
            .collect();
        let holders: Vec<Holder> = pods
            .iter()
            .zip(&loads)
            .map(|(p, (_, _, gpu, replica))| {
                let unit = if mig {
                    Unit::Mig { gpu: *gpu, name: format!("gpu-{gpu}-mig-1g18gb-{replica}") }
                } else {
                    Unit::Replica { gpu: *gpu, replica: *replica }
                };
                holder(p, unit, now)
            })
            .collect();
        let gpus = usage::gpu_usage(&spec, &Faults::default(), &holders, at(START), now);
        prop_assert_eq!(gpus.len(), 8);
        for gpu in &gpus {
            let devices = std::iter::once(&gpu.load).chain(gpu.mig.iter().map(|m| &m.load));
            for load in devices {
                prop_assert!((0.0..=100.0).contains(&load.utilization));
                prop_assert!(load.fb_used_mib <= load.fb_total_mib);
                prop_assert!(load.fb_total_mib <= 143_771);
            }
            prop_assert!(gpu.power_w <= gpu.power_limit_w);
            prop_assert!(gpu.energy_mj >= 0.0);
        }
        let text = dcgm::render(&spec.name, &gpus);
        for line in text.lines().filter(|l| l.starts_with("DCGM_FI_DEV_GPU_UTIL")) {
            let value: f64 = line.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or(-1.0);
            prop_assert!((0.0..=100.0).contains(&value), "{}", line);
        }
    }
}

#[test]
fn operator_components_follow_the_nodes_gpus() {
    use crate::operator::{self, Component};
    let mut topology = Topology::parse(&format!(
        "{TOPOLOGY}- name: dra\n  count: 1\n  server: dgx-h100\n  devices: {{exposure: dra}}\n- name: amd\n  count: 1\n  server: mi300x-8\n  devices: {{exposure: device-plugin}}\n"
    ))
    .expect("topology");
    operator::label_pools(&mut topology);
    let labels: BTreeMap<String, Vec<String>> = topology
        .nodes()
        .into_iter()
        .map(|n| {
            let deploy = n
                .labels
                .keys()
                .filter(|k| k.starts_with("nvidia.com/gpu.deploy."))
                .map(|k| k["nvidia.com/gpu.deploy.".len()..].to_string())
                .collect();
            (n.name, deploy)
        })
        .collect();
    let want = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // (node, deploy labels)
    for (node, deploy) in [
        (
            "h100-1",
            want(&[
                "dcgm-exporter",
                "device-plugin",
                "driver",
                "operator-validator",
            ]),
        ),
        (
            "dra-1",
            want(&[
                "dcgm-exporter",
                "dra-driver",
                "driver",
                "operator-validator",
            ]),
        ),
        ("cpu-1", want(&[])),
        ("amd-1", want(&[])),
    ] {
        assert_eq!(labels.get(node), Some(&deploy), "{node}");
    }
    let objects = operator::objects();
    let names: Vec<(&str, &str)> = objects
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default(),
            )
        })
        .filter(|(kind, _)| *kind != "ServiceAccount")
        .collect();
    assert_eq!(
        names,
        [
            ("Namespace", "gpu-operator"),
            ("DaemonSet", "nvidia-driver-daemonset"),
            ("DaemonSet", "nvidia-device-plugin-daemonset"),
            ("DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin"),
            ("DaemonSet", "nvidia-dcgm-exporter"),
            ("DaemonSet", "nvidia-operator-validator"),
            ("Service", "nvidia-dcgm-exporter"),
        ]
    );
    assert_eq!(
        objects[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "privileged"
    );
    let dcgm = objects
        .iter()
        .find(|o| {
            o["kind"] == "DaemonSet" && o["metadata"]["name"] == Component::DcgmExporter.name()
        })
        .expect("dcgm-exporter");
    assert_eq!(
        dcgm["spec"]["template"]["spec"]["nodeSelector"]["nvidia.com/gpu.deploy.dcgm-exporter"],
        "true"
    );
    assert_eq!(
        dcgm["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
        9400
    );
    let driver = objects
        .iter()
        .find(|o| o["kind"] == "DaemonSet" && o["metadata"]["name"] == "nvidia-driver-daemonset")
        .expect("driver");
    assert_eq!(
        driver["spec"]["template"]["spec"]["containers"][0]["name"],
        "nvidia-driver-ctr"
    );
}
