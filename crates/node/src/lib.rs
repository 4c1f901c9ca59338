//! Node twins: simulated kubelets for the embedded platform.
//!
//! Registers one Node per entry of the cluster topology, keeps it Ready with Lease
//! heartbeats and condition updates, and runs every pod bound to it: Pending → Running →
//! Succeeded or Failed (or restarts, per `restartPolicy`), with container statuses, pod IPs
//! from the node's pod CIDR, container logs and kubelet events. Works only through a kube-rs
//! `Client`, so it is indifferent to whether the API server is in-process or remote.
//! Knows nothing about real hardware.

pub mod accelerators;
pub mod claim_devices;
pub mod device_admission;
pub mod dra_publish;
pub mod faults;
pub mod gpu_assignments;
pub mod hardware;
pub mod network;
pub mod node_object;
pub mod onboarding;
pub mod resource_slice;
pub mod runtime;
pub mod topology;
mod twin;

pub use topology::{NodeSpec, Topology, TopologyError};
pub use twin::{NodeTwins, TwinConfig};
