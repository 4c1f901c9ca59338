//! Reading the planner's inputs from API objects (as JSON): a Node with its pods into
//! [`NodeFacts`] (GFD's `nvidia.com/*` labels for the GPU model, driver and MIG layout,
//! `status.nodeInfo.kubeletVersion`, the pods a plan moves, the validator pod), and a
//! PodDisruptionBudget with the pods its selector matches into a [`Budget`].
//!
//! Pure: the shell lists the objects. Knows kubectl drain's pod filters (DaemonSet and mirror
//! pods stay, finished pods always go) and the GPU operator's GPU-pod filter (a container asks
//! for an `nvidia.com/` resource), nothing of how to evict.

use std::collections::BTreeMap;

use serde_json::Value;
use tessera_devices::Catalog;
use tessera_model::selector;

use crate::plan::{NodeFacts, Plan, Validator, replacement_name};
use crate::preflight::Budget;
use crate::state::{GpuPod, PodOwner, PodPhase, PodRef};

/// The label the validator pods carry (the GPU operator's `nvidia-operator-validator`).
pub const VALIDATOR_APP: &str = "nvidia-operator-validator";

fn str_at<'v>(v: &'v Value, pointer: &str) -> Option<&'v str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn map_at(v: &Value, pointer: &str) -> BTreeMap<String, String> {
    v.pointer(pointer)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn pod_ref(pod: &Value) -> PodRef {
    PodRef {
        namespace: str_at(pod, "/metadata/namespace")
            .unwrap_or_default()
            .to_string(),
        name: str_at(pod, "/metadata/name")
            .unwrap_or_default()
            .to_string(),
    }
}

fn controller_kind(pod: &Value) -> Option<&str> {
    pod.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|o| o.get("kind").and_then(Value::as_str))
}

/// Whether a container of the pod asks for an `nvidia.com/` resource (the operator's filter).
fn uses_gpu(pod: &Value) -> bool {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    containers.into_iter().any(|c| {
        ["/resources/limits", "/resources/requests"]
            .iter()
            .any(|p| {
                c.pointer(p)
                    .and_then(Value::as_object)
                    .is_some_and(|m| m.keys().any(|k| k.starts_with("nvidia.com/")))
            })
    })
}

/// Whether `labels` match an equality-based selector string (`app=train,tier!=web`).
pub fn matches_selector_string(selector: &str, labels: &BTreeMap<String, String>) -> bool {
    selector
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .all(|term| {
            if let Some((k, v)) = term.split_once("!=") {
                labels.get(k.trim()).map(String::as_str) != Some(v.trim())
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                labels.get(k.trim()).map(String::as_str) == Some(v.trim())
            } else {
                labels.contains_key(term)
            }
        })
}

/// The GPU catalog model whose GFD product label (`nvidia.com/gpu.product`) this is.
fn model_of(catalog: &Catalog, product: &str) -> Option<String> {
    let product = product.trim_end_matches("-SHARED");
    catalog
        .gpus()
        .iter()
        .find(|g| g.product_name.replace(' ', "-") == product)
        .map(|g| g.name.clone())
}

/// The per-GPU MIG profiles GFD's `nvidia.com/mig-<profile>.count` labels describe (sorted).
fn mig_profiles(labels: &BTreeMap<String, String>) -> Option<Vec<String>> {
    let gpus: usize = labels.get("nvidia.com/gpu.count")?.parse().ok()?;
    let mut profiles = Vec::new();
    for (k, v) in labels {
        let Some(profile) = k
            .strip_prefix("nvidia.com/mig-")
            .and_then(|p| p.strip_suffix(".count"))
        else {
            continue;
        };
        let count: usize = v.parse().ok()?;
        let per_gpu = count.checked_div(gpus).unwrap_or(0);
        profiles.extend(std::iter::repeat_n(profile.to_string(), per_gpu));
    }
    (!profiles.is_empty()).then(|| {
        profiles.sort();
        profiles
    })
}

/// A pod and its labels.
type LabelledPod = (PodRef, BTreeMap<String, String>);

/// The listed objects, indexed once: pods by node and by namespace (with their labels), and
/// the Ready nodes.
pub struct Objects<'o> {
    nodes: &'o [Value],
    by_node: BTreeMap<&'o str, Vec<&'o Value>>,
    by_namespace: BTreeMap<&'o str, Vec<LabelledPod>>,
    ready: std::collections::BTreeSet<&'o str>,
}

fn node_ready(n: &Value) -> bool {
    n.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        })
        .is_none_or(|c| c.get("status").and_then(Value::as_str) == Some("True"))
}

impl<'o> Objects<'o> {
    /// Indexes every node and pod of the cluster.
    pub fn index(nodes: &'o [Value], pods: &'o [Value]) -> Objects<'o> {
        let mut by_node: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
        let mut by_namespace: BTreeMap<&str, Vec<_>> = BTreeMap::new();
        for p in pods {
            if let Some(node) = str_at(p, "/spec/nodeName") {
                by_node.entry(node).or_default().push(p);
            }
            if let Some(ns) = str_at(p, "/metadata/namespace") {
                by_namespace
                    .entry(ns)
                    .or_default()
                    .push((pod_ref(p), map_at(p, "/metadata/labels")));
            }
        }
        let ready = nodes
            .iter()
            .filter(|n| node_ready(n))
            .filter_map(|n| str_at(n, "/metadata/name"))
            .collect();
        Objects {
            nodes,
            by_node,
            by_namespace,
            ready,
        }
    }

    /// Every node's facts for `plan`.
    pub fn node_facts(&self, plan: &Plan, catalog: &Catalog) -> Vec<NodeFacts> {
        self.nodes
            .iter()
            .map(|n| node_facts(plan, catalog, n, self))
            .collect()
    }
}

/// Reads one node's facts, its pods (and a rotation's replacement) from `objects`.
pub fn node_facts(
    plan: &Plan,
    catalog: &Catalog,
    node: &Value,
    objects: &Objects<'_>,
) -> NodeFacts {
    let name = str_at(node, "/metadata/name")
        .unwrap_or_default()
        .to_string();
    let labels = map_at(node, "/metadata/labels");
    let driver_version = labels
        .get("nvidia.com/cuda.driver-version.full")
        .cloned()
        .or_else(|| {
            let part = |p: &str| labels.get(&format!("nvidia.com/cuda.driver.{p}")).cloned();
            Some(format!(
                "{}.{}.{}",
                part("major")?,
                part("minor")?,
                part("rev")?
            ))
        });
    let everything =
        plan.kind.evicts_all_pods() || crate::worker::machine_of_labels(&labels).is_vm();
    let wait = plan
        .policy
        .wait_for_completion
        .as_ref()
        .map(|w| w.pod_selector.as_str())
        .filter(|s| !s.is_empty());
    let mut facts = NodeFacts {
        name: name.clone(),
        gpu_model: labels
            .get("nvidia.com/gpu.product")
            .and_then(|p| model_of(catalog, p)),
        driver_version,
        mig_profiles: mig_profiles(&labels),
        kubelet_version: str_at(node, "/status/nodeInfo/kubeletVersion")
            .unwrap_or_default()
            .to_string(),
        annotations: map_at(node, "/metadata/annotations"),
        unschedulable: node
            .pointer("/spec/unschedulable")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        ready: node_ready(node),
        replacement_ready: objects.ready.contains(replacement_name(&name).as_str()),
        labels,
        ..NodeFacts::default()
    };
    let validator_node = if plan.kind == crate::plan::PlanKind::NodeRotation {
        replacement_name(&name)
    } else {
        name.clone()
    };
    let here = objects.by_node.get(name.as_str()).into_iter().flatten();
    let validators = objects
        .by_node
        .get(validator_node.as_str())
        .into_iter()
        .flatten()
        .filter(|_| validator_node != name);
    for pod in here.chain(validators) {
        let bound = str_at(pod, "/spec/nodeName");
        let pod_labels = map_at(pod, "/metadata/labels");
        if pod_labels.get("app").map(String::as_str) == Some(VALIDATOR_APP)
            && bound == Some(validator_node.as_str())
        {
            facts.validator = match str_at(pod, "/status/phase") {
                Some("Succeeded") => Validator::Succeeded,
                Some("Failed") => Validator::Failed,
                _ => Validator::Running,
            };
            continue;
        }
        if bound != Some(name.as_str()) || pod.pointer("/metadata/deletionTimestamp").is_some() {
            continue;
        }
        let phase = str_at(pod, "/status/phase").unwrap_or("Pending");
        if let Some(sel) = wait
            && matches_selector_string(sel, &pod_labels)
        {
            facts.workload_pods.push(match phase {
                "Running" => PodPhase::Running,
                "Succeeded" => PodPhase::Succeeded,
                "Failed" => PodPhase::Failed,
                "Pending" => PodPhase::Pending,
                _ => PodPhase::Unknown,
            });
        }
        let owner = match controller_kind(pod) {
            Some("DaemonSet") => continue,
            Some(_) => PodOwner::Other,
            None => PodOwner::None,
        };
        if !everything && !uses_gpu(pod) {
            continue;
        }
        let empty_dir = pod
            .pointer("/spec/volumes")
            .and_then(Value::as_array)
            .is_some_and(|vs| vs.iter().any(|v| v.get("emptyDir").is_some()));
        facts.pods.push(GpuPod {
            pod: pod_ref(pod),
            owner,
            mirror: pod
                .pointer("/metadata/annotations/kubernetes.io~1config.mirror")
                .is_some(),
            empty_dir,
            finished: matches!(phase, "Succeeded" | "Failed"),
        });
    }
    facts
}

/// A PodDisruptionBudget and the pods of its namespace its selector matches (an empty
/// selector matches every pod, as policy/v1 does).
pub fn budget(pdb: &Value, objects: &Objects<'_>) -> Budget {
    let namespace = str_at(pdb, "/metadata/namespace")
        .unwrap_or_default()
        .to_string();
    let sel = pdb.pointer("/spec/selector");
    let pods = objects
        .by_namespace
        .get(namespace.as_str())
        .into_iter()
        .flatten()
        .filter(|(_, labels)| selector::matches(sel, labels))
        .map(|(p, _)| p.clone())
        .collect();
    Budget {
        name: str_at(pdb, "/metadata/name")
            .unwrap_or_default()
            .to_string(),
        namespace,
        disruptions_allowed: pdb
            .pointer("/status/disruptionsAllowed")
            .and_then(Value::as_i64)
            .unwrap_or(0),
        pods,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::plan::PlanKind;
    use crate::policy::UpgradePolicy;

    fn plan(kind: PlanKind) -> Plan {
        match Plan::new(
            "p",
            kind,
            BTreeMap::new(),
            UpgradePolicy::default(),
            1,
            None,
        ) {
            Ok(p) => p,
            Err(e) => panic!("{e:?}"),
        }
    }

    fn pod(name: &str, node: &str, owner: Option<&str>, gpu: bool) -> Value {
        let limits = if gpu {
            json!({"nvidia.com/gpu": "1"})
        } else {
            json!({"cpu": "1"})
        };
        let mut p = json!({"metadata": {"name": name, "namespace": "team-a", "labels": {"app": name}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": limits}}]},
            "status": {"phase": "Running"}});
        if let Some(kind) = owner {
            p["metadata"]["ownerReferences"] =
                json!([{"kind": kind, "name": "x", "controller": true}]);
        }
        p
    }

    #[test]
    fn a_gpu_node_reads_from_gfd_labels_and_its_pods() {
        let catalog = match Catalog::built_in() {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        let node = json!({"metadata": {"name": "gpu-0", "labels": {
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "2",
                "nvidia.com/cuda.driver-version.full": "570.172.08",
                "nvidia.com/mig-3g.40gb.count": "4"}},
            "spec": {"unschedulable": true},
            "status": {"nodeInfo": {"kubeletVersion": "v1.33.2"},
                       "conditions": [{"type": "Ready", "status": "True"}]}});
        let pods = vec![
            pod("train", "gpu-0", Some("Job"), true),
            pod("web", "gpu-0", Some("ReplicaSet"), false),
            pod("dcgm", "gpu-0", Some("DaemonSet"), true),
            pod("bare", "gpu-0", None, true),
            pod("elsewhere", "gpu-1", Some("Job"), true),
        ];
        let driver = plan(PlanKind::DriverUpgrade {
            version: "580.82.07".into(),
            scope: crate::worker::DriverScope::Host,
        });
        let nodes = [node.clone()];
        let objects = Objects::index(&nodes, &pods);
        let f = node_facts(&driver, &catalog, &node, &objects);
        assert_eq!(f.gpu_model.as_deref(), Some("H100-SXM5-80GB"));
        assert_eq!(f.driver_version.as_deref(), Some("570.172.08"));
        assert_eq!(
            f.mig_profiles,
            Some(vec!["3g.40gb".to_string(), "3g.40gb".to_string()])
        );
        assert_eq!(f.kubelet_version, "v1.33.2");
        assert!(f.unschedulable && f.ready);
        let names: Vec<(&str, PodOwner)> = f
            .pods
            .iter()
            .map(|p| (p.pod.name.as_str(), p.owner))
            .collect();
        // A driver upgrade moves GPU pods only; DaemonSet pods stay.
        assert_eq!(
            names,
            [("train", PodOwner::Other), ("bare", PodOwner::None)]
        );
        // Other kinds move every pod but DaemonSets'.
        let rotation = plan(PlanKind::NodeRotation);
        let f = node_facts(&rotation, &catalog, &node, &objects);
        let names: Vec<&str> = f.pods.iter().map(|p| p.pod.name.as_str()).collect();
        assert_eq!(names, ["train", "web", "bare"]);
    }

    #[test]
    fn a_budget_selects_its_namespaces_pods() {
        let pdb = json!({"metadata": {"name": "web", "namespace": "team-a"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 1}});
        let mut other_ns = pod("web", "n", None, false);
        other_ns["metadata"]["namespace"] = json!("team-b");
        let pods = vec![
            pod("web", "n", None, false),
            pod("train", "n", None, false),
            other_ns,
        ];
        let b = budget(&pdb, &Objects::index(&[], &pods));
        assert_eq!(b.disruptions_allowed, 1);
        let names: Vec<String> = b
            .pods
            .iter()
            .map(|p| format!("{}/{}", p.namespace, p.name))
            .collect();
        assert_eq!(names, ["team-a/web"]);
    }

    #[test]
    fn selector_strings_match_like_kubectl() {
        let labels = BTreeMap::from([("app".to_string(), "train".to_string())]);
        let table = [
            ("", true),
            ("app=train", true),
            ("app==train", true),
            ("app!=train", false),
            ("app", true),
            ("tier", false),
            ("app=web", false),
        ];
        for (sel, want) in table {
            assert_eq!(matches_selector_string(sel, &labels), want, "{sel}");
        }
    }
}
