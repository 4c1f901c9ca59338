//! Simulated telemetry of the node twins: what pods, nodes and GPUs "use" and how the
//! components that measure it on a real cluster report it.
//!
//! - [`load`]: the load a pod declares by annotation (`sim.tessera.dev/cpu-usage`, …) and
//!   the seeded variation of undeclared load;
//! - [`usage`]: the usage model, a pure function of (pod, node, the GPU units pods hold, the
//!   node's faults, time) → CPU, memory, per-GPU utilisation, framebuffer, temperature,
//!   power, clocks, DCP activity and the counters behind them;
//! - [`dcgm`]: NVIDIA dcgm-exporter's `/metrics` text (default counters plus the DCP ones);
//! - [`resource`]: the kubelet's `/metrics/resource`;
//! - [`metrics_api`]: `metrics.k8s.io/v1beta1` NodeMetrics and PodMetrics as metrics-server
//!   returns them;
//! - [`operator`]: the NVIDIA GPU operator's components as objects the twins run.
//!
//! Pure: time and every object are inputs, the variation is seeded by (pod UID, time
//! bucket); it knows nothing of how the twins track devices or where the text is served.

pub mod dcgm;
pub mod load;
pub mod metrics_api;
pub mod operator;
pub mod resource;
pub mod usage;

mod exposition;

#[cfg(test)]
mod tests;

/// The content type of the Prometheus text format the renderers produce.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
