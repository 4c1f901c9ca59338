//! Topology-Aware Scheduling as Kueue computes it (`pkg/cache/scheduler/tas_*.go`): for a
//! PodSet in a flavor with `spec.topologyName`, the `TopologyAssignment` (levels, domains and
//! pod counts) that keeps its pods within a required or preferred level, in slices, with a
//! leader, over nodes' allocatable minus what TAS and non-TAS pods use.
//!
//! - `annotations`: a PodSet's topology request from its template's annotations.
//! - `tree`: the domains of a topology over the nodes a flavor selects.
//! - `request`: the PodSet's topology request and the assignment types.
//! - `snapshot`: capacity and usage per leaf; `find_topology_assignments` for a Workload.
//! - `assign`: one run of Kueue's algorithm; `order`: its domain orders (BestFit,
//!   LeastFreeCapacity) and, beyond Kueue, `FitOrdering::LeastFragmentation`.
//! - `message`: Kueue's failure messages.
//! - `beyond`: beyond Kueue, the domain whose clearing preempts the least.
//! - `clearing`: beyond Kueue, the cycle's topology-aware preemption: the holders a preemptor
//!   may preempt and the victims `beyond` chooses among them.
//! - `flavor_step`: the flavor assigner's TAS step (Fit / Preempt / NoFit) and flavor check.
//! - `flavors`: the TAS flavors a cycle sees and the step applied to the assigner's
//!   `Assignment` (the assigner calls it at the end of every assignment).
//! - `ungate`: which gated pods of an admitted Workload go to which domain (the topology
//!   ungater).
//!
//! Pure: nodes, usage and requests are inputs. Not ported: node replacement after a node
//! fails, elastic Workload slices, balanced placement and preferred node affinity (both off by
//! default in Kueue).

pub mod annotations;
mod assign;
pub mod beyond;
pub mod clearing;
pub mod flavor_step;
pub mod flavors;
pub mod message;
pub mod order;
pub mod request;
pub mod snapshot;
pub mod tree;
pub mod ungate;

#[cfg(test)]
mod kueue_tests;
#[cfg(test)]
mod tests;

pub use beyond::{ClearingPlan, Occupant, cheapest_domain_to_clear};
pub use flavor_step::{AssignedPodSet, TopologyVerdict, flavor_mismatch, topology_step};
pub use flavors::{TOPOLOGY_PLACEMENT_FAILED, TasFlavors};
pub use order::FitOrdering;
pub use request::{
    PodSetTasRequest, PodSetTasResult, SliceConstraint, TopologyAssignment,
    TopologyDomainAssignment, TopologyRequest,
};
pub use snapshot::{SearchOptions, TasSnapshot};
pub use tree::{HOSTNAME_LABEL, TopologyNode, TopologyTree};
