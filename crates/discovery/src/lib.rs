//! Discovery of a real machine: the accelerators on its PCI bus with their NUMA nodes and PCIe
//! root complexes, read from sysfs under a given root ([`sysfs`]), and what the NVIDIA driver
//! reports about each GPU, its links and its XID health events, through `libnvidia-ml` loaded
//! at run time ([`nvml`]).
//!
//! A shell: it reads files and talks to the driver, and hands what it found to the pure
//! catalog of `tessera-devices` to name. Knows nothing of Kubernetes objects or of how the
//! findings are published.

pub mod nvml;
pub mod sysfs;
