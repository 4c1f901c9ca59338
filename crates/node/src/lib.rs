//! The node model: what a node of the cluster topology is and what its kubelet does, as pure
//! data and functions.
//!
//! - [`topology`] (the topology file), [`network`] (its address plan), [`networks`] (its traffic classes and the NICs that carry them), [`hardware`] and
//!   [`accelerators`] (server models, GPU exposure, the labels and extended resources they
//!   give);
//! - [`node_object`] (the Node a topology entry registers as, its status and Lease),
//!   [`resource_slice`] and [`nic_devices`] (the DRA ResourceSlices and DeviceClasses it publishes: GPUs, RDMA NICs),
//!   [`onboarding`] (validating a joining node, and the outcome), [`node_changes`] (a new MIG
//!   layout on a drained node, a rotation's replacement);
//! - the kubelet's decisions: [`device_admission`] and [`gpu_assignments`] (device-plugin GPUs
//!   a pod gets and their checkpoint), [`dra_claims`] and [`claim_devices`] (preparing a pod's
//!   ResourceClaims as the DRA driver's kubelet plugin), [`runtime`] and [`pod_status`] (how a
//!   simulated container behaves and the statuses a kubelet posts), [`pod_ips`] (pod IPs), [`attachments`] (secondary networks a pod is attached to),
//!   [`faults`] (injected faults and their effects), [`runtime_handlers`] (the runtime
//!   handlers a node has, the bundled RuntimeClasses, the sandbox step), [`images`] (image
//!   references, pull policies, the image back-off, registries' pull verdicts, pull secrets),
//!   [`registry`] (the platform's image registry as the cluster sees it, and pulls from it).
//!
//! No I/O, no clock, no async: time is an input. The node twins (`tessera-twin`) run these
//! against an API server; the simulator (`tessera-sim`) schedules against the same objects
//! without one. Knows nothing about clients or real hardware.

pub mod accelerators;
pub mod agent_manifests;
pub mod attachments;
pub mod autoscaler;
pub mod claim_devices;
pub mod device_admission;
pub mod dra_claims;
pub mod faults;
pub mod gpu_assignments;
pub mod hardware;
pub mod images;
pub mod network;
pub mod networks;
pub mod nic_devices;
pub mod node_changes;
pub mod node_object;
pub mod onboarding;
pub mod pod_ips;
pub mod pod_status;
pub mod registry;
pub mod resource_slice;
pub mod runtime;
pub mod runtime_handlers;
pub mod topology;
pub mod worker_model;

pub use topology::{NodeSpec, Topology, TopologyError};
