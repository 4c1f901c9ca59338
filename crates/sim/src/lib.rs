//! Tessera's digital twin: a deterministic placement simulator with a virtual clock and no API
//! server. This crate is its pure core — traces in, placements and measurements out:
//!
//! - [`trace`]: the Alibaba openb traces (node and pod lists), checked line by line;
//! - [`cluster`]: pods asking for CPU, memory and whole or shared GPUs; nodes and what they have
//!   left; the artifact's feasibility rule and GPU choices;
//! - [`frag`]: typical pods and the FGD fragmentation measure;
//! - [`policy`]: the FGD artifact's six policies, scored exactly as there, and Tessera's own;
//! - [`engine`]: placing pods one by one under a policy, verdicts remembered per pod shape;
//! - [`fgd`]: the FGD experiment's protocol and its `analysis_allo_discrete.csv` rows.
//!
//! No I/O, no clock, no threads: the `tessera sim` shell reads files, runs grids in parallel
//! and writes results.

pub mod cluster;
pub mod engine;
pub mod fgd;
pub mod frag;
pub mod policy;
pub mod trace;

pub use policy::Policy;
