//! Kueue's conversion cases (`apis/kueue/v1beta1/*_conversion_test.go`, ported as data) and
//! a round-trip property.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::{v1beta1_to_v1beta2, v1beta2_to_v1beta1};

/// Which ways a case holds: both, only v1beta1 → v1beta2 (lossy down), or only down.
#[derive(Clone, Copy, PartialEq)]
enum Way {
    Both,
    Up,
    Down,
}

fn topology(assignment: Value) -> Value {
    json!({"status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "main", "topologyAssignment": assignment}]}}})
}

#[test]
fn conversions_follow_kueue() {
    let table: Vec<(&str, &str, Way, Value, Value)> = vec![
        (
            "cohort is cohortName",
            "ClusterQueue",
            Way::Both,
            json!({"spec": {"cohort": "all", "queueingStrategy": "StrictFIFO"}}),
            json!({"spec": {"cohortName": "all", "queueingStrategy": "StrictFIFO"}}),
        ),
        (
            "admissionChecks become an admissionChecksStrategy",
            "ClusterQueue",
            Way::Up,
            json!({"spec": {"admissionChecks": ["prov", "multikueue"]}}),
            json!({"spec": {"admissionChecksStrategy": {"admissionChecks": [
                {"name": "prov"}, {"name": "multikueue"}]}}}),
        ),
        (
            "an admissionChecksStrategy stays one",
            "ClusterQueue",
            Way::Both,
            json!({"spec": {"admissionChecksStrategy": {"admissionChecks": [
                {"name": "prov", "onFlavors": ["spot"]}]}}}),
            json!({"spec": {"admissionChecksStrategy": {"admissionChecks": [
                {"name": "prov", "onFlavors": ["spot"]}]}}}),
        ),
        (
            "deprecated fungibility values become MayStopSearch",
            "ClusterQueue",
            Way::Up,
            json!({"spec": {"flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}}}),
            json!({"spec": {"flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}}}),
        ),
        (
            "concurrentAdmissionPolicy has no v1beta1 form",
            "ClusterQueue",
            Way::Down,
            json!({"spec": {"cohort": "c"}}),
            json!({"spec": {"cohortName": "c", "concurrentAdmissionPolicy": {"migration": {"mode": "TryPreferredFlavors"}}}}),
        ),
        (
            "pendingWorkloadsStatus and admissionFairSharingStatus have no v1beta2 form",
            "ClusterQueue",
            Way::Up,
            json!({"status": {"pendingWorkloads": 1, "pendingWorkloadsStatus": {"lastChangeTime": "2026-01-01T00:00:00Z"},
                              "fairSharing": {"weightedShare": 3, "admissionFairSharingStatus": {"consumedResources": {}, "lastUpdate": "2026-01-01T00:00:00Z"}}}}),
            json!({"status": {"pendingWorkloads": 1, "fairSharing": {"weightedShare": 3}}}),
        ),
        (
            "cohort fair sharing status",
            "Cohort",
            Way::Up,
            json!({"spec": {"parentName": "root"}, "status": {"fairSharing": {"weightedShare": 0,
                "admissionFairSharingStatus": {"consumedResources": {}, "lastUpdate": "2026-01-01T00:00:00Z"}}}}),
            json!({"spec": {"parentName": "root"}, "status": {"fairSharing": {"weightedShare": 0}}}),
        ),
        (
            "flavorUsage is flavorsUsage",
            "LocalQueue",
            Way::Both,
            json!({"spec": {"clusterQueue": "cq"}, "status": {"flavorUsage": [{"name": "default", "resources": [{"name": "cpu", "total": "1"}]}]}}),
            json!({"spec": {"clusterQueue": "cq"}, "status": {"flavorsUsage": [{"name": "default", "resources": [{"name": "cpu", "total": "1"}]}]}}),
        ),
        (
            "v1beta1 flavors are dropped",
            "LocalQueue",
            Way::Up,
            json!({"status": {"flavors": [{"name": "default"}], "pendingWorkloads": 2}}),
            json!({"status": {"pendingWorkloads": 2}}),
        ),
        (
            "non-zero AccumulatedPastExexcutionTimeSeconds",
            "Workload",
            Way::Both,
            json!({"status": {"accumulatedPastExexcutionTimeSeconds": 1}}),
            json!({"status": {"accumulatedPastExecutionTimeSeconds": 1}}),
        ),
        (
            "zero AccumulatedPastExexcutionTimeSeconds",
            "Workload",
            Way::Both,
            json!({"status": {"accumulatedPastExexcutionTimeSeconds": 0}}),
            json!({"status": {"accumulatedPastExecutionTimeSeconds": 0}}),
        ),
        (
            "with PodPriorityClassSource",
            "Workload",
            Way::Both,
            json!({"spec": {"priorityClassSource": "scheduling.k8s.io/priorityclass", "priorityClassName": "test", "priority": 7}}),
            json!({"spec": {"priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "test"}, "priority": 7}}),
        ),
        (
            "with WorkloadPriorityClassSource",
            "Workload",
            Way::Both,
            json!({"spec": {"priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass", "priorityClassName": "test"}}),
            json!({"spec": {"priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "test"}}}),
        ),
        (
            "an empty priorityClassSource refers to nothing",
            "Workload",
            Way::Up,
            json!({"spec": {"priorityClassSource": "", "queueName": "q"}}),
            json!({"spec": {"queueName": "q"}}),
        ),
        (
            "preemption gates have no v1beta1 form",
            "Workload",
            Way::Down,
            json!({"spec": {"queueName": "q"}, "status": {}}),
            json!({"spec": {"queueName": "q", "preemptionGates": [{"name": "g"}]},
                   "status": {"preemptionGates": [{"name": "g", "position": "Closed", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
        ),
        (
            "with TopologyAssignment",
            "Workload",
            Way::Both,
            topology(json!({"levels": ["a", "b"], "domains": [
                {"values": ["a1", "b1"], "count": 10}, {"values": ["a1", "b2"], "count": 20}]})),
            topology(json!({"levels": ["a", "b"], "slices": [{"domainCount": 2,
                "valuesPerLevel": [{"universal": "a1"}, {"individual": {"prefix": "b", "roots": ["1", "2"]}}],
                "podCounts": {"individual": [10, 20]}}]})),
        ),
        (
            "with TopologyAssignment, multiple slices",
            "Workload",
            Way::Down,
            topology(json!({"levels": ["a", "b"], "domains": [
                {"values": ["a1", "b1"], "count": 10}, {"values": ["a1", "b2"], "count": 20},
                {"values": ["a2", "first-in-a2"], "count": 50}, {"values": ["a2", "second-in-a2"], "count": 50}]})),
            topology(json!({"levels": ["a", "b"], "slices": [
                {"domainCount": 2,
                 "valuesPerLevel": [{"universal": "a1"}, {"individual": {"prefix": "b", "roots": ["1", "2"]}}],
                 "podCounts": {"individual": [10, 20]}},
                {"domainCount": 2,
                 "valuesPerLevel": [{"universal": "a2"}, {"individual": {"roots": ["first", "second"], "suffix": "-in-a2"}}],
                 "podCounts": {"universal": 50}}]})),
        ),
        (
            "prefix and suffix do not overlap (the prefix gives way)",
            "Workload",
            Way::Both,
            topology(json!({"levels": ["h"], "domains": [
                {"values": ["ababa"], "count": 1}, {"values": ["aba"], "count": 1}]})),
            topology(json!({"levels": ["h"], "slices": [{"domainCount": 2,
                "valuesPerLevel": [{"individual": {"suffix": "aba", "roots": ["ab", ""]}}],
                "podCounts": {"universal": 1}}]})),
        ),
        (
            "retryDelayMinutes has no v1beta2 form",
            "AdmissionCheck",
            Way::Up,
            json!({"spec": {"controllerName": "c", "retryDelayMinutes": 15}}),
            json!({"spec": {"controllerName": "c"}}),
        ),
        (
            "a MultiKueueCluster's kubeconfig moves into clusterSource",
            "MultiKueueCluster",
            Way::Both,
            json!({"spec": {"kubeConfig": {"location": "w1", "locationType": "Secret"}}}),
            json!({"spec": {"clusterSource": {"kubeConfig": {"location": "w1", "locationType": "Secret"}}}}),
        ),
        (
            "quotaManagement has no v1beta1 form",
            "MultiKueueConfig",
            Way::Down,
            json!({"spec": {"clusters": ["w1"]}}),
            json!({"spec": {"clusters": ["w1"], "quotaManagement": "Manual"}}),
        ),
        (
            "ResourceFlavors are alike",
            "ResourceFlavor",
            Way::Both,
            json!({"spec": {"nodeLabels": {"instance-type": "spot"}}}),
            json!({"spec": {"nodeLabels": {"instance-type": "spot"}}}),
        ),
    ];
    for (case, kind, way, v1beta1, v1beta2) in table {
        if way != Way::Down {
            assert_eq!(
                v1beta1_to_v1beta2(kind, v1beta1.clone()),
                v1beta2,
                "{case}: up"
            );
        }
        if way != Way::Up {
            assert_eq!(
                v1beta2_to_v1beta1(kind, v1beta2.clone()),
                v1beta1,
                "{case}: down"
            );
        }
    }
}

fn domains() -> impl Strategy<Value = Vec<(Vec<String>, i64)>> {
    (1usize..4).prop_flat_map(|levels| {
        prop::collection::vec(
            (
                prop::collection::vec("[a-c]{0,3}(-[a-c0-9]{1,3}){0,2}", levels),
                1i64..100,
            ),
            0..6,
        )
    })
}

proptest! {
    /// Every v1beta1 object made of fields both versions have survives v1beta1 → v1beta2 →
    /// v1beta1 unchanged, and its v1beta2 form survives the other way round.
    #[test]
    fn v1beta1_objects_round_trip(
        cohort in "[a-z]{1,8}",
        source in prop::sample::select(vec!["kueue.x-k8s.io/workloadpriorityclass", "scheduling.k8s.io/priorityclass"]),
        class in "[a-z]{1,8}",
        executed in 0i64..1000,
        domains in domains(),
    ) {
        let levels = domains.first().map_or(1, |(values, _)| values.len());
        let level_names: Vec<String> = (0..levels).map(|l| format!("level-{l}")).collect();
        let domains: Vec<Value> = domains
            .iter()
            .map(|(values, count)| json!({"values": values, "count": count}))
            .collect();
        let objects = [
            ("ClusterQueue", json!({"spec": {"cohort": cohort, "namespaceSelector": {}},
                                    "status": {"pendingWorkloads": 0}})),
            ("LocalQueue", json!({"spec": {"clusterQueue": cohort},
                                  "status": {"flavorUsage": [{"name": class, "resources": []}]}})),
            ("Workload", json!({
                "spec": {"priorityClassSource": source, "priorityClassName": class, "priority": 1,
                         "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]},
                "status": {"accumulatedPastExexcutionTimeSeconds": executed,
                           "admission": {"clusterQueue": cohort, "podSetAssignments": [
                               {"name": "main", "topologyAssignment": {"levels": level_names, "domains": domains}}]}}})),
        ];
        for (kind, v1beta1) in objects {
            let v1beta2 = v1beta1_to_v1beta2(kind, v1beta1.clone());
            prop_assert_eq!(&v1beta2_to_v1beta1(kind, v1beta2.clone()), &v1beta1, "{}", kind);
            prop_assert_eq!(
                v1beta1_to_v1beta2(kind, v1beta2_to_v1beta1(kind, v1beta2.clone())),
                v1beta2,
                "{}",
                kind
            );
        }
    }
}
