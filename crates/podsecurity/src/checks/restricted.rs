//! The restricted checks (upstream's `check_allowPrivilegeEscalation.go`,
//! `check_capabilities_restricted.go`, `check_restrictedVolumes.go`, `check_runAsNonRoot.go`,
//! `check_runAsUser.go`, `check_seccompProfile_restricted.go`; `procMount_restricted` reuses the
//! baseline function), each revision a function with upstream's messages.
//!
//! Knows nothing of which version selects which revision (`super::default_checks`).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{PodSpec, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::baseline::seccomp_findings;
use super::{
    CheckResult, containers_phrase, in_user_namespace, is_windows, join_quote, pluralize,
    pod_context, setters, unless, visit_containers,
};

pub(super) fn allow_privilege_escalation_1_8(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let mut bad_containers = Vec::new();
    visit_containers(spec, |c| {
        if c.security_context
            .and_then(|s| s.allow_privilege_escalation)
            != Some(false)
        {
            bad_containers.push(c.name);
        }
    });
    if bad_containers.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "allowPrivilegeEscalation != false",
        format!(
            "{} must set securityContext.allowPrivilegeEscalation=false",
            containers_phrase(&bad_containers)
        ),
    )
}

pub(super) fn allow_privilege_escalation_1_25(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    unless(is_windows(spec), allow_privilege_escalation_1_8, meta, spec)
}

pub(super) fn capabilities_restricted_1_22(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let mut missing_drop_all = Vec::new();
    let mut adding_forbidden = Vec::new();
    let mut forbidden = BTreeSet::new();
    visit_containers(spec, |c| {
        let Some(capabilities) = c.security_context.and_then(|s| s.capabilities.as_ref()) else {
            missing_drop_all.push(c.name);
            return;
        };
        if !capabilities.drop.iter().flatten().any(|d| d == "ALL") {
            missing_drop_all.push(c.name);
        }
        let mut added_forbidden = false;
        for capability in capabilities.add.iter().flatten() {
            if capability != "NET_BIND_SERVICE" {
                added_forbidden = true;
                forbidden.insert(capability.as_str());
            }
        }
        if added_forbidden {
            adding_forbidden.push(c.name);
        }
    });
    let mut details = Vec::new();
    if !missing_drop_all.is_empty() {
        details.push(format!(
            r#"{} must set securityContext.capabilities.drop=["ALL"]"#,
            containers_phrase(&missing_drop_all)
        ));
    }
    if !adding_forbidden.is_empty() {
        let forbidden: Vec<&str> = forbidden.into_iter().collect();
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&adding_forbidden),
            join_quote(&forbidden)
        ));
    }
    if details.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden("unrestricted capabilities", details.join("; "))
}

pub(super) fn capabilities_restricted_1_25(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    unless(is_windows(spec), capabilities_restricted_1_22, meta, spec)
}

/// The volume source a restricted pod may not use, in upstream's order; `None` for allowed
/// sources.
fn restricted_volume_type(volume: &Volume) -> Option<&'static str> {
    let allowed = volume.config_map.is_some()
        || volume.csi.is_some()
        || volume.downward_api.is_some()
        || volume.empty_dir.is_some()
        || volume.ephemeral.is_some()
        || volume.image.is_some()
        || volume.persistent_volume_claim.is_some()
        || volume.projected.is_some()
        || volume.secret.is_some();
    if allowed {
        return None;
    }
    let sources = [
        (volume.host_path.is_some(), "hostPath"),
        (volume.gce_persistent_disk.is_some(), "gcePersistentDisk"),
        (
            volume.aws_elastic_block_store.is_some(),
            "awsElasticBlockStore",
        ),
        (volume.git_repo.is_some(), "gitRepo"),
        (volume.nfs.is_some(), "nfs"),
        (volume.iscsi.is_some(), "iscsi"),
        (volume.glusterfs.is_some(), "glusterfs"),
        (volume.rbd.is_some(), "rbd"),
        (volume.flex_volume.is_some(), "flexVolume"),
        (volume.cinder.is_some(), "cinder"),
        (volume.cephfs.is_some(), "cephfs"),
        (volume.flocker.is_some(), "flocker"),
        (volume.fc.is_some(), "fc"),
        (volume.azure_file.is_some(), "azureFile"),
        (volume.vsphere_volume.is_some(), "vsphereVolume"),
        (volume.quobyte.is_some(), "quobyte"),
        (volume.azure_disk.is_some(), "azureDisk"),
        (
            volume.photon_persistent_disk.is_some(),
            "photonPersistentDisk",
        ),
        (volume.portworx_volume.is_some(), "portworxVolume"),
        (volume.scale_io.is_some(), "scaleIO"),
        (volume.storageos.is_some(), "storageos"),
    ];
    Some(
        sources
            .into_iter()
            .find(|(set, _)| *set)
            .map_or("unknown", |(_, name)| name),
    )
}

pub(super) fn restricted_volumes_1_0(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let mut bad_volumes = Vec::new();
    let mut bad_types = BTreeSet::new();
    for volume in spec.volumes.iter().flatten() {
        if let Some(kind) = restricted_volume_type(volume) {
            bad_volumes.push(volume.name.as_str());
            bad_types.insert(kind);
        }
    }
    if bad_volumes.is_empty() {
        return CheckResult::allowed();
    }
    let bad_types: Vec<&str> = bad_types.into_iter().collect();
    CheckResult::forbidden(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            pluralize("volume", "volumes", bad_volumes.len()),
            join_quote(&bad_volumes),
            pluralize("uses", "use", bad_volumes.len()),
            pluralize(
                "restricted volume type",
                "restricted volume types",
                bad_types.len()
            ),
            join_quote(&bad_types)
        ),
    )
}

pub(super) fn run_as_non_root_1_0(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let pod_setting = pod_context(spec).and_then(|c| c.run_as_non_root);
    let pod_bad = pod_setting == Some(false);
    let pod_non_root = pod_setting == Some(true);
    let mut explicitly_bad = Vec::new();
    let mut implicitly_bad = Vec::new();
    visit_containers(spec, |c| {
        match c.security_context.and_then(|s| s.run_as_non_root) {
            Some(false) => explicitly_bad.push(c.name),
            Some(true) => {}
            None if !pod_non_root => implicitly_bad.push(c.name),
            None => {}
        }
    });
    if pod_bad || !explicitly_bad.is_empty() {
        return CheckResult::forbidden(
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                setters(pod_bad, &explicitly_bad).join(" and ")
            ),
        );
    }
    if !implicitly_bad.is_empty() {
        return CheckResult::forbidden(
            "runAsNonRoot != true",
            format!(
                "pod or {} must set securityContext.runAsNonRoot=true",
                containers_phrase(&implicitly_bad)
            ),
        );
    }
    CheckResult::allowed()
}

pub(super) fn run_as_non_root_1_35(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    unless(in_user_namespace(spec), run_as_non_root_1_0, meta, spec)
}

pub(super) fn run_as_user_1_23(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let pod_bad = pod_context(spec).and_then(|c| c.run_as_user) == Some(0);
    let mut explicitly_bad = Vec::new();
    visit_containers(spec, |c| {
        if c.security_context.and_then(|s| s.run_as_user) == Some(0) {
            explicitly_bad.push(c.name);
        }
    });
    if !pod_bad && explicitly_bad.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "runAsUser=0",
        format!(
            "{} must not set runAsUser=0",
            setters(pod_bad, &explicitly_bad).join(" and ")
        ),
    )
}

pub(super) fn run_as_user_1_35(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    unless(in_user_namespace(spec), run_as_user_1_23, meta, spec)
}

pub(super) fn seccomp_profile_restricted_1_19(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let findings = seccomp_findings(spec);
    if let Some(violation) = findings.explicit_violation() {
        return violation;
    }
    if !findings.pod_set && !findings.unset.is_empty() {
        return CheckResult::forbidden(
            "seccompProfile",
            format!(
                r#"pod or {} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#,
                containers_phrase(&findings.unset)
            ),
        );
    }
    CheckResult::allowed()
}

pub(super) fn seccomp_profile_restricted_1_25(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    unless(
        is_windows(spec),
        seccomp_profile_restricted_1_19,
        meta,
        spec,
    )
}
