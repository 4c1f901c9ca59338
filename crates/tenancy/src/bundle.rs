//! A validated [`Tenant`] expanded into the objects of its bundle, in the order they are
//! applied: the Namespace (Pod Security labels, the ownership label, the spec it was made
//! from), the workload ServiceAccount, the ResourceQuota, the LimitRange of container request
//! defaults, the RoleBindings of admins (`admin`) and members (`edit`), the NetworkPolicies
//! (default deny both ways, DNS, the namespace itself, the allowed egress and ingress) and the
//! Kueue LocalQueue.
//!
//! Every object carries `tessera.dev/tenant: <name>` and `app.kubernetes.io/managed-by:
//! tessera-tenant`. Knows nothing of how the objects are applied, nor what is live.

use std::fmt;

use serde_json::{Map, Value, json};

use crate::spec::{Peer, Subject, Tenant};

/// The field manager of every server-side apply of a bundle.
pub const FIELD_MANAGER: &str = "tessera-tenant";
/// The ownership label: the tenant an object belongs to.
pub const TENANT_LABEL: &str = "tessera.dev/tenant";
/// The annotation on the Namespace holding the spec the bundle was made from (JSON).
pub const SPEC_ANNOTATION: &str = "tessera.dev/tenant-spec";
/// Kubernetes' recommended label naming the tool that manages an object.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The label every namespace carries with its own name (set by the API server).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// Pod Security's label prefix.
pub const POD_SECURITY_PREFIX: &str = "pod-security.kubernetes.io/";

/// The ResourceQuota's name.
pub const QUOTA_NAME: &str = "tenant-quota";
/// The LimitRange's name.
pub const LIMIT_RANGE_NAME: &str = "tenant-defaults";
/// The admins' RoleBinding.
pub const ADMINS_BINDING: &str = "tenant-admins";
/// The members' RoleBinding.
pub const MEMBERS_BINDING: &str = "tenant-members";
/// The NetworkPolicy denying all ingress and egress of the namespace's pods.
pub const DEFAULT_DENY: &str = "default-deny";
/// The NetworkPolicy allowing DNS queries to the cluster DNS.
pub const ALLOW_DNS: &str = "allow-dns";
/// The NetworkPolicy allowing traffic between the namespace's own pods.
pub const ALLOW_SAME_NAMESPACE: &str = "allow-same-namespace";
/// The NetworkPolicy of the spec's egress.
pub const ALLOW_EGRESS: &str = "allow-egress";
/// The NetworkPolicy of the spec's ingress.
pub const ALLOW_INGRESS: &str = "allow-ingress";
/// The NetworkPolicy letting the pods reach the platform's image registry (`spec.registry`).
pub const ALLOW_REGISTRY: &str = "allow-registry";
/// The registry's namespace, and the label and port it is reached by (as `tessera up`
/// publishes it: `tessera_node::registry`).
pub const REGISTRY_NAMESPACE: &str = "tessera-system";
/// The label selecting the registry, with its value.
pub const REGISTRY_SELECTOR: (&str, &str) = ("app.kubernetes.io/name", "tessera-registry");
/// The registry's port.
pub const REGISTRY_PORT: u16 = 5000;

/// A kind a bundle holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Kind {
    /// API group (empty for the core group).
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Resource (plural).
    pub plural: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
}

impl Kind {
    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    const fn new(
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        plural: &'static str,
        namespaced: bool,
    ) -> Kind {
        Kind {
            group,
            version,
            kind,
            plural,
            namespaced,
        }
    }
}

/// Namespace.
pub const NAMESPACE: Kind = Kind::new("", "v1", "Namespace", "namespaces", false);
/// ServiceAccount.
pub const SERVICE_ACCOUNT: Kind = Kind::new("", "v1", "ServiceAccount", "serviceaccounts", true);
/// ResourceQuota.
pub const RESOURCE_QUOTA: Kind = Kind::new("", "v1", "ResourceQuota", "resourcequotas", true);
/// LimitRange.
pub const LIMIT_RANGE: Kind = Kind::new("", "v1", "LimitRange", "limitranges", true);
/// RoleBinding.
pub const ROLE_BINDING: Kind = Kind::new(
    "rbac.authorization.k8s.io",
    "v1",
    "RoleBinding",
    "rolebindings",
    true,
);
/// NetworkPolicy.
pub const NETWORK_POLICY: Kind = Kind::new(
    "networking.k8s.io",
    "v1",
    "NetworkPolicy",
    "networkpolicies",
    true,
);
/// Kueue's LocalQueue, in the version Kueue stores.
pub const LOCAL_QUEUE: Kind = Kind::new(
    "kueue.x-k8s.io",
    "v1beta2",
    "LocalQueue",
    "localqueues",
    true,
);

/// Every kind a bundle may hold, in the order they are applied (the Namespace first).
pub const KINDS: [Kind; 7] = [
    NAMESPACE,
    SERVICE_ACCOUNT,
    RESOURCE_QUOTA,
    LIMIT_RANGE,
    ROLE_BINDING,
    NETWORK_POLICY,
    LOCAL_QUEUE,
];

/// Which object: kind, namespace (empty for a Namespace) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    /// Its kind.
    pub kind: Kind,
    /// Its namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl ObjectRef {
    /// The object `value` is, when its kind is one a bundle holds (matched by group and
    /// kind, any version).
    pub fn of(value: &Value) -> Option<ObjectRef> {
        let api_version = value.get("apiVersion")?.as_str()?;
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        let kind_name = value.get("kind")?.as_str()?;
        let kind = KINDS
            .into_iter()
            .find(|k| k.group == group && k.kind == kind_name)?;
        let metadata = value.get("metadata")?;
        let text = |key: &str| {
            metadata
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Some(ObjectRef {
            kind,
            namespace: if kind.namespaced {
                text("namespace")
            } else {
                String::new()
            },
            name: text("name"),
        })
    }

    /// kubectl's name for it: `networkpolicy.networking.k8s.io/default-deny`, `namespace/x`.
    pub fn kubectl_name(&self) -> String {
        let kind = self.kind.kind.to_lowercase();
        if self.kind.group.is_empty() {
            format!("{kind}/{}", self.name)
        } else {
            format!("{kind}.{}/{}", self.kind.group, self.name)
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind.kind, self.namespace, self.name)
        }
    }
}

/// The labels every object of `tenant`'s bundle carries.
pub fn ownership_labels(tenant: &Tenant) -> Map<String, Value> {
    let mut labels = Map::new();
    labels.insert(TENANT_LABEL.into(), tenant.name().into());
    labels.insert(MANAGED_BY_LABEL.into(), FIELD_MANAGER.into());
    labels
}

/// The bundle of a validated tenant, in apply order.
pub fn bundle(tenant: &Tenant) -> Vec<Value> {
    let namespace = tenant.namespace();
    let labels = ownership_labels(tenant);
    let object = |kind: Kind, name: &str, body: Value| -> Value {
        let mut object = json!({
            "apiVersion": kind.api_version(),
            "kind": kind.kind,
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
        });
        if let (Some(target), Value::Object(fields)) = (object.as_object_mut(), body) {
            target.extend(fields);
        }
        object
    };
    let mut objects = vec![namespace_object(tenant)];
    objects.push(object(
        SERVICE_ACCOUNT,
        tenant.service_account(),
        json!({"automountServiceAccountToken": false}),
    ));
    if let Some(hard) = quota_hard(tenant) {
        objects.push(object(
            RESOURCE_QUOTA,
            QUOTA_NAME,
            json!({"spec": {"hard": hard}}),
        ));
    }
    objects.push(object(
        LIMIT_RANGE,
        LIMIT_RANGE_NAME,
        json!({"spec": {"limits": [{"type": "Container", "defaultRequest": default_requests(tenant)}]}}),
    ));
    for (name, role, subjects) in [
        (ADMINS_BINDING, "admin", &tenant.spec.admins),
        (MEMBERS_BINDING, "edit", &tenant.spec.members),
    ] {
        if !subjects.is_empty() {
            objects.push(object(ROLE_BINDING, name, role_binding(role, subjects)));
        }
    }
    for (name, spec) in network_policies(tenant) {
        objects.push(object(NETWORK_POLICY, name, json!({"spec": spec})));
    }
    if let Some(queue) = &tenant.spec.cluster_queue {
        objects.push(object(
            LOCAL_QUEUE,
            tenant.local_queue(),
            json!({"spec": {"clusterQueue": queue}}),
        ));
    }
    objects
}

/// The objects as a YAML stream, one document each, as `kubectl get -o yaml` prints one.
pub fn yaml_stream(objects: &[Value]) -> Result<String, serde_saphyr::SerializeError> {
    let mut text = String::new();
    for object in objects {
        text.push_str("---\n");
        text.push_str(&serde_saphyr::to_string(object)?);
    }
    Ok(text)
}

fn namespace_object(tenant: &Tenant) -> Value {
    let mut labels = ownership_labels(tenant);
    for mode in ["enforce", "audit", "warn"] {
        labels.insert(
            format!("{POD_SECURITY_PREFIX}{mode}"),
            tenant.pod_security().into(),
        );
        labels.insert(
            format!("{POD_SECURITY_PREFIX}{mode}-version"),
            tenant.pod_security_version().into(),
        );
    }
    // The spec's own types always serialize; an empty annotation would only make `check`
    // report the namespace as unreadable.
    let spec = serde_json::to_string(tenant).unwrap_or_default();
    json!({
        "apiVersion": NAMESPACE.api_version(),
        "kind": NAMESPACE.kind,
        "metadata": {
            "name": tenant.namespace(),
            "labels": labels,
            "annotations": {SPEC_ANNOTATION: spec},
        },
    })
}

fn quota_hard(tenant: &Tenant) -> Option<Map<String, Value>> {
    let quota = tenant.spec.quota.as_ref()?;
    let mut hard = Map::new();
    for (resource, amount) in [
        ("requests.nvidia.com/gpu", &quota.gpu),
        ("requests.cpu", &quota.cpu),
        ("requests.memory", &quota.memory),
        ("pods", &quota.pods),
    ] {
        if let Some(amount) = amount {
            hard.insert(resource.into(), amount.0.clone().into());
        }
    }
    (!hard.is_empty()).then_some(hard)
}

/// Requests only, no default limits: a default limit below what a container requests would
/// make its pod invalid.
fn default_requests(tenant: &Tenant) -> Value {
    let defaults = tenant.spec.defaults.clone().unwrap_or_default();
    json!({
        "cpu": defaults.cpu.map_or(crate::spec::DEFAULT_CPU_REQUEST.to_owned(), |a| a.0),
        "memory": defaults.memory.map_or(crate::spec::DEFAULT_MEMORY_REQUEST.to_owned(), |a| a.0),
    })
}

fn role_binding(role: &str, subjects: &[Subject]) -> Value {
    let group = ROLE_BINDING.group;
    let subjects: Vec<Value> = subjects
        .iter()
        .map(|s| json!({"kind": s.kind, "apiGroup": group, "name": s.name}))
        .collect();
    json!({
        "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

fn network_policies(tenant: &Tenant) -> Vec<(&'static str, Value)> {
    let all_pods = json!({});
    let mut policies = vec![
        (
            DEFAULT_DENY,
            json!({"podSelector": all_pods, "policyTypes": ["Ingress", "Egress"]}),
        ),
        (
            ALLOW_DNS,
            json!({
                "podSelector": all_pods,
                "policyTypes": ["Egress"],
                "egress": [{
                    "to": [{
                        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: "kube-system"}},
                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                    }],
                    "ports": [
                        {"protocol": "UDP", "port": 53},
                        {"protocol": "TCP", "port": 53},
                    ],
                }],
            }),
        ),
        (
            ALLOW_SAME_NAMESPACE,
            json!({
                "podSelector": all_pods,
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"from": [{"podSelector": all_pods}]}],
                "egress": [{"to": [{"podSelector": all_pods}]}],
            }),
        ),
    ];
    if tenant.spec.registry {
        policies.push((
            ALLOW_REGISTRY,
            json!({
                "podSelector": all_pods,
                "policyTypes": ["Egress"],
                "egress": [{
                    "to": [{
                        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: REGISTRY_NAMESPACE}},
                        "podSelector": {"matchLabels": {REGISTRY_SELECTOR.0: REGISTRY_SELECTOR.1}},
                    }],
                    "ports": [{"protocol": "TCP", "port": REGISTRY_PORT}],
                }],
            }),
        ));
    }
    for (name, direction, peers, policy_type) in [
        (ALLOW_EGRESS, "egress", &tenant.spec.egress, "Egress"),
        (ALLOW_INGRESS, "ingress", &tenant.spec.ingress, "Ingress"),
    ] {
        if peers.is_empty() {
            continue;
        }
        let side = if direction == "egress" { "to" } else { "from" };
        let rules: Vec<Value> = peers.iter().map(|peer| rule(side, peer)).collect();
        policies.push((
            name,
            json!({"podSelector": all_pods, "policyTypes": [policy_type], direction: rules}),
        ));
    }
    policies
}

/// One NetworkPolicy rule: `side` (`to` or `from`) the peer, on its ports.
fn rule(side: &str, peer: &Peer) -> Value {
    let target = match (&peer.cidr, &peer.namespace) {
        (Some(cidr), _) => {
            let mut block = json!({"cidr": cidr});
            if !peer.except.is_empty() {
                block["except"] = json!(peer.except);
            }
            json!({"ipBlock": block})
        }
        (None, namespace) => {
            let mut target = json!({
                "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
            });
            if !peer.pod_selector.is_empty() {
                target["podSelector"] = json!({"matchLabels": peer.pod_selector});
            }
            target
        }
    };
    let mut rule = json!({side: [target]});
    if !peer.ports.is_empty() {
        let ports: Vec<Value> = peer
            .ports
            .iter()
            .map(|p| {
                let mut port = json!({
                    "protocol": p.protocol.as_deref().unwrap_or("TCP"),
                    "port": p.port,
                });
                if let Some(end) = p.end_port {
                    port["endPort"] = end.into();
                }
                port
            })
            .collect();
        rule["ports"] = ports.into();
    }
    rule
}
