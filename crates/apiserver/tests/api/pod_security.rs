//! Pod Security admission through the router: enforce refuses with upstream's 403, warn sends
//! `Warning` headers, dry runs are evaluated, pod templates only warn, a tightened namespace
//! reports its existing pods, bad labels are 422, and writes carry audit annotations.

use serde_json::{Value, json};
use tessera_api::Resource;
use tessera_api::write::WriteOptions;
use tessera_apiserver::Objects;
use tessera_podsecurity::config::{Exemptions, PodSecurityConfiguration};
use tessera_podsecurity::{PodSecurity, Policy};
use tessera_store::{Store, StoreOptions};

use crate::support::{TestServer, raw, start};

async fn write(
    server: &TestServer,
    method: &str,
    uri: &str,
    body: Value,
) -> (u16, Value, Vec<String>) {
    let content_type = if body.is_array() {
        "application/json-patch+json"
    } else if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let (code, answer, headers) = raw(
        server,
        method,
        uri,
        Some(content_type),
        body.to_string().into_bytes(),
    )
    .await;
    let warnings = headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .collect();
    (code, answer, warnings)
}

async fn namespace(server: &TestServer, name: &str, labels: Value) {
    let (code, answer, _) = write(
        server,
        "POST",
        "/api/v1/namespaces",
        json!({"metadata": {"name": name, "labels": labels}}),
    )
    .await;
    assert_eq!(code, 201, "{answer}");
}

fn privileged_pod(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"containers": [
        {"name": "c", "image": "i", "securityContext": {"privileged": true}}
    ]}})
}

fn plain_pod(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
}

const RESTRICTED_ON_PLAIN: &str = concat!(
    r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), "#,
    r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), "#,
    r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), "#,
    r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#
);

#[tokio::test]
async fn enforce_refuses_with_upstreams_forbidden_status_even_on_dry_runs() {
    let server = start();
    namespace(
        &server,
        "locked",
        json!({"pod-security.kubernetes.io/enforce": "baseline"}),
    )
    .await;
    for uri in [
        "/api/v1/namespaces/locked/pods",
        "/api/v1/namespaces/locked/pods?dryRun=All",
    ] {
        let (code, answer, warnings) = write(&server, "POST", uri, privileged_pod("p")).await;
        assert_eq!(code, 403, "{answer}");
        assert_eq!(answer["reason"], "Forbidden");
        assert_eq!(
            answer["message"],
            r#"pods "p" is forbidden: violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)"#
        );
        assert_eq!(answer["details"]["name"], "p");
        assert_eq!(answer["details"]["kind"], "pods");
        assert!(warnings.is_empty(), "{warnings:?}");
    }
    // Unlabelled namespaces are privileged.
    let (code, answer, warnings) = write(
        &server,
        "POST",
        "/api/v1/namespaces/default/pods",
        privileged_pod("p"),
    )
    .await;
    assert_eq!(code, 201, "{answer}");
    assert!(warnings.is_empty());
}

#[tokio::test]
async fn warn_sends_warning_headers_and_updates_that_change_images_are_evaluated() {
    let server = start();
    namespace(
        &server,
        "team",
        json!({"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/warn": "restricted"}),
    )
    .await;
    let pods = "/api/v1/namespaces/team/pods";
    let (code, answer, warnings) = write(&server, "POST", pods, plain_pod("web")).await;
    assert_eq!(code, 201, "{answer}");
    let expected = format!(
        "299 - {}",
        Value::from(format!(
            "would violate PodSecurity \"restricted:latest\": {RESTRICTED_ON_PLAIN}"
        ))
    );
    assert_eq!(warnings, vec![expected.clone()]);
    // A label change is not evaluated; an image change is.
    let (code, _, warnings) = write(
        &server,
        "PATCH",
        "/api/v1/namespaces/team/pods/web",
        json!({"metadata": {"labels": {"a": "b"}}}),
    )
    .await;
    assert_eq!(code, 200);
    assert!(warnings.is_empty(), "{warnings:?}");
    let (code, _, warnings) = write(
        &server,
        "PATCH",
        "/api/v1/namespaces/team/pods/web",
        json!([{"op": "replace", "path": "/spec/containers/0/image", "value": "other"}]),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(warnings, vec![expected]);
}

#[tokio::test]
async fn pod_templates_warn_and_are_never_refused() {
    let server = start();
    namespace(
        &server,
        "locked",
        json!({"pod-security.kubernetes.io/enforce": "restricted"}),
    )
    .await;
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
        }
    });
    let (code, answer, warnings) = write(
        &server,
        "POST",
        "/apis/apps/v1/namespaces/locked/deployments",
        deployment,
    )
    .await;
    assert_eq!(code, 201, "{answer}");
    assert_eq!(
        warnings,
        vec![format!(
            "299 - {}",
            Value::from(format!(
                "would violate PodSecurity \"restricted:latest\": {RESTRICTED_ON_PLAIN}"
            ))
        )]
    );
}

#[tokio::test]
async fn tightening_a_namespace_reports_its_existing_pods_and_bad_labels_are_invalid() {
    let server = start();
    namespace(&server, "shared", json!({})).await;
    for name in ["b", "a"] {
        let (code, answer, _) = write(
            &server,
            "POST",
            "/api/v1/namespaces/shared/pods",
            privileged_pod(name),
        )
        .await;
        assert_eq!(code, 201, "{answer}");
    }
    let (code, answer, warnings) = write(
        &server,
        "PATCH",
        "/api/v1/namespaces/shared",
        json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}}),
    )
    .await;
    assert_eq!(code, 200, "{answer}");
    let quoted = |text: &str| format!("299 - {}", Value::from(text));
    assert_eq!(
        warnings,
        vec![
            quoted(
                r#"existing pods in namespace "shared" violate the new PodSecurity enforce level "baseline:latest""#
            ),
            quoted("a (and 1 other pod): privileged"),
        ]
    );
    let (code, answer, _) = write(
        &server,
        "PATCH",
        "/api/v1/namespaces/shared",
        json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "strict"}}}),
    )
    .await;
    assert_eq!(code, 422, "{answer}");
    assert_eq!(
        answer["message"],
        r#"Namespace "shared" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted"#
    );
}

#[test]
fn writes_carry_audit_annotations_and_exemptions_apply() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(
        &dir.path().join("state.db"),
        StoreOptions {
            history: 100,
            fsync: false,
        },
    )
    .expect("store");
    let admission = PodSecurity::new(
        PodSecurityConfiguration {
            defaults: Policy::default(),
            exemptions: Exemptions {
                usernames: vec!["ops-admin".into()],
                namespaces: vec!["exempt".into()],
                runtime_classes: vec![],
            },
        },
        None,
    );
    let objects = Objects::new(store).with_pod_security(admission);
    let namespaces = Resource::find("", "v1", "namespaces").expect("namespaces");
    let pods = Resource::find("", "v1", "pods").expect("pods");
    let labels = json!({"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/audit": "restricted"});
    for name in ["locked", "exempt"] {
        let written = objects
            .create(
                namespaces,
                None,
                json!({"metadata": {"name": name, "labels": labels}}),
                &WriteOptions::default(),
            )
            .expect("namespace");
        let warnings: Vec<&str> = written.warnings.iter().map(String::as_str).collect();
        if name == "exempt" {
            assert_eq!(
                warnings,
                [
                    r#"namespace "exempt" is exempt from Pod Security, and the policy (enforce=restricted:latest, audit=restricted:latest) will be ignored"#
                ]
            );
        } else {
            assert!(warnings.is_empty());
        }
    }
    let as_user = |user: &str| WriteOptions {
        user: Some(user.to_string()),
        ..WriteOptions::default()
    };
    let error = objects
        .create(pods, Some("locked"), privileged_pod("p"), &as_user("alice"))
        .expect_err("refused");
    assert_eq!(error.code, 403);
    // A refusal carries the annotations too: the audit level's violations and the policy.
    let keys: Vec<&str> = error
        .audit_annotations
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "pod-security.kubernetes.io/audit-violations",
            "pod-security.kubernetes.io/enforce-policy"
        ]
    );
    assert!(
        error.audit_annotations[0]
            .1
            .starts_with(r#"would violate PodSecurity "restricted:latest": privileged"#)
    );
    let exempt_user = objects
        .create(
            pods,
            Some("locked"),
            privileged_pod("p"),
            &as_user("ops-admin"),
        )
        .expect("exempt user");
    assert_eq!(
        exempt_user.audit_annotations,
        vec![(
            "pod-security.kubernetes.io/exempt".to_string(),
            "user".to_string()
        )]
    );
    let exempt_namespace = objects
        .create(pods, Some("exempt"), privileged_pod("p"), &as_user("alice"))
        .expect("exempt namespace");
    assert_eq!(
        exempt_namespace.audit_annotations,
        vec![(
            "pod-security.kubernetes.io/exempt".to_string(),
            "namespace".to_string()
        )]
    );
    let mut compliant = plain_pod("ok");
    compliant["spec"]["securityContext"] =
        json!({"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}});
    compliant["spec"]["containers"][0]["securityContext"] =
        json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}});
    let allowed = objects
        .create(pods, Some("locked"), compliant, &as_user("alice"))
        .expect("restricted pod");
    assert_eq!(
        allowed.audit_annotations,
        vec![(
            "pod-security.kubernetes.io/enforce-policy".to_string(),
            "restricted:latest".to_string()
        )]
    );
}
