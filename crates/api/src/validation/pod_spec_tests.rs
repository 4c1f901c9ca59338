//! Table tests for pod spec validation, cases ported from upstream's
//! `pkg/apis/core/validation/validation_test.go` (TestValidatePodSpec, TestValidateVolumes,
//! TestValidateVolumeMounts, TestValidateVolumeDevices, TestValidatePorts, TestValidateEnv,
//! TestValidateEnvFrom, TestValidateResourceClaimNames, TestValidateInitContainers,
//! TestValidateEphemeralContainers subsets), expressed as JSON specs and the
//! `(reason, field)` pairs upstream reports for them.

use serde_json::{Value, json};

use super::{PodSpecOptions, validate};

/// A spec with one container `c` given `container` fields and volumes `data` (emptyDir) and
/// `claim` (a persistent volume claim), plus `spec` fields.
fn spec_with(container: Value, spec: Value) -> Value {
    let mut base = json!({
        "volumes": [
            {"name": "data", "emptyDir": {}},
            {"name": "claim", "persistentVolumeClaim": {"claimName": "pvc"}}
        ],
        "containers": [{"name": "c", "image": "nginx"}]
    });
    for (key, value) in container.as_object().into_iter().flatten() {
        base["containers"][0][key] = value.clone();
    }
    for (key, value) in spec.as_object().into_iter().flatten() {
        base[key] = value.clone();
    }
    base
}

fn container(fields: Value) -> Value {
    spec_with(fields, json!({}))
}

fn pod_spec(fields: Value) -> Value {
    spec_with(json!({}), fields)
}

fn found(spec: &Value, options: &PodSpecOptions<'_>) -> Vec<(&'static str, String)> {
    validate(spec, "spec", options)
        .into_iter()
        .map(|cause| (cause.reason, cause.field))
        .collect()
}

/// A case: its name, the spec, and the `(reason, field)` pairs expected, in order.
type Case<'a> = (&'a str, Value, Vec<(&'a str, &'a str)>);

fn assert_table(table: Vec<Case<'_>>) {
    for (name, spec, expected) in table {
        let got = found(&spec, &PodSpecOptions::default());
        let expected: Vec<(&str, String)> = expected
            .into_iter()
            .map(|(reason, field)| (reason, field.to_string()))
            .collect();
        assert_eq!(got, expected, "case {name:?}");
    }
}

const REQUIRED: &str = "FieldValueRequired";
const INVALID: &str = "FieldValueInvalid";
const DUPLICATE: &str = "FieldValueDuplicate";
const NOT_FOUND: &str = "FieldValueNotFound";
const NOT_SUPPORTED: &str = "FieldValueNotSupported";
const FORBIDDEN: &str = "FieldValueForbidden";

#[test]
fn volumes() {
    assert_table(vec![
        ("valid", pod_spec(json!({})), vec![]),
        (
            "duplicate name",
            pod_spec(json!({"volumes": [
                {"name": "abc", "emptyDir": {}}, {"name": "abc", "emptyDir": {}}]})),
            vec![(DUPLICATE, "spec.volumes[1].name")],
        ),
        (
            "name not a DNS label",
            pod_spec(json!({"volumes": [{"name": "a.b", "emptyDir": {}}]})),
            vec![(INVALID, "spec.volumes[0].name")],
        ),
        (
            "empty name",
            pod_spec(json!({"volumes": [{"name": "", "emptyDir": {}}]})),
            vec![(REQUIRED, "spec.volumes[0].name")],
        ),
        (
            "no volume source",
            pod_spec(json!({"volumes": [{"name": "abc"}]})),
            vec![(REQUIRED, "spec.volumes[0]")],
        ),
        (
            "more than one source",
            pod_spec(json!({"volumes": [
                {"name": "abc", "emptyDir": {}, "hostPath": {"path": "/x"}, "downwardAPI": {}}]})),
            vec![
                (FORBIDDEN, "spec.volumes[0].hostPath"),
                (FORBIDDEN, "spec.volumes[0].downwarAPI"),
            ],
        ),
        (
            "host path with backsteps",
            pod_spec(json!({"volumes": [{"name": "abc", "hostPath": {"path": "/a/../b"}}]})),
            vec![(INVALID, "spec.volumes[0].hostPath.path")],
        ),
        (
            "host path type unsupported",
            pod_spec(
                json!({"volumes": [{"name": "abc", "hostPath": {"path": "/a", "type": "Dir"}}]}),
            ),
            vec![(NOT_SUPPORTED, "spec.volumes[0].hostPath.type")],
        ),
        (
            "empty claim name",
            pod_spec(
                json!({"volumes": [{"name": "abc", "persistentVolumeClaim": {"claimName": ""}}]}),
            ),
            vec![(REQUIRED, "spec.volumes[0].persistentVolumeClaim.claimName")],
        ),
    ]);
}

#[test]
fn volume_mounts() {
    let mounts = |mounts: Value| container(json!({"volumeMounts": mounts}));
    assert_table(vec![
        (
            "valid",
            mounts(json!([
                {"name": "data", "mountPath": "/foo"},
                {"name": "claim", "mountPath": "/bar", "subPath": "baz", "readOnly": true,
                 "recursiveReadOnly": "Enabled"},
                {"name": "data", "mountPath": "/qux", "subPathExpr": "$(POD_NAME)",
                 "mountPropagation": "HostToContainer"}
            ])),
            vec![],
        ),
        (
            "name not found",
            mounts(json!([{"name": "nope", "mountPath": "/foo"}])),
            vec![(NOT_FOUND, "spec.containers[0].volumeMounts[0].name")],
        ),
        (
            "empty name",
            mounts(json!([{"name": "", "mountPath": "/foo"}])),
            vec![
                (REQUIRED, "spec.containers[0].volumeMounts[0].name"),
                (NOT_FOUND, "spec.containers[0].volumeMounts[0].name"),
            ],
        ),
        (
            "empty mountpath",
            mounts(json!([{"name": "data", "mountPath": ""}])),
            vec![(REQUIRED, "spec.containers[0].volumeMounts[0].mountPath")],
        ),
        (
            "mountpath collision",
            mounts(
                json!([{"name": "data", "mountPath": "/foo"}, {"name": "claim", "mountPath": "/foo"}]),
            ),
            vec![(INVALID, "spec.containers[0].volumeMounts[1].mountPath")],
        ),
        (
            "absolute subpath",
            mounts(json!([{"name": "data", "mountPath": "/foo", "subPath": "/baz"}])),
            vec![(INVALID, "spec.containers[0].volumeMounts.subPath")],
        ),
        (
            "subpath in ..",
            mounts(json!([{"name": "data", "mountPath": "/foo", "subPath": "../baz"}])),
            vec![(INVALID, "spec.containers[0].volumeMounts.subPath")],
        ),
        (
            "subpath contains ..",
            mounts(json!([{"name": "data", "mountPath": "/foo", "subPath": "baz/../bat"}])),
            vec![(INVALID, "spec.containers[0].volumeMounts.subPath")],
        ),
        (
            "subpath and subpathexpr",
            mounts(
                json!([{"name": "data", "mountPath": "/foo", "subPath": "a", "subPathExpr": "b"}]),
            ),
            vec![(INVALID, "spec.containers[0].volumeMounts[0].subPathExpr")],
        ),
        (
            "recursive read only without read only",
            mounts(json!([{"name": "data", "mountPath": "/foo", "recursiveReadOnly": "Enabled"}])),
            vec![(
                FORBIDDEN,
                "spec.containers[0].volumeMounts.recursiveReadOnly",
            )],
        ),
        (
            "recursive read only unsupported",
            mounts(
                json!([{"name": "data", "mountPath": "/foo", "readOnly": true,
                           "recursiveReadOnly": "Sometimes"}]),
            ),
            vec![(
                NOT_SUPPORTED,
                "spec.containers[0].volumeMounts.recursiveReadOnly",
            )],
        ),
        (
            "bidirectional needs privileged",
            mounts(
                json!([{"name": "data", "mountPath": "/foo", "mountPropagation": "Bidirectional"}]),
            ),
            vec![(
                FORBIDDEN,
                "spec.containers[0].volumeMounts.mountPropagation",
            )],
        ),
        (
            "mount of an invalid volume is not found",
            spec_with(
                json!({"volumeMounts": [{"name": "bad", "mountPath": "/foo"}]}),
                json!({"volumes": [{"name": "bad"}]}),
            ),
            vec![
                (REQUIRED, "spec.volumes[0]"),
                (NOT_FOUND, "spec.containers[0].volumeMounts[0].name"),
            ],
        ),
    ]);
}

#[test]
fn volume_devices() {
    let devices = |devices: Value, mounts: Value| {
        container(json!({"volumeDevices": devices, "volumeMounts": mounts}))
    };
    assert_table(vec![
        (
            "valid",
            devices(
                json!([{"name": "claim", "devicePath": "/dev/xvda"}]),
                json!([]),
            ),
            vec![],
        ),
        (
            "not a claim",
            devices(
                json!([{"name": "data", "devicePath": "/dev/xvda"}]),
                json!([]),
            ),
            vec![(INVALID, "spec.containers[0].volumeDevices[0].name")],
        ),
        (
            "name not found",
            devices(
                json!([{"name": "nope", "devicePath": "/dev/xvda"}]),
                json!([]),
            ),
            vec![(NOT_FOUND, "spec.containers[0].volumeDevices[0].name")],
        ),
        (
            "duplicate path and backsteps",
            devices(
                json!([{"name": "claim", "devicePath": "/dev/a"},
                       {"name": "claim", "devicePath": "/dev/../a"}]),
                json!([]),
            ),
            vec![
                (INVALID, "spec.containers[0].volumeDevices[1].name"),
                (INVALID, "spec.containers[0].volumeDevices[1].devicePath"),
            ],
        ),
        (
            "clash with a mount",
            devices(
                json!([{"name": "claim", "devicePath": "/mnt"}]),
                json!([{"name": "claim", "mountPath": "/mnt"}]),
            ),
            vec![
                (INVALID, "spec.containers[0].volumeMounts[0].name"),
                (INVALID, "spec.containers[0].volumeMounts[0].mountPath"),
                (INVALID, "spec.containers[0].volumeDevices[0].name"),
                (INVALID, "spec.containers[0].volumeDevices[0].devicePath"),
            ],
        ),
    ]);
}

#[test]
fn ports() {
    let ports = |ports: Value| container(json!({"ports": ports}));
    assert_table(vec![
        (
            "valid",
            ports(json!([
                {"name": "easy", "containerPort": 82, "protocol": "TCP"},
                {"name": "as", "containerPort": 83, "protocol": "UDP"},
                {"name": "do-re-me", "containerPort": 84, "protocol": "SCTP"},
                {"containerPort": 85},
                {"name": "fancy-port-name", "containerPort": 65535, "hostPort": 65535}
            ])),
            vec![],
        ),
        (
            "name > 15 characters",
            ports(json!([{"name": "abcdefghijklmnopq", "containerPort": 80}])),
            vec![(INVALID, "spec.containers[0].ports[0].name")],
        ),
        (
            "name contains invalid characters",
            ports(json!([{"name": "a.b.c", "containerPort": 80}])),
            vec![(INVALID, "spec.containers[0].ports[0].name")],
        ),
        (
            "name is a number",
            ports(json!([{"name": "80", "containerPort": 80}])),
            vec![(INVALID, "spec.containers[0].ports[0].name")],
        ),
        (
            "duplicate name",
            ports(
                json!([{"name": "web", "containerPort": 80}, {"name": "web", "containerPort": 81}]),
            ),
            vec![(DUPLICATE, "spec.containers[0].ports[1].name")],
        ),
        (
            "zero container port",
            ports(json!([{"containerPort": 0}])),
            vec![(REQUIRED, "spec.containers[0].ports[0].containerPort")],
        ),
        (
            "container port out of range",
            ports(json!([{"containerPort": 65536}])),
            vec![(INVALID, "spec.containers[0].ports[0].containerPort")],
        ),
        (
            "host port out of range",
            ports(json!([{"containerPort": 80, "hostPort": 65536}])),
            vec![(INVALID, "spec.containers[0].ports[0].hostPort")],
        ),
        (
            "invalid protocol case",
            ports(json!([{"containerPort": 80, "protocol": "tcp"}])),
            vec![(NOT_SUPPORTED, "spec.containers[0].ports[0].protocol")],
        ),
        (
            "invalid protocol",
            ports(json!([{"containerPort": 80, "protocol": "ICMP"}])),
            vec![(NOT_SUPPORTED, "spec.containers[0].ports[0].protocol")],
        ),
        (
            "empty protocol",
            ports(json!([{"containerPort": 80, "protocol": ""}])),
            vec![(REQUIRED, "spec.containers[0].ports[0].protocol")],
        ),
        (
            "host port taken twice",
            spec_with(
                json!({"ports": [{"containerPort": 80, "hostPort": 8080}]}),
                json!({"containers": [
                    {"name": "a", "image": "i", "ports": [{"containerPort": 80, "hostPort": 8080}]},
                    {"name": "b", "image": "i", "ports": [{"containerPort": 81, "hostPort": 8080}]}]}),
            ),
            vec![(DUPLICATE, "spec.containers[1].ports[0].hostPort")],
        ),
        (
            "host network host port mismatch",
            spec_with(
                json!({"ports": [{"containerPort": 80, "hostPort": 81}]}),
                json!({"hostNetwork": true}),
            ),
            vec![(INVALID, "spec.containers[0].ports[0].hostPort")],
        ),
    ]);
}

#[test]
fn env() {
    let env = |env: Value| container(json!({"env": env}));
    assert_table(vec![
        (
            "valid",
            env(json!([
                {"name": "abc", "value": "value"},
                {"name": "a.b.c", "value": "value"},
                {"name": "1-starts-with-a-digit", "value": "relaxed"},
                {"name": "abc", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                {"name": "abc", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                {"name": "abc", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                {"name": "abc", "valueFrom": {"resourceFieldRef": {"resource": "requests.hugepages-2Mi"}}},
                {"name": "abc", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "some-key"}}},
                {"name": "abc", "valueFrom": {"secretKeyRef": {"name": "s", "key": "KEY_NAME"}}}
            ])),
            vec![],
        ),
        (
            "zero-length name",
            env(json!([{"name": ""}])),
            vec![(REQUIRED, "spec.containers[0].env[0].name")],
        ),
        (
            "name with =",
            env(json!([{"name": "a=b"}])),
            vec![(INVALID, "spec.containers[0].env[0].name")],
        ),
        (
            "value and valueFrom",
            env(json!([{"name": "abc", "value": "foo", "valueFrom": {
                "fieldRef": {"fieldPath": "metadata.name"}}}])),
            vec![(INVALID, "spec.containers[0].env[0].valueFrom")],
        ),
        (
            "valueFrom without a source",
            env(json!([{"name": "abc", "valueFrom": {}}])),
            vec![(INVALID, "spec.containers[0].env[0].valueFrom")],
        ),
        (
            "more than one source",
            env(json!([{"name": "abc", "valueFrom": {
                "fieldRef": {"fieldPath": "metadata.name"},
                "secretKeyRef": {"name": "s", "key": "k"}}}])),
            vec![(INVALID, "spec.containers[0].env[0].valueFrom")],
        ),
        (
            "unsupported field path",
            env(json!([{"name": "abc", "valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}}])),
            vec![(
                NOT_SUPPORTED,
                "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath",
            )],
        ),
        (
            "unknown field path",
            env(
                json!([{"name": "abc", "valueFrom": {"fieldRef": {"fieldPath": "metadata.whoops"}}}]),
            ),
            vec![(
                INVALID,
                "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath",
            )],
        ),
        (
            "unsupported api version",
            env(
                json!([{"name": "abc", "valueFrom": {"fieldRef": {"apiVersion": "v2", "fieldPath": "metadata.name"}}}]),
            ),
            vec![(
                INVALID,
                "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath",
            )],
        ),
        (
            "invalid label subscript",
            env(
                json!([{"name": "abc", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['bad key']"}}}]),
            ),
            vec![(INVALID, "spec.containers[0].env[0].valueFrom.fieldRef")],
        ),
        (
            "unsupported container resource",
            env(
                json!([{"name": "abc", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}}]),
            ),
            vec![(
                NOT_SUPPORTED,
                "spec.containers[0].env[0].valueFrom.resourceFieldRef.resource",
            )],
        ),
        (
            "config map key required",
            env(
                json!([{"name": "abc", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": ""}}}]),
            ),
            vec![(
                REQUIRED,
                "spec.containers[0].env[0].valueFrom.configMapKeyRef.key",
            )],
        ),
        (
            "secret key and name invalid",
            env(
                json!([{"name": "abc", "valueFrom": {"secretKeyRef": {"name": "Bad", "key": "a b"}}}]),
            ),
            vec![
                (
                    INVALID,
                    "spec.containers[0].env[0].valueFrom.secretKeyRef.name",
                ),
                (
                    INVALID,
                    "spec.containers[0].env[0].valueFrom.secretKeyRef.key",
                ),
            ],
        ),
    ]);
}

#[test]
fn env_from() {
    let env_from = |env_from: Value| container(json!({"envFrom": env_from}));
    assert_table(vec![
        (
            "valid",
            env_from(json!([
                {"configMapRef": {"name": "abc"}},
                {"prefix": "pre_", "secretRef": {"name": "abc"}},
                {"prefix": "1-relaxed", "configMapRef": {"name": "abc-"}}
            ])),
            vec![],
        ),
        (
            "empty name",
            env_from(json!([{"configMapRef": {"name": ""}}])),
            vec![(REQUIRED, "spec.containers[0].envFrom[0].configMapRef.name")],
        ),
        (
            "invalid name",
            env_from(json!([{"secretRef": {"name": "$"}}])),
            vec![(INVALID, "spec.containers[0].envFrom[0].secretRef.name")],
        ),
        (
            "invalid prefix",
            env_from(json!([{"prefix": "a=", "configMapRef": {"name": "abc"}}])),
            vec![(INVALID, "spec.containers[0].envFrom[0].prefix")],
        ),
        (
            "no source",
            env_from(json!([{"prefix": "a"}])),
            vec![(INVALID, "spec.containers[0].envFrom")],
        ),
        (
            "both sources",
            env_from(json!([{"configMapRef": {"name": "a"}, "secretRef": {"name": "b"}}])),
            vec![(INVALID, "spec.containers[0].envFrom")],
        ),
    ]);
}

#[test]
fn resource_claims() {
    let claims = |pod_claims: Value, container_claims: Value| {
        spec_with(
            json!({"resources": {"claims": container_claims}}),
            json!({"resourceClaims": pod_claims}),
        )
    };
    assert_table(vec![
        (
            "valid",
            claims(
                json!([{"name": "gpu", "resourceClaimName": "my-claim"},
                       {"name": "nic", "resourceClaimTemplateName": "nic-template"}]),
                json!([{"name": "gpu"}, {"name": "nic"}, {"name": "gpu", "request": "second"}]),
            ),
            vec![],
        ),
        (
            "duplicate pod claim",
            claims(
                json!([{"name": "gpu", "resourceClaimName": "a"}, {"name": "gpu", "resourceClaimName": "b"}]),
                json!([]),
            ),
            vec![(DUPLICATE, "spec.resourceClaims[1].name")],
        ),
        (
            "pod claim name not a label",
            claims(
                json!([{"name": "GPU", "resourceClaimName": "a"}]),
                json!([]),
            ),
            vec![(INVALID, "spec.resourceClaims[0].name")],
        ),
        (
            "both claim and template",
            claims(
                json!([{"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}]),
                json!([]),
            ),
            vec![(INVALID, "spec.resourceClaims[0]")],
        ),
        (
            "neither claim nor template",
            claims(json!([{"name": "gpu"}]), json!([])),
            vec![(INVALID, "spec.resourceClaims[0]")],
        ),
        (
            "container claim not found",
            claims(
                json!([{"name": "gpu", "resourceClaimName": "a"}]),
                json!([{"name": "nic"}]),
            ),
            vec![(NOT_FOUND, "spec.containers[0].resources.claims[0]")],
        ),
        (
            "container claim twice",
            claims(
                json!([{"name": "gpu", "resourceClaimName": "a"}]),
                json!([{"name": "gpu"}, {"name": "gpu"}]),
            ),
            vec![(DUPLICATE, "spec.containers[0].resources.claims[1]")],
        ),
        (
            "empty container claim",
            claims(
                json!([{"name": "gpu", "resourceClaimName": "a"}]),
                json!([{"name": ""}]),
            ),
            vec![(REQUIRED, "spec.containers[0].resources.claims[0]")],
        ),
    ]);
}

#[test]
fn containers_init_containers_and_sidecars() {
    let probe = json!({"exec": {"command": ["true"]}});
    assert_table(vec![
        (
            "sidecar with probes",
            pod_spec(json!({"initContainers": [{"name": "side", "image": "i",
                "restartPolicy": "Always", "readinessProbe": probe, "startupProbe": probe,
                "livenessProbe": probe, "lifecycle": {"preStop": {"sleep": {"seconds": 1}}}}]})),
            vec![],
        ),
        (
            "name shared by a container and an init container",
            pod_spec(json!({"initContainers": [{"name": "c", "image": "i"}]})),
            vec![(DUPLICATE, "spec.initContainers[0].name")],
        ),
        (
            "duplicate container names",
            pod_spec(
                json!({"containers": [{"name": "a", "image": "i"}, {"name": "a", "image": "i"}]}),
            ),
            vec![(DUPLICATE, "spec.containers[1].name")],
        ),
        (
            "container name not a label",
            pod_spec(json!({"containers": [{"name": "A_B", "image": "i"}]})),
            vec![(INVALID, "spec.containers[0].name")],
        ),
        (
            "no containers",
            pod_spec(json!({"containers": []})),
            vec![(REQUIRED, "spec.containers")],
        ),
        (
            "missing image",
            pod_spec(json!({"containers": [{"name": "a"}]})),
            vec![(REQUIRED, "spec.containers[0].image")],
        ),
        (
            "init container restart policy other than Always",
            pod_spec(
                json!({"initContainers": [{"name": "i", "image": "i", "restartPolicy": "Never"}]}),
            ),
            vec![(NOT_SUPPORTED, "spec.initContainers[0].restartPolicy")],
        ),
        (
            "regular container restart policy",
            container(json!({"restartPolicy": "Always"})),
            vec![(FORBIDDEN, "spec.containers[0].restartPolicy")],
        ),
        (
            "probes on a plain init container",
            pod_spec(json!({"initContainers": [{"name": "i", "image": "i",
                "lifecycle": {"postStart": probe}, "livenessProbe": probe,
                "readinessProbe": probe, "startupProbe": probe}]})),
            vec![
                (FORBIDDEN, "spec.initContainers[0].lifecycle"),
                (FORBIDDEN, "spec.initContainers[0].livenessProbe"),
                (FORBIDDEN, "spec.initContainers[0].readinessProbe"),
                (FORBIDDEN, "spec.initContainers[0].startupProbe"),
            ],
        ),
        (
            "probe without a handler and liveness success threshold",
            container(json!({"livenessProbe": {"successThreshold": 2}})),
            vec![
                (REQUIRED, "spec.containers[0].livenessProbe"),
                (INVALID, "spec.containers[0].livenessProbe.successThreshold"),
            ],
        ),
        (
            "probe with two handlers",
            container(
                json!({"readinessProbe": {"exec": {"command": ["a"]}, "tcpSocket": {"port": 80}}}),
            ),
            vec![(FORBIDDEN, "spec.containers[0].readinessProbe.tcpSocket")],
        ),
        (
            "unsupported policies",
            spec_with(
                json!({"imagePullPolicy": "Sometimes", "terminationMessagePolicy": "Maybe"}),
                json!({"restartPolicy": "Sometimes", "dnsPolicy": "Whatever"}),
            ),
            vec![
                (NOT_SUPPORTED, "spec.containers[0].terminationMessagePolicy"),
                (NOT_SUPPORTED, "spec.containers[0].imagePullPolicy"),
                (NOT_SUPPORTED, "spec.restartPolicy"),
                (NOT_SUPPORTED, "spec.dnsPolicy"),
            ],
        ),
        (
            "request above limit",
            container(json!({"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}})),
            vec![(INVALID, "spec.containers[0].resources.requests")],
        ),
    ]);
}

#[test]
fn ephemeral_containers() {
    assert_table(vec![
        (
            "valid",
            pod_spec(
                json!({"ephemeralContainers": [{"name": "debug", "image": "busybox",
                "targetContainerName": "c", "volumeMounts": [{"name": "data", "mountPath": "/d"}]}]}),
            ),
            vec![],
        ),
        (
            "name collision and missing target",
            pod_spec(
                json!({"ephemeralContainers": [{"name": "c", "image": "busybox",
                "targetContainerName": "nope"}]}),
            ),
            vec![
                (DUPLICATE, "spec.ephemeralContainers[0].name"),
                (NOT_FOUND, "spec.ephemeralContainers[0].targetContainerName"),
            ],
        ),
        (
            "fields an ephemeral container may not set",
            pod_spec(
                json!({"ephemeralContainers": [{"name": "debug", "image": "busybox",
                "ports": [{"containerPort": 80}], "lifecycle": {"preStop": {"exec": {"command": ["a"]}}},
                "volumeMounts": [{"name": "data", "mountPath": "/d", "subPath": "x"}]}]}),
            ),
            vec![
                (FORBIDDEN, "spec.ephemeralContainers[0].ports"),
                (FORBIDDEN, "spec.ephemeralContainers[0].lifecycle"),
                (
                    FORBIDDEN,
                    "spec.ephemeralContainers[0].volumeMounts[0].subPath",
                ),
            ],
        ),
    ]);
}

#[test]
fn claim_template_volumes_count_as_claims() {
    let spec = container(json!({
        "volumeMounts": [{"name": "www", "mountPath": "/www"}],
        "volumeDevices": [{"name": "block", "devicePath": "/dev/b"}]
    }));
    assert_eq!(
        found(&spec, &PodSpecOptions::default()),
        [
            (
                NOT_FOUND,
                "spec.containers[0].volumeMounts[0].name".to_string()
            ),
            (
                NOT_FOUND,
                "spec.containers[0].volumeDevices[0].name".to_string()
            ),
        ]
    );
    let options = PodSpecOptions {
        is_pod: false,
        claim_template_volumes: &["www", "block"],
    };
    assert!(found(&spec, &options).is_empty());
}

#[test]
fn pods_also_check_image_whitespace() {
    let spec = pod_spec(json!({"containers": [{"name": "c", "image": " nginx"}]}));
    assert!(found(&spec, &PodSpecOptions::default()).is_empty());
    let pod = PodSpecOptions {
        is_pod: true,
        ..PodSpecOptions::default()
    };
    assert_eq!(
        found(&spec, &pod),
        [(INVALID, "spec.containers[0].image".to_string())]
    );
}

/// Messages exactly as upstream's field errors print them.
#[test]
fn messages_match_upstream() {
    let table = [
        (
            container(json!({"volumeMounts": [{"name": "nope", "mountPath": "/d"}]})),
            "Not found: \"nope\"",
        ),
        (
            container(json!({"ports": [{"containerPort": 80, "protocol": "ICMP"}]})),
            "Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
        ),
        (
            container(json!({"ports": [{"containerPort": 70000}]})),
            "Invalid value: 70000: must be between 1 and 65535, inclusive",
        ),
        (
            pod_spec(
                json!({"volumes": [{"name": "data", "emptyDir": {}}, {"name": "data", "emptyDir": {}}],
                            "containers": [{"name": "c", "image": "i"}]}),
            ),
            "Duplicate value: \"data\"",
        ),
        (
            pod_spec(json!({"volumes": [{"name": "v"}]})),
            "Required value: must specify a volume type",
        ),
        (
            container(json!({"env": [{"name": "a", "valueFrom": {}}]})),
            "Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
        ),
        (
            container(
                json!({"env": [{"name": "a", "valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}}]}),
            ),
            "Unsupported value: \"status.phase\": supported values: \"metadata.name\", \"metadata.namespace\", \"metadata.uid\", \"spec.nodeName\", \"spec.serviceAccountName\", \"status.hostIP\", \"status.hostIPs\", \"status.podIP\", \"status.podIPs\"",
        ),
        (
            container(json!({"resources": {"claims": [{"name": "gpu"}]}})),
            "Not found: \"gpu\": must be one of the names in pod.spec.resourceClaims which is empty",
        ),
        (
            pod_spec(
                json!({"initContainers": [{"name": "i", "image": "i", "livenessProbe": {"exec": {"command": ["a"]}}}]}),
            ),
            "Forbidden: may not be set for init containers without restartPolicy=Always",
        ),
        (
            container(
                json!({"volumeMounts": [{"name": "data", "mountPath": "/d", "subPath": "../x"}]}),
            ),
            "Invalid value: \"../x\": must not contain '..'",
        ),
    ];
    for (spec, message) in table {
        let causes = validate(&spec, "spec", &PodSpecOptions::default());
        let messages: Vec<&str> = causes.iter().map(|c| c.message.as_str()).collect();
        assert_eq!(messages, [message]);
    }
}
