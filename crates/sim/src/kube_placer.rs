//! The live scheduling core on the timeline: a cluster from a topology file — the Nodes,
//! ResourceSlices and DeviceClasses node twins would register — and Kubernetes pods placed by
//! `tessera-scheduler` exactly as the embedded scheduler places them (filters, scores,
//! profiles, DRA allocation); claims are allocated when their first pod is placed and
//! deallocated when their last pod leaves, as the claim controller does.
//!
//! GPU accounting for the summary: a whole GPU is 1000; a device-plugin unit is its share of
//! the node's GPUs (time-slicing replicas count a fraction); a MIG device, through the device
//! plugin or DRA, its share of the GPU's memory slices or memory.
//!
//! Not modelled yet: gangs (pods are placed one at a time) and preemption.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::Value;
use tessera_node::topology::NodeSpec;
use tessera_scheduler::profile::Profile;
use tessera_scheduler::score::Strategy;
use tessera_scheduler::{Scheduler, node_info};

use crate::cluster::MILLI;
use crate::timeline::{Placed, Placer};
use crate::workload::SimPod;

/// Why a cluster cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ClusterError(String);

/// A node's GPU shares: thousandths of a GPU per unit of each extended resource, and per
/// DRA device.
#[derive(Default)]
struct Shares {
    per_unit: HashMap<String, HashMap<String, i64>>,
    per_device: HashMap<(String, String), i64>,
}

/// What a placed pod holds.
pub struct Held {
    node: String,
    /// GPU thousandths of its extended resources (its claims' are the claims' own).
    unit_milli: i64,
}

/// A topology's cluster under the scheduling core.
pub struct KubePlacer {
    scheduler: Scheduler,
    profiles: Vec<Profile>,
    /// Claims by (namespace, name), with their allocation while allocated.
    claims: BTreeMap<(String, String), ResourceClaim>,
    /// Pods placed that use each claim.
    users: BTreeMap<(String, String), usize>,
    /// GPU thousandths of each allocated claim's devices.
    claim_milli: BTreeMap<(String, String), i64>,
    shares: Shares,
    capacity: i64,
    used: i64,
    nodes: usize,
    retry_on_placement: bool,
}

fn milli_of_device(device: &Value, gpu_memory_mib: u64) -> i64 {
    let memory = device
        .pointer("/capacity/memory/value")
        .and_then(Value::as_str)
        .and_then(|q| q.parse::<tessera_model::Quantity>().ok())
        .map_or(0, |q| q.value());
    let gpu = i128::from(gpu_memory_mib) << 20;
    if gpu == 0 {
        return MILLI;
    }
    i64::try_from((memory * i128::from(MILLI) / gpu).clamp(0, i128::from(MILLI))).unwrap_or(MILLI)
}

/// What a topology's twins would publish, and what the summary counts of it.
struct Objects {
    nodes: Vec<Node>,
    slices: Vec<ResourceSlice>,
    classes: Vec<DeviceClass>,
    shares: Shares,
    /// GPU thousandths.
    capacity: i64,
}

/// The node objects, slices and device classes a topology's twins would publish, and each
/// node's GPU shares.
fn objects(specs: &[NodeSpec]) -> Result<Objects, ClusterError> {
    let mut nodes = Vec::new();
    let mut slices = Vec::new();
    let mut shares = Shares::default();
    let mut capacity = 0;
    for spec in specs {
        // Simulated nodes start onboarded.
        let mut spec = spec.clone();
        spec.onboarding = false;
        let mut node = tessera_node::node_object::registration(&spec);
        let status = tessera_node::node_object::node_status(&spec, "1970-01-01T00:00:00Z");
        node["status"] = status["status"].clone();
        let in_use = Default::default();
        if let Some(annotations) = tessera_node::gpu_assignments::numa_annotations(&spec, &in_use) {
            node["metadata"]["annotations"] = serde_json::json!(annotations);
        }
        let node: Node = serde_json::from_value(node)
            .map_err(|e| ClusterError(format!("node {}: {e}", spec.name)))?;
        nodes.push(node);
        let Some(hardware) = spec.hardware.as_ref() else {
            continue;
        };
        let gpus = hardware.server.gpus.len() as i64;
        capacity += gpus * MILLI;
        let model = hardware.gpu.as_ref();
        let mut units = HashMap::new();
        for (resource, amount) in &spec.allocatable {
            let count = amount.value();
            if resource == "nvidia.com/gpu" || resource == "amd.com/gpu" {
                if count > 0 {
                    units.insert(resource.clone(), (gpus * MILLI) / count as i64);
                }
            } else if let Some(profile) = resource.strip_prefix("nvidia.com/mig-") {
                let share = model
                    .and_then(|m| m.mig.as_ref())
                    .and_then(|mig| {
                        let p = mig.profiles.iter().find(|p| p.name == profile)?;
                        Some(i64::from(p.size) * MILLI / i64::from(mig.memory_slices.max(1)))
                    })
                    .unwrap_or(0);
                units.insert(resource.clone(), share);
            }
        }
        shares.per_unit.insert(spec.name.clone(), units);
        let memory = model.map_or(0, |m| m.memory_mib);
        for slice in tessera_node::resource_slice::resource_slices(&spec) {
            let pool = slice
                .pointer("/spec/pool/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            for device in slice
                .pointer("/spec/devices")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let name = device
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                shares.per_device.insert(
                    (pool.clone(), name.to_string()),
                    milli_of_device(device, memory),
                );
            }
            let slice: ResourceSlice = serde_json::from_value(slice)
                .map_err(|e| ClusterError(format!("node {}: ResourceSlice: {e}", spec.name)))?;
            slices.push(slice);
        }
    }
    let classes = if slices.is_empty() {
        Vec::new()
    } else {
        tessera_node::resource_slice::nvidia_device_classes()
            .into_iter()
            .map(|c| {
                serde_json::from_value(c).map_err(|e| ClusterError(format!("DeviceClass: {e}")))
            })
            .collect::<Result<_, _>>()?
    };
    Ok(Objects {
        nodes,
        slices,
        classes,
        shares,
        capacity,
    })
}

fn key(namespace: &str, name: &str) -> (String, String) {
    (namespace.to_string(), name.to_string())
}

impl KubePlacer {
    /// The cluster of `specs` (a topology's nodes), with the workload's device classes and
    /// claims, scheduled by `profiles` (a KubeSchedulerConfiguration's; empty: the default).
    pub fn new(
        specs: &[NodeSpec],
        classes: Vec<DeviceClass>,
        claims: Vec<ResourceClaim>,
        profiles: Vec<Profile>,
        pods: &[crate::timeline::TimedPod<SimPod>],
    ) -> Result<KubePlacer, ClusterError> {
        if specs.is_empty() {
            return Err(ClusterError("the topology has no nodes".into()));
        }
        let Objects {
            nodes,
            slices,
            classes: mut all_classes,
            shares,
            capacity,
        } = objects(specs)?;
        for class in classes {
            all_classes.retain(|c| c.metadata.name != class.metadata.name);
            all_classes.push(class);
        }
        let scheduler = Scheduler::new(
            node_info::build(&nodes, &[]),
            slices,
            all_classes,
            &claims,
            Strategy::default(),
        );
        let profiles = if profiles.is_empty() {
            vec![Profile::default()]
        } else {
            profiles
        };
        Ok(KubePlacer {
            scheduler,
            profiles,
            claims: claims
                .into_iter()
                .map(|c| {
                    let k = key(
                        c.metadata.namespace.as_deref().unwrap_or_default(),
                        c.metadata.name.as_deref().unwrap_or_default(),
                    );
                    (k, c)
                })
                .collect(),
            users: BTreeMap::new(),
            claim_milli: BTreeMap::new(),
            shares,
            capacity,
            used: 0,
            nodes: nodes.len(),
            retry_on_placement: pods.iter().any(|p| p.work.pod_affinity),
        })
    }

    fn profile_for(&self, pod: &Pod) -> &Profile {
        let name = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or("default-scheduler");
        self.profiles
            .iter()
            .find(|p| p.scheduler_name == name)
            .unwrap_or(&self.profiles[0])
    }

    /// GPU thousandths a pod's extended resources hold on `node`.
    fn unit_milli(&self, pod: &Pod, node: &str) -> i64 {
        let Some(units) = self.shares.per_unit.get(node) else {
            return 0;
        };
        tessera_scheduler::resources::pod_requests(pod)
            .iter()
            .filter_map(|(name, amount)| {
                let per_unit = units.get(name)?;
                Some(i64::try_from(*amount / 1000).unwrap_or(0) * per_unit)
            })
            .sum()
    }
}

impl Placer for KubePlacer {
    type Work = SimPod;
    type Held = Held;
    type Shape = String;

    fn shape(&self, work: &SimPod) -> Option<String> {
        Some(work.shape.clone())
    }

    fn place(&mut self, (namespace, _): (&str, &str), work: &SimPod) -> Option<(Placed, Held)> {
        let claims: Vec<ResourceClaim> = work
            .claims
            .iter()
            .filter_map(|name| self.claims.get(&key(namespace, name)).cloned())
            .collect();
        let profile = self.profile_for(&work.pod).clone();
        self.scheduler.set_profile(&profile);
        let decision = self.scheduler.schedule(&work.pod, &claims).ok()?;
        self.scheduler.assume(&work.pod, &decision, &claims);
        let unit_milli = self.unit_milli(&work.pod, &decision.node);
        self.used += unit_milli;
        let mut devices = Vec::new();
        for (name, allocation) in &decision.allocations {
            let results = allocation
                .devices
                .as_ref()
                .and_then(|d| d.results.as_ref())
                .into_iter()
                .flatten();
            let mut milli = 0;
            for result in results {
                devices.push(result.device.clone());
                milli += self
                    .shares
                    .per_device
                    .get(&(result.pool.clone(), result.device.clone()))
                    .copied()
                    .unwrap_or(0);
            }
            let k = key(namespace, name);
            if let Some(claim) = self.claims.get_mut(&k) {
                claim.status.get_or_insert_with(Default::default).allocation =
                    Some(allocation.clone());
            }
            self.used += milli;
            self.claim_milli.insert(k, milli);
        }
        let mut gpu_milli = unit_milli;
        for name in &work.claims {
            let k = key(namespace, name);
            gpu_milli += self.claim_milli.get(&k).copied().unwrap_or(0);
            *self.users.entry(k).or_insert(0) += 1;
        }
        let placed = Placed {
            node: decision.node.clone(),
            devices,
            gpu_milli,
        };
        Some((
            placed,
            Held {
                node: decision.node,
                unit_milli,
            },
        ))
    }

    fn release(&mut self, (namespace, _): (&str, &str), work: &SimPod, held: Held) {
        let mut deallocated = Vec::new();
        for name in &work.claims {
            let k = key(namespace, name);
            let users = self.users.entry(k.clone()).or_insert(1);
            *users = users.saturating_sub(1);
            if *users == 0 {
                self.users.remove(&k);
                if let Some(status) = self.claims.get_mut(&k).and_then(|c| c.status.as_mut()) {
                    status.allocation = None;
                }
                self.used -= self.claim_milli.remove(&k).unwrap_or(0);
                deallocated.push(name.clone());
            }
        }
        self.scheduler.forget(&work.pod, &held.node, &deallocated);
        self.used -= held.unit_milli;
    }

    fn gpu_used(&self) -> i64 {
        self.used
    }

    fn gpu_capacity(&self) -> i64 {
        self.capacity
    }

    fn fragmentation(&self) -> Option<f64> {
        None
    }

    fn nodes(&self) -> usize {
        self.nodes
    }

    fn retry_on_placement(&self) -> bool {
        self.retry_on_placement
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{self, EventKind, Options};
    use tessera_node::Topology;

    const WORKLOAD: &str = "apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: eight-gpus, namespace: research}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly: {deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: 8}
---
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: research}
spec:
  completions: 6
  parallelism: 4
  template:
    metadata:
      annotations: {sim.tessera.dev/duration: 1h}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: trainer}]
      resourceClaims: [{name: gpus, resourceClaimTemplateName: eight-gpus}]
---
apiVersion: v1
kind: Pod
metadata:
  name: notebook
  namespace: analytics
  annotations: {sim.tessera.dev/arrival: 30m, sim.tessera.dev/duration: 2h}
spec:
  restartPolicy: Never
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  containers:
  - name: c
    image: jupyter
    resources: {limits: {nvidia.com/gpu: 2}}
";

    #[test]
    fn jobs_queue_for_whole_nodes_and_claims_are_freed_on_departure() {
        let workload =
            crate::workload::parse(&[("w.yaml".into(), WORKLOAD.into())]).expect("workload");
        let specs = Topology::default_lab().nodes();
        let mut placer = KubePlacer::new(
            &specs,
            workload.classes,
            workload.claims,
            Vec::new(),
            &workload.pods,
        )
        .expect("cluster");
        // 2 DGX H100 × 8 + 2 HGX H200 × 8 + 1 L40S × 4.
        assert_eq!(placer.gpu_capacity(), 36 * MILLI);
        let options = Options {
            policy: "default-scheduler".into(),
            seed: 0,
            max_wait: None,
        };
        let (events, summary) = timeline::run(&mut placer, workload.pods, &options).expect("runs");
        let placed: Vec<(i64, &str, &str)> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Placed { node, .. } => Some((e.time, e.pod.as_str(), node.as_str())),
                _ => None,
            })
            .collect();
        // Only the H100s offer whole GPUs through DRA (the H200s are MIG-partitioned): two
        // 8-GPU pods at a time, in three waves; the notebook takes half of the L40S's
        // time-sliced GPUs (2 of 16 replicas = 0.5 GPU).
        assert_eq!(
            placed,
            [
                (0, "train-0", "h100-1"),
                (0, "train-1", "h100-2"),
                (1800, "notebook", "l40s-1"),
                (3600, "train-2", "h100-1"),
                (3600, "train-3", "h100-2"),
                (7200, "train-4", "h100-1"),
                (7200, "train-5", "h100-2"),
            ]
        );
        let peak = events.iter().map(|e| e.gpu_used).max();
        assert_eq!(peak, Some(16 * MILLI + 500));
        let at = |pod: &str| {
            events
                .iter()
                .find(|e| e.pod == pod && matches!(e.kind, EventKind::Placed { .. }))
                .map(|e| e.gpu_used)
        };
        assert_eq!(
            at("train-4"),
            Some(8 * MILLI + 500),
            "train-0's claim was freed"
        );
        assert_eq!(
            events.last().map(|e| e.gpu_used),
            Some(0),
            "claims deallocated"
        );
        assert_eq!(summary.makespan, 3 * 3600);
        assert_eq!(summary.namespaces["research"].completed, 6);
        // train-2 and -3 waited an hour; train-4 and -5 arrived as 0 and 1 left and waited
        // another hour.
        assert_eq!(summary.namespaces["research"].p95_wait, 3600);
        assert_eq!(summary.namespaces["analytics"].pending, 0);
        assert_eq!(summary.total_gpus, 36);
    }
}
