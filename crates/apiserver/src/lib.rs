//! Tessera's Kubernetes-compatible API server: the REST surface real kubectl and kube-rs
//! drive, over the durable revisioned store.
//!
//! Serves discovery (aggregated and legacy), OpenAPI v3, CRUD, list/watch with selectors and
//! pagination, the three patch flavours, Tables, subresources, and metadata semantics
//! (finalizers, owner references with a garbage collector, namespace lifecycle). Knows
//! nothing about scheduling, queueing or node internals.

pub mod access;
pub mod admission;
pub mod authn;
pub mod convert;
pub mod crd;
pub mod crd_status;
pub mod discovery;
pub mod error;
pub mod escalation;
pub mod eviction;
pub mod gc;
pub mod jsonpath;
pub mod list;
pub mod meta;
pub mod objects;
pub mod openapi;
pub mod patch;
pub mod policy;
pub mod protobuf;
pub mod rbac;
pub mod registry;
pub mod request;
pub mod resource;
pub mod reviews;
pub mod rules;
pub mod selectors;
pub mod server;
pub mod ssa;
pub mod strategy;
pub mod subresources;
pub mod table;
pub mod tls;
pub mod validation;
pub mod watch;

pub use error::{ApiError, ApiResult};
pub use objects::Objects;
pub use resource::Resource;
pub use server::{ApiServer, ServerConfig};
