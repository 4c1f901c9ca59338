//! What the server knows about each served resource beyond its catalog entry: its store keys,
//! selectable fields, name rules and status handling.
//!
//! Knows nothing about HTTP.

use tessera_model::kinds::{self, KindInfo, Subresource};

/// A served resource type.
#[derive(Debug, Clone, Copy)]
pub struct Resource {
    /// The catalog entry.
    pub info: &'static KindInfo,
}

/// How object names of a kind are validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// RFC 1123 subdomain: lowercase alphanumerics, `-` and `.`, at most 253 characters.
    Subdomain,
    /// RFC 1123 label: lowercase alphanumerics and `-`, at most 63 characters.
    Label,
    /// Any path segment: not `.`/`..`, no `/` or `%`.
    PathSegment,
}

impl Resource {
    /// The built-in resource at a group, version and plural name.
    pub fn find(group: &str, version: &str, plural: &str) -> Option<Resource> {
        kinds::find(group, version, plural).map(|info| Resource { info })
    }

    /// The built-in resource with a group, version and kind.
    pub fn find_kind(group: &str, version: &str, kind: &str) -> Option<Resource> {
        kinds::find_kind(group, version, kind).map(|info| Resource { info })
    }

    /// The group.
    pub fn group(&self) -> &'static str {
        self.info.group
    }

    /// The plural name.
    pub fn plural(&self) -> &'static str {
        self.info.plural
    }

    /// The kind.
    pub fn kind(&self) -> &'static str {
        self.info.kind
    }

    /// Whether objects live in namespaces.
    pub fn namespaced(&self) -> bool {
        self.info.namespaced
    }

    /// The OpenAPI schema objects of this resource are validated against.
    pub fn schema(&self) -> crate::patch::Schema<'static> {
        match &self.info.custom {
            Some(custom) => crate::patch::Schema::of(&custom.schema),
            None => crate::patch::Schema::definition(&self.info.definition),
        }
    }

    /// Whether the resource comes from a CustomResourceDefinition.
    pub fn is_custom(&self) -> bool {
        self.info.custom.is_some()
    }

    /// Whether the kind has a `/status` subresource (and so main-resource writes keep status).
    pub fn has_status(&self) -> bool {
        self.info.has(Subresource::Status)
    }

    /// The group as it appears in store keys (`core` for the core group).
    fn storage_group(&self) -> &'static str {
        if self.info.group.is_empty() {
            "core"
        } else {
            self.info.group
        }
    }

    /// The store key prefix of all objects of this resource, or of one namespace's objects.
    /// Resources stored in another's form share its keys.
    pub fn prefix(&self, namespace: Option<&str>) -> String {
        let storage = crate::convert::storage_of(*self);
        match namespace {
            Some(namespace) if self.namespaced() => {
                format!(
                    "/{}/{}/{namespace}/",
                    storage.storage_group(),
                    storage.plural()
                )
            }
            _ => format!("/{}/{}/", storage.storage_group(), storage.plural()),
        }
    }

    /// The store key of one object.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        format!("{}{name}", self.prefix(namespace))
    }

    /// How names are validated.
    pub fn name_rule(&self) -> NameRule {
        match (self.group(), self.kind()) {
            ("", "Namespace" | "Service") => NameRule::Label,
            ("rbac.authorization.k8s.io", _) | ("", "Event") | ("events.k8s.io", _) => {
                NameRule::PathSegment
            }
            _ => NameRule::Subdomain,
        }
    }

    /// Field paths a field selector may use.
    pub fn selectable_fields(&self) -> &'static [&'static str] {
        match (self.group(), self.kind()) {
            ("", "Pod") => &[
                "metadata.name",
                "metadata.namespace",
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ],
            ("", "Event") => &[
                "metadata.name",
                "metadata.namespace",
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
            ],
            ("events.k8s.io", "Event") => &[
                "metadata.name",
                "metadata.namespace",
                "regarding.kind",
                "regarding.namespace",
                "regarding.name",
                "regarding.uid",
                "reason",
                "type",
                "reportingController",
            ],
            ("", "Node") => &["metadata.name", "spec.unschedulable"],
            ("", "Namespace") => &["metadata.name", "status.phase"],
            ("", "Secret") => &["metadata.name", "metadata.namespace", "type"],
            ("batch", "Job") => &["metadata.name", "metadata.namespace", "status.successful"],
            ("apps", "ReplicaSet") => &["metadata.name", "metadata.namespace", "status.replicas"],
            ("resource.k8s.io", "ResourceSlice") => {
                &["metadata.name", "spec.nodeName", "spec.driver"]
            }
            _ => &["metadata.name", "metadata.namespace"],
        }
    }
}

/// Checks a name against a rule; returns what is wrong.
pub fn check_name(name: &str, rule: NameRule) -> Option<String> {
    let dns_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    match rule {
        NameRule::PathSegment => {
            if name == "." || name == ".." {
                Some(format!("may not be '{name}'"))
            } else if name.contains('/') || name.contains('%') {
                Some("may not contain '/' or '%'".into())
            } else {
                None
            }
        }
        NameRule::Label => {
            let ok = name.len() <= 63
                && name.starts_with(dns_char)
                && name.ends_with(dns_char)
                && name.chars().all(|c| dns_char(c) || c == '-');
            (!ok).then(|| {
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".into()
            })
        }
        NameRule::Subdomain => {
            let ok = name.len() <= 253
                && name.split('.').all(|part| {
                    !part.is_empty()
                        && part.starts_with(dns_char)
                        && part.ends_with(dns_char)
                        && part.chars().all(|c| dns_char(c) || c == '-')
                });
            (!ok).then(|| {
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into()
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_by_rule() {
        let table = [
            ("web-1", NameRule::Label, true),
            ("Web", NameRule::Label, false),
            ("-web", NameRule::Label, false),
            ("a.b", NameRule::Label, false),
            ("a.b", NameRule::Subdomain, true),
            ("a..b", NameRule::Subdomain, false),
            ("system:node", NameRule::Subdomain, false),
            ("system:node", NameRule::PathSegment, true),
            ("a/b", NameRule::PathSegment, false),
            ("..", NameRule::PathSegment, false),
        ];
        for (name, rule, ok) in table {
            assert_eq!(check_name(name, rule).is_none(), ok, "{name} {rule:?}");
        }
        assert!(check_name(&"a".repeat(64), NameRule::Label).is_some());
    }

    #[test]
    fn keys_separate_namespaces_and_groups() {
        let pods = Resource::find("", "v1", "pods").unwrap();
        assert_eq!(pods.key(Some("ns"), "p"), "/core/pods/ns/p");
        assert_eq!(pods.prefix(None), "/core/pods/");
        let nodes = Resource::find("", "v1", "nodes").unwrap();
        assert_eq!(nodes.key(Some("ignored"), "n1"), "/core/nodes/n1");
        let deployments = Resource::find("apps", "v1", "deployments").unwrap();
        assert_eq!(deployments.prefix(Some("a")), "/apps/deployments/a/");
    }
}
