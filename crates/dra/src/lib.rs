//! Dynamic Resource Allocation, the pure part: CEL device selectors in the Kubernetes DRA
//! environment ([`selector`]), resource pools as a node sees them ([`pools`]), consumable
//! capacity of shared devices ([`capacity`]), and the structured allocator that satisfies
//! ResourceClaims from them ([`allocator`]).
//!
//! No I/O and no clock: callers hand in slices, classes and claims (from the API, or from the
//! simulator's snapshot) and write the results back. Knows nothing of pods or scheduling
//! beyond the node it is asked about.

pub mod allocator;
pub mod capacity;
pub mod pools;
pub mod selector;

pub use allocator::{AllocationError, Allocator, Diagnosis};
pub use pools::{DeviceId, NodeView};
