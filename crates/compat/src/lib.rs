//! tessera-compat: the compatibility matrix for GPU clusters and a pure checker over it.
//!
//! A shell gathers [`ClusterFacts`] (API server and kubelet versions, GPU feature discovery
//! labels, the GPU Operator, device plugin, DRA driver and Kueue versions it finds) and calls
//! [`check`], optionally with a planned [`Change`]; each [`Conflict`] names the node or component,
//! the two versions, the rule and the source of the matrix row that decided it.
//!
//! The matrix is data (`data/matrix.yaml`, bundled); every row cites its source and marks whether
//! it was verified. This crate does no I/O: it does not list nodes or call any API.

mod check;
mod facts;
mod matrix;
mod version;

pub use check::{Conflict, Rule, check, check_with};
pub use facts::Change;
pub use facts::{ClusterFacts, ContainerCuda, DraUse, FactsError, NodeFacts, node_facts};
pub use matrix::{
    ArchitectureRow, BUNDLED, DraApiRow, DriverBranchRow, Matrix, MatrixError, MinorCompatRow,
    MinorRange, OperatorRow, ReleaseRow, SkewRow, Source,
};
pub use version::{Version, VersionError};

#[cfg(test)]
mod tests;
