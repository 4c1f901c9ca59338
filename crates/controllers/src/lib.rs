//! Controllers that wire Tessera's pure cores to a Kubernetes API through kube-rs. The same
//! code runs against the embedded API server (over an in-process transport) and against a
//! real cluster.
//!
//! Each controller module is a thin shell: it watches, reads the time from its [`Clock`],
//! asks a pure core of `tessera-workloads` (for example
//! [`tessera_workloads::disruption::budget`]) and carries out what it answers — the workload
//! kinds' plans through one function, [`shell::apply`]. The decisions live in the cores.
//!
//! [`Clock`]: tessera_model::clock::Clock

pub mod apps;
pub mod assumed;
pub mod changelog;
pub mod custom;
pub mod echoes;
pub mod endpoints;
pub mod gateway;
pub mod hpa;
pub mod inference_pools;
pub mod jobs;
pub mod maintenance;
pub mod maintenance_evict;
pub mod node_monitor;
pub mod pacing;
pub mod pdb;
pub mod pod_gc;
pub mod pv_controller;
pub mod queue;
pub mod queue_dra;
pub mod queue_multikueue;
pub mod queue_multikueue_loop;
mod queue_multikueue_remote;
mod queue_multikueue_touched;
pub mod queue_pods;
pub mod queue_provisioning;
mod queue_status_writer;
mod queue_workloads;
pub mod resource_claims;
pub mod scheduler;
pub mod serialized;
pub mod shell;
pub mod snapshot_controller;
pub mod trimmed_pods;
pub mod workqueue;
