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

/// One revision as the table writes it: minimum minor version, function, overridden ids.
pub type Revision = (u32, CheckPodFn, &'static [&'static str]);

/// Upstream's `DefaultChecks()`: every check assigned to a policy version.
pub fn default_checks() -> Vec<Check> {
    use Level::{Baseline as B, Restricted as R};
    use baseline as b;
    use restricted as r;
    let table: [(&'static str, Level, &[Revision]); 19] = [
        ("appArmorProfile", B, &[(0, b::app_armor_profile_1_0, &[])]),
        (
            b::CAPABILITIES_BASELINE,
            B,
            &[(0, b::capabilities_baseline_1_0, &[])],
        ),
        ("hostNamespaces", B, &[(0, b::host_namespaces_1_0, &[])]),
        (
            b::HOST_PATH_VOLUMES,
            B,
            &[(0, b::host_path_volumes_1_0, &[])],
        ),
        ("hostPorts", B, &[(0, b::host_ports_1_0, &[])]),
        (
            "hostProbesAndHostLifecycle",
            B,
            &[(34, b::host_probes_and_host_lifecycle_1_34, &[])],
        ),
        ("privileged", B, &[(0, b::privileged_1_0, &[])]),
        (
            b::PROC_MOUNT,
            B,
            &[
                (0, b::proc_mount_1_0, &[]),
                (35, b::proc_mount_1_35_baseline, &[]),
            ],
        ),
        (
            "seLinuxOptions",
            B,
            &[
                (0, b::se_linux_options_1_0, &[]),
                (31, b::se_linux_options_1_31, &[]),
            ],
        ),
        (
            b::SECCOMP_BASELINE,
            B,
            &[
                (0, b::seccomp_profile_baseline_1_0, &[]),
                (19, b::seccomp_profile_baseline_1_19, &[]),
            ],
        ),
        (
            "sysctls",
            B,
            &[
                (0, b::sysctls_1_0, &[]),
                (27, b::sysctls_1_27, &[]),
                (29, b::sysctls_1_29, &[]),
                (32, b::sysctls_1_32, &[]),
                (37, b::sysctls_1_37, &[]),
            ],
        ),
        (
            "windowsHostProcess",
            B,
            &[(0, b::windows_host_process_1_0, &[])],
        ),
        (
            "allowPrivilegeEscalation",
            R,
            &[
                (8, r::allow_privilege_escalation_1_8, &[]),
                (25, r::allow_privilege_escalation_1_25, &[]),
            ],
        ),
        (
            "capabilities_restricted",
            R,
            &[
                (
                    22,
                    r::capabilities_restricted_1_22,
                    &[b::CAPABILITIES_BASELINE],
                ),
                (
                    25,
                    r::capabilities_restricted_1_25,
                    &[b::CAPABILITIES_BASELINE],
                ),
            ],
        ),
        (
            "procMount_restricted",
            R,
            &[(35, b::proc_mount_1_0, &[b::PROC_MOUNT])],
        ),
        (
            "restrictedVolumes",
            R,
            &[(0, r::restricted_volumes_1_0, &[b::HOST_PATH_VOLUMES])],
        ),
        (
            "runAsNonRoot",
            R,
            &[
                (0, r::run_as_non_root_1_0, &[]),
                (35, r::run_as_non_root_1_35, &[]),
            ],
        ),
        (
            "runAsUser",
            R,
            &[
                (23, r::run_as_user_1_23, &[]),
                (35, r::run_as_user_1_35, &[]),
            ],
        ),
        (
            "seccompProfile_restricted",
            R,
            &[
                (
                    19,
                    r::seccomp_profile_restricted_1_19,
                    &[b::SECCOMP_BASELINE],
                ),
                (
                    25,
                    r::seccomp_profile_restricted_1_25,
                    &[b::SECCOMP_BASELINE],
                ),
            ],
        ),
    ];
    table
        .into_iter()
        .map(|(id, level, revisions)| Check::new(id, level, revisions))
        .collect()
}

impl Check {
    /// A check from its table row: each revision's minimum minor version (of v1), function
    /// and overridden baseline ids.
    pub fn new(id: &'static str, level: Level, revisions: &[Revision]) -> Check {
        Check {
            id,
            level,
            versions: revisions
                .iter()
                .map(|&(minor, check_pod, override_check_ids)| VersionedCheck {
                    minimum_version: Version::new(1, minor),
                    check_pod,
                    override_check_ids,
                })
                .collect(),
        }
    }
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

/// The view of a container or an ephemeral container (same fields, different types).
macro_rules! view {
    ($c:expr) => {
        ContainerView {
            name: &$c.name,
            security_context: $c.security_context.as_ref(),
            ports: $c.ports.as_deref().unwrap_or_default(),
            probes: [
                $c.liveness_probe.as_ref(),
                $c.readiness_probe.as_ref(),
                $c.startup_probe.as_ref(),
            ],
            lifecycle: $c.lifecycle.as_ref(),
        }
    };
}

/// Upstream's `visitContainers`: init containers, containers, then ephemeral containers.
pub(crate) fn visit_containers<'a>(spec: &'a PodSpec, mut visit: impl FnMut(&ContainerView<'a>)) {
    for c in spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
    {
        visit(&view!(c));
    }
    for c in spec.ephemeral_containers.iter().flatten() {
        visit(&view!(c));
    }
}

/// The containers for which `bad` finds forbidden values, in visiting order, and those values
/// sorted and unique (upstream's `badContainers` and `sets.NewString().List()`).
pub(crate) fn containers_with<'a, T: Ord>(
    spec: &'a PodSpec,
    mut bad: impl FnMut(&ContainerView<'a>) -> Vec<T>,
) -> (Vec<&'a str>, std::collections::BTreeSet<T>) {
    let mut containers = Vec::new();
    let mut values = std::collections::BTreeSet::new();
    visit_containers(spec, |c| {
        let found = bad(c);
        if !found.is_empty() {
            containers.push(c.name);
            values.extend(found);
        }
    });
    (containers, values)
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

/// A revision that allows some pods outright (Windows pods, user-namespaced pods) and checks
/// the rest as an earlier revision does.
pub(crate) fn unless(
    exempt: bool,
    check: CheckPodFn,
    meta: &ObjectMeta,
    spec: &PodSpec,
) -> CheckResult {
    if exempt {
        CheckResult::allowed()
    } else {
        check(meta, spec)
    }
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
