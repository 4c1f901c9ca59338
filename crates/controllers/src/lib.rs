//! Controllers that wire Tessera's pure cores to a Kubernetes API through kube-rs. The same
//! code runs against the embedded API server (over an in-process transport) and against a
//! real cluster.
//!
//! Each controller module is a thin shell; the decisions live in pure functions (for example
//! [`disruption::budget`]) that take a snapshot and the time and do no I/O.

pub mod apps;
pub mod assumed;
pub mod custom;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod job;
pub mod jobs;
pub mod jobset;
pub mod lws;
pub mod node_lifecycle;
pub mod node_monitor;
pub mod pdb;
pub mod replicaset;
pub mod resource_claim;
pub mod resource_claims;
pub mod scheduler;
pub mod shell;
pub mod statefulset;
