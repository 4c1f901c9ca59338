//! `kueue.x-k8s.io/v1beta2` Workloads, WorkloadPriorityClasses and AdmissionChecks as upstream
//! defines them (`apis/kueue/v1beta2/{workload,workloadpriorityclass,admissioncheck}_types.go`).
//!
//! Field names, optionality, limits, defaults and CEL rules follow upstream's markers; the
//! schemas are derived (`schemars`) and turned into CRD schemas by [`super::crd`]. Knows
//! nothing about conversion, webhook validation or admission.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodTemplateSpec, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::queues::{conditions, immutable, toleration_rules};
use super::refine::{
    atomic, default_value, dns_label, enum_of, items, map_by_name, max_items, max_length,
    min_max_items, min_max_length, minimum, subdomain,
};

/// `spec` of a Workload: the pod sets a job runs and where it queues.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.priorityClassRef) || has(self.priority)", "message": "priority should not be nil when priorityClassRef is set"}
]))]
pub struct WorkloadSpec {
    /// podSets is a list of sets of homogeneous pods, each described by a Pod spec and a
    /// count; at least 1, at most 18 entries, immutable.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = min_max_items::<1, 18>, transform = map_by_name)]
    pub pod_sets: Option<Vec<PodSet>>,
    /// queueName is the name of the LocalQueue the Workload is associated with.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = subdomain)]
    pub queue_name: Option<String>,
    /// priorityClassRef references the WorkloadPriorityClass or PriorityClass that gives
    /// the workload its priority.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority_class_ref: Option<PriorityClassRef>,
    /// priority determines the order of access to the resources managed by the ClusterQueue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// active determines if a workload can be admitted; false evicts an admitted workload.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = default_true)]
    pub active: Option<bool>,
    /// maximumExecutionTimeSeconds, if set, is the maximum time in seconds a workload may be
    /// admitted before it is deactivated.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = minimum::<1>)]
    pub maximum_execution_time_seconds: Option<i32>,
    /// preemptionGates gate the workload's ability to preempt others; closed by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_items::<8>, transform = map_by_name)]
    pub preemption_gates: Option<Vec<PreemptionGate>>,
}

fn default_true(schema: &mut schemars::Schema) {
    default_value(schema, json!(true));
}

/// A WorkloadPriorityClass or a `scheduling.k8s.io` PriorityClass.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "(self.group == 'scheduling.k8s.io') ? self.kind == 'PriorityClass' : true", "message": "only the PriorityClass kind is allowed for the scheduling.k8s.io group"},
    {"rule": "(self.group == 'kueue.x-k8s.io') ? self.kind == 'WorkloadPriorityClass' : true", "message": "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group"}
]))]
pub struct PriorityClassRef {
    /// group: `kueue.x-k8s.io` or `scheduling.k8s.io`.
    #[schemars(transform = priority_class_group)]
    pub group: String,
    /// kind: `WorkloadPriorityClass` or `PriorityClass`.
    #[schemars(transform = priority_class_kind)]
    pub kind: String,
    /// name of the priority class.
    #[schemars(transform = min_max_length::<1, 253>, transform = subdomain)]
    pub name: String,
}

/// The (group, kind) of a reference to a WorkloadPriorityClass.
pub const WORKLOAD_PRIORITY_CLASS: (&str, &str) = ("kueue.x-k8s.io", "WorkloadPriorityClass");
/// The pod PriorityClass a workload's priority may come from.
pub const POD_PRIORITY_CLASS: (&str, &str) = ("scheduling.k8s.io", "PriorityClass");

fn priority_class_group(schema: &mut schemars::Schema) {
    enum_of(schema, &[WORKLOAD_PRIORITY_CLASS.0, POD_PRIORITY_CLASS.0]);
}

fn priority_class_kind(schema: &mut schemars::Schema) {
    enum_of(schema, &[WORKLOAD_PRIORITY_CLASS.1, POD_PRIORITY_CLASS.1]);
}

/// One set of identical pods.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.minCount) ? self.minCount <= self.count : true", "message": "minCount should be positive and less or equal to count"}
]))]
pub struct PodSet {
    /// name is the PodSet name; default `main`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = pod_set_name)]
    pub name: Option<String>,
    /// template is the Pod template.
    pub template: PodTemplateSpec,
    /// count is the number of pods for the spec; default 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = count)]
    pub count: Option<i32>,
    /// minCount is the minimum number of pods for the spec if the workload supports
    /// partial admission.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = minimum::<1>)]
    pub min_count: Option<i32>,
    /// topologyRequest defines the topology request for the PodSet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology_request: Option<PodSetTopologyRequest>,
}

fn pod_set_name(schema: &mut schemars::Schema) {
    dns_label(schema);
    default_value(schema, json!("main"));
}

fn count(schema: &mut schemars::Schema) {
    minimum::<0>(schema);
    default_value(schema, json!(1));
}

/// Topology-aware scheduling request of a PodSet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetTopologyRequest {
    /// required: the topology level all pods must share.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_length::<63>)]
    pub required: Option<String>,
    /// preferred: the topology level the pods should share if possible.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_length::<63>)]
    pub preferred: Option<String>,
    /// unconstrained: any placement within the TAS flavor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unconstrained: Option<bool>,
    /// podIndexLabel names the label holding the pod's index.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_length::<317>)]
    pub pod_index_label: Option<String>,
    /// subGroupIndexLabel names the label holding the pod's sub-group index.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_length::<317>)]
    pub sub_group_index_label: Option<String>,
    /// subGroupCount is the number of sub-groups.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = minimum::<0>)]
    pub sub_group_count: Option<i32>,
    /// podSetGroupName groups PodSets placed with the same flavor.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_length::<256>)]
    pub pod_set_group_name: Option<String>,
    /// podSetSliceRequiredTopology: the level each slice must share.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_length::<63>)]
    pub pod_set_slice_required_topology: Option<String>,
    /// podSetSliceSize: the number of pods in a slice.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = minimum::<1>)]
    pub pod_set_slice_size: Option<i32>,
    /// podsetSliceRequiredTopologyConstraints: multi-layer slice constraints (at most 3).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_items::<3>, transform = atomic)]
    pub podset_slice_required_topology_constraints:
        Option<Vec<PodsetSliceRequiredTopologyConstraint>>,
}

/// One layer of a multi-layer slice constraint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodsetSliceRequiredTopologyConstraint {
    /// topology: the level the slice must share.
    #[schemars(transform = min_max_length::<1, 63>)]
    pub topology: String,
    /// size: the number of pods in a slice.
    #[schemars(transform = minimum::<1>)]
    pub size: i32,
}

/// A gate on a workload's preemptions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionGate {
    /// name of the gate.
    #[schemars(transform = min_max_length::<1, 63>)]
    pub name: String,
}

/// `status` of a Workload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(oldSelf.clusterName) || !has(self.clusterName) || oldSelf.clusterName == self.clusterName", "message": "clusterName is immutable once set"},
    {"rule": "!has(self.clusterName) || (!has(self.nominatedClusterNames) || (has(self.nominatedClusterNames) && size(self.nominatedClusterNames) == 0))", "message": "clusterName and nominatedClusterNames are mutually exclusive"}
]))]
pub struct WorkloadStatus {
    /// conditions: `QuotaReserved`, `Admitted`, `Evicted`, `Preempted`, `Finished`, …
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = conditions)]
    pub conditions: Option<Vec<Condition>>,
    /// admission holds the parameters of the admission of the workload by a ClusterQueue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission: Option<Admission>,
    /// requeueState holds the re-queue state when a workload was evicted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requeue_state: Option<RequeueState>,
    /// reclaimablePods keeps track of the number of pods within a podset for which the
    /// resource reservation is no longer needed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_items::<18>, transform = map_by_name)]
    pub reclaimable_pods: Option<Vec<ReclaimablePod>>,
    /// admissionChecks list all the admission checks required by the workload and their
    /// current status.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = admission_checks)]
    pub admission_checks: Option<Vec<AdmissionCheckState>>,
    /// resourceRequests provides a detailed view of the resources requested by each podSet.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_items::<18>, transform = map_by_name)]
    pub resource_requests: Option<Vec<PodSetRequest>>,
    /// accumulatedPastExecutionTimeSeconds holds the total time, in seconds, the workload
    /// spent in Admitted state in the previous Admit - Evict cycles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accumulated_past_execution_time_seconds: Option<i32>,
    /// schedulingStats tracks scheduling statistics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduling_stats: Option<SchedulingStats>,
    /// nominatedClusterNames: worker clusters the workload may be dispatched to (MultiKueue).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = cluster_names)]
    pub nominated_cluster_names: Option<Vec<String>>,
    /// clusterName: the worker cluster the workload was admitted in (MultiKueue).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_length::<256>)]
    pub cluster_name: Option<String>,
    /// unhealthyNodes: nodes a TAS workload must be moved away from.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_items::<8>, transform = map_by_name)]
    pub unhealthy_nodes: Option<Vec<UnhealthyNode>>,
    /// preemptionGates: the state of the workload's preemption gates.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_items::<8>, transform = map_by_name)]
    pub preemption_gates: Option<Vec<PreemptionGateState>>,
}

fn cluster_names(schema: &mut schemars::Schema) {
    max_items::<20>(schema);
    atomic(schema);
    items(schema, max_length::<256>);
}

fn admission_checks(schema: &mut schemars::Schema) {
    max_items::<8>(schema);
    schema.insert("x-kubernetes-list-map-keys".into(), json!(["name"]));
    schema.insert("x-kubernetes-list-type".into(), json!("map"));
}

/// Where a workload was admitted and with which flavors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    /// clusterQueue is the name of the ClusterQueue that admitted this workload.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = subdomain)]
    pub cluster_queue: Option<String>,
    /// podSetAssignments hold the admission results for each of the podSets.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_items::<18>, transform = map_by_name)]
    pub pod_set_assignments: Option<Vec<PodSetAssignment>>,
}

/// The flavors and usage one PodSet was admitted with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetAssignment {
    /// name is the name of the podSet; default `main`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = pod_set_name)]
    pub name: Option<String>,
    /// flavors are the flavors assigned to the workload for each resource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flavors: Option<BTreeMap<String, String>>,
    /// resourceUsage keeps track of the total resources all the pods in the podset need.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_usage: Option<BTreeMap<String, Quantity>>,
    /// count is the number of pods taken into account at admission time.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = minimum::<0>)]
    pub count: Option<i32>,
    /// topologyAssignment indicates the topology assignment divided into topology domains.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology_assignment: Option<TopologyAssignment>,
    /// delayedTopologyRequest: `Pending` or `Ready`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = delayed_topology_request)]
    pub delayed_topology_request: Option<String>,
}

fn delayed_topology_request(schema: &mut schemars::Schema) {
    enum_of(schema, &["Pending", "Ready"]);
    max_length::<7>(schema);
}

/// A PodSet's topology assignment, in upstream's compressed slice encoding.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.slices.all(x, size(x.valuesPerLevel) == size(self.levels))", "message": "valuesPerLevel must have the same length as the number of levels in this TopologyAssignment"}
]))]
pub struct TopologyAssignment {
    /// levels is an ordered list of keys denoting the levels of the assigned topology.
    #[schemars(transform = levels)]
    pub levels: Vec<String>,
    /// slices: runs of domains sharing an encoding.
    #[schemars(transform = max_items::<1000>, transform = atomic)]
    pub slices: Vec<TopologyAssignmentSlice>,
}

fn levels(schema: &mut schemars::Schema) {
    min_max_items::<1, 16>(schema);
    atomic(schema);
    items(schema, max_length::<317>);
}

/// A run of topology domains and their pod counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.podCounts.individual) || size(self.podCounts.individual) == self.domainCount", "message": "podCounts.individual must have length equal to domainCount"},
    {"rule": "self.valuesPerLevel.all(x, !has(x.individual) || size(x.individual.roots) == self.domainCount)", "message": "valuesPerLevel.individual, if set, must have roots of length equal to domainCount of this TopologyAssignmentSlice"}
]))]
pub struct TopologyAssignmentSlice {
    /// domainCount is the number of domains in this slice.
    #[schemars(transform = minimum::<1>)]
    pub domain_count: i32,
    /// valuesPerLevel: the domains' values at each level.
    #[schemars(transform = min_max_items::<1, 16>, transform = atomic)]
    pub values_per_level: Vec<TopologyAssignmentSliceLevelValues>,
    /// podCounts: the number of pods in each domain.
    pub pod_counts: TopologyAssignmentSlicePodCounts,
}

/// The values of one level: one value for all domains, or one per domain.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.universal) != has(self.individual)", "message": "exactly one of the fields in [universal individual] must be set"}
]))]
pub struct TopologyAssignmentSliceLevelValues {
    /// universal: the value shared by every domain of the slice.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_length::<63>)]
    pub universal: Option<String>,
    /// individual: each domain's value as prefix + root + suffix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub individual: Option<TopologyAssignmentSliceLevelIndividualValues>,
}

/// Per-domain values sharing a prefix and a suffix.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignmentSliceLevelIndividualValues {
    /// prefix common to every value.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_length::<63>)]
    pub prefix: Option<String>,
    /// suffix common to every value.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_length::<63>)]
    pub suffix: Option<String>,
    /// roots: each domain's value without prefix and suffix.
    #[schemars(transform = roots)]
    pub roots: Vec<String>,
}

fn roots(schema: &mut schemars::Schema) {
    min_max_items::<1, 100000>(schema);
    atomic(schema);
    items(schema, max_length::<63>);
}

fn individual_counts(schema: &mut schemars::Schema) {
    min_max_items::<1, 100000>(schema);
    atomic(schema);
    items(schema, minimum::<1>);
}

/// Pod counts of a slice: one count for all domains, or one per domain.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "[has(self.universal),has(self.individual)].filter(x,x==true).size() == 1", "message": "exactly one of the fields in [universal individual] must be set"}
]))]
pub struct TopologyAssignmentSlicePodCounts {
    /// universal: the pod count of every domain.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = minimum::<1>)]
    pub universal: Option<i32>,
    /// individual: each domain's pod count.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = individual_counts)]
    pub individual: Option<Vec<i32>>,
}

/// Re-queue state of an evicted workload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequeueState {
    /// count records the number of times a workload has been re-queued.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = minimum::<0>)]
    pub count: Option<i32>,
    /// requeueAt records the time when a workload will be re-queued.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requeue_at: Option<Time>,
}

/// Pods of a PodSet whose reservation is no longer needed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReclaimablePod {
    /// name is the PodSet name.
    #[schemars(transform = dns_label)]
    pub name: String,
    /// count is the number of pods for which the requested resources are no longer needed.
    #[schemars(transform = minimum::<0>)]
    pub count: i32,
}

/// The state of one admission check of a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckState {
    /// name identifies the admission check.
    #[schemars(transform = min_max_length::<1, 316>)]
    pub name: String,
    /// state: `Pending`, `Ready`, `Retry` or `Rejected`.
    #[schemars(transform = check_state)]
    pub state: String,
    /// lastTransitionTime is the last time the state changed.
    pub last_transition_time: Time,
    /// message is a human readable message indicating details about the transition.
    #[schemars(transform = max_length::<32768>)]
    pub message: String,
    /// requeueAfterSeconds: how long to wait before re-queueing after a `Retry`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = minimum::<0>)]
    pub requeue_after_seconds: Option<i32>,
    /// retryCount: how many times the check was retried.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = minimum::<0>)]
    pub retry_count: Option<i32>,
    /// podSetUpdates: what the check adds to the pods once `Ready`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_items::<18>, transform = atomic)]
    pub pod_set_updates: Option<Vec<PodSetUpdate>>,
}

fn check_state(schema: &mut schemars::Schema) {
    enum_of(schema, &["Pending", "Ready", "Retry", "Rejected"]);
}

/// Labels, annotations, node selector and tolerations an admission check adds to a PodSet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetUpdate {
    /// name of the PodSet to modify.
    #[schemars(transform = dns_label)]
    pub name: String,
    /// labels added to the pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// annotations added to the pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// nodeSelector added to the pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// tolerations added to the pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_items::<8>, transform = atomic, transform = toleration_rules)]
    pub tolerations: Option<Vec<Toleration>>,
}

/// The resources a PodSet requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetRequest {
    /// name is the name of the podSet.
    #[schemars(transform = dns_label)]
    pub name: String,
    /// resources is the total resources all the pods in the podset need to run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<BTreeMap<String, Quantity>>,
}

/// Scheduling statistics of a workload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingStats {
    /// evictions tracks eviction statistics by reason and underlying cause.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = evictions)]
    pub evictions: Option<Vec<WorkloadSchedulingStatsEviction>>,
}

fn evictions(schema: &mut schemars::Schema) {
    max_items::<256>(schema);
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        json!(["reason", "underlyingCause"]),
    );
    schema.insert("x-kubernetes-list-type".into(), json!("map"));
}

/// How often a workload was evicted for one reason.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSchedulingStatsEviction {
    /// reason of the eviction.
    #[schemars(transform = max_length::<316>)]
    pub reason: String,
    /// underlyingCause of the eviction.
    #[schemars(transform = max_length::<316>)]
    pub underlying_cause: String,
    /// count of evictions.
    #[schemars(transform = minimum::<0>)]
    pub count: i32,
}

/// A node a TAS workload must move away from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnhealthyNode {
    /// name of the node.
    #[schemars(transform = max_length::<63>)]
    pub name: String,
}

/// The position of one preemption gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionGateState {
    /// name of the gate.
    #[schemars(transform = min_max_length::<1, 63>)]
    pub name: String,
    /// position: `Closed` or `Open`.
    #[schemars(transform = gate_position)]
    pub position: String,
    /// lastTransitionTime is when the position last changed.
    pub last_transition_time: Time,
}

fn gate_position(schema: &mut schemars::Schema) {
    enum_of(schema, &["Closed", "Open"]);
}

/// The top-level fields of a WorkloadPriorityClass (it has no spec).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadPriorityClassFields {
    /// value represents the integer value of this workloadPriorityClass.
    pub value: i32,
    /// description is an arbitrary string that usually provides guidelines on when this
    /// workloadPriorityClass should be used.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_length::<2048>)]
    pub description: Option<String>,
}

/// `spec` of an AdmissionCheck.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckSpec {
    /// controllerName identifies the controller that processes the AdmissionCheck; immutable.
    #[schemars(transform = min_max_length::<1, 253>, transform = immutable)]
    pub controller_name: String,
    /// parameters identifies a configuration with additional parameters for the check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<AdmissionCheckParametersReference>,
}

/// The object that parameterises an AdmissionCheck.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckParametersReference {
    /// apiGroup is the group for the resource being referenced.
    #[schemars(transform = min_max_length::<1, 253>, transform = subdomain)]
    pub api_group: String,
    /// kind is the type of the resource being referenced.
    #[schemars(transform = kind_name)]
    pub kind: String,
    /// name is the name of the resource being referenced.
    #[schemars(transform = min_max_length::<1, 63>, transform = dns_label)]
    pub name: String,
}

fn kind_name(schema: &mut schemars::Schema) {
    min_max_length::<1, 63>(schema);
    schema.insert("pattern".into(), json!("^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$"));
}

/// `status` of an AdmissionCheck.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckStatus {
    /// conditions hold the latest observations of the AdmissionCheck's state (`Active`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = conditions)]
    pub conditions: Option<Vec<Condition>>,
}
