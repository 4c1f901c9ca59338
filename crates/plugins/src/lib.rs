//! The kubelet-side plugin protocols, spoken over unix sockets with the kubelet's own protos
//! (compiled by protox at build time, see `proto/README.md`):
//!
//! - [`device_plugin`]: device plugin API v1beta1 for whole GPUs (ListAndWatch with health,
//!   GetPreferredAllocation over the GPU topology, Allocate with env and CDI names);
//! - [`dra_plugin`]: the DRA kubelet plugin (NodePrepareResources / NodeUnprepareResources
//!   for `resource.k8s.io/v1` claims, CDI specs, a checkpoint), deciding what to prepare with
//!   the pure `tessera_node::dra_claims`;
//! - [`lifecycle`]: registration (device plugin `Register` to `kubelet.sock`, DRA
//!   `pluginregistration` GetInfo / NotifyRegistrationStatus) and re-registration when the
//!   kubelet restarts;
//! - [`cdi`]: CDI spec files; [`socket`]: gRPC over unix sockets.
//!
//! Knows nothing of discovery or of node twins: callers hand it the devices.

pub mod cdi;
pub mod device_plugin;
pub mod dra_plugin;
pub mod lifecycle;
pub mod proto;
pub mod socket;
