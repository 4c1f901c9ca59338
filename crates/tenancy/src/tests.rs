//! Table tests of the spec's validation, each object of the bundle, ownership and drift.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use crate::bundle::{self, KINDS, ObjectRef};
use crate::drift::{Finding, drift};
use crate::ownership::{Conflict, Summary, claim, recorded};
use crate::spec::{self, SpecError, Tenant};

const FULL: &str = "\
apiVersion: tessera.dev/v1alpha1
kind: Tenant
metadata:
  name: team-a
spec:
  namespace: team-a-ns
  podSecurity: baseline
  podSecurityVersion: v1.33
  quota:
    gpu: 8
    cpu: 64
    memory: 256Gi
    pods: 100
  defaults:
    cpu: 250m
    memory: 512Mi
  clusterQueue: team-a-cq
  localQueue: training
  admins:
  - {kind: User, name: alice}
  members:
  - kind: Group
    name: team-a
  - kind: User
    name: bob
  egress:
  - namespace: model-store
    podSelector: {app: model-store}
    ports:
    - port: 8080
  - cidr: 10.0.0.0/8
    except: [10.96.0.0/12]
    ports: [{port: 443, protocol: TCP}, {port: 9000, endPort: 9100, protocol: UDP}]
  ingress:
  - namespace: ingress
  serviceAccount: trainer
";

const MINIMAL: &str = "apiVersion: tessera.dev/v1alpha1\nkind: Tenant\nmetadata: {name: team-b}\n";

fn full() -> Tenant {
    Tenant::parse(FULL).expect("the full spec is valid")
}

fn object<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the bundle"))
}

fn labels(tenant: &str) -> Value {
    json!({"tessera.dev/tenant": tenant, "app.kubernetes.io/managed-by": "tessera-tenant"})
}

#[test]
fn invalid_specs_name_the_field_and_its_line() {
    let base = |spec: &str| {
        format!(
            "apiVersion: tessera.dev/v1alpha1\nkind: Tenant\nmetadata:\n  name: t\nspec:\n{spec}"
        )
    };
    // (document, the error's text)
    let table: Vec<(String, &str)> = vec![
        (
            MINIMAL.replace("v1alpha1", "v1"),
            "line 1: apiVersion: must be tessera.dev/v1alpha1, got \"tessera.dev/v1\"",
        ),
        (
            MINIMAL.replace("Tenant", "Team"),
            "line 2: kind: must be Tenant, got \"Team\"",
        ),
        (
            MINIMAL.replace("team-b", "Team_B"),
            "line 3: metadata.name: \"Team_B\": a lowercase RFC 1123 label",
        ),
        (
            "apiVersion: tessera.dev/v1alpha1\nkind: Tenant\nmetadata: {}\n".into(),
            "line 3: metadata.name: is required",
        ),
        (
            base("  namespace: kube-system\n"),
            "line 6: spec.namespace: \"kube-system\" is one of the cluster's own namespaces",
        ),
        (
            MINIMAL.replace("team-b", "default"),
            "line 3: metadata.name: \"default\" is one of the cluster's own namespaces",
        ),
        (
            base("  podSecurity: strict\n"),
            "line 6: spec.podSecurity: must be one of privileged, baseline, restricted",
        ),
        (
            base("  podSecurityVersion: \"1.33\"\n"),
            "line 6: spec.podSecurityVersion: must be \"latest\" or \"v1.x\"",
        ),
        (
            base("  quota:\n    cpu: 64\n    gpu: 1.5\n"),
            "line 8: spec.quota.gpu: \"1.5\" must be a whole number",
        ),
        (
            base("  quota:\n    memory: 256GB\n"),
            "line 7: spec.quota.memory: \"256GB\" is not a quantity (e.g. 8, 500m, 256Gi)",
        ),
        (
            base("  quota:\n    cpu: -4\n"),
            "line 7: spec.quota.cpu: \"-4\" must not be negative",
        ),
        (
            base("  defaults: {cpu: lots}\n"),
            "line 6: spec.defaults.cpu: \"lots\" is not a quantity",
        ),
        (
            base("  clusterQueue: Team_CQ\n"),
            "line 6: spec.clusterQueue: \"Team_CQ\": a lowercase RFC 1123 subdomain",
        ),
        (
            base("  localQueue: q\n"),
            "line 6: spec.localQueue: needs spec.clusterQueue, the ClusterQueue it submits to",
        ),
        (
            base("  admins:\n  - {kind: User, name: alice}\n  - {kind: ServiceAccount, name: x}\n"),
            "line 8: spec.admins[1].kind: must be User or Group, got \"ServiceAccount\"",
        ),
        (
            base("  members:\n  - kind: Group\n    name: \"\"\n"),
            "line 8: spec.members[0].name: is required",
        ),
        (
            base("  members:\n  - {kind: Group, name: g}\n  - {kind: Group, name: g}\n"),
            "line 8: spec.members[1]: Group \"g\" is listed twice",
        ),
        (
            base("  egress:\n  - namespace: a\n  - cidr: 10.0.0.0/33\n"),
            "line 8: spec.egress[1].cidr: \"10.0.0.0/33\": the prefix length must be 0 to 32",
        ),
        (
            base("  egress:\n  - cidr: 10.0.0.1/8\n"),
            "line 7: spec.egress[0].cidr: \"10.0.0.1/8\" has host bits set (the network is 10.0.0.0/8)",
        ),
        (
            base("  egress:\n  - cidr: 10.0.0.0/8\n    except:\n    - 192.168.0.0/16\n"),
            "line 9: spec.egress[0].except[0]: \"192.168.0.0/16\" must be strictly within 10.0.0.0/8",
        ),
        (
            base("  egress:\n  - cidr: 10.0.0.0/8\n    namespace: a\n"),
            "line 7: spec.egress[0]: sets both cidr and namespace",
        ),
        (
            base("  ingress:\n  - ports: [{port: 80}]\n"),
            "line 7: spec.ingress[0]: needs cidr or namespace",
        ),
        (
            base("  egress:\n  - cidr: 10.0.0.0/8\n    podSelector: {app: x}\n"),
            "line 8: spec.egress[0].podSelector: needs namespace",
        ),
        (
            base(
                "  egress:\n  - namespace: a\n    podSelector:\n      app.kubernetes.io/name: \"-x\"\n",
            ),
            "line 8: spec.egress[0].podSelector: app.kubernetes.io/name=\"-x\": a valid label",
        ),
        (
            base("  egress:\n  - namespace: a\n    ports:\n    - port: 0\n"),
            "line 9: spec.egress[0].ports[0].port: 0 must be between 1 and 65535",
        ),
        (
            base("  egress:\n  - namespace: a\n    ports:\n    - {port: 90, endPort: 80}\n"),
            "line 9: spec.egress[0].ports[0].endPort: 80 must be between port (90) and 65535",
        ),
        (
            base("  egress:\n  - namespace: a\n    ports:\n    - port: 53\n      protocol: udp\n"),
            "line 10: spec.egress[0].ports[0].protocol: must be TCP, UDP or SCTP, got \"udp\"",
        ),
        (
            base("  serviceAccount: Work_Load\n"),
            "line 6: spec.serviceAccount: \"Work_Load\": a lowercase RFC 1123 subdomain",
        ),
    ];
    for (document, want) in table {
        let error = Tenant::parse(&document).expect_err(&document).to_string();
        assert!(
            error.starts_with(want),
            "document:\n{document}\nerror:  {error}\nwanted: {want}…"
        );
    }
}

#[test]
fn unknown_fields_and_wrong_types_are_parse_errors_with_their_line() {
    // (document, fragments the parser's message holds)
    let table = [
        (
            format!("{MINIMAL}spec:\n  quotas: {{gpu: 1}}\n"),
            ["quotas", "line 5"],
        ),
        (
            format!("{MINIMAL}spec:\n  egress:\n  - namespace: a\n    ports: [{{port: http}}]\n"),
            ["port", "line 7"],
        ),
    ];
    for (document, fragments) in table {
        let error = Tenant::parse(&document).expect_err(&document);
        assert!(matches!(error, SpecError::Parse(_)), "{error:?}");
        let text = error.to_string();
        for fragment in fragments {
            assert!(text.contains(fragment), "{text:?} lacks {fragment:?}");
        }
    }
}

#[test]
fn tenant_names_from_the_command_line_are_labels() {
    assert_eq!(spec::check_tenant_name("team-a"), Ok(()));
    for bad in ["", "a,b=c", "Team", "a.b", &"x".repeat(64)] {
        let error = spec::check_tenant_name(bad).unwrap_err();
        assert!(
            error.starts_with(&format!("tenant name {bad:?}: ")),
            "{error}"
        );
    }
}

#[test]
fn pod_security_versions_parse_as_upstream_parses_them() {
    // (version, accepted) — Pod Security's ParseVersion: "latest" or v1.<minor>.
    let table = [
        ("latest", true),
        ("v1.0", true),
        ("v1.1", true),
        ("v1.33", true),
        ("v1.100", true),
        ("", false),
        ("v1", false),
        ("v1.", false),
        ("v1.01", false),
        ("v1.x", false),
        ("v2.0", false),
        ("1.33", false),
        ("v1.33.0", false),
        ("Latest", false),
        ("v1.-1", false),
    ];
    for (version, accepted) in table {
        assert_eq!(
            spec::parse_version(version).is_ok(),
            accepted,
            "{version:?}"
        );
    }
    for level in ["privileged", "baseline", "restricted"] {
        assert_eq!(spec::parse_level(level), Ok(()));
    }
    assert!(spec::parse_level("Restricted").is_err());
}

#[test]
fn a_minimal_spec_gets_restricted_defaults_and_no_optional_objects() {
    let tenant = Tenant::parse(MINIMAL).unwrap();
    let objects = bundle::bundle(&tenant);
    let names: Vec<String> = objects
        .iter()
        .map(|o| ObjectRef::of(o).unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "Namespace team-b",
            "ServiceAccount team-b/workload",
            "LimitRange team-b/tenant-defaults",
            "NetworkPolicy team-b/default-deny",
            "NetworkPolicy team-b/allow-dns",
            "NetworkPolicy team-b/allow-same-namespace",
        ]
    );
    let namespace = object(&objects, "Namespace", "team-b");
    let labels = &namespace["metadata"]["labels"];
    for mode in ["enforce", "audit", "warn"] {
        assert_eq!(
            labels[format!("pod-security.kubernetes.io/{mode}")],
            "restricted"
        );
        assert_eq!(
            labels[format!("pod-security.kubernetes.io/{mode}-version")],
            "latest"
        );
    }
    assert_eq!(
        object(&objects, "LimitRange", "tenant-defaults")["spec"],
        json!({"limits": [{"type": "Container", "defaultRequest": {"cpu": "100m", "memory": "128Mi"}}]})
    );
}

#[test]
fn every_object_of_a_full_bundle() {
    let tenant = full();
    let objects = bundle::bundle(&tenant);
    let ns = "team-a-ns";
    let owned = labels("team-a");
    let namespace = object(&objects, "Namespace", ns);
    assert_eq!(namespace["apiVersion"], "v1");
    assert_eq!(
        namespace["metadata"]["labels"],
        json!({
            "tessera.dev/tenant": "team-a",
            "app.kubernetes.io/managed-by": "tessera-tenant",
            "pod-security.kubernetes.io/enforce": "baseline",
            "pod-security.kubernetes.io/enforce-version": "v1.33",
            "pod-security.kubernetes.io/audit": "baseline",
            "pod-security.kubernetes.io/audit-version": "v1.33",
            "pod-security.kubernetes.io/warn": "baseline",
            "pod-security.kubernetes.io/warn-version": "v1.33",
        })
    );
    assert!(namespace["metadata"].get("namespace").is_none());
    // (kind, name, the object without apiVersion, kind and metadata)
    let table = [
        (
            "ServiceAccount",
            "trainer",
            json!({"automountServiceAccountToken": false}),
        ),
        (
            "ResourceQuota",
            "tenant-quota",
            json!({"spec": {"hard": {
                "requests.nvidia.com/gpu": "8", "requests.cpu": "64",
                "requests.memory": "256Gi", "pods": "100"}}}),
        ),
        (
            "LimitRange",
            "tenant-defaults",
            json!({"spec": {"limits": [{"type": "Container",
                "defaultRequest": {"cpu": "250m", "memory": "512Mi"}}]}}),
        ),
        (
            "RoleBinding",
            "tenant-admins",
            json!({
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
                "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}],
            }),
        ),
        (
            "RoleBinding",
            "tenant-members",
            json!({
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                "subjects": [
                    {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "team-a"},
                    {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"},
                ],
            }),
        ),
        (
            "NetworkPolicy",
            "default-deny",
            json!({"spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}}),
        ),
        (
            "NetworkPolicy",
            "allow-dns",
            json!({"spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{
                "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
            }]}}),
        ),
        (
            "NetworkPolicy",
            "allow-same-namespace",
            json!({"spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"from": [{"podSelector": {}}]}],
                "egress": [{"to": [{"podSelector": {}}]}]}}),
        ),
        (
            "NetworkPolicy",
            "allow-egress",
            json!({"spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [
                {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "model-store"}},
                         "podSelector": {"matchLabels": {"app": "model-store"}}}],
                 "ports": [{"protocol": "TCP", "port": 8080}]},
                {"to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.96.0.0/12"]}}],
                 "ports": [{"protocol": "TCP", "port": 443},
                           {"protocol": "UDP", "port": 9000, "endPort": 9100}]},
            ]}}),
        ),
        (
            "NetworkPolicy",
            "allow-ingress",
            json!({"spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [
                {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress"}}}]},
            ]}}),
        ),
        (
            "LocalQueue",
            "training",
            json!({"spec": {"clusterQueue": "team-a-cq"}}),
        ),
    ];
    assert_eq!(objects.len(), table.len() + 1, "{objects:#?}");
    for (kind, name, body) in table {
        let got = object(&objects, kind, name);
        assert_eq!(
            got["metadata"],
            json!({"name": name, "namespace": ns, "labels": owned}),
            "{kind} {name}"
        );
        let mut rest = got.as_object().unwrap().clone();
        let api_version = rest.remove("apiVersion").unwrap();
        rest.remove("kind");
        rest.remove("metadata");
        assert_eq!(Value::Object(rest), body, "{kind} {name}");
        let expected_version = KINDS.iter().find(|k| k.kind == kind).unwrap().api_version();
        assert_eq!(api_version, expected_version.as_str(), "{kind} {name}");
    }
    assert_eq!(
        object(&objects, "LocalQueue", "training")["apiVersion"],
        format!(
            "{}/{}",
            tessera_model::kueue::GROUP,
            tessera_model::kueue::STORAGE_VERSION
        )
    );
    // Applied in dependency order: the namespace first.
    let order: Vec<&str> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(order.first(), Some(&"Namespace"));
}

#[test]
fn the_namespace_records_the_spec_it_was_made_from() {
    for tenant in [full(), Tenant::parse(MINIMAL).unwrap()] {
        let objects = bundle::bundle(&tenant);
        assert_eq!(recorded(&objects[0]), Ok(tenant));
    }
    let bare = json!({"metadata": {"name": "x"}});
    assert!(
        recorded(&bare)
            .unwrap_err()
            .to_string()
            .contains("namespace \"x\" records no spec")
    );
    let garbled =
        json!({"metadata": {"name": "x", "annotations": {"tessera.dev/tenant-spec": "{"}}});
    assert!(recorded(&garbled).is_err());
}

#[test]
fn every_object_is_valid_for_the_api_server() {
    // The bundle's objects pass the API's own schema (k8s-openapi types, Kueue's CRD types).
    use k8s_openapi::api::core::v1::{LimitRange, Namespace, ResourceQuota, ServiceAccount};
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    use k8s_openapi::api::rbac::v1::RoleBinding;
    for object in bundle::bundle(&full()) {
        let parsed = match object["kind"].as_str().unwrap() {
            "Namespace" => serde_json::from_value::<Namespace>(object.clone()).map(|_| ()),
            "ServiceAccount" => {
                serde_json::from_value::<ServiceAccount>(object.clone()).map(|_| ())
            }
            "ResourceQuota" => serde_json::from_value::<ResourceQuota>(object.clone()).map(|_| ()),
            "LimitRange" => serde_json::from_value::<LimitRange>(object.clone()).map(|_| ()),
            "RoleBinding" => serde_json::from_value::<RoleBinding>(object.clone()).map(|_| ()),
            "NetworkPolicy" => serde_json::from_value::<NetworkPolicy>(object.clone()).map(|_| ()),
            "LocalQueue" => serde_json::from_value::<tessera_model::kueue::queues::LocalQueueSpec>(
                object["spec"].clone(),
            )
            .map(|_| ()),
            other => panic!("unexpected kind {other}"),
        };
        parsed.unwrap_or_else(|e| panic!("{object}: {e}"));
    }
}

fn owned_namespace(name: &str, owner: Option<&str>) -> Value {
    let mut namespace = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}});
    if let Some(owner) = owner {
        namespace["metadata"]["labels"]["tessera.dev/tenant"] = owner.into();
    }
    namespace
}

#[test]
fn a_tenant_takes_only_its_own_or_a_new_namespace() {
    let tenant = Tenant::parse(MINIMAL).unwrap(); // team-b, namespace team-b
    let mut terminating = owned_namespace("team-b", Some("team-b"));
    terminating["metadata"]["deletionTimestamp"] = "2026-12-02T10:00:00Z".into();
    // (live namespace, namespaces labelled team-b, the decision)
    type Case = (Option<Value>, Vec<Value>, Result<(), Conflict>);
    let table: Vec<Case> = vec![
        (None, vec![], Ok(())),
        (
            Some(owned_namespace("team-b", Some("team-b"))),
            vec![owned_namespace("team-b", Some("team-b"))],
            Ok(()),
        ),
        (
            Some(owned_namespace("team-b", None)),
            vec![],
            Err(Conflict::Unowned {
                namespace: "team-b".into(),
            }),
        ),
        (
            Some(owned_namespace("team-b", Some("team-a"))),
            vec![],
            Err(Conflict::OwnedByOther {
                namespace: "team-b".into(),
                owner: "team-a".into(),
            }),
        ),
        (
            Some(terminating.clone()),
            vec![terminating],
            Err(Conflict::Terminating {
                namespace: "team-b".into(),
            }),
        ),
        (
            None,
            vec![owned_namespace("old-b", Some("team-b"))],
            Err(Conflict::Elsewhere {
                tenant: "team-b".into(),
                namespace: "old-b".into(),
            }),
        ),
    ];
    for (live, owned, want) in table {
        assert_eq!(
            claim(&tenant, live.as_ref(), &owned),
            want,
            "{live:?} {owned:?}"
        );
    }
    assert_eq!(
        Conflict::OwnedByOther {
            namespace: "team-b".into(),
            owner: "team-a".into()
        }
        .to_string(),
        "namespace \"team-b\" belongs to tenant \"team-a\" (tessera.dev/tenant=team-a); refusing to change it"
    );
    assert!(
        Conflict::Unowned {
            namespace: "model-store".into()
        }
        .to_string()
        .starts_with(
            "namespace \"model-store\" already exists and belongs to no tenant (it has no tessera.dev/tenant label)"
        )
    );
}

/// The bundle as the API server returns it: defaults and server-set metadata added.
fn live_bundle(tenant: &Tenant) -> Vec<Value> {
    bundle::bundle(tenant)
        .into_iter()
        .map(|mut object| {
            let metadata = object["metadata"].as_object_mut().unwrap();
            metadata.insert("uid".into(), "u-1".into());
            metadata.insert("resourceVersion".into(), "7".into());
            metadata.insert(
                "managedFields".into(),
                json!([{"manager": "tessera-tenant"}]),
            );
            if object["kind"] == "Namespace" {
                let name = object["metadata"]["name"].clone();
                object["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
                object["spec"] = json!({"finalizers": ["kubernetes"]});
                object["status"] = json!({"phase": "Active"});
            }
            if object["kind"] == "LocalQueue" {
                object["spec"]["stopPolicy"] = "None".into();
            }
            if object["kind"] == "ResourceQuota" {
                // The API keeps quantities as written, or canonical: both equal the bundle's.
                object["spec"]["hard"]["requests.memory"] = "262144Mi".into();
            }
            object
        })
        .collect()
}

fn with(objects: &[Value], kind: &str, name: &str, change: impl Fn(&mut Value)) -> Vec<Value> {
    objects
        .iter()
        .cloned()
        .map(|mut o| {
            if o["kind"] == kind && o["metadata"]["name"] == name {
                change(&mut o);
            }
            o
        })
        .collect()
}

#[test]
fn drift_names_each_difference() {
    let tenant = full();
    let desired = bundle::bundle(&tenant);
    let live = live_bundle(&tenant);
    let stray = json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "allow-all", "namespace": "team-a-ns",
            "labels": {"tessera.dev/tenant": "team-a"}},
        "spec": {"podSelector": {}, "ingress": [{}]}});
    // (what happened, the live objects, the findings)
    let table: Vec<(&str, Vec<Value>, Vec<&str>)> = vec![
        (
            "in sync, with defaults and server metadata",
            live.clone(),
            vec![],
        ),
        (
            "a NetworkPolicy deleted",
            live.iter()
                .filter(|o| o["metadata"]["name"] != "default-deny")
                .cloned()
                .collect(),
            vec!["NetworkPolicy team-a-ns/default-deny: missing"],
        ),
        (
            "the GPU quota changed",
            with(&live, "ResourceQuota", "tenant-quota", |o| {
                o["spec"]["hard"]["requests.nvidia.com/gpu"] = "16".into();
            }),
            vec![
                "ResourceQuota team-a-ns/tenant-quota: spec.hard[requests.nvidia.com/gpu] is \"16\", the bundle sets \"8\"",
            ],
        ),
        (
            "a quota removed",
            with(&live, "ResourceQuota", "tenant-quota", |o| {
                o["spec"]["hard"]
                    .as_object_mut()
                    .unwrap()
                    .remove("requests.cpu");
            }),
            vec![
                "ResourceQuota team-a-ns/tenant-quota: spec.hard[requests.cpu] is not set, the bundle sets \"64\"",
            ],
        ),
        (
            "Pod Security relaxed",
            with(&live, "Namespace", "team-a-ns", |o| {
                o["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "privileged".into();
            }),
            vec![
                "Namespace team-a-ns: metadata.labels[pod-security.kubernetes.io/enforce] is \"privileged\", the bundle sets \"baseline\"",
            ],
        ),
        (
            "the ownership label removed",
            with(&live, "ServiceAccount", "trainer", |o| {
                o["metadata"]["labels"]
                    .as_object_mut()
                    .unwrap()
                    .remove("tessera.dev/tenant");
            }),
            vec![
                "ServiceAccount team-a-ns/trainer: metadata.labels[tessera.dev/tenant] is not set, the bundle sets \"team-a\"",
            ],
        ),
        (
            "a subject added to a RoleBinding",
            with(&live, "RoleBinding", "tenant-admins", |o| {
                o["subjects"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "mallory"}));
            }),
            vec!["RoleBinding team-a-ns/tenant-admins: subjects is [{"],
        ),
        (
            "an egress port changed",
            with(&live, "NetworkPolicy", "allow-egress", |o| {
                o["spec"]["egress"][0]["ports"][0]["port"] = 80.into();
            }),
            vec![
                "NetworkPolicy team-a-ns/allow-egress: spec.egress[0].ports[0].port is 80, the bundle sets 8080",
            ],
        ),
        (
            "the LocalQueue pointed elsewhere",
            with(&live, "LocalQueue", "training", |o| {
                o["spec"]["clusterQueue"] = "other-cq".into();
            }),
            vec![
                "LocalQueue team-a-ns/training: spec.clusterQueue is \"other-cq\", the bundle sets \"team-a-cq\"",
            ],
        ),
        (
            "a labelled object not in the bundle",
            live.iter().cloned().chain([stray]).collect(),
            vec![
                "NetworkPolicy team-a-ns/allow-all: labelled tessera.dev/tenant but not in the bundle",
            ],
        ),
    ];
    for (case, live, want) in table {
        let findings: Vec<String> = drift(&desired, &live)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(findings.len(), want.len(), "{case}: {findings:#?}");
        for (finding, want) in findings.iter().zip(&want) {
            assert!(
                finding.starts_with(want),
                "{case}: {finding:?} does not start with {want:?}"
            );
        }
    }
    // The object-level findings carry the reference.
    let missing = drift(&desired, &[]);
    assert_eq!(missing.len(), desired.len());
    assert!(
        matches!(&missing[0], Finding::Missing(r) if r.kubectl_name() == "namespace/team-a-ns")
    );
}

#[test]
fn kubectl_names_and_references() {
    let objects = bundle::bundle(&full());
    let names: Vec<String> = objects
        .iter()
        .map(|o| ObjectRef::of(o).unwrap().kubectl_name())
        .collect();
    assert_eq!(
        names,
        [
            "namespace/team-a-ns",
            "serviceaccount/trainer",
            "resourcequota/tenant-quota",
            "limitrange/tenant-defaults",
            "rolebinding.rbac.authorization.k8s.io/tenant-admins",
            "rolebinding.rbac.authorization.k8s.io/tenant-members",
            "networkpolicy.networking.k8s.io/default-deny",
            "networkpolicy.networking.k8s.io/allow-dns",
            "networkpolicy.networking.k8s.io/allow-same-namespace",
            "networkpolicy.networking.k8s.io/allow-egress",
            "networkpolicy.networking.k8s.io/allow-ingress",
            "localqueue.kueue.x-k8s.io/training",
        ]
    );
    // Any version of a kind is the same object; kinds outside the bundle are not.
    let v1beta1 = json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
        "metadata": {"name": "q", "namespace": "n"}});
    assert_eq!(
        ObjectRef::of(&v1beta1).unwrap().to_string(),
        "LocalQueue n/q"
    );
    assert!(
        ObjectRef::of(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}))
            .is_none()
    );
}

#[test]
fn list_rows_come_from_the_live_labels_and_the_recorded_spec() {
    let objects = bundle::bundle(&full());
    assert_eq!(
        Summary::of(&objects[0]).cells(),
        [
            "team-a",
            "team-a-ns",
            "baseline",
            "8",
            "64",
            "256Gi",
            "team-a-cq"
        ]
    );
    let minimal = bundle::bundle(&Tenant::parse(MINIMAL).unwrap());
    assert_eq!(
        Summary::of(&minimal[0]).cells(),
        ["team-b", "team-b", "restricted", "-", "-", "-", "-"]
    );
    let unreadable = owned_namespace("x", Some("x"));
    assert_eq!(
        Summary::of(&unreadable).cells(),
        ["x", "x", "-", "?", "?", "?", "?"]
    );
}

#[test]
fn the_yaml_stream_reads_back_as_the_objects() {
    let objects = bundle::bundle(&full());
    let text = bundle::yaml_stream(&objects).unwrap();
    assert_eq!(text.matches("---\n").count(), objects.len());
    // Quantities that look like numbers stay strings.
    let read: Vec<Value> = text
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_saphyr::from_str(d).unwrap())
        .collect();
    assert_eq!(read, objects);
}

#[test]
fn subjects_from_flags() {
    // (flag value, the subject or the error)
    type Case<'a> = (&'a str, Result<(&'a str, &'a str), &'a str>);
    let table: [Case; 6] = [
        ("user:alice", Ok(("User", "alice"))),
        ("Group:team-a", Ok(("Group", "team-a"))),
        (
            "group:system:authenticated",
            Ok(("Group", "system:authenticated")),
        ),
        ("alice", Err("\"alice\" must be user:NAME or group:NAME")),
        (
            "serviceaccount:x",
            Err("\"serviceaccount:x\" must be user:NAME or group:NAME"),
        ),
        ("user:", Err("\"user:\" must be user:NAME or group:NAME")),
    ];
    for (flag, want) in table {
        let got = spec::Subject::from_flag(flag);
        match want {
            Ok((kind, name)) => {
                let subject = got.unwrap();
                assert_eq!((subject.kind.as_str(), subject.name.as_str()), (kind, name));
            }
            Err(message) => assert_eq!(got.unwrap_err(), message),
        }
    }
}

#[test]
fn immutable_fields_that_differ_need_a_replacement() {
    let tenant = full();
    let desired = bundle::bundle(&tenant);
    let live = live_bundle(&tenant);
    let queue = |objects: &[Value]| object(objects, "LocalQueue", "training").clone();
    let binding = |objects: &[Value]| object(objects, "RoleBinding", "tenant-admins").clone();
    let moved = with(&live, "LocalQueue", "training", |o| {
        o["spec"]["clusterQueue"] = "old-cq".into();
    });
    let rebound = with(&live, "RoleBinding", "tenant-admins", |o| {
        o["roleRef"]["name"] = "view".into();
    });
    let relabelled = with(&live, "LocalQueue", "training", |o| {
        o["metadata"]["labels"]["extra"] = "x".into();
    });
    // (desired, live, the field that cannot change)
    let table = [
        (queue(&desired), queue(&live), None),
        (queue(&desired), queue(&moved), Some("/spec/clusterQueue")),
        (queue(&desired), queue(&relabelled), None),
        (binding(&desired), binding(&live), None),
        (binding(&desired), binding(&rebound), Some("/roleRef")),
        (
            object(&desired, "NetworkPolicy", "default-deny").clone(),
            json!({}),
            None,
        ),
    ];
    assert!(crate::drift::has_immutable_fields("LocalQueue"));
    assert!(!crate::drift::has_immutable_fields("NetworkPolicy"));
    for (desired, live, want) in table {
        assert_eq!(
            crate::drift::needs_replacement(&desired, &live),
            want,
            "{desired} over {live}"
        );
    }
}

#[test]
fn a_tenant_may_reach_the_platform_registry_and_only_it() {
    let text = format!("{MINIMAL}spec: {{registry: true}}\n");
    let tenant = Tenant::parse(&text).unwrap();
    let objects = bundle::bundle(&tenant);
    let policy = object(&objects, "NetworkPolicy", "allow-registry");
    assert_eq!(
        policy["spec"],
        json!({"podSelector": {}, "policyTypes": ["Egress"], "egress": [{
            "to": [{
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "tessera-system"}},
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "tessera-registry"}},
            }],
            "ports": [{"protocol": "TCP", "port": 5000}],
        }]})
    );
    assert_eq!(policy["metadata"]["labels"], labels("team-b"));
    // Without it, no such policy; and a live one is pruned as drift.
    let without = bundle::bundle(&Tenant::parse(MINIMAL).unwrap());
    assert!(
        !without
            .iter()
            .any(|o| o["metadata"]["name"] == "allow-registry")
    );
    let findings = drift(&without, &objects);
    assert!(
        findings
            .iter()
            .any(|f| format!("{f:?}").contains("allow-registry")),
        "{findings:?}"
    );
    // The recorded spec keeps the field, and reads back.
    let recorded_spec = object(&objects, "Namespace", "team-b")["metadata"]["annotations"]
        ["tessera.dev/tenant-spec"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(recorded_spec.contains("registry"), "{recorded_spec}");
}
