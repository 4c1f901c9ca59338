//! Kueue's stored objects read into the core's inputs, as Kueue's cache and queue manager
//! read them: ResourceFlavors, ClusterQueues (quotas, policies, queueing strategy, stop
//! policy, missing flavors), Cohorts, LocalQueues, namespaces' labels, and Workloads sorted
//! into finished, holding quota (their usage from `status.admission`, Kueue's
//! `workload.Info` of an admitted Workload) and pending (`QueuedWorkload`).
//!
//! A PodSet's topology request is its `topologyRequest` when that asks for TAS, else the one
//! its template's annotations give (a Workload made without Kueue's job framework).
//!
//! Objects arrive as JSON (`kueue.x-k8s.io/v1beta2`, as the embedded API server stores them);
//! a spec that does not parse is skipped as if absent. Knows nothing about writing statuses
//! or about the scheduling cycle.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use serde_json::Value;
use tessera_model::kueue::queues as api;
use tessera_model::kueue::workload as wl_api;
use tessera_model::quantity::Quantity;
use tessera_model::{conditions, json, time};

use crate::amount::{Amount, resource_value};
use crate::cluster_queue::{
    BorrowWithinCohort, ClusterQueuePolicy, ClusterQueuePreemption, FlavorFungibility,
    FungibilityPolicy, FungibilityPreference, PreemptionPolicy, ResourceGroup,
};
use crate::cycle::ClusterQueueSnapshot;
use crate::flavor::ResourceFlavorSpec;
use crate::preemption::AdmittedWorkload;
use crate::queue::{EvictionCause, QueuedWorkload, QueueingStrategy, StopPolicy};
use crate::resources::{FlavorResource, FlavorResourceQuantities};
use crate::tas::TopologyRequest;
use crate::tas::annotations::topology_from_annotations;
use crate::tree::{self, CohortSpec, Quotas, ResourceQuota};
use crate::workload::{DEFAULT_POD_SET_NAME, PodSet, ReclaimablePod, Workload, WorkloadInfo};

/// Every object the queue manager reads, as stored (JSON).
#[derive(Debug, Clone, Default)]
pub struct Objects {
    /// ResourceFlavors.
    pub flavors: Vec<Value>,
    /// ClusterQueues.
    pub cluster_queues: Vec<Value>,
    /// Cohorts.
    pub cohorts: Vec<Value>,
    /// LocalQueues.
    pub local_queues: Vec<Value>,
    /// Workloads (shared: the shell keeps them between passes, the pass only reads them).
    pub workloads: Vec<Arc<Value>>,
    /// Namespaces (their labels select ClusterQueues).
    pub namespaces: Vec<Value>,
    /// Topologies (Topology-Aware Scheduling).
    pub topologies: Vec<Value>,
    /// Nodes (the TAS flavors' capacity; shared like the Workloads); read only when a TAS
    /// flavor exists.
    pub nodes: Vec<Arc<Value>>,
    /// Pods (what bound non-TAS pods use of the TAS flavors' nodes).
    pub pods: Vec<Value>,
    /// AdmissionChecks (whether the ClusterQueues requiring them are active).
    pub admission_checks: Vec<Value>,
    /// What pending Workloads' DRA claims count as (`dra::DeviceRequests::resolve`); the
    /// default, none, reads every Workload's requests from its pod templates alone.
    pub devices: crate::api::dra::DeviceRequests,
    /// RuntimeClasses (`node.k8s.io/v1`): a PodSet naming one counts its overhead
    /// ([`with_pod_overhead`]).
    pub runtime_classes: Vec<Value>,
}

/// Objects as [`Objects`] holds its Workloads.
pub fn shared(objects: impl IntoIterator<Item = Value>) -> Vec<Arc<Value>> {
    objects.into_iter().map(Arc::new).collect()
}

/// Whether some PodSet template of a Workload names a RuntimeClass (whose overhead
/// [`with_pod_overhead`] may add).
pub fn names_runtime_class(object: &Value) -> bool {
    pod_template_specs(object).any(|spec| spec.get("runtimeClassName").is_some())
}

/// Each PodSet's `template.spec` (`Null` where it has none), in order: read on every Workload
/// of every pass, so looked up directly rather than through JSON pointers.
pub fn pod_template_specs(object: &Value) -> impl Iterator<Item = &Value> {
    object
        .get("spec")
        .and_then(|spec| spec.get("podSets"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|pod_set| &pod_set["template"]["spec"])
}

/// A RuntimeClass's `overhead.podFixed`, when it states any.
fn overhead_of(class: &Value) -> Option<&Value> {
    class
        .get("overhead")
        .and_then(|o| o.get("podFixed"))
        .filter(|f| f.as_object().is_some_and(|o| !o.is_empty()))
}

/// Kueue's `handlePodOverhead`: a Workload whose PodSet templates name a RuntimeClass and
/// state no overhead, with each such template's `overhead` set to its class's
/// `overhead.podFixed` (so the PodSet's requests count it, as the pods' will once admission
/// sets it); `None` when no template changes. A class not found, or without overhead,
/// changes nothing (Kueue logs the lookup error and goes on).
pub fn with_pod_overhead(object: &Value, runtime_classes: &[Value]) -> Option<Value> {
    // Read on every Workload of every pass: most clusters' classes state no overhead.
    if !runtime_classes.iter().any(|c| overhead_of(c).is_some()) {
        return None;
    }
    let mut changes = Vec::new();
    for (index, spec) in pod_template_specs(object).enumerate() {
        let Some(class) = spec.get("runtimeClassName").and_then(Value::as_str) else {
            continue;
        };
        let stated = spec
            .get("overhead")
            .and_then(Value::as_object)
            .is_some_and(|o| !o.is_empty());
        if stated {
            continue;
        }
        let fixed = runtime_classes
            .iter()
            .find(|c| name(c) == class)
            .and_then(overhead_of);
        if let Some(fixed) = fixed {
            changes.push((index, fixed.clone()));
        }
    }
    if changes.is_empty() {
        return None;
    }
    let mut adjusted = object.clone();
    for (index, fixed) in changes {
        if let Some(spec) = adjusted
            .pointer_mut(&format!("/spec/podSets/{index}/template/spec"))
            .and_then(Value::as_object_mut)
        {
            spec.insert("overhead".into(), fixed);
        }
    }
    Some(adjusted)
}

/// Objects by `metadata.name` (cluster-scoped kinds: AdmissionChecks, their configs,
/// MultiKueueClusters).
pub fn by_name(objects: &[Value]) -> BTreeMap<String, Value> {
    objects
        .iter()
        .map(|o| (name(o).to_owned(), o.clone()))
        .collect()
}

/// `metadata.name`.
pub fn name(object: &Value) -> &str {
    metadata_text(object, "name")
}

/// `metadata.namespace`.
pub fn namespace(object: &Value) -> &str {
    metadata_text(object, "namespace")
}

/// `metadata.resourceVersion` (`None` when absent).
pub fn resource_version(object: &Value) -> Option<&str> {
    metadata_field(object, "resourceVersion")
}

/// A string field of `metadata` ("" when absent).
fn metadata_text<'a>(object: &'a Value, field: &str) -> &'a str {
    metadata_field(object, field).unwrap_or_default()
}

/// A string field of `metadata`: read for every object of every pass, so looked up
/// directly rather than through a JSON pointer.
fn metadata_field<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// `namespace/name`.
pub fn key(object: &Value) -> String {
    format!("{}/{}", namespace(object), name(object))
}

fn spec<T: serde::de::DeserializeOwned + Default>(object: &Value) -> Option<T> {
    match object.get("spec") {
        None | Some(Value::Null) => Some(T::default()),
        Some(spec) => serde_json::from_value(spec.clone()).ok(),
    }
}

/// A ResourceFlavor as flavor matching reads it.
pub fn flavor(object: &Value) -> Option<ResourceFlavorSpec> {
    let spec: api::ResourceFlavorSpec = spec(object)?;
    Some(ResourceFlavorSpec {
        name: name(object).to_owned(),
        node_labels: spec.node_labels.unwrap_or_default(),
        node_taints: spec.node_taints.unwrap_or_default(),
        tolerations: spec.tolerations.unwrap_or_default(),
    })
}

/// A ClusterQueue read: its part of the quota tree, what the cycle reads, and its queue.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterQueue {
    /// Quotas and cohort.
    pub tree: tree::ClusterQueueSpec,
    /// Policies and namespace selector.
    pub snapshot: ClusterQueueSnapshot,
    /// `spec.queueingStrategy`.
    pub strategy: QueueingStrategy,
    /// `spec.stopPolicy`.
    pub stop_policy: StopPolicy,
    /// Flavors its resource groups name, in order, with their covered resources in order
    /// (the order of its status).
    pub flavor_resources: Vec<(String, Vec<String>)>,
    /// Whether it is being deleted.
    pub terminating: bool,
    /// `spec.admissionScope.admissionMode` is `UsageBasedAdmissionFairSharing`.
    pub usage_based_admission_fair_sharing: bool,
}

/// An API quantity as the core reads it; `None` when it does not parse.
fn exact(quantity: &ApiQuantity) -> Option<Quantity> {
    Quantity::try_from(quantity).ok()
}

/// Quotas of resource groups; a quota whose nominal amount does not parse is left out.
fn quotas(groups: &[api::ResourceGroup]) -> Quotas {
    groups
        .iter()
        .flat_map(|group| &group.flavors)
        .flat_map(|flavor| {
            flavor.resources.iter().filter_map(|quota| {
                Some((
                    FlavorResource::new(flavor.name.clone(), quota.name.clone()),
                    ResourceQuota::from_quantities(
                        &quota.name,
                        &exact(&quota.nominal_quota)?,
                        quota.borrowing_limit.as_ref().and_then(exact).as_ref(),
                        quota.lending_limit.as_ref().and_then(exact).as_ref(),
                    ),
                ))
            })
        })
        .collect()
}

fn weight(fair_sharing: Option<&api::FairSharing>) -> f64 {
    tree::fair_weight(
        fair_sharing
            .and_then(|f| f.weight.as_ref())
            .and_then(exact)
            .as_ref(),
    )
}

fn policy_of(text: Option<&str>) -> PreemptionPolicy {
    match text {
        Some("LowerPriority") => PreemptionPolicy::LowerPriority,
        Some("LowerOrNewerEqualPriority") => PreemptionPolicy::LowerOrNewerEqualPriority,
        Some("Any") => PreemptionPolicy::Any,
        _ => PreemptionPolicy::Never,
    }
}

fn fungibility_of(text: Option<&str>, default: FungibilityPolicy) -> FungibilityPolicy {
    match text {
        Some("MayStopSearch") => FungibilityPolicy::MayStopSearch,
        Some("TryNextFlavor") => FungibilityPolicy::TryNextFlavor,
        _ => default,
    }
}

fn stop_policy_of(text: Option<&str>) -> StopPolicy {
    match text {
        Some("Hold") => StopPolicy::Hold,
        Some("HoldAndDrain") => StopPolicy::HoldAndDrain,
        _ => StopPolicy::None,
    }
}

/// A ClusterQueue from its object.
pub fn cluster_queue(object: &Value) -> Option<ClusterQueue> {
    let spec: api::ClusterQueueSpec = spec(object)?;
    let groups = spec.resource_groups.clone().unwrap_or_default();
    let defaults = FlavorFungibility::default();
    let fungibility = spec.flavor_fungibility.clone().unwrap_or_default();
    let preemption = spec.preemption.clone().unwrap_or_default();
    let policy = ClusterQueuePolicy {
        resource_groups: groups
            .iter()
            .map(|group| ResourceGroup {
                covered_resources: group.covered_resources.iter().cloned().collect(),
                flavors: group.flavors.iter().map(|f| f.name.clone()).collect(),
            })
            .collect(),
        flavor_fungibility: FlavorFungibility {
            when_can_borrow: fungibility_of(
                fungibility.when_can_borrow.as_deref(),
                defaults.when_can_borrow,
            ),
            when_can_preempt: fungibility_of(
                fungibility.when_can_preempt.as_deref(),
                defaults.when_can_preempt,
            ),
            preference: match fungibility.preference.as_deref() {
                Some("BorrowingOverPreemption") => {
                    Some(FungibilityPreference::BorrowingOverPreemption)
                }
                Some("PreemptionOverBorrowing") => {
                    Some(FungibilityPreference::PreemptionOverBorrowing)
                }
                _ => None,
            },
        },
        preemption: ClusterQueuePreemption {
            within_cluster_queue: policy_of(preemption.within_cluster_queue.as_deref()),
            reclaim_within_cohort: policy_of(preemption.reclaim_within_cohort.as_deref()),
            borrow_within_cohort: preemption.borrow_within_cohort.map(|b| BorrowWithinCohort {
                policy: policy_of(b.policy.as_deref()),
                max_priority_threshold: b.max_priority_threshold,
            }),
        },
    };
    let flavor_resources = groups
        .iter()
        .flat_map(|group| {
            group
                .flavors
                .iter()
                .map(|f| (f.name.clone(), group.covered_resources.clone()))
        })
        .collect();
    Some(ClusterQueue {
        tree: tree::ClusterQueueSpec {
            name: name(object).to_owned(),
            cohort: spec.cohort_name.clone().filter(|c| !c.is_empty()),
            quotas: quotas(&groups),
            fair_weight: weight(spec.fair_sharing.as_ref()),
        },
        snapshot: ClusterQueueSnapshot {
            policy,
            namespace_selector: spec.namespace_selector.clone(),
            generation: json::int(object, "/metadata/generation").unwrap_or(0),
        },
        strategy: match spec.queueing_strategy.as_deref() {
            Some("StrictFIFO") => QueueingStrategy::StrictFifo,
            _ => QueueingStrategy::BestEffortFifo,
        },
        stop_policy: stop_policy_of(spec.stop_policy.as_deref()),
        flavor_resources,
        terminating: object.pointer("/metadata/deletionTimestamp").is_some(),
        usage_based_admission_fair_sharing: spec
            .admission_scope
            .as_ref()
            .is_some_and(|scope| scope.admission_mode == "UsageBasedAdmissionFairSharing"),
    })
}

/// A Cohort from its object.
pub fn cohort(object: &Value) -> Option<CohortSpec> {
    let spec: api::CohortSpec = spec(object)?;
    Some(CohortSpec {
        name: name(object).to_owned(),
        parent: spec.parent_name.clone().filter(|p| !p.is_empty()),
        quotas: quotas(&spec.resource_groups.unwrap_or_default()),
        fair_weight: weight(spec.fair_sharing.as_ref()),
    })
}

/// A LocalQueue: its ClusterQueue and stop policy.
pub fn local_queue(object: &Value) -> Option<(String, StopPolicy)> {
    let spec: api::LocalQueueSpec = spec(object)?;
    Some((
        spec.cluster_queue.unwrap_or_default(),
        stop_policy_of(spec.stop_policy.as_deref()),
    ))
}

/// A LocalQueue's `spec.fairSharing.weight` as a float (`LQWeightAsFloat64`; 1 when unset).
pub fn local_queue_weight(object: &Value) -> f64 {
    let spec: Option<api::LocalQueueSpec> = spec(object);
    weight(spec.and_then(|spec| spec.fair_sharing).as_ref())
}

/// A LocalQueue's `status.fairSharing.admissionFairSharingStatus.consumedResources`, each
/// quantity as its approximate float; `None` without that status.
pub fn local_queue_consumed(object: &Value) -> Option<BTreeMap<String, f64>> {
    let consumed = object
        .pointer("/status/fairSharing/admissionFairSharingStatus/consumedResources")?
        .as_object()?;
    Some(
        consumed
            .iter()
            .filter_map(|(resource, quantity)| {
                let quantity: Quantity = quantity.as_str()?.parse().ok()?;
                Some((resource.clone(), quantity.nanos() as f64 / 1e9))
            })
            .collect(),
    )
}

/// Namespace labels by name.
pub fn namespace_labels(namespaces: &[Value]) -> BTreeMap<String, BTreeMap<String, String>> {
    namespaces
        .iter()
        .map(|ns| {
            let labels = ns
                .pointer("/metadata/labels")
                .and_then(|l| serde_json::from_value(l.clone()).ok())
                .unwrap_or_default();
            (name(ns).to_owned(), labels)
        })
        .collect()
}

/// Where a Workload stands.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadState {
    /// `Finished=True`, or being deleted: holds nothing, waits for nothing.
    Finished,
    /// Deactivated (`spec.active: false`) and holding no quota.
    Inactive,
    /// Holds quota (`QuotaReserved=True` with an admission); `admitted` when `Admitted=True`.
    Reserving {
        /// The preemption candidate it is.
        workload: Box<AdmittedWorkload>,
        /// `Admitted=True`.
        admitted: bool,
        /// Its LocalQueue.
        local_queue: String,
        /// `spec.active` (true when unset).
        active: bool,
    },
    /// Waits in a queue.
    Pending(Box<QueuedWorkload>),
}

fn condition_time(object: &Value, kind: &str) -> Option<SystemTime> {
    conditions::find(object, kind)
        .and_then(|c| c.get("lastTransitionTime"))
        .and_then(Value::as_str)
        .and_then(time::parse_timestamp)
}

fn workload_spec(object: &Value) -> Option<wl_api::WorkloadSpec> {
    spec(object)
}

/// The core's Workload (requests, constraints, priority) from a Workload object.
pub fn workload(object: &Value) -> Option<Workload> {
    let spec = workload_spec(object)?;
    let pod_sets = spec
        .pod_sets
        .unwrap_or_default()
        .iter()
        .map(|ps| {
            let name = ps
                .name
                .clone()
                .unwrap_or_else(|| DEFAULT_POD_SET_NAME.to_owned());
            let template = ps.template.spec.clone().unwrap_or_default();
            let mut pod_set =
                PodSet::from_template(&name, ps.count.unwrap_or(1), ps.min_count, &template);
            let annotated = ps
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.annotations.as_ref())
                .and_then(|a| topology_from_annotations(a).ok().flatten());
            pod_set.group = ps
                .topology_request
                .as_ref()
                .and_then(|t| t.pod_set_group_name.clone())
                .or_else(|| annotated.as_ref().and_then(|a| a.group.clone()));
            pod_set.topology_request = ps
                .topology_request
                .as_ref()
                .and_then(TopologyRequest::from_api)
                .or_else(|| annotated.map(|a| a.request));
            pod_set
        })
        .collect();
    let reclaimable_pods = object
        .pointer("/status/reclaimablePods")
        .and_then(|r| serde_json::from_value::<Vec<wl_api::ReclaimablePod>>(r.clone()).ok())
        .unwrap_or_default()
        .into_iter()
        .map(|r| ReclaimablePod {
            name: r.name,
            count: r.count,
        })
        .collect();
    Some(Workload {
        namespace: namespace(object).to_owned(),
        name: name(object).to_owned(),
        priority: spec.priority.unwrap_or(0),
        pod_sets,
        reclaimable_pods,
    })
}

/// `status.admission`, if any.
pub fn admission(object: &Value) -> Option<wl_api::Admission> {
    object
        .pointer("/status/admission")
        .filter(|a| !a.is_null())
        .and_then(|a| serde_json::from_value(a.clone()).ok())
}

/// The quota an admission holds per (flavor, resource) (`workload.Info.Usage` of an admitted
/// Workload: each PodSet's `resourceUsage` under the flavor assigned to its resource).
pub fn admission_usage(admission: &wl_api::Admission) -> FlavorResourceQuantities {
    usage_of(
        admission
            .pod_set_assignments
            .iter()
            .flatten()
            .flat_map(|assignment| {
                let flavors = assignment.flavors.as_ref();
                assignment.resource_usage.iter().flatten().filter_map(
                    move |(resource, quantity)| {
                        let flavor = flavors?.get(resource)?;
                        Some((
                            flavor.as_str(),
                            resource.as_str(),
                            resource_value(resource, &exact(quantity)?),
                        ))
                    },
                )
            }),
    )
}

/// Usage from (flavor, resource, canonical amount) entries, summed.
pub fn usage_of<'a>(
    entries: impl Iterator<Item = (&'a str, &'a str, i64)>,
) -> FlavorResourceQuantities {
    let mut usage = FlavorResourceQuantities::new();
    for (flavor, resource, value) in entries {
        usage.add(&FlavorResource::new(flavor, resource), Amount::new(value));
    }
    usage
}

fn eviction(object: &Value) -> Option<(EvictionCause, SystemTime)> {
    let evicted = conditions::find(object, "Evicted")?;
    let cause = match evicted.get("reason").and_then(Value::as_str) {
        Some("PodsReadyTimeout") => EvictionCause::PodsReadyTimeout,
        Some("AdmissionCheck") => EvictionCause::AdmissionCheck,
        _ => EvictionCause::Other,
    };
    Some((cause, condition_time(object, "Evicted")?))
}

/// Sorts a Workload into finished, inactive, holding quota or pending.
pub fn workload_state(object: &Value) -> Option<WorkloadState> {
    if conditions::is_true(object, "Finished")
        || object.pointer("/metadata/deletionTimestamp").is_some()
    {
        return Some(WorkloadState::Finished);
    }
    let spec = workload_spec(object)?;
    let core = workload(object)?;
    let local_queue = spec.queue_name.clone().unwrap_or_default();
    let creation = object
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(time::parse_timestamp)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    if let Some(admission) =
        admission(object).filter(|_| conditions::is_true(object, "QuotaReserved"))
    {
        let workload = AdmittedWorkload {
            namespace: core.namespace.clone(),
            name: core.name.clone(),
            uid: json::text(object, "/metadata/uid").to_owned(),
            cluster_queue: admission.cluster_queue.clone().unwrap_or_default(),
            priority: i64::from(core.priority),
            queue_timestamp: creation,
            quota_reserved_at: condition_time(object, "QuotaReserved"),
            usage: admission_usage(&admission),
            evicted: conditions::is_true(object, "Evicted"),
            local_queue: local_queue.clone(),
            // Per-user limits (Beyond Kueue) are not configured from objects yet.
            user: None,
        };
        return Some(WorkloadState::Reserving {
            workload: Box::new(workload),
            admitted: conditions::is_true(object, "Admitted"),
            local_queue,
            active: spec.active != Some(false),
        });
    }
    if spec.active == Some(false) {
        return Some(WorkloadState::Inactive);
    }
    let requeued = conditions::find(object, "Requeued");
    Some(WorkloadState::Pending(Box::new(QueuedWorkload {
        info: WorkloadInfo::new(core),
        uid: json::text(object, "/metadata/uid").to_owned(),
        job_uid: object
            .pointer("/metadata/labels/kueue.x-k8s.io~1job-uid")
            .and_then(Value::as_str)
            .map(str::to_owned),
        generation: json::int(object, "/metadata/generation").unwrap_or(0),
        local_queue,
        user: None,
        creation,
        eviction: eviction(object),
        requeue_at: object
            .pointer("/status/requeueState/requeueAt")
            .and_then(Value::as_str)
            .and_then(time::parse_timestamp),
        requeue_held: requeued.is_some_and(|c| c["status"] == "False"),
        last_assignment_generation: 0,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cluster_queue_reads_quotas_policies_and_defaults() {
        let object = json!({"metadata": {"name": "cq", "generation": 3}, "spec": {
            "cohortName": "team",
            "queueingStrategy": "StrictFIFO",
            "stopPolicy": "Hold",
            "namespaceSelector": {},
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 10}},
            "flavorFungibility": {"whenCanBorrow": "TryNextFlavor"},
            "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [
                {"name": "default", "resources": [
                    {"name": "cpu", "nominalQuota": "9", "borrowingLimit": "1"},
                    {"name": "memory", "nominalQuota": "36Gi", "lendingLimit": "1Gi"}]}]}]}});
        let cq = cluster_queue(&object).expect("parses");
        assert_eq!(cq.tree.cohort.as_deref(), Some("team"));
        let cpu = cq.tree.quotas[&FlavorResource::new("default", "cpu")];
        assert_eq!(
            (cpu.nominal, cpu.borrowing_limit),
            (Amount::new(9000), Some(Amount::new(1000)))
        );
        let memory = cq.tree.quotas[&FlavorResource::new("default", "memory")];
        assert_eq!(memory.lending_limit, Some(Amount::new(1 << 30)));
        assert_eq!(cq.strategy, QueueingStrategy::StrictFifo);
        assert_eq!(cq.stop_policy, StopPolicy::Hold);
        assert_eq!(cq.snapshot.generation, 3);
        let preemption = cq.snapshot.policy.preemption;
        assert_eq!(
            preemption.within_cluster_queue,
            PreemptionPolicy::LowerPriority
        );
        assert_eq!(preemption.reclaim_within_cohort, PreemptionPolicy::Any);
        assert_eq!(
            preemption
                .borrow_within_cohort
                .map(|b| b.max_priority_threshold),
            Some(Some(10))
        );
        let fungibility = cq.snapshot.policy.flavor_fungibility;
        assert_eq!(
            fungibility.when_can_borrow,
            FungibilityPolicy::TryNextFlavor
        );
        assert_eq!(
            fungibility.when_can_preempt,
            FungibilityPolicy::TryNextFlavor
        );
        assert_eq!(
            cq.flavor_resources,
            vec![(
                "default".to_owned(),
                vec!["cpu".to_owned(), "memory".to_owned()]
            )]
        );
    }

    fn workload_object(status: Value) -> Value {
        json!({"metadata": {"name": "w", "namespace": "ns", "uid": "u1", "generation": 1,
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"kueue.x-k8s.io/job-uid": "job-1"}},
            "spec": {"queueName": "lq", "priority": 5, "podSets": [{"name": "main", "count": 3,
                "template": {"spec": {"containers": [{"name": "c",
                    "resources": {"requests": {"cpu": "1", "memory": "200Mi"}}}]}}}]},
            "status": status})
    }

    #[test]
    fn workloads_are_sorted_by_their_conditions() {
        let cases = [
            (json!({}), "pending"),
            (
                json!({"conditions": [{"type": "Finished", "status": "True"}]}),
                "finished",
            ),
            (
                json!({"conditions": [{"type": "QuotaReserved", "status": "True",
                    "lastTransitionTime": "2026-01-01T00:01:00Z"}],
                    "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main",
                        "flavors": {"cpu": "default", "memory": "default"},
                        "resourceUsage": {"cpu": "3", "memory": "600Mi"}, "count": 3}]}}),
                "reserving",
            ),
            (
                // An admission without QuotaReserved=True holds nothing.
                json!({"admission": {"clusterQueue": "cq"}}),
                "pending",
            ),
        ];
        for (status, want) in cases {
            let state = workload_state(&workload_object(status.clone())).expect("parses");
            let got = match &state {
                WorkloadState::Finished => "finished",
                WorkloadState::Inactive => "inactive",
                WorkloadState::Reserving { .. } => "reserving",
                WorkloadState::Pending(_) => "pending",
            };
            assert_eq!(got, want, "{status}");
            if let WorkloadState::Reserving {
                workload,
                admitted,
                local_queue,
                ..
            } = &state
            {
                assert!(!admitted);
                assert_eq!(local_queue, "lq");
                assert_eq!(workload.cluster_queue, "cq");
                assert_eq!(
                    workload.usage.get(&FlavorResource::new("default", "cpu")),
                    Amount::new(3000)
                );
                assert_eq!(
                    workload
                        .usage
                        .get(&FlavorResource::new("default", "memory")),
                    Amount::new(600 << 20)
                );
            }
            if let WorkloadState::Pending(queued) = &state {
                assert_eq!(queued.job_uid.as_deref(), Some("job-1"));
                assert_eq!(queued.info.workload.priority, 5);
                assert_eq!(queued.info.total_requests[0].requests["cpu"], 3000);
            }
        }
    }
}
