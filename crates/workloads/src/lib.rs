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
//! - [`disruption`]: PodDisruptionBudget status.
//!
//! No I/O, no clock, no randomness: time is always an input (`std::time::SystemTime`), and
//! nothing here knows how a write reaches an API.

pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod job;
pub mod jobset;
pub mod lws;
pub mod node_lifecycle;
pub mod plan;
pub mod replicaset;
pub mod resource_claim;
pub mod statefulset;
