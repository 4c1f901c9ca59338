//! Publishing what a DRA driver offers: its DeviceClasses (created once, left alone when they
//! exist, as the driver's Helm chart installs them) and its ResourceSlices (server-side apply
//! as the driver's kubelet plugin, so a restart re-asserts the same slices). Shared by the
//! node twins and by `tessera agent serve` on a real node. A least-privilege agent
//! (`tessera agent manifests`) may not create DeviceClasses — its manifests install them —
//! so a refused create leaves the classes to whoever installs them.
//!
//! Knows nothing of what the slices contain.

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::Value;
use tessera_model::json::text;

/// The field manager slices are applied as (the NVIDIA DRA driver's kubelet plugin).
pub const DRIVER_MANAGER: &str = "gpu.nvidia.com-kubelet-plugin";

/// Creates the missing `classes` and applies `slices`.
pub async fn publish(
    client: &Client,
    classes: &[Value],
    slices: &[Value],
) -> Result<(), kube::Error> {
    let class_api: Api<DeviceClass> = Api::all(client.clone());
    for class_value in classes {
        let class: DeviceClass =
            serde_json::from_value(class_value.clone()).map_err(kube::Error::SerdeError)?;
        match class_api.create(&PostParams::default(), &class).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(kube::Error::Api(status)) if status.code == 403 => {
                tracing::info!(
                    class = text(class_value, "/metadata/name"),
                    "not permitted to create DeviceClasses; expecting them installed with the agent's manifests"
                );
            }
            Err(error) => return Err(error),
        }
    }
    let slice_api: Api<ResourceSlice> = Api::all(client.clone());
    let params = PatchParams::apply(DRIVER_MANAGER).force();
    for slice in slices {
        let name = text(slice, "/metadata/name");
        slice_api.patch(name, &params, &Patch::Apply(slice)).await?;
    }
    Ok(())
}
