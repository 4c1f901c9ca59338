//! Table tests for the checker: a sound cluster, each rule broken alone, and planned changes.

use serde_json::json;

use crate::*;

fn v(s: &str) -> Version {
    Version::parse(s).expect("test version")
}

fn gpu_node(name: &str, kubelet: &str, driver: &str, product: &str, family: &str) -> NodeFacts {
    NodeFacts {
        name: name.into(),
        kubelet: v(kubelet),
        driver: Some(v(driver)),
        cuda_driver: None,
        gpu_product: Some(product.into()),
        gpu_family: Some(family.into()),
    }
}

/// Kubernetes 1.34, GPU Operator 25.10.1, Hopper and Blackwell nodes on driver 580, an older CPU
/// node within skew, Kueue 0.14, kubectl one minor behind, DRA v1.
fn sound() -> ClusterFacts {
    ClusterFacts {
        api_server: v("v1.34.2"),
        kubectl: Some(v("v1.33.4")),
        nodes: vec![
            gpu_node(
                "gpu-1",
                "v1.34.1",
                "580.105.08",
                "NVIDIA-H100-80GB-HBM3",
                "hopper",
            ),
            gpu_node("gpu-2", "v1.34.1", "580.95.05", "NVIDIA-B200", "blackwell"),
            NodeFacts {
                name: "cpu-1".into(),
                kubelet: v("v1.31.9"),
                driver: None,
                cuda_driver: None,
                gpu_product: None,
                gpu_family: None,
            },
        ],
        gpu_operator: Some(v("v25.10.1")),
        device_plugin: Some(v("v0.18.0")),
        dra_driver: Some(v("v25.8.0")),
        kueue: Some(v("v0.14.2")),
        dra_apis: vec![DraUse {
            user: "dra-driver gpu.nvidia.com".into(),
            api_version: "resource.k8s.io/v1".into(),
        }],
        containers: vec![
            ContainerCuda {
                name: "team-a/train".into(),
                node: None,
                cuda: v("13.0"),
            },
            ContainerCuda {
                name: "team-b/infer".into(),
                node: None,
                cuda: v("12.8"),
            },
        ],
    }
}

/// Moves the whole cluster (API server and every kubelet) to `version`, dropping kubectl and the
/// components whose rows would also object, so the rule under test stands alone.
fn only_kubernetes(f: &mut ClusterFacts, version: &str, keep_kueue: bool) {
    f.api_server = v(version);
    f.nodes.iter_mut().for_each(|n| n.kubelet = v(version));
    f.kubectl = None;
    f.gpu_operator = None;
    f.dra_apis.clear();
    f.dra_driver = None;
    if !keep_kueue {
        f.kueue = None;
    }
}

fn node<'a>(facts: &'a mut ClusterFacts, name: &str) -> &'a mut NodeFacts {
    facts
        .nodes
        .iter_mut()
        .find(|n| n.name == name)
        .expect("test node")
}

fn summary(conflicts: &[Conflict]) -> Vec<(String, Rule, String, String, bool)> {
    conflicts
        .iter()
        .map(|c| {
            (
                c.subject.clone(),
                c.rule,
                c.found.clone(),
                c.against.clone(),
                c.planned,
            )
        })
        .collect()
}

#[test]
fn sound_clusters_have_no_conflicts() {
    type Tweak = fn(&mut ClusterFacts);
    let cases: &[(&str, Tweak)] = &[
        ("as is", |_| {}),
        ("kubelet exactly 3 minors older", |f| {
            node(f, "cpu-1").kubelet = v("1.31.0")
        }),
        ("kubectl one minor newer", |f| f.kubectl = Some(v("1.35.0"))),
        ("kubelet 1.25 three minors behind 1.28", |f| {
            only_kubernetes(f, "v1.28.15", false);
            node(f, "cpu-1").kubelet = v("v1.25.16");
        }),
        // 12.8 on 550 (ceiling 12.4) runs by minor-version compatibility (12.x on >= 525).
        ("CUDA 12 minor-version compatible", |f| {
            node(f, "gpu-1").driver = Some(v("550.163.01"));
            f.containers.retain(|c| c.cuda.major == 12);
        }),
        ("13.1 on 580 by minor-version compatibility", |f| {
            f.containers[0].cuda = v("13.1")
        }),
        ("container pinned elsewhere", |f| {
            node(f, "gpu-1").driver = Some(v("570.195.03"));
            f.containers[0].node = Some("gpu-2".into());
        }),
        ("no components found", |f| {
            f.gpu_operator = None;
            f.kueue = None;
            f.kubectl = None;
            f.dra_apis.clear();
        }),
        ("DRA v1beta2 on 1.34", |f| {
            f.dra_apis[0].api_version = "resource.k8s.io/v1beta2".into()
        }),
    ];
    for (name, tweak) in cases {
        let mut facts = sound();
        tweak(&mut facts);
        assert_eq!(summary(&check(&facts, None)), [], "{name}");
    }
}

#[test]
fn each_rule_broken_alone_gives_exactly_its_conflict() {
    type Tweak = fn(&mut ClusterFacts);
    let cases: &[(&str, Tweak, &str, Rule, &str, &str)] = &[
        (
            "kubelet newer than the API server",
            |f| node(f, "cpu-1").kubelet = v("v1.35.0"),
            "node/cpu-1",
            Rule::KubeletNewerThanApiServer,
            "kubelet v1.35.0",
            "apiserver v1.34.2",
        ),
        (
            "kubelet 4 minors older",
            |f| node(f, "cpu-1").kubelet = v("v1.30.14"),
            "node/cpu-1",
            Rule::KubeletTooOld,
            "kubelet v1.30.14",
            "apiserver v1.34.2 (at most 3 minors older)",
        ),
        (
            "kubelet below 1.25 three minors older",
            |f| {
                only_kubernetes(f, "v1.27.16", false);
                node(f, "cpu-1").kubelet = v("v1.24.17");
            },
            "node/cpu-1",
            Rule::KubeletTooOld,
            "kubelet v1.24.17",
            "apiserver v1.27.16 (at most 2 minors older)",
        ),
        (
            "kubectl two minors older",
            |f| f.kubectl = Some(v("v1.32.0")),
            "kubectl",
            Rule::KubectlSkew,
            "kubectl v1.32.0",
            "apiserver v1.34.2 (±1 minor)",
        ),
        (
            "driver too old for Blackwell",
            |f| {
                node(f, "gpu-2").driver = Some(v("550.163.01"));
                f.containers.retain(|c| c.cuda.major == 12);
            },
            "node/gpu-2",
            Rule::DriverTooOldForArchitecture,
            "driver 550.163.01",
            "Blackwell NVIDIA-B200 (driver >= 570.133.20)",
        ),
        (
            "Blackwell driver in the right branch but below its first release",
            |f| {
                f.gpu_operator = None;
                node(f, "gpu-2").driver = Some(v("570.124.06"));
                f.containers.retain(|c| c.cuda.major == 12);
            },
            "node/gpu-2",
            Rule::DriverTooOldForArchitecture,
            "driver 570.124.06",
            "Blackwell NVIDIA-B200 (driver >= 570.133.20)",
        ),
        (
            "Hopper driver below its branch",
            |f| {
                f.gpu_operator = None;
                node(f, "gpu-1").driver = Some(v("520.61.05"));
                f.containers.clear();
            },
            "node/gpu-1",
            Rule::DriverTooOldForArchitecture,
            "driver 520.61.05",
            "Hopper NVIDIA-H100-80GB-HBM3 (driver branch >= 525)",
        ),
        (
            "driver outside the operator release's list",
            |f| node(f, "gpu-1").driver = Some(v("580.65.06")),
            "node/gpu-1",
            Rule::DriverNotInOperatorRelease,
            "driver 580.65.06",
            "gpu-operator v25.10.1 drivers",
        ),
        (
            "container CUDA above the driver's",
            |f| node(f, "gpu-1").driver = Some(v("570.195.03")),
            "container/team-a/train",
            Rule::CudaAboveDriver,
            "CUDA 13.0",
            "node/gpu-1 driver 570.195.03 (CUDA <= 12.8)",
        ),
        (
            "Kubernetes outside the operator's range",
            |f| {
                f.api_server = v("v1.35.0");
                f.kubectl = Some(v("v1.35.0"));
                node(f, "cpu-1").kubelet = v("v1.34.0");
            },
            "gpu-operator",
            Rule::KubernetesOutsideOperatorRange,
            "gpu-operator v25.10.1",
            "apiserver v1.35.0 (supported 1.30-1.34)",
        ),
        (
            "Kueue release not supporting the Kubernetes version",
            |f| {
                only_kubernetes(f, "v1.28.15", true);
            },
            "kueue",
            Rule::KubernetesOutsideKueueRange,
            "kueue v0.14.2",
            "apiserver v1.28.15 (supported >=1.29)",
        ),
        (
            "DRA driver release on a Kubernetes it does not support",
            |f| {
                f.api_server = v("v1.31.12");
                f.kubectl = None;
                f.dra_apis.clear();
                f.nodes.iter_mut().for_each(|n| n.kubelet = v("v1.31.12"));
            },
            "dra-driver",
            Rule::KubernetesOutsideDraDriverRange,
            "dra-driver v25.8.0",
            "apiserver v1.31.12 (supported >=1.32)",
        ),
        (
            "DRA v1 on 1.33",
            |f| {
                f.api_server = v("v1.33.5");
                f.nodes.iter_mut().for_each(|n| n.kubelet = v("v1.33.5"));
            },
            "dra-driver gpu.nvidia.com",
            Rule::DraApiNotServed,
            "resource.k8s.io/v1",
            "apiserver v1.33.5 (served >=1.34)",
        ),
        (
            "DRA v1alpha2 after its removal",
            |f| f.dra_apis[0].api_version = "resource.k8s.io/v1alpha2".into(),
            "dra-driver gpu.nvidia.com",
            Rule::DraApiNotServed,
            "resource.k8s.io/v1alpha2",
            "apiserver v1.34.2 (served 1.26-1.30)",
        ),
        (
            "operator release not in the matrix",
            |f| f.gpu_operator = Some(v("24.6.2")),
            "gpu-operator",
            Rule::NotInMatrix,
            "gpu-operator 24.6.2",
            "gpu_operator rows",
        ),
    ];
    for (name, tweak, subject, rule, found, against) in cases {
        let mut facts = sound();
        tweak(&mut facts);
        let got = check(&facts, None);
        assert_eq!(
            summary(&got),
            [(
                subject.to_string(),
                *rule,
                found.to_string(),
                against.to_string(),
                false
            )],
            "{name}"
        );
        let conflict = &got[0];
        if *rule == Rule::NotInMatrix {
            assert!(conflict.source.is_none(), "{name}");
        } else {
            let source = conflict.source.as_ref().expect("a cited source");
            assert!(source.url.starts_with("https://"), "{name}");
        }
    }
}

#[test]
fn plans_are_checked_against_the_state_after_them() {
    type Want = &'static [(&'static str, Rule)];
    let cases: &[(&str, Change, Want)] = &[
        (
            "Kubernetes past the operator's range, leaving the CPU node's kubelet and kubectl behind",
            Change::Kubernetes(v("v1.35.0")),
            &[
                ("node/cpu-1", Rule::KubeletTooOld),
                ("kubectl", Rule::KubectlSkew),
                ("gpu-operator", Rule::KubernetesOutsideOperatorRange),
            ],
        ),
        (
            "a Kubernetes patch release",
            Change::Kubernetes(v("v1.34.5")),
            &[],
        ),
        (
            "a driver the operator release does not list",
            Change::Driver(v("590.48.01")),
            &[
                ("node/gpu-1", Rule::DriverNotInOperatorRelease),
                ("node/gpu-2", Rule::DriverNotInOperatorRelease),
            ],
        ),
        (
            "a driver downgrade below the CUDA 13 containers",
            Change::Driver(v("575.57.08")),
            &[
                ("container/team-a/train", Rule::CudaAboveDriver),
                ("container/team-a/train", Rule::CudaAboveDriver),
            ],
        ),
        (
            "an operator release without the nodes' drivers",
            Change::GpuOperator(v("26.3.3")),
            &[
                ("node/gpu-1", Rule::DriverNotInOperatorRelease),
                ("node/gpu-2", Rule::DriverNotInOperatorRelease),
            ],
        ),
        (
            "an operator patch release",
            Change::GpuOperator(v("25.10.2")),
            &[],
        ),
        ("a Kueue upgrade", Change::Kueue(v("v0.15.1")), &[]),
    ];
    for (name, plan, want) in cases {
        let got = check(&sound(), Some(plan));
        let got: Vec<(&str, Rule, bool)> = got
            .iter()
            .map(|c| (c.subject.as_str(), c.rule, c.planned))
            .collect();
        let want: Vec<(&str, Rule, bool)> = want.iter().map(|(s, r)| (*s, *r, true)).collect();
        assert_eq!(got, want, "{name}");
    }

    // A conflict present before the plan is not marked as the plan's.
    let mut facts = sound();
    node(&mut facts, "cpu-1").kubelet = v("v1.30.0");
    let got = check(&facts, Some(&Change::Kueue(v("v0.15.0"))));
    assert_eq!(
        got.iter().map(|c| (c.rule, c.planned)).collect::<Vec<_>>(),
        [(Rule::KubeletTooOld, false)]
    );
}

#[test]
fn facts_from_node_objects_feed_the_checker() {
    let nodes = [
        json!({"metadata": {"name": "gpu-1", "labels": {
            "nvidia.com/cuda.driver-version.full": "580.105.08",
            "nvidia.com/cuda.runtime-version.full": "13.0",
            "nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.family": "hopper"}},
            "status": {"nodeInfo": {"kubeletVersion": "v1.35.0"}}}),
        json!({"metadata": {"name": "cpu-1"}, "status": {"nodeInfo": {"kubeletVersion": "v1.34.0"}}}),
    ];
    let mut facts = ClusterFacts::from_nodes("v1.34.2", &nodes).expect("facts");
    facts.gpu_operator = Some(v("25.10.1"));
    let got = check(&facts, None);
    assert_eq!(
        summary(&got),
        [(
            "node/gpu-1".to_string(),
            Rule::KubeletNewerThanApiServer,
            "kubelet v1.35.0".to_string(),
            "apiserver v1.34.2".to_string(),
            false
        )]
    );
    assert_eq!(
        got[0].to_string(),
        "node/gpu-1: kubelet v1.35.0 vs apiserver v1.34.2 (kubelet-newer-than-apiserver); \
         source https://kubernetes.io/releases/version-skew-policy/#kubelet (2026-12-02)"
    );
}
