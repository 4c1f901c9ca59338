//! Kueue's quota model, flavor assignment, preemption, queues and admission cycle as a pure
//! core: quota amounts, (flavor, resource) quantities, the ClusterQueue/Cohort tree with lending
//! and borrowing limits, availability and the borrowing level, dominant resource shares for fair
//! sharing; Workload requests, ResourceFlavor matching, and flavor assignment with flavor
//! fungibility and partial admission; preemption, classic and with fair sharing
//! (`preemption`), which picks the admitted Workloads to evict with Kueue's reasons and
//! messages; the ClusterQueue and LocalQueue queues (`queue`), the scheduling cycle that turns
//! their heads into admissions, preemptions and requeues (`cycle`), and admission fair
//! sharing's usage arithmetic (`afs`), and Kueue's stored objects read into these inputs with
//! the statuses and Job changes Kueue writes back (`api`). The cycle runs Kueue's preemption
//! (`cycle::KueuePreemption`) over its snapshot's admitted Workloads: one
//! `preemption::Oracle` per entry answers the flavor assigner (`PreemptionOracle`) and names
//! the targets the cycle issues. It does no I/O and reads no clock: time is an argument.

pub mod afs;
pub mod amount;
pub mod api;
pub mod assigner;
pub mod cluster_queue;
pub mod cycle;
pub mod fair_sharing;
pub mod flavor;
pub mod preemption;
pub mod queue;
pub mod quota;
pub mod resources;
pub mod tree;
pub mod workload;

#[cfg(test)]
mod testing;

pub use amount::Amount;
pub use assigner::{
    Assignment, FlavorAssigner, FlavorAssignment, FlavorAssignmentMode, PodSetAssignment,
    PodSetReducer, PreemptionOracle, PreemptionPossibility,
};
pub use cluster_queue::{ClusterQueuePolicy, FlavorFungibility, ResourceGroup};
pub use fair_sharing::Drs;
pub use flavor::ResourceFlavorSpec;
pub use resources::{FlavorResource, FlavorResourceQuantities};
pub use tree::{
    ClusterQueueSpec, CohortSpec, NodeId, NodeKind, ResourceQuota, Tree, TreeError, TreeSpec,
};
pub use workload::{PodSet, WorkloadInfo};
