//! Upstream's `policy/checker_test.go` as tables, and the reader's errors.

use super::*;

fn tim() -> UserInfo {
    UserInfo {
        name: "tim@k8s.io".into(),
        groups: vec!["humans".into(), "developers".into()],
        ..UserInfo::default()
    }
}

fn resource(
    verb: &str,
    namespace: &str,
    group: &str,
    resource: &str,
    sub: &str,
    name: &str,
) -> Attributes {
    Attributes {
        verb: verb.into(),
        resource_request: true,
        group: group.into(),
        resource: resource.into(),
        subresource: sub.into(),
        namespace: namespace.into(),
        name: name.into(),
        path: String::new(),
    }
}

/// Upstream's `attrs`: the request, and whether it carries tim as its user.
fn request(name: &str) -> (Option<UserInfo>, Attributes) {
    match name {
        "namespaced" => (
            Some(tim()),
            resource("get", "default", "", "pods", "", "busybox"),
        ),
        "cluster" => (
            Some(tim()),
            resource(
                "get",
                "",
                "rbac.authorization.k8s.io",
                "clusterroles",
                "",
                "edit",
            ),
        ),
        "nonResource" => (
            Some(tim()),
            Attributes {
                verb: "get".into(),
                path: "/logs/kubelet.log".into(),
                ..Attributes::default()
            },
        ),
        "subresource" => (
            Some(tim()),
            resource("get", "default", "", "pods", "log", "busybox"),
        ),
        "Unauthorized" => (None, resource("get", "default", "", "pods", "", "busybox")),
        other => panic!("no request {other}"),
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn resources(group: &str, list: &[&str], names: &[&str]) -> Vec<GroupResources> {
    vec![GroupResources {
        group: group.into(),
        resources: strings(list),
        resource_names: strings(names),
    }]
}

/// Upstream's `rules`.
fn rule(name: &str) -> PolicyRule {
    let get = strings(&["get"]);
    let base = |level| PolicyRule {
        level,
        ..PolicyRule::default()
    };
    match name {
        "default" => base(Level::Metadata),
        "create" => PolicyRule {
            verbs: strings(&["create"]),
            ..base(Level::Request)
        },
        "tims" => PolicyRule {
            users: strings(&["tim@k8s.io"]),
            ..base(Level::Metadata)
        },
        "humans" => PolicyRule {
            user_groups: strings(&["humans"]),
            ..base(Level::Metadata)
        },
        "serviceAccounts" => PolicyRule {
            user_groups: strings(&["system:serviceaccounts"]),
            ..base(Level::Request)
        },
        "getPods" => PolicyRule {
            verbs: get,
            resources: resources("", &["pods"], &[]),
            ..base(Level::RequestResponse)
        },
        "getPodLogs" => PolicyRule {
            verbs: get,
            resources: resources("", &["pods/log"], &[]),
            ..base(Level::Request)
        },
        "getPodWildcardMatching" => PolicyRule {
            verbs: get,
            resources: resources("", &["*"], &[]),
            ..base(Level::Request)
        },
        "getPodResourceWildcardMatching" => PolicyRule {
            verbs: get,
            resources: resources("", &["*/log"], &[]),
            ..base(Level::Request)
        },
        "getPodSubResourceWildcardMatching" => PolicyRule {
            verbs: get,
            resources: resources("", &["pods/*"], &[]),
            ..base(Level::Request)
        },
        "getClusterRoles" => PolicyRule {
            verbs: get,
            resources: resources("rbac.authorization.k8s.io", &["clusterroles"], &[]),
            namespaces: strings(&[""]),
            ..base(Level::RequestResponse)
        },
        "getLogs" => PolicyRule {
            verbs: get,
            non_resource_urls: strings(&["/logs*"]),
            ..base(Level::RequestResponse)
        },
        "getMetrics" => PolicyRule {
            verbs: get,
            non_resource_urls: strings(&["/metrics"]),
            ..base(Level::Request)
        },
        "clusterRoleEdit" => PolicyRule {
            resources: resources("rbac.authorization.k8s.io", &["clusterroles"], &["edit"]),
            ..base(Level::Request)
        },
        "omit RequestReceived" => PolicyRule {
            omit_stages: vec![Stage::RequestReceived],
            ..base(Level::Request)
        },
        "only audit panic" => PolicyRule {
            omit_stages: vec![
                Stage::RequestReceived,
                Stage::ResponseStarted,
                Stage::ResponseComplete,
            ],
            ..base(Level::Request)
        },
        other => panic!("no rule {other}"),
    }
}

fn check(
    req: &str,
    expected: Level,
    policy_stages: &[Stage],
    expected_stages: &[Stage],
    rules: &[&str],
) {
    let policy = Policy {
        rules: rules.iter().map(|r| rule(r)).collect(),
        omit_stages: policy_stages.to_vec(),
        omit_managed_fields: false,
    };
    let (user, attributes) = request(req);
    let config = policy.evaluate(user.as_ref(), &attributes);
    assert_eq!(config.level, expected, "request {req}, rules {rules:?}");
    let expected_stages: BTreeSet<Stage> = expected_stages.iter().copied().collect();
    assert_eq!(
        config.omit_stages, expected_stages,
        "request {req}, rules {rules:?}"
    );
}

use crate::audit::Level::{Metadata, None as NoLevel, Request, RequestResponse};

/// Upstream's `testAuditLevel`: (request, level, rules).
const LEVELS: &[(&str, Level, &[&str])] = &[
    ("namespaced", Metadata, &["default"]),
    ("namespaced", NoLevel, &["create"]),
    ("namespaced", Metadata, &["tims"]),
    ("namespaced", Metadata, &["humans"]),
    ("namespaced", NoLevel, &["serviceAccounts"]),
    ("namespaced", RequestResponse, &["getPods"]),
    ("namespaced", NoLevel, &["getClusterRoles"]),
    ("namespaced", NoLevel, &["getLogs"]),
    ("namespaced", NoLevel, &["getMetrics"]),
    (
        "namespaced",
        Metadata,
        &["getMetrics", "serviceAccounts", "default"],
    ),
    (
        "namespaced",
        RequestResponse,
        &["getMetrics", "getPods", "default"],
    ),
    ("namespaced", RequestResponse, &["getPodLogs", "getPods"]),
    ("cluster", Metadata, &["default"]),
    ("cluster", NoLevel, &["create"]),
    ("cluster", Metadata, &["tims"]),
    ("cluster", Metadata, &["humans"]),
    ("cluster", NoLevel, &["serviceAccounts"]),
    ("cluster", NoLevel, &["getPods"]),
    ("cluster", RequestResponse, &["getClusterRoles"]),
    ("cluster", Request, &["clusterRoleEdit", "getClusterRoles"]),
    ("cluster", NoLevel, &["getLogs"]),
    ("cluster", NoLevel, &["getMetrics"]),
    (
        "cluster",
        Metadata,
        &["getMetrics", "serviceAccounts", "default"],
    ),
    (
        "cluster",
        RequestResponse,
        &["getMetrics", "getClusterRoles", "default"],
    ),
    ("cluster", NoLevel, &["getPodLogs", "getPods"]),
    ("nonResource", Metadata, &["default"]),
    ("nonResource", NoLevel, &["create"]),
    ("nonResource", Metadata, &["tims"]),
    ("nonResource", Metadata, &["humans"]),
    ("nonResource", NoLevel, &["serviceAccounts"]),
    ("nonResource", NoLevel, &["getPods"]),
    ("nonResource", NoLevel, &["getClusterRoles"]),
    ("nonResource", RequestResponse, &["getLogs"]),
    ("nonResource", NoLevel, &["getMetrics"]),
    (
        "nonResource",
        Metadata,
        &["getMetrics", "serviceAccounts", "default"],
    ),
    (
        "nonResource",
        RequestResponse,
        &["getLogs", "getClusterRoles", "default"],
    ),
    ("nonResource", NoLevel, &["getPodLogs", "getPods"]),
    ("subresource", Request, &["getPodLogs", "getPods"]),
    ("subresource", Request, &["getPodWildcardMatching"]),
    ("subresource", Request, &["getPodResourceWildcardMatching"]),
    (
        "subresource",
        Request,
        &["getPodSubResourceWildcardMatching"],
    ),
    ("Unauthorized", NoLevel, &["tims"]),
    ("Unauthorized", Metadata, &["tims", "default"]),
    ("Unauthorized", NoLevel, &["humans"]),
    ("Unauthorized", Metadata, &["humans", "default"]),
];

const RR: Stage = Stage::RequestReceived;
const RS: Stage = Stage::ResponseStarted;
const RC: Stage = Stage::ResponseComplete;

/// Upstream's per-rule and policy-wide omitStages cases: (request, level, policy stages,
/// expected stages, rules).
/// (request, level, policy stages, expected stages, rules).
type StageCase = (
    &'static str,
    Level,
    &'static [Stage],
    &'static [Stage],
    &'static [&'static str],
);

const STAGES: &[StageCase] = &[
    (
        "namespaced",
        Request,
        &[],
        &[RR],
        &["omit RequestReceived", "getPods", "default"],
    ),
    (
        "namespaced",
        Request,
        &[],
        &[RR, RS, RC],
        &["only audit panic", "getPods", "default"],
    ),
    (
        "cluster",
        Request,
        &[],
        &[RR],
        &["omit RequestReceived", "getPods", "default"],
    ),
    (
        "cluster",
        Request,
        &[],
        &[RR, RS, RC],
        &["only audit panic", "getPods", "default"],
    ),
    (
        "nonResource",
        Request,
        &[],
        &[RR],
        &["omit RequestReceived", "getPods", "default"],
    ),
    (
        "nonResource",
        Request,
        &[],
        &[RR, RS, RC],
        &["only audit panic", "getPods", "default"],
    ),
    (
        "namespaced",
        Request,
        &[RR, RS],
        &[RR, RS],
        &["omit RequestReceived", "getPods", "default"],
    ),
    (
        "namespaced",
        Request,
        &[RR, RS],
        &[RR, RS, RC],
        &["only audit panic", "getPods", "default"],
    ),
    (
        "cluster",
        Request,
        &[RR, RS],
        &[RR, RS],
        &["omit RequestReceived", "getPods", "default"],
    ),
    (
        "cluster",
        Request,
        &[RR, RS],
        &[RR, RS, RC],
        &["only audit panic", "getPods", "default"],
    ),
    (
        "nonResource",
        Metadata,
        &[RR, RS],
        &[RR, RS],
        &["default", "omit RequestReceived", "getPods"],
    ),
    (
        "nonResource",
        Request,
        &[RR, RS],
        &[RR, RS, RC],
        &["only audit panic", "getPods", "default"],
    ),
];

#[test]
fn checker_levels_without_policy_stages() {
    for (req, level, rules) in LEVELS {
        check(req, *level, &[], &[], rules);
    }
}

#[test]
fn checker_levels_with_policy_stages() {
    for (req, level, rules) in LEVELS {
        check(req, *level, &[RR, RS], &[RR, RS], rules);
    }
}

#[test]
fn checker_omit_stages() {
    for (req, level, policy, expected, rules) in STAGES {
        check(req, *level, policy, expected, rules);
    }
}

#[test]
fn omit_managed_fields_rule_overrides_policy() {
    // (policy default, rule override, expected) — upstream's TestOmitManagedFields.
    let cases = [
        (false, None, false),
        (true, None, true),
        (true, Some(false), false),
        (false, Some(true), true),
    ];
    let attributes = Attributes {
        verb: "get".into(),
        ..Attributes::default()
    };
    for (policy_default, rule_override, expected) in cases {
        let policy = Policy {
            rules: vec![PolicyRule {
                level: RequestResponse,
                verbs: strings(&["get"]),
                omit_managed_fields: rule_override,
                ..PolicyRule::default()
            }],
            omit_stages: Vec::new(),
            omit_managed_fields: policy_default,
        };
        let config = policy.evaluate(None, &attributes);
        assert_eq!(
            config.omit_managed_fields, expected,
            "{policy_default} {rule_override:?}"
        );
    }
}

#[test]
fn path_matching() {
    // (path, spec, matches)
    let cases = [
        ("/logs/kubelet.log", "*", true),
        ("/metrics", "/metrics", true),
        ("/metrics/x", "/metrics", false),
        ("/logs/kubelet.log", "/logs*", true),
        ("/logs", "/logs/*", false),
        ("/healthz/ping", "/healthz/*", true),
    ];
    for (path, spec, expected) in cases {
        assert_eq!(path_matches(path, spec), expected, "{path} {spec}");
    }
}

#[test]
fn status_subresources_and_resource_names() {
    // (rule resources, resource names, request (resource, sub, name), matches)
    type Case = (
        &'static [&'static str],
        &'static [&'static str],
        (&'static str, &'static str, &'static str),
        bool,
    );
    let cases: &[Case] = &[
        (&["*/status"], &[], ("deployments", "status", "web"), true),
        (&["*/status"], &[], ("deployments", "", "web"), false),
        (&["pods"], &[], ("pods", "log", "web"), false),
        (&["pods/log"], &[], ("pods", "log", "web"), true),
        (&["pods"], &["web"], ("pods", "", "web"), true),
        (&["pods"], &["web"], ("pods", "", "db"), false),
    ];
    for (list, names, (res, sub, name), expected) in cases {
        let rule = PolicyRule {
            level: Metadata,
            resources: resources("", list, names),
            ..PolicyRule::default()
        };
        let policy = Policy {
            rules: vec![rule],
            ..Policy::default()
        };
        let attributes = resource("get", "default", "", res, sub, name);
        let level = policy.evaluate(Some(&tim()), &attributes).level;
        assert_eq!(
            level == Metadata,
            *expected,
            "{list:?} {names:?} {res}/{sub} {name}"
        );
    }
}

const GOOD: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages:
  - RequestReceived
omitManagedFields: true
rules:
  - level: None
    users: [\"system:kube-proxy\"]
    verbs: [\"watch\"]
  - level: RequestResponse
    resources:
      - group: \"\"
        resources: [\"configmaps\", \"pods/log\"]
        resourceNames: [\"a\"]
    namespaces: [\"default\"]
    omitManagedFields: false
  - level: Metadata
    nonResourceURLs: [\"/healthz*\", \"/version\"]
    omitStages: [\"ResponseStarted\"]
";

#[test]
fn reads_a_policy() {
    let loaded = parse_policy(GOOD).expect("a valid policy");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let policy = loaded.policy;
    assert_eq!(policy.rules.len(), 3);
    assert_eq!(policy.omit_stages, vec![RR]);
    assert!(policy.omit_managed_fields);
    assert_eq!(policy.rules[0].level, NoLevel);
    assert_eq!(
        policy.rules[1].resources[0].resources,
        strings(&["configmaps", "pods/log"])
    );
    assert_eq!(policy.rules[1].omit_managed_fields, Some(false));
    assert_eq!(
        policy.rules[2].non_resource_urls,
        strings(&["/healthz*", "/version"])
    );
    assert_eq!(policy.rules[2].omit_stages, vec![RS]);
}

#[test]
fn refuses_bad_policies_naming_line_and_field() {
    let head = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n";
    // (rules text, expected error text)
    let cases = [
        (
            "  - level: Metdata\n",
            "line 4: rules[0].level: Unsupported value: \"Metdata\": supported values: \"None\", \"Metadata\", \"Request\", \"RequestResponse\"",
        ),
        ("  - verbs: [get]\n", "rules[0].level: Required value"),
        (
            "  - level: None\n  - level: Request\n    nonResourceURLs: [\"metrics\"]\n",
            "line 6: rules[1].nonResourceURLs[0]: Invalid value: \"metrics\": non-resource URL rules must begin with a '/' character",
        ),
        (
            "  - level: None\n    nonResourceURLs: [\"/a*/b\"]\n",
            "rules[0].nonResourceURLs[0]: Invalid value: \"/a*/b\": non-resource URL wildcards '*' must be the final character of the rule",
        ),
        (
            "  - level: None\n    nonResourceURLs: [\"/a\"]\n    namespaces: [\"x\"]\n",
            "rules[0].nonResourceURLs: Invalid value: [\"/a\"]: rules cannot apply to both regular resources and non-resource URLs",
        ),
        (
            "  - level: None\n    resources:\n      - group: rbac.authorization.k8s.io/v1\n",
            "rules[0].resources.group: Invalid value: \"rbac.authorization.k8s.io/v1\"",
        ),
        (
            "  - level: None\n    resources:\n      - resourceNames: [a]\n",
            "rules[0].resources.resourceNames: Invalid value: [\"a\"]: using resourceNames requires at least one resource",
        ),
        (
            "  - level: None\n    omitStages: [Done]\n",
            "line 5: rules[0].omitStages[0]: Invalid value: \"Done\": allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic",
        ),
        (
            "  - level: None\n    verbs: get\n",
            "line 5: rules[0].verbs: Invalid value: \"get\": must be a list",
        ),
    ];
    for (rules, expected) in cases {
        let text = format!("{head}{rules}");
        let error = parse_policy(&text).expect_err(rules).to_string();
        assert!(
            error.contains(expected),
            "{rules}\n got: {error}\nwant: {expected}"
        );
    }
}

#[test]
fn refuses_wrong_kind_version_empty_rules_and_non_yaml() {
    let cases = [
        (
            "apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: [{level: None}]\n",
            "line 1: apiVersion: unknown group version field",
        ),
        (
            "apiVersion: audit.k8s.io/v1\nkind: Event\nrules: [{level: None}]\n",
            "line 2: kind: Unsupported value: \"Event\"",
        ),
        (
            "apiVersion: audit.k8s.io/v1\nkind: Policy\n",
            "loaded illegal policy with 0 rules",
        ),
        (
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [\n",
            "failed decoding",
        ),
        ("- a\n", "not a mapping"),
    ];
    for (text, expected) in cases {
        let error = parse_policy(text).expect_err(text).to_string();
        assert!(
            error.contains(expected),
            "{text}\n got: {error}\nwant: {expected}"
        );
    }
}

#[test]
fn unknown_fields_are_warnings() {
    let text = "apiVersion: audit.k8s.io/v1\nkind: Policy\nmetadata:\n  name: x\nrules:\n  - level: None\n    user: [bob]\n";
    let loaded = parse_policy(text).expect("valid");
    assert_eq!(
        loaded.warnings,
        vec!["line 7: rules[0].user: unknown field, ignored".to_string()]
    );
}
