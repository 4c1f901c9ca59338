//! Tessera's object model: the Kubernetes types it serves (from k8s-openapi, Kubernetes 1.34),
//! the catalog of served kinds with their REST names and schemas, and exact quantities.
//!
//! Knows nothing about storage, HTTP or scheduling.

pub mod address;
pub mod clock;
pub mod conditions;
pub mod event;
pub mod event_correlation;
pub mod extended_resources;
pub mod fnv;
pub mod ids;
pub mod json;
pub mod kinds;
pub mod kueue;
pub mod managers;
pub mod multus;
pub mod net;
pub mod network_policy_api;
pub mod node_selector;
pub mod pod_claims;
pub mod pod_requests;
pub mod provisioning;
pub mod quantity;
pub mod schema;
pub mod selector;
pub mod taints;
pub mod time;
pub mod yaml_location;

pub use k8s_openapi;
pub use kinds::{CustomKind, KindInfo, PrinterColumn, ScalePaths, Subresource};
pub use quantity::{Format, Quantity, QuantityError};
