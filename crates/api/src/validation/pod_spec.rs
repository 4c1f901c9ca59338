//! The rules of a pod spec that a structural schema cannot express, as upstream's
//! `ValidatePodSpec` (pkg/apis/core/validation) checks them: volumes and what containers
//! mount, ports, environment, resource claims, container names across regular, init and
//! ephemeral containers, sidecars (init containers with `restartPolicy: Always`), probes and
//! lifecycle hooks, with upstream's field paths, error types and messages.
//!
//! Sees one spec as JSON and knows nothing of the kind embedding it beyond
//! [`PodSpecOptions`]. Runs before defaulting, so a field defaulting fills (restart and pull
//! policies, protocols, a field reference's `apiVersion`) is taken at its default when
//! absent; a field the schema requires is reported by the schema walk when absent and here
//! only when present but empty.

mod claims;
mod env;
pub(crate) mod formats;
mod ports;
mod volumes;

pub use formats::dns_subdomain;

use std::collections::BTreeSet;
use tessera_model::json::Pointer as _;

use serde_json::{Value, json};

use crate::error::Cause;
use tessera_model::Quantity;

/// What the embedding kind adds to the rules.
#[derive(Debug, Clone, Copy, Default)]
pub struct PodSpecOptions<'a> {
    /// The spec is a pod's own, not a template's (upstream's `ResourceIsPod`): container
    /// images are also checked for surrounding whitespace.
    pub is_pod: bool,
    /// Claim volumes a controller adds to each pod it makes from the template (a
    /// StatefulSet's `volumeClaimTemplates`), which containers may mount.
    pub claim_template_volumes: &'a [&'a str],
}

/// Checks a pod spec found at `path` (`spec`, `spec.template.spec`, ...).
pub fn validate(spec: &Value, path: &str, options: &PodSpecOptions<'_>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let volumes = volumes::check_volumes(spec, path, options.claim_template_volumes, &mut causes);
    let claims = claims::check_pod_claims(spec, path, &mut causes);
    let context = Context { volumes, claims };
    check_containers(spec, path, &context, &mut causes);
    check_init_containers(spec, path, &context, &mut causes);
    check_ephemeral_containers(spec, path, &context, &mut causes);
    ports::check_host_network(spec, path, &mut causes);
    check_choice(
        spec,
        "restartPolicy",
        path,
        &["Always", "OnFailure", "Never"],
        &mut causes,
    );
    check_choice(
        spec,
        "dnsPolicy",
        path,
        &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        &mut causes,
    );
    if options.is_pod {
        for list in ["containers", "initContainers"] {
            for (index, container) in items(spec, list).iter().enumerate() {
                check_image_whitespace(container, &format!("{path}.{list}[{index}]"), &mut causes);
            }
        }
    }
    causes
}

/// What the containers of a spec may refer to.
struct Context<'v> {
    volumes: volumes::Known,
    claims: BTreeSet<&'v str>,
}

/// A string field, if present.
fn text<'v>(object: &'v Value, key: &str) -> Option<&'v str> {
    object.get(key).and_then(Value::as_str)
}

/// A list field, empty when absent.
fn items<'v>(object: &'v Value, key: &str) -> &'v [Value] {
    object
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A string field that may not be empty: `Required` at `at.key` when present and empty
/// (absent, the schema walk reported it). Returns the value, `""` when absent.
fn required_text<'v>(object: &'v Value, key: &str, at: &str, causes: &mut Vec<Cause>) -> &'v str {
    match text(object, key) {
        Some("") => {
            causes.push(Cause::required(format!("{at}.{key}")));
            ""
        }
        Some(value) => value,
        None => "",
    }
}

/// A field with a fixed set of values that defaulting fills when absent: `Required` when
/// empty, `NotSupported` when outside the set.
fn check_choice(object: &Value, key: &str, at: &str, supported: &[&str], causes: &mut Vec<Cause>) {
    match text(object, key) {
        None => {}
        Some("") => causes.push(Cause::required(format!("{at}.{key}"))),
        Some(value) if !supported.contains(&value) => causes.push(Cause::not_supported(
            format!("{at}.{key}"),
            &json!(value),
            supported,
        )),
        Some(_) => {}
    }
}

/// `validateContainerCommon`: what every regular, init and ephemeral container must satisfy.
fn check_container(container: &Value, at: &str, context: &Context<'_>, causes: &mut Vec<Cause>) {
    let name = required_text(container, "name", at, causes);
    if !name.is_empty() {
        causes.extend(
            formats::dns_label(name)
                .into_iter()
                .map(|problem| Cause::invalid(format!("{at}.name"), &json!(name), problem)),
        );
    }
    if text(container, "image").is_none_or(str::is_empty) {
        causes.push(Cause::required(format!("{at}.image")));
    }
    check_choice(
        container,
        "terminationMessagePolicy",
        at,
        &["File", "FallbackToLogsOnError"],
        causes,
    );
    ports::check_ports(container, at, causes);
    env::check_env(container, at, causes);
    env::check_env_from(container, at, causes);
    volumes::check_mounts(container, at, &context.volumes, causes);
    volumes::check_devices(container, at, &context.volumes, causes);
    check_choice(
        container,
        "imagePullPolicy",
        at,
        &["Always", "IfNotPresent", "Never"],
        causes,
    );
    check_limits_cover_requests(container, at, causes);
    claims::check_container_claims(container, at, &context.claims, causes);
}

/// `validateContainers`: at least one, names unique among them, hooks and probes valid, no
/// container restart policy, no host port taken twice.
fn check_containers(spec: &Value, path: &str, context: &Context<'_>, causes: &mut Vec<Cause>) {
    let list_path = format!("{path}.containers");
    let containers = items(spec, "containers");
    if containers.is_empty() {
        // Absent from a spec that is there, the schema walk reported it.
        if spec.get("containers").is_some() || !spec.is_object() {
            causes.push(Cause::required(&list_path));
        }
        return;
    }
    let mut names = BTreeSet::new();
    for (index, container) in containers.iter().enumerate() {
        let at = format!("{list_path}[{index}]");
        check_container(container, &at, context, causes);
        let name = text(container, "name").unwrap_or_default();
        if !names.insert(name) {
            causes.push(Cause::duplicate(format!("{at}.name"), &json!(name)));
        }
        check_hooks_and_probes(container, &at, causes);
        if container.get("restartPolicy").is_some() {
            causes.push(Cause::forbidden(
                format!("{at}.restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
    }
    ports::check_host_port_conflicts(containers, &list_path, causes);
}

const CONTAINER_HOOKS: [&str; 4] = [
    "lifecycle",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
];

/// `validateInitContainers`: names unique among all containers, `restartPolicy` only
/// `Always` (a sidecar), and hooks and probes only on sidecars.
fn check_init_containers(spec: &Value, path: &str, context: &Context<'_>, causes: &mut Vec<Cause>) {
    let list_path = format!("{path}.initContainers");
    let mut names: BTreeSet<&str> = items(spec, "containers")
        .iter()
        .map(|c| text(c, "name").unwrap_or_default())
        .collect();
    for (index, container) in items(spec, "initContainers").iter().enumerate() {
        let at = format!("{list_path}[{index}]");
        check_container(container, &at, context, causes);
        let restart_policy = text(container, "restartPolicy");
        if let Some(policy) = restart_policy
            && policy != "Always"
        {
            causes.push(Cause::not_supported(
                format!("{at}.restartPolicy"),
                &json!(policy),
                &["Always"],
            ));
        }
        let name = text(container, "name").unwrap_or_default();
        if names.contains(name) {
            causes.push(Cause::duplicate(format!("{at}.name"), &json!(name)));
        } else if !name.is_empty() {
            names.insert(name);
        }
        ports::check_host_port_conflicts(std::slice::from_ref(container), &list_path, causes);
        if restart_policy == Some("Always") {
            check_hooks_and_probes(container, &at, causes);
        } else {
            for hook in CONTAINER_HOOKS {
                if container.get(hook).is_some() {
                    causes.push(Cause::forbidden(
                        format!("{at}.{hook}"),
                        "may not be set for init containers without restartPolicy=Always",
                    ));
                }
            }
        }
    }
}

/// Fields an ephemeral container may not set, in upstream's struct order.
const EPHEMERAL_FORBIDDEN: [&str; 8] = [
    "ports",
    "resources",
    "resizePolicy",
    "restartPolicy",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
];

/// `validateEphemeralContainers`: names unique among all containers, a target that is a
/// regular or init container, none of the fields that run a workload, no sub-path mounts.
fn check_ephemeral_containers(
    spec: &Value,
    path: &str,
    context: &Context<'_>,
    causes: &mut Vec<Cause>,
) {
    let ephemeral = items(spec, "ephemeralContainers");
    if ephemeral.is_empty() {
        return;
    }
    let others: BTreeSet<&str> = ["containers", "initContainers"]
        .iter()
        .flat_map(|list| items(spec, list))
        .map(|c| text(c, "name").unwrap_or_default())
        .collect();
    let mut names = others.clone();
    for (index, container) in ephemeral.iter().enumerate() {
        let at = format!("{path}.ephemeralContainers[{index}]");
        check_container(container, &at, context, causes);
        check_image_whitespace(container, &at, causes);
        let name = text(container, "name").unwrap_or_default();
        if !names.insert(name) {
            causes.push(Cause::duplicate(format!("{at}.name"), &json!(name)));
        }
        if let Some(target) = text(container, "targetContainerName")
            && !target.is_empty()
            && !others.contains(target)
        {
            causes.push(Cause::not_found(
                format!("{at}.targetContainerName"),
                &json!(target),
                None,
            ));
        }
        for field in EPHEMERAL_FORBIDDEN {
            let set = container
                .get(field)
                .is_some_and(|v| !v.as_object().is_some_and(|o| o.is_empty()));
            if set {
                causes.push(Cause::forbidden(
                    format!("{at}.{field}"),
                    "cannot be set for an Ephemeral Container",
                ));
            }
        }
        for (mount_index, mount) in items(container, "volumeMounts").iter().enumerate() {
            for key in ["subPath", "subPathExpr"] {
                if text(mount, key).is_some_and(|v| !v.is_empty()) {
                    causes.push(Cause::forbidden(
                        format!("{at}.volumeMounts[{mount_index}].{key}"),
                        "cannot be set for an Ephemeral Container",
                    ));
                }
            }
        }
    }
}

/// `validateContainerOnlyForPod`.
fn check_image_whitespace(container: &Value, at: &str, causes: &mut Vec<Cause>) {
    if let Some(image) = text(container, "image")
        && image.trim() != image
    {
        causes.push(Cause::invalid(
            format!("{at}.image"),
            &json!(image),
            "must not have leading or trailing whitespace",
        ));
    }
}

/// Lifecycle hooks and probes of a regular container or sidecar: one handler each, and the
/// thresholds each kind of probe fixes.
fn check_hooks_and_probes(container: &Value, at: &str, causes: &mut Vec<Cause>) {
    if let Some(lifecycle) = container.get("lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(handler) = lifecycle.get(hook) {
                check_handler(handler, &format!("{at}.lifecycle.{hook}"), true, causes);
            }
        }
    }
    for probe_name in ["livenessProbe", "readinessProbe", "startupProbe"] {
        let Some(probe) = container.get(probe_name) else {
            continue;
        };
        let probe_at = format!("{at}.{probe_name}");
        check_handler(probe, &probe_at, false, causes);
        for field in [
            "initialDelaySeconds",
            "timeoutSeconds",
            "periodSeconds",
            "successThreshold",
            "failureThreshold",
        ] {
            if let Some(value) = probe.get(field).and_then(Value::as_i64)
                && value < 0
            {
                causes.push(Cause::invalid(
                    format!("{probe_at}.{field}"),
                    &json!(value),
                    "must be greater than or equal to 0",
                ));
            }
        }
        if let Some(grace) = probe.get("terminationGracePeriodSeconds") {
            if probe_name == "readinessProbe" {
                causes.push(Cause::invalid(
                    format!("{probe_at}.terminationGracePeriodSeconds"),
                    grace,
                    "must not be set for readinessProbes",
                ));
            } else if grace.as_i64().is_some_and(|g| g <= 0) {
                causes.push(Cause::invalid(
                    format!("{probe_at}.terminationGracePeriodSeconds"),
                    grace,
                    "must be greater than 0",
                ));
            }
        }
        if probe_name != "readinessProbe"
            && let Some(threshold) = probe.get("successThreshold").and_then(Value::as_i64)
            && threshold != 1
        {
            causes.push(Cause::invalid(
                format!("{probe_at}.successThreshold"),
                &json!(threshold),
                "must be 1",
            ));
        }
    }
}

/// `validateHandler`: exactly one action (`sleep` only in lifecycle hooks).
fn check_handler(handler: &Value, at: &str, lifecycle: bool, causes: &mut Vec<Cause>) {
    let actions: &[&str] = if lifecycle {
        &["exec", "httpGet", "tcpSocket", "sleep"]
    } else {
        &["exec", "httpGet", "tcpSocket", "grpc"]
    };
    let mut found = false;
    for action in actions {
        if handler.get(*action).is_none() {
            continue;
        }
        if found {
            causes.push(Cause::forbidden(
                format!("{at}.{action}"),
                "may not specify more than 1 handler type",
            ));
        }
        found = true;
    }
    if !found {
        causes.push(Cause::required_because(at, "must specify a handler type"));
    }
}

/// Each request at most its limit.
fn check_limits_cover_requests(container: &Value, at: &str, causes: &mut Vec<Cause>) {
    let (Some(requests), Some(limits)) = (
        container
            .at("/resources/requests")
            .and_then(Value::as_object),
        container.at("/resources/limits").and_then(Value::as_object),
    ) else {
        return;
    };
    let quantity = |value: &Value| value.as_str()?.parse::<Quantity>().ok();
    for (name, request) in requests {
        let (Some(request_q), Some(limit_q)) =
            (quantity(request), limits.get(name).and_then(quantity))
        else {
            continue;
        };
        if request_q > limit_q {
            causes.push(Cause::invalid(
                format!("{at}.resources.requests"),
                request,
                format!("must be less than or equal to {name} limit of {limit_q}"),
            ));
        }
    }
}

#[cfg(test)]
#[path = "pod_spec_tests.rs"]
mod tests;
