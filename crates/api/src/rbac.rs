//! Authorization by RBAC, as Kubernetes evaluates it: ClusterRoleBindings grant cluster-wide,
//! RoleBindings grant within their namespace (to a Role or a ClusterRole); rules match verbs,
//! API groups, resources and subresources (`*`, `pods/log`, `*/scale`), resource names and
//! non-resource URLs (with `*` suffixes); ClusterRoles aggregate the rules of ClusterRoles their
//! `aggregationRule` selects; `system:masters` may do anything. Escalation and bind checks
//! keep users from granting what they do not hold. Also lists a user's rules in a namespace
//! (for SelfSubjectRulesReview and `kubectl auth can-i --list`).
//!
//! Evaluation works on a snapshot of the RBAC objects, rebuilt only when one changes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use tessera_model::json::Pointer as _;

use serde_json::{Value, json};

use crate::authn::UserInfo;
use crate::lister::Lister;
use crate::resource::Resource;

/// What a request asks to do.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`,
    /// or a special verb (`impersonate`, `bind`, `escalate`); HTTP verbs for non-resource URLs.
    pub verb: String,
    /// Whether this is a resource request (else a non-resource URL).
    pub resource_request: bool,
    /// API group.
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// Namespace ("" for cluster scope).
    pub namespace: String,
    /// Object name, if any.
    pub name: String,
    /// Path, for non-resource requests.
    pub path: String,
}

impl Attributes {
    /// A resource request: `verb` on `group`'s `resource` (and `subresource`), cluster-wide and
    /// unnamed until [`Attributes::in_namespace`] and [`Attributes::named`] say otherwise.
    pub fn resource(verb: &str, group: &str, resource: &str, subresource: &str) -> Attributes {
        Attributes {
            verb: verb.to_string(),
            resource_request: true,
            group: group.to_string(),
            resource: resource.to_string(),
            subresource: subresource.to_string(),
            ..Attributes::default()
        }
    }

    /// The same request in `namespace`.
    pub fn in_namespace(mut self, namespace: &str) -> Attributes {
        self.namespace = namespace.to_string();
        self
    }

    /// The same request for the object `name`.
    pub fn named(mut self, name: &str) -> Attributes {
        self.name = name.to_string();
        self
    }
}

/// One policy rule.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rule {
    /// Verbs.
    pub verbs: Vec<String>,
    /// API groups.
    pub api_groups: Vec<String>,
    /// Resources (and `resource/subresource`).
    pub resources: Vec<String>,
    /// Resource names.
    pub resource_names: Vec<String>,
    /// Non-resource URLs.
    pub non_resource_urls: Vec<String>,
}

fn strings(value: &Value, field: &str) -> Vec<String> {
    tessera_model::json::strings_at(value, &format!("/{field}"))
}

impl Rule {
    /// A rule from its JSON form.
    pub fn from_json(value: &Value) -> Rule {
        Rule {
            verbs: strings(value, "verbs"),
            api_groups: strings(value, "apiGroups"),
            resources: strings(value, "resources"),
            resource_names: strings(value, "resourceNames"),
            non_resource_urls: strings(value, "nonResourceURLs"),
        }
    }

    /// The JSON form used in rules reviews.
    pub fn to_json(&self) -> Value {
        let mut rule = json!({"verbs": self.verbs});
        if !self.non_resource_urls.is_empty() {
            rule["nonResourceURLs"] = json!(self.non_resource_urls);
        } else {
            rule["apiGroups"] = json!(self.api_groups);
            rule["resources"] = json!(self.resources);
            if !self.resource_names.is_empty() {
                rule["resourceNames"] = json!(self.resource_names);
            }
        }
        rule
    }

    /// Whether the rule allows a request, as upstream's `RuleAllows`.
    pub fn allows(&self, attributes: &Attributes) -> bool {
        if !self.verbs.iter().any(|v| v == "*" || *v == attributes.verb) {
            return false;
        }
        if !attributes.resource_request {
            return self.non_resource_urls.iter().any(|url| {
                url == "*"
                    || *url == attributes.path
                    || url
                        .strip_suffix('*')
                        .is_some_and(|prefix| attributes.path.starts_with(prefix))
            });
        }
        let (resource, subresource) = (
            attributes.resource.as_str(),
            attributes.subresource.as_str(),
        );
        self.api_groups
            .iter()
            .any(|g| g == "*" || *g == attributes.group)
            && self.resources.iter().any(|r| {
                r == "*"
                    || if subresource.is_empty() {
                        r == resource
                    } else {
                        r.split_once('/') == Some((resource, subresource))
                            || r.strip_prefix("*/") == Some(subresource)
                    }
            })
            && (self.resource_names.is_empty()
                || (!attributes.name.is_empty() && self.resource_names.contains(&attributes.name)))
    }
}

#[derive(Debug, Clone)]
struct Binding {
    kind: &'static str,
    name: String,
    namespace: String,
    role_kind: String,
    role_name: String,
    subjects: Vec<Value>,
    /// The referenced role's rules, resolved when the snapshot is built.
    rules: Option<Arc<RoleRules>>,
}

/// Interned names of API groups, resources and subresources: a decision hashes the request's
/// names once, and every role it checks then looks up one small integer key.
#[derive(Debug, Default)]
struct Symbols(HashMap<String, u32, foldhash::fast::RandomState>);

impl Symbols {
    fn intern(&mut self, name: &str) -> u32 {
        let next = u32::try_from(self.0.len()).unwrap_or(u32::MAX);
        *self.0.entry(name.to_string()).or_insert(next)
    }

    fn get(&self, name: &str) -> Option<u32> {
        self.0.get(name).copied()
    }

    /// The index key of a resource request; `None` when no plain rule names it.
    fn key_of(&self, attributes: &Attributes) -> Option<GrantKey> {
        if !attributes.resource_request {
            return None;
        }
        Some((
            self.get(&attributes.group)?,
            self.get(&attributes.resource)?,
            self.get(&attributes.subresource)?,
        ))
    }
}

/// Verbs and resource names a plain rule grants.
type Grant = (Vec<String>, Vec<String>);
/// (group, resource, subresource — "" for none), interned.
type GrantKey = (u32, u32, u32);
type GrantIndex = HashMap<GrantKey, Vec<Grant>, foldhash::fast::RandomState>;

/// A role's rules, with the plain ones indexed by group, resource and subresource so a
/// decision looks up instead of scanning.
#[derive(Debug)]
struct RoleRules {
    rules: Vec<Rule>,
    /// Grants of plain rules by interned (group, resource, subresource).
    indexed: GrantIndex,
    /// Rules with wildcard groups or resources, and non-resource rules: scanned.
    scanned: Vec<Rule>,
}

impl RoleRules {
    fn new(rules: Vec<Rule>, symbols: &mut Symbols) -> RoleRules {
        let mut indexed = GrantIndex::default();
        let mut scanned = Vec::new();
        for rule in &rules {
            let wildcard = !rule.non_resource_urls.is_empty()
                || rule.api_groups.iter().any(|g| g == "*")
                || rule
                    .resources
                    .iter()
                    .any(|r| r == "*" || r.starts_with("*/"));
            if wildcard {
                scanned.push(rule.clone());
                continue;
            }
            for group in &rule.api_groups {
                for resource in &rule.resources {
                    let (resource, subresource) =
                        resource.split_once('/').unwrap_or((resource, ""));
                    let key = (
                        symbols.intern(group),
                        symbols.intern(resource),
                        symbols.intern(subresource),
                    );
                    indexed
                        .entry(key)
                        .or_default()
                        .push((rule.verbs.clone(), rule.resource_names.clone()));
                }
            }
        }
        RoleRules {
            rules,
            indexed,
            scanned,
        }
    }

    /// Whether the rules allow a request whose interned index key is `key`.
    fn allows(&self, attributes: &Attributes, key: Option<GrantKey>) -> bool {
        let granted = key
            .and_then(|key| self.indexed.get(&key))
            .into_iter()
            .flatten()
            .any(|(verbs, names)| {
                verbs.iter().any(|v| v == "*" || *v == attributes.verb)
                    && (names.is_empty()
                        || (!attributes.name.is_empty() && names.contains(&attributes.name)))
            });
        granted || self.scanned.iter().any(|rule| rule.allows(attributes))
    }
}

/// Who a binding names: a user name (ServiceAccounts as their user names) or a group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum SubjectKey {
    User(String),
    Group(String),
}

#[derive(Default)]
struct Snapshot {
    symbols: Symbols,
    cluster_roles: HashMap<String, Arc<RoleRules>>,
    /// namespace → role name → rules.
    roles: HashMap<String, HashMap<String, Arc<RoleRules>>>,
    cluster_bindings: Vec<Binding>,
    role_bindings: HashMap<String, Vec<Binding>>,
    /// Who cluster bindings name → indexes into `cluster_bindings`.
    cluster_index: SubjectIndex,
    /// Per namespace: who role bindings name → indexes into that namespace's `role_bindings`.
    role_index: HashMap<String, SubjectIndex>,
}

/// Binding indexes by the user names and groups they name, looked up without allocating.
#[derive(Default)]
struct SubjectIndex {
    users: HashMap<String, Vec<usize>>,
    groups: HashMap<String, Vec<usize>>,
}

impl SubjectIndex {
    fn add(&mut self, key: SubjectKey, index: usize) {
        match key {
            SubjectKey::User(name) => self.users.entry(name).or_default().push(index),
            SubjectKey::Group(name) => self.groups.entry(name).or_default().push(index),
        }
    }

    /// Indexes of bindings naming the user or one of its groups (possibly repeated).
    fn lookup<'a>(&'a self, user: &'a UserInfo) -> impl Iterator<Item = usize> + 'a {
        self.users
            .get(user.name.as_str())
            .into_iter()
            .flatten()
            .chain(
                user.groups
                    .iter()
                    .filter_map(|g| self.groups.get(g.as_str()))
                    .flatten(),
            )
            .copied()
    }
}

fn subject_keys(binding: &Binding) -> Vec<SubjectKey> {
    binding
        .subjects
        .iter()
        .filter_map(|subject| {
            let name = subject.get("name").and_then(Value::as_str)?.to_string();
            match subject.get("kind").and_then(Value::as_str)? {
                "User" => Some(SubjectKey::User(name)),
                "Group" => Some(SubjectKey::Group(name)),
                "ServiceAccount" => {
                    let namespace = subject
                        .get("namespace")
                        .and_then(Value::as_str)
                        .filter(|n| !n.is_empty())
                        .unwrap_or(&binding.namespace);
                    Some(SubjectKey::User(format!(
                        "system:serviceaccount:{namespace}:{name}"
                    )))
                }
                _ => None,
            }
        })
        .collect()
}

fn list(objects: &dyn Lister, plural: &str) -> Vec<Value> {
    let Some(resource) = Resource::find("rbac.authorization.k8s.io", "v1", plural) else {
        return Vec::new();
    };
    objects.list(resource, None)
}

fn name_of(object: &Value) -> String {
    crate::meta::meta_str(object, "name")
        .unwrap_or_default()
        .to_string()
}

fn namespace_of(object: &Value) -> String {
    crate::meta::meta_str(object, "namespace")
        .unwrap_or_default()
        .to_string()
}

/// A ClusterRole's rules: its own, plus those of every other ClusterRole its
/// `aggregationRule` selects (as the aggregation controller would have written them).
pub fn cluster_role_rules(role: &Value, cluster_roles: &[Value]) -> Vec<Rule> {
    let mut rules = rules_of(role);
    if let Some(selectors) = role
        .at("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
    {
        for other in cluster_roles {
            let labels = tessera_model::selector::labels(other);
            if name_of(other) != name_of(role)
                && selectors
                    .iter()
                    .any(|s| tessera_model::selector::matches(Some(s), &labels))
            {
                rules.extend(rules_of(other));
            }
        }
    }
    rules
}

/// A Role's or ClusterRole's own `rules`.
pub fn rules_of(object: &Value) -> Vec<Rule> {
    object
        .get("rules")
        .and_then(Value::as_array)
        .map(|rules| rules.iter().map(Rule::from_json).collect())
        .unwrap_or_default()
}

impl Snapshot {
    fn build(objects: &dyn Lister) -> Snapshot {
        let mut snapshot = Snapshot::default();
        let cluster_roles = list(objects, "clusterroles");
        for role in &cluster_roles {
            let rules = cluster_role_rules(role, &cluster_roles);
            snapshot.cluster_roles.insert(
                name_of(role),
                Arc::new(RoleRules::new(rules, &mut snapshot.symbols)),
            );
        }
        for role in list(objects, "roles") {
            snapshot
                .roles
                .entry(namespace_of(&role))
                .or_default()
                .insert(
                    name_of(&role),
                    Arc::new(RoleRules::new(rules_of(&role), &mut snapshot.symbols)),
                );
        }
        let binding = |object: &Value, kind: &'static str| Binding {
            kind,
            name: name_of(object),
            namespace: namespace_of(object),
            role_kind: object
                .at("/roleRef/kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            role_name: object
                .at("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            subjects: object
                .get("subjects")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            rules: None,
        };
        snapshot.cluster_bindings = list(objects, "clusterrolebindings")
            .iter()
            .map(|b| binding(b, "ClusterRoleBinding"))
            .collect();
        for object in list(objects, "rolebindings") {
            let b = binding(&object, "RoleBinding");
            snapshot
                .role_bindings
                .entry(b.namespace.clone())
                .or_default()
                .push(b);
        }
        let resolve = |snapshot: &Snapshot, binding: &Binding| -> Option<Arc<RoleRules>> {
            match binding.role_kind.as_str() {
                "ClusterRole" => snapshot.cluster_roles.get(&binding.role_name).cloned(),
                _ => snapshot
                    .roles
                    .get(binding.namespace.as_str())
                    .and_then(|r| r.get(binding.role_name.as_str()))
                    .cloned(),
            }
        };
        let resolved: Vec<Option<Arc<RoleRules>>> = snapshot
            .cluster_bindings
            .iter()
            .map(|b| resolve(&snapshot, b))
            .collect();
        for (binding, rules) in snapshot.cluster_bindings.iter_mut().zip(resolved) {
            binding.rules = rules;
        }
        let resolved: HashMap<String, Vec<Option<Arc<RoleRules>>>> = snapshot
            .role_bindings
            .iter()
            .map(|(ns, bindings)| {
                (
                    ns.clone(),
                    bindings.iter().map(|b| resolve(&snapshot, b)).collect(),
                )
            })
            .collect();
        for (ns, rules) in resolved {
            if let Some(bindings) = snapshot.role_bindings.get_mut(&ns) {
                for (binding, rules) in bindings.iter_mut().zip(rules) {
                    binding.rules = rules;
                }
            }
        }
        for (index, binding) in snapshot.cluster_bindings.iter().enumerate() {
            for key in subject_keys(binding) {
                snapshot.cluster_index.add(key, index);
            }
        }
        for (namespace, bindings) in &snapshot.role_bindings {
            let index_of_namespace = snapshot.role_index.entry(namespace.clone()).or_default();
            for (index, binding) in bindings.iter().enumerate() {
                for key in subject_keys(binding) {
                    index_of_namespace.add(key, index);
                }
            }
        }
        snapshot
    }

    fn role_rules<'a>(&self, binding: &'a Binding) -> Option<&'a RoleRules> {
        binding.rules.as_deref()
    }

    /// Bindings that apply to a user in a namespace ("" for cluster scope only), found through
    /// the subject index: cluster bindings first, then the namespace's, in stored order.
    fn bindings_for<'a>(
        &'a self,
        user: &'a UserInfo,
        namespace: &'a str,
    ) -> impl Iterator<Item = &'a Binding> + 'a {
        let cluster = self
            .cluster_index
            .lookup(user)
            .filter_map(|i| self.cluster_bindings.get(i));
        let local_bindings = if namespace.is_empty() {
            None
        } else {
            self.role_bindings.get(namespace)
        };
        let local = self
            .role_index
            .get(namespace)
            .filter(|_| !namespace.is_empty())
            .into_iter()
            .flat_map(move |index| index.lookup(user))
            .filter_map(move |i| local_bindings.and_then(|b| b.get(i)));
        cluster.chain(local)
    }
}

/// The result of an authorization check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request is allowed.
    pub allowed: bool,
    /// Why (which binding allowed it), empty when denied.
    pub reason: String,
}

/// The RBAC authorizer.
#[derive(Default)]
pub struct Rbac {
    generation: Arc<AtomicU64>,
    cache: RwLock<Option<(u64, Arc<Snapshot>)>>,
}

/// The superuser group.
pub const MASTERS: &str = "system:masters";

impl Rbac {
    /// An authorizer; `generation` is bumped by every RBAC write.
    pub fn new(generation: Arc<AtomicU64>) -> Rbac {
        Rbac {
            generation,
            cache: RwLock::new(None),
        }
    }

    fn snapshot(&self, objects: &dyn Lister) -> Arc<Snapshot> {
        let generation = self.generation.load(Ordering::Acquire);
        if let Some((cached, snapshot)) = self
            .cache
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            && *cached == generation
        {
            return snapshot.clone();
        }
        let snapshot = Arc::new(Snapshot::build(objects));
        *self.cache.write().unwrap_or_else(|p| p.into_inner()) =
            Some((generation, snapshot.clone()));
        snapshot
    }

    /// Decides a request.
    pub fn authorize(
        &self,
        objects: &dyn Lister,
        user: &UserInfo,
        attributes: &Attributes,
    ) -> Decision {
        if user.groups.iter().any(|g| g == MASTERS) {
            return Decision {
                allowed: true,
                reason: format!("member of {MASTERS}"),
            };
        }
        let snapshot = self.snapshot(objects);
        let key = snapshot.symbols.key_of(attributes);
        for binding in snapshot.bindings_for(user, &attributes.namespace) {
            if snapshot
                .role_rules(binding)
                .is_some_and(|rules| rules.allows(attributes, key))
            {
                let scope = if binding.kind == "RoleBinding" {
                    format!(" in namespace \"{}\"", binding.namespace)
                } else {
                    String::new()
                };
                return Decision {
                    allowed: true,
                    reason: format!(
                        "RBAC: allowed by {} \"{}\"{scope} of {} \"{}\" to user \"{}\"",
                        binding.kind, binding.name, binding.role_kind, binding.role_name, user.name
                    ),
                };
            }
        }
        Decision {
            allowed: false,
            reason: String::new(),
        }
    }

    /// Every rule that applies to a user in a namespace.
    pub fn rules(&self, objects: &dyn Lister, user: &UserInfo, namespace: &str) -> Vec<Rule> {
        if user.groups.iter().any(|g| g == MASTERS) {
            return vec![
                Rule {
                    verbs: vec!["*".into()],
                    api_groups: vec!["*".into()],
                    resources: vec!["*".into()],
                    ..Rule::default()
                },
                Rule {
                    verbs: vec!["*".into()],
                    non_resource_urls: vec!["*".into()],
                    ..Rule::default()
                },
            ];
        }
        let snapshot = self.snapshot(objects);
        snapshot
            .bindings_for(user, namespace)
            .flat_map(|binding| {
                snapshot
                    .role_rules(binding)
                    .map(|r| r.rules.clone())
                    .unwrap_or_default()
            })
            .collect()
    }

    /// The rules of a role a binding refers to.
    pub fn role_rules(
        &self,
        objects: &dyn Lister,
        namespace: &str,
        kind: &str,
        name: &str,
    ) -> Option<Vec<Rule>> {
        let snapshot = self.snapshot(objects);
        match kind {
            "ClusterRole" => snapshot.cluster_roles.get(name).map(|r| r.rules.clone()),
            "Role" => snapshot
                .roles
                .get(namespace)
                .and_then(|r| r.get(name))
                .map(|r| r.rules.clone()),
            _ => None,
        }
    }
}

/// Whether a user's rules cover every permission a rule grants (no escalation), as upstream's
/// `validation.Covers`: each verb/group/resource/name combination must be allowed.
pub fn covers(owner: &[Rule], requested: &Rule) -> bool {
    let names: Vec<String> = if requested.resource_names.is_empty() {
        vec![String::new()]
    } else {
        requested.resource_names.clone()
    };
    for verb in &requested.verbs {
        if !requested.non_resource_urls.is_empty() {
            for url in &requested.non_resource_urls {
                let held = owner.iter().any(|rule| {
                    (rule.verbs.iter().any(|v| v == "*" || v == verb))
                        && rule.non_resource_urls.iter().any(|u| {
                            u == "*"
                                || u == url
                                || u.strip_suffix('*').is_some_and(|p| url.starts_with(p))
                        })
                });
                if !held {
                    return false;
                }
            }
            continue;
        }
        for group in &requested.api_groups {
            for resource in &requested.resources {
                for name in &names {
                    let held = owner.iter().any(|rule| {
                        rule.verbs.iter().any(|v| v == "*" || v == verb)
                            && rule.api_groups.iter().any(|g| g == "*" || g == group)
                            && rule.resources.iter().any(|r| {
                                r == "*"
                                    || r == resource
                                    || (resource.contains('/')
                                        && r.strip_prefix("*/")
                                            .is_some_and(|s| resource.ends_with(&format!("/{s}"))))
                            })
                            && (rule.resource_names.is_empty()
                                || (!name.is_empty() && rule.resource_names.contains(name)))
                    });
                    if !held {
                        return false;
                    }
                }
            }
        }
    }
    true
}

/// Upstream's Forbidden message for a denied request.
pub fn forbidden_message(user: &UserInfo, attributes: &Attributes) -> String {
    if !attributes.resource_request {
        return format!(
            "User \"{}\" cannot {} path \"{}\"",
            user.name, attributes.verb, attributes.path
        );
    }
    let resource = if attributes.subresource.is_empty() {
        attributes.resource.clone()
    } else {
        format!("{}/{}", attributes.resource, attributes.subresource)
    };
    let scope = if attributes.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{}\"", attributes.namespace)
    };
    format!(
        "User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
        user.name, attributes.verb, attributes.group
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    mod index {
        use super::*;
        use proptest::prelude::*;

        fn pick(options: &'static [&'static str]) -> impl Strategy<Value = String> {
            proptest::sample::select(options).prop_map(str::to_string)
        }

        fn a_rule() -> impl Strategy<Value = Rule> {
            (
                proptest::collection::vec(pick(&["get", "list", "*", "create"]), 1..3),
                proptest::collection::vec(pick(&["", "apps", "*"]), 1..3),
                proptest::collection::vec(
                    pick(&[
                        "pods",
                        "pods/log",
                        "*",
                        "deployments",
                        "*/scale",
                        "deployments/scale",
                    ]),
                    1..3,
                ),
                proptest::collection::vec(pick(&["a", "b"]), 0..2),
            )
                .prop_map(|(verbs, api_groups, resources, resource_names)| Rule {
                    verbs,
                    api_groups,
                    resources,
                    resource_names,
                    non_resource_urls: vec![],
                })
        }

        fn a_request() -> impl Strategy<Value = Attributes> {
            (
                pick(&["get", "list", "create", "delete"]),
                pick(&["", "apps", "batch"]),
                pick(&["pods", "deployments", "jobs"]),
                pick(&["", "log", "scale"]),
                pick(&["", "a", "c"]),
            )
                .prop_map(|(verb, group, resource, subresource, name)| Attributes {
                    verb,
                    resource_request: true,
                    group,
                    resource,
                    subresource,
                    name,
                    ..Attributes::default()
                })
        }

        proptest! {
            /// The interned index decides exactly as scanning every rule does.
            #[test]
            fn indexed_rules_decide_like_a_scan(
                rules in proptest::collection::vec(a_rule(), 0..5),
                request in a_request(),
            ) {
                let scanned = rules.iter().any(|rule| rule.allows(&request));
                let mut symbols = Symbols::default();
                let indexed = RoleRules::new(rules, &mut symbols);
                let key = symbols.key_of(&request);
                prop_assert_eq!(indexed.allows(&request, key), scanned);
            }
        }
    }

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> Rule {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect();
        Rule {
            verbs: s(verbs),
            api_groups: s(groups),
            resources: s(resources),
            resource_names: s(names),
            non_resource_urls: vec![],
        }
    }

    fn request(
        verb: &str,
        group: &str,
        resource: &str,
        subresource: &str,
        name: &str,
    ) -> Attributes {
        Attributes::resource(verb, group, resource, subresource)
            .in_namespace("team-a")
            .named(name)
    }

    #[test]
    fn rules_match_like_upstream() {
        let table = [
            (
                rule(&["get"], &[""], &["pods"], &[]),
                request("get", "", "pods", "", "p"),
                true,
            ),
            (
                rule(&["get"], &[""], &["pods"], &[]),
                request("list", "", "pods", "", ""),
                false,
            ),
            (
                rule(&["*"], &["*"], &["*"], &[]),
                request("delete", "apps", "deployments", "", "d"),
                true,
            ),
            (
                rule(&["get"], &[""], &["pods"], &[]),
                request("get", "", "pods", "log", "p"),
                false,
            ),
            (
                rule(&["get"], &[""], &["pods/log"], &[]),
                request("get", "", "pods", "log", "p"),
                true,
            ),
            (
                rule(&["update"], &["apps"], &["*/scale"], &[]),
                request("update", "apps", "deployments", "scale", "d"),
                true,
            ),
            (
                rule(&["get"], &[""], &["configmaps"], &["settings"]),
                request("get", "", "configmaps", "", "settings"),
                true,
            ),
            (
                rule(&["get"], &[""], &["configmaps"], &["settings"]),
                request("get", "", "configmaps", "", "other"),
                false,
            ),
            (
                rule(&["list"], &[""], &["configmaps"], &["settings"]),
                request("list", "", "configmaps", "", ""),
                false,
            ),
            (
                rule(&["get"], &["apps"], &["pods"], &[]),
                request("get", "", "pods", "", "p"),
                false,
            ),
        ];
        for (rule, attributes, want) in table {
            assert_eq!(rule.allows(&attributes), want, "{rule:?} vs {attributes:?}");
        }
        let urls = Rule {
            verbs: vec!["get".into()],
            non_resource_urls: vec!["/healthz".into(), "/apis/*".into()],
            ..Rule::default()
        };
        let path = |p: &str| Attributes {
            verb: "get".into(),
            path: p.into(),
            ..Attributes::default()
        };
        assert!(
            urls.allows(&path("/healthz"))
                && urls.allows(&path("/apis/apps/v1"))
                && !urls.allows(&path("/api"))
        );
    }

    #[test]
    fn coverage_prevents_escalation() {
        let owner = vec![
            rule(&["get", "list"], &[""], &["pods"], &[]),
            rule(&["*"], &["apps"], &["deployments"], &[]),
        ];
        assert!(covers(&owner, &rule(&["get"], &[""], &["pods"], &[])));
        assert!(covers(
            &owner,
            &rule(&["delete", "get"], &["apps"], &["deployments"], &["web"])
        ));
        assert!(!covers(&owner, &rule(&["delete"], &[""], &["pods"], &[])));
        assert!(
            !covers(&owner, &rule(&["get"], &["*"], &["pods"], &[])),
            "a wildcard needs a wildcard"
        );
        assert!(covers(
            &[rule(&["*"], &["*"], &["*"], &[])],
            &rule(&["*"], &["*"], &["*"], &[])
        ));
    }

    #[test]
    fn forbidden_messages_read_like_upstream() {
        let user = UserInfo::new("alice", &[]);
        assert_eq!(
            forbidden_message(&user, &request("list", "", "pods", "", "")),
            "User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"team-a\""
        );
        let mut nodes = request("get", "", "nodes", "", "n1");
        nodes.namespace.clear();
        assert_eq!(
            forbidden_message(&user, &nodes),
            "User \"alice\" cannot get resource \"nodes\" in API group \"\" at the cluster scope"
        );
    }
}
