//! The Tenant spec (`tessera.dev/v1alpha1`, kind `Tenant`): what a platform engineer writes
//! to give a team a namespace, read from YAML or built from flags, and checked field by field
//! with errors that name the field and, for a file, its line.
//!
//! Owns the spec's shape, its defaults and its validation (Kubernetes' name, label and
//! quantity rules; Pod Security's level and version syntax). Knows nothing of the objects the
//! spec becomes ([`crate::bundle`]) nor of any cluster.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use tessera_api::meta::{check_label_value, check_qualified_name};
use tessera_api::resource::{NameRule, check_name};
use tessera_model::net::Ipv4Cidr;
use tessera_model::quantity::Quantity;

/// The spec's `apiVersion`.
pub const API_VERSION: &str = "tessera.dev/v1alpha1";
/// The spec's `kind`.
pub const KIND: &str = "Tenant";
/// The LocalQueue's name when the spec names none: Kueue's default LocalQueue, which Kueue
/// (`LocalQueueDefaulting`) assigns to Jobs that name no queue.
pub const DEFAULT_LOCAL_QUEUE: &str = "default";
/// The workload ServiceAccount's name when the spec names none.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "workload";
/// The container CPU request a LimitRange gives containers that set none.
pub const DEFAULT_CPU_REQUEST: &str = "100m";
/// The container memory request a LimitRange gives containers that set none.
pub const DEFAULT_MEMORY_REQUEST: &str = "128Mi";

/// A Tenant document.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tenant {
    /// `tessera.dev/v1alpha1`.
    pub api_version: String,
    /// `Tenant`.
    pub kind: String,
    /// The tenant's name.
    pub metadata: Metadata,
    /// What the tenant gets.
    #[serde(default)]
    pub spec: TenantSpec,
}

/// A Tenant's metadata: its name only.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    /// The tenant's name (a DNS label): the ownership label's value and the default namespace.
    #[serde(default)]
    pub name: String,
}

/// What a tenant gets.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantSpec {
    /// The namespace (default: the tenant's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The Pod Security Standard the namespace enforces (`restricted` unless set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_security: Option<String>,
    /// The version of that standard (`latest` unless set, else `v1.N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_security_version: Option<String>,
    /// The namespace's ResourceQuota; none without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<Quota>,
    /// The requests a container that sets none gets (LimitRange `defaultRequest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defaults: Option<Defaults>,
    /// The Kueue ClusterQueue the tenant's LocalQueue submits to; no LocalQueue without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_queue: Option<String>,
    /// The LocalQueue's name (default `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_queue: Option<String>,
    /// Who administers the namespace (ClusterRole `admin`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admins: Vec<Subject>,
    /// Who works in it (ClusterRole `edit`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<Subject>,
    /// Where the tenant's pods may connect to besides their own namespace and the cluster DNS.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<Peer>,
    /// Who may connect to the tenant's pods besides their own namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ingress: Vec<Peer>,
    /// Whether the tenant's pods may pull from and push to the platform's image registry
    /// (`registry.tessera-system.svc`, port 5000): NetworkPolicy `allow-registry`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub registry: bool,
    /// The workload ServiceAccount's name (default `workload`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
}

/// The namespace's quota: total requests of its pods.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Quota {
    /// GPUs (`requests.nvidia.com/gpu`), a whole number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<Amount>,
    /// CPU (`requests.cpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Amount>,
    /// Memory (`requests.memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Amount>,
    /// Pods (`pods`), a whole number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<Amount>,
}

/// Container request defaults.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Defaults {
    /// CPU (default `100m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Amount>,
    /// Memory (default `128Mi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Amount>,
}

/// A quantity as written: `8`, `0.5` or `256Gi` (numbers are taken as their text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Amount(pub String);

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Amount;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quantity such as 8, 0.5 or 256Gi")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Amount, E> {
                Ok(Amount(v.to_owned()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Amount, E> {
                Ok(Amount(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Amount, E> {
                Ok(Amount(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Amount, E> {
                Ok(Amount(v.to_string()))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An RBAC subject: a user or a group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Subject {
    /// `User` or `Group`.
    pub kind: String,
    /// The user's or group's name, as the authenticator reports it.
    pub name: String,
}

impl Subject {
    /// A subject as a command-line flag writes it: `user:NAME` or `group:NAME` (the kind in
    /// any case).
    pub fn from_flag(text: &str) -> Result<Subject, String> {
        let (kind, name) = text.split_once(':').unwrap_or_default();
        let kind = match kind.to_ascii_lowercase().as_str() {
            "user" => "User",
            "group" => "Group",
            _ => "",
        };
        if kind.is_empty() || name.trim().is_empty() {
            return Err(format!("{text:?} must be user:NAME or group:NAME"));
        }
        Ok(Subject {
            kind: kind.to_owned(),
            name: name.to_owned(),
        })
    }
}

/// The other end of an allowed connection: an IP block, or pods of a namespace.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Peer {
    /// An IPv4 block (`10.0.0.0/8`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    /// Blocks inside `cidr` left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub except: Vec<String>,
    /// A namespace (by its `kubernetes.io/metadata.name` label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The labels the namespace's pods must carry (all of its pods without it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_selector: BTreeMap<String, String>,
    /// The ports (every port without them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<Port>,
}

/// A port, or a range of ports, of one protocol.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Port {
    /// The port number.
    pub port: u32,
    /// The last port of a range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_port: Option<u32>,
    /// `TCP` (the default), `UDP` or `SCTP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

/// What is wrong with a spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The document is not YAML of the spec's shape (the parser's message names the line).
    #[error("{0}")]
    Parse(String),
    /// A field's value is invalid.
    #[error("{}{field}: {message}", line.map(|l| format!("line {l}: ")).unwrap_or_default())]
    Invalid {
        /// The field's path (`spec.egress[1].cidr`).
        field: String,
        /// What is wrong.
        message: String,
        /// The field's line in the document it was read from.
        line: Option<usize>,
    },
}

/// Pod Security's `ParseLevel`, with upstream's message.
pub fn parse_level(value: &str) -> Result<(), String> {
    tessera_podsecurity::api::parse_level(value)
        .map(|_| ())
        .map_err(|(_, message)| message)
}

/// Pod Security's `ParseVersion`: `latest` or `v1.N` (no leading zero), with upstream's
/// message.
pub fn parse_version(value: &str) -> Result<(), String> {
    tessera_podsecurity::api::parse_version(value)
        .map(|_| ())
        .map_err(|(_, message)| message)
}

/// Checks a tenant's name as the command line gives it (`tenant check NAME`): a DNS label,
/// as `metadata.name` must be.
pub fn check_tenant_name(name: &str) -> Result<(), String> {
    match check_name(name, NameRule::Label) {
        Some(message) => Err(format!("tenant name {name:?}: {message}")),
        None => Ok(()),
    }
}

/// The line of `field` in `text`, or of the nearest enclosing field that can be found (a key
/// inside a flow mapping, `- {kind: x}`, is found by its item's line).
fn locate(text: &str, field: &str) -> Option<usize> {
    let mut path = field;
    loop {
        if let Some(line) = tessera_model::yaml_location::line_of(text, path) {
            return Some(line);
        }
        let cut = path.rfind(['.', '['])?;
        path = &path[..cut];
    }
}

/// Namespaces no tenant may take: the cluster's own.
fn reserved_namespace(name: &str) -> bool {
    name == "default" || name.starts_with("kube-")
}

impl Tenant {
    /// A Tenant named `name` with `spec`.
    pub fn new(name: &str, spec: TenantSpec) -> Tenant {
        Tenant {
            api_version: API_VERSION.to_owned(),
            kind: KIND.to_owned(),
            metadata: Metadata {
                name: name.to_owned(),
            },
            spec,
        }
    }

    /// Parses and validates a Tenant document; errors name the field and its line.
    pub fn parse(text: &str) -> Result<Tenant, SpecError> {
        let tenant: Tenant =
            serde_saphyr::from_str(text).map_err(|e| SpecError::Parse(e.to_string()))?;
        tenant.validate().map_err(|error| match error {
            SpecError::Invalid { field, message, .. } => SpecError::Invalid {
                line: locate(text, &field),
                field,
                message,
            },
            other => other,
        })?;
        Ok(tenant)
    }

    /// The tenant's name.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// The tenant's namespace.
    pub fn namespace(&self) -> &str {
        self.spec
            .namespace
            .as_deref()
            .unwrap_or(&self.metadata.name)
    }

    /// The enforced Pod Security level.
    pub fn pod_security(&self) -> &str {
        self.spec.pod_security.as_deref().unwrap_or("restricted")
    }

    /// The Pod Security version.
    pub fn pod_security_version(&self) -> &str {
        self.spec
            .pod_security_version
            .as_deref()
            .unwrap_or("latest")
    }

    /// The LocalQueue's name.
    pub fn local_queue(&self) -> &str {
        self.spec
            .local_queue
            .as_deref()
            .unwrap_or(DEFAULT_LOCAL_QUEUE)
    }

    /// The workload ServiceAccount's name.
    pub fn service_account(&self) -> &str {
        self.spec
            .service_account
            .as_deref()
            .unwrap_or(DEFAULT_SERVICE_ACCOUNT)
    }

    /// Checks every field; the first problem found is returned, its field a path from the
    /// document's root.
    pub fn validate(&self) -> Result<(), SpecError> {
        let mut problems = Problems::default();
        if self.api_version != API_VERSION {
            problems.add(
                "apiVersion",
                format!("must be {API_VERSION}, got {:?}", self.api_version),
            );
        }
        if self.kind != KIND {
            problems.add("kind", format!("must be {KIND}, got {:?}", self.kind));
        }
        if self.metadata.name.is_empty() {
            problems.add("metadata.name", "is required".to_owned());
        } else {
            problems.name("metadata.name", &self.metadata.name, NameRule::Label);
        }
        let spec = &self.spec;
        if let Some(namespace) = &spec.namespace {
            problems.name("spec.namespace", namespace, NameRule::Label);
        }
        if reserved_namespace(self.namespace()) {
            let field = if spec.namespace.is_some() {
                "spec.namespace"
            } else {
                "metadata.name"
            };
            problems.add(
                field,
                format!(
                    "{:?} is one of the cluster's own namespaces (default, kube-*); a tenant \
                     cannot take it",
                    self.namespace()
                ),
            );
        }
        if let Some(level) = &spec.pod_security {
            problems.check("spec.podSecurity", parse_level(level));
        }
        if let Some(version) = &spec.pod_security_version {
            problems.check("spec.podSecurityVersion", parse_version(version));
        }
        if let Some(quota) = &spec.quota {
            problems.amount("spec.quota.gpu", quota.gpu.as_ref(), true);
            problems.amount("spec.quota.cpu", quota.cpu.as_ref(), false);
            problems.amount("spec.quota.memory", quota.memory.as_ref(), false);
            problems.amount("spec.quota.pods", quota.pods.as_ref(), true);
        }
        if let Some(defaults) = &spec.defaults {
            problems.amount("spec.defaults.cpu", defaults.cpu.as_ref(), false);
            problems.amount("spec.defaults.memory", defaults.memory.as_ref(), false);
        }
        if let Some(queue) = &spec.cluster_queue {
            problems.name("spec.clusterQueue", queue, NameRule::Subdomain);
        }
        if let Some(queue) = &spec.local_queue {
            problems.name("spec.localQueue", queue, NameRule::Label);
            if spec.cluster_queue.is_none() {
                problems.add(
                    "spec.localQueue",
                    "needs spec.clusterQueue, the ClusterQueue it submits to".to_owned(),
                );
            }
        }
        if let Some(account) = &spec.service_account {
            problems.name("spec.serviceAccount", account, NameRule::Subdomain);
        }
        problems.subjects("spec.admins", &spec.admins);
        problems.subjects("spec.members", &spec.members);
        problems.peers("spec.egress", &spec.egress);
        problems.peers("spec.ingress", &spec.ingress);
        problems.first()
    }
}

/// Problems found so far, in document order.
#[derive(Default)]
struct Problems(Vec<(String, String)>);

impl Problems {
    fn add(&mut self, field: &str, message: String) {
        self.0.push((field.to_owned(), message));
    }

    fn check(&mut self, field: &str, result: Result<(), String>) {
        if let Err(message) = result {
            self.add(field, message);
        }
    }

    fn name(&mut self, field: &str, value: &str, rule: NameRule) {
        if let Some(message) = check_name(value, rule) {
            self.add(field, format!("{value:?}: {message}"));
        }
    }

    fn amount(&mut self, field: &str, amount: Option<&Amount>, whole: bool) {
        let Some(Amount(text)) = amount else {
            return;
        };
        match text.parse::<Quantity>() {
            Err(_) => self.add(
                field,
                format!("{text:?} is not a quantity (e.g. 8, 500m, 256Gi)"),
            ),
            Ok(q) if q.nanos() < 0 => self.add(field, format!("{text:?} must not be negative")),
            Ok(q) if whole && q.nanos() % 1_000_000_000 != 0 => {
                self.add(field, format!("{text:?} must be a whole number"));
            }
            Ok(_) => {}
        }
    }

    fn subjects(&mut self, field: &str, subjects: &[Subject]) {
        let mut seen = std::collections::BTreeSet::new();
        for (i, subject) in subjects.iter().enumerate() {
            if !matches!(subject.kind.as_str(), "User" | "Group") {
                self.add(
                    &format!("{field}[{i}].kind"),
                    format!("must be User or Group, got {:?}", subject.kind),
                );
            }
            if subject.name.trim().is_empty() {
                self.add(&format!("{field}[{i}].name"), "is required".to_owned());
            }
            if !seen.insert(subject) {
                self.add(
                    &format!("{field}[{i}]"),
                    format!("{} {:?} is listed twice", subject.kind, subject.name),
                );
            }
        }
    }

    fn peers(&mut self, field: &str, peers: &[Peer]) {
        for (i, peer) in peers.iter().enumerate() {
            let at = format!("{field}[{i}]");
            match (&peer.cidr, &peer.namespace) {
                (Some(_), Some(_)) => self.add(
                    &at,
                    "sets both cidr and namespace; an entry is one or the other".to_owned(),
                ),
                (None, None) => self.add(&at, "needs cidr or namespace".to_owned()),
                (Some(cidr), None) => self.cidr(&at, cidr, &peer.except, &peer.pod_selector),
                (None, Some(namespace)) => {
                    self.name(&format!("{at}.namespace"), namespace, NameRule::Label);
                    if !peer.except.is_empty() {
                        self.add(&format!("{at}.except"), "needs cidr".to_owned());
                    }
                    for (key, value) in &peer.pod_selector {
                        // The key may hold dots, so the field is the selector itself.
                        let selector = format!("{at}.podSelector");
                        if let Some(message) = check_qualified_name(key) {
                            self.add(&selector, format!("key {key:?}: {message}"));
                        }
                        if let Some(message) = check_label_value(value) {
                            self.add(&selector, format!("{key}={value:?}: {message}"));
                        }
                    }
                }
            }
            for (p, port) in peer.ports.iter().enumerate() {
                self.port(&format!("{at}.ports[{p}]"), port);
            }
        }
    }

    fn cidr(
        &mut self,
        at: &str,
        cidr: &str,
        except: &[String],
        pod_selector: &BTreeMap<String, String>,
    ) {
        if !pod_selector.is_empty() {
            self.add(
                &format!("{at}.podSelector"),
                "needs namespace (an IP block has no pods to select)".to_owned(),
            );
        }
        let block = match cidr.parse::<Ipv4Cidr>() {
            Ok(block) => block,
            Err(message) => return self.add(&format!("{at}.cidr"), message),
        };
        for (e, text) in except.iter().enumerate() {
            let field = format!("{at}.except[{e}]");
            match text.parse::<Ipv4Cidr>() {
                Err(message) => self.add(&field, message),
                Ok(inner) if !(block.overlaps(&inner) && inner.prefix() > block.prefix()) => {
                    self.add(&field, format!("{text:?} must be strictly within {cidr}"));
                }
                Ok(_) => {}
            }
        }
    }

    fn port(&mut self, at: &str, port: &Port) {
        if !(1..=65535).contains(&port.port) {
            self.add(
                &format!("{at}.port"),
                format!("{} must be between 1 and 65535", port.port),
            );
        }
        if let Some(end) = port.end_port
            && !(port.port..=65535).contains(&end)
        {
            self.add(
                &format!("{at}.endPort"),
                format!("{end} must be between port ({}) and 65535", port.port),
            );
        }
        if let Some(protocol) = &port.protocol
            && !matches!(protocol.as_str(), "TCP" | "UDP" | "SCTP")
        {
            self.add(
                &format!("{at}.protocol"),
                format!("must be TCP, UDP or SCTP, got {protocol:?}"),
            );
        }
    }

    fn first(self) -> Result<(), SpecError> {
        match self.0.into_iter().next() {
            None => Ok(()),
            Some((field, message)) => Err(SpecError::Invalid {
                field,
                message,
                line: None,
            }),
        }
    }
}
