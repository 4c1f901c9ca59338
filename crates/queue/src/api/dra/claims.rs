//! Counting a PodSet's claims (`pkg/dra/claims.go`): the ResourceClaimTemplates its pods
//! name, their `exactly` requests per DeviceClass (`countDevicesPerClass`), CEL selectors
//! checked against the cluster's devices (`validateCELSelectorsAgainstDevices`), the mapped
//! quota resource for each class, and Kueue's field errors. Counter sources are charged by
//! `counters`; knows nothing about statuses.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceSelector, ExactDeviceRequest, ResourceClaimSpec, ResourceClaimTemplate,
    ResourceSlice,
};
use serde_json::{Value, json};
use tessera_dra::pools;
use tessera_dra::selector::{DeviceView, Selector, SelectorError};
use tessera_model::conditions;
use tessera_model::kueue::workload as wl_api;

use super::{DraObjects, Resolution};
use crate::api::objects;
use crate::api::status::QUOTA_RESERVED;
use crate::config::{CounterSource, DeviceClassMapping, FieldError, FieldErrorKind};
use crate::workload::{DEFAULT_POD_SET_NAME, Requests};

/// The DRA objects read, and the mappings.
pub(super) struct Cluster<'m> {
    templates: BTreeMap<(String, String), ResourceClaimSpec>,
    classes: BTreeMap<String, DeviceClass>,
    pub(super) slices: Vec<ResourceSlice>,
    /// DeviceClass → quota resource (the first mapping naming it).
    resources: BTreeMap<&'m str, &'m str>,
    /// DeviceClass → its counter sources, with their quota resource.
    pub(super) counters: BTreeMap<&'m str, Vec<(&'m str, &'m CounterSource)>>,
}

/// A field error at `path`.
pub(super) fn error(path: String, kind: FieldErrorKind) -> FieldError {
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

/// One `exactly` request counted.
pub(super) struct Counted<'s> {
    /// Its index in the claim's requests.
    pub(super) index: usize,
    /// The request.
    pub(super) request: &'s ExactDeviceRequest,
    /// How many devices (`count`, 1 when unset).
    pub(super) count: i64,
}

fn parse<T: serde::de::DeserializeOwned>(object: &Value) -> Option<T> {
    serde_json::from_value(object.clone()).ok()
}

/// Whether any PodSet's pod template lists `resourceClaims`: read without parsing the
/// spec, which most Workloads (those without claims) need not be.
pub(super) fn names_claims(workload: &Value) -> bool {
    objects::pod_template_specs(workload).any(|spec| {
        spec.get("resourceClaims")
            .and_then(Value::as_array)
            .is_some_and(|claims| !claims.is_empty())
    })
}

fn expressions(selectors: Option<&Vec<DeviceSelector>>) -> impl Iterator<Item = (usize, &str)> {
    selectors
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, s)| Some((i, s.cel.as_ref()?.expression.as_str())))
}

impl<'m> Cluster<'m> {
    pub(super) fn read(objects: &DraObjects, mappings: &'m [DeviceClassMapping]) -> Cluster<'m> {
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

    /// A pending Workload's resolution; `None` when it is not pending or has no claims
    /// (callers skip Workloads that name none: [`names_claims`]).
    pub(super) fn resolve(&self, object: &Value) -> Option<Resolution> {
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
    pub(super) fn class_selectors(
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
pub(super) fn compile(
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

pub(super) fn all_match(
    selectors: &[Selector],
    device: &DeviceView,
) -> Result<bool, SelectorError> {
    for selector in selectors {
        if !selector.matches("", device)? {
            return Ok(false);
        }
    }
    Ok(true)
}
