//! The baseline checks (upstream's `check_appArmorProfile.go`, `check_capabilities_baseline.go`,
//! `check_hostNamespaces.go`, `check_hostPathVolumes.go`, `check_hostPorts.go`,
//! `check_hostProbesAndhostLifecycle.go`, `check_privileged.go`, `check_procMount_baseline.go`,
//! `check_seLinuxOptions.go`, `check_seccompProfile_baseline.go`, `check_sysctls.go`,
//! `check_windowsHostProcess.go`), each revision a function with upstream's messages.
//!
//! Knows nothing of which version selects which revision (`super::default_checks`).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    HTTPGetAction, LifecycleHandler, PodSpec, Probe, SELinuxOptions, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{
    CheckResult, containers_phrase, containers_with, go_quote, in_user_namespace, join_quote,
    pluralize, pod_context, setters, unless, visit_containers,
};

pub(super) const CAPABILITIES_BASELINE: &str = "capabilities_baseline";
pub(super) const HOST_PATH_VOLUMES: &str = "hostPathVolumes";
pub(super) const PROC_MOUNT: &str = "procMount";
pub(super) const SECCOMP_BASELINE: &str = "seccompProfile_baseline";

fn app_armor_type_allowed(profile_type: &str) -> bool {
    matches!(profile_type, "RuntimeDefault" | "Localhost")
}

fn app_armor_annotation_allowed(profile: &str) -> bool {
    profile.is_empty() || profile == "runtime/default" || profile.starts_with("localhost/")
}

pub(super) fn app_armor_profile_1_0(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let mut bad_values = BTreeSet::new();
    let mut pod_bad = false;
    if let Some(profile) = pod_context(spec).and_then(|c| c.app_armor_profile.as_ref())
        && !app_armor_type_allowed(&profile.type_)
    {
        pod_bad = true;
        bad_values.insert(profile.type_.clone());
    }
    let mut bad_containers = Vec::new();
    visit_containers(spec, |c| {
        if let Some(profile) = c
            .security_context
            .and_then(|s| s.app_armor_profile.as_ref())
            && !app_armor_type_allowed(&profile.type_)
        {
            bad_containers.push(c.name);
            bad_values.insert(profile.type_.clone());
        }
    });
    let mut bad_setters = setters(pod_bad, &bad_containers);
    let mut forbidden_annotations: Vec<String> = meta
        .annotations
        .iter()
        .flatten()
        .filter(|(key, value)| {
            key.starts_with("container.apparmor.security.beta.kubernetes.io/")
                && !app_armor_annotation_allowed(value)
        })
        .map(|(key, value)| format!("{key}={}", go_quote(value)))
        .collect();
    let mut bad_value_list: Vec<String> = bad_values.into_iter().collect();
    if !forbidden_annotations.is_empty() {
        forbidden_annotations.sort();
        bad_setters
            .push(pluralize("annotation", "annotations", forbidden_annotations.len()).to_string());
        bad_value_list.extend(forbidden_annotations);
    }
    if bad_setters.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        pluralize(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            bad_value_list.len(),
        ),
        format!(
            "{} must not set AppArmor profile type to {}",
            bad_setters.join(" and "),
            join_quote(&bad_value_list)
        ),
    )
}

const CAPABILITIES_ALLOWED_1_0: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

pub(super) fn capabilities_baseline_1_0(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let (bad_containers, non_default) = containers_with(spec, |c| {
        c.security_context
            .and_then(|s| s.capabilities.as_ref())
            .and_then(|caps| caps.add.as_ref())
            .into_iter()
            .flatten()
            .map(String::as_str)
            .filter(|cap| !CAPABILITIES_ALLOWED_1_0.contains(cap))
            .collect()
    });
    if bad_containers.is_empty() {
        return CheckResult::allowed();
    }
    let non_default: Vec<&str> = non_default.into_iter().collect();
    CheckResult::forbidden(
        "non-default capabilities",
        format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&bad_containers),
            join_quote(&non_default)
        ),
    )
}

pub(super) fn host_namespaces_1_0(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let mut host = Vec::new();
    if spec.host_network == Some(true) {
        host.push("hostNetwork=true");
    }
    if spec.host_pid == Some(true) {
        host.push("hostPID=true");
    }
    if spec.host_ipc == Some(true) {
        host.push("hostIPC=true");
    }
    if host.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden("host namespaces", host.join(", "))
}

pub(super) fn host_path_volumes_1_0(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let host_volumes: Vec<&str> = spec
        .volumes
        .iter()
        .flatten()
        .filter(|volume| volume.host_path.is_some())
        .map(|volume| volume.name.as_str())
        .collect();
    if host_volumes.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "hostPath volumes",
        format!(
            "{} {}",
            pluralize("volume", "volumes", host_volumes.len()),
            join_quote(&host_volumes)
        ),
    )
}

pub(super) fn host_ports_1_0(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let (bad_containers, ports) = containers_with(spec, |c| {
        c.ports
            .iter()
            .filter_map(|port| port.host_port.filter(|p| *p != 0))
            .map(|p| p.to_string())
            .collect()
    });
    if bad_containers.is_empty() {
        return CheckResult::allowed();
    }
    let ports: Vec<String> = ports.into_iter().collect();
    CheckResult::forbidden(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_phrase(&bad_containers),
            pluralize("uses", "use", bad_containers.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    )
}

/// The non-empty hosts of an HTTP GET and a TCP socket action (a probe's or a handler's).
fn hosts<'a>(http: Option<&'a HTTPGetAction>, tcp: Option<&'a TCPSocketAction>) -> Vec<&'a str> {
    let http = http.and_then(|h| h.host.as_deref());
    let tcp = tcp.and_then(|t| t.host.as_deref());
    [http, tcp]
        .into_iter()
        .flatten()
        .filter(|h| !h.is_empty())
        .collect()
}

fn probe_hosts(probe: Option<&Probe>) -> Vec<&str> {
    probe.map_or_else(Vec::new, |p| {
        hosts(p.http_get.as_ref(), p.tcp_socket.as_ref())
    })
}

fn handler_hosts(handler: Option<&LifecycleHandler>) -> Vec<&str> {
    handler.map_or_else(Vec::new, |h| {
        hosts(h.http_get.as_ref(), h.tcp_socket.as_ref())
    })
}

pub(super) fn host_probes_and_host_lifecycle_1_34(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let mut bad_containers = BTreeSet::new();
    let mut forbidden = BTreeSet::new();
    visit_containers(spec, |c| {
        let mut hosts: Vec<&str> = c.probes.iter().flat_map(|p| probe_hosts(*p)).collect();
        if let Some(lifecycle) = c.lifecycle {
            hosts.extend(handler_hosts(lifecycle.post_start.as_ref()));
            hosts.extend(handler_hosts(lifecycle.pre_stop.as_ref()));
        }
        if !hosts.is_empty() {
            bad_containers.insert(c.name);
            forbidden.extend(hosts);
        }
    });
    if bad_containers.is_empty() {
        return CheckResult::allowed();
    }
    let bad_containers: Vec<&str> = bad_containers.into_iter().collect();
    let forbidden: Vec<&str> = forbidden.into_iter().collect();
    CheckResult::forbidden(
        "probe or lifecycle host",
        format!(
            "{} {} {} {}",
            containers_phrase(&bad_containers),
            pluralize("uses", "use", bad_containers.len()),
            pluralize(
                "probe or lifecycle host",
                "probe or lifecycle hosts",
                forbidden.len()
            ),
            join_quote(&forbidden)
        ),
    )
}

pub(super) fn privileged_1_0(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let mut bad_containers = Vec::new();
    visit_containers(spec, |c| {
        if c.security_context.and_then(|s| s.privileged) == Some(true) {
            bad_containers.push(c.name);
        }
    });
    if bad_containers.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "privileged",
        format!(
            "{} must not set securityContext.privileged=true",
            containers_phrase(&bad_containers)
        ),
    )
}

pub(crate) fn proc_mount_1_0(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let (bad_containers, types) = containers_with(spec, |c| {
        c.security_context
            .and_then(|s| s.proc_mount.as_deref())
            .filter(|proc_mount| *proc_mount != "Default")
            .into_iter()
            .collect()
    });
    if bad_containers.is_empty() {
        return CheckResult::allowed();
    }
    let types: Vec<&str> = types.into_iter().collect();
    CheckResult::forbidden(
        "procMount",
        format!(
            "{} must not set securityContext.procMount to {}",
            containers_phrase(&bad_containers),
            join_quote(&types)
        ),
    )
}

pub(super) fn proc_mount_1_35_baseline(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    unless(in_user_namespace(spec), proc_mount_1_0, meta, spec)
}

const SELINUX_TYPES_1_0: [&str; 4] = ["", "container_t", "container_init_t", "container_kvm_t"];
const SELINUX_TYPES_1_31: [&str; 5] = [
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

pub(super) fn se_linux_options_1_0(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    se_linux_options(meta, spec, &SELINUX_TYPES_1_0)
}

pub(super) fn se_linux_options_1_31(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    se_linux_options(meta, spec, &SELINUX_TYPES_1_31)
}

fn se_linux_options(_: &ObjectMeta, spec: &PodSpec, allowed_types: &[&str]) -> CheckResult {
    let mut bad_types = BTreeSet::new();
    let mut set_user = false;
    let mut set_role = false;
    let mut valid = |options: &SELinuxOptions| {
        let mut valid = true;
        let selinux_type = options.type_.as_deref().unwrap_or_default();
        if !allowed_types.contains(&selinux_type) {
            valid = false;
            bad_types.insert(selinux_type.to_string());
        }
        if options.user.as_deref().is_some_and(|u| !u.is_empty()) {
            valid = false;
            set_user = true;
        }
        if options.role.as_deref().is_some_and(|r| !r.is_empty()) {
            valid = false;
            set_role = true;
        }
        valid
    };
    let pod_bad = pod_context(spec)
        .and_then(|c| c.se_linux_options.as_ref())
        .is_some_and(|options| !valid(options));
    let mut bad_containers = Vec::new();
    visit_containers(spec, |c| {
        if let Some(options) = c.security_context.and_then(|s| s.se_linux_options.as_ref())
            && !valid(options)
        {
            bad_containers.push(c.name);
        }
    });
    let bad_setters = setters(pod_bad, &bad_containers);
    if bad_setters.is_empty() {
        return CheckResult::allowed();
    }
    let mut bad_data = Vec::new();
    if !bad_types.is_empty() {
        let bad_types: Vec<String> = bad_types.into_iter().collect();
        bad_data.push(format!(
            "{} {}",
            pluralize("type", "types", bad_types.len()),
            join_quote(&bad_types)
        ));
    }
    if set_user {
        bad_data.push("user may not be set".to_string());
    }
    if set_role {
        bad_data.push("role may not be set".to_string());
    }
    CheckResult::forbidden(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            bad_setters.join(" and "),
            bad_data.join("; ")
        ),
    )
}

const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_ANNOTATION_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";

pub(crate) fn seccomp_type_allowed(profile_type: &str) -> bool {
    matches!(profile_type, "Localhost" | "RuntimeDefault")
}

fn seccomp_annotation_allowed(value: &str) -> bool {
    value == "runtime/default" || value == "docker/default" || value.starts_with("localhost/")
}

pub(super) fn seccomp_profile_baseline_1_0(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let annotations = meta.annotations.as_ref();
    let mut forbidden = BTreeSet::new();
    let mut consider = |key: &str| {
        if let Some(value) = annotations.and_then(|a| a.get(key))
            && !seccomp_annotation_allowed(value)
        {
            forbidden.insert(format!("{key}={}", go_quote(value)));
        }
    };
    consider(SECCOMP_POD_ANNOTATION);
    visit_containers(spec, |c| {
        consider(&format!("{SECCOMP_CONTAINER_ANNOTATION_PREFIX}{}", c.name));
    });
    if forbidden.is_empty() {
        return CheckResult::allowed();
    }
    let forbidden: Vec<String> = forbidden.into_iter().collect();
    CheckResult::forbidden(
        "seccompProfile",
        format!(
            "forbidden {} {}",
            pluralize("annotation", "annotations", forbidden.len()),
            forbidden.join(", ")
        ),
    )
}

/// The explicit setters of a bad seccomp profile type (pod, containers) and the bad types, as
/// the baseline and restricted checks both read them.
pub(crate) struct SeccompFindings<'a> {
    pub pod_bad: bool,
    pub pod_set: bool,
    pub explicitly_bad: Vec<&'a str>,
    pub unset: Vec<&'a str>,
    pub bad_values: BTreeSet<String>,
}

pub(crate) fn seccomp_findings(spec: &PodSpec) -> SeccompFindings<'_> {
    let mut findings = SeccompFindings {
        pod_bad: false,
        pod_set: false,
        explicitly_bad: Vec::new(),
        unset: Vec::new(),
        bad_values: BTreeSet::new(),
    };
    if let Some(profile) = pod_context(spec).and_then(|c| c.seccomp_profile.as_ref()) {
        if seccomp_type_allowed(&profile.type_) {
            findings.pod_set = true;
        } else {
            findings.pod_bad = true;
            findings.bad_values.insert(profile.type_.clone());
        }
    }
    visit_containers(spec, |c| {
        match c.security_context.and_then(|s| s.seccomp_profile.as_ref()) {
            Some(profile) if !seccomp_type_allowed(&profile.type_) => {
                findings.explicitly_bad.push(c.name);
                findings.bad_values.insert(profile.type_.clone());
            }
            Some(_) => {}
            None => findings.unset.push(c.name),
        }
    });
    findings
}

impl SeccompFindings<'_> {
    /// `pod and container "a" must not set securityContext.seccompProfile.type to "Unconfined"`.
    pub(crate) fn explicit_violation(&self) -> Option<CheckResult> {
        let bad_setters = setters(self.pod_bad, &self.explicitly_bad);
        if bad_setters.is_empty() {
            return None;
        }
        let values: Vec<&String> = self.bad_values.iter().collect();
        Some(CheckResult::forbidden(
            "seccompProfile",
            format!(
                "{} must not set securityContext.seccompProfile.type to {}",
                bad_setters.join(" and "),
                join_quote(&values.iter().map(|s| s.as_str()).collect::<Vec<_>>())
            ),
        ))
    }
}

pub(super) fn seccomp_profile_baseline_1_19(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    seccomp_findings(spec)
        .explicit_violation()
        .unwrap_or_else(CheckResult::allowed)
}

const SYSCTLS_1_0: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
];
const SYSCTLS_ADDED_1_27: &[&str] = &["net.ipv4.ip_local_reserved_ports"];
const SYSCTLS_ADDED_1_29: &[&str] = &[
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];
const SYSCTLS_ADDED_1_32: &[&str] = &["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"];
const SYSCTLS_ADDED_1_37: &[&str] = &[
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_notsent_lowat",
];

fn sysctls(spec: &PodSpec, allowed: &[&[&str]]) -> CheckResult {
    let forbidden: Vec<&str> = pod_context(spec)
        .and_then(|c| c.sysctls.as_ref())
        .into_iter()
        .flatten()
        .map(|sysctl| sysctl.name.as_str())
        .filter(|name| !allowed.iter().any(|set| set.contains(name)))
        .collect();
    if forbidden.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden("forbidden sysctls", forbidden.join(", "))
}

pub(super) fn sysctls_1_0(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    sysctls(spec, &[SYSCTLS_1_0])
}

pub(super) fn sysctls_1_27(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    sysctls(spec, &[SYSCTLS_1_0, SYSCTLS_ADDED_1_27])
}

pub(super) fn sysctls_1_29(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    sysctls(spec, &[SYSCTLS_1_0, SYSCTLS_ADDED_1_27, SYSCTLS_ADDED_1_29])
}

pub(super) fn sysctls_1_32(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    sysctls(
        spec,
        &[
            SYSCTLS_1_0,
            SYSCTLS_ADDED_1_27,
            SYSCTLS_ADDED_1_29,
            SYSCTLS_ADDED_1_32,
        ],
    )
}

pub(super) fn sysctls_1_37(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    sysctls(
        spec,
        &[
            SYSCTLS_1_0,
            SYSCTLS_ADDED_1_27,
            SYSCTLS_ADDED_1_29,
            SYSCTLS_ADDED_1_32,
            SYSCTLS_ADDED_1_37,
        ],
    )
}

pub(super) fn windows_host_process_1_0(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let mut bad_containers = Vec::new();
    visit_containers(spec, |c| {
        let host_process = c
            .security_context
            .and_then(|s| s.windows_options.as_ref())
            .and_then(|w| w.host_process);
        if host_process == Some(true) {
            bad_containers.push(c.name);
        }
    });
    let pod_bad = pod_context(spec)
        .and_then(|c| c.windows_options.as_ref())
        .and_then(|w| w.host_process)
        == Some(true);
    let bad_setters = setters(pod_bad, &bad_containers);
    if bad_setters.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "hostProcess",
        format!(
            "{} must not set securityContext.windowsOptions.hostProcess=true",
            bad_setters.join(" and ")
        ),
    )
}
