//! Accelerators as Tessera knows them: the hardware catalog of GPU models with their MIG
//! profile tables ([`catalog`]), server models with their device topology ([`server`]), the
//! MIG layout planner that places partitions on a GPU ([`mig`]), the chooser of the
//! best-connected GPU set ([`gpu_set`]), and discovery of a real machine ([`sysfs`],
//! [`nvml`]).
//!
//! The catalog, servers and MIG planner are pure data and functions; [`sysfs`] discovery
//! reads files (from a root given to it) and [`nvml`] asks the NVIDIA driver through
//! `libnvidia-ml` loaded at run time. No knowledge of Kubernetes objects or of scheduling.

pub mod catalog;
pub mod gpu_set;
pub mod mig;
pub mod nvml;
pub mod server;
pub mod sysfs;

pub use catalog::{Catalog, CatalogError, GpuModel, MigProfile};
pub use gpu_set::{GpuSetError, GpuTopology};
pub use mig::{LayoutError, Placement, plan_layout};
pub use server::{Fabric, Link, ServerModel};
