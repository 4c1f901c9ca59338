//! Kueue's quota model, flavor assignment, preemption, queues and admission cycle as a pure
//! core: quota amounts, (flavor, resource) quantities, the ClusterQueue/Cohort tree with lending
//! and borrowing limits, availability and the borrowing level, dominant resource shares for fair
//! sharing; Workload requests, ResourceFlavor matching, and flavor assignment with flavor
//! fungibility and partial admission; preemption, classic and with fair sharing
//! (`preemption`), which picks the admitted Workloads to evict with Kueue's reasons and
//! messages; the ClusterQueue and LocalQueue queues (`queue`), the scheduling cycle that turns
//! their heads into admissions, preemptions and requeues (`cycle`), and admission fair
//! sharing's usage arithmetic (`afs`), and Kueue's stored objects read into these inputs with
//! the statuses and Job changes Kueue writes back (`api`), and Topology-Aware Scheduling's
//! placement of PodSets in a flavor's topology (`tas`), which the flavor assigner runs at the
//! end of every assignment and whose placements the pass records, gates and ungates. The
//! cycle runs Kueue's preemption (`cycle::KueuePreemption`) over its snapshot's admitted
//! Workloads: one
//! `preemption::Oracle` per entry answers the flavor assigner (`PreemptionOracle`) and names
//! the targets the cycle issues. It does no I/O and reads no clock: time is an argument.
//!
//! Beyond Kueue (issue 16, item 6), each off by default where it changes Kueue's behaviour:
//! - `ClusterQueueQueue::heads_per_cycle` (the `heads_per_cluster_queue` option, default 1):
//!   a cycle runs that many rounds, each one Kueue cycle over the next head of every
//!   ClusterQueue, with the snapshot refreshed in between as Kueue's next cycle would read it.
//!   One cycle with N heads decides exactly what N successive Kueue cycles decide when
//!   nothing else changes; within a ClusterQueue nothing is admitted before every Workload
//!   ordered ahead of it was tried (StrictFIFO: nothing is admitted behind a head that is
//!   not).
//! - Total tie-breaks (always on: Kueue leaves these ties to map and sort order): equal
//!   priority, timestamp or share falls back to UID, then `namespace/name`, in the queue
//!   heaps, the classic iterator, the fair-sharing tournament and the preemption candidates'
//!   order, so decisions do not depend on how the inputs were listed.
//! - `FairSharingConfig::prevent_flapping` (off): S2-a refuses at equal shares, so a
//!   fair-sharing preemption that took one Workload from a ClusterQueue cannot be reversed by
//!   that Workload through fair sharing on the next cycle.
//! - `PreemptionConfig::min_runtime_before_preemption` (none): Workloads reserved more
//!   recently are not preempted from other ClusterQueues (reclamation, fair sharing);
//!   InClusterQueue priority preemption still applies.
//! - `LocalQueue::user_limits` (none, `user_limits`): admitted Workloads and requests per user
//!   inside a LocalQueue; a Workload over a limit stays pending with `UserLimitReached`.

pub mod afs;
pub mod amount;
pub mod api;
pub mod assigner;
pub mod cluster_queue;
pub mod config;
pub mod cycle;
pub mod fair_sharing;
pub mod flavor;
pub mod joined_key;
pub mod preemption;
pub mod queue;
pub mod quota;
pub mod resources;
pub mod tas;
pub mod tree;
pub mod user_limits;
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
