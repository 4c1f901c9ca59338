//! The kubelet's plugin protos as tonic generated them (see `proto/README.md`); nothing else.
#![allow(missing_docs, clippy::all, clippy::pedantic, unreachable_pub)]

/// Device plugin API v1beta1: `v1beta1.Registration` (kubelet) and `v1beta1.DevicePlugin`.
pub mod deviceplugin {
    tonic::include_proto!("v1beta1");
}

/// Plugin registration v1 (`pluginregistration.Registration`), served by DRA plugins.
pub mod pluginregistration {
    tonic::include_proto!("pluginregistration");
}

/// DRA kubelet plugin API v1 (kubelet 1.34+).
pub mod dra_v1 {
    tonic::include_proto!("k8s.io.kubelet.pkg.apis.dra.v1");
}

/// DRA kubelet plugin API v1beta1 (kubelet 1.32 and 1.33); the same messages as v1 on the
/// wire, less `share_id`.
pub mod dra_v1beta1 {
    tonic::include_proto!("k8s.io.kubelet.pkg.apis.dra.v1beta1");
}
