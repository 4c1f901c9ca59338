//! The live scheduling core on the timeline: a cluster from a topology file — the Nodes,
//! ResourceSlices and DeviceClasses node twins would register — and Kubernetes pods placed by
//! `tessera-scheduler` exactly as the embedded scheduler places them (filters, scores,
//! profiles, DRA allocation); claims are allocated when their first pod is placed and
//! deallocated when their last pod leaves, as the claim controller does.
//!
//! GPU accounting for the summary: a whole GPU is 1000; a device-plugin unit is its share of
//! the node's GPUs (time-slicing replicas count a fraction); a MIG device, through the device
//! plugin or DRA, its share of the GPU's memory slices or memory. Each share is booked on a
//! GPU (DRA: the device's own; device plugin: whole units on the lowest free GPUs, shares packed
//! onto the fullest GPU with room, as the kubelet's plugin would), so FGD's fragmentation
//! measure applies: the free GPU thousandths the workload's typical GPU pods could not use.
//!
//! Pod groups (`scheduling.x-k8s.io/pod-group`) are placed whole through the core's
//! `schedule_group`, with the PodGroup's `minMember` and `tessera.dev/gang-topology`. A pod
//! nothing fits gets the core's DefaultPreemption (placed pods are counted on their nodes, their
//! claims reserved for them, so freed devices count).

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::Value;
use tessera_node::topology::NodeSpec;
use tessera_scheduler::profile::Profile;
use tessera_scheduler::score::Strategy;
use tessera_scheduler::{Decision, Scheduler, node_info};

use crate::cluster::{Demand, MILLI};
use crate::timeline::{Placed, Placer};
use crate::workload::SimPod;

/// Why a cluster cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ClusterError(String);

/// A node's GPU shares: thousandths of a GPU per unit of each extended resource, and the GPU
/// and thousandths of each DRA device (by pool and name).
#[derive(Default)]
struct Shares {
    per_unit: HashMap<String, HashMap<String, i64>>,
    per_device: HashMap<(String, String), (usize, i64)>,
}

/// GPU thousandths booked on a node's GPUs: (node, GPU index, thousandths).
type Booked = Vec<(String, usize, i64)>;

/// What a placed pod holds.
pub struct Held {
    node: String,
    /// What its extended resources booked (its claims' are the claims' own).
    units: Booked,
}

/// A node's GPUs as fragmentation sees them.
struct NodeGpus {
    model: String,
    /// Free thousandths of each GPU.
    free: Vec<i64>,
}

/// A topology's cluster under the scheduling core.
pub struct KubePlacer {
    scheduler: Scheduler,
    profiles: Vec<Profile>,
    /// Claims by (namespace, name), with their allocation while allocated.
    claims: BTreeMap<(String, String), ResourceClaim>,
    /// Pods placed that use each claim.
    users: BTreeMap<(String, String), usize>,
    /// What each allocated claim's devices booked.
    claim_booked: BTreeMap<(String, String), Booked>,
    shares: Shares,
    gpus: BTreeMap<String, NodeGpus>,
    /// The workload's typical GPU pods (FGD's measure).
    typical: Vec<crate::frag::TypicalPod>,
    capacity: i64,
    used: i64,
    nodes: usize,
    retry_on_placement: bool,
    /// Why the last pod that did not fit did not, for its preemption attempt.
    last_failure: Option<((String, String), tessera_scheduler::FitError)>,
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
    gpus: BTreeMap<String, NodeGpus>,
    /// GPU thousandths.
    capacity: i64,
}

/// The GPU a DRA device sits on, from NVIDIA's names (`gpu-3`, `gpu-3-mig-1g.18gb-0`).
fn gpu_index(device: &str) -> Option<usize> {
    let digits: String = device
        .strip_prefix("gpu-")?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The node objects, slices and device classes a topology's twins would publish, and each
/// node's GPU shares.
fn objects(specs: &[NodeSpec]) -> Result<Objects, ClusterError> {
    let mut nodes = Vec::new();
    let mut slices = Vec::new();
    let mut shares = Shares::default();
    let mut gpu_map = BTreeMap::new();
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
        gpu_map.insert(
            spec.name.clone(),
            NodeGpus {
                model: model.map(|m| m.name.clone()).unwrap_or_default(),
                free: vec![MILLI; hardware.server.gpus.len()],
            },
        );
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
                if let Some(gpu) = gpu_index(name) {
                    shares.per_device.insert(
                        (pool.clone(), name.to_string()),
                        (gpu, milli_of_device(device, memory)),
                    );
                }
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
        gpus: gpu_map,
        capacity,
    })
}

/// The pod's claims reserved for it (what preemption reads to count a victim's devices freed).
fn reserved_for(pod: &Pod, mut claims: Vec<ResourceClaim>) -> Vec<ResourceClaim> {
    let consumer = k8s_openapi::api::resource::v1::ResourceClaimConsumerReference {
        resource: "pods".into(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        ..Default::default()
    };
    for claim in &mut claims {
        claim
            .status
            .get_or_insert_with(Default::default)
            .reserved_for
            .get_or_insert_with(Vec::new)
            .push(consumer.clone());
    }
    claims
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
            gpus,
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
            claims.iter().cloned().map(std::sync::Arc::new),
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
            claim_booked: BTreeMap::new(),
            typical: typical_gpu_pods(pods, &shares),
            shares,
            gpus,
            capacity,
            used: 0,
            nodes: nodes.len(),
            retry_on_placement: pods.iter().any(|p| p.work.pod_affinity),
            last_failure: None,
        })
    }

    /// Switches the scheduler to the profile of the pod's `schedulerName` (the first profile
    /// when none serves it).
    fn use_profile_of(&mut self, pod: &Pod) {
        let name = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or("default-scheduler");
        let profile = self
            .profiles
            .iter()
            .find(|p| p.scheduler_name == name)
            .unwrap_or(&self.profiles[0]);
        self.scheduler.set_profile(profile);
    }

    /// Books what a decision gives a pod: its GPU units, its claims' allocations and devices.
    fn book(&mut self, namespace: &str, work: &SimPod, decision: Decision) -> (Placed, Held) {
        // Preemption may evict it: the core counts it on its node.
        let mut bound = work.pod.clone();
        bound.spec.get_or_insert_with(Default::default).node_name = Some(decision.node.clone());
        self.scheduler.add_bound(&bound);
        let units = self.book_units(&work.pod, &decision.node);
        let unit_milli: i64 = units.iter().map(|(_, _, m)| m).sum();
        self.used += unit_milli;
        let mut devices = Vec::new();
        for (name, allocation) in &decision.allocations {
            let results = allocation
                .devices
                .as_ref()
                .and_then(|d| d.results.as_ref())
                .into_iter()
                .flatten();
            let mut booked = Vec::new();
            for result in results {
                devices.push(result.device.clone());
                let device = (result.pool.clone(), result.device.clone());
                if let Some(&(gpu, milli)) = self.shares.per_device.get(&device) {
                    if let Some(free) = self
                        .gpus
                        .get_mut(&decision.node)
                        .and_then(|g| g.free.get_mut(gpu))
                    {
                        *free = (*free - milli).max(0);
                    }
                    self.used += milli;
                    booked.push((decision.node.clone(), gpu, milli));
                }
            }
            let k = key(namespace, name);
            if let Some(claim) = self.claims.get_mut(&k) {
                claim.status.get_or_insert_with(Default::default).allocation =
                    Some(allocation.clone());
            }
            self.claim_booked.insert(k, booked);
        }
        let mut gpu_milli = unit_milli;
        for name in &work.claims {
            let k = key(namespace, name);
            gpu_milli += self
                .claim_booked
                .get(&k)
                .map_or(0, |b| b.iter().map(|(_, _, m)| m).sum());
            *self.users.entry(k).or_insert(0) += 1;
        }
        let placed = Placed {
            node: decision.node.clone(),
            devices,
            gpu_milli,
        };
        (
            placed,
            Held {
                node: decision.node,
                units,
            },
        )
    }

    /// The pod's claims as they stand (allocated or not).
    fn claims_of(&self, namespace: &str, work: &SimPod) -> Vec<ResourceClaim> {
        work.claims
            .iter()
            .filter_map(|name| self.claims.get(&key(namespace, name)).cloned())
            .collect()
    }

    /// Books a pod's extended GPU resources on `node`'s GPUs: whole units on the lowest
    /// fully free GPUs, shares on the fullest GPU with room.
    fn book_units(&mut self, pod: &Pod, node: &str) -> Booked {
        let mut booked = Vec::new();
        let (Some(units), Some(gpus)) = (self.shares.per_unit.get(node), self.gpus.get_mut(node))
        else {
            return booked;
        };
        for (name, amount) in tessera_scheduler::resources::pod_requests(pod) {
            let Some(&per_unit) = units.get(&name) else {
                continue;
            };
            let count = i64::try_from(amount / 1000).unwrap_or(0);
            if per_unit >= MILLI {
                let mut left = count * per_unit / MILLI;
                for (i, free) in gpus.free.iter_mut().enumerate() {
                    if left > 0 && *free == MILLI {
                        *free = 0;
                        left -= 1;
                        booked.push((node.to_string(), i, MILLI));
                    }
                }
            } else {
                let want = (count * per_unit).min(MILLI);
                let fullest = gpus
                    .free
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| **f >= want)
                    .min_by_key(|(i, f)| (**f, *i))
                    .map(|(i, _)| i);
                if let Some(i) = fullest {
                    gpus.free[i] -= want;
                    booked.push((node.to_string(), i, want));
                }
            }
        }
        booked
    }

    fn unbook(&mut self, booked: &Booked) {
        for (node, gpu, milli) in booked {
            if let Some(free) = self.gpus.get_mut(node).and_then(|g| g.free.get_mut(*gpu)) {
                *free = (*free + milli).min(MILLI);
            }
            self.used -= milli;
        }
    }
}

/// What a pod asks of GPUs, as FGD's typical pods count it (CPU, GPU count, thousandths of
/// each): extended resources at the cluster's usual share per unit, DRA requests as whole
/// devices of their class (MIG devices at the smallest MIG share offered).
fn gpu_demand(pod: &SimPod, per_unit: &HashMap<String, i64>, smallest_mig: i64) -> Demand {
    let requests = tessera_scheduler::resources::pod_requests(&pod.pod);
    let cpu = requests
        .get("cpu")
        .map_or(0, |c| i64::try_from(*c).unwrap_or(i64::MAX));
    let mut demand = Demand {
        cpu,
        memory: 0,
        gpus: 0,
        milli: 0,
        models: String::new(),
    };
    for (name, amount) in &requests {
        if let Some(&share) = per_unit.get(name) {
            let count = i64::try_from(*amount / 1000).unwrap_or(0);
            if share >= MILLI {
                demand.gpus += u32::try_from(count).unwrap_or(0);
                demand.milli = MILLI;
            } else if count > 0 {
                demand.gpus = 1;
                demand.milli = (count * share).min(MILLI);
            }
        }
    }
    for request in &pod.requests {
        if request.mig {
            demand.gpus = demand.gpus.max(1);
            demand.milli = smallest_mig * i64::from(request.count.max(1));
        } else {
            demand.gpus += request.count;
            demand.milli = MILLI;
        }
    }
    demand
}

fn typical_gpu_pods(
    pods: &[crate::timeline::TimedPod<SimPod>],
    shares: &Shares,
) -> Vec<crate::frag::TypicalPod> {
    // The usual share per unit of each extended resource across nodes.
    let mut per_unit: HashMap<String, i64> = HashMap::new();
    for units in shares.per_unit.values() {
        for (name, share) in units {
            per_unit.entry(name.clone()).or_insert(*share);
        }
    }
    let smallest_mig = shares
        .per_device
        .values()
        .map(|(_, milli)| *milli)
        .filter(|m| *m < MILLI)
        .min()
        .unwrap_or(MILLI);
    let demands: Vec<Demand> = pods
        .iter()
        .map(|p| gpu_demand(&p.work, &per_unit, smallest_mig))
        .filter(|d| d.gpus > 0 && d.milli > 0)
        .collect();
    crate::frag::typical_pods(&demands)
}

impl Placer for KubePlacer {
    type Work = SimPod;
    type Held = Held;
    type Shape = String;

    fn shape(&self, work: &SimPod) -> Option<String> {
        Some(work.shape.clone())
    }

    fn place(&mut self, (namespace, name): (&str, &str), work: &SimPod) -> Option<(Placed, Held)> {
        let claims = self.claims_of(namespace, work);
        self.use_profile_of(&work.pod);
        let decision = match self.scheduler.schedule(&work.pod, &claims) {
            Ok(decision) => decision,
            Err(fit) => {
                self.last_failure = Some((key(namespace, name), fit));
                return None;
            }
        };
        self.scheduler
            .assume(&work.pod, &decision, &reserved_for(&work.pod, claims));
        Some(self.book(namespace, work, decision))
    }

    fn preempt(
        &mut self,
        (namespace, name): (&str, &str),
        work: &SimPod,
    ) -> Option<Vec<(String, String)>> {
        let claims = self.claims_of(namespace, work);
        self.use_profile_of(&work.pod);
        // The failure `place` just met, not a second search.
        let fit = match self.last_failure.take() {
            Some((failed, fit)) if failed == key(namespace, name) => fit,
            _ => self.scheduler.schedule(&work.pod, &claims).err()?,
        };
        let nomination = self.scheduler.preempt(&work.pod, &claims, &fit).ok()?;
        (!nomination.victims.is_empty()).then_some(nomination.victims)
    }

    fn group(&self, work: &SimPod) -> Option<(String, usize)> {
        work.group.as_ref().map(|g| (g.key.clone(), g.min_member))
    }

    fn place_group(
        &mut self,
        members: &[((&str, &str), &SimPod)],
        needed: usize,
    ) -> Option<Vec<(Placed, Held)>> {
        let first = members.first()?.1;
        self.use_profile_of(&first.pod);
        let with_claims: Vec<(&Pod, Vec<ResourceClaim>)> = members
            .iter()
            .map(|((namespace, _), work)| {
                let claims = self.claims_of(namespace, work);
                (&work.pod, reserved_for(&work.pod, claims))
            })
            .collect();
        let topology = first.group.as_ref().and_then(|g| g.topology_key.as_deref());
        let (decisions, booked) = self
            .scheduler
            .schedule_group(&with_claims, needed, topology)
            .ok()?;
        self.scheduler = booked;
        Some(
            members
                .iter()
                .zip(decisions)
                .map(|(((namespace, _), work), decision)| self.book(namespace, work, decision))
                .collect(),
        )
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
                if let Some(booked) = self.claim_booked.remove(&k) {
                    self.unbook(&booked);
                }
                deallocated.push(name.clone());
            }
        }
        self.scheduler.forget(&work.pod, &held.node, &deallocated);
        let name = work.pod.metadata.name.as_deref().unwrap_or_default();
        self.scheduler.remove_bound(namespace, name, &held.node);
        self.unbook(&held.units);
    }

    fn gpu_used(&self) -> i64 {
        self.used
    }

    fn gpu_capacity(&self) -> i64 {
        self.capacity
    }

    fn fragmentation(&self) -> Option<f64> {
        if self.typical.is_empty() {
            return None;
        }
        let cpu_left: HashMap<&str, i64> = self
            .scheduler
            .nodes()
            .iter()
            .map(|n| (n.name.as_str(), n.common.cpu - n.common.cpu_requested))
            .collect();
        Some(
            self.gpus
                .iter()
                .map(|(name, gpus)| {
                    let cpu = cpu_left.get(name.as_str()).copied().unwrap_or(0);
                    crate::frag::node_fragmentation(cpu, &gpus.free, &gpus.model, &self.typical)
                })
                .sum(),
        )
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

    /// Runs a workload on the lab topology: its events, summary and GPU capacity.
    fn simulate(text: &str) -> (Vec<timeline::Event>, timeline::Summary, i64) {
        let workload = crate::workload::parse(&[("w.yaml".into(), text.into())]).expect("workload");
        let specs = Topology::default_lab().nodes();
        let mut placer = KubePlacer::new(
            &specs,
            workload.classes,
            workload.claims,
            Vec::new(),
            &workload.pods,
        )
        .expect("cluster");
        let options = Options {
            policy: "default-scheduler".into(),
            seed: 0,
            max_wait: None,
        };
        let capacity = placer.gpu_capacity();
        let (events, summary) = timeline::run(&mut placer, workload.pods, &options).expect("runs");
        (events, summary, capacity)
    }

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

    const GANG: &str = "apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu, namespace: research}
spec:
  spec:
    devices:
      requests:
      - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: eight, namespace: research}
spec:
  spec:
    devices:
      requests:
      - {name: gpus, exactly: {deviceClassName: gpu.nvidia.com, count: 8}}
---
apiVersion: v1
kind: Pod
metadata:
  name: solo
  namespace: research
  annotations: {sim.tessera.dev/duration: 1h}
spec:
  restartPolicy: Never
  containers: [{name: c, image: trainer}]
  resourceClaims: [{name: gpus, resourceClaimTemplateName: eight}]
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: ring
  namespace: research
  annotations: {tessera.dev/gang-topology: topology.kubernetes.io/zone}
spec: {minMember: 16}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: ring
  namespace: research
  annotations: {sim.tessera.dev/arrival: 10s}
spec:
  completions: 16
  parallelism: 16
  template:
    metadata:
      labels: {scheduling.x-k8s.io/pod-group: ring}
      annotations: {sim.tessera.dev/duration: 30m}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: trainer}]
      resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]
";

    const PREEMPTION: &str = "apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: urgent}
value: 1000
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: eight, namespace: research}
spec:
  spec:
    devices:
      requests:
      - {name: gpus, exactly: {deviceClassName: gpu.nvidia.com, count: 8}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: batch, namespace: research}
spec:
  parallelism: 2
  template:
    metadata:
      annotations: {sim.tessera.dev/duration: 2h}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: trainer}]
      resourceClaims: [{name: gpus, resourceClaimTemplateName: eight}]
---
apiVersion: v1
kind: Pod
metadata:
  name: urgent
  namespace: research
  annotations: {sim.tessera.dev/arrival: 10m, sim.tessera.dev/duration: 1h}
spec:
  priorityClassName: urgent
  restartPolicy: Never
  containers: [{name: c, image: trainer}]
  resourceClaims: [{name: gpus, resourceClaimTemplateName: eight}]
";

    #[test]
    fn a_higher_priority_pod_preempts_and_its_victim_waits_again() {
        let (events, summary, _) = simulate(PREEMPTION);
        let story: Vec<(i64, &str, String)> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Placed { node, .. } => Some((e.time, e.pod.as_str(), node.clone())),
                EventKind::Preempted { by } => Some((e.time, e.pod.as_str(), format!("by {by}"))),
                _ => None,
            })
            .collect();
        fn at<'a>(t: i64, pod: &'a str, what: &str) -> (i64, &'a str, String) {
            (t, pod, what.to_string())
        }
        assert_eq!(
            story,
            [
                at(0, "batch-0", "h100-1"),
                at(0, "batch-1", "h100-2"),
                at(600, "batch-0", "by research/urgent"),
                at(600, "urgent", "h100-1"),
                at(4200, "batch-0", "h100-1"),
            ]
        );
        assert_eq!(summary.namespaces["research"].preempted, 1);
        assert_eq!(summary.overall.completed, 3);
        // batch-0 ran again from 4200 for its full two hours.
        assert_eq!(summary.makespan, 4200 + 7200);
    }

    #[test]
    fn a_gang_waits_whole_until_all_its_members_fit() {
        let workload = crate::workload::parse(&[("w.yaml".into(), GANG.into())]).expect("workload");
        let group = workload.pods[1].work.group.as_ref().expect("a member");
        assert_eq!(
            (group.key.as_str(), group.min_member),
            ("research/ring", 16)
        );
        let (events, summary, _) = simulate(GANG);
        let placed: Vec<(i64, &str)> = events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Placed { .. }))
            .map(|e| (e.time, e.pod.as_str()))
            .collect();
        // solo holds one DGX for an hour; 8 GPUs are free on the other, but the 16-pod gang
        // takes none of them until both DGXs are free — then all 16 at once.
        assert_eq!(placed[0], (0, "solo"));
        assert_eq!(placed.len(), 17);
        assert!(placed[1..].iter().all(|(t, _)| *t == 3600), "{placed:?}");
        let peak_before = events
            .iter()
            .filter(|e| e.time < 3600)
            .map(|e| e.gpu_used)
            .max();
        assert_eq!(peak_before, Some(8 * MILLI), "no partial gang holds GPUs");
        assert_eq!(summary.overall.completed, 17);
    }

    #[test]
    fn jobs_queue_for_whole_nodes_and_claims_are_freed_on_departure() {
        let (events, summary, capacity) = simulate(WORKLOAD);
        // 2 DGX H100 × 8 + 2 HGX H200 × 8 + 1 L40S × 4.
        assert_eq!(capacity, 36 * MILLI);
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
        // The L40S's 4 GPUs can never take an 8-GPU pod: always fragmented for this workload.
        let least = summary
            .fragmentation
            .iter()
            .map(|s| s.value)
            .fold(f64::INFINITY, f64::min);
        assert!(least > 0.0 && least <= 100.0, "{:?}", summary.fragmentation);
    }
}
