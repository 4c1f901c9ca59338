//! tessera-node-cache: the node cache daemon's shell (issue 21, deliverable 3).
//!
//! One cache per node (`tessera agent cache`, and inside each twin) holds model files
//! content-addressed by sha256 and moves them without sending every node to the origin:
//!
//! - [`store`]: the blob store on disk (complete blobs visible only by atomic rename after
//!   verification, partial downloads with their verified-piece state for resume, the optional
//!   Hugging Face view);
//! - [`cache`]: the daemon's state and downloads: per-node single-flight with a negative cache,
//!   the cluster's seed by rendezvous over the normalised request key, peer fan-out, origin
//!   retries with jittered backoff, space admission and eviction;
//! - [`server`]: the peer protocol (piece maps, the seed's tracker, verified ranges, pull,
//!   status, pins);
//! - [`tracker`]: the tracker's wire types and its swarms per blob;
//! - [`http`]: the HTTP client; [`rate`]: the byte token bucket;
//! - [`test_origin`]: an in-process origin with fault injection, for tests and benches;
//! - [`loopback_swarm`]: N caches in one process pulling one blob at once (the bench's engine).
//!
//! Every decision is the pure core's (`tessera-cache`); this crate does the I/O.

pub mod cache;
pub mod http;
pub mod loopback_swarm;
pub mod rate;
pub mod server;
pub mod store;
pub mod test_origin;
pub mod tracker;

pub use cache::{Cache, CacheError, Config, PeerSpec, PullRequest, PullResponse, Status};
