//! Upstream's `admission/admission_test.go` cases (namespace validation, existing-pod checks,
//! exemptions) with real checks in place of upstream's fake evaluator, and the end-to-end
//! messages of pods and pod templates.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use crate::api::Version;
use crate::config::Exemptions;

const ENFORCE: &str = "pod-security.kubernetes.io/enforce";
const ENFORCE_VERSION: &str = "pod-security.kubernetes.io/enforce-version";

fn namespace(name: &str, labels: &[(&str, &str)]) -> Value {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({"metadata": {"name": name, "labels": labels}})
}

fn admission(exemptions: Exemptions, defaults: Policy) -> PodSecurity {
    PodSecurity::new(
        PodSecurityConfiguration {
            defaults,
            exemptions,
        },
        None,
    )
}

fn plain() -> PodSecurity {
    admission(Exemptions::default(), Policy::default())
}

fn restricted_pod(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "image": "i", "securityContext": {
            "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}
        }}]
    }})
}

fn privileged_pod(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"containers": [
        {"name": "c", "image": "i", "securityContext": {"privileged": true}}
    ]}})
}

fn baseline_pod(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
}

const PRIVILEGED_DETAIL: &str = concat!(
    r#"privileged (container "c" must not set securityContext.privileged=true), "#,
    r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), "#,
    r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), "#,
    r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), "#,
    r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#
);

#[test]
fn a_restricted_namespace_refuses_a_privileged_pod_with_upstreams_message() {
    let ns = namespace("x", &[(ENFORCE, "restricted")]);
    let decision = plain().validate_pod(&ns, "alice", None, &privileged_pod("p"), None);
    assert_eq!(
        decision.denial,
        Some(Denial::Forbidden(format!(
            "violates PodSecurity \"restricted:latest\": {PRIVILEGED_DETAIL}"
        )))
    );
    assert!(decision.warnings.is_empty(), "no warnings on a refusal");
    assert_eq!(
        decision.prefixed_audit_annotations(),
        vec![(
            "pod-security.kubernetes.io/enforce-policy".to_string(),
            "restricted:latest".to_string()
        )]
    );
    assert!(
        plain()
            .validate_pod(&ns, "alice", None, &restricted_pod("p"), None)
            .denial
            .is_none()
    );
}

#[test]
fn warn_and_audit_levels_warn_and_annotate() {
    let ns = namespace(
        "x",
        &[
            (ENFORCE, "baseline"),
            ("pod-security.kubernetes.io/warn", "restricted"),
            ("pod-security.kubernetes.io/audit", "restricted"),
            ("pod-security.kubernetes.io/audit-version", "v1.24"),
        ],
    );
    let decision = plain().validate_pod(&ns, "alice", None, &baseline_pod("p"), None);
    assert_eq!(decision.denial, None);
    let detail = concat!(
        r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), "#,
        r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), "#,
        r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), "#,
        r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#
    );
    assert_eq!(
        decision.warnings,
        vec![format!(
            "would violate PodSecurity \"restricted:latest\": {detail}"
        )]
    );
    assert_eq!(
        decision.audit_annotations,
        BTreeMap::from([
            (
                "audit-violations".to_string(),
                format!("would violate PodSecurity \"restricted:v1.24\": {detail}")
            ),
            ("enforce-policy".to_string(), "baseline:latest".to_string()),
        ])
    );
}

#[test]
fn unlabelled_namespaces_default_to_privileged() {
    let ns = namespace("kube-system", &[]);
    let decision = plain().validate_pod(&ns, "system:node", None, &privileged_pod("p"), None);
    assert_eq!(decision.denial, None);
    assert!(decision.warnings.is_empty());
    assert_eq!(
        decision.audit_annotations,
        BTreeMap::from([(
            "enforce-policy".to_string(),
            "privileged:latest".to_string()
        )])
    );
}

#[test]
fn exemptions_short_circuit_with_their_reason() {
    let exempt = admission(
        Exemptions {
            usernames: vec!["admin".into()],
            namespaces: vec!["ops".into()],
            runtime_classes: vec!["kata".into()],
        },
        Policy::default(),
    );
    let restricted = |name| namespace(name, &[(ENFORCE, "restricted")]);
    let reason = |d: &Decision| (d.denial.clone(), d.audit_annotations.get("exempt").cloned());
    let pod = privileged_pod("p");
    assert_eq!(
        reason(&exempt.validate_pod(&restricted("ops"), "alice", None, &pod, None)),
        (None, Some("namespace".into()))
    );
    assert_eq!(
        reason(&exempt.validate_pod(&restricted("x"), "admin", None, &pod, None)),
        (None, Some("user".into()))
    );
    let mut kata = pod.clone();
    kata["spec"]["runtimeClassName"] = json!("kata");
    assert_eq!(
        reason(&exempt.validate_pod(&restricted("x"), "alice", None, &kata, None)),
        (None, Some("runtimeClass".into()))
    );
    assert!(matches!(
        exempt
            .validate_pod(&restricted("x"), "alice", None, &pod, None)
            .denial,
        Some(Denial::Forbidden(_))
    ));
}

#[test]
fn only_significant_pod_updates_are_evaluated() {
    let ns = namespace("x", &[(ENFORCE, "restricted")]);
    let old = privileged_pod("p");
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"] = json!({"a": "b"});
    let admission = plain();
    assert_eq!(
        admission.validate_pod(&ns, "u", None, &relabelled, Some(&old)),
        Decision::allowed()
    );
    let mut new_image = old.clone();
    new_image["spec"]["containers"][0]["image"] = json!("other");
    assert!(
        admission
            .validate_pod(&ns, "u", None, &new_image, Some(&old))
            .denial
            .is_some()
    );
    let mut debug = old.clone();
    debug["spec"]["ephemeralContainers"] = json!([{"name": "dbg", "image": "busybox"}]);
    assert!(
        admission
            .validate_pod(&ns, "u", Some("ephemeralcontainers"), &debug, Some(&old))
            .denial
            .is_some()
    );
    for ignored in ["status", "binding", "eviction", "exec"] {
        assert_eq!(
            admission.validate_pod(&ns, "u", Some(ignored), &new_image, Some(&old)),
            Decision::allowed()
        );
    }
}

#[test]
fn invalid_labels_fall_back_and_annotate_the_error() {
    let ns = namespace("x", &[(ENFORCE, "strict")]);
    let decision = plain().validate_pod(&ns, "u", None, &privileged_pod("p"), None);
    assert_eq!(
        decision.audit_annotations.get("error").map(String::as_str),
        Some(
            r#"Failed to parse policy: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted"#
        )
    );
    // An invalid enforce level reads as restricted.
    assert!(
        matches!(decision.denial, Some(Denial::Forbidden(ref m)) if m.starts_with("violates PodSecurity \"restricted:latest\""))
    );
}

#[test]
fn pod_templates_warn_but_are_never_refused() {
    let ns = namespace("x", &[(ENFORCE, "restricted")]);
    let template = privileged_pod("ignored");
    let deployment = json!({"spec": {"template": template}});
    let cronjob = json!({"spec": {"jobTemplate": {"spec": {"template": template}}}});
    let admission = plain();
    for (group, resource, object) in [
        ("apps", "deployments", &deployment),
        ("apps", "statefulsets", &deployment),
        ("batch", "jobs", &deployment),
        ("batch", "cronjobs", &cronjob),
        ("", "replicationcontrollers", &deployment),
        ("", "podtemplates", &json!({"template": template})),
    ] {
        let decision = admission.validate_pod_controller(&ns, "u", group, resource, None, object);
        assert_eq!(decision.denial, None, "{resource}");
        assert_eq!(
            decision.warnings,
            vec![format!(
                "would violate PodSecurity \"restricted:latest\": {PRIVILEGED_DETAIL}"
            )],
            "{resource}"
        );
        assert!(!decision.audit_annotations.contains_key("enforce-policy"));
    }
    assert_eq!(
        admission.validate_pod_controller(&ns, "u", "", "services", None, &deployment),
        Decision::allowed()
    );
    assert_eq!(
        admission.validate_pod_controller(
            &ns,
            "u",
            "apps",
            "deployments",
            Some("scale"),
            &deployment
        ),
        Decision::allowed()
    );
}

#[test]
fn validate_namespace_as_upstream() {
    use Denial::Invalid;
    let restricted_default = Policy {
        enforce: LevelVersion::new(Level::Restricted, Version::Latest),
        ..Policy::default()
    };
    let latest = |level| Some(LevelVersion::new(level, Version::Latest));
    // (case, exempt namespace, default policy, new labels, old labels (None = create),
    //  Ok((warnings, pods checked against)) or Err(error detail))
    type Want = Result<(Vec<&'static str>, Option<LevelVersion>), &'static str>;
    type Labels = Vec<(&'static str, &'static str)>;
    type Case = (&'static str, bool, Policy, Labels, Option<Labels>, Want);
    let cases: Vec<Case> = vec![
        (
            "create privileged",
            false,
            Policy::default(),
            vec![(ENFORCE, "privileged"), (ENFORCE_VERSION, "v1.0")],
            None,
            Ok((vec![], None)),
        ),
        (
            "create baseline",
            false,
            Policy::default(),
            vec![(ENFORCE, "baseline")],
            None,
            Ok((vec![], None)),
        ),
        (
            "create restricted exempt",
            true,
            Policy::default(),
            vec![(ENFORCE, "restricted")],
            None,
            Ok((
                vec![
                    r#"namespace "test" is exempt from Pod Security, and the policy (enforce=restricted:latest) will be ignored"#,
                ],
                None,
            )),
        ),
        (
            "create malformed level",
            false,
            Policy::default(),
            vec![(ENFORCE, "unknown")],
            None,
            Err("must be one of privileged, baseline, restricted"),
        ),
        (
            "create malformed version",
            false,
            Policy::default(),
            vec![(ENFORCE, "privileged"), (ENFORCE_VERSION, "unknown")],
            None,
            Err(r#"must be "latest" or "v1.x""#),
        ),
        (
            "update no-op",
            false,
            Policy::default(),
            vec![(ENFORCE, "restricted"), (ENFORCE_VERSION, "v1.0")],
            Some(vec![(ENFORCE, "restricted"), (ENFORCE_VERSION, "v1.0")]),
            Ok((vec![], None)),
        ),
        (
            "update no-op malformed level",
            false,
            Policy::default(),
            vec![(ENFORCE, "unknown")],
            Some(vec![(ENFORCE, "unknown")]),
            Ok((vec![], None)),
        ),
        (
            "update relax level identical version",
            false,
            Policy::default(),
            vec![(ENFORCE, "baseline"), (ENFORCE_VERSION, "v1.0")],
            Some(vec![(ENFORCE, "restricted"), (ENFORCE_VERSION, "v1.0")]),
            Ok((vec![], None)),
        ),
        (
            "update relax level implicit latest",
            false,
            Policy::default(),
            vec![(ENFORCE, "baseline")],
            Some(vec![(ENFORCE, "restricted")]),
            Ok((vec![], None)),
        ),
        (
            "update to implicit privileged",
            false,
            Policy::default(),
            vec![],
            Some(vec![(ENFORCE, "restricted"), (ENFORCE_VERSION, "v1.0")]),
            Ok((vec![], None)),
        ),
        (
            "update exempt to restricted",
            true,
            Policy::default(),
            vec![
                (ENFORCE, "restricted"),
                (ENFORCE_VERSION, "v1.0"),
                ("pod-security.kubernetes.io/audit", "restricted"),
                ("pod-security.kubernetes.io/warn", "baseline"),
            ],
            Some(vec![]),
            Ok((
                vec![
                    r#"namespace "test" is exempt from Pod Security, and the policy (enforce=restricted:v1.0, audit=restricted:latest, warn=baseline:latest) will be ignored"#,
                ],
                None,
            )),
        ),
        (
            "update malformed level",
            false,
            Policy::default(),
            vec![(ENFORCE, "unknown")],
            Some(vec![(ENFORCE, "restricted"), (ENFORCE_VERSION, "v1.0")]),
            Err("must be one of privileged, baseline, restricted"),
        ),
        (
            "update to implicit restricted",
            false,
            restricted_default,
            vec![],
            Some(vec![(ENFORCE, "baseline"), (ENFORCE_VERSION, "v1.0")]),
            Ok((vec![], latest(Level::Restricted))),
        ),
        (
            "update tighten",
            false,
            Policy::default(),
            vec![(ENFORCE, "restricted")],
            Some(vec![(ENFORCE, "baseline")]),
            Ok((vec![], latest(Level::Restricted))),
        ),
    ];
    for (name, exempt, defaults, new, old, want) in cases {
        let exemptions = Exemptions {
            namespaces: if exempt { vec!["test".into()] } else { vec![] },
            ..Exemptions::default()
        };
        let admission = admission(exemptions, defaults);
        let old = old.map(|labels| namespace("test", &labels));
        let got = admission.validate_namespace(&namespace("test", &new), old.as_ref(), None);
        match (got, want) {
            (Ok(decision), Ok((warnings, check_pods))) => {
                assert_eq!(decision.warnings, warnings, "{name}");
                assert_eq!(decision.check_pods, check_pods, "{name}");
            }
            (Err(Invalid(errors)), Err(detail)) => {
                assert_eq!(errors[0].detail, detail, "{name}");
            }
            (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
        }
    }
}

fn owned(name: &str, uid: &str, pod: Value) -> Value {
    let mut pod = pod;
    pod["metadata"]["name"] = json!(name);
    pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": uid, "controller": true}]);
    pod
}

fn host_network_pod(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "i"}]}})
}

fn with_runtime_class(mut pod: Value, class: &str) -> Value {
    pod["spec"]["runtimeClassName"] = json!(class);
    pod
}

#[test]
fn existing_pods_are_checked_as_upstream_prioritizes_them() {
    let baseline = LevelVersion::new(Level::Baseline, Version::Latest);
    let admission = admission(
        Exemptions {
            runtime_classes: vec!["runtimeclass1".into()],
            ..Exemptions::default()
        },
        Policy::default(),
    )
    .with_max_pods_to_check(4);
    // bound number of pods
    let pods: Vec<Value> = (1..=5)
        .map(|i| privileged_pod(&format!("pod{i}")))
        .collect();
    assert_eq!(
        admission.evaluate_pods_in_namespace("test", baseline, &pods),
        vec![
            "new PodSecurity enforce level only checked against the first 4 of 5 existing pods",
            r#"existing pods in namespace "test" violate the new PodSecurity enforce level "baseline:latest""#,
            "pod1 (and 3 other pods): privileged",
        ]
    );
    // prioritized pods
    let mut pods: Vec<Value> = (1..=4)
        .map(|i| with_runtime_class(privileged_pod(&format!("exemptpod{i}")), "runtimeclass1"))
        .collect();
    for rs in 1..=2 {
        for i in 1..=4 {
            let pod = if rs == 1 {
                privileged_pod("")
            } else {
                host_network_pod("")
            };
            pods.push(owned(
                &format!("replicaset{rs}pod{i}"),
                &rs.to_string(),
                pod,
            ));
        }
    }
    pods.push(baseline_pod("uniquepod1"));
    pods.push(json!({"metadata": {"name": "uniquepod2"}, "spec": {"hostPID": true, "containers": [{"name": "c", "securityContext": {"privileged": true}}]}}));
    pods.push(json!({"metadata": {"name": "uniquepod3"}, "spec": {"hostIPC": true, "containers": [{"name": "c"}]}}));
    assert_eq!(
        admission.evaluate_pods_in_namespace("test", baseline, &pods),
        vec![
            "new PodSecurity enforce level only checked against the first 4 of 11 existing pods",
            r#"existing pods in namespace "test" violate the new PodSecurity enforce level "baseline:latest""#,
            "replicaset1pod1: privileged",
            "replicaset2pod1: host namespaces",
            "uniquepod2: host namespaces, privileged",
        ]
    );
    // Pods that pass give no warning at all.
    assert!(
        admission
            .evaluate_pods_in_namespace("test", baseline, &[baseline_pod("ok")])
            .is_empty()
    );
}
