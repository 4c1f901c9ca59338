//! Kueue's quota model as a pure core: quota amounts, (flavor, resource) quantities, the
//! ClusterQueue/Cohort tree with lending and borrowing limits, availability and the borrowing
//! level, and dominant resource shares for fair sharing. Admission, flavor assignment and
//! preemption build on it; it does no I/O and reads no clock.

pub mod amount;
pub mod fair_sharing;
pub mod quota;
pub mod resources;
pub mod tree;

#[cfg(test)]
mod testing;

pub use amount::Amount;
pub use fair_sharing::Drs;
pub use resources::{FlavorResource, FlavorResourceQuantities};
pub use tree::{
    ClusterQueueSpec, CohortSpec, NodeId, NodeKind, ResourceQuota, Tree, TreeError, TreeSpec,
};
