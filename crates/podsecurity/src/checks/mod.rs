//! The checks of upstream's `policy/check_*.go`: each a level (baseline or restricted), an id,
//! and its versions — from a minimum policy version on, a function of the pod's metadata and
//! spec that allows it or names a forbidden reason and detail, with upstream's exact words.
//! A restricted check may override baseline checks it supersedes.
//!
//! Knows nothing of namespaces, modes or requests: the evaluator picks the checks of a level
//! and version and the admission decision aggregates their results.

use k8s_openapi::api::core::v1::{
    ContainerPort, Lifecycle, PodSecurityContext, PodSpec, Probe, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::{Level, Version};

mod baseline;
mod restricted;

/// What one check decided.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckResult {
    /// Whether the pod is allowed.
    pub allowed: bool,
    /// Why not, succinctly (`host namespaces`).
    pub forbidden_reason: String,
    /// The values that were refused (`hostNetwork=true, hostPID=true`), may be empty.
    pub forbidden_detail: String,
}

impl CheckResult {
    /// The pod passes.
    pub fn allowed() -> CheckResult {
        CheckResult {
            allowed: true,
            ..CheckResult::default()
        }
    }

    /// The pod fails, with a reason and detail.
    pub fn forbidden(reason: impl Into<String>, detail: impl Into<String>) -> CheckResult {
        CheckResult {
            allowed: false,
            forbidden_reason: reason.into(),
            forbidden_detail: detail.into(),
        }
    }
}

/// A check's function.
pub type CheckPodFn = fn(&ObjectMeta, &PodSpec) -> CheckResult;

/// One revision of a check.
#[derive(Clone, Copy)]
pub struct VersionedCheck {
    /// The first policy version this revision applies to.
    pub minimum_version: Version,
    /// Decides.
    pub check_pod: CheckPodFn,
    /// Baseline checks this (restricted) revision replaces.
    pub override_check_ids: &'static [&'static str],
}

/// A check and its revisions, in strictly increasing minimum versions.
#[derive(Clone)]
pub struct Check {
    /// Upstream's check id.
    pub id: &'static str,
    /// Baseline (also part of restricted) or restricted.
    pub level: Level,
    /// Revisions.
    pub versions: Vec<VersionedCheck>,
}

const fn v(minor: u32) -> Version {
    Version::new(1, minor)
}

fn revision(minor: u32, check_pod: CheckPodFn) -> VersionedCheck {
    VersionedCheck {
        minimum_version: v(minor),
        check_pod,
        override_check_ids: &[],
    }
}

fn overriding(
    minor: u32,
    check_pod: CheckPodFn,
    override_check_ids: &'static [&'static str],
) -> VersionedCheck {
    VersionedCheck {
        minimum_version: v(minor),
        check_pod,
        override_check_ids,
    }
}

/// Upstream's `DefaultChecks()`: every check assigned to a policy version.
pub fn default_checks() -> Vec<Check> {
    use baseline as b;
    use restricted as r;
    let check = |id, level, versions| Check {
        id,
        level,
        versions,
    };
    vec![
        check(
            "appArmorProfile",
            Level::Baseline,
            vec![revision(0, b::app_armor_profile_1_0)],
        ),
        check(
            b::CAPABILITIES_BASELINE,
            Level::Baseline,
            vec![revision(0, b::capabilities_baseline_1_0)],
        ),
        check(
            "hostNamespaces",
            Level::Baseline,
            vec![revision(0, b::host_namespaces_1_0)],
        ),
        check(
            b::HOST_PATH_VOLUMES,
            Level::Baseline,
            vec![revision(0, b::host_path_volumes_1_0)],
        ),
        check(
            "hostPorts",
            Level::Baseline,
            vec![revision(0, b::host_ports_1_0)],
        ),
        check(
            "hostProbesAndHostLifecycle",
            Level::Baseline,
            vec![revision(34, b::host_probes_and_host_lifecycle_1_34)],
        ),
        check(
            "privileged",
            Level::Baseline,
            vec![revision(0, b::privileged_1_0)],
        ),
        check(
            b::PROC_MOUNT,
            Level::Baseline,
            vec![
                revision(0, b::proc_mount_1_0),
                revision(35, b::proc_mount_1_35_baseline),
            ],
        ),
        check(
            "seLinuxOptions",
            Level::Baseline,
            vec![
                revision(0, b::se_linux_options_1_0),
                revision(31, b::se_linux_options_1_31),
            ],
        ),
        check(
            b::SECCOMP_BASELINE,
            Level::Baseline,
            vec![
                revision(0, b::seccomp_profile_baseline_1_0),
                revision(19, b::seccomp_profile_baseline_1_19),
            ],
        ),
        check(
            "sysctls",
            Level::Baseline,
            vec![
                revision(0, b::sysctls_1_0),
                revision(27, b::sysctls_1_27),
                revision(29, b::sysctls_1_29),
                revision(32, b::sysctls_1_32),
                revision(37, b::sysctls_1_37),
            ],
        ),
        check(
            "windowsHostProcess",
            Level::Baseline,
            vec![revision(0, b::windows_host_process_1_0)],
        ),
        check(
            "allowPrivilegeEscalation",
            Level::Restricted,
            vec![
                revision(8, r::allow_privilege_escalation_1_8),
                revision(25, r::allow_privilege_escalation_1_25),
            ],
        ),
        check(
            "capabilities_restricted",
            Level::Restricted,
            vec![
                overriding(
                    22,
                    r::capabilities_restricted_1_22,
                    &[b::CAPABILITIES_BASELINE],
                ),
                overriding(
                    25,
                    r::capabilities_restricted_1_25,
                    &[b::CAPABILITIES_BASELINE],
                ),
            ],
        ),
        check(
            "procMount_restricted",
            Level::Restricted,
            vec![overriding(35, b::proc_mount_1_0, &[b::PROC_MOUNT])],
        ),
        check(
            "restrictedVolumes",
            Level::Restricted,
            vec![overriding(
                0,
                r::restricted_volumes_1_0,
                &[b::HOST_PATH_VOLUMES],
            )],
        ),
        check(
            "runAsNonRoot",
            Level::Restricted,
            vec![
                revision(0, r::run_as_non_root_1_0),
                revision(35, r::run_as_non_root_1_35),
            ],
        ),
        check(
            "runAsUser",
            Level::Restricted,
            vec![
                revision(23, r::run_as_user_1_23),
                revision(35, r::run_as_user_1_35),
            ],
        ),
        check(
            "seccompProfile_restricted",
            Level::Restricted,
            vec![
                overriding(
                    19,
                    r::seccomp_profile_restricted_1_19,
                    &[b::SECCOMP_BASELINE],
                ),
                overriding(
                    25,
                    r::seccomp_profile_restricted_1_25,
                    &[b::SECCOMP_BASELINE],
                ),
            ],
        ),
    ]
}

/// A container of any kind, as the checks read it (upstream casts ephemeral containers to
/// containers).
pub(crate) struct ContainerView<'a> {
    pub name: &'a str,
    pub security_context: Option<&'a SecurityContext>,
    pub ports: &'a [ContainerPort],
    pub probes: [Option<&'a Probe>; 3],
    pub lifecycle: Option<&'a Lifecycle>,
}

/// Upstream's `visitContainers`: init containers, containers, then ephemeral containers.
pub(crate) fn visit_containers<'a>(spec: &'a PodSpec, mut visit: impl FnMut(&ContainerView<'a>)) {
    let regular = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers);
    for c in regular {
        visit(&ContainerView {
            name: &c.name,
            security_context: c.security_context.as_ref(),
            ports: c.ports.as_deref().unwrap_or_default(),
            probes: [
                c.liveness_probe.as_ref(),
                c.readiness_probe.as_ref(),
                c.startup_probe.as_ref(),
            ],
            lifecycle: c.lifecycle.as_ref(),
        });
    }
    for c in spec.ephemeral_containers.iter().flatten() {
        visit(&ContainerView {
            name: &c.name,
            security_context: c.security_context.as_ref(),
            ports: c.ports.as_deref().unwrap_or_default(),
            probes: [
                c.liveness_probe.as_ref(),
                c.readiness_probe.as_ref(),
                c.startup_probe.as_ref(),
            ],
            lifecycle: c.lifecycle.as_ref(),
        });
    }
}

/// Upstream's `joinQuote`: `"a", "b"`.
pub(crate) fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let inner: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("\"{}\"", inner.join("\", \""))
}

/// Upstream's `pluralize`.
pub(crate) fn pluralize<'a>(singular: &'a str, plural: &'a str, count: usize) -> &'a str {
    if count == 1 { singular } else { plural }
}

/// `container "a"` / `containers "a", "b"`.
pub(crate) fn containers_phrase(names: &[&str]) -> String {
    format!(
        "{} {}",
        pluralize("container", "containers", names.len()),
        join_quote(names)
    )
}

/// `container "a" and annotations`: the setters of a forbidden value joined with " and ".
pub(crate) fn setters(pod: bool, containers: &[&str]) -> Vec<String> {
    let mut setters = Vec::new();
    if pod {
        setters.push("pod".to_string());
    }
    if !containers.is_empty() {
        setters.push(containers_phrase(containers));
    }
    setters
}

/// Go's `%q` of a string: JSON's quoting agrees for the printable text labels hold.
pub(crate) fn go_quote(value: &str) -> String {
    serde_json::Value::String(value.to_string()).to_string()
}

/// Upstream's `relaxPolicyForUserNamespacePod`: `hostUsers: false`.
pub(crate) fn in_user_namespace(spec: &PodSpec) -> bool {
    spec.host_users == Some(false)
}

/// Whether the pod declares itself a Windows pod (`spec.os.name: windows`).
pub(crate) fn is_windows(spec: &PodSpec) -> bool {
    spec.os.as_ref().is_some_and(|os| os.name == "windows")
}

/// The pod-level security context.
pub(crate) fn pod_context(spec: &PodSpec) -> Option<&PodSecurityContext> {
    spec.security_context.as_ref()
}

#[cfg(test)]
mod tests;
