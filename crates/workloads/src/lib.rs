//! The workload controllers' pure cores: from an object and what it owns (as the API shows
//! them) and the time, what to create, change and delete to bring the cluster in line, as
//! upstream's controllers decide it. The shells (`tessera-controllers`) watch, call these and
//! carry out their plans; the simulator (`tessera-sim`) expands workloads with them.
//!
//! - [`plan`]: the common shape of a plan — [`plan::Writes`], in order — that each kind's plan
//!   converts into;
//! - [`job`]: Jobs (completions, Indexed mode, backoff, failure and success policies, TTL);
//! - [`replicaset`], [`deployment`], [`daemonset`], [`statefulset`]: the apps/v1 kinds;
//! - [`jobset`], [`lws`]: the JobSet and LeaderWorkerSet custom kinds;
//! - [`resource_claim`]: ResourceClaims from templates, allocation of bound pods' claims,
//!   reservations;
//! - [`node_lifecycle`]: Unknown conditions, NoExecute taints and evictions of silent nodes;
//! - [`disruption`]: PodDisruptionBudget status;
//! - [`pod_gc`]: pods of nodes that no longer exist, collected as PodGC does;
//! - [`endpointslice`], [`endpoints`]: a Service's EndpointSlices and legacy Endpoints from
//!   its pods.
//!
//! No I/O, no clock, no randomness: time is always an input (`std::time::SystemTime`), and
//! nothing here knows how a write reaches an API.

pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod endpoints;
pub mod endpointslice;
pub mod hpa;
pub mod job;
pub mod jobset;
pub mod lws;
pub mod node_lifecycle;
pub mod plan;
pub mod pod_gc;
pub mod replicaset;
pub mod resource_claim;
pub mod statefulset;

/// A `SystemTime` as the API's `Time` (the Unix epoch for times before it or out of range).
pub(crate) fn meta_time(
    time: std::time::SystemTime,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    let nanos = time
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX));
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_nanosecond(nanos)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    )
}
