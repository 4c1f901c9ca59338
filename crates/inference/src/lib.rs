//! Inference-aware routing, as the Gateway API Inference Extension defines it.
//!
//! - [`pool`]: the InferencePool API (`inference.networking.k8s.io/v1`): its spec read and
//!   checked, the pods it selects, the status conditions its parents write.
//! - [`metrics`]: a model server's load in vLLM's metric names, parsed and written.
//! - [`prefix`]: prompt blocks and the bounded indexes built on them.
//! - [`picker`]: the endpoint picker's scorers and max-score picker, and round robin.
//! - [`engine`]: a simulated vLLM server (continuous batching, paged KV cache, prefix
//!   caching, multi-LoRA) on a caller's clock.
//! - [`server`]: which containers are model servers and what their flags configure; a
//!   server living on its caller's clock.
//! - [`openai`]: what a simulated server answers over HTTP (vLLM's OpenAI routes and
//!   `/metrics`), and the [`openai::ModelServers`] seam a dataplane reaches servers through.
//! - [`trace`]: request traces, read from JSON Lines or generated from a seed.
//! - [`replay`]: a trace through a pool of engines under a policy, and what it measured.
//!
//! A core: no I/O, no clock (time is the simulation's own), no randomness but seeded.

pub mod engine;
pub mod metrics;
pub mod openai;
pub mod picker;
pub mod pool;
pub mod prefix;
pub mod replay;
pub mod server;
pub mod trace;
