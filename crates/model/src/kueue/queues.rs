//! `kueue.x-k8s.io/v1beta2` quota objects as upstream defines them
//! (`apis/kueue/v1beta2/{resourceflavor,clusterqueue,localqueue,cohort,fairsharing}_types.go`):
//! ResourceFlavor, ClusterQueue, LocalQueue and Cohort specs and statuses.
//!
//! Field names, optionality, limits, defaults and CEL rules follow upstream's markers; the
//! schemas are derived (`schemars`) and turned into CRD schemas by [`super::crd`]. Knows
//! nothing about conversion, webhook validation or admission.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use serde_json::json;

use super::refine::{
    atomic, cel, default_empty_object, default_one, default_value, enum_of, items, map_by_name,
    max_items, max_length, min_max_items, min_max_length, set, subdomain,
};

/// `spec` of a ResourceFlavor: what nodes a flavor stands for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.topologyName) || self.nodeLabels.size() >= 1", "message": "at least one nodeLabel is required when topology is set"},
    {"rule": "!has(oldSelf.topologyName) || (has(self.topologyName) && self.topologyName == oldSelf.topologyName)", "message": "topologyName is immutable when topologyName is set"}
]))]
pub struct ResourceFlavorSpec {
    /// nodeLabels are labels that associate the ResourceFlavor with Nodes that have the same
    /// labels; they are injected into admitted pods' node selectors.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 8))]
    pub node_labels: Option<BTreeMap<String, String>>,
    /// nodeTaints are taints that the nodes associated with this ResourceFlavor have.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_items::<8>, transform = atomic, transform = taint_effects)]
    pub node_taints: Option<Vec<Taint>>,
    /// tolerations are extra tolerations added to the pods admitted in the quota of this flavor.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_items::<8>, transform = atomic, transform = toleration_rules)]
    pub tolerations: Option<Vec<Toleration>>,
    /// topologyName indicates the Topology of the nodes of this flavor (Topology Aware
    /// Scheduling).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = subdomain)]
    pub topology_name: Option<String>,
}

fn taint_effects(schema: &mut schemars::Schema) {
    cel(
        schema,
        &[(
            "self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",
            "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
        )],
    );
}

/// The CEL rules upstream puts on every list of tolerations Kueue adds to pods.
pub(crate) fn toleration_rules(schema: &mut schemars::Schema) {
    cel(
        schema,
        &[
            (
                "self.all(x, !has(x.key) ? x.operator == 'Exists' : true)",
                "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
            ),
            (
                "self.all(x, has(x.tolerationSeconds) ? x.effect == 'NoExecute' : true)",
                "effect must be 'NoExecute' when 'tolerationSeconds' is set",
            ),
            (
                "self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])",
                "supported toleration values: 'Equal'(default), 'Exists'",
            ),
            (
                "self.all(x, has(x.operator) && x.operator == 'Exists' ? !has(x.value) : true)",
                "a value must be empty when 'operator' is 'Exists'",
            ),
            (
                "self.all(x, !has(x.effect) || x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",
                "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
            ),
        ],
    );
}

/// `spec` of a ClusterQueue: quota, cohort membership and queueing and preemption policies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.cohortName) && has(self.resourceGroups) ? self.resourceGroups.all(rg, rg.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit)))) : true", "message": "borrowingLimit must be nil when cohort is empty"}
]))]
pub struct ClusterQueueSpec {
    /// resourceGroups describes groups of resources, each with the flavors that provide them
    /// and their quotas.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_items::<16>, transform = atomic)]
    pub resource_groups: Option<Vec<ResourceGroup>>,
    /// cohortName is the Cohort this ClusterQueue belongs to; ClusterQueues of one cohort can
    /// borrow unused quota from each other.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = subdomain)]
    pub cohort_name: Option<String>,
    /// queueingStrategy is the queueing strategy of the workloads across the queues in this
    /// ClusterQueue: `StrictFIFO` or `BestEffortFIFO` (default).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = queueing_strategy)]
    pub queueing_strategy: Option<String>,
    /// namespaceSelector defines which namespaces may submit workloads to this ClusterQueue;
    /// nil matches none, `{}` matches all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// flavorFungibility defines whether a workload should try the next flavor before
    /// borrowing or preempting in the current one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = default_empty_object)]
    pub flavor_fungibility: Option<FlavorFungibility>,
    /// preemption describes policies to preempt workloads from this ClusterQueue or its cohort.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = default_empty_object)]
    pub preemption: Option<ClusterQueuePreemption>,
    /// admissionChecksStrategy lists the AdmissionChecks required by this ClusterQueue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission_checks_strategy: Option<AdmissionChecksStrategy>,
    /// stopPolicy: `None` (default), `Hold` or `HoldAndDrain`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = stop_policy)]
    pub stop_policy: Option<String>,
    /// fairSharing defines the properties of the ClusterQueue when participating in fair
    /// sharing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
    /// admissionScope indicates whether the ClusterQueue uses Admission Fair Sharing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission_scope: Option<AdmissionScope>,
    /// concurrentAdmissionPolicy configures concurrent admission (alpha).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrent_admission_policy: Option<ConcurrentAdmissionPolicy>,
}

fn queueing_strategy(schema: &mut schemars::Schema) {
    enum_of(schema, &["StrictFIFO", "BestEffortFIFO"]);
    default_value(schema, json!("BestEffortFIFO"));
}

/// `None`, `Hold` or `HoldAndDrain`, default `None`.
pub(crate) fn stop_policy(schema: &mut schemars::Schema) {
    enum_of(schema, &["None", "Hold", "HoldAndDrain"]);
    default_value(schema, json!("None"));
}

/// The AdmissionChecks a ClusterQueue requires, optionally only on some flavors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionChecksStrategy {
    /// admissionChecks is a list of strategies for AdmissionChecks.
    #[schemars(transform = min_max_items::<1, 64>, transform = map_by_name)]
    pub admission_checks: Vec<AdmissionCheckStrategyRule>,
}

/// One AdmissionCheck and the flavors it applies to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckStrategyRule {
    /// name is an AdmissionCheck's name.
    #[schemars(transform = min_max_length::<1, 316>)]
    pub name: String,
    /// onFlavors is the list of ResourceFlavors' names this AdmissionCheck runs for; empty
    /// means all.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = flavor_names)]
    pub on_flavors: Option<Vec<String>>,
}

fn flavor_names(schema: &mut schemars::Schema) {
    max_items::<64>(schema);
    set(schema);
    items(schema, subdomain);
}

/// Concurrent admission (alpha): how admitted workloads migrate to preferred flavors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrentAdmissionPolicy {
    /// migration configures migrating workloads between flavors.
    pub migration: ConcurrentAdmissionMigration,
}

/// How and how far a workload migrates between flavors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrentAdmissionMigration {
    /// mode: `TryPreferredFlavors` or `RetainFirstAdmission`.
    #[schemars(transform = migration_mode)]
    pub mode: String,
    /// constraints limits the migration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraints: Option<ConcurrentAdmissionConstraints>,
}

fn migration_mode(schema: &mut schemars::Schema) {
    enum_of(schema, &["TryPreferredFlavors", "RetainFirstAdmission"]);
    max_length::<253>(schema);
}

/// The last flavor a migration may stop at.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrentAdmissionConstraints {
    /// lastAcceptableFlavorName is the least preferred flavor a workload may settle on.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = subdomain)]
    pub last_acceptable_flavor_name: Option<String>,
}

/// A set of resources covered by the same flavors, with each flavor's quotas.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.flavors.all(x, size(x.resources) == size(self.coveredResources))", "message": "flavors must have the same number of resources as the coveredResources"}
]))]
pub struct ResourceGroup {
    /// coveredResources is the list of resources covered by the flavors in this group.
    #[schemars(transform = min_max_items::<1, 64>, transform = atomic)]
    pub covered_resources: Vec<String>,
    /// flavors is the list of flavors that provide the resources of this group, in the order
    /// they are tried.
    #[schemars(transform = min_max_items::<1, 64>, transform = map_by_name)]
    pub flavors: Vec<FlavorQuotas>,
}

/// One flavor's quotas of a group's resources.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorQuotas {
    /// name of this flavor.
    #[schemars(transform = subdomain)]
    pub name: String,
    /// resources is the list of quotas for this flavor per resource.
    #[schemars(transform = min_max_items::<1, 64>, transform = map_by_name)]
    pub resources: Vec<ResourceQuota>,
}

/// Quota of one resource in one flavor.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceQuota {
    /// name of this resource.
    pub name: String,
    /// nominalQuota is the quantity of this resource available to admitted workloads.
    pub nominal_quota: Quantity,
    /// borrowingLimit is the maximum amount of quota this ClusterQueue may borrow from its
    /// cohort; nil means no limit. Only with a cohort.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub borrowing_limit: Option<Quantity>,
    /// lendingLimit is the maximum amount of unused quota others in the cohort may borrow;
    /// nil means all of it. Only with a cohort.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lending_limit: Option<Quantity>,
}

/// `status` of a ClusterQueue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueStatus {
    /// conditions hold the latest observations of the ClusterQueue's state (`Active`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = conditions)]
    pub conditions: Option<Vec<Condition>>,
    /// flavorsReservation are the reserved quotas, by flavor, currently in use by the
    /// workloads assigned to this ClusterQueue.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_items::<64>, transform = map_by_name)]
    pub flavors_reservation: Option<Vec<FlavorUsage>>,
    /// flavorsUsage are the used quotas, by flavor, of the admitted workloads.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_items::<64>, transform = map_by_name)]
    pub flavors_usage: Option<Vec<FlavorUsage>>,
    /// pendingWorkloads is the number of workloads currently waiting to be admitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_workloads: Option<i32>,
    /// reservingWorkloads is the number of workloads currently reserving quota.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserving_workloads: Option<i32>,
    /// admittedWorkloads is the number of workloads currently admitted and not finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admitted_workloads: Option<i32>,
    /// fairSharing contains the current state for this ClusterQueue when fair sharing is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharingStatus>,
}

/// A list of conditions merged by `type`, at most 16.
pub(crate) fn conditions(schema: &mut schemars::Schema) {
    max_items::<16>(schema);
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        serde_json::json!(["type"]),
    );
    schema.insert("x-kubernetes-list-type".into(), serde_json::json!("map"));
}

/// Usage of one flavor's resources.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorUsage {
    /// name of the flavor.
    #[schemars(transform = subdomain)]
    pub name: String,
    /// resources lists the quota usage for the resources in this flavor.
    #[schemars(transform = max_items::<64>, transform = map_by_name)]
    pub resources: Vec<ResourceUsage>,
}

/// Usage of one resource, and how much of it is borrowed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceUsage {
    /// name of the resource.
    pub name: String,
    /// total is the total quantity of used quota, including borrowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<Quantity>,
    /// borrowed is the quantity of quota borrowed from the cohort.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub borrowed: Option<Quantity>,
}

/// Flavor search policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.preference) || (self.whenCanBorrow == 'TryNextFlavor' && self.whenCanPreempt == 'TryNextFlavor')", "message": "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor"}
]))]
pub struct FlavorFungibility {
    /// whenCanBorrow: `MayStopSearch` (default) or `TryNextFlavor`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = when_can_borrow)]
    pub when_can_borrow: Option<String>,
    /// whenCanPreempt: `TryNextFlavor` (default) or `MayStopSearch`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = when_can_preempt)]
    pub when_can_preempt: Option<String>,
    /// preference: `BorrowingOverPreemption` or `PreemptionOverBorrowing`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = preference)]
    pub preference: Option<String>,
}

fn when_can_borrow(schema: &mut schemars::Schema) {
    enum_of(schema, &["MayStopSearch", "TryNextFlavor"]);
    default_value(schema, json!("MayStopSearch"));
}

fn when_can_preempt(schema: &mut schemars::Schema) {
    enum_of(schema, &["MayStopSearch", "TryNextFlavor"]);
    default_value(schema, json!("TryNextFlavor"));
}

fn preference(schema: &mut schemars::Schema) {
    enum_of(
        schema,
        &["BorrowingOverPreemption", "PreemptionOverBorrowing"],
    );
}

/// Preemption policies of a ClusterQueue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) &&  self.borrowWithinCohort.policy != 'Never')", "message": "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"}
]))]
pub struct ClusterQueuePreemption {
    /// reclaimWithinCohort: `Never` (default), `LowerPriority` or `Any`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = reclaim_within_cohort)]
    pub reclaim_within_cohort: Option<String>,
    /// borrowWithinCohort configures preemption while borrowing (classic preemption only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = default_empty_object)]
    pub borrow_within_cohort: Option<BorrowWithinCohort>,
    /// withinClusterQueue: `Never` (default), `LowerPriority` or `LowerOrNewerEqualPriority`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = within_cluster_queue)]
    pub within_cluster_queue: Option<String>,
}

fn reclaim_within_cohort(schema: &mut schemars::Schema) {
    enum_of(schema, &["Never", "LowerPriority", "Any"]);
    default_value(schema, json!("Never"));
}

fn within_cluster_queue(schema: &mut schemars::Schema) {
    enum_of(
        schema,
        &["Never", "LowerPriority", "LowerOrNewerEqualPriority"],
    );
    default_value(schema, json!("Never"));
}

/// Preemption of other ClusterQueues' workloads while borrowing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BorrowWithinCohort {
    /// policy: `Never` (default) or `LowerPriority`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = borrow_policy)]
    pub policy: Option<String>,
    /// maxPriorityThreshold: only workloads at or below this priority may be preempted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_priority_threshold: Option<i32>,
}

fn borrow_policy(schema: &mut schemars::Schema) {
    enum_of(schema, &["Never", "LowerPriority"]);
    default_value(schema, json!("Never"));
}

/// Fair-sharing weight of a ClusterQueue, Cohort or LocalQueue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FairSharing {
    /// weight gives a comparative advantage in fair sharing; default 1, 0 means infinite.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = default_one)]
    pub weight: Option<Quantity>,
}

/// The fair-sharing state of a ClusterQueue or Cohort.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FairSharingStatus {
    /// weightedShare is the maximum over resources of the borrowed share divided by the
    /// weight.
    pub weighted_share: i64,
}

/// Admission fair sharing mode of a ClusterQueue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionScope {
    /// admissionMode: `UsageBasedAdmissionFairSharing` or `NoAdmissionFairSharing`.
    #[schemars(transform = admission_mode)]
    pub admission_mode: String,
}

fn admission_mode(schema: &mut schemars::Schema) {
    enum_of(
        schema,
        &["UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"],
    );
}

/// `spec` of a LocalQueue: the namespaced entry point to a ClusterQueue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueSpec {
    /// clusterQueue is the ClusterQueue backing this LocalQueue; immutable.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = subdomain, transform = immutable)]
    pub cluster_queue: Option<String>,
    /// stopPolicy: `None` (default), `Hold` or `HoldAndDrain`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = stop_policy)]
    pub stop_policy: Option<String>,
    /// fairSharing defines the properties of the LocalQueue in admission fair sharing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
}

/// `self == oldSelf`: the field cannot change once set.
pub(crate) fn immutable(schema: &mut schemars::Schema) {
    cel(schema, &[("self == oldSelf", "field is immutable")]);
}

/// `status` of a LocalQueue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueStatus {
    /// conditions hold the latest observations of the LocalQueue's state (`Active`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = conditions)]
    pub conditions: Option<Vec<Condition>>,
    /// pendingWorkloads is the number of workloads in this LocalQueue not yet admitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_workloads: Option<i32>,
    /// reservingWorkloads is the number of workloads in this LocalQueue reserving quota.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserving_workloads: Option<i32>,
    /// admittedWorkloads is the number of admitted workloads in this LocalQueue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admitted_workloads: Option<i32>,
    /// flavorsReservation are the reserved quotas, by flavor, of this LocalQueue's workloads.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_items::<64>, transform = map_by_name)]
    pub flavors_reservation: Option<Vec<LocalQueueFlavorUsage>>,
    /// flavorsUsage are the used quotas, by flavor, of this LocalQueue's admitted workloads.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_items::<64>, transform = map_by_name)]
    pub flavors_usage: Option<Vec<LocalQueueFlavorUsage>>,
    /// fairSharing contains the state of this LocalQueue in admission fair sharing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<LocalQueueFairSharingStatus>,
}

/// The fair-sharing state of a LocalQueue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueFairSharingStatus {
    /// weightedShare of the LocalQueue.
    pub weighted_share: i64,
    /// admissionFairSharingStatus holds the decayed resource consumption.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission_fair_sharing_status: Option<LocalQueueAdmissionFairSharingStatus>,
}

/// Decayed consumption of a LocalQueue under admission fair sharing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueAdmissionFairSharingStatus {
    /// consumedResources is the aggregated, decayed usage of the LocalQueue's workloads.
    pub consumed_resources: BTreeMap<String, Quantity>,
    /// lastUpdate is when consumedResources was last updated.
    pub last_update: Time,
}

/// Usage of one flavor by a LocalQueue's workloads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueFlavorUsage {
    /// name of the flavor.
    #[schemars(transform = subdomain)]
    pub name: String,
    /// resources lists the quota usage for the resources in this flavor.
    #[schemars(transform = max_items::<64>, transform = map_by_name)]
    pub resources: Vec<LocalQueueResourceUsage>,
}

/// Usage of one resource by a LocalQueue's workloads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueResourceUsage {
    /// name of the resource.
    pub name: String,
    /// total is the total quantity of used quota.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<Quantity>,
}

/// `spec` of a Cohort: its parent and the quota it adds to its subtree.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CohortSpec {
    /// parentName references the parent Cohort; unset makes this Cohort a root.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = subdomain)]
    pub parent_name: Option<String>,
    /// resourceGroups describes quota added to the subtree of this Cohort.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = max_items::<16>, transform = atomic)]
    pub resource_groups: Option<Vec<ResourceGroup>>,
    /// fairSharing defines the properties of the Cohort in fair sharing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
}

/// `status` of a Cohort.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CohortStatus {
    /// fairSharing contains the fair-sharing state of this Cohort.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharingStatus>,
}
