//! Accelerators as Tessera knows them: the hardware catalog of GPU models with their MIG
//! profile tables ([`catalog`]), server models with their device topology ([`server`]), the
//! MIG layout planner that places partitions on a GPU ([`mig`]), the chooser of the
//! best-connected GPU set ([`gpu_set`]), what NVIDIA's XID error codes mean ([`xid`]), and
//! the vGPU types each GPU model offers ([`vgpu`]).
//!
//! Pure data and functions: no files, no driver, no clock. Discovering a real machine (sysfs,
//! NVML) is `tessera-discovery`'s business. No knowledge of Kubernetes objects or of
//! scheduling.

pub mod catalog;
pub mod gpu_set;
pub mod mig;
pub mod server;
pub mod vgpu;
pub mod xid;

pub use catalog::{Catalog, CatalogError, GpuModel, MigProfile};
pub use gpu_set::{GpuSetError, GpuTopology};
pub use mig::{LayoutError, Placement, plan_layout};
pub use server::{Fabric, Link, ServerModel};
pub use vgpu::{VgpuType, vgpu_type, vgpu_types};
