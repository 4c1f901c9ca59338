//! The device plugin v1beta1 service for whole GPUs, as NVIDIA's device plugin serves it:
//! the device list with health and NUMA topology (`ListAndWatch`, a full list on every
//! change), the best-connected preferred set (`GetPreferredAllocation`) and the container
//! edits for an allocation (`Allocate`: `NVIDIA_VISIBLE_DEVICES` and CDI device names).
//!
//! Knows nothing of sockets or registration ([`crate::lifecycle`] serves it) or of where the
//! devices came from (discovery or a node twin).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

use tessera_devices::GpuTopology;
use tokio::sync::watch;
use tokio_stream::{Stream, StreamExt, wrappers::WatchStream};
use tonic::{Request, Response, Status};

use crate::proto::deviceplugin::{
    self as api, AllocateRequest, AllocateResponse, ContainerAllocateResponse,
    ContainerPreferredAllocationResponse, DevicePluginOptions, Empty, ListAndWatchResponse,
    PreStartContainerRequest, PreStartContainerResponse, PreferredAllocationRequest,
    PreferredAllocationResponse, device_plugin_server::DevicePlugin,
};

/// The device plugin API version this plugin speaks (`pluginapi.Version`).
pub const API_VERSION: &str = "v1beta1";
/// `pluginapi.Healthy`.
pub const HEALTHY: &str = "Healthy";
/// `pluginapi.Unhealthy`.
pub const UNHEALTHY: &str = "Unhealthy";

/// One device the plugin offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginDevice {
    /// The ID the kubelet sees (a GPU UUID, or its index).
    pub id: String,
    /// The GPU's index in the topology.
    pub index: usize,
    /// Its NUMA node, when known.
    pub numa: Option<u8>,
    /// Whether it may be allocated.
    pub healthy: bool,
}

/// What the plugin offers and how its allocations reach a container.
#[derive(Debug, Clone)]
pub struct DevicePluginSpec {
    /// The extended resource (`nvidia.com/gpu`).
    pub resource_name: String,
    /// The environment variable listing the devices (`NVIDIA_VISIBLE_DEVICES`).
    pub visible_devices_env: String,
    /// The CDI kind of the devices (`nvidia.com/gpu`); names are `<kind>=<id>`.
    pub cdi_kind: String,
    /// How the GPUs connect, for preferred allocations.
    pub topology: GpuTopology,
}

/// A whole-GPU device plugin; clones share the device list.
#[derive(Debug, Clone)]
pub struct GpuDevicePlugin {
    spec: Arc<DevicePluginSpec>,
    devices: Arc<watch::Sender<Vec<PluginDevice>>>,
}

impl GpuDevicePlugin {
    /// A plugin offering `devices`.
    pub fn new(spec: DevicePluginSpec, devices: Vec<PluginDevice>) -> Self {
        GpuDevicePlugin {
            spec: Arc::new(spec),
            devices: Arc::new(watch::Sender::new(devices)),
        }
    }

    /// The resource name it serves.
    pub fn resource_name(&self) -> &str {
        &self.spec.resource_name
    }

    /// The devices as offered now.
    pub fn devices(&self) -> Vec<PluginDevice> {
        self.devices.borrow().clone()
    }

    /// Marks a device healthy or not; every `ListAndWatch` stream sends the new list.
    /// Returns false when no device has that ID.
    pub fn set_health(&self, id: &str, healthy: bool) -> bool {
        let mut found = false;
        self.devices.send_if_modified(|devices| {
            let Some(device) = devices.iter_mut().find(|d| d.id == id) else {
                return false;
            };
            found = true;
            let changed = device.healthy != healthy;
            device.healthy = healthy;
            changed
        });
        found
    }

    fn list(devices: &[PluginDevice]) -> ListAndWatchResponse {
        ListAndWatchResponse {
            devices: devices
                .iter()
                .map(|d| api::Device {
                    id: d.id.clone(),
                    health: if d.healthy { HEALTHY } else { UNHEALTHY }.to_string(),
                    topology: d.numa.map(|n| api::TopologyInfo {
                        nodes: vec![api::NumaNode { id: i64::from(n) }],
                    }),
                })
                .collect(),
        }
    }

    /// The topology indexes of `ids`, or the first unknown ID.
    fn indexes(&self, ids: &[String]) -> Result<Vec<usize>, Status> {
        let devices = self.devices.borrow();
        ids.iter()
            .map(|id| {
                devices
                    .iter()
                    .find(|d| &d.id == id)
                    .map(|d| d.index)
                    .ok_or_else(|| Status::invalid_argument(format!("unknown device ID {id:?}")))
            })
            .collect()
    }

    fn id_of(&self, index: usize) -> Option<String> {
        self.devices
            .borrow()
            .iter()
            .find(|d| d.index == index)
            .map(|d| d.id.clone())
    }
}

type DeviceStream = Pin<Box<dyn Stream<Item = Result<ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for GpuDevicePlugin {
    async fn get_device_plugin_options(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<DevicePluginOptions>, Status> {
        Ok(Response::new(options()))
    }

    type ListAndWatchStream = DeviceStream;

    async fn list_and_watch(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListAndWatchStream>, Status> {
        // WatchStream yields the current list first, then every change; it never ends
        // while the plugin lives, as the kubelet expects.
        let stream = WatchStream::new(self.devices.subscribe())
            .map(|devices| Ok(GpuDevicePlugin::list(&devices)));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_preferred_allocation(
        &self,
        request: Request<PreferredAllocationRequest>,
    ) -> Result<Response<PreferredAllocationResponse>, Status> {
        let mut container_responses = Vec::new();
        for container in request.into_inner().container_requests {
            let available = self.indexes(&container.available_device_i_ds)?;
            let must = self.indexes(&container.must_include_device_i_ds)?;
            let size = usize::try_from(container.allocation_size)
                .map_err(|_| Status::invalid_argument("allocation_size must not be negative"))?;
            let set = self
                .spec
                .topology
                .best_set(&available, &must, size)
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
            container_responses.push(ContainerPreferredAllocationResponse {
                device_i_ds: set.into_iter().filter_map(|i| self.id_of(i)).collect(),
            });
        }
        Ok(Response::new(PreferredAllocationResponse {
            container_responses,
        }))
    }

    async fn allocate(
        &self,
        request: Request<AllocateRequest>,
    ) -> Result<Response<AllocateResponse>, Status> {
        let mut container_responses = Vec::new();
        for container in request.into_inner().container_requests {
            let ids = container.devices_ids;
            self.indexes(&ids)?;
            let devices = self.devices.borrow().clone();
            if let Some(sick) = ids
                .iter()
                .find(|id| devices.iter().any(|d| &d.id == *id && !d.healthy))
            {
                return Err(Status::failed_precondition(format!(
                    "device {sick} is unhealthy"
                )));
            }
            container_responses.push(ContainerAllocateResponse {
                envs: HashMap::from([(self.spec.visible_devices_env.clone(), ids.join(","))]),
                cdi_devices: ids
                    .iter()
                    .map(|id| api::CdiDevice {
                        name: format!("{}={id}", self.spec.cdi_kind),
                    })
                    .collect(),
                ..Default::default()
            });
        }
        Ok(Response::new(AllocateResponse {
            container_responses,
        }))
    }

    async fn pre_start_container(
        &self,
        _: Request<PreStartContainerRequest>,
    ) -> Result<Response<PreStartContainerResponse>, Status> {
        Ok(Response::new(PreStartContainerResponse {}))
    }
}

/// The options this plugin registers with: preferred allocations, no PreStartContainer.
pub fn options() -> DevicePluginOptions {
    DevicePluginOptions {
        pre_start_required: false,
        get_preferred_allocation_available: true,
    }
}
