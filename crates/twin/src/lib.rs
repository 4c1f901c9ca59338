//! Node twins: simulated kubelets for the embedded platform.
//!
//! Registers one Node per entry of the cluster topology, keeps it Ready with Lease
//! heartbeats and condition updates (`heartbeat`), and runs every pod bound to it
//! (`pods`): Pending → Running → Succeeded or Failed (or restarts, per `restartPolicy`),
//! with container statuses, pod IPs from the node's pod CIDR, container logs and kubelet
//! events (`records`); applies injected faults (`faults`); publishes DRA devices
//! ([`dra_publish`]: GPUs and RDMA NICs); attaches pods to secondary networks (`attach`); runs the simulated cluster autoscaler of autoscaled pools
//! (`autoscaler`); runs the simulated CSI drivers' provisioner, resizer and the kubelet's
//! volume checks (`csi`) and their csi-snapshotter sidecars (`snapshots`); gives every node a model cache and delivers the models pods ask for
//! (`models`); refuses a pod's sandbox when the node's runtime lacks its RuntimeClass's
//! handler, as the kubelet does (`sandbox`); pulls containers' images from the topology's
//! simulated registries with the kubelet's policies, back-off and messages (`images`). Works only through a kube-rs `Client`, so it is indifferent to whether
//! the API server is in-process or remote.
//!
//! A shell: the loops, the API calls, the timers and the files (logs, the device checkpoint).
//! What a node and its kubelet decide — objects, statuses, admission, claims, faults — is the
//! pure `tessera-node`; the clock is injected ([`NodeTwins::with_clock`]). Knows nothing
//! about real hardware.

mod attach;
mod autoscaler;
pub mod containers;
mod csi;
pub mod dra_publish;
mod faults;
mod heartbeat;
mod images;
pub mod model_servers;
pub mod models;
pub mod netpol;
mod node_changes;
mod pods;
mod records;
mod sandbox;
pub mod secondary_policy;
mod snapshots;
pub mod specs;
pub mod telemetry;
mod twins;
mod world;

pub use images::RegistryConfig;
pub use models::ModelConfig;
pub use twins::{NodeTwins, TwinConfig};
