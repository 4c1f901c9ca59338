//! Kueue's MultiKueue kinds (`apis/kueue/v1beta2/multikueue_types.go`): MultiKueueConfig
//! (the worker clusters a MultiKueue AdmissionCheck dispatches to) and MultiKueueCluster (how
//! to reach one worker: a kubeconfig in a Secret, or a ClusterProfile), with the CRD's
//! validation.
//!
//! Types and schema only; connecting to workers and dispatching is
//! `tessera_queue::api::multikueue`'s and the controllers' business.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::queues::conditions;
use super::refine::{
    atomic, cel, default_value, enum_of, items, max_length, min_max_items, min_max_length,
};

/// `spec` of a MultiKueueConfig.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MultiKueueConfigSpec {
    /// clusters is a list of MultiKueueClusters names where the workloads from the
    /// ClusterQueue should be distributed.
    #[schemars(transform = clusters_list)]
    pub clusters: Vec<String>,
    /// quotaManagement specifies the management of ClusterQueue quotas in the manager cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = quota_management)]
    pub quota_management: Option<String>,
}

fn clusters_list(schema: &mut schemars::Schema) {
    min_max_items::<1, 20>(schema);
    atomic(schema);
    items(schema, max_length::<256>);
    cel(
        schema,
        &[(
            "size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0",
            "must be unique",
        )],
    );
}

fn quota_management(schema: &mut schemars::Schema) {
    enum_of(schema, &["Manual", "Automated"]);
}

/// `spec` of a MultiKueueCluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MultiKueueClusterSpec {
    /// clusterSource is the source to connect to the cluster.
    pub cluster_source: ClusterSource,
}

/// How to connect to a worker: exactly one of a kubeconfig or a ClusterProfile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "[has(self.kubeConfig),has(self.clusterProfileRef)].filter(x,x==true).size() == 1", "message": "exactly one of the fields in [kubeConfig clusterProfileRef] must be set"}
]))]
pub struct ClusterSource {
    /// kubeConfig is information on how to connect to the cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kube_config: Option<KubeConfig>,
    /// clusterProfileRef is the reference to the ClusterProfile object used to connect to
    /// the cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_profile_ref: Option<ClusterProfileReference>,
}

/// Where a worker's kubeconfig is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeConfig {
    /// location of the KubeConfig: with locationType Secret, the name of a Secret in Kueue's
    /// namespace whose `kubeconfig` key holds it.
    #[schemars(transform = min_max_length::<1, 256>)]
    pub location: String,
    /// locationType of the KubeConfig (`Secret` or `Path`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = location_type)]
    pub location_type: Option<String>,
}

fn location_type(schema: &mut schemars::Schema) {
    enum_of(schema, &["Secret", "Path"]);
    default_value(schema, json!("Secret"));
}

/// A ClusterProfile by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileReference {
    /// name of the ClusterProfile.
    #[schemars(transform = min_max_length::<1, 256>)]
    pub name: String,
}

/// `status` of a MultiKueueCluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MultiKueueClusterStatus {
    /// conditions hold the latest available observations of the MultiKueueCluster (`Active`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(transform = conditions)]
    pub conditions: Option<Vec<Condition>>,
}
