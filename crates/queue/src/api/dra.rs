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

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceSelector, ExactDeviceRequest, ResourceClaimSpec, ResourceClaimTemplate,
    ResourceSlice,
};
use serde_json::{Value, json};
use tessera_dra::pools;
use tessera_dra::selector::{DeviceView, Selector, SelectorError};
use tessera_model::conditions;
use tessera_model::kueue::workload as wl_api;
use tessera_model::quantity::Quantity;

use crate::amount::resource_value;
use crate::api::objects::{self, WorkloadState};
use crate::api::pass::StatusWrite;
use crate::api::status::{self, ADMITTED, QUOTA_RESERVED, REQUEUED};
use crate::config::{CounterSource, DeviceClassMapping, FieldError, FieldErrorKind};
use crate::queue::MISCONFIGURED;
use crate::workload::{DEFAULT_POD_SET_NAME, Requests, WorkloadInfo};

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
    pub workloads: Vec<Value>,
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

impl DeviceRequests {
    /// Resolves the claims of every pending Workload in `workloads`.
    pub fn resolve(
        workloads: &[Value],
        objects: &DraObjects,
        mappings: &[DeviceClassMapping],
    ) -> DeviceRequests {
        let cluster = Cluster::read(objects, mappings);
        let by_workload = workloads
            .iter()
            .filter_map(|w| Some((objects::key(w), cluster.resolve(w)?)))
            .collect();
        DeviceRequests { by_workload }
    }

    /// Resolves the claims of every pending Workload in `workloads` and lays the statuses
    /// that follow over them (the workload controller's `handleDRA` before the scheduler
    /// sees them).
    pub fn prepare(
        workloads: Vec<Value>,
        objects: &DraObjects,
        mappings: &[DeviceClassMapping],
        now: SystemTime,
    ) -> Prepared {
        let devices = DeviceRequests::resolve(&workloads, objects, mappings);
        let writes = devices.status_writes(&workloads, now);
        let mut by_key: BTreeMap<(&str, &str), &Value> = BTreeMap::new();
        for write in &writes {
            by_key.insert((&write.namespace, &write.name), &write.status);
        }
        let workloads = workloads
            .into_iter()
            .map(|mut object| {
                let key = (objects::namespace(&object), objects::name(&object));
                if let Some(status) = by_key.get(&key).copied() {
                    lay_over(&mut object, status);
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
    pub fn status_writes(&self, workloads: &[Value], now: SystemTime) -> Vec<StatusWrite> {
        workloads
            .iter()
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

/// The DRA objects read, and the mappings.
struct Cluster<'m> {
    templates: BTreeMap<(String, String), ResourceClaimSpec>,
    classes: BTreeMap<String, DeviceClass>,
    slices: Vec<ResourceSlice>,
    /// DeviceClass → quota resource (the first mapping naming it).
    resources: BTreeMap<&'m str, &'m str>,
    /// DeviceClass → its counter sources, with their quota resource.
    counters: BTreeMap<&'m str, Vec<(&'m str, &'m CounterSource)>>,
}

/// A field error at `path`.
fn error(path: String, kind: FieldErrorKind) -> FieldError {
    FieldError {
        path,
        kind,
        line: None,
    }
}

/// `field.ErrorList.ToAggregate().Error()`.
fn aggregate(errors: &[FieldError]) -> String {
    match errors {
        [one] => one.to_string(),
        many => {
            let all: Vec<String> = many.iter().map(ToString::to_string).collect();
            format!("[{}]", all.join(", "))
        }
    }
}

/// Kueue's detail prefix for errors about a template: the same error, its detail prefixed.
fn about_template(template: &str, error: FieldError) -> FieldError {
    let kind = match error.kind {
        FieldErrorKind::Invalid(value, detail) => {
            FieldErrorKind::Invalid(value, format!("ResourceClaimTemplate {template}: {detail}"))
        }
        FieldErrorKind::Internal(detail) => {
            FieldErrorKind::Internal(format!("ResourceClaimTemplate {template}: {detail}"))
        }
        other => other,
    };
    FieldError { kind, ..error }
}

/// One `exactly` request counted: its DeviceClass and how many devices.
struct Counted<'s> {
    index: usize,
    request: &'s ExactDeviceRequest,
    count: i64,
}

fn parse<T: serde::de::DeserializeOwned>(object: &Value) -> Option<T> {
    serde_json::from_value(object.clone()).ok()
}

fn expressions(selectors: Option<&Vec<DeviceSelector>>) -> impl Iterator<Item = (usize, &str)> {
    selectors
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, s)| Some((i, s.cel.as_ref()?.expression.as_str())))
}

impl<'m> Cluster<'m> {
    fn read(objects: &DraObjects, mappings: &'m [DeviceClassMapping]) -> Cluster<'m> {
        let templates = objects
            .resource_claim_templates
            .iter()
            .filter_map(|o| {
                let template: ResourceClaimTemplate = parse(o)?;
                let key = (
                    objects::namespace(o).to_owned(),
                    objects::name(o).to_owned(),
                );
                Some((key, template.spec.spec))
            })
            .collect();
        let classes = objects
            .device_classes
            .iter()
            .filter_map(|o| Some((objects::name(o).to_owned(), parse(o)?)))
            .collect();
        let slices = objects.resource_slices.iter().filter_map(parse).collect();
        let mut resources = BTreeMap::new();
        let mut counters: BTreeMap<&str, Vec<_>> = BTreeMap::new();
        for mapping in mappings {
            for class in &mapping.device_class_names {
                resources
                    .entry(class.as_str())
                    .or_insert(mapping.name.as_str());
                for counter in &mapping.counters {
                    let entry = counters.entry(class.as_str()).or_default();
                    entry.push((mapping.name.as_str(), counter));
                }
            }
        }
        Cluster {
            templates,
            classes,
            slices,
            resources,
            counters,
        }
    }

    /// A pending Workload's resolution; `None` when it is not pending or has no claims.
    fn resolve(&self, object: &Value) -> Option<Resolution> {
        let pending = !conditions::is_true(object, QUOTA_RESERVED)
            && !conditions::is_true(object, "Finished")
            && object.pointer("/metadata/deletionTimestamp").is_none()
            && object.pointer("/spec/active") != Some(&json!(false));
        if !pending {
            return None;
        }
        let spec: wl_api::WorkloadSpec = parse(object.get("spec")?)?;
        let pod_sets = spec.pod_sets.unwrap_or_default();
        let claims = |ps: &wl_api::PodSet| {
            ps.template
                .spec
                .as_ref()
                .and_then(|s| s.resource_claims.clone())
                .unwrap_or_default()
        };
        let all: Vec<_> = pod_sets.iter().flat_map(claims).collect();
        if all.iter().any(|c| c.resource_claim_name.is_some()) {
            return Some(Resolution::Inadmissible {
                message: "KueueDRAIntegration feature does not support use of resource claims"
                    .into(),
                requeued: "DRA resource claims not supported".into(),
            });
        }
        if !all.iter().any(|c| c.resource_claim_template_name.is_some()) {
            return None;
        }
        let namespace = objects::namespace(object);
        let mut per_pod_set = BTreeMap::new();
        for (index, pod_set) in pod_sets.iter().enumerate() {
            let name = pod_set.name.as_deref().unwrap_or(DEFAULT_POD_SET_NAME);
            let requests = match self.pod_set(namespace, index, name, &claims(pod_set)) {
                Ok(requests) => requests,
                Err(errors) => {
                    let message = aggregate(&errors);
                    return Some(Resolution::Inadmissible {
                        requeued: message.clone(),
                        message,
                    });
                }
            };
            if !requests.is_empty() {
                per_pod_set.insert(name.to_owned(), requests);
            }
        }
        Some(Resolution::Requests(per_pod_set))
    }

    /// One pod's devices in a PodSet (`GetResourceRequestsForResourceClaimTemplates` and
    /// `GetCounterResourcesForWorkload` for it).
    fn pod_set(
        &self,
        namespace: &str,
        index: usize,
        pod_set: &str,
        claims: &[k8s_openapi::api::core::v1::PodResourceClaim],
    ) -> Result<Requests, Vec<FieldError>> {
        let mut requests = Requests::new();
        let mut add = |resource: &str, value: i64| {
            let request = requests.entry(resource.to_owned()).or_default();
            *request = request.saturating_add(value);
        };
        for (claim_index, claim) in claims.iter().enumerate() {
            let Some(template) = claim.resource_claim_template_name.as_deref() else {
                continue;
            };
            let path = format!("spec.podSets[{index}].template.spec.resourceClaims[{claim_index}]");
            let key = (namespace.to_owned(), template.to_owned());
            let Some(spec) = self.templates.get(&key) else {
                let message = format!(
                    "failed to get claim spec for ResourceClaimTemplate {template} in podset {pod_set}: resourceclaimtemplates.resource.k8s.io {template:?} not found"
                );
                return Err(vec![error(path, FieldErrorKind::Internal(message))]);
            };
            let prefixed = |errors: Vec<FieldError>| {
                errors
                    .into_iter()
                    .map(|e| about_template(template, e))
                    .collect::<Vec<_>>()
            };
            let counted = count_devices(spec, &path).map_err(prefixed)?;
            self.check_selectors_against_devices(&counted, &path)
                .map_err(prefixed)?;
            let mut per_class: BTreeMap<&str, i64> = BTreeMap::new();
            for request in &counted {
                let class = request.request.device_class_name.as_str();
                if class.is_empty() {
                    continue;
                }
                let total = per_class.entry(class).or_default();
                *total = total.saturating_add(request.count);
            }
            for (class, count) in per_class {
                let Some(resource) = self.resources.get(class) else {
                    let message = format!(
                        "DeviceClass {class} is not mapped in DRA configuration for podset {pod_set}"
                    );
                    let path = format!("{path}.resourceClaimTemplateName");
                    return Err(vec![error(path, FieldErrorKind::NotFound(json!(message)))]);
                };
                if !self.counters.contains_key(class) {
                    add(resource, count);
                }
            }
            for request in &counted {
                let class = request.request.device_class_name.as_str();
                for (resource, source) in self.counters.get(class).into_iter().flatten() {
                    let charge = self.counter_charge(request, source, &path)?;
                    add(resource, charge);
                }
            }
        }
        Ok(requests)
    }

    /// A DeviceClass's compiled selectors; a missing class or a selector that does not compile
    /// is an error at the request.
    fn class_selectors(
        &self,
        class: &str,
        request_path: &str,
    ) -> Result<Vec<Selector>, Vec<FieldError>> {
        if class.is_empty() {
            return Ok(Vec::new());
        }
        let Some(device_class) = self.classes.get(class) else {
            let message = format!(
                "failed to get DeviceClass {class}: deviceclasses.resource.k8s.io {class:?} not found"
            );
            let kind = FieldErrorKind::Internal(message);
            return Err(vec![error(request_path.to_owned(), kind)]);
        };
        let context = format!("DeviceClass {class} has invalid CEL selector");
        compile(device_class.spec.selectors.as_ref(), request_path, &context)
            .map_err(|errors| errors.into_iter().take(1).collect())
    }

    /// `validateCELSelectorsAgainstDevices`: requests with CEL selectors need as many devices
    /// in the cluster matching their class and selectors (a device counts for one request).
    fn check_selectors_against_devices(
        &self,
        counted: &[Counted<'_>],
        claim_path: &str,
    ) -> Result<(), Vec<FieldError>> {
        let with_cel: Vec<&Counted<'_>> = counted
            .iter()
            .filter(|c| expressions(c.request.selectors.as_ref()).next().is_some())
            .collect();
        if with_cel.is_empty() {
            return Ok(());
        }
        let all_drivers = with_cel.iter().any(|c| {
            !self
                .counters
                .contains_key(c.request.device_class_name.as_str())
        });
        let drivers: BTreeSet<&str> = with_cel
            .iter()
            .flat_map(|c| self.counters.get(c.request.device_class_name.as_str()))
            .flatten()
            .map(|(_, source)| source.driver.as_str())
            .collect();
        let devices: Vec<DeviceView> = self
            .slices
            .iter()
            .filter(|s| all_drivers || drivers.contains(s.spec.driver.as_str()))
            .flat_map(|s| {
                let driver = s.spec.driver.as_str();
                s.spec
                    .devices
                    .iter()
                    .flatten()
                    .map(move |d| pools::view(driver, d))
            })
            .collect();
        let mut taken = BTreeSet::new();
        let mut errors = Vec::new();
        for request in with_cel {
            let request_path = format!("{claim_path}.devices.requests[{}]", request.index);
            let selectors_path = format!("{request_path}.exactly.selectors");
            let class_name = request.request.device_class_name.as_str();
            let class = match self.class_selectors(class_name, &request_path) {
                Ok(class) => class,
                Err(class_errors) => {
                    errors.extend(class_errors);
                    continue;
                }
            };
            let own = match compile(
                request.request.selectors.as_ref(),
                &selectors_path,
                "CEL compilation failed",
            ) {
                Ok(own) => own,
                Err(compile_errors) => {
                    errors.extend(compile_errors);
                    continue;
                }
            };
            let mut matched = 0i64;
            let mut failure = None;
            for (index, device) in devices.iter().enumerate() {
                if matched >= request.count {
                    break;
                }
                if taken.contains(&index) {
                    continue;
                }
                match all_match(&class, device).and_then(|ok| Ok(ok && all_match(&own, device)?)) {
                    Ok(true) => {
                        taken.insert(index);
                        matched += 1;
                    }
                    Ok(false) => {}
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
            if let Some(e) = failure {
                let message = format!("CEL evaluation failed for DeviceClass {class_name}: {e}");
                let kind = FieldErrorKind::Invalid(json!("null"), message);
                errors.push(error(selectors_path, kind));
            } else if matched < request.count {
                let message = format!(
                    "insufficient matching devices for CEL selector in DeviceClass {class_name}: {matched} device(s) match in the cluster but {} requested",
                    request.count
                );
                errors.push(error(selectors_path, FieldErrorKind::Internal(message)));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// `processCounterCharge`: the devices of complete pools of the counter's driver that
    /// match its device selector, the request's class and its selectors; the charge is the
    /// largest value of the counter among them, times the request's count.
    fn counter_charge(
        &self,
        counted: &Counted<'_>,
        source: &CounterSource,
        claim_path: &str,
    ) -> Result<i64, Vec<FieldError>> {
        let request_path = format!("{claim_path}.devices.requests[{}]", counted.index);
        let request = counted.request;
        let class = self.class_selectors(&request.device_class_name, &request_path)?;
        let own = compile(
            request.selectors.as_ref(),
            &format!("{request_path}.exactly.selectors"),
            "CEL compilation failed",
        )?;
        let scope = Selector::compile(&source.device_selector).map_err(|e| {
            let message = format!("deviceSelector CEL compilation failed: {e}");
            let kind = FieldErrorKind::Invalid(json!(source.device_selector), message);
            vec![error(request_path.clone(), kind)]
        })?;
        let internal = |message: String| {
            vec![error(
                request_path.clone(),
                FieldErrorKind::Internal(message),
            )]
        };
        let mut largest: Option<i64> = None;
        let mut matched = 0i64;
        for (view, consumes) in complete_pool_devices(&self.slices, &source.driver) {
            let verdict = (|| -> Result<bool, SelectorError> {
                Ok(scope.matches("", &view)?
                    && all_match(&class, &view)?
                    && all_match(&own, &view)?)
            })();
            match verdict {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => return Err(internal(format!("CEL evaluation error for device: {e}"))),
            }
            matched += 1;
            if let Some(value) = counter_value(&consumes, &source.name)
                && largest.is_none_or(|l| value > l)
            {
                largest = Some(value);
            }
        }
        if matched < counted.count {
            return Err(internal(format!(
                "insufficient matching devices for counter driver: {matched} device(s) match but {} requested",
                counted.count
            )));
        }
        let Some(largest) = largest else {
            return Err(internal(format!(
                "matched devices have no consumesCounters entry for counter {:?}",
                source.name
            )));
        };
        Ok(largest.saturating_mul(counted.count.max(1)))
    }
}

/// `countDevicesPerClass`: the `exactly` requests with `ExactCount`, admin access skipped;
/// `firstAvailable`, a request with neither, and `All` are errors (Kueue does not count them).
fn count_devices<'s>(
    spec: &'s ResourceClaimSpec,
    claim_path: &str,
) -> Result<Vec<Counted<'s>>, Vec<FieldError>> {
    let mut counted = Vec::new();
    let requests = spec.devices.as_ref().and_then(|d| d.requests.as_ref());
    for (index, request) in requests.into_iter().flatten().enumerate() {
        let path = format!("{claim_path}.devices.requests[{index}]");
        let invalid = |path: String, value: Value, detail: &str| {
            Err(vec![error(
                path,
                FieldErrorKind::Invalid(value, detail.to_owned()),
            )])
        };
        if request.first_available.is_some() {
            return invalid(
                path,
                json!("null"),
                "FirstAvailable device selection is not supported",
            );
        }
        let Some(exactly) = &request.exactly else {
            return invalid(
                path,
                json!("null"),
                "Exactly must be set if FirstAvailable is nil",
            );
        };
        let selectors_path = format!("{path}.exactly.selectors");
        if let Err(errors) = compile(
            exactly.selectors.as_ref(),
            &selectors_path,
            "CEL compilation failed",
        ) {
            let detail: Vec<String> = errors.iter().map(ToString::to_string).collect();
            return invalid(selectors_path, json!("null"), &detail.join(", "));
        }
        if exactly.admin_access == Some(true) {
            continue;
        }
        let mode = exactly.allocation_mode.as_deref().unwrap_or("ExactCount");
        let mode_path = format!("{path}.exactly.allocationMode");
        match mode {
            "All" => {
                return invalid(
                    mode_path,
                    json!("All"),
                    "AllocationMode 'All' is not supported",
                );
            }
            "ExactCount" => counted.push(Counted {
                index,
                request: exactly,
                count: exactly.count.unwrap_or(1),
            }),
            other => {
                let detail = format!("unsupported allocation mode: {other}");
                return invalid(mode_path, json!(other), &detail);
            }
        }
    }
    Ok(counted)
}

/// Compiles the CEL selectors (`compileCELSelectors`): errors name each selector's
/// expression under `path`.
fn compile(
    selectors: Option<&Vec<DeviceSelector>>,
    path: &str,
    context: &str,
) -> Result<Vec<Selector>, Vec<FieldError>> {
    let mut compiled = Vec::new();
    let mut errors = Vec::new();
    for (index, expression) in expressions(selectors) {
        match Selector::compile(expression) {
            Ok(selector) => compiled.push(selector),
            Err(e) => {
                let path = format!("{path}[{index}].cel.expression");
                let kind = FieldErrorKind::Invalid(json!(expression), format!("{context}: {e}"));
                errors.push(error(path, kind));
            }
        }
    }
    if errors.is_empty() {
        Ok(compiled)
    } else {
        Err(errors)
    }
}

fn all_match(selectors: &[Selector], device: &DeviceView) -> Result<bool, SelectorError> {
    for selector in selectors {
        if !selector.matches("", device)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What a device consumes, per counter (the value in whole units, at least 0).
type Consumption = BTreeMap<String, i64>;

/// The devices of `driver`'s complete pools (`groupSlicesByPool`: the newest generation of
/// each pool, complete when all its slices are present), with what each consumes.
fn complete_pool_devices(slices: &[ResourceSlice], driver: &str) -> Vec<(DeviceView, Consumption)> {
    let mut pools: BTreeMap<&str, (i64, Vec<&ResourceSlice>)> = BTreeMap::new();
    for slice in slices.iter().filter(|s| s.spec.driver == driver) {
        let pool = &slice.spec.pool;
        let entry = pools
            .entry(pool.name.as_str())
            .or_insert((pool.generation, Vec::new()));
        if pool.generation > entry.0 {
            *entry = (pool.generation, Vec::new());
        }
        if pool.generation == entry.0 {
            entry.1.push(slice);
        }
    }
    pools
        .into_values()
        .filter(|(_, members)| {
            let expected = members
                .first()
                .map_or(0, |s| s.spec.pool.resource_slice_count);
            i64::try_from(members.len()).is_ok_and(|n| n == expected)
        })
        .flat_map(|(_, members)| members)
        .flat_map(|slice| slice.spec.devices.iter().flatten())
        .map(|device| {
            let mut consumes = Consumption::new();
            let entries = device.consumes_counters.iter().flatten();
            for (name, counter) in entries.flat_map(|c| &c.counters) {
                let Ok(value) = Quantity::try_from(&counter.value) else {
                    continue;
                };
                // Negative values are clamped to 0; Kueue reads the largest value of a
                // counter across the device's sets.
                let value = resource_value(name, &value).max(0);
                let known = consumes.entry(name.clone()).or_insert(value);
                *known = (*known).max(value);
            }
            (pools::view(driver, device), consumes)
        })
        .collect()
}

/// What a device consumes of counter `name`: that counter, or — Tessera — the sum of the
/// family `name0`, `name1`, … (a MIG placement's memory slices).
fn counter_value(consumes: &Consumption, name: &str) -> Option<i64> {
    if let Some(value) = consumes.get(name) {
        return Some(*value);
    }
    let family: Vec<i64> = consumes
        .iter()
        .filter(|(counter, _)| {
            counter
                .strip_prefix(name)
                .is_some_and(|index| !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(|(_, value)| *value)
        .collect();
    if family.is_empty() {
        return None;
    }
    Some(family.into_iter().fold(0i64, i64::saturating_add))
}

#[cfg(test)]
#[path = "dra_tests.rs"]
mod tests;
