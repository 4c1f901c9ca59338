//! Kueue's ProvisioningRequest admission check (`pkg/controller/admissionchecks/provisioning`):
//! the AdmissionCheck reconciler marking a check of controller
//! `kueue.x-k8s.io/provisioning-request` `Active` once its parameters name a
//! ProvisioningRequestConfig ([`config`]), and the Workload reconciler that, for a Workload
//! holding quota, creates one ProvisioningRequest (`autoscaling.x-k8s.io/v1`) per check with
//! its PodTemplates ([`request`]), maps the request's conditions to the check's state and
//! deletes the requests no longer needed ([`workload`]).
//!
//! Pure: objects are JSON values handed in, writes are values handed back, time is an
//! argument. Knows nothing about how the autoscaler provisions (the embedded platform's is
//! `tessera_node::autoscaler`), nor about the admission-check framework that turns check
//! states into `Admitted` ([`crate::api::admission_checks`]).

pub mod config;
pub mod request;
pub mod workload;

pub use config::{Config, active_status};
pub use workload::{Inputs, Write, creation_failed, reconcile};

/// The kind an AdmissionCheck's parameters name (`ConfigKind`).
pub const CONFIG_KIND: &str = "ProvisioningRequestConfig";
/// The check's message while its AdmissionCheck has no usable config (`CheckInactiveMessage`).
pub const CHECK_INACTIVE_MESSAGE: &str = "the check is not active";
/// The check's message when no PodSet needs provisioning (`NoRequestNeeded`).
pub const NO_REQUEST_NEEDED: &str = "the provisioning request is not needed";
/// The label Kueue puts on what it creates (`ManagedByKueueLabelKey`, value `true`).
pub const MANAGED_BY_KUEUE_LABEL: &str = "kueue.x-k8s.io/managed";
/// Workload annotations with this prefix become request parameters (`ProvReqAnnotationPrefix`).
pub const PARAMETER_ANNOTATION_PREFIX: &str = "provreq.kueue.x-k8s.io/";
/// The component Kueue's provisioning controller records events as.
pub const COMPONENT: &str = "kueue-provisioning-request-controller";

#[cfg(test)]
mod tests;
