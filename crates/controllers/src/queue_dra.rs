//! The queue manager's DRA inputs: watches of ResourceClaimTemplates, DeviceClasses and
//! ResourceSlices (`resource.k8s.io/v1`), handed with the Configuration's
//! `deviceClassMappings` to [`tessera_queue::api::dra::DeviceRequests::prepare`] before each
//! admission pass. Decides nothing itself; the resolutions' status writes go out merged with
//! the pass's Workload writes (one write per Workload).

use std::time::SystemTime;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimTemplate, ResourceSlice};
use kube::runtime::reflector::Store;
use kube::{Api, Client};
use serde_json::Value;
use tessera_queue::api::dra::{ClaimingWorkloads, DeviceRequests, DraObjects, Prepared};
use tessera_queue::config::Configuration;

use crate::queue::values;
use crate::shell::watched;

/// The watched DRA objects.
pub struct DraWatches {
    templates: Store<ResourceClaimTemplate>,
    classes: Store<DeviceClass>,
    slices: Store<ResourceSlice>,
}

impl DraWatches {
    /// Starts the reflectors; their changes join `changes`.
    pub fn start(
        client: &Client,
        changes: &mut futures::stream::SelectAll<futures::stream::BoxStream<'static, ()>>,
    ) -> DraWatches {
        let (templates, template_changes) = watched(Api::all(client.clone()));
        let (classes, class_changes) = watched(Api::all(client.clone()));
        let (slices, slice_changes) = watched(Api::all(client.clone()));
        changes.extend([template_changes, class_changes, slice_changes]);
        DraWatches {
            templates,
            classes,
            slices,
        }
    }

    /// The pending ones among `workloads` resolved, with the statuses that follow laid over
    /// them (for the pass) and to write (before the pass's writes).
    pub fn prepare(
        &self,
        workloads: Vec<std::sync::Arc<Value>>,
        claiming: &mut ClaimingWorkloads,
        configuration: &Configuration,
        now: SystemTime,
    ) -> Prepared {
        let mappings = &configuration.device_class_mappings;
        let objects = DraObjects {
            resource_claim_templates: values(self.templates.state()),
            device_classes: values(self.classes.state()),
            resource_slices: values(self.slices.state()),
        };
        DeviceRequests::prepare_remembering(workloads, claiming, &objects, mappings, now)
    }
}
