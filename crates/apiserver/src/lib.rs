//! Tessera's Kubernetes-compatible API server: the REST surface real kubectl and kube-rs
//! drive, over the durable revisioned store. The shell of `tessera-api`, which decides what
//! the Kubernetes semantics demand; this crate does the I/O around it.
//!
//! Owns routing and HTTP (discovery, OpenAPI, CRUD, the three patch flavours, Tables and
//! subresources served from `tessera-api`'s documents and decisions), authentication
//! transport and the TLS listener, list/watch with selectors and pagination over the store,
//! `pods/exec` over SPDY/3.1 and WebSocket into a registered container runtime, the store binding of object writes (one read-modify-write transaction each, with the
//! clock and a seeded id generator injected), the served-resource registry, and the garbage
//! collector (owner references, finalizers, namespace lifecycle), and the hook through which
//! another component serves an aggregated group (`aggregated`), the proxy subresources of
//! nodes, pods and services into a registered backend (`proxy`), and kube-apiserver's audit
//! logging (`audit`, `audit_log`). Knows nothing about
//! scheduling, queueing or node internals.

pub mod access;
pub mod aggregated;
pub mod audit;
pub mod audit_log;
pub mod authn;
pub mod error;
pub mod eviction;
pub mod exec;
pub mod gc;
pub mod list;
pub mod metrics;
pub mod namespace_facts;
pub mod objects;
pub mod parsed;
pub mod pod_security;
pub mod proxy;
pub mod registry;
pub mod server;
pub mod service_book;
pub mod spdy;
pub mod subresources;
pub mod tls;
pub mod watch;
pub mod websocket;

pub use aggregated::AggregatedApi;
pub use error::HttpError;
pub use objects::Objects;
pub use proxy::ProxyBackend;
pub use server::{ApiServer, ServerConfig};
