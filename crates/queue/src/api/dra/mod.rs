//! Kueue's DRA integration for a pending Workload (the workload controller's `handleDRA` and
//! `pkg/dra`): the devices its pods' ResourceClaimTemplates request, counted per DeviceClass
//! as the quota resource `resources.deviceClassMappings` names (`ExactCount` requests; admin
//! access counts nothing), or — for a mapping with counter sources — in counter units: the
//! largest value of the counter among the devices of complete pools the request could get,
//! times its count. A Workload whose claims cannot be counted (a ResourceClaim by name, an
//! unmapped DeviceClass, `firstAvailable`, `allocationMode: All`, a missing template or class,
//! too few matching devices) is inadmissible with Kueue's conditions and message.
//!
//! Tessera's driver publishes a MIG placement's memory as one counter per memory slice it
//! covers (`memorySlice0` … `memorySlice7`, each 1); a counter source named by their stem
//! (`memorySlice`) charges, for a device without a counter of exactly that name, the sum of
//! the family, so a quota counts MIG memory in slices.
//!
//! The pass reads a pending Workload through [`DeviceRequests::workload_state`]: its PodSets'
//! requests with the claims' devices added, or left out of the queues while its claims make
//! it inadmissible (Kueue does not queue it either). Pure: objects in, values out; knows
//! nothing about watching or writing.

mod claims;
mod counters;

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Value, json};
use tessera_model::address::{AddressMap, address_of, sweep_unmet};
use tessera_model::conditions;

use crate::api::objects::{self, WorkloadState};
use crate::api::pass::StatusWrite;
use crate::api::status::{self, ADMITTED, QUOTA_RESERVED, REQUEUED};
use crate::config::DeviceClassMapping;
use crate::queue::MISCONFIGURED;
use crate::workload::{Requests, WorkloadInfo};
use claims::Cluster;

/// The `Requeued` False reason of a Workload its claims make inadmissible.
pub const INADMISSIBLE: &str = "Inadmissible";

/// The DRA objects claims are resolved against, as stored (JSON).
#[derive(Debug, Clone, Default)]
pub struct DraObjects {
    /// ResourceClaimTemplates.
    pub resource_claim_templates: Vec<Value>,
    /// DeviceClasses.
    pub device_classes: Vec<Value>,
    /// ResourceSlices.
    pub resource_slices: Vec<Value>,
}

/// What a pending Workload's claims come to.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// Per PodSet, what one pod's claims add to its requests.
    Requests(BTreeMap<String, Requests>),
    /// Not admissible: the `QuotaReserved` and `Requeued` messages.
    Inadmissible {
        /// `QuotaReserved` False (Misconfigured).
        message: String,
        /// `Requeued` False (Inadmissible).
        requeued: String,
    },
}

/// The resolution of every pending Workload with claims, by `namespace/name`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceRequests {
    by_workload: BTreeMap<String, Resolution>,
}

/// What the queue manager does with the DRA integration before a pass.
#[derive(Debug, Clone, Default)]
pub struct Prepared {
    /// The resolutions, for [`super::objects::Objects::devices`].
    pub devices: DeviceRequests,
    /// The Workloads with `writes` laid over them: what the pass reads, so that its own
    /// writes start from them.
    pub workloads: Vec<Arc<Value>>,
    /// The statuses to write, before the pass's.
    pub writes: Vec<StatusWrite>,
}

/// Lays a status merge patch (`{"conditions": …, "admission": null}`) over an object.
pub fn lay_over(object: &mut Value, status: &Value) {
    let Some(fields) = status.as_object() else {
        return;
    };
    if !object["status"].is_object() {
        object["status"] = json!({});
    }
    for (field, value) in fields {
        match (object["status"].as_object_mut(), value) {
            (Some(current), Value::Null) => {
                current.remove(field);
            }
            (Some(current), value) => {
                current.insert(field.clone(), value.clone());
            }
            (None, _) => {}
        }
    }
}

/// Which Workloads name DRA claims, remembered by the object's address between passes (the
/// watch cache hands out an unchanged Workload as the same [`Arc`]), so a pass reads the
/// PodSets only of Workloads new or changed since the last. Kept in place between passes:
/// an unchanged Workload costs one look-up by address.
#[derive(Debug, Default)]
pub struct ClaimingWorkloads {
    /// By address: the object (held, so that the address names it), whether it names
    /// claims, and the call that last met it.
    by_address: AddressMap<(Arc<Value>, bool, u64)>,
    /// Counts the calls: an object not met in the last one is forgotten.
    calls: u64,
}

impl ClaimingWorkloads {
    /// Those of `workloads` that name claims; forgets the objects not among them.
    fn claiming<'w>(&mut self, workloads: &'w [Arc<Value>]) -> Vec<&'w Value> {
        self.calls += 1;
        let call = self.calls;
        let mut claiming = Vec::new();
        let mut met = 0;
        for object in workloads {
            let address = address_of(object);
            let names = match self.by_address.get_mut(&address) {
                // The very object (held, so no other has its address).
                Some((_, names, at)) => {
                    if *at != call {
                        *at = call;
                        met += 1;
                    }
                    *names
                }
                None => {
                    let names = claims::names_claims(object);
                    self.by_address
                        .insert(address, (Arc::clone(object), names, call));
                    met += 1;
                    names
                }
            };
            if names {
                claiming.push(object.as_ref());
            }
        }
        sweep_unmet(&mut self.by_address, met, |(_, _, at)| *at == call);
        claiming
    }
}

impl DeviceRequests {
    /// Resolves the claims of every pending Workload in `workloads`.
    pub fn resolve<W: Borrow<Value>>(
        workloads: &[W],
        objects: &DraObjects,
        mappings: &[DeviceClassMapping],
    ) -> DeviceRequests {
        // Most Workloads name no claims; the cluster's DRA objects are read only for those
        // that do.
        let claiming: Vec<&Value> = workloads
            .iter()
            .map(Borrow::borrow)
            .filter(|w| claims::names_claims(w))
            .collect();
        DeviceRequests::resolve_claiming(claiming, objects, mappings)
    }

    /// Resolves the claims of `claiming`, the Workloads that name claims.
    fn resolve_claiming(
        claiming: Vec<&Value>,
        objects: &DraObjects,
        mappings: &[DeviceClassMapping],
    ) -> DeviceRequests {
        if claiming.is_empty() {
            return DeviceRequests::default();
        }
        let cluster = Cluster::read(objects, mappings);
        let by_workload = claiming
            .into_iter()
            .filter_map(|w| {
                let resolution = cluster.resolve(w)?;
                Some((objects::key(w), resolution))
            })
            .collect();
        DeviceRequests { by_workload }
    }

    /// Resolves the claims of every pending Workload in `workloads` and lays the statuses
    /// that follow over them (the workload controller's `handleDRA` before the scheduler
    /// sees them).
    pub fn prepare(
        workloads: Vec<Arc<Value>>,
        objects: &DraObjects,
        mappings: &[DeviceClassMapping],
        now: SystemTime,
    ) -> Prepared {
        let mut claiming = ClaimingWorkloads::default();
        DeviceRequests::prepare_remembering(workloads, &mut claiming, objects, mappings, now)
    }

    /// [`DeviceRequests::prepare`], with which Workloads name claims remembered between
    /// calls in `claiming`.
    pub fn prepare_remembering(
        workloads: Vec<Arc<Value>>,
        claiming: &mut ClaimingWorkloads,
        objects: &DraObjects,
        mappings: &[DeviceClassMapping],
        now: SystemTime,
    ) -> Prepared {
        let named = claiming.claiming(&workloads);
        let devices = DeviceRequests::resolve_claiming(named, objects, mappings);
        let writes = devices.status_writes(&workloads, now);
        if writes.is_empty() {
            return Prepared {
                devices,
                workloads,
                writes,
            };
        }
        let mut by_key: BTreeMap<(&str, &str), &Value> = BTreeMap::new();
        for write in &writes {
            by_key.insert((&write.namespace, &write.name), &write.status);
        }
        let workloads = workloads
            .into_iter()
            .map(|mut object| {
                let key = (objects::namespace(&object), objects::name(&object));
                if let Some(status) = by_key.get(&key).copied() {
                    lay_over(Arc::make_mut(&mut object), status);
                }
                object
            })
            .collect();
        Prepared {
            devices,
            workloads,
            writes,
        }
    }

    /// What a Workload's claims came to; `None` when it has none or is not pending.
    pub fn get(&self, workload_key: &str) -> Option<&Resolution> {
        self.by_workload.get(workload_key)
    }

    /// A Workload as the pass reads it ([`objects::workload_state`]): a pending one with its
    /// claims' devices in its PodSets' requests, or `None` — left out — while its claims make
    /// it inadmissible.
    pub fn workload_state(&self, object: &Value) -> Option<WorkloadState> {
        let state = objects::workload_state(object)?;
        let WorkloadState::Pending(mut queued) = state else {
            return Some(state);
        };
        match self.get(&objects::key(object)) {
            None => {}
            Some(Resolution::Inadmissible { .. }) => return None,
            Some(Resolution::Requests(devices)) => {
                let mut workload = queued.info.workload.clone();
                for pod_set in &mut workload.pod_sets {
                    for (resource, value) in devices.get(&pod_set.name).into_iter().flatten() {
                        let request = pod_set.requests.entry(resource.clone()).or_default();
                        *request = request.saturating_add(*value);
                    }
                }
                queued.info = WorkloadInfo::new(workload);
            }
        }
        Some(WorkloadState::Pending(queued))
    }

    /// The statuses Kueue's workload controller writes for these resolutions: an
    /// inadmissible Workload's `QuotaReserved` False (Misconfigured), `Admitted` False and
    /// `Requeued` False (Inadmissible) with the message; once its claims resolve, those
    /// conditions removed again. [`Self::prepare`] lays them over the Workloads.
    pub fn status_writes<W: Borrow<Value>>(
        &self,
        workloads: &[W],
        now: SystemTime,
    ) -> Vec<StatusWrite> {
        if self.by_workload.is_empty() {
            return Vec::new();
        }
        workloads
            .iter()
            .map(Borrow::borrow)
            .filter_map(|object| {
                let status = match self.get(&objects::key(object))? {
                    Resolution::Inadmissible { message, requeued } => {
                        inadmissible_status(object, message, requeued, now)?
                    }
                    Resolution::Requests(_) => cleared_status(object)?,
                };
                Some(StatusWrite {
                    namespace: objects::namespace(object).to_owned(),
                    name: objects::name(object).to_owned(),
                    status,
                })
            })
            .collect()
    }
}

/// Whether the Workload carries the `Requeued` False an inadmissible resolution writes.
fn held_by_claims(object: &Value) -> bool {
    conditions::find(object, REQUEUED)
        .is_some_and(|c| c["status"] == "False" && c["reason"] == INADMISSIBLE)
}

fn inadmissible_status(
    object: &Value,
    message: &str,
    requeued: &str,
    now: SystemTime,
) -> Option<Value> {
    let changes = [
        (QUOTA_RESERVED, "False", MISCONFIGURED, message),
        (
            ADMITTED,
            "False",
            "NoReservation",
            "The workload has no reservation",
        ),
        (REQUEUED, "False", INADMISSIBLE, requeued),
    ];
    let (list, changed) = status::set_all(object, &changes, now);
    let had_admission = object
        .pointer("/status/admission")
        .is_some_and(|a| !a.is_null());
    (changed || had_admission).then(|| json!({"admission": null, "conditions": list}))
}

/// `handleDRA` after a success: the `QuotaReserved` and `Requeued` False conditions removed
/// (only when the Workload was held by its claims: the scheduler's own pending conditions
/// stay).
fn cleared_status(object: &Value) -> Option<Value> {
    if !held_by_claims(object) {
        return None;
    }
    let list: Vec<Value> = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| {
            let false_of = |kind: &str| c["type"] == kind && c["status"] == "False";
            !false_of(QUOTA_RESERVED) && !false_of(REQUEUED)
        })
        .cloned()
        .collect();
    Some(json!({"conditions": list}))
}

#[cfg(test)]
mod tests;
