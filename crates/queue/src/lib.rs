//! Kueue's quota model and flavor assignment as a pure core: quota amounts, (flavor,
//! resource) quantities, the ClusterQueue/Cohort tree with lending and borrowing limits,
//! availability and the borrowing level, dominant resource shares for fair sharing; Workload
//! requests, ResourceFlavor matching, and flavor assignment with flavor fungibility and partial
//! admission; preemption, classic and with fair sharing, which picks the admitted Workloads to
//! evict with Kueue's reasons and messages and answers the assigner's `PreemptionOracle`
//! (`preemption::Oracle`). Admission and the queues build on it. It does no I/O and reads no
//! clock: the current time is an argument.

pub mod amount;
pub mod assigner;
pub mod cluster_queue;
pub mod fair_sharing;
pub mod flavor;
pub mod preemption;
pub mod quota;
pub mod resources;
pub mod tree;
pub mod workload;

#[cfg(test)]
mod testing;

pub use amount::Amount;
pub use assigner::{
    Assignment, AssumePreemptible, FlavorAssigner, FlavorAssignment, FlavorAssignmentMode,
    PodSetAssignment, PodSetReducer, PreemptionOracle, PreemptionPossibility,
};
pub use cluster_queue::{ClusterQueuePolicy, FlavorFungibility, ResourceGroup};
pub use fair_sharing::Drs;
pub use flavor::ResourceFlavorSpec;
pub use resources::{FlavorResource, FlavorResourceQuantities};
pub use tree::{
    ClusterQueueSpec, CohortSpec, NodeId, NodeKind, ResourceQuota, Tree, TreeError, TreeSpec,
};
pub use workload::{PodSet, WorkloadInfo};
