//! Tenant bundles: a [`Tenant`] spec (`tessera.dev/v1alpha1`) validated ([`spec`]) and
//! expanded into the objects that give a team its namespace ([`bundle`]): Pod Security labels
//! and the ownership label on the Namespace, a ResourceQuota, a LimitRange, a Kueue
//! LocalQueue, RoleBindings, NetworkPolicies and a workload ServiceAccount; whether a tenant
//! may take a namespace ([`ownership`]); and the drift between a bundle and what is live
//! ([`drift`]).
//!
//! A core: it decides from the objects it is handed. It knows nothing of kube clients,
//! server-side apply requests, files or the terminal — `tessera tenant` (crates/cli/src/
//! tenant.rs) reads and writes, and prints.

pub mod bundle;
pub mod drift;
pub mod ownership;
pub mod spec;

pub use bundle::{FIELD_MANAGER, KINDS, Kind, ObjectRef, TENANT_LABEL, bundle};
pub use drift::{Finding, drift};
pub use ownership::{Conflict, Summary, claim, recorded};
pub use spec::{SpecError, Tenant, TenantSpec};

#[cfg(test)]
mod tests;
