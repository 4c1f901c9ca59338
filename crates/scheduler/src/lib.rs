//! The scheduling core: kube-scheduler's filters and scores over a snapshot of nodes, pods,
//! claims and slices, DRA allocation through `tessera-dra`, volume binding through
//! `tessera-storage`, and upstream's FailedScheduling
//! explanations. The embedded platform's scheduler, the scheduler against a real cluster and
//! the simulator all call it.
//!
//! Pure and deterministic: no I/O, no clock, ties broken by node name.

mod claim_memo;
pub mod explain;
pub mod extended;
pub mod filters;
pub mod gang;
pub mod node_info;
mod placed;
pub mod pod_topology;
pub mod preemption;
pub mod profile;
pub mod resources;
pub mod schedule;
pub mod score;
pub mod volumes;

pub use node_info::NodeInfo;
pub use schedule::{Decision, FitError, Scheduler};
