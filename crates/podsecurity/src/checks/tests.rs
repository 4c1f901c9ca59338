//! Upstream's `policy/check_*_test.go` cases as tables: a pod (metadata and spec as JSON), the
//! check revision, and the reason and detail it must give (or that it allows the pod).

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::baseline as b;
use super::restricted as r;
use super::{CheckPodFn, CheckResult};
use crate::api::{Level, LevelVersion, Version};
use crate::evaluator::{Evaluator, aggregate_check_results};

fn parts(meta: &Value, spec: &Value) -> (ObjectMeta, PodSpec) {
    (
        serde_json::from_value(meta.clone()).expect("metadata"),
        serde_json::from_value(spec.clone()).expect("spec"),
    )
}

/// `(case, check, metadata, spec, Some((reason, detail)) or None for allowed)`.
type Case = (
    &'static str,
    CheckPodFn,
    Value,
    Value,
    Option<(&'static str, &'static str)>,
);

fn run(cases: Vec<Case>) {
    for (name, check, meta, spec, want) in cases {
        let (meta, spec) = parts(&meta, &spec);
        let got = check(&meta, &spec);
        let want = match want {
            None => CheckResult::allowed(),
            Some((reason, detail)) => CheckResult::forbidden(reason, detail),
        };
        assert_eq!(got, want, "{name}");
    }
}

fn containers(list: Value) -> Value {
    json!({ "containers": list })
}

fn named_with(contexts: &[(&str, Value)]) -> Value {
    let list: Vec<Value> = contexts
        .iter()
        .map(|(name, context)| {
            if context.is_null() {
                json!({"name": name})
            } else {
                json!({"name": name, "securityContext": context})
            }
        })
        .collect();
    containers(Value::Array(list))
}

#[test]
fn allow_privilege_escalation() {
    let spec = named_with(&[
        ("a", Value::Null),
        ("b", json!({})),
        ("c", json!({"allowPrivilegeEscalation": true})),
        ("d", json!({"allowPrivilegeEscalation": false})),
    ]);
    let detail =
        r#"containers "a", "b", "c" must set securityContext.allowPrivilegeEscalation=false"#;
    let reason = "allowPrivilegeEscalation != false";
    run(vec![
        (
            "1.25 multiple containers",
            r::allow_privilege_escalation_1_25,
            json!({}),
            spec.clone(),
            Some((reason, detail)),
        ),
        (
            "1.25 windows pod",
            r::allow_privilege_escalation_1_25,
            json!({}),
            json!({"os": {"name": "windows"}, "containers": [{"name": "a"}]}),
            None,
        ),
        (
            "1.25 linux pod",
            r::allow_privilege_escalation_1_25,
            json!({}),
            json!({"os": {"name": "linux"}, "containers": [{"name": "a"}]}),
            Some((
                reason,
                r#"container "a" must set securityContext.allowPrivilegeEscalation=false"#,
            )),
        ),
        (
            "1.8 multiple containers",
            r::allow_privilege_escalation_1_8,
            json!({}),
            spec,
            Some((reason, detail)),
        ),
        (
            "1.8 windows pod is not exempt",
            r::allow_privilege_escalation_1_8,
            json!({}),
            json!({"os": {"name": "windows"}, "containers": [{"name": "a"}]}),
            Some((
                reason,
                r#"container "a" must set securityContext.allowPrivilegeEscalation=false"#,
            )),
        ),
    ]);
}

#[test]
fn app_armor_profile() {
    let allowed = |name, meta: Value, spec: Value| -> Case {
        (name, b::app_armor_profile_1_0, meta, spec, None)
    };
    let prefix = "container.apparmor.security.beta.kubernetes.io/";
    run(vec![
        allowed(
            "default annotation",
            json!({"annotations": {format!("{prefix}test"): "runtime/default", "env": "prod"}}),
            json!({"containers": []}),
        ),
        allowed(
            "localhost annotation",
            json!({"annotations": {format!("{prefix}test"): "localhost/sec-profile01", "env": "dev"}}),
            json!({"containers": []}),
        ),
        allowed("no annotations", json!({}), json!({"containers": []})),
        allowed(
            "pod runtime default",
            json!({}),
            json!({"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}, "containers": []}),
        ),
        allowed(
            "container localhost",
            json!({}),
            json!({"containers": [{"name": "foo", "securityContext": {"appArmorProfile": {"type": "Localhost", "localhostProfile": "p"}}}]}),
        ),
        (
            "unconfined pod",
            b::app_armor_profile_1_0,
            json!({}),
            json!({"securityContext": {"appArmorProfile": {"type": "Unconfined"}}, "containers": []}),
            Some((
                "forbidden AppArmor profile",
                r#"pod must not set AppArmor profile type to "Unconfined""#,
            )),
        ),
        (
            "unconfined container",
            b::app_armor_profile_1_0,
            json!({}),
            json!({
                "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
                "containers": [{"name": "foo", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}]
            }),
            Some((
                "forbidden AppArmor profile",
                r#"container "foo" must not set AppArmor profile type to "Unconfined""#,
            )),
        ),
        (
            "unconfined init container",
            b::app_armor_profile_1_0,
            json!({}),
            json!({
                "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
                "containers": [{"name": "foo"}],
                "initContainers": [{"name": "bar", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}]
            }),
            Some((
                "forbidden AppArmor profile",
                r#"container "bar" must not set AppArmor profile type to "Unconfined""#,
            )),
        ),
        (
            "annotations",
            b::app_armor_profile_1_0,
            json!({"annotations": {
                prefix: "bogus",
                format!("{prefix}a"): "",
                format!("{prefix}b"): "runtime/default",
                format!("{prefix}c"): "localhost/",
                format!("{prefix}d"): "localhost/foo",
                format!("{prefix}e"): "unconfined",
                format!("{prefix}f"): "unknown",
            }}),
            json!({"containers": []}),
            Some((
                "forbidden AppArmor profiles",
                r#"annotations must not set AppArmor profile type to "container.apparmor.security.beta.kubernetes.io/="bogus"", "container.apparmor.security.beta.kubernetes.io/e="unconfined"", "container.apparmor.security.beta.kubernetes.io/f="unknown"""#,
            )),
        ),
    ]);
}

#[test]
fn capabilities() {
    let spec = named_with(&[
        ("a", json!({"capabilities": {"add": ["FOO", "BAR"]}})),
        ("b", json!({"capabilities": {"add": ["BAR", "BAZ"]}})),
        (
            "c",
            json!({"capabilities": {"add": ["NET_BIND_SERVICE", "CHOWN"], "drop": ["ALL", "FOO"]}}),
        ),
    ]);
    let restricted = r#"containers "a", "b" must set securityContext.capabilities.drop=["ALL"]; containers "a", "b", "c" must not include "BAR", "BAZ", "CHOWN", "FOO" in securityContext.capabilities.add"#;
    let baseline_spec = named_with(&[
        ("a", json!({"capabilities": {"add": ["FOO", "BAR"]}})),
        ("b", json!({"capabilities": {"add": ["BAR", "BAZ"]}})),
    ]);
    run(vec![
        (
            "baseline multiple containers",
            b::capabilities_baseline_1_0,
            json!({}),
            baseline_spec,
            Some((
                "non-default capabilities",
                r#"containers "a", "b" must not include "BAR", "BAZ", "FOO" in securityContext.capabilities.add"#,
            )),
        ),
        (
            "restricted 1.22",
            r::capabilities_restricted_1_22,
            json!({}),
            spec.clone(),
            Some(("unrestricted capabilities", restricted)),
        ),
        (
            "restricted 1.25",
            r::capabilities_restricted_1_25,
            json!({}),
            spec,
            Some(("unrestricted capabilities", restricted)),
        ),
        (
            "restricted 1.25 windows",
            r::capabilities_restricted_1_25,
            json!({}),
            json!({"os": {"name": "windows"}, "containers": [{"name": "a"}]}),
            None,
        ),
        (
            "restricted 1.25 linux",
            r::capabilities_restricted_1_25,
            json!({}),
            json!({"os": {"name": "linux"}, "containers": [{"name": "a"}]}),
            Some((
                "unrestricted capabilities",
                r#"container "a" must set securityContext.capabilities.drop=["ALL"]"#,
            )),
        ),
    ]);
}

#[test]
fn host_namespaces_paths_and_ports() {
    run(vec![
        (
            "multiple host namespaces",
            b::host_namespaces_1_0,
            json!({}),
            json!({"hostNetwork": true, "hostIPC": true, "hostPID": true, "containers": []}),
            Some((
                "host namespaces",
                "hostNetwork=true, hostPID=true, hostIPC=true",
            )),
        ),
        (
            "host path volumes",
            b::host_path_volumes_1_0,
            json!({}),
            json!({"containers": [], "volumes": [
                {"name": "a", "hostPath": {"path": "/a"}},
                {"name": "b", "hostPath": {"path": "/b"}},
                {"name": "c", "emptyDir": {}},
            ]}),
            Some(("hostPath volumes", r#"volumes "a", "b""#)),
        ),
        (
            "one container, one host port",
            b::host_ports_1_0,
            json!({}),
            json!({"containers": [
                {"name": "a", "ports": [{"containerPort": 1}]},
                {"name": "b", "ports": [{"containerPort": 2, "hostPort": 0}, {"containerPort": 3, "hostPort": 20}]},
            ]}),
            Some(("hostPort", r#"container "b" uses hostPort 20"#)),
        ),
        (
            "multiple containers, multiple host ports",
            b::host_ports_1_0,
            json!({}),
            json!({"containers": [
                {"name": "a", "ports": [{"containerPort": 1}]},
                {"name": "b", "ports": [{"containerPort": 2, "hostPort": 10}, {"containerPort": 3, "hostPort": 20}]},
                {"name": "c", "ports": [{"containerPort": 2, "hostPort": 0}, {"containerPort": 3, "hostPort": 10}, {"containerPort": 4, "hostPort": 30}]},
            ]}),
            Some((
                "hostPort",
                r#"containers "b", "c" use hostPorts 10, 20, 30"#,
            )),
        ),
    ]);
}

#[test]
fn host_probes_and_lifecycle() {
    let http = |host: &str| json!({"httpGet": {"host": host, "port": 80}});
    let tcp = |host: &str| json!({"tcpSocket": {"host": host, "port": 80}});
    run(vec![
        (
            "unset hosts",
            b::host_probes_and_host_lifecycle_1_34,
            json!({}),
            json!({"containers": [{"name": "a", "livenessProbe": {"httpGet": {"port": 80}}, "readinessProbe": http(""), "lifecycle": {"preStop": tcp("")}}]}),
            None,
        ),
        (
            "local hosts",
            b::host_probes_and_host_lifecycle_1_34,
            json!({}),
            json!({"containers": [{
                "name": "a",
                "livenessProbe": http("127.0.0.1"),
                "readinessProbe": tcp("::1"),
                "startupProbe": http("localhost"),
                "lifecycle": {"postStart": http("localhost"), "preStop": tcp("127.0.0.1")}
            }]}),
            Some((
                "probe or lifecycle host",
                r#"container "a" uses probe or lifecycle hosts "127.0.0.1", "::1", "localhost""#,
            )),
        ),
        (
            "liveness httpGet host",
            b::host_probes_and_host_lifecycle_1_34,
            json!({}),
            json!({"containers": [{"name": "a", "livenessProbe": http("invalid.host")}]}),
            Some((
                "probe or lifecycle host",
                r#"container "a" uses probe or lifecycle host "invalid.host""#,
            )),
        ),
        (
            "readiness tcpSocket host",
            b::host_probes_and_host_lifecycle_1_34,
            json!({}),
            json!({"containers": [{"name": "a"}, {"name": "b", "readinessProbe": tcp("invalid.host")}]}),
            Some((
                "probe or lifecycle host",
                r#"container "b" uses probe or lifecycle host "invalid.host""#,
            )),
        ),
        (
            "containers sorted",
            b::host_probes_and_host_lifecycle_1_34,
            json!({}),
            json!({"containers": [{"name": "z", "livenessProbe": http("h")}, {"name": "a", "startupProbe": http("h")}]}),
            Some((
                "probe or lifecycle host",
                r#"containers "a", "z" use probe or lifecycle host "h""#,
            )),
        ),
    ]);
}

#[test]
fn host_probes_follow_the_emulated_version() {
    let (meta, spec) = parts(
        &json!({}),
        &json!({"containers": [{"name": "a", "startupProbe": {"httpGet": {"host": "localhost", "port": 80}}}]}),
    );
    for (emulation, active) in [
        (None, true),
        (Some(Version::new(1, 34)), true),
        (Some(Version::new(1, 33)), false),
    ] {
        let evaluator = Evaluator::new(emulation);
        for version in [Version::Latest, Version::new(1, 34)] {
            let result = aggregate_check_results(&evaluator.evaluate_pod(
                LevelVersion::new(Level::Baseline, version),
                &meta,
                &spec,
            ));
            assert_eq!(result.allowed, !active, "{emulation:?} {version}");
        }
        let older = evaluator.aggregate(
            LevelVersion::new(Level::Baseline, Version::new(1, 33)),
            &meta,
            &spec,
        );
        assert!(older.allowed, "{emulation:?}");
    }
}

#[test]
fn privileged_and_proc_mount() {
    let proc_mounts = |host_users: bool| {
        json!({"hostUsers": host_users, "containers": [
            {"name": "a"},
            {"name": "b", "securityContext": {}},
            {"name": "c", "securityContext": {"procMount": "Default"}},
            {"name": "d", "securityContext": {"procMount": "Unmasked"}},
            {"name": "e", "securityContext": {"procMount": "other"}},
        ]})
    };
    let proc_detail =
        r#"containers "d", "e" must not set securityContext.procMount to "Unmasked", "other""#;
    run(vec![
        (
            "privileged",
            b::privileged_1_0,
            json!({}),
            named_with(&[
                ("a", Value::Null),
                ("b", json!({})),
                ("c", json!({"privileged": false})),
                ("d", json!({"privileged": true})),
                ("e", json!({"privileged": true})),
            ]),
            Some((
                "privileged",
                r#"containers "d", "e" must not set securityContext.privileged=true"#,
            )),
        ),
        (
            "procMount",
            b::proc_mount_1_35_baseline,
            json!({}),
            proc_mounts(true),
            Some(("procMount", proc_detail)),
        ),
        (
            "procMount with userns",
            b::proc_mount_1_35_baseline,
            json!({}),
            proc_mounts(false),
            None,
        ),
        (
            "procMount 1.0 ignores userns",
            b::proc_mount_1_0,
            json!({}),
            proc_mounts(false),
            Some(("procMount", proc_detail)),
        ),
    ]);
}

#[test]
fn restricted_volumes() {
    let mut volumes = vec![
        json!({"name": "a1", "emptyDir": {}}),
        json!({"name": "a2", "secret": {}}),
        json!({"name": "a3", "persistentVolumeClaim": {"claimName": "x"}}),
        json!({"name": "a4", "downwardAPI": {}}),
        json!({"name": "a5", "configMap": {}}),
        json!({"name": "a6", "projected": {}}),
        json!({"name": "a7", "csi": {"driver": "d"}}),
        json!({"name": "a8", "ephemeral": {}}),
        json!({"name": "a9", "image": {}}),
    ];
    let restricted = [
        ("gcePersistentDisk", json!({"pdName": "x"})),
        ("awsElasticBlockStore", json!({"volumeID": "x"})),
        ("gitRepo", json!({"repository": "x"})),
        ("nfs", json!({"server": "x", "path": "/"})),
        ("iscsi", json!({"targetPortal": "x", "iqn": "x", "lun": 0})),
        ("glusterfs", json!({"endpoints": "x", "path": "/"})),
        ("rbd", json!({"monitors": [], "image": "x"})),
        ("flexVolume", json!({"driver": "x"})),
        ("cinder", json!({"volumeID": "x"})),
        ("cephfs", json!({"monitors": []})),
        ("flocker", json!({})),
        ("fc", json!({})),
        ("azureFile", json!({"secretName": "x", "shareName": "x"})),
        ("vsphereVolume", json!({"volumePath": "x"})),
        ("quobyte", json!({"registry": "x", "volume": "x"})),
        ("azureDisk", json!({"diskName": "x", "diskURI": "x"})),
        ("portworxVolume", json!({"volumeID": "x"})),
        ("photonPersistentDisk", json!({"pdID": "x"})),
        (
            "scaleIO",
            json!({"gateway": "x", "system": "x", "secretRef": {}}),
        ),
        ("storageos", json!({})),
        ("hostPath", json!({"path": "/"})),
    ];
    for (i, (kind, source)) in restricted.into_iter().enumerate() {
        volumes.push(json!({"name": format!("b{}", i + 1), kind: source}));
    }
    volumes.push(json!({"name": "c1"}));
    run(vec![(
        "restricted volume types",
        r::restricted_volumes_1_0,
        json!({}),
        json!({"containers": [], "volumes": volumes}),
        Some((
            "restricted volume types",
            concat!(
                r#"volumes "b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9", "b10", "b11", "b12", "b13", "b14", "b15", "b16", "b17", "b18", "b19", "b20", "b21", "c1""#,
                r#" use restricted volume types "#,
                r#""awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "fc", "flexVolume", "flocker", "gcePersistentDisk", "gitRepo", "glusterfs", "#,
                r#""hostPath", "iscsi", "nfs", "photonPersistentDisk", "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "unknown", "vsphereVolume""#
            ),
        )),
    )]);
}

#[test]
fn run_as_non_root_and_user() {
    let reason = "runAsNonRoot != true";
    run(vec![
        (
            "no explicit runAsNonRoot",
            r::run_as_non_root_1_35,
            json!({}),
            json!({"containers": [{"name": "a"}]}),
            Some((
                reason,
                r#"pod or container "a" must set securityContext.runAsNonRoot=true"#,
            )),
        ),
        (
            "pod runAsNonRoot=false",
            r::run_as_non_root_1_35,
            json!({}),
            json!({"securityContext": {"runAsNonRoot": false}, "containers": [{"name": "a"}]}),
            Some((
                reason,
                "pod must not set securityContext.runAsNonRoot=false",
            )),
        ),
        (
            "containers runAsNonRoot=false",
            r::run_as_non_root_1_35,
            json!({}),
            json!({"securityContext": {"runAsNonRoot": true}, "containers": [
                {"name": "a"},
                {"name": "b", "securityContext": {}},
                {"name": "c", "securityContext": {"runAsNonRoot": false}},
                {"name": "d", "securityContext": {"runAsNonRoot": false}},
                {"name": "e", "securityContext": {"runAsNonRoot": true}},
                {"name": "f", "securityContext": {"runAsNonRoot": true}},
            ]}),
            Some((
                reason,
                r#"containers "c", "d" must not set securityContext.runAsNonRoot=false"#,
            )),
        ),
        (
            "pod nil, container fallthrough",
            r::run_as_non_root_1_35,
            json!({}),
            json!({"containers": [
                {"name": "a"},
                {"name": "b", "securityContext": {}},
                {"name": "d", "securityContext": {"runAsNonRoot": true}},
                {"name": "e", "securityContext": {"runAsNonRoot": true}},
            ]}),
            Some((
                reason,
                r#"pod or containers "a", "b" must set securityContext.runAsNonRoot=true"#,
            )),
        ),
        (
            "host users false",
            r::run_as_non_root_1_35,
            json!({}),
            json!({"hostUsers": false, "containers": []}),
            None,
        ),
        (
            "pod runAsUser=0",
            r::run_as_user_1_35,
            json!({}),
            json!({"securityContext": {"runAsUser": 0}, "containers": [{"name": "a"}]}),
            Some(("runAsUser=0", "pod must not set runAsUser=0")),
        ),
        (
            "pod runAsUser=non-zero",
            r::run_as_user_1_35,
            json!({}),
            json!({"securityContext": {"runAsUser": 1000}, "containers": [{"name": "a"}]}),
            None,
        ),
        (
            "pod runAsUser=nil",
            r::run_as_user_1_35,
            json!({}),
            json!({"containers": [{"name": "a"}]}),
            None,
        ),
        (
            "containers runAsUser=0",
            r::run_as_user_1_35,
            json!({}),
            json!({"securityContext": {"runAsUser": 1000}, "containers": [
                {"name": "a"},
                {"name": "b", "securityContext": {}},
                {"name": "c", "securityContext": {"runAsUser": 0}},
                {"name": "d", "securityContext": {"runAsUser": 0}},
                {"name": "e", "securityContext": {"runAsUser": 1}},
            ]}),
            Some((
                "runAsUser=0",
                r#"containers "c", "d" must not set runAsUser=0"#,
            )),
        ),
        (
            "host users false",
            r::run_as_user_1_35,
            json!({}),
            json!({"hostUsers": false, "securityContext": {"runAsUser": 0}, "containers": []}),
            None,
        ),
        (
            "1.23 ignores host users",
            r::run_as_user_1_23,
            json!({}),
            json!({"hostUsers": false, "securityContext": {"runAsUser": 0}, "containers": []}),
            Some(("runAsUser=0", "pod must not set runAsUser=0")),
        ),
    ]);
}

#[test]
fn se_linux_options() {
    let selinux = |options: Value| json!({"seLinuxOptions": options});
    let reason = "seLinuxOptions";
    run(vec![
        (
            "invalid pod and containers",
            b::se_linux_options_1_31,
            json!({}),
            json!({
                "securityContext": {"seLinuxOptions": {"type": "foo", "user": "bar", "role": "baz"}},
                "containers": [
                    {"name": "a", "securityContext": selinux(json!({"type": "container_t"}))},
                    {"name": "b", "securityContext": selinux(json!({"type": "container_init_t"}))},
                    {"name": "c", "securityContext": selinux(json!({"type": "container_kvm_t"}))},
                    {"name": "d", "securityContext": selinux(json!({"type": "container_engine_t"}))},
                    {"name": "e", "securityContext": selinux(json!({"type": "bar"}))},
                    {"name": "f", "securityContext": selinux(json!({"user": "bar"}))},
                    {"name": "g", "securityContext": selinux(json!({"role": "baz"}))},
                ]
            }),
            Some((
                reason,
                r#"pod and containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: types "bar", "foo"; user may not be set; role may not be set"#,
            )),
        ),
        (
            "invalid pod",
            b::se_linux_options_1_31,
            json!({}),
            json!({"securityContext": {"seLinuxOptions": {"type": "foo", "user": "bar", "role": "baz"}}, "containers": [{"name": "a"}]}),
            Some((
                reason,
                r#"pod set forbidden securityContext.seLinuxOptions: type "foo"; user may not be set; role may not be set"#,
            )),
        ),
        (
            "container_engine_t before 1.31",
            b::se_linux_options_1_0,
            json!({}),
            json!({"containers": [{"name": "d", "securityContext": selinux(json!({"type": "container_engine_t"}))}]}),
            Some((
                reason,
                r#"container "d" set forbidden securityContext.seLinuxOptions: type "container_engine_t""#,
            )),
        ),
        (
            "user only",
            b::se_linux_options_1_31,
            json!({}),
            json!({"containers": [{"name": "f", "securityContext": selinux(json!({"user": "bar"}))}]}),
            Some((
                reason,
                r#"container "f" set forbidden securityContext.seLinuxOptions: user may not be set"#,
            )),
        ),
    ]);
}

#[test]
fn seccomp_profiles() {
    let unconfined = json!({"seccompProfile": {"type": "Unconfined"}});
    let runtime_default = json!({"seccompProfile": {"type": "RuntimeDefault"}});
    let containers_cd = json!([
        {"name": "a"},
        {"name": "b", "securityContext": {}},
        {"name": "c", "securityContext": unconfined},
        {"name": "d", "securityContext": unconfined},
        {"name": "e", "securityContext": runtime_default},
        {"name": "f", "securityContext": runtime_default},
    ]);
    let must_set = r#"pod or container "a" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#;
    let annotation = "container.seccomp.security.alpha.kubernetes.io";
    let mut cases: Vec<Case> = Vec::new();
    for (label, check) in [
        ("1.19", r::seccomp_profile_restricted_1_19 as CheckPodFn),
        ("1.25", r::seccomp_profile_restricted_1_25),
    ] {
        let _ = label;
        cases.extend([
            (
                "restricted no explicit seccomp",
                check,
                json!({}),
                json!({"containers": [{"name": "a"}]}),
                Some(("seccompProfile", must_set)),
            ),
            (
                "restricted pod seccomp invalid",
                check,
                json!({}),
                json!({"securityContext": unconfined, "containers": [{"name": "a", "securityContext": runtime_default}]}),
                Some(("seccompProfile", r#"pod must not set securityContext.seccompProfile.type to "Unconfined""#)),
            ),
            (
                "restricted containers seccomp invalid",
                check,
                json!({}),
                json!({"securityContext": runtime_default, "containers": containers_cd}),
                Some(("seccompProfile", r#"containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined""#)),
            ),
            (
                "restricted pod nil, container fallthrough",
                check,
                json!({}),
                json!({"containers": [
                    {"name": "a"},
                    {"name": "b", "securityContext": {}},
                    {"name": "d", "securityContext": runtime_default},
                    {"name": "e", "securityContext": runtime_default},
                ]}),
                Some((
                    "seccompProfile",
                    r#"pod or containers "a", "b" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#,
                )),
            ),
        ]);
    }
    cases.extend([
        (
            "restricted 1.25 windows",
            r::seccomp_profile_restricted_1_25 as CheckPodFn,
            json!({}),
            json!({"os": {"name": "windows"}, "containers": [{"name": "a"}]}),
            None,
        ),
        (
            "restricted 1.25 linux",
            r::seccomp_profile_restricted_1_25,
            json!({}),
            json!({"os": {"name": "linux"}, "containers": [{"name": "a"}]}),
            Some(("seccompProfile", must_set)),
        ),
        (
            "baseline 1.0 pod annotation",
            b::seccomp_profile_baseline_1_0,
            json!({"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}}),
            json!({"containers": [{"name": "a"}]}),
            Some(("seccompProfile", r#"forbidden annotation seccomp.security.alpha.kubernetes.io/pod="unconfined""#)),
        ),
        (
            "baseline 1.0 container annotations",
            b::seccomp_profile_baseline_1_0,
            json!({"annotations": {
                format!("{annotation}/a"): "unconfined",
                format!("{annotation}/b"): "unknown",
                format!("{annotation}/c"): "runtime/default",
                format!("{annotation}/d"): "docker/default",
                format!("{annotation}/e"): "localhost/foo",
                format!("{annotation}/z"): "unconfined",
            }}),
            json!({"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "d"}, {"name": "e"}]}),
            Some((
                "seccompProfile",
                r#"forbidden annotations container.seccomp.security.alpha.kubernetes.io/a="unconfined", container.seccomp.security.alpha.kubernetes.io/b="unknown""#,
            )),
        ),
        (
            "baseline 1.0 pod and container annotations",
            b::seccomp_profile_baseline_1_0,
            json!({"annotations": {
                format!("{annotation}/a"): "unconfined",
                format!("{annotation}/b"): "unknown",
                "seccomp.security.alpha.kubernetes.io/pod": "unconfined",
            }}),
            json!({"containers": [{"name": "a"}, {"name": "b"}]}),
            Some((
                "seccompProfile",
                r#"forbidden annotations container.seccomp.security.alpha.kubernetes.io/a="unconfined", container.seccomp.security.alpha.kubernetes.io/b="unknown", seccomp.security.alpha.kubernetes.io/pod="unconfined""#,
            )),
        ),
        (
            "baseline 1.19 pod invalid",
            b::seccomp_profile_baseline_1_19,
            json!({}),
            json!({"securityContext": unconfined, "containers": [{"name": "a"}]}),
            Some(("seccompProfile", r#"pod must not set securityContext.seccompProfile.type to "Unconfined""#)),
        ),
        (
            "baseline 1.19 containers invalid",
            b::seccomp_profile_baseline_1_19,
            json!({}),
            json!({"containers": containers_cd}),
            Some(("seccompProfile", r#"containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined""#)),
        ),
        (
            "baseline 1.19 pod and containers invalid",
            b::seccomp_profile_baseline_1_19,
            json!({}),
            json!({"securityContext": unconfined, "containers": containers_cd}),
            Some(("seccompProfile", r#"pod and containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined""#)),
        ),
    ]);
    run(cases);
}

#[test]
fn sysctls_by_version() {
    let pod = |names: &[&str]| {
        let sysctls: Vec<Value> = names
            .iter()
            .map(|n| json!({"name": n, "value": "1"}))
            .collect();
        json!({"securityContext": {"sysctls": sysctls}, "containers": []})
    };
    let forbidden = |detail| Some(("forbidden sysctls", detail));
    run(vec![
        (
            "forbidden",
            b::sysctls_1_0,
            json!({}),
            pod(&["a", "b"]),
            forbidden("a, b"),
        ),
        (
            "1.0 allowed",
            b::sysctls_1_0,
            json!({}),
            pod(&["kernel.shm_rmid_forced"]),
            None,
        ),
        (
            "1.0 reserved ports",
            b::sysctls_1_0,
            json!({}),
            pod(&["net.ipv4.ip_local_reserved_ports"]),
            forbidden("net.ipv4.ip_local_reserved_ports"),
        ),
        (
            "1.27 reserved ports",
            b::sysctls_1_27,
            json!({}),
            pod(&["net.ipv4.ip_local_reserved_ports"]),
            None,
        ),
        (
            "1.27 keepalive",
            b::sysctls_1_27,
            json!({}),
            pod(&["net.ipv4.tcp_keepalive_time"]),
            forbidden("net.ipv4.tcp_keepalive_time"),
        ),
        (
            "1.29 keepalive",
            b::sysctls_1_29,
            json!({}),
            pod(&[
                "net.ipv4.tcp_keepalive_time",
                "net.ipv4.tcp_fin_timeout",
                "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes",
            ]),
            None,
        ),
        (
            "1.29 rmem",
            b::sysctls_1_29,
            json!({}),
            pod(&["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"]),
            forbidden("net.ipv4.tcp_rmem, net.ipv4.tcp_wmem"),
        ),
        (
            "1.32 rmem",
            b::sysctls_1_32,
            json!({}),
            pod(&["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"]),
            None,
        ),
        (
            "1.32 slow start",
            b::sysctls_1_32,
            json!({}),
            pod(&["net.ipv4.tcp_slow_start_after_idle"]),
            forbidden("net.ipv4.tcp_slow_start_after_idle"),
        ),
        (
            "1.37 slow start",
            b::sysctls_1_37,
            json!({}),
            pod(&[
                "net.ipv4.tcp_slow_start_after_idle",
                "net.ipv4.tcp_notsent_lowat",
            ]),
            None,
        ),
    ]);
}

#[test]
fn windows_host_process() {
    run(vec![(
        "host process",
        b::windows_host_process_1_0,
        json!({}),
        json!({
            "securityContext": {"windowsOptions": {"hostProcess": true}},
            "containers": [
                {"name": "a"},
                {"name": "b", "securityContext": {}},
                {"name": "c", "securityContext": {"windowsOptions": {}}},
                {"name": "d", "securityContext": {"windowsOptions": {"hostProcess": false}}},
                {"name": "e", "securityContext": {"windowsOptions": {"hostProcess": true}}},
                {"name": "f", "securityContext": {"windowsOptions": {"hostProcess": true}}},
            ]
        }),
        Some((
            "hostProcess",
            r#"pod and containers "e", "f" must not set securityContext.windowsOptions.hostProcess=true"#,
        )),
    )]);
}

#[test]
fn ephemeral_and_init_containers_are_visited_in_order() {
    run(vec![(
        "privileged everywhere",
        b::privileged_1_0,
        json!({}),
        json!({
            "initContainers": [{"name": "i", "securityContext": {"privileged": true}}],
            "containers": [{"name": "c", "securityContext": {"privileged": true}}],
            "ephemeralContainers": [{"name": "e", "securityContext": {"privileged": true}}],
        }),
        Some((
            "privileged",
            r#"containers "i", "c", "e" must not set securityContext.privileged=true"#,
        )),
    )]);
}
