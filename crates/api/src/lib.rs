//! Kubernetes API semantics, pure: what the API server decides about objects and requests
//! without touching a store, a socket, a file, the clock or the host's randomness.
//!
//! Owns validation and defaulting (per-kind strategies, OpenAPI schemas, CRD schemas and CEL
//! rules), object metadata, the write pipeline's decisions (create stamping, update merging,
//! the three patch flavours and server-side apply with managed fields, delete decisions),
//! selectors, Tables and JSONPath, CRD status and naming, discovery and OpenAPI documents,
//! version conversion, protobuf body decoding, request URL grammar, RBAC evaluation and
//! escalation checks, built-in admission and quota arithmetic, the PodDisruptionBudget
//! decisions of evictions, authentication claims, the bootstrap policy, audit policies and
//! audit events (`audit`) and the `Status` errors clients see.
//!
//! Stored objects are read through a [`Lister`] the shell implements; time arrives as a
//! `SystemTime` argument and UIDs and generated names come from a seeded
//! [`tessera_model::ids::Ids`]. HTTP, TLS, the store, list/watch and the garbage collector
//! live in `tessera-apiserver`.

pub mod admission;
pub mod audit;
pub mod authn;
pub mod autoscaling;
pub mod body;
pub mod convert;
pub mod crd;
pub mod crd_status;
pub mod discovery;
pub mod error;
pub mod escalation;
pub mod eviction;
pub mod jsonpath;
pub mod kueue_pods;
pub mod lister;
pub mod listing;
pub mod meta;
pub mod openapi;
pub mod openapi_v2;
pub mod owners;
pub mod patch;
pub mod pod_conditions;
pub mod policy;
pub mod protobuf;
pub mod raw_object;
pub mod rbac;
pub mod rbac_risk;
pub mod request;
pub mod resource;
pub mod reviews;
pub mod rules;
pub mod runtime_class;
pub mod selectors;
pub mod service_allocation;
pub mod ssa;
pub mod strategy;
pub mod subresource;
pub mod table;
pub mod validation;
pub mod write;

pub use error::{ApiError, ApiResult, Cause};
pub use lister::Lister;
pub use resource::Resource;
