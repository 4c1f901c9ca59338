//! Pod Security admission, as upstream's `k8s.io/pod-security-admission` decides it: the
//! policy levels and versions and a namespace's labels (`api`), every baseline and restricted
//! check with its versioned revisions and exact messages (`checks`), the evaluator that picks
//! a level's checks at a version and aggregates their results (`evaluator`), the admission
//! decisions for pods, pod-template kinds and namespaces with exemptions, warnings and audit
//! annotations (`admission`), and the plugin's configuration file (`config`).
//!
//! A core: no I/O, no clock. The API server's shell (`tessera_apiserver::pod_security`) reads
//! the namespace and the request's user, calls [`PodSecurity`] and carries out its
//! [`Decision`]; it knows nothing of HTTP or the store.

pub mod admission;
pub mod api;
pub mod checks;
pub mod config;
pub mod evaluator;

pub use admission::{
    Decision, Denial, NamespaceDecision, PodSecurity, evaluates_pod_subresource, pod_template_path,
};
pub use api::{Level, LevelVersion, Policy, Version};
pub use config::{PluginConfig, PodSecurityConfiguration};
pub use evaluator::{AggregateCheckResult, Evaluator};

#[cfg(test)]
mod fixtures_tests;
