//! Network policy evaluation, pure: NetworkPolicy (`networking.k8s.io/v1`) and the
//! network-policy-api's cluster-wide policies (AdminNetworkPolicy, BaselineAdminNetworkPolicy,
//! ClusterNetworkPolicy) evaluated in upstream's order — Admin tier → NetworkPolicy →
//! Baseline tier → allow — by an indexed, incremental evaluator that answers one connection's
//! verdict (with the tier, policy and rule that decided) or a whole reachability matrix; the
//! same evaluator answers for MultiNetworkPolicy on a secondary network ([`secondary`]).
//!
//! Knows nothing of the API server, the dataplane or files: shells hand it objects.

pub mod cidr;
pub mod cluster;
pub mod compile;
pub mod evaluator;
pub mod matrix;
pub mod model;
pub mod objects;
pub mod secondary;
pub mod synthetic;
pub mod table;

pub use compile::Policy;
pub use evaluator::{Decision, Endpoint, Evaluator, PodId, PolicyId, RuleRef, Touched, Verdict};
pub use matrix::Matrix;
pub use model::{Direction, PodInfo, PolicyKind, PolicyRef, Protocol, Tier};
pub use objects::{ObjectError, Objects};
