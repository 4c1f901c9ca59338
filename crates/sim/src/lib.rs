//! Tessera's digital twin: a deterministic placement simulator with a virtual clock and no API
//! server. This crate is its pure core — traces in, placements and measurements out:
//!
//! - [`trace`]: the Alibaba openb traces (node and pod lists), checked line by line;
//! - [`cluster`]: pods asking for CPU, memory and whole or shared GPUs; nodes and what they have
//!   left; the artifact's feasibility rule and GPU choices;
//! - [`frag`]: typical pods and the FGD fragmentation measure;
//! - [`policy`]: the FGD artifact's six policies, scored exactly as there, and Tessera's own;
//! - [`engine`]: placing pods one by one under a policy, verdicts remembered per pod shape;
//! - [`fgd`]: the FGD experiment's protocol and its `analysis_allo_discrete.csv` rows;
//! - [`timeline`]: a workload over time — arrivals, a waiting queue, departures — with an event
//!   log and a summary, whatever places the pods; [`report`]: that summary as a self-contained
//!   HTML page;
//! - [`trace_placer`]: openb traces on the timeline under the artifact's policies or Tessera's;
//! - [`workload`] and [`kube_placer`]: Kubernetes manifests on a topology file's cluster,
//!   placed by the live scheduling core (`tessera-scheduler`).
//!
//! No I/O, no clock, no threads: the `tessera sim` shell reads files, runs grids in parallel
//! and writes results.

pub mod cluster;
pub mod engine;
pub mod fgd;
pub mod frag;
pub mod kube_placer;
pub mod policy;
pub mod queue_scenario;
pub mod queue_timeline;
pub mod queue_topology;
pub mod report;
pub mod timeline;
pub mod trace;
pub mod trace_placer;
pub mod workload;

pub use policy::Policy;
